"""Reference side of the SmolVLA parity test: run with LeRobot 0.4's python (.venv-lerobot), offline.

Usage: ``smolvla_reference.py OUT_DIR VARIANT`` (a name of ``VARIANTS``). Writes, under OUT_DIR:

* ``vlm/``: a tiny SmolVLM backbone description (``config.json``, a word-level tokenizer built here
  and the SmolVLM processor files): what ``SmolVLAConfig.vlm_model_name`` names. A real user's folder
  names the hub id ``HuggingFaceTB/SmolVLM2-500M-Video-Instruct`` here instead; vla-rl reads the
  backbone's config and tokenizer from a local copy of it (``policy.smolvla_vlm_dir``).
* ``policy/``: a randomly initialised SmolVLA built by LeRobot's own classes from that backbone
  (``load_vlm_weights=False``), saved by LeRobot's ``save_pretrained`` with its pre/post-processor
  pipelines (the normalisation statistics in their safetensors files).
* ``reference.npz``: a raw observation batch (uint8 HWC images, state, instructions), the initial
  noise, the action chunk LeRobot's ``predict_action_chunk`` returns through its own processors, and
  the flow-matching losses of ``forward`` for a raw action chunk with fixed noise and time.

The policy is loaded back from its folder (``from_pretrained``) before it runs, as a user's would be.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from lerobot.configs.types import FeatureType, NormalizationMode, PolicyFeature
from lerobot.envs.utils import preprocess_observation
from lerobot.policies.smolvla.configuration_smolvla import SmolVLAConfig
from lerobot.policies.smolvla.modeling_smolvla import SmolVLAPolicy
from lerobot.policies.smolvla.processor_smolvla import make_smolvla_pre_post_processors
from lerobot.processor import PolicyProcessorPipeline
from lerobot.processor.converters import policy_action_to_transition, transition_to_policy_action
from tokenizers import Tokenizer, normalizers, pre_tokenizers
from tokenizers.models import WordLevel
from transformers import (
    LlamaConfig,
    PreTrainedTokenizerFast,
    SmolVLMConfig,
    SmolVLMImageProcessor,
    SmolVLMProcessor,
    SmolVLMVideoProcessor,
)

SEED = 7
BATCH = 3


@dataclass(frozen=True)
class Robot:
    """What the policy's robot has: its features in the saved folder and in the raw batch."""

    cameras: dict[str, tuple[int, int]]
    """Camera name -> raw (height, width)."""
    state_dim: int
    action_dim: int


@dataclass(frozen=True)
class Backbone:
    """Sizes of the SmolVLM backbone folder a variant writes."""

    text: dict[str, object]
    """``LlamaConfig`` values of the text model (the vocabulary comes from the tokenizer)."""
    vision: dict[str, object]
    """``SmolVLMVisionConfig`` values (``image_size`` is the variant's)."""
    scale_factor: int
    """The connector's pixel shuffle: image tokens = (image_size / patch_size / scale_factor)^2."""


@dataclass(frozen=True)
class Variant:
    """One reference model: LeRobot SmolVLA settings, its robot and backbone, and its sizes."""

    settings: dict[str, object]
    """``SmolVLAConfig`` values beyond the shared ones."""
    robot: Robot
    backbone: Backbone
    image_size: int = 32
    """``resize_imgs_with_padding`` side and the vision tower's ``image_size``."""
    chunk: int = 6
    num_steps: int = 5


