"""``vla-rl``: train and evaluate from the command line.

    vla-rl train [overrides...] [--resume PATH]
    vla-rl train recipe=NAME policy.init_from=SFT_RUN [overrides...]   (RL of a VLA / flow policy)
    vla-rl eval --checkpoint PATH [overrides...]
    vla-rl collect [overrides...]
    vla-rl sft [overrides...] [--resume PATH]
    vla-rl reward-train [overrides...]
    vla-rl deploy checkpoint=RUN [overrides...]       (a trained policy on a robot over ROS)
    vla-rl sim-robot checkpoint=RUN [overrides...]    (the simulated robot as a ROS node)
    vla-rl policy-server checkpoint=RUN [overrides...]

Overrides use Hydra syntax (``env=push algorithm.learning_rate=3e-4 env.num_envs=128``) and are
validated against the typed schema before anything is built.
"""

from __future__ import annotations

import os

# Libraries' tqdm bars stay off (tqdm reads this on import); the run's own bars pass ``disable``
# (vla_rl/training/progress.py).
os.environ.setdefault("TQDM_DISABLE", "1")

# Headless rendering and offline W&B unless the caller chose otherwise; set before the simulator
# and wandb are imported.
import vla_rl.sims  # noqa: E402, F401 - sets MUJOCO_GL when headless; imports no simulator

if os.environ.get("MUJOCO_GL") in ("egl", "osmesa", "glx"):
    os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])
os.environ.setdefault("WANDB_MODE", "offline")

import argparse  # noqa: E402
import logging  # noqa: E402
import sys  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from pathlib import Path  # noqa: E402

from vla_rl.config import ConfigError, TrainConfig, compose_train_config, load_train_config_file  # noqa: E402
from vla_rl.config.load import compose_config_module  # noqa: E402
from vla_rl.real_world.cli import DEPLOY_COMMANDS, add_deploy_parsers  # noqa: E402
from vla_rl.rewards.cli import add_reward_train_parser, reward_train_command  # noqa: E402
from vla_rl.training.collect_cli import add_collect_parser, collect_command  # noqa: E402
from vla_rl.training.sft.cli import add_sft_parser, sft_command  # noqa: E402

EXIT_BELOW_TARGET = 1
EXIT_CONFIG_ERROR = 2
EXIT_INTERRUPTED = 130
EVAL_JOB_KEYS = ("checkpoint", "output_dir")
"""Keys of ``configs/eval.yaml``; every other override applies to the checkpoint's training config."""
EVAL_SPLIT_KEY = "eval.split"
"""What ``vla-rl eval`` measures; the checkpoint's ``env.split`` is the distribution it trained on."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("OpenGL").setLevel(logging.WARNING)
    if args.command is None:
        parser.print_help()
        return EXIT_CONFIG_ERROR
    try:
        return COMMANDS[args.command](args)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vla-rl", description="Train and evaluate robot manipulation policies with RL."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    train = sub.add_parser("train", help="train a policy (default job: PPO on reach)")
    train.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. env=push env.num_envs=128")
    train.add_argument("--resume", metavar="PATH", help="run or checkpoint folder to continue exactly")
    evaluate = sub.add_parser("eval", help="evaluate a checkpoint, print the success rate, write videos")
    evaluate.add_argument("overrides", nargs="*", help="e.g. eval.num_episodes=128 eval.split=ood_all")
    evaluate.add_argument("--checkpoint", metavar="PATH", help="run or checkpoint folder")
    add_collect_parser(sub)
    add_sft_parser(sub)
    add_reward_train_parser(sub)
    add_deploy_parsers(sub)
    return parser


def train_command(args: argparse.Namespace) -> int:
    from vla_rl.training.chunk_rl.cli import is_rl_job, rl_train_command

    resume = args.resume or _override_value(list(args.overrides), "resume")
    if is_rl_job(list(args.overrides), resume):
        return rl_train_command([o for o in args.overrides if not o.startswith("resume=")], resume)
    cfg = _train_config(list(args.overrides), args.resume)
    from vla_rl.training.runner import Trainer

    trainer = Trainer(cfg)
    try:
        result = trainer.train()
        print(
            f"trained {result.iterations} iterations, {result.env_steps} env steps in "
            f"{result.wall_time_s / 60:.2f} min ({result.stop_reason}); checkpoint: {result.last_checkpoint}"
        )
        if result.stop_reason == "interrupted":
            return EXIT_INTERRUPTED
        if cfg.eval.num_episodes <= 0:
            return 0
        evaluation = trainer.evaluate()
    finally:
        trainer.close()
    _print_eval(evaluation)
    return _check_target(evaluation.success_rate, cfg.success_target)


def _train_config(overrides: list[str], resume: str | None) -> TrainConfig:
    """The composed default config, or, when resuming, the run's own config; overrides on top."""
    resume = resume or _override_value(overrides, "resume")
    if resume is None or resume == "auto":
        return compose_train_config(overrides)
    from vla_rl.training.checkpoint import CONFIG_FILENAME, resolve_checkpoint_dir

    checkpoint = _resolve(resume, resolve_checkpoint_dir)
    overrides = [o for o in overrides if not o.startswith("resume=")] + [f"resume={checkpoint}"]
    return load_train_config_file(checkpoint / CONFIG_FILENAME, overrides)


