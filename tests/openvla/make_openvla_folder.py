"""Build a tiny OpenVLA folder with OpenVLA's OWN code and record what its ``predict_action`` does.

Run in an environment where OpenVLA's Hugging Face code runs (its pins: ``transformers`` 4.40.1,
``tokenizers`` 0.19.1, ``timm`` 0.9.x, torch, torchvision), given a checkout of
https://github.com/openvla/openvla::

    python tests/openvla/make_openvla_folder.py --openvla /path/to/openvla --out /tmp/tiny_openvla

It copies the checkout's ``prismatic/extern/hf/*_prismatic.py`` into the output folder (nothing of it
is committed here), configures OpenVLA's own classes at reduced size (a Llama of 2 layers and width
32 with the Llama-2 vocabulary layout, timm's ``vit_tiny_patch16_224`` at 32 px as the vision tower),
zeroes the output rows of every token that is not an action token (so that the reference's argmax over
the whole vocabulary is an action token, as it is for a trained OpenVLA), saves it with
``save_pretrained`` and an ``auto_map`` like the published folders, reloads it with
``AutoModelForVision2Seq`` / ``AutoProcessor`` (``trust_remote_code``, local files only) and writes
``reference.npz``: the raw image and instruction, the processor's ``input_ids`` and ``pixel_values``,
the model's logits at the last prompt position and the actions of ``predict_action`` for two
un-normalisation keys. The tokenizer is a word-level one with Llama 2's id layout, or, with
``--llama-tokenizer PATH/tokenizer.model``, Llama 2's own (e.g. the copy in karpathy/llama2.c).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tiny_tokenizer import VOCAB_SIZE, build_tokenizer  # noqa: E402

HF_FILES = ("configuration_prismatic.py", "modeling_prismatic.py", "processing_prismatic.py")
INSTRUCTION = "Pick up the red cube"
PROMPT = f"In: What action should the robot take to {INSTRUCTION.lower()}?\nOut:"
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
IMAGE_SIZE = 32
PAD_TO_MULTIPLE = 64


def write_tokenizer(out: Path, llama_tokenizer: Path | None) -> None:
    """The word-level tokenizer with Llama 2's id layout, or (given Llama 2's SentencePiece
    ``tokenizer.model``) Llama 2's own fast tokenizer with OpenVLA's ``<PAD>`` added, as OpenVLA's
    training code makes it."""
    if llama_tokenizer is None:
        build_tokenizer(out)
        return
    from transformers import LlamaTokenizerFast

    tokenizer = LlamaTokenizerFast(
        vocab_file=str(llama_tokenizer), padding_side="right", model_max_length=2048
    )
    tokenizer.add_special_tokens({"pad_token": "<PAD>"})
    tokenizer.save_pretrained(str(out))


def build(openvla: Path, out: Path, seed: int, llama_tokenizer: Path | None = None) -> None:
    from transformers import AutoModelForVision2Seq, AutoProcessor
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    out.mkdir(parents=True, exist_ok=True)
    for name in HF_FILES:
        shutil.copy2(openvla / "prismatic" / "extern" / "hf" / name, out / name)
    write_tokenizer(out, llama_tokenizer)
    config_class = get_class_from_dynamic_module("configuration_prismatic.OpenVLAConfig", str(out))
    model_class = get_class_from_dynamic_module("modeling_prismatic.OpenVLAForActionPrediction", str(out))
    image_class = get_class_from_dynamic_module("processing_prismatic.PrismaticImageProcessor", str(out))
    processor_class = get_class_from_dynamic_module("processing_prismatic.PrismaticProcessor", str(out))
    text_config = {
        "vocab_size": VOCAB_SIZE + PAD_TO_MULTIPLE,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "max_position_embeddings": 256,
        "pad_token_id": VOCAB_SIZE,
        # OpenVLA's _init_weights draws every linear, convolution and embedding weight with this std;
        # 0.02 leaves a 2-layer model's output all but blind to the image and the prompt, 0.3 does not
        "initializer_range": 0.3,
    }
    config = config_class(
        vision_backbone_id="siglip-vit-so400m",
        llm_backbone_id="llama2-7b-pure",
        arch_specifier="no-align+gelu-mlp",
        image_resize_strategy="letterbox",
        text_config=text_config,
        pad_token_id=VOCAB_SIZE,
        pad_to_multiple_of=PAD_TO_MULTIPLE,
        norm_stats=NORM_STATS,
        n_action_bins=256,
        # reduced size: these keyword values replace the ones OpenVLAConfig derives from the
        # backbone id (PretrainedConfig sets the remaining keywords last)
        timm_model_ids=["vit_tiny_patch16_224"],
        timm_override_act_layers=[None],
        image_sizes=[IMAGE_SIZE],
    )
    config.auto_map = {
        "AutoConfig": "configuration_prismatic.OpenVLAConfig",
        "AutoModelForVision2Seq": "modeling_prismatic.OpenVLAForActionPrediction",
    }
    torch.manual_seed(seed)
    model = model_class(config)
    with torch.no_grad():
        head = model.language_model.get_output_embeddings().weight
        keep = torch.zeros(head.shape[0], dtype=torch.bool)
        keep[VOCAB_SIZE - config.n_action_bins : VOCAB_SIZE] = True
        head[~keep] = 0.0
    model.save_pretrained(str(out), safe_serialization=True)
    image_processor = image_class(
        use_fused_vision_backbone=False,
        image_resize_strategy="letterbox",
        input_sizes=[(3, IMAGE_SIZE, IMAGE_SIZE)],
        interpolations=["bicubic"],
        means=[(0.5, 0.5, 0.5)],
        stds=[(0.5, 0.5, 0.5)],
    )
    from transformers import AutoTokenizer

    processor = processor_class(image_processor, AutoTokenizer.from_pretrained(str(out)))
    processor.save_pretrained(str(out))
    preprocessor_file = out / "preprocessor_config.json"
    preprocessor = json.loads(preprocessor_file.read_text())
    preprocessor["auto_map"] = {
        "AutoImageProcessor": "processing_prismatic.PrismaticImageProcessor",
        "AutoProcessor": "processing_prismatic.PrismaticProcessor",
    }
    preprocessor_file.write_text(json.dumps(preprocessor, indent=2))

    # the published loading path
    vla = AutoModelForVision2Seq.from_pretrained(str(out), trust_remote_code=True, local_files_only=True)
    processor = AutoProcessor.from_pretrained(str(out), trust_remote_code=True, local_files_only=True)
    vla.eval()
    from PIL import Image

    image = np.random.default_rng(seed).integers(0, 256, size=(40, 30, 3), dtype=np.uint8)
    inputs = processor(PROMPT, Image.fromarray(image))
    record: dict[str, np.ndarray] = {
        "image": image,
        "instruction": np.array(INSTRUCTION),
        "input_ids": inputs["input_ids"].numpy(),
        "pixel_values": inputs["pixel_values"].numpy(),
    }
    with torch.no_grad():
        ids = torch.cat([inputs["input_ids"], torch.tensor([[29871]])], dim=1)
        output = vla(input_ids=ids, attention_mask=torch.ones_like(ids), pixel_values=inputs["pixel_values"])
        record["last_logits"] = output.logits[0, -1].numpy()
        for key in NORM_STATS:
            record[f"actions_{key}"] = vla.predict_action(**inputs, unnorm_key=key, do_sample=False)
    np.savez(out / "reference.npz", **record)
    print(
        json.dumps(
            {key: np.asarray(value).tolist() for key, value in record.items() if key.startswith("actions")}
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--openvla", type=Path, required=True, help="a checkout of openvla/openvla")
    parser.add_argument("--out", type=Path, required=True, help="the folder to write")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--llama-tokenizer",
        type=Path,
        default=None,
        help="Llama 2's SentencePiece tokenizer.model (needs sentencepiece); default: a word-level stand-in",
    )
    args = parser.parse_args()
    build(args.openvla, args.out, args.seed, args.llama_tokenizer)


if __name__ == "__main__":
    main()
