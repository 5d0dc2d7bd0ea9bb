"""Compose, load and validate the config of any job against its schema before any work starts,
one path for every job (``JobSchema``), and a training run's (``TRAIN_JOB``: ``configs/train.yaml``
against ``TrainConfig``). The typed-config machinery itself is ``vla_rl.config.structured``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from omegaconf import DictConfig

from vla_rl.algorithms.config import ACTOR_CRITIC_CHECKS, LR_SCHEDULES
from vla_rl.config.distributed import PLACEMENT_MODES, RUNTIMES, TRAINER_STRATEGIES
from vla_rl.config.schema import RunConfig, TrainConfig
from vla_rl.config.structured import (  # noqa: F401 - re-exported: callers import them from here too
    Check,
    ConfigError,
    Schema,
    check_values,
    compose_config_module,
    in_unit_interval,
    load_config_file,
    nested,
    not_negative,
    one_of,
    positive,
    validate_structured,
)
from vla_rl.envs.config import ENV_CHECKS
from vla_rl.registry import is_import_path, resolve
from vla_rl.rewards.config import REWARD_CHECKS, REWARD_MODEL_OPTIONS, REWARD_OPTIONS_KEY

RunT = TypeVar("RunT", bound=RunConfig)
WANDB_MODES = ("offline", "online", "disabled")


@dataclass(frozen=True)
class JobSchema(Generic[RunT]):
    """How the config of one job is composed, loaded and validated: one path for every job. Its
    checks run after ``run_checks`` (those of the keys every job has) and before ``finish``."""

    job: str
    """The value of the config's ``job`` key (``vla_rl.training.jobs``)."""
    type: type[RunT]
    """The dataclass of the config."""
    config_name: str
    """The config file composed from ``configs/`` (without ``.yaml``)."""
    checks: Callable[[], Sequence[Check[RunT]]]
    """The job's own value checks (built on use: some read the tables of the layers they check)."""
    finish: Callable[[RunT], None] = lambda config: None
    """Checks beyond one rule per key (typed options of a reward model or a policy family), and
    defaults filled in from them; a ``ConfigError`` naming the key."""
    migrate_overrides: Callable[[Sequence[str]], Sequence[str]] = tuple
    """The overrides without those of keys an earlier release had (or a ``ConfigError`` naming the
    key that replaced one), before they are applied."""
    migrate: Callable[[DictConfig | dict[str, Any]], DictConfig | dict[str, Any]] = lambda raw: raw
    """A config written by an earlier release in today's keys (the same rules), before it is validated."""

    def compose(self, overrides: Sequence[str] = ()) -> RunT:
        """``configs/<config_name>.yaml`` plus Hydra-syntax ``overrides``, validated."""
        return self.validate(compose_config_module(self.config_name, self.migrate_overrides(overrides)))

    def load_file(self, path: str | Path, overrides: Sequence[str] = ()) -> RunT:
        """A resolved ``config.yaml`` (as written into checkpoints) with Hydra-syntax ``overrides``
        (e.g. ``eval.num_episodes=10``) applied, validated."""
        return load_config_file(path, self.migrate_overrides(overrides), self.validate)

    def validate(self, raw: DictConfig | dict[str, Any]) -> RunT:
        """Merge ``raw`` (migrated) into ``type`` (unknown keys and wrong types fail) and check every
        value: a ``ConfigError`` naming the key, before anything is built or loaded."""
        config = validate_structured(self.type, self.migrate(raw), [*run_checks(self.job), *self.checks()])
        self.finish(config)
        return config


def run_checks(job: str) -> list[Check[Any]]:
    """The checks of the keys the config of every job has (``RunConfig``). ``job`` is the command's:
    ``vla-rl train`` runs ``ppo``, or ``rl`` given ``recipe=NAME``; ``vla-rl sft`` runs ``sft``."""
    return [
        Check(
            "job",
            lambda c: c.job == job,
            f"is {job!r} here: `vla-rl train` runs 'ppo', `vla-rl train recipe=NAME` 'rl', "
            "`vla-rl sft` 'sft'",
        ),
        *nested("env", ENV_CHECKS),
        *positive("checkpoint_interval", "torch_num_threads", "logger.log_interval"),
        one_of("logger.wandb_mode", WANDB_MODES),
        in_unit_interval("success_target"),
    ]


def check_reward_config(config: Any) -> None:
    """``ConfigError`` for the first invalid value of the ``reward`` group of a run's ``config``, its
    model's options included (checked against the model's typed options, nothing loads)."""
    check_values(config, REWARD_CHECKS)
    reward = config.reward
    if reward.model in REWARD_MODEL_OPTIONS:
        schema: Schema[Any] = resolve(REWARD_MODEL_OPTIONS, reward.model, "reward model options")
        schema.validate(reward.options, REWARD_OPTIONS_KEY)
    elif reward.model and not is_import_path(reward.model):
        from vla_rl.rewards.registry import REWARD_MODELS

        if reward.model not in REWARD_MODELS:
            raise ConfigError(
                f"config key 'reward.model': unknown reward model {reward.model!r}; known: "
                f"{', '.join(sorted(REWARD_MODELS))} (or your own as 'package.module:builder')"
            )


