"""Compose ``configs/rl.yaml`` with Hydra and validate it against ``VLARLConfig`` before any work."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from vla_rl.config.load import (
    Check,
    ConfigError,
    check_reward_config,
    compose_config_module,
    job_check,
    load_config_file,
    validate_structured,
)
from vla_rl.training.chunk_rl.config import ExplorationSettings, VLARLConfig
from vla_rl.training.chunk_rl.exploration_anneal import check_exploration_anneal

RL_CONFIG_NAME = "rl"
FLOW_POLICIES = ("pi0", "flow_mlp")
"""The chunk-policy families whose chain exploration ``policy.exploration`` sets."""

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


def compose_rl_config(overrides: Sequence[str] = ()) -> VLARLConfig:
    """``configs/rl.yaml`` (a recipe from ``configs/recipe``) plus Hydra-syntax ``overrides``."""
    return validate_rl_config(compose_config_module(RL_CONFIG_NAME, without_removed_keys(overrides)))


def load_rl_config_file(
    path: str | Path, overrides: Sequence[str] = (), for_evaluation: bool = False
) -> VLARLConfig:
    """A resolved ``config.yaml`` (as written into RL checkpoints) with ``overrides`` applied.
    ``for_evaluation``: the config only evaluates the run's policies, so a removed learning-rate
    schedule on the clock (which plays no part in an evaluation) is dropped instead of refused."""
    kept = without_removed_keys(overrides, EVALUATION_IGNORES if for_evaluation else ())
    return load_config_file(path, kept, lambda raw: validate_rl_config(raw, for_evaluation))


def validate_rl_config(raw: DictConfig | dict[str, Any], for_evaluation: bool = False) -> VLARLConfig:
    """Merge ``raw`` into ``VLARLConfig`` and check every value: unknown keys, wrong types and bad
    values are a ``ConfigError`` naming the key, before anything is built or loaded."""
    raw = migrate_clock_schedules(raw, ignore=EVALUATION_IGNORES if for_evaluation else ())
    cfg = validate_structured(VLARLConfig, raw, RL_CHECKS)
    try:
        cfg.algorithm.validate()
    except ValueError as error:
        raise ConfigError(f"config key 'algorithm': {error}") from None
    check_reward_config(cfg.reward, cfg.env.cameras)
    errors = [
        *exploration_errors(cfg.policy.exploration, cfg.policy.name),
        *check_exploration_anneal(cfg.policy),
    ]
    if errors:
        key, problem = errors[0]
        raise ConfigError(f"config key '{key}': {problem}")
    return cfg


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
        node = OmegaConf.select(config, parent)
        was_struct = OmegaConf.is_struct(node)
        OmegaConf.set_struct(node, False)
        node.pop(leaf)
        OmegaConf.set_struct(node, was_struct)
    return config


def exploration_errors(settings: ExplorationSettings, policy_name: str) -> list[tuple[str, str]]:
    """(key, problem) of every exploration setting the policy family cannot take or whose value is
    out of range, checked without loading anything."""
    given = settings.given()
    if not given:
        return []
    if policy_name not in FLOW_POLICIES:
        return [
            (
                "policy.exploration",
                f"{policy_name} has no exploration settings (flow policies {list(FLOW_POLICIES)} have; "
                "token policies explore through algorithm.temperature)",
            )
        ]
    from vla_rl.policies.flow.exploration import CHAIN_LOG_PROBS, EXPLORATIONS, NOISE_MEANS, STD_PROFILES

    errors = []
    choices = {
        "exploration": tuple(EXPLORATIONS),
        "noise_std_profile": STD_PROFILES,
        "noise_mean": NOISE_MEANS,
        "chain_log_prob": CHAIN_LOG_PROBS,
    }
    for name, allowed in choices.items():
        if name in given and given[name] not in allowed:
            errors.append(
                (f"policy.exploration.{name}", f"must be one of {list(allowed)}, got {given[name]!r}")
            )
    if given.get("noise_level", 0.0) < 0.0:
        errors.append(("policy.exploration.noise_level", f"must be >= 0, got {given['noise_level']}"))
    if given.get("noisy_chunk_steps", 0) < 0:
        errors.append(
            ("policy.exploration.noisy_chunk_steps", f"must be >= 0, got {given['noisy_chunk_steps']}")
        )
    if "noise_std_bounds" in given and not _valid_bounds(given["noise_std_bounds"]):
        errors.append(
            (
                "policy.exploration.noise_std_bounds",
                f"must be [min, max] with 0 < min < max, got {given['noise_std_bounds']}",
            )
        )
    if given.get("sde_one_step") and given.get("exploration", "flow_sde") != "flow_sde":
        errors.append(("policy.exploration.sde_one_step", "applies to exploration flow_sde only"))
    if "reuse_frozen_prefix" in given and policy_name != "pi0":
        errors.append(
            ("policy.exploration.reuse_frozen_prefix", f"is a pi0 setting; {policy_name} has no prefix")
        )
    return errors


def _valid_bounds(bounds: list[float]) -> bool:
    return len(bounds) == 2 and 0.0 < bounds[0] < bounds[1]


RL_CHECKS: list[Check[VLARLConfig]] = [
    job_check("rl"),
    Check("policy.name", lambda c: bool(c.policy.name), "must name a registered chunk policy"),
    Check(
        "policy.init_from",
        lambda c: bool(c.policy.init_from) or bool(c.resume),
        "must point at the SFT checkpoint to fine-tune",
    ),
    Check("iterations", lambda c: c.iterations > 0, "must be positive"),
    Check(
        "policy.exploration_final.noise_level",
        lambda c: (
            c.policy.exploration_final.noise_level is None or c.policy.exploration_final.noise_level >= 0
        ),
        "must be >= 0",
    ),
    Check(
        "policy.exploration_final.noise_std_bounds",
        lambda c: (
            c.policy.exploration_final.noise_std_bounds is None
            or _valid_bounds(c.policy.exploration_final.noise_std_bounds)
        ),
        "must be [min, max] with 0 < min < max",
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
    Check(
        "eval.temperature",
        lambda c: c.eval.temperature is None or c.eval.temperature > 0,
        "must be positive, or null for the rollouts' algorithm.temperature",
    ),
    Check("checkpoint_interval", lambda c: c.checkpoint_interval > 0, "must be positive"),
    Check("torch_num_threads", lambda c: c.torch_num_threads > 0, "must be positive"),
    Check("env.num_envs", lambda c: c.env.num_envs > 0, "must be positive"),
    Check(
        "env.num_envs",
        lambda c: c.algorithm.name != "vla_grpo" or c.env.num_envs % c.algorithm.group_size == 0,
        "must be a multiple of algorithm.group_size for GRPO",
    ),
    Check(
        "logger.wandb_mode",
        lambda c: c.logger.wandb_mode in ("offline", "online", "disabled"),
        "must be 'offline', 'online' or 'disabled'",
    ),
    Check(
        "success_target",
        lambda c: c.success_target is None or 0 <= c.success_target <= 1,
        "must be in [0, 1]",
    ),
]
