"""MetaWorld MT10 end to end, one policy for the ten tasks: expert demonstrations -> SFT -> RL, each
stage scored by MetaWorld's own protocol (``benchmarks.metaworld_protocol``).

1. ``--demos-per-task`` expert episodes of every task (MetaWorld's scripted experts, xyz noise 0.3 on
   the executed action, the clean action kept as the label), on variations MetaWorld samples afresh
   for each episode (``env.options.variations: sampled``), not the benchmark's fixed 50;
2. ``vla-rl sft`` of a state flow policy (``flow_mlp``) on MetaWorld's 39-D observation and the
   task's one-hot vector (``task_onehot``, as MetaWorld's ``use_one_hot=True``), ``--sft-steps``;
3. ``vla-rl train`` from that checkpoint: GRPO over Flow-SDE chains (``recipe=pi0_flow_sde``'s
   algorithm and exploration), ``--worlds`` worlds in blocks of one task so that each group of 4
   (one reset seed) holds one task, ``--updates`` updates (the budget), ``--max-minutes`` as a cap;
4. the protocol (50 fixed variations per task, 500 steps, success at any step) on the SFT checkpoint
   and on the RL run's last one.

Why state and not pixels: MetaWorld renders its ``corner`` camera at about 100 env-steps/s here
(``benchmarks.backends_table``), so one protocol evaluation of a pixel policy (up to 250,000 env
steps) would take 40 minutes; ``benchmarks.metaworld_sft_rl`` runs pi0 on pixels for four tasks.
Runs in ``.venv-metaworld``:

    .venv-metaworld/bin/python -m benchmarks.metaworld_mt10_sft_rl [--summarise]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from benchmarks.common import RESULTS_DIR, add_results_name, machine_line, run_logged
from benchmarks.metaworld_protocol import (
    EPISODES_PER_TASK,
    ProtocolResult,
    policy_executor_factory,
    protocol_env_config,
    run_protocol,
)

TASK = "MT10"
GROUP_SIZE = 4


def policy_overrides(num_tasks: int) -> list[str]:
    """The SFT policy: flow_mlp on the 39-D observation and the task's one-hot vector."""
    return [
        "sft/policy=flow_mlp",
        "policy.kwargs.vector_obs_dims.proprio=0",
        "policy.kwargs.vector_obs_dims.privileged=39",
        f"+policy.kwargs.vector_obs_dims.task_onehot={num_tasks}",
        "policy.kwargs.hidden_sizes=[256,256]",
        "+policy.kwargs.feature_dim=128",
    ]


QUIET = ("logger.wandb_mode=disabled", "torch_num_threads=2")


def stage_commands(args: argparse.Namespace) -> dict[str, list[str]]:
    """The three stages' command lines (collection, SFT, RL), in the order they run."""
    root = args.root
    data, sft, rl = root / "demos", root / "sft", root / "rl"
    cli = [sys.executable, "-m", "vla_rl.cli"]
    env = ["env=metaworld", f"env.task={args.task}", "env.cameras=[]"]
    num_tasks = len(_tasks(args.task))
    episodes = args.demos_per_task * num_tasks
    return {
        "collect": [
            sys.executable, "-m", "vla_rl.data.metaworld_collect", args.task, "--episodes", str(episodes),
            "--output", str(data), "--num-envs", "10", "--cameras", "--max-steps", str(args.episode_steps),
            "--noise-std", "0.3", "--seed", "0",
        ],
        "sft": [
            *cli, "sft", *env, f"data.path={data}", "data.action_key=expert_action",
            *policy_overrides(num_tasks), f"steps={args.sft_steps}", "eval.interval=0",
            "eval.num_episodes=0", *QUIET, f"run_dir={sft}",
        ],
        "rl": [
            *cli, "train", "recipe=pi0_flow_sde", "policy.name=flow_mlp", "policy.freeze=[]", *env,
            f"env.num_envs={args.worlds}", f"env.max_episode_steps={args.episode_steps}",
            "+env.options.task_layout=blocks", f"algorithm.group_size={GROUP_SIZE}",
            f"algorithm.actor_lr={args.actor_lr}", f"policy.init_from={sft}", f"iterations={args.updates}",
            f"max_minutes={args.max_minutes}", "eval.num_episodes=0", "eval.interval=0", *QUIET,
            f"run_dir={rl}",
        ],
    }  # fmt: skip