def distributed_checks() -> list[Check[Any]]:
    """The checks of the ``distributed`` group (``DistributedConfig``) of a run's config, the same for
    every job that has one (state PPO, chunk RL): values, and what the env and runtime must allow."""
    return [
        one_of("distributed.runtime", RUNTIMES),
        *not_negative(
            "distributed.env_workers",
            "distributed.trainer_ranks",
            "distributed.env_worker_cpus",
            "distributed.trainer_cpus",
            "distributed.rollout_workers",
            "distributed.max_staleness",
        ),
        Check(
            "distributed.env_workers",
            lambda c: c.env.num_envs % (max(c.distributed.env_workers, 1) * c.env.pipeline_stages) == 0,
            "times env.pipeline_stages must divide env.num_envs",
        ),
        one_of("distributed.placement.mode", PLACEMENT_MODES),
        one_of("distributed.trainer_strategy", TRAINER_STRATEGIES),
        *positive("distributed.placement.num_gpus"),
        Check(
            "distributed.placement.mode",
            lambda c: c.distributed.placement.mode == "none" or c.distributed.runtime == "ray",
            "a GPU placement needs distributed.runtime=ray",
        ),
        Check(
            "distributed.trainer_ranks",
            lambda c: c.distributed.trainer_ranks <= 1 or c.distributed.runtime == "ray",
            "more than one rank needs distributed.runtime=ray",
        ),
    ]


def _train_checks() -> list[Check[TrainConfig]]:
    from vla_rl.policies.cnn import IMAGE_ENCODERS

    return [
        *distributed_checks(),
        Check(
            "distributed.trainer_ranks",
            lambda c: c.distributed.trainer_ranks == 0 or c.algorithm.name == "ppo",
            "runs the 'ppo' algorithm only",
        ),
        Check(
            "distributed.trainer_strategy",
            lambda c: c.distributed.trainer_strategy == "ddp",
            "state PPO's ranks train with ddp; fsdp2 shards the chunk policies of vla-rl train recipe=...",
        ),
        Check(
            "distributed.rollout_workers",
            lambda c: (
                c.distributed.rollout_workers == 0
                or c.distributed.env_workers == c.distributed.trainer_ranks == 0
            ),
            "(asynchronous PPO) builds the envs in its rollout workers and updates in this process: "
            "set distributed.env_workers=0 and distributed.trainer_ranks=0",
        ),
        Check(
            "distributed.trainer_ranks",
            lambda c: (
                c.distributed.trainer_ranks == 0
                or (c.algorithm.num_steps * c.env.num_envs // max(c.algorithm.num_minibatches, 1))
                % c.distributed.trainer_ranks
                == 0
            ),
            "must divide the minibatch size (num_steps * env.num_envs / num_minibatches)",
        ),
        one_of("policy.image_encoder", sorted(IMAGE_ENCODERS)),
        *nested("algorithm", ACTOR_CRITIC_CHECKS),
        *positive("algorithm.num_steps"),
        Check(
            "algorithm.num_minibatches",
            lambda c: (c.algorithm.num_steps * c.env.num_envs) % c.algorithm.num_minibatches == 0,
            "must divide num_steps * env.num_envs",
        ),
        *positive("algorithm.clip_ratio", "algorithm.learning_rate"),
        one_of("algorithm.lr_schedule", LR_SCHEDULES),
        Check(
            "algorithm.lr_decay_iterations",
            lambda c: c.algorithm.lr_schedule != "linear" or c.algorithm.lr_decay_iterations > 0,
            "must be positive with lr_schedule 'linear'",
        ),
        Check(
            "algorithm.normalize_rewards",
            lambda c: not (c.algorithm.normalize_rewards and c.reward.model),
            "cannot be on with a reward model (its rewards are scored after the rollout)",
        ),
        *positive("total_env_steps"),
        *not_negative("eval.num_episodes"),
    ]


def _finish_train_config(config: TrainConfig) -> None:
    check_reward_config(config)
    if config.env.backend == "gymnasium":
        from vla_rl.envs.gym_adapter import unknown_task_reason

        reason = unknown_task_reason(config.env.task)
        if reason is not None:
            raise ConfigError(f"config key 'env.task': {reason}")
    if config.policy.hidden_sizes is None:
        from vla_rl.sims.tasks.registry import default_policy_hidden_sizes

        task_sizes = default_policy_hidden_sizes(config.env.task)
        config.policy.hidden_sizes = task_sizes if task_sizes is not None else config.policy.head_sizes()
    if config.algorithm.normalize_rewards is None:
        # Rewards of an arbitrary Gymnasium env may be of any scale; the built-in tasks' are not.
        config.algorithm.normalize_rewards = config.env.backend == "gymnasium" and not config.reward.model


TRAIN_JOB = JobSchema("ppo", TrainConfig, "train", _train_checks, _finish_train_config)
"""``vla-rl train``'s job: PPO of a state or pixel policy."""
compose_train_config = TRAIN_JOB.compose
load_train_config_file = TRAIN_JOB.load_file
