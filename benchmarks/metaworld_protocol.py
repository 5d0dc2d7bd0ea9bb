"""A policy on MetaWorld MT10 by MetaWorld's own evaluation protocol: success per task and the mean.

MetaWorld's protocol (``metaworld.evaluation.evaluation`` on the envs of ``gym.make("Meta-World/MT10")``):
each task's episodes start from the 50 fixed variations (goal and object positions) that
``metaworld.MT10(seed=...)`` drew for it (its ``train_tasks``), the goal is in the observation, an
episode lasts at most 500 steps and ends at its first success (success at any step), and the score
is the success rate of 50 episodes per task and their mean over the ten tasks. MetaWorld's helper
picks a variation at random for each episode; here each of the 50 is played once
(``env.options.variations: benchmark``), the same set without the sampling noise.

The policy is MetaWorld's scripted experts (``vla_rl.sims.metaworld.experts``) by default, or a chunk
policy (``--policy``: a policy folder, or an SFT/RL run folder whose latest checkpoint is used, with
its ``--family``; pixel policies name their ``--cameras``). Runs in ``.venv-metaworld``:

    .venv-metaworld/bin/python -m benchmarks.metaworld_protocol [--worlds-per-task 1] \\
        [--policy RUN_OR_POLICY_DIR --family pi0 --cameras corner --image-size 64] \\
        [--results-name metaworld_mt10_expert]

``--tasks``, ``--episodes-per-task`` and ``--max-episode-steps`` shorten the protocol for a check
that is not a result.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from benchmarks.common import RESULTS_DIR, add_results_name, machine_line
from vla_rl.envs import EnvConfig, make_env
from vla_rl.envs.base import BatchedEnv, Observation
from vla_rl.training.evaluate import run_episodes
from vla_rl.training.executors import Executor

PROTOCOL_TASK = "MT10"
EPISODES_PER_TASK = 50
MAX_EPISODE_STEPS = 500
EXPERT = "MetaWorld's scripted experts (metaworld.policies)"


@dataclass
class ProtocolResult:
    task: str
    """The evaluated ``env.task`` (``MT10``, or some of its tasks joined by ``+``)."""
    benchmark: str
    """Whose fixed variations were played (``vla_rl.sims.metaworld.variations.variation_benchmark``)."""
    benchmark_seed: int
    policy: str
    success_by_task: dict[str, float]
    """Task name -> success rate (at any step) over its episodes."""
    episodes_per_task: int
    max_episode_steps: int
    worlds_per_task: int
    episode_env_steps: int
    """Env steps inside the counted episodes (the sum of their lengths)."""
    env_steps: int
    """Env steps stepped in all: also those of worlds that finished their episodes and waited."""
    wall_time_s: float
    """From building the env to the last episode."""
    machine: str

    @property
    def mean_success(self) -> float:
        return sum(self.success_by_task.values()) / len(self.success_by_task)


def protocol_env_config(
    task: str = PROTOCOL_TASK,
    worlds_per_task: int = 1,
    max_episode_steps: int = MAX_EPISODE_STEPS,
    cameras: Sequence[str] = (),
    image_size: int = 64,
    benchmark_seed: int = 0,
) -> EnvConfig:
    """The env of the protocol: ``worlds_per_task`` worlds per task (interleaved: world ``i`` runs
    task ``i mod K``), the benchmark's fixed variations, episodes ending at success."""
    from vla_rl.sims.metaworld.tasks import benchmark_tasks

    return EnvConfig(
        backend="metaworld",
        task=task,
        num_envs=len(benchmark_tasks(task)) * worlds_per_task,
        max_episode_steps=max_episode_steps,
        cameras=list(cameras),
        image_size=image_size,
        options={"variations": "benchmark", "terminate_on_success": True, "benchmark_seed": benchmark_seed},
    )


class ExpertExecutor:
    """MetaWorld's scripted expert of each world's task, as an ``Executor`` (it keeps no state)."""

    def __init__(self, env: BatchedEnv) -> None:
        from vla_rl.sims.metaworld.experts import MetaWorldExpert

        self.expert = MetaWorldExpert(env.tasks)

    def act(self, obs: Observation) -> torch.Tensor:
        return self.expert.act(obs)[0]

    def episodes_ended(self, done: torch.Tensor) -> None:
        pass


class StepCounter:
    """Passes an executor through, counting the env steps it is asked for."""

    def __init__(self, executor: Executor, num_envs: int) -> None:
        self.executor = executor
        self.num_envs = num_envs
        self.env_steps = 0

    def act(self, obs: Observation) -> torch.Tensor:
        self.env_steps += self.num_envs
        return self.executor.act(obs)

    def episodes_ended(self, done: torch.Tensor) -> None:
        self.executor.episodes_ended(done)


def policy_executor_factory(
    policy_path: Path, family: str, execute_steps: int = 0
) -> Callable[[BatchedEnv], Executor]:
    """Executors of a chunk policy (a policy folder, or a run folder's latest checkpoint), greedy."""
    from vla_rl.policies.registry import load_chunk_policy
    from vla_rl.training.checkpoint import resolve_policy_dir
    from vla_rl.training.executors import make_executor

    policy = load_chunk_policy(family, resolve_policy_dir(policy_path)).eval()
    return lambda env: make_executor(policy, env.num_envs, execute_steps, deterministic=True)


