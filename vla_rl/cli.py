"""``vla-rl``: train and evaluate from the command line.

    vla-rl train [overrides...] [--resume PATH]
    vla-rl train recipe=NAME policy.init_from=SFT_RUN [overrides...]   (RL of a VLA / flow policy)
    vla-rl train algorithm=sac|rlpd [demos.path=DATASET] [overrides...]   (off-policy, state tasks)
    vla-rl eval --checkpoint PATH [overrides...]
    vla-rl collect [overrides...]
    vla-rl export --format lerobot RUN_OR_CHECKPOINT OUT_DIR [--keep-lora] [--force]
    vla-rl sft [overrides...] [--resume PATH]
    vla-rl reward-train [overrides...]
    vla-rl deploy checkpoint=RUN [overrides...]       (a trained policy on a robot over ROS)
    vla-rl sim-robot checkpoint=RUN [overrides...]    (the simulated robot as a ROS node)
    vla-rl policy-server checkpoint=RUN [overrides...]
    vla-rl learn-online [--rehearsal] [--role learner|actor] [overrides...]   (learning on robots)

Which job ``train`` runs (``ppo``; ``rl`` given a recipe; ``off_policy`` given
``algorithm=sac|rlpd``) and how ``--resume PATH`` and ``resume=auto`` find a run's config:
``vla_rl.training.jobs``. Overrides use Hydra syntax
(``env=push algorithm.learning_rate=3e-4 env.num_envs=128``) and are validated against the typed
schema before anything is built.
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
import math  # noqa: E402
import sys  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from pathlib import Path  # noqa: E402

from vla_rl.config import ConfigError  # noqa: E402
from vla_rl.config.load import compose_config_module  # noqa: E402
from vla_rl.real_world.cli import DEPLOY_COMMANDS, add_deploy_parsers  # noqa: E402
from vla_rl.training.collect_cli import add_collect_parser, collect_command  # noqa: E402
from vla_rl.training.export_cli import add_export_parser, export_command  # noqa: E402
from vla_rl.training.jobs import (  # noqa: E402
    job_config,
    job_of_checkpoint,
    override_value,
    resolve_run_checkpoint,
    train_job,
)

EXIT_BELOW_TARGET = 1
EXIT_CONFIG_ERROR = 2
EXIT_INTERRUPTED = 130
EVAL_JOB_KEYS = ("checkpoint", "output_dir")
"""Keys of ``configs/eval.yaml``; every other override applies to the checkpoint's training config."""
EVAL_SPLIT_KEY = "eval.split"
"""What ``vla-rl eval`` measures; the checkpoint's ``env.split`` is the distribution it trained on."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
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


def build_parser() -> argparse.ArgumentParser:
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
    add_export_parser(sub)
    sft = sub.add_parser("sft", help="supervised fine-tuning of a chunk policy on demonstrations")
    sft.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. data.path=DIR data.max_episodes=50")
    sft.add_argument("--resume", metavar="PATH", help="run or checkpoint folder to continue exactly")
    reward_train = sub.add_parser(
        "reward-train", help="fit a success/progress reward model on demonstrations and failures"
    )
    reward_train.add_argument(
        "overrides", nargs="*", help="Hydra overrides, e.g. task=push datasets=[DIR,...]"
    )
    add_deploy_parsers(sub)
    return parser


def train_command(args: argparse.Namespace) -> int:
    """PPO of a state policy, an off-policy learner (SAC, RLPD), or RL fine-tuning of a chunk policy
    (``vla_rl.training.jobs``)."""
    overrides = list(args.overrides)
    resume = args.resume or override_value(overrides, "resume")
    job = train_job(overrides, resume)
    if job == "sft":
        raise ConfigError(
            f"config key 'resume': {resume} is a 'sft' run: continue it with `vla-rl sft --resume`"
        )
    cfg = job_config(job, overrides, resume)
    if job == "rl":
        return _train_rl(cfg)
    if job == "off_policy":
        return _train_off_policy(cfg)
    from vla_rl.training.runner import Trainer

    trainer = Trainer(cfg)
    try:
        result = trainer.train()
        print(f"trained {result.iterations} iterations, {result.env_steps} env steps in {_took(result)}")
        evaluated = result.stop_reason != "interrupted" and cfg.eval.num_episodes > 0
        evaluation = trainer.evaluate() if evaluated else None
    finally:
        trainer.close()
    return _final_evaluation(result.stop_reason, evaluation, cfg.success_target)


def _train_off_policy(cfg) -> int:  # noqa: ANN001 - OffPolicyConfig; imported lazily
    """Train SAC / RLPD; the last evaluation decides the exit status against ``success_target``."""
    from vla_rl.training.off_policy.trainer import OffPolicyTrainer

    trainer = OffPolicyTrainer(cfg)
    try:
        if cfg.source == "remote":  # actors elsewhere send the transitions (docs/guide/off_policy.md)
            from vla_rl.real_world.learner_server import learner_server, serve_learner

            try:
                server = learner_server(trainer)
            except ValueError as error:  # a non-loopback host without a token
                raise ConfigError(f"config key 'remote.token': {error}") from None
            result = serve_learner(trainer, server)
        else:
            result = trainer.train()
    finally:
        trainer.close()
    print(f"trained {result.iterations} updates, {result.env_steps} env steps in {_took(result)}")
    for env_steps, evaluation in result.evaluations:
        print(f"env step {env_steps}: success {100 * evaluation.success_rate:.1f} %")
    if result.stop_reason == "interrupted":
        return EXIT_INTERRUPTED
    final = result.evaluations[-1][1].success_rate if result.evaluations else 0.0
    return _check_target(final, cfg.success_target)


def _train_rl(cfg) -> int:  # noqa: ANN001 - VLARLConfig; imported lazily
    """Train; print the success before and after RL on every evaluated split."""
    from vla_rl.training.chunk_rl.trainer import ChunkRLTrainer

    trainer = ChunkRLTrainer(cfg)
    try:
        result = trainer.train()
    finally:
        trainer.close()
    print(f"trained {result.iterations} iterations in {_took(result)}")
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
    return _check_target(0.0 if math.isnan(final) else final, cfg.success_target)


def sft_command(args: argparse.Namespace) -> int:
    """Train, print the final evaluation; exit 1 below ``success_target``, 130 when interrupted."""
    cfg = job_config("sft", list(args.overrides), args.resume)
    from vla_rl.training.sft.trainer import SFTTrainer

    result = SFTTrainer(cfg).train()
    print(f"trained {result.steps} steps in {_took(result)}")
    return _final_evaluation(result.stop_reason, result.final_eval, cfg.success_target)


def _took(result) -> str:  # noqa: ANN001 - RunResult; imported lazily
    """How long a run took, why it stopped and its last checkpoint, for the ``trained ...`` line."""
    return f"{result.wall_time_s / 60:.2f} min ({result.stop_reason}); checkpoint: {result.last_checkpoint}"


def _final_evaluation(stop_reason: str, evaluation, target: float | None) -> int:  # noqa: ANN001 - EvalResult
    """Print the final evaluation; 130 when the run was interrupted, 0 without an evaluation, else
    ``_check_target``'s exit code."""
    if stop_reason == "interrupted":
        return EXIT_INTERRUPTED
    if evaluation is None:
        return 0
    _print_eval(evaluation)
    return _check_target(evaluation.success_rate, target)


