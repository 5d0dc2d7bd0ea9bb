"""``vla-rl sft [overrides...] [--resume PATH]``: fine-tune a chunk policy on demonstrations.

Overrides use Hydra syntax against ``configs/sft.yaml`` (``data.path=DIR data.max_episodes=50
sft/policy=token_vla optim.learning_rate=3e-4``). Resuming reads the run's own ``config.yaml``
from the checkpoint and applies the overrides on top.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from vla_rl.config.load import ConfigError
from vla_rl.training.sft.config import SFTConfig

EXIT_BELOW_TARGET = 1
EXIT_INTERRUPTED = 130


def add_sft_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``sft`` sub-command to a ``vla-rl`` sub-parser set."""
    parser = subparsers.add_parser("sft", help="supervised fine-tuning of a chunk policy on demonstrations")
    parser.add_argument(
        "overrides", nargs="*", help="Hydra overrides, e.g. data.path=DIR data.max_episodes=50"
    )
    parser.add_argument("--resume", metavar="PATH", help="run or checkpoint folder to continue exactly")
    return parser


def sft_command(args: argparse.Namespace) -> int:
    """Train, print the final evaluation; exit 1 below ``success_target``, 130 when interrupted."""
    cfg = sft_config_from_args(list(args.overrides), args.resume)
    from vla_rl.training.sft.trainer import SFTTrainer

    result = SFTTrainer(cfg).train()
    print(
        f"trained {result.steps} steps in {result.wall_time_s / 60:.2f} min ({result.stop_reason}); "
        f"checkpoint: {result.last_checkpoint}"
    )
    if result.stop_reason == "interrupted":
        return EXIT_INTERRUPTED
    evaluation = result.final_eval
    if evaluation is None:
        return 0
    print(
        f"evaluation ({evaluation.num_episodes} episodes, split {evaluation.split}): success rate "
        f"{100 * evaluation.success_rate:.1f} %, success at any step "
        f"{100 * evaluation.success_once_rate:.1f} %, mean return {evaluation.mean_return:.2f}"
    )
    if evaluation.video_path:
        print(f"video: {evaluation.video_path}")
    target = cfg.success_target
    if target is not None and evaluation.success_rate < target:
        print(f"success rate {100 * evaluation.success_rate:.1f} % is below the target {100 * target:.1f} %")
        return EXIT_BELOW_TARGET
    return 0


def sft_config_from_args(overrides: list[str], resume: str | None) -> SFTConfig:
    """The composed ``sft`` config, or, when resuming from a path, the run's own config; overrides on top."""
    from vla_rl.training.sft.config_load import compose_sft_config, load_sft_config_file

    resume = resume or _override_value(overrides, "resume")
    if resume is None or resume == "auto":
        if resume == "auto" and _override_value(overrides, "resume") is None:
            overrides = [*overrides, "resume=auto"]
        return compose_sft_config(overrides)
    from vla_rl.training.checkpoint import CONFIG_FILENAME, resolve_checkpoint_dir

    try:
        checkpoint = resolve_checkpoint_dir(resume).resolve()
    except FileNotFoundError as error:
        raise ConfigError(str(error)) from None
    overrides = [o for o in overrides if o.split("=", 1)[0].lstrip("+~") != "resume"]
    return load_sft_config_file(Path(checkpoint) / CONFIG_FILENAME, [*overrides, f"resume={checkpoint}"])


def _override_value(overrides: list[str], key: str) -> str | None:
    for override in overrides:
        name, _, value = override.partition("=")
        if name.lstrip("+~") == key:
            return None if value in ("", "null") else value
    return None