TWO_CAMERAS = Robot({"top": (24, 32), "wrist": (30, 20)}, state_dim=8, action_dim=7)
"""Neither camera is square or the model's size, so resize-with-pad pads both ways."""
REACH = Robot({"front": (64, 64)}, state_dim=24, action_dim=4)
"""vla-rl's MuJoCo ``reach`` with one 64-pixel camera: a folder an RL run on that env can start from."""
TINY = Backbone(
    text={
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 6,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
    },
    vision={
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "patch_size": 8,
    },
    scale_factor=2,
)
"""6 text layers of width 64 (4 query heads sharing 2 key/value heads), a 2-layer vision tower."""
TINY_WIDE_GROUPS = Backbone(
    text={
        "hidden_size": 48,
        "intermediate_size": 96,
        "num_hidden_layers": 6,
        "num_attention_heads": 6,
        "num_key_value_heads": 2,
        "head_dim": 6,
    },
    vision={
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "patch_size": 4,
    },
    scale_factor=4,
)
"""3 query heads per key/value head, heads of 6 (not width / heads = 8), SmolVLM2's pixel shuffle of 4."""
SMOLVLM2_500M = Backbone(
    text={
        "hidden_size": 960,
        "intermediate_size": 2560,
        "num_hidden_layers": 32,
        "num_attention_heads": 15,
        "num_key_value_heads": 5,
        "head_dim": 64,
        "rope_theta": 100000.0,
        "max_position_embeddings": 8192,
    },
    vision={
        "hidden_size": 768,
        "intermediate_size": 3072,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "patch_size": 16,
    },
    scale_factor=4,
)
"""The sizes of SmolVLA's default backbone, HuggingFaceTB/SmolVLM2-500M-Video-Instruct (random weights;
its vocabulary is the local tokenizer's)."""
INSTRUCTIONS = [
    "pick up the red cube",
    "open the top drawer slowly",
    "push the blue block to the left of the red cube next to the open drawer",
]
"""The last one is longer than ``tokenizer_max_length`` tokens: it is truncated (its newline too)."""
DEFAULT_MAPPING = {
    "VISUAL": NormalizationMode.IDENTITY,
    "STATE": NormalizationMode.MEAN_STD,
    "ACTION": NormalizationMode.MIN_MAX,
}
VARIANTS: dict[str, Variant] = {
    "interleaved": Variant(
        {"num_vlm_layers": 4, "self_attn_every_n_layers": 2, "normalization_mapping": DEFAULT_MAPPING},
        TWO_CAMERAS,
        TINY,
    ),
    "skipping": Variant(
        {
            "num_vlm_layers": 4,
            "num_expert_layers": 2,
            "self_attn_every_n_layers": -1,
            "expert_width_multiplier": 0.5,
            "pad_language_to": "max_length",
            "normalization_mapping": {
                "VISUAL": NormalizationMode.MEAN_STD,
                "STATE": NormalizationMode.QUANTILES,
                "ACTION": NormalizationMode.QUANTILE10,
            },
        },
        TWO_CAMERAS,
        TINY_WIDE_GROUPS,
    ),
    "reach": Variant({"num_vlm_layers": 2, "self_attn_every_n_layers": 2}, REACH, TINY),
    "full": Variant(
        {"normalization_mapping": DEFAULT_MAPPING},
        Robot({"top": (480, 640), "wrist": (240, 320)}, state_dim=6, action_dim=6),
        SMOLVLM2_500M,
        image_size=512,
        chunk=50,
        num_steps=10,
    ),
}
"""``interleaved``: SmolVLA's default layout (4 of the 6 backbone layers kept, an expert layer per VLM
layer, joint attention every 2nd layer, cross-attention between). ``skipping``: a 2-layer expert that
skips every other VLM layer, cross-attention only, a narrower expert, instructions padded to the
maximum length, the other normalisation modes (images normalised too), and a backbone with 3 query
heads per key/value head and a pixel shuffle of 4. ``reach``: a 2-layer SmolVLA for ``REACH``.
``full``: SmolVLA's defaults (16 of 32 VLM layers, chunk 50, 10 steps, 512-pixel images) on the
SmolVLM2-500M sizes: 450M parameters, minutes on a CPU, not run by the tests."""
SPECIAL = [
    "<|endoftext|>",
    "<unk>",
    "<fake_token_around_image>",
    "<image>",
    "<global-img>",
    "<end_of_utterance>",
]


