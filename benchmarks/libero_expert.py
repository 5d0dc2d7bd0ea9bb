"""The scripted LIBERO expert's success per task on the 50 fixed initial states of each task.

One world per task of each suite, every world playing its task's initial states in the protocol
order (``env.options.init_states: protocol``: states 0, 1, ..., 49), the suite's step limit, 10
settling steps; the expert (``vla_rl.sims.libero.expert``) reads the privileged state, so no camera
is rendered. Runs in ``.venv-libero``:

    .venv-libero/bin/python -m benchmarks.libero_expert [--suites libero_spatial libero_object] \\
        [--episodes-per-task 50] [--workers 2] [--out benchmarks/results/libero_expert.json]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from vla_rl.sims.libero.expert import LiberoExpert
from vla_rl.sims.libero.tasks import parse_task

from benchmarks.common import machine_line
from vla_rl.envs import make_env
from vla_rl.envs.config import EnvConfig

SETTLE_STEPS = 10
TARGET_SUCCESS = 0.8


def expert_env_config(suite: str, workers: int, max_episode_steps: int = 0) -> EnvConfig:
    """One world per task of ``suite`` (a suite or ``suite/index``), protocol order, no cameras."""
    return EnvConfig(
        backend="libero",
        task=suite,
        num_envs=len(parse_task(suite).task_ids),
        max_episode_steps=max_episode_steps,
        cameras=[],
        options={"init_states": "protocol", "warmup_steps": SETTLE_STEPS, "workers": workers},
    )


def run_suite(cfg: EnvConfig, episodes_per_task: int) -> dict:
    """Each world's first ``episodes_per_task`` episodes: success and length per initial state."""
    env = make_env(cfg)
    expert = LiberoExpert()
    successes = [[] for _ in range(env.num_envs)]
    lengths = [[] for _ in range(env.num_envs)]
    steps = 0
    start = time.perf_counter()
    try:
        obs, _ = env.reset(seed=0)
        instructions = list(obs["instruction"])
        while min(len(s) for s in successes) < episodes_per_task:
            action, _ = expert.act(obs)
            result = env.step(action)
            steps += env.num_envs
            if "episode" in result.info:
                for world in result.done.nonzero().flatten().tolist():
                    if len(successes[world]) < episodes_per_task:
                        successes[world].append(bool(result.info["episode"]["success"][world]))
                        lengths[world].append(int(result.info["episode"]["length"][world]))
            obs = result.obs
    finally:
        env.close()
    wall_s = time.perf_counter() - start
    tasks = parse_task(cfg.task).task_ids
    return {
        "suite": cfg.task,
        "max_episode_steps": env.max_episode_steps,
        "tasks": [
            {
                "task": f"{cfg.task.partition('/')[0]}/{task}",
                "instruction": instructions[world],
                "success_rate": float(np.mean(successes[world])),
                "failed_init_states": [k for k, ok in enumerate(successes[world]) if not ok],
                "median_length": float(np.median(lengths[world])),
            }
            for world, task in enumerate(tasks)
        ],
        "env_steps": steps,
        "wall_time_s": wall_s,
    }


def markdown(results: list[dict], episodes_per_task: int) -> str:
    lines = [f"Expert success on {episodes_per_task} initial states per task (target: 80 %)", ""]
    for suite in results:
        rates = [t["success_rate"] for t in suite["tasks"]]
        lines += [
            f"**{suite['suite']}**: mean {100 * np.mean(rates):.1f} %, {suite['env_steps']:,} env steps, "
            f"{suite['wall_time_s'] / 60:.1f} min, limit {suite['max_episode_steps']} steps",
            "",
            "| task | instruction | success | median steps | failed initial states |",
            "|---|---|---:|---:|---|",
        ]
        for t in suite["tasks"]:
            failed = ", ".join(map(str, t["failed_init_states"])) or "-"
            lines.append(
                f"| {t['task']} | {t['instruction']} | {100 * t['success_rate']:.0f} % "
                f"| {t['median_length']:.0f} | {failed} |"
            )
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suites", nargs="+", default=["libero_spatial", "libero_object"])
    parser.add_argument("--episodes-per-task", type=int, default=50)
    parser.add_argument("--workers", type=int, default=2, help="worker processes per suite")
    parser.add_argument("--max-episode-steps", type=int, default=0, help="0: the suite's step limit")
    parser.add_argument("--out", type=Path, default=None, help="write the results (.json) and tables (.md)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    results = [
        run_suite(expert_env_config(s, args.workers, args.max_episode_steps), args.episodes_per_task)
        for s in args.suites
    ]
    tables = markdown(results, args.episodes_per_task)
    print(tables)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        record = {"date": time.strftime("%Y-%m-%d"), "machine": machine_line(), "suites": results}
        args.out.write_text(json.dumps(record, indent=1) + "\n")
        args.out.with_suffix(".md").write_text(tables)


if __name__ == "__main__":
    main()
