"""An OpenVLA-shaped folder written by the tests, whose remote code is a STAND-IN.

A real OpenVLA folder brings its authors' ``configuration_prismatic.py`` / ``modeling_prismatic.py``;
that code cannot be committed here, and it needs ``timm`` 0.9.x. The files written below stand in
for it: a small model with the same *interface* and the same *layout of the sequence* (image patch
embeddings inserted after ``<bos>``, a Llama language model over the result, vocabulary logits out,
``config.json`` with ``model_type: openvla``, ``auto_map``, ``norm_stats``, ``n_action_bins``,
``text_config`` padded by ``pad_to_multiple_of``) written for this test suite. It checks vla-rl's
loading path (``trust_remote_code``, local files only), its tokenisation and its maths, not
OpenVLA's network: ``tests/openvla/test_openvla_reference.py`` compares against OpenVLA's own code.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from tiny_tokenizer import VOCAB_SIZE, build_tokenizer

CONFIG_CODE = """
from transformers import LlamaConfig, PretrainedConfig


class OpenVLAConfig(PretrainedConfig):
    model_type = "openvla"

    def __init__(self, norm_stats=None, n_action_bins=256, text_config=None, image_size=16,
                 patch_size=8, vision_dim=8, pad_to_multiple_of=64, **kwargs):
        self.norm_stats = norm_stats
        self.n_action_bins = n_action_bins
        self.image_size = image_size
        self.patch_size = patch_size
        self.vision_dim = vision_dim
        self.pad_to_multiple_of = pad_to_multiple_of
        if isinstance(text_config, dict):
            text_config = LlamaConfig(**text_config)
        self.text_config = text_config if text_config is not None else LlamaConfig()
        super().__init__(**kwargs)
"""

MODEL_CODE = """
import torch
from torch import nn
from transformers import LlamaForCausalLM, PreTrainedModel

from .configuration_prismatic import OpenVLAConfig


class OpenVLAForActionPrediction(PreTrainedModel):
    config_class = OpenVLAConfig
    base_model_prefix = "standin"

    def __init__(self, config):
        super().__init__(config)
        hidden = config.text_config.hidden_size
        self.patches = nn.Conv2d(3, config.vision_dim, config.patch_size, stride=config.patch_size)
        self.projector = nn.Sequential(
            nn.Linear(config.vision_dim, hidden), nn.GELU(), nn.Linear(hidden, hidden)
        )
        self.language_model = LlamaForCausalLM(config.text_config)
        self.post_init()

    def get_input_embeddings(self):
        return self.language_model.get_input_embeddings()

    def forward(self, input_ids=None, attention_mask=None, pixel_values=None, output_hidden_states=None,
                return_dict=None, **kwargs):
        image = self.projector(self.patches(pixel_values).flatten(2).transpose(1, 2))
        text = self.get_input_embeddings()(input_ids)
        embeds = torch.cat([text[:, :1], image, text[:, 1:]], dim=1)
        ones = attention_mask.new_ones(image.shape[:2])
        mask = torch.cat([attention_mask[:, :1], ones, attention_mask[:, 1:]], dim=1)
        return self.language_model(inputs_embeds=embeds, attention_mask=mask,
                                   output_hidden_states=output_hidden_states, return_dict=True)
"""

NORM_STATS = {
    "bridge_orig": {
        "action": {
            "q01": [-0.02, -0.04, -0.03, -0.1, -0.1, -0.2, 0.0],
            "q99": [0.03, 0.04, 0.05, 0.1, 0.1, 0.2, 1.0],
            "mask": [True, True, True, True, True, True, False],
        }
    },
    "libero_spatial": {
        "action": {
            "q01": [-0.7, -0.6, -0.9, -0.1, -0.2, -0.3, -1.0],
            "q99": [0.9, 0.8, 0.9, 0.1, 0.2, 0.3, 1.0],
        }
    },
}
PAD_TO_MULTIPLE = 64
IMAGE_SIZE = 16


def write_standin_folder(directory: Path, norm_stats: dict | None = None, seed: int = 0) -> Path:
    """A tiny OpenVLA-shaped folder (stand-in code, random weights) in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "configuration_prismatic.py").write_text(CONFIG_CODE)
    (directory / "modeling_prismatic.py").write_text(MODEL_CODE)
    build_tokenizer(directory)
    text_config = {
        "vocab_size": VOCAB_SIZE + PAD_TO_MULTIPLE,
        "hidden_size": 16,
        "intermediate_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "max_position_embeddings": 128,
        "pad_token_id": VOCAB_SIZE,
    }
    config = {
        "model_type": "openvla",
        "architectures": ["OpenVLAForActionPrediction"],
        "auto_map": {
            "AutoConfig": "configuration_prismatic.OpenVLAConfig",
            "AutoModelForVision2Seq": "modeling_prismatic.OpenVLAForActionPrediction",
        },
        "norm_stats": NORM_STATS if norm_stats is None else norm_stats,
        "n_action_bins": 256,
        "pad_to_multiple_of": PAD_TO_MULTIPLE,
        "image_size": IMAGE_SIZE,
        "patch_size": 8,
        "vision_dim": 8,
        "text_config": text_config,
    }
    (directory / "config.json").write_text(json.dumps(config, indent=2))
    preprocessor = {
        "image_resize_strategy": "letterbox",
        "input_sizes": [[3, IMAGE_SIZE, IMAGE_SIZE]],
        "interpolations": ["bicubic"],
        "means": [[0.5, 0.5, 0.5]],
        "stds": [[0.5, 0.5, 0.5]],
        "use_fused_vision_backbone": False,
    }
    (directory / "preprocessor_config.json").write_text(json.dumps(preprocessor, indent=2))
    _write_weights(directory, seed)
    return directory


def _write_weights(directory: Path, seed: int) -> None:
    """Random weights saved by the stand-in class itself (loaded through the remote-code path)."""
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    model_class = get_class_from_dynamic_module(
        "modeling_prismatic.OpenVLAForActionPrediction", str(directory), local_files_only=True
    )
    config_class = model_class.config_class
    config = config_class(
        **{
            k: v
            for k, v in json.loads((directory / "config.json").read_text()).items()
            if k not in ("model_type", "architectures", "auto_map")
        }
    )
    torch.manual_seed(seed)
    model = model_class(config)
    saved_config = (directory / "config.json").read_text()
    model.save_pretrained(str(directory))
    (directory / "config.json").write_text(saved_config)
