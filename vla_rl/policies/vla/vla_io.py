"""Saving and loading a token VLA policy directory (local directories only, never a hub).

Layout written by ``TokenVLABase.save_pretrained``::

    vla_policy_config.json      family name and TokenVLAConfig
    <backbone files>            the PaliGemma backbone and tokenizer (``save_backbone``)
    <action statistics>         the action tokenizer's bin statistics
    policy_heads.safetensors    weights outside the backbone: value head, state projector,
                                auxiliary head, family-specific embeddings
"""

from __future__ import annotations

import json
from pathlib import Path

from safetensors.torch import load_file

from vla_rl.policies.chunk_policy import ChunkPolicy
from vla_rl.policies.pretrained_io import save_weights
from vla_rl.policies.vla.action_tokenizer import ActionTokenizer
from vla_rl.policies.vla.backbone import freeze_vision, load_saved_backbone, save_backbone
from vla_rl.policies.vla.config import TokenVLAConfig

TokenVLABase = ChunkPolicy
"""What these functions persist: ``vla_rl.policies.vla.base_vla.TokenVLABase``, which imports this
module (so its annotations here name the base class)."""

POLICY_CONFIG_FILE = "vla_policy_config.json"
HEADS_FILE = "policy_heads.safetensors"
"""Weights outside the backbone: value head, state projector, auxiliary head, family embeddings."""
BACKBONE_PREFIX = "backbone."


def save_token_vla(policy: TokenVLABase, directory: str | Path) -> None:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    save_backbone(policy.backbone, policy.tokenizer, directory)
    policy.action_tokenizer.save(directory)
    record = {"family": policy.registry_name, "config": policy.config.to_dict()}
    (directory / POLICY_CONFIG_FILE).write_text(json.dumps(record, indent=2))
    heads = {
        name: tensor for name, tensor in policy.state_dict().items() if not name.startswith(BACKBONE_PREFIX)
    }
    save_weights(heads, directory / HEADS_FILE)


def load_token_vla(cls: type[TokenVLABase], directory: str | Path) -> TokenVLABase:
    directory = Path(directory)
    record = json.loads((directory / POLICY_CONFIG_FILE).read_text())
    if record["family"] != cls.registry_name:
        raise ValueError(f"{directory} holds a {record['family']!r} policy, not {cls.registry_name!r}")
    config = TokenVLAConfig.from_dict(record["config"])
    backbone, tokenizer = load_saved_backbone(directory, with_lora=config.lora is not None)
    if config.freeze_vision and config.lora is None:
        freeze_vision(backbone)
    policy = cls(config, backbone, tokenizer)
    policy.action_tokenizer = ActionTokenizer.load(directory)
    heads = load_file(str(directory / HEADS_FILE))
    missing, unexpected = policy.load_state_dict(heads, strict=False)
    missing = [name for name in missing if not name.startswith(BACKBONE_PREFIX)]
    if missing or unexpected:
        raise ValueError(f"head weights do not match: missing {missing}, unexpected {unexpected}")
    return policy