def eval_command(args: argparse.Namespace) -> int:
    split = _override_value(list(args.overrides), "env.split")
    if split is not None:
        raise ConfigError(
            f"config key 'env.split': vla-rl eval measures the split that {EVAL_SPLIT_KEY} names (env.split "
            f"is the one the checkpoint trained on); give {EVAL_SPLIT_KEY}={split}"
        )
    job_overrides = [o for o in args.overrides if o.split("=", 1)[0].lstrip("+") in EVAL_JOB_KEYS]
    train_overrides = [o for o in args.overrides if o not in job_overrides]
    job = compose_config_module("eval", job_overrides)
    checkpoint_arg = args.checkpoint or job.checkpoint
    if not checkpoint_arg:
        raise ConfigError("config key 'checkpoint': give --checkpoint PATH (a run or checkpoint folder)")
    from vla_rl.training.checkpoint import CONFIG_FILENAME, load_trained_actor_critic, resolve_checkpoint_dir

    directory = _resolve(checkpoint_arg, resolve_checkpoint_dir)
    cfg = load_train_config_file(directory / CONFIG_FILENAME, train_overrides)
    output_dir = Path(job.output_dir) if job.output_dir else directory.parent.parent / "eval" / directory.name

    import torch

    from vla_rl.training.evaluate import evaluate

    torch.set_num_threads(cfg.torch_num_threads)
    policy = load_trained_actor_critic(cfg, directory).to(cfg.env.device)
    result = evaluate(
        policy,
        cfg.env,
        cfg.eval.num_episodes,
        deterministic=cfg.eval.deterministic,
        video_dir=output_dir if cfg.eval.video else None,
        split=cfg.eval.split,
        num_envs=cfg.eval.num_envs,
        video_envs=cfg.eval.video_envs,
        video_camera=cfg.eval.video_camera,
        video_size=cfg.eval.video_size,
        seed=cfg.seed + 1_000_003,
        summary_path=output_dir / "eval_summary.json",
    )
    _print_eval(result)
    print(f"outputs: {output_dir}")
    return _check_target(result.success_rate, cfg.success_target)


def _resolve(path: str, resolver) -> Path:  # noqa: ANN001 - resolve_checkpoint_dir
    try:
        return resolver(path).resolve()
    except FileNotFoundError as error:
        raise ConfigError(str(error)) from None


def _override_value(overrides: list[str], key: str) -> str | None:
    for override in overrides:
        name, _, value = override.partition("=")
        if name.lstrip("+~") == key:
            return None if value in ("", "null") else value
    return None


def _print_eval(result) -> None:  # noqa: ANN001 - EvalResult; imported lazily
    print(
        f"evaluation ({result.num_episodes} episodes, split {result.split}): "
        f"success rate {100 * result.success_rate:.1f} %, success at any step "
        f"{100 * result.success_once_rate:.1f} %, mean return {result.mean_return:.2f}"
    )
    if result.video_path:
        print(f"video: {result.video_path}")


def _check_target(success_rate: float, target: float | None) -> int:
    if target is not None and success_rate < target:
        print(f"success rate {100 * success_rate:.1f} % is below the target {100 * target:.1f} %")
        return EXIT_BELOW_TARGET
    return 0


COMMANDS = {
    "train": train_command,
    "eval": eval_command,
    "collect": collect_command,
    "sft": sft_command,
    "reward-train": reward_train_command,
    **DEPLOY_COMMANDS,
}

if __name__ == "__main__":
    sys.exit(main())
