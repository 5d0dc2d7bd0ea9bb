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


TWO_CAMERAS = Robot({"top": (24, 32), "wrist": (30, 20)}, state_dim=8, action_dim=7)
"""Neither camera is square or the model's size, so resize-with-pad pads both ways."""
REACH = Robot({"front": (64, 64)}, state_dim=24, action_dim=4)
"""vla-rl's MuJoCo ``reach`` with one 64-pixel camera: a folder an RL run on that env can start from."""
CHUNK = 6
NUM_STEPS = 5
IMAGE_SIZE = 32
INSTRUCTIONS = [
    "pick up the red cube",
    "open the top drawer slowly",
    "push the blue block to the left of the red cube next to the open drawer",
]
"""The last one is longer than ``tokenizer_max_length`` tokens: it is truncated (its newline too)."""
VARIANTS: dict[str, dict[str, object]] = {
    "interleaved": {
        "num_vlm_layers": 4,
        "self_attn_every_n_layers": 2,
        "normalization_mapping": {
            "VISUAL": NormalizationMode.IDENTITY,
            "STATE": NormalizationMode.MEAN_STD,
            "ACTION": NormalizationMode.MIN_MAX,
        },
    },
    "reach": {"num_vlm_layers": 2, "self_attn_every_n_layers": 2},
    "skipping": {
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
}
"""SmolVLA settings beyond the shared ones. ``interleaved``: SmolVLA's default layout (4 of the 6
backbone layers kept, an expert layer per VLM layer, joint attention every 2nd layer, cross-attention
between). ``skipping``: a 2-layer expert that skips every other VLM layer, cross-attention only, a
narrower expert, instructions padded to the maximum length, and the other normalisation modes
(images normalised too). ``reach``: a 2-layer SmolVLA for ``REACH``."""
ROBOTS = {"interleaved": TWO_CAMERAS, "skipping": TWO_CAMERAS, "reach": REACH}
SPECIAL = [
    "<|endoftext|>",
    "<unk>",
    "<fake_token_around_image>",
    "<image>",
    "<global-img>",
    "<end_of_utterance>",
]


def write_vlm_dir(directory: Path) -> None:
    """A tiny SmolVLM (6 text layers of width 64, a 2-layer vision tower on 32-pixel images)."""
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
    text = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=6,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        rms_norm_eps=1e-5,
        pad_token_id=0,
    )
    vision = {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "image_size": IMAGE_SIZE,
        "patch_size": 8,
    }
    config = SmolVLMConfig(
        text_config=text.to_dict(),
        vision_config=vision,
        scale_factor=2,
        image_token_id=vocab["<image>"],
        vocab_size=len(vocab),
    )
    config.save_pretrained(directory)
    image_processor = SmolVLMImageProcessor(
        size={"longest_edge": IMAGE_SIZE}, max_image_size={"longest_edge": IMAGE_SIZE}
    )
    processor = SmolVLMProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=SmolVLMVideoProcessor(),
        image_seq_len=4,
    )
    processor.save_pretrained(directory)


def build_policy(vlm_dir: Path, policy_dir: Path, variant: str, rng: np.random.Generator) -> None:
    robot = ROBOTS[variant]
    """LeRobot's SmolVLA from the tiny backbone, saved with its processors and dataset-like stats."""
    config = SmolVLAConfig(
        vlm_model_name=str(vlm_dir),
        load_vlm_weights=False,
        chunk_size=CHUNK,
        n_action_steps=CHUNK,
        num_steps=NUM_STEPS,
        resize_imgs_with_padding=(IMAGE_SIZE, IMAGE_SIZE),
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
        **VARIANTS[variant],
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


def main(out: Path, variant: str) -> None:
    torch.manual_seed(SEED)
    rng = np.random.default_rng(SEED)
    vlm_dir, policy_dir = out / "vlm", out / "policy"
    write_vlm_dir(vlm_dir)
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

    robot = ROBOTS[variant]
    images = {
        c: rng.integers(0, 256, (BATCH, h, w, 3), dtype=np.uint8) for c, (h, w) in robot.cameras.items()
    }
    state = rng.normal(size=(BATCH, robot.state_dim)).astype(np.float32) * 2.0
    max_action_dim = policy.config.max_action_dim
    noise = torch.randn(BATCH, CHUNK, max_action_dim, generator=torch.Generator().manual_seed(SEED + 1))

    observation = preprocess_observation({"pixels": images, "agent_pos": state})
    batch = preprocessor({**observation, "task": list(INSTRUCTIONS)})
    with torch.no_grad():
        chunk = policy.predict_action_chunk(batch, noise=noise.clone())
    actions = postprocessor(chunk)

    raw_actions = (rng.normal(size=(BATCH, CHUNK, robot.action_dim)) * 0.5).astype(np.float32)
    loss_noise = torch.randn(BATCH, CHUNK, max_action_dim, generator=torch.Generator().manual_seed(SEED + 2))
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
