"""The policy chunk RL trains, and the reference policy of its KL term, loaded the same way by the
training process (``trainer.ChunkRLTrainer``) and by every data-parallel trainer rank
(``vla_rl.distributed.chunk_ranks``): the checkpoint's family, the maps of an imported checkpoint,
LoRA adapters, the weights' dtype, the device, the decoding limit, the exploration and the frozen
parameters, all from the run's config."""

from __future__ import annotations

from pathlib import Path

import torch

from vla_rl.config.load import ConfigError
from vla_rl.policies.chunk_policy import ChunkPolicy
from vla_rl.policies.lora import LoraSettings
from vla_rl.policies.registry import load_chunk_policy
from vla_rl.training.checkpoint import resolve_policy_dir
from vla_rl.training.chunk_rl.config import VLARLConfig
from vla_rl.training.chunk_rl.exploration_anneal import exploration_at
from vla_rl.training.env_fit import apply_env_maps


def load_rl_policy(cfg: VLARLConfig, directory: Path, update: int = 0) -> ChunkPolicy:
    """The ``policy.name`` policy saved in ``directory``, with the maps of an imported checkpoint
    (``policy.action_map``, ...; ``vla_rl.training.env_fit``), ``policy.exploration`` applied (and
    ``policy.exploration_final`` as annealed at ``update``), in eval mode
    (RL samples, recomputes and trains without dropout); an autoregressive token policy decodes only
    the ``algorithm.execute_steps`` actions that run (``TokenVLA.limit_decoding``)."""
    policy = load_chunk_policy(
        cfg.policy.name,
        directory,
        cfg.policy.tokenizer_dir,
        openpi_asset_id=cfg.policy.openpi_asset_id,
        openpi_delta_action_mask=cfg.policy.openpi_delta_action_mask,
        unnorm_key=cfg.policy.unnorm_key,
        trust_remote_code=cfg.policy.trust_remote_code,
    )
    apply_env_maps(policy, cfg.policy, cfg.policy.name)
    if cfg.policy.lora is not None:
        add_lora(policy, cfg.policy.lora, cfg.policy.name)
    if cfg.policy.dtype != "float32":
        cast_model = getattr(policy, "cast_model", None)
        if cast_model is None:
            raise ConfigError(f"config key 'policy.dtype': {cfg.policy.name} policies train in float32 only")
        cast_model(getattr(torch, cfg.policy.dtype))
    policy.autocast_dtype = None if cfg.policy.autocast == "none" else getattr(torch, cfg.policy.autocast)
    if cfg.policy.activation_checkpointing:
        checkpoint_activations(policy, cfg.policy.name)
    policy = policy.to(torch.device(cfg.device)).eval()
    limit_decoding = getattr(policy, "limit_decoding", None)
    if limit_decoding is not None:
        limit_decoding(cfg.algorithm.execute_steps)
    settings = {**cfg.policy.exploration.given(), **exploration_at(cfg.policy, update)}
    if settings:
        set_exploration = getattr(policy, "set_exploration", None)
        if set_exploration is None:
            raise ConfigError(
                f"config key 'policy.exploration': {cfg.policy.name} has no exploration settings "
                "(token policies explore through algorithm.temperature)"
            )
        set_exploration(**settings)
    return policy


def checkpoint_activations(policy: ChunkPolicy, family: str) -> None:
    """``policy.activation_checkpointing``: the family's ``checkpoint_activations``, or a
    ``ConfigError`` for a family without it."""
    enable = getattr(policy, "checkpoint_activations", None)
    if enable is None:
        raise ConfigError(
            f"config key 'policy.activation_checkpointing': {family} policies do not support it (only "
            "the token VLAs, token_vla and chunk_vla, do)"
        )
    enable()


def load_rl_learner(cfg: VLARLConfig, start_dir: Path) -> tuple[ChunkPolicy, ChunkPolicy | None]:
    """The policy to train (``load_rl_policy`` of ``start_dir``, ``policy.freeze`` applied) and, for
    ``algorithm.kl_coef > 0``, the fixed reference policy (``policy.init_from``'s, else ``start_dir``'s):
    what the training process and every data-parallel trainer rank build alike."""
    policy = load_rl_policy(cfg, start_dir)
    freeze_parameters(policy, cfg.policy.freeze)
    reference = None
    if cfg.algorithm.kl_coef > 0:
        reference_dir = resolve_policy_dir(cfg.policy.init_from) if cfg.policy.init_from else start_dir
        reference = load_rl_policy(cfg, reference_dir).eval().requires_grad_(False)
    return policy, reference


def freeze_parameters(policy: ChunkPolicy, prefixes: list[str]) -> None:
    """Fix the parameters whose names start with one of ``prefixes`` (``policy.freeze``); a prefix no
    name starts with is a ``ConfigError``."""
    if not prefixes:
        return
    names = [name for name, _ in policy.named_parameters()]
    unmatched = [prefix for prefix in prefixes if not any(name.startswith(prefix) for name in names)]
    if unmatched:
        raise ConfigError(f"config key 'policy.freeze': no parameter name starts with {unmatched}")
    for name, parameter in policy.named_parameters():
        if name.startswith(tuple(prefixes)):
            parameter.requires_grad_(False)


def add_lora(policy: ChunkPolicy, settings: LoraSettings, family: str) -> None:
    """``policy.lora``'s adapters on a policy saved without them; a policy that has adapters keeps
    its own (a resumed run, or a checkpoint trained with LoRA), and must have been given the same."""
    policy_config = getattr(policy, "cfg", None) or getattr(policy, "config", None)  # pi0's, token VLAs'
    saved = getattr(policy_config, "lora", None)
    if saved is not None:
        if saved != settings:
            raise ConfigError(
                f"config key 'policy.lora': the policy was saved with LoRA {saved}, not {settings}"
            )
        return
    add = getattr(policy, "add_lora", None)
    if add is None:
        raise ConfigError(f"config key 'policy.lora': {family} policies take no LoRA adapters in RL")
    add(settings)
