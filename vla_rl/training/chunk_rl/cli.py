"""``vla-rl train recipe=NAME policy.init_from=SFT_RUN [overrides...]``: RL fine-tuning of a chunk policy.

Giving a ``recipe`` (``configs/recipe``) selects ``configs/rl.yaml``; without one, ``vla-rl train``
runs the state-policy PPO job of ``configs/train.yaml``.
"""

from __future__ import annotations

import math
from pathlib import Path

import yaml

from vla_rl.config.load import ConfigError
from vla_rl.training.chunk_rl.config import VLARLConfig

EXIT_BELOW_TARGET = 1
EXIT_INTERRUPTED = 130
RECIPE_KEY = "recipe"


def is_rl_job(overrides: list[str], resume: str | None) -> bool:
    """A recipe override, or a resumed run whose config is an RL fine-tuning config."""
    if any(o.split("=", 1)[0].lstrip("+~") == RECIPE_KEY for o in overrides):
        return True
    if resume and resume != "auto":
        from vla_rl.training.checkpoint import CONFIG_FILENAME, resolve_checkpoint_dir

        try:
            config_path = resolve_checkpoint_dir(resume) / CONFIG_FILENAME
        except FileNotFoundError:
            return False
        saved = yaml.safe_load(config_path.read_text()) or {}
        return "execute_steps" in (saved.get("algorithm") or {})
    return False


def rl_config_from_args(overrides: list[str], resume: str | None) -> VLARLConfig:
    from vla_rl.training.chunk_rl.config_load import compose_rl_config, load_rl_config_file

    if resume is None or resume == "auto":
        return compose_rl_config([*overrides, *(["resume=auto"] if resume == "auto" else [])])
    from vla_rl.training.checkpoint import CONFIG_FILENAME, resolve_checkpoint_dir

    try:
        checkpoint = resolve_checkpoint_dir(resume).resolve()
    except FileNotFoundError as error:
        raise ConfigError(str(error)) from None
    kept = [o for o in overrides if o.split("=", 1)[0].lstrip("+~") not in ("resume", RECIPE_KEY)]
    return load_rl_config_file(Path(checkpoint) / CONFIG_FILENAME, [*kept, f"resume={checkpoint}"])


def rl_train_command(overrides: list[str], resume: str | None) -> int:
    cfg = rl_config_from_args(overrides, resume)
    from vla_rl.training.chunk_rl.trainer import ChunkRLTrainer

    trainer = ChunkRLTrainer(cfg)
    try:
        result = trainer.train()
    finally:
        trainer.close()
    print(
        f"trained {result.iterations} iterations in {result.wall_time_s / 60:.2f} min "
        f"({result.stop_reason}); checkpoint: {result.last_checkpoint}"
    )
    for split in [cfg.env.split, *cfg.eval.ood_splits]:
        before, after = result.success(0, split), result.success(result.iterations, split)
        if math.isnan(before) and math.isnan(after):
            continue
        after_text = (
            "not evaluated after (max_minutes)" if math.isnan(after) else f"{100 * after:.1f} % after"
        )
        print(f"success on {split}: {100 * before:.1f} % before RL, {after_text}")
    if result.stop_reason == "interrupted":
        return EXIT_INTERRUPTED
    final = result.success(result.iterations, cfg.env.split)
    if cfg.success_target is not None and not final >= cfg.success_target:
        print(f"success rate {100 * final:.1f} % is below the target {100 * cfg.success_target:.1f} %")
        return EXIT_BELOW_TARGET
    return 0