def _tasks(task: str) -> tuple[str, ...]:
    from vla_rl.sims.metaworld.tasks import benchmark_tasks

    return benchmark_tasks(task)


def evaluate(policy_dir: Path, args: argparse.Namespace, label: str) -> ProtocolResult:
    cfg = protocol_env_config(args.task, worlds_per_task=args.eval_worlds_per_task)
    factory = policy_executor_factory(policy_dir, "flow_mlp")
    return run_protocol(cfg, args.episodes_per_task, factory, f"flow_mlp {label}")


def rl_log(rl_dir: Path) -> dict[str, float]:
    """Updates, env steps of the RL rollouts (all sampling rounds) and the rollouts' success rate over
    the first and the last ten updates, from the run's TensorBoard log."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(rl_dir / "tensorboard")).Reload()
    env_steps = [point.value for point in events.Scalars("rollout/env_steps")]
    success = [point.value for point in events.Scalars("rollout/success_rate")]
    return {
        "updates": len(env_steps),
        "env_steps": int(sum(env_steps)),
        "rollout_success_first_10": sum(success[:10]) / len(success[:10]),
        "rollout_success_last_10": sum(success[-10:]) / len(success[-10:]),
    }


def summary_table(sft: ProtocolResult, rl: ProtocolResult) -> str:
    lines = ["| task | SFT | SFT + RL |", "|---|---:|---:|"]
    for task, rate in sft.success_by_task.items():
        lines.append(f"| {task} | {100 * rate:.1f} % | {100 * rl.success_by_task[task]:.1f} % |")
    lines.append(f"| **mean** | **{100 * sft.mean_success:.1f} %** | **{100 * rl.mean_success:.1f} %** |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("runs/bench/metaworld_mt10_sft_rl"))
    parser.add_argument("--task", default=TASK, help="MT10, or some of its tasks joined by '+' (checks)")
    parser.add_argument("--demos-per-task", type=int, default=50)
    parser.add_argument(
        "--episode-steps", type=int, default=200, help="demonstrations' and RL episodes' limit"
    )
    parser.add_argument("--sft-steps", type=int, default=5000)
    parser.add_argument("--worlds", type=int, default=40, help="RL worlds (a multiple of 4 x tasks)")
    parser.add_argument("--updates", type=int, default=100, help="the RL budget in updates")
    parser.add_argument("--max-minutes", type=float, default=60.0, help="RL wall-clock cap")
    parser.add_argument("--actor-lr", type=float, default=1e-4)
    parser.add_argument("--episodes-per-task", type=int, default=EPISODES_PER_TASK)
    parser.add_argument("--eval-worlds-per-task", type=int, default=5)
    parser.add_argument("--summarise", action="store_true", help="only evaluate the finished stages")
    add_results_name(parser, "metaworld_mt10_sft_rl")
    args = parser.parse_args(argv)
    minutes = {}
    if not args.summarise:
        args.root.mkdir(parents=True, exist_ok=True)
        for stage, command in stage_commands(args).items():
            minutes[stage] = run_logged(command, args.root / f"{stage}.log") / 60.0
    sft = evaluate(args.root / "sft", args, "after SFT")
    rl = evaluate(args.root / "rl", args, "after SFT + RL")
    log = rl_log(args.root / "rl")
    table = summary_table(sft, rl)
    print(table)
    print(f"RL: {log['updates']} updates, {log['env_steps']:,} env steps; stage minutes {minutes}")
    result = {
        "machine": machine_line(),
        "settings": {k: str(v) for k, v in vars(args).items()},
        "minutes": minutes,
        "rl": log,
        "sft": {**vars(sft), "mean_success": sft.mean_success},
        "sft_rl": {**vars(rl), "mean_success": rl.mean_success},
    }
    path = RESULTS_DIR / f"{args.results_name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