def write_vlm_dir(directory: Path, variant: Variant) -> None:
    """The variant's SmolVLM backbone folder: config, a word-level tokenizer, the processor files."""
    words = sorted({w for text in INSTRUCTIONS for w in text.split()} | {"\n", "the", "a", "cube"})
    vocab = {token: index for index, token in enumerate([*SPECIAL, *words])}
    backend = Tokenizer(WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.normalizer = normalizers.Lowercase()
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split("\n", behavior="isolated"), pre_tokenizers.Split(" ", behavior="removed")]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        unk_token="<unk>",
        additional_special_tokens=SPECIAL[2:],
        extra_special_tokens={
            "fake_image_token": "<fake_token_around_image>",
            "image_token": "<image>",
            "global_image_token": "<global-img>",
            "end_of_utterance_token": "<end_of_utterance>",
        },
    )
    text = LlamaConfig(vocab_size=len(vocab), rms_norm_eps=1e-5, pad_token_id=0, **variant.backbone.text)
    config = SmolVLMConfig(
        text_config=text.to_dict(),
        vision_config={**variant.backbone.vision, "image_size": variant.image_size},
        scale_factor=variant.backbone.scale_factor,
        image_token_id=vocab["<image>"],
        vocab_size=len(vocab),
    )
    config.save_pretrained(directory)
    side = {"longest_edge": variant.image_size}
    image_processor = SmolVLMImageProcessor(size=side, max_image_size=side)
    processor = SmolVLMProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=SmolVLMVideoProcessor(),
        image_seq_len=(
            variant.image_size // variant.backbone.vision["patch_size"] // variant.backbone.scale_factor
        )
        ** 2,
    )
    processor.save_pretrained(directory)


def build_policy(vlm_dir: Path, policy_dir: Path, variant: Variant, rng: np.random.Generator) -> None:
    """LeRobot's SmolVLA on the backbone, saved with its processors and dataset-like stats."""
    robot = variant.robot
    config = SmolVLAConfig(
        vlm_model_name=str(vlm_dir),
        load_vlm_weights=False,
        chunk_size=variant.chunk,
        n_action_steps=variant.chunk,
        num_steps=variant.num_steps,
        resize_imgs_with_padding=(variant.image_size, variant.image_size),
        tokenizer_max_length=12,
        device="cpu",
        input_features={
            **{
                f"observation.images.{camera}": PolicyFeature(FeatureType.VISUAL, (3, h, w))
                for camera, (h, w) in robot.cameras.items()
            },
            "observation.state": PolicyFeature(FeatureType.STATE, (robot.state_dim,)),
        },
        output_features={"action": PolicyFeature(FeatureType.ACTION, (robot.action_dim,))},
        **variant.settings,
    )
    policy = SmolVLAPolicy(config)
    spread_weights(policy)
    stats = {
        "observation.state": vector_stats(rng, robot.state_dim, scale=2.0),
        "action": vector_stats(rng, robot.action_dim, scale=0.5),
        **{
            f"observation.images.{camera}": {
                "mean": np.full((3, 1, 1), 0.5, np.float32),
                "std": np.full((3, 1, 1), 0.25, np.float32),
                "min": np.zeros((3, 1, 1), np.float32),
                "max": np.ones((3, 1, 1), np.float32),
            }
            for camera in robot.cameras
        },
    }
    preprocessor, postprocessor = make_smolvla_pre_post_processors(config, dataset_stats=stats)
    policy.save_pretrained(policy_dir)
    preprocessor.save_pretrained(policy_dir)
    postprocessor.save_pretrained(policy_dir)


def spread_weights(policy: torch.nn.Module) -> None:
    """Random weights of unit gain (fan-in scaled matrices, unit embeddings, norm gains and biases
    around 1 and 0), instead of transformers' small initialisation: through a few random layers
    whose attention and MLP branches are tiny next to the residual stream, the actions barely depend
    on the images, instruction and state, and a parity check on them could not fail."""
    generator = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for name, parameter in policy.named_parameters():
            if parameter.ndim >= 2:
                fan_in = parameter[0].numel()
                std = 1.0 if "embed" in name else fan_in**-0.5
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * std)
            elif "norm" in name:
                parameter.copy_(1.0 + 0.2 * torch.randn(parameter.shape, generator=generator))
            else:
                parameter.copy_(0.1 * torch.randn(parameter.shape, generator=generator))


