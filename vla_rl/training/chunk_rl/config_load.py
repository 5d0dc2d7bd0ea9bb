"""Compose ``configs/rl.yaml`` with Hydra and validate it against ``VLARLConfig`` before any work."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from vla_rl.config.load import JobSchema, check_reward_config, distributed_checks
from vla_rl.config.structured import (
    Check,
    ConfigError,
    check_values,
    not_negative,
    one_of,
    positive,
)
from vla_rl.training.chunk_rl.config import AUTOCAST_DTYPES, MODEL_DTYPES, RLPolicyConfig, VLARLConfig
from vla_rl.training.chunk_rl.exploration_anneal import ANNEAL_CHECKS, bounds_check

FLOW_POLICIES = ("pi0", "pi05", "flow_mlp", "smolvla")
"""The chunk-policy families whose chain exploration ``policy.exploration`` sets."""
PREFIX_POLICIES = ("pi0", "pi05", "smolvla")
"""The flow families with a VLM prefix that an update may encode once (``reuse_frozen_prefix``)."""

REMOVED_CLOCK_KEYS = {
    "algorithm.actor_lr_decay_minutes": (
        "algorithm.actor_lr_decay_steps",
        "the actor gradient step at which the rate reaches 0; an update makes num_epochs x "
        "num_minibatches of them, so a decay over N updates is (N - critic_warmup_iterations) x "
        "num_epochs x num_minibatches",
    ),
    "policy.exploration_anneal_minutes": (
        "policy.exploration_anneal_updates",
        "the update (iteration) at which policy.exploration_final is reached",
    ),
}
"""Schedules that followed the wall clock, removed (schedules count updates): old key -> (its
replacement, what the replacement counts)."""
EVALUATION_IGNORES = ("algorithm.actor_lr_decay_minutes",)
"""Removed keys that an evaluation of a saved run may drop whatever their value."""


def without_removed_keys(overrides: Sequence[str], ignore: Sequence[str] = ()) -> list[str]:
    """``overrides`` less those that set a removed clock schedule to 0 (off) or to a key in
    ``ignore``; a ``ConfigError`` naming the replacement for one that turns it on."""
    kept = []
    for override in overrides:
        key, _, value = override.partition("=")
        key = key.lstrip("+")
        if key not in REMOVED_CLOCK_KEYS:
            kept.append(override)
            continue
        if key not in ignore and value.strip() not in ("0", "0.0", "", "null"):
            raise _removed_key_error(key)
    return kept


def _removed_key_error(old_key: str) -> ConfigError:
    new_key, meaning = REMOVED_CLOCK_KEYS[old_key]
    return ConfigError(
        f"config key '{old_key}' was removed: schedules count updates, not minutes. Use "
        f"'{new_key}' ({meaning}). For a saved run's config (resume, evaluation), add the "
        f"overrides '~{old_key}' and '{new_key}=<value>'."
    )


def migrate_clock_schedules(raw: DictConfig | dict[str, Any], ignore: Sequence[str] = ()) -> DictConfig:
    """``raw`` without the removed wall-clock schedule keys where they were off (0, as every saved
    config of a run without them holds them) or are named in ``ignore``; a ``ConfigError`` naming
    the replacement where one was on."""
    config = raw if isinstance(raw, DictConfig) else OmegaConf.create(raw)
    for old_key in REMOVED_CLOCK_KEYS:
        value = OmegaConf.select(config, old_key, default=None)
        if value is None:
            continue
        if value and old_key not in ignore:
            raise _removed_key_error(old_key)
        parent, _, leaf = old_key.rpartition(".")
        with open_dict(OmegaConf.select(config, parent)) as node:
            node.pop(leaf)
    return config


def _exploration_checks() -> list[Check[RLPolicyConfig]]:
    """The checks of ``policy.exploration`` of a flow policy; a setting left at None (the
    checkpoint's value) passes."""
    from vla_rl.policies.flow.exploration import CHAIN_LOG_PROBS, EXPLORATIONS, NOISE_MEANS, STD_PROFILES

    return [
        one_of("exploration.exploration", EXPLORATIONS),
        one_of("exploration.noise_std_profile", STD_PROFILES),
        one_of("exploration.noise_mean", NOISE_MEANS),
        one_of("exploration.chain_log_prob", CHAIN_LOG_PROBS),
        *not_negative("exploration.noise_level", "exploration.noisy_chunk_steps"),
        bounds_check("exploration.noise_std_bounds"),
        Check(
            "exploration.sde_one_step",
            lambda p: (
                not p.exploration.sde_one_step or (p.exploration.exploration or "flow_sde") == "flow_sde"
            ),
            "applies to exploration flow_sde only",
        ),
        Check(
            "exploration.reuse_frozen_prefix",
            lambda p: p.exploration.reuse_frozen_prefix is None or p.name in PREFIX_POLICIES,
            f"is a setting of {' and '.join(PREFIX_POLICIES)}; other policies have no prefix",
        ),
        *ANNEAL_CHECKS,
    ]


def _rl_checks() -> list[Check[VLARLConfig]]:
    return [
        Check("policy.name", lambda c: bool(c.policy.name), "must name a registered chunk policy"),
        Check(
            "policy.init_from",
            lambda c: bool(c.policy.init_from) or bool(c.resume),
            "must point at the SFT checkpoint to fine-tune",
        ),
        *positive("iterations"),
        one_of("policy.dtype", MODEL_DTYPES),
        one_of("policy.autocast", AUTOCAST_DTYPES),
        Check(
            "policy.autocast",
            lambda c: c.policy.autocast == "none" or c.policy.dtype == "float32",
            "needs policy.dtype float32 (autocast keeps float32 weights; policy.dtype=bfloat16 already "
            "computes the model in bfloat16)",
        ),
        Check(
            "reward.worker",
            lambda c: not (c.reward.model and c.reward.worker),
            "background scoring is supported by the PPO collector of `vla-rl train` only",
        ),
        Check(
            "algorithm.reward",
            lambda c: not c.reward.model or c.algorithm.name != "vla_ppo" or c.algorithm.reward == "dense",
            "must be 'dense' with a reward model (the model's reward replaces the step reward)",
        ),
        Check(
            "algorithm.score",
            lambda c: not c.reward.model or c.algorithm.name != "vla_grpo" or c.algorithm.score != "success",
            "must be 'return' or 'return_to_go' with a reward model (success would ignore the model)",
        ),
        *positive("eval.temperature"),
        Check(
            "env.num_envs",
            lambda c: c.algorithm.name != "vla_grpo" or c.env.num_envs % c.algorithm.group_size == 0,
            "must be a multiple of algorithm.group_size for GRPO",
        ),
        *distributed_checks(),
        Check(
            "distributed.rollout_workers",
            lambda c: c.distributed.rollout_workers == 0,
            "asynchronous rollouts run state PPO only (vla-rl train without recipe=); chunk RL "
            "collects on env workers (distributed.env_workers) synchronously",
        ),
    ]


def _finish_rl_config(cfg: VLARLConfig) -> None:
    if cfg.policy.exploration.given() and cfg.policy.name not in FLOW_POLICIES:
        raise ConfigError(
            f"config key 'policy.exploration': {cfg.policy.name} has no exploration settings (flow "
            f"policies {list(FLOW_POLICIES)} have; token policies explore through algorithm.temperature)"
        )
    check_values(cfg.policy, _exploration_checks(), "policy")
    cfg.algorithm.validate()
    check_reward_config(cfg)


RL_JOB = JobSchema(
    "rl", VLARLConfig, "rl", _rl_checks, _finish_rl_config, without_removed_keys, migrate_clock_schedules
)
"""``vla-rl train recipe=NAME``'s job: RL fine-tuning of a chunk policy (``configs/rl.yaml``, a recipe
from ``configs/recipe``); the wall-clock schedules of an earlier release are migrated away."""
RL_EVALUATION_JOB = replace(
    RL_JOB,
    migrate_overrides=partial(without_removed_keys, ignore=EVALUATION_IGNORES),
    migrate=partial(migrate_clock_schedules, ignore=EVALUATION_IGNORES),
)
"""``RL_JOB`` for a config that only evaluates the run's policies: a removed learning-rate schedule on
the clock (which plays no part in an evaluation) is dropped instead of refused."""
compose_rl_config = RL_JOB.compose


def load_rl_config_file(
    path: str | Path, overrides: Sequence[str] = (), for_evaluation: bool = False
) -> VLARLConfig:
    """A resolved ``config.yaml`` (as written into RL checkpoints) with ``overrides`` applied; of
    ``RL_EVALUATION_JOB`` when ``for_evaluation``."""
    return (RL_EVALUATION_JOB if for_evaluation else RL_JOB).load_file(path, overrides)
