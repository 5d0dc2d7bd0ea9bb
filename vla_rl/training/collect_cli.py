"""``vla-rl collect [overrides...]``: record scripted-expert demonstrations as a LeRobot dataset.

Overrides use Hydra syntax against ``configs/collect.yaml`` (``env=push num_episodes=200
output_dir=datasets/push noise_std=0.1 env.cameras=[front,wrist] video.lossless=true``).
"""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path

from vla_rl.config.structured import ConfigError
from vla_rl.data.lerobot_layout import INFO_PATH

EXIT_TOO_FEW_EPISODES = 1


def add_collect_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``collect`` sub-command to a ``vla-rl`` sub-parser set."""
    parser = subparsers.add_parser("collect", help="record scripted-expert demonstrations (LeRobot dataset)")
    parser.add_argument(
        "overrides",
        nargs="*",
        help="Hydra overrides, e.g. env=push num_episodes=200 output_dir=datasets/push",
    )
    return parser


def collect_command(args: argparse.Namespace) -> int:
    """Collect, print a summary; exit 1 when fewer episodes than asked were written."""
    from vla_rl.data.collect import collect_demonstrations
    from vla_rl.data.config import compose_collect_config
    from vla_rl.training.policy_actor import CheckpointActor

    cfg = compose_collect_config(list(args.overrides))
    if (Path(cfg.output_dir) / INFO_PATH).exists() and not cfg.append:
        raise ConfigError(
            f"config key 'output_dir': {cfg.output_dir} already holds a dataset; "
            "pass append=true to add episodes to it or choose another output_dir"
        )
    if cfg.append and (Path(cfg.output_dir) / INFO_PATH).exists():
        from vla_rl.data.lerobot_format import dataset_version

        existing = dataset_version(cfg.output_dir)
        if existing != cfg.codebase_version:
            raise ConfigError(
                f"config key 'codebase_version': {cfg.output_dir} holds a {existing} dataset; "
                f"append to it with codebase_version={existing}"
            )
    make_actor = None
    if cfg.policy_checkpoint:
        make_actor = partial(
            CheckpointActor,
            checkpoint=cfg.policy_checkpoint,
            deterministic=cfg.policy_deterministic,
            seed=cfg.seed,
        )
    result = collect_demonstrations(cfg, make_actor)
    print(
        f"wrote {result.episodes_written} episodes ({result.frames_written} frames) to {result.path} in "
        f"{result.wall_time_s:.1f} s ({result.episodes_per_minute:.1f} episodes/min); "
        f"{'policy' if cfg.policy_checkpoint else 'expert'} success "
        f"{100 * result.success_rate:.1f} % over {result.episodes_attempted} attempts"
    )
    if result.episodes_written < cfg.num_episodes:
        print(f"only {result.episodes_written} of the {cfg.num_episodes} requested episodes were written")
        return EXIT_TOO_FEW_EPISODES
    return 0