@torch.no_grad()
def run_protocol(
    env_cfg: EnvConfig,
    episodes_per_task: int = EPISODES_PER_TASK,
    make_executor: Callable[[BatchedEnv], Executor] = ExpertExecutor,
    policy: str = EXPERT,
    seed: int = 0,
) -> ProtocolResult:
    """``episodes_per_task`` episodes of every task of ``env_cfg`` (a :func:`protocol_env_config`),
    each world its quota of first episodes (``vla_rl.training.evaluate.run_episodes``), so that 50
    episodes per task play each fixed variation once."""
    from vla_rl.sims.metaworld.tasks import INSTRUCTIONS, benchmark_tasks
    from vla_rl.sims.metaworld.variations import variation_benchmark

    tasks = benchmark_tasks(env_cfg.task)
    start = time.perf_counter()
    with make_env(env_cfg) as env:
        counter = StepCounter(make_executor(env), env.num_envs)
        result = run_episodes(counter, env, episodes_per_task * len(tasks), seed)
    wall_time_s = time.perf_counter() - start
    if result.success_rate != result.success_once_rate:
        raise RuntimeError("episodes did not end at their first success: not MetaWorld's protocol")
    by_instruction = result.success_by_instruction
    return ProtocolResult(
        task=env_cfg.task,
        benchmark=variation_benchmark(env_cfg.task),
        benchmark_seed=int(env_cfg.options.get("benchmark_seed", 0)),
        policy=policy,
        success_by_task={task: by_instruction[INSTRUCTIONS[task]] for task in tasks},
        episodes_per_task=episodes_per_task,
        max_episode_steps=env_cfg.max_episode_steps,
        worlds_per_task=env_cfg.num_envs // len(tasks),
        episode_env_steps=round(result.mean_length * result.num_episodes),
        env_steps=counter.env_steps,
        wall_time_s=wall_time_s,
        machine=machine_line(),
    )


def markdown_table(result: ProtocolResult) -> str:
    """Success per task and the mean, then what the evaluation cost."""
    lines = ["| task | success |", "|---|---:|"]
    lines += [f"| {task} | {100 * rate:.1f} % |" for task, rate in result.success_by_task.items()]
    lines.append(f"| **mean** | **{100 * result.mean_success:.1f} %** |")
    episodes = result.episodes_per_task * len(result.success_by_task)
    lines += [
        "",
        f"{result.policy}; `{result.task}`, the fixed variations of `{result.benchmark}` (seed "
        f"{result.benchmark_seed}), {result.episodes_per_task} episodes per task, at most "
        f"{result.max_episode_steps} steps, success at any step. {episodes} episodes in "
        f"{result.episode_env_steps:,} env steps ({result.env_steps:,} stepped with the worlds that "
        f"waited for the others; {result.worlds_per_task} world(s) per task), {result.wall_time_s:.0f} s.",
        "",
        f"Machine: {result.machine}",
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> ProtocolResult:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default=PROTOCOL_TASK, help="MT10, or some of its tasks joined by '+'")
    parser.add_argument("--episodes-per-task", type=int, default=EPISODES_PER_TASK)
    parser.add_argument("--max-episode-steps", type=int, default=MAX_EPISODE_STEPS)
    parser.add_argument("--worlds-per-task", type=int, default=1)
    parser.add_argument("--benchmark-seed", type=int, default=0, help="seed of metaworld.MT10(seed=...)")
    parser.add_argument("--policy", type=Path, default=None, help="a chunk policy (default: the experts)")
    parser.add_argument("--family", default=None, help="the policy's family (policy.name), with --policy")
    parser.add_argument("--cameras", nargs="*", default=[], help="cameras a pixel policy reads")
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--execute-steps", type=int, default=0, help="actions run per chunk (0: all)")
    add_results_name(parser, "metaworld_mt10_expert")
    args = parser.parse_args(argv)
    if (args.policy is None) != (args.family is None):
        parser.error("--policy and --family go together")
    torch.set_num_threads(1)
    cfg = protocol_env_config(
        args.tasks,
        args.worlds_per_task,
        args.max_episode_steps,
        args.cameras,
        args.image_size,
        args.benchmark_seed,
    )
    if args.policy is None:
        result = run_protocol(cfg, args.episodes_per_task)
    else:
        factory = policy_executor_factory(args.policy, args.family, args.execute_steps)
        result = run_protocol(cfg, args.episodes_per_task, factory, f"{args.family} policy {args.policy}")
    table = markdown_table(result)
    print(table)
    json_path = RESULTS_DIR / f"{args.results_name}.json"
    json_path.parent.mkdir(parents=True, exist_ok=True)
    payload = {**asdict(result), "mean_success": result.mean_success}
    json_path.write_text(json.dumps(payload, indent=1) + "\n")
    json_path.with_suffix(".md").write_text(table)
    return result


if __name__ == "__main__":
    main()
