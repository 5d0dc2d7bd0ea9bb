"""A chunk policy on LIBERO by the field's evaluation protocol, with results per task and per suite.

The protocol of the published LIBERO evaluations: every task of a suite, each from its 50 fixed
initial states (once each, in order: ``env.options.init_states: protocol``), the suite's step limit
(220 / 280 / 300 / 520 control steps for Spatial / Object / Goal / 10), 10 no-op steps first so that
the objects settle, the agent-view and wrist cameras rendered at 256 x 256, robosuite's frames
turned 180 degrees (the orientation of the LIBERO datasets the field's policies were trained on), 7-D delta
end-effector actions with the gripper, and success from LIBERO's own goal check. Runs in
``.venv-libero``:

    .venv-libero/bin/python -m benchmarks.libero_protocol POLICY_DIR --family pi0 \\
        [--suites libero_spatial libero_object libero_goal libero_10] [--episodes-per-task 50] \\
        [--worlds-per-task 1] [--workers 1] [--image-size 256] [--device cpu] \\
        [--out benchmarks/results/libero_protocol.md]

A suite may be narrowed to one task (``libero_goal/3``); ``--episodes-per-task`` and
``--max-episode-steps`` shorten the protocol for a check that is not a result.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

import torch
from vla_rl.sims.libero.tasks import parse_task

from vla_rl.envs.config import EnvConfig
from vla_rl.policies.chunk_policy import ChunkPolicy
from vla_rl.policies.registry import load_chunk_policy
from vla_rl.training.evaluate import evaluate

FIELD_CAMERAS = ("agentview", "robot0_eye_in_hand")
FIELD_IMAGE_SIZE = 256
SETTLE_STEPS = 10
SUITE_TITLES = {
    "libero_spatial": "Spatial",
    "libero_object": "Object",
    "libero_goal": "Goal",
    "libero_10": "Long (10)",
    "libero_90": "90",
}


@dataclass
class SuiteResult:
    name: str
    """The evaluated ``env.task``: a suite, or one task of it (``libero_goal/3``)."""
    success_by_task: dict[str, float]
    """Task instruction -> success rate over its episodes."""
    episodes_per_task: int

    @property
    def success_rate(self) -> float:
        return sum(self.success_by_task.values()) / len(self.success_by_task)


def protocol_env_config(
    task: str,
    worlds_per_task: int = 1,
    image_size: int = FIELD_IMAGE_SIZE,
    cameras: tuple[str, ...] = FIELD_CAMERAS,
    max_episode_steps: int = 0,
    workers: int = 1,
) -> EnvConfig:
    """The env of the protocol for ``task`` (a suite or ``suite/index``): ``worlds_per_task`` worlds
    per task, spread over ``workers`` processes; ``max_episode_steps`` 0 keeps the suite's step
    limit."""
    num_tasks = len(parse_task(task).task_ids)
    return EnvConfig(
        backend="libero",
        task=task,
        num_envs=num_tasks * worlds_per_task,
        max_episode_steps=max_episode_steps,
        cameras=list(cameras),
        image_size=image_size,
        options={
            "init_states": "protocol",
            "image_orientation": "rotate180",
            "warmup_steps": SETTLE_STEPS,
            "workers": workers,
        },
    )


def evaluate_suite(
    policy: ChunkPolicy, env_cfg: EnvConfig, episodes_per_task: int, execute_steps: int = 0
) -> SuiteResult:
    """``episodes_per_task`` greedy episodes of every task of ``env_cfg`` (a protocol config)."""
    num_tasks = len(parse_task(env_cfg.task).task_ids)
    worlds_per_task = env_cfg.num_envs // num_tasks
    if episodes_per_task % worlds_per_task:
        raise ValueError(
            f"{episodes_per_task} episodes per task do not split over {worlds_per_task} worlds per task"
        )
    result = evaluate(
        policy,
        env_cfg,
        num_episodes=episodes_per_task * num_tasks,
        deterministic=True,
        execute_steps=execute_steps,
        seed=0,
    )
    return SuiteResult(env_cfg.task, dict(result.success_by_instruction), episodes_per_task)


def markdown_tables(results: list[SuiteResult]) -> str:
    """The field's layout: one column per suite and their average, then each suite's tasks."""
    titles = [SUITE_TITLES.get(r.name.partition("/")[0], r.name) for r in results]
    rates = [100 * r.success_rate for r in results]
    lines = [
        "| " + " | ".join([*titles, "Average"]) + " |",
        "|" + "---:|" * (len(results) + 1),
        "| " + " | ".join(f"{rate:.1f}" for rate in [*rates, sum(rates) / len(rates)]) + " |",
    ]
    for result, title in zip(results, titles, strict=True):
        lines += ["", f"**{title}** (`{result.name}`, {result.episodes_per_task} episodes per task)", ""]
        lines += ["| task | success |", "|---|---:|"]
        lines += [f"| {task} | {100 * rate:.1f} % |" for task, rate in result.success_by_task.items()]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("policy_dir", type=Path, help="a chunk policy folder (save_pretrained or imported)")
    parser.add_argument("--family", required=True, help="its policy family (policy.name)")
    parser.add_argument(
        "--suites", nargs="+", default=["libero_spatial", "libero_object", "libero_goal", "libero_10"]
    )
    parser.add_argument("--episodes-per-task", type=int, default=50)
    parser.add_argument("--worlds-per-task", type=int, default=1)
    parser.add_argument("--image-size", type=int, default=FIELD_IMAGE_SIZE)
    parser.add_argument("--max-episode-steps", type=int, default=0, help="0: the suite's step limit")
    parser.add_argument("--execute-steps", type=int, default=0, help="actions run per chunk (0: all)")
    parser.add_argument("--workers", type=int, default=1, help="env worker processes (env.options.workers)")
    parser.add_argument("--device", default="cpu", help="where the policy runs")
    parser.add_argument("--out", type=Path, default=None, help="write the tables (markdown) and a .json")
    args = parser.parse_args()
    policy = load_chunk_policy(args.family, args.policy_dir).to(args.device)
    torch.set_num_threads(2)
    results = [
        evaluate_suite(
            policy,
            protocol_env_config(
                suite,
                args.worlds_per_task,
                args.image_size,
                max_episode_steps=args.max_episode_steps,
                workers=args.workers,
            ),
            args.episodes_per_task,
            args.execute_steps,
        )
        for suite in args.suites
    ]
    tables = markdown_tables(results)
    print(tables)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(tables)
        args.out.with_suffix(".json").write_text(json.dumps([vars(r) for r in results], indent=1) + "\n")


if __name__ == "__main__":
    main()
