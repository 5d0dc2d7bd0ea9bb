"""Building, saving and loading the pi0 policy (local directories only, never a hub).

Layout of a policy directory written by ``save_pretrained``::

    policy_config.json        our Pi0PolicyConfig (cameras, action/state statistics, chain noise)
    model/                    PI0ForConditionalGeneration.save_pretrained (config.json + safetensors)
    tokenizer/                the tokenizer's save_pretrained
    value_head.safetensors    the value head
    aux_head.safetensors      the auxiliary state head and its target statistics (when configured)
    noise_head.safetensors    the Flow-Noise standard-deviation head (exploration ``flow_noise``)
    lora_adapter.safetensors  the LoRA adapters (``lora`` set; ``model/`` then holds the base weights)

A LeRobot ``pi0`` policy folder (``config.json``, ``model.safetensors``, its processors), or an openpi
PyTorch export (``config.json``, ``model.safetensors``, ``assets/<asset_id>/norm_stats.json``), loads
through ``lerobot_pi0_io`` wherever a policy directory is accepted.

A pi0 checkpoint in transformers' format (``from_pretrained_pi0``) is a directory with the model's
``config.json`` and weights, and its tokenizer either in a ``tokenizer/`` subdirectory or next to the
weights (the PaliGemma tokenizer for real pi0 weights).
"""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from typing import Any

from safetensors.torch import load_file
from transformers import PI0ForConditionalGeneration

from vla_rl.policies.chunk_policy import ChunkPolicy
from vla_rl.policies.flow.lerobot_pi0_io import load_lerobot_pi0
from vla_rl.policies.flow.pi0_config import Pi0BuildSettings, Pi0PolicyConfig, tiny_pi0_config
from vla_rl.policies.lerobot_folder import is_lerobot_folder
from vla_rl.policies.lora import adapter_state_dict, base_state_dict, load_adapter_state_dict
from vla_rl.policies.openpi_folder import is_openpi_export
from vla_rl.policies.pretrained_io import local_dir, save_weights
from vla_rl.policies.vla.text_tokenizer import TOKENIZER_DIR, build_text_tokenizer, load_local_tokenizer

Pi0Policy = ChunkPolicy
"""What these functions build and persist: ``vla_rl.policies.flow.pi0.Pi0Policy``, which imports this
module (so its annotations here name the base class)."""

CONFIG_FILE = "policy_config.json"
MODEL_DIR = "model"
VALUE_HEAD_FILE = "value_head.safetensors"
AUX_HEAD_FILE = "aux_head.safetensors"
NOISE_HEAD_FILE = "noise_head.safetensors"
ADAPTER_FILE = "lora_adapter.safetensors"
BUILD_ONLY_ARGS = {"chunk_len", "proprio_dim", "pretrained_dir", "instructions"}
"""The ``Pi0BuildSettings`` fields that ``build_pi0`` reads itself."""
TINY_CONFIG_ARGS = (
    {f.name for f in fields(Pi0BuildSettings)} - {f.name for f in fields(Pi0PolicyConfig)} - BUILD_ONLY_ARGS
)
"""The other ``Pi0BuildSettings`` fields: the sizes of a fresh tiny pi0 (``tiny_pi0_config``'s)."""


def build_pi0(cls: type[Pi0Policy], kwargs: dict[str, Any]) -> Pi0Policy:
    settings = Pi0BuildSettings.from_dict(kwargs)
    cfg = Pi0PolicyConfig(**{f.name: getattr(settings, f.name) for f in fields(Pi0PolicyConfig)})
    chunk_len = settings.chunk_len
    if settings.pretrained_dir is not None:
        policy = load_pi0(cls, settings.pretrained_dir, cfg)
        if policy.chunk_len != chunk_len:
            raise ValueError(f"chunk_len {chunk_len} != the checkpoint's chunk_size {policy.chunk_len}")
        return policy
    sizes = {
        name: getattr(settings, name) for name in TINY_CONFIG_ARGS if getattr(settings, name) is not None
    }
    sizes.setdefault("max_action_dim", max(8, cfg.action_dim))
    sizes.setdefault("max_state_dim", max(8, settings.proprio_dim))
    tokenizer = build_text_tokenizer(settings.instructions, num_action_tokens=0)  # pi0 emits no text
    config = tiny_pi0_config(
        vocab_size=len(tokenizer),
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        chunk_size=chunk_len,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        **sizes,
    )
    return cls(PI0ForConditionalGeneration(config), tokenizer, cfg)


def load_pi0(cls: type[Pi0Policy], directory: str | Path, cfg: Pi0PolicyConfig) -> Pi0Policy:
    directory = local_dir(directory)
    model = PI0ForConditionalGeneration.from_pretrained(directory, local_files_only=True)
    return cls(model, load_local_tokenizer(directory), cfg)


def save_pi0_policy(policy: Pi0Policy, directory: str | Path) -> None:
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    if policy.cfg.lora is None:
        policy.model.save_pretrained(path / MODEL_DIR)
    else:
        policy.model.save_pretrained(path / MODEL_DIR, state_dict=base_state_dict(policy.model))
        save_weights(adapter_state_dict(policy.model), path / ADAPTER_FILE)
    policy.tokenizer.save_pretrained(path / TOKENIZER_DIR)
    save_weights(policy.value_head.state_dict(), path / VALUE_HEAD_FILE)
    if policy.aux_head is not None:
        save_weights(policy.aux_head.state_dict(), path / AUX_HEAD_FILE)
    if policy.noise_head is not None:
        save_weights(policy.noise_head.state_dict(), path / NOISE_HEAD_FILE)
    (path / CONFIG_FILE).write_text(json.dumps(policy.cfg.to_dict(), indent=2))


def load_pi0_policy(
    cls: type[Pi0Policy],
    directory: str | Path,
    tokenizer_dir: str | Path | None = None,
    openpi_asset_id: str | None = None,
    openpi_delta_action_mask: list[bool] | None = None,
) -> Pi0Policy:
    """A folder written by ``save_pi0_policy``, a LeRobot pi0 folder or an openpi export (its
    tokenizer from ``tokenizer_dir`` when it carries none; ``openpi_asset_id`` names an export's
    statistics, ``openpi_delta_action_mask`` its actions relative to the state). A policy saved here
    keeps what these said at import."""
    path = local_dir(directory)
    if is_lerobot_folder(path) or is_openpi_export(path):
        return load_lerobot_pi0(
            cls, path, tokenizer_dir, cls.lerobot_type, openpi_asset_id, openpi_delta_action_mask
        )
    cfg = Pi0PolicyConfig.from_dict(json.loads((path / CONFIG_FILE).read_text()))
    model = cls.model_class.from_pretrained(path / MODEL_DIR, local_files_only=True)
    policy = cls(model, load_local_tokenizer(path), cfg)
    if cfg.lora is not None:
        load_adapter_state_dict(policy.model, load_file(str(path / ADAPTER_FILE)))
    policy.value_head.load_state_dict(load_file(str(path / VALUE_HEAD_FILE)))
    if policy.aux_head is not None:
        policy.aux_head.load_state_dict(load_file(str(path / AUX_HEAD_FILE)))
    if policy.noise_head is not None:
        policy.noise_head.load_state_dict(load_file(str(path / NOISE_HEAD_FILE)))
    return policy
