"""Compose ``configs/sft.yaml`` with Hydra and validate it against ``SFTConfig`` before any work starts.

An unknown key, a wrong type or an out-of-range value is a ``ConfigError`` naming the dotted key;
``policy.kwargs`` are checked against the family's typed settings (``policy_settings``).
"""

from __future__ import annotations

from vla_rl.config.load import JobSchema
from vla_rl.config.structured import Check, in_unit_interval, not_negative, positive
from vla_rl.training.sft.config import SFTConfig
from vla_rl.training.sft.policy_settings import check_policy_kwargs


def _sft_checks() -> list[Check[SFTConfig]]:
    return [
        Check("policy.name", lambda c: bool(c.policy.name), "must name a registered chunk policy"),
        *positive("steps", "batch_size", "optim.learning_rate"),
        *not_negative("optim.weight_decay"),
        Check(
            "optim.betas",
            lambda c: len(c.optim.betas) == 2 and all(0 <= b < 1 for b in c.optim.betas),
            "must be two values in [0, 1)",
        ),
        *not_negative("optim.warmup_steps"),
        in_unit_interval("optim.min_lr_ratio"),
        *positive("optim.grad_accum_steps"),
        Check(
            "data.action_quantiles",
            lambda c: (
                len(c.data.action_quantiles) == 2
                and 0 <= c.data.action_quantiles[0] < c.data.action_quantiles[1] <= 1
            ),
            "must be two increasing values in [0, 1]",
        ),
        *positive("eval.temperature", "data.intervention_repeats"),
    ]


SFT_JOB = JobSchema(
    "sft", SFTConfig, "sft", _sft_checks, lambda cfg: check_policy_kwargs(cfg.policy.name, cfg.policy.kwargs)
)
"""``vla-rl sft``'s job: supervised fine-tuning of a chunk policy."""
compose_sft_config = SFT_JOB.compose
load_sft_config_file = SFT_JOB.load_file
validate_sft_config = SFT_JOB.validate