def reward_train_command(args: argparse.Namespace) -> int:
    """Train, save, print the held-out measurements. Overrides use Hydra syntax against
    ``configs/reward_train.yaml`` (``task=push datasets=[datasets/push_demos,datasets/push_failures]
    eval_datasets=[datasets/push_heldout] model.cameras=[front,wrist]``)."""
    from vla_rl.rewards.fit import train_reward_model
    from vla_rl.rewards.train_config import compose_reward_train_config

    cfg = compose_reward_train_config(list(args.overrides))
    result = train_reward_model(cfg)
    print(
        f"trained on {result.train_frames} frames in {result.train_time_s / 60:.2f} min "
        f"(final loss {result.final_loss:.4f}); model: {cfg.output_dir}"
    )
    if result.quality is not None:
        q = result.quality
        true = "n/a" if q.progress_spearman_true is None else f"{q.progress_spearman_true:.3f}"
        print(
            f"held-out ({q.episodes} episodes, {q.frames} frames): success AUROC {q.success_auroc:.3f}, "
            f"progress Spearman vs labels {q.progress_spearman_labels:.3f}, vs true progress {true}"
        )
    return 0


def eval_command(args: argparse.Namespace) -> int:
    split = override_value(list(args.overrides), "env.split")
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
    from vla_rl.config import load_train_config_file
    from vla_rl.training.checkpoint import CONFIG_FILENAME, load_trained_actor_critic

    directory = resolve_run_checkpoint(checkpoint_arg, "checkpoint")
    run_job = job_of_checkpoint(directory)
    if run_job != "ppo":
        raise ConfigError(
            f"config key 'checkpoint': {checkpoint_arg} is a {run_job!r} run; `vla-rl eval` evaluates "
            f"`vla-rl train` PPO runs (RL and SFT runs evaluate themselves: see their eval/ folder)"
        )
    cfg = load_train_config_file(directory / CONFIG_FILENAME, train_overrides)
    output_dir = Path(job.output_dir) if job.output_dir else directory.parent.parent / "eval" / directory.name

    import torch

    from vla_rl.training.evaluate import evaluate_run

    torch.set_num_threads(cfg.torch_num_threads)
    policy = load_trained_actor_critic(cfg, directory).to(cfg.env.device)
    result = evaluate_run(policy, cfg, output_dir)
    _print_eval(result)
    print(f"outputs: {output_dir}")
    return _check_target(result.success_rate, cfg.success_target)


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
    "export": export_command,
    "sft": sft_command,
    "reward-train": reward_train_command,
    **DEPLOY_COMMANDS,
}

if __name__ == "__main__":
    sys.exit(main())