def vector_stats(rng: np.random.Generator, dim: int, scale: float) -> dict[str, np.ndarray]:
    """Statistics of a made-up dataset column: every mode (mean/std, min/max, quantiles) present."""
    samples = rng.normal(size=(1000, dim)) * scale * rng.uniform(0.5, 2.0, dim) + rng.normal(size=dim)
    return {
        "mean": samples.mean(0),
        "std": samples.std(0),
        "min": samples.min(0),
        "max": samples.max(0),
        "q01": np.quantile(samples, 0.01, 0),
        "q99": np.quantile(samples, 0.99, 0),
        "q10": np.quantile(samples, 0.10, 0),
        "q90": np.quantile(samples, 0.90, 0),
        "count": np.array([len(samples)]),
    }


def main(out: Path, name: str) -> None:
    torch.manual_seed(SEED)
    rng = np.random.default_rng(SEED)
    variant = VARIANTS[name]
    vlm_dir, policy_dir = out / "vlm", out / "policy"
    write_vlm_dir(vlm_dir, variant)
    build_policy(vlm_dir, policy_dir, variant, rng)

    policy = SmolVLAPolicy.from_pretrained(policy_dir)
    policy.eval()
    preprocessor = PolicyProcessorPipeline.from_pretrained(
        policy_dir, config_filename="policy_preprocessor.json"
    )
    postprocessor = PolicyProcessorPipeline.from_pretrained(
        policy_dir,
        config_filename="policy_postprocessor.json",
        to_transition=policy_action_to_transition,
        to_output=transition_to_policy_action,
    )

    robot, chunk_size = variant.robot, variant.chunk
    images = {
        c: rng.integers(0, 256, (BATCH, h, w, 3), dtype=np.uint8) for c, (h, w) in robot.cameras.items()
    }
    state = rng.normal(size=(BATCH, robot.state_dim)).astype(np.float32) * 2.0
    max_action_dim = policy.config.max_action_dim
    noise = torch.randn(BATCH, chunk_size, max_action_dim, generator=torch.Generator().manual_seed(SEED + 1))

    observation = preprocess_observation({"pixels": images, "agent_pos": state})
    batch = preprocessor({**observation, "task": list(INSTRUCTIONS)})
    with torch.no_grad():
        chunk = policy.predict_action_chunk(batch, noise=noise.clone())
    actions = postprocessor(chunk)

    raw_actions = (rng.normal(size=(BATCH, chunk_size, robot.action_dim)) * 0.5).astype(np.float32)
    loss_noise = torch.randn(
        BATCH, chunk_size, max_action_dim, generator=torch.Generator().manual_seed(SEED + 2)
    )
    loss_time = torch.tensor([0.9, 0.35, 0.05], dtype=torch.float32)
    train_batch = preprocessor(
        {**observation, "action": torch.from_numpy(raw_actions), "task": list(INSTRUCTIONS)}
    )
    with torch.no_grad():
        loss, loss_dict = policy.forward(train_batch, noise=loss_noise.clone(), time=loss_time.clone())

    np.savez(
        out / "reference.npz",
        **{f"image_{camera}": array for camera, array in images.items()},
        state=state,
        instructions=np.array(INSTRUCTIONS),
        noise=noise.numpy(),
        actions=actions.numpy(),
        model_actions=chunk.numpy(),
        lang_tokens=batch["observation.language.tokens"].numpy(),
        lang_mask=batch["observation.language.attention_mask"].numpy(),
        raw_actions=raw_actions,
        loss_noise=loss_noise.numpy(),
        loss_time=loss_time.numpy(),
        losses=loss_dict["losses_after_forward"].numpy(),
        loss=np.array(float(loss)),
    )
    print(json.dumps({"actions": list(actions.shape), "loss": float(loss)}))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
