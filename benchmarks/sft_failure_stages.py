"""Where do SFT and RL policies fail on ``pick_place``? Stage counts of closed-loop episodes.

Runs the final checkpoint of ``vla-rl sft`` or ``vla-rl train`` (chunk RL) run folders in the
simulator as the run's own evaluation does (its env config, actions per chunk and greedy or sampled
chunks; an RL run's exploration settings applied) and counts, over the first episode of each world,
how many reached each stage of the task: the gripper came within 3 cm of the named cube, lifted
it, lifted some other cube instead, carried the named cube within the success radius of the named
pad, and succeeded.

    python -m benchmarks.sft_failure_stages runs/bench/sft_pick_place/token_vla_full [...]
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np
import torch
from vla_rl.sims.mujoco.observations import split_fields
from vla_rl.sims.tasks.base import CUBE_HALF_SIZE_M
from vla_rl.sims.tasks.pick_place import COLOURS, SUCCESS_DISTANCE_M, PickPlaceTask

from benchmarks.common import machine_line
from vla_rl.envs import make_env
from vla_rl.envs.config import EnvConfig
from vla_rl.policies.chunk_policy import ChunkPolicy
from vla_rl.policies.registry import load_chunk_policy
from vla_rl.training.checkpoint import latest_checkpoint, resolve_policy_dir
from vla_rl.training.chunk_rl.config_load import load_rl_config_file
from vla_rl.training.chunk_rl.exploration_anneal import run_updates
from vla_rl.training.chunk_rl.trainer import load_rl_policy
from vla_rl.training.executors import make_executor
from vla_rl.training.jobs import job_of_checkpoint
from vla_rl.training.sft.config_load import load_sft_config_file

REACHED_M = 0.03
"""Gripper-to-named-cube distance that counts as reaching it."""
LIFTED_M = CUBE_HALF_SIZE_M + 0.03
"""Cube centre height that counts as lifted (3 cm above resting)."""
STAGES = ("reached", "lifted", "lifted_other", "over_pad", "success")


def run_policy(run_dir: Path) -> tuple[ChunkPolicy, EnvConfig, int, bool]:
    """The last checkpoint's policy of an SFT or RL run folder, with the env, the actions executed
    per chunk and the greedy flag of that run's evaluation."""
    if job_of_checkpoint(run_dir) == "sft":
        cfg = load_sft_config_file(run_dir / "config.yaml")
        checkpoint = latest_checkpoint(run_dir / "checkpoints")
        if checkpoint is None:
            raise FileNotFoundError(f"{run_dir} has no checkpoint")
        policy = load_chunk_policy(cfg.policy.name, checkpoint / "policy").eval()
        return policy, cfg.env, cfg.eval.execute_steps, cfg.eval.deterministic
    rl = load_rl_config_file(run_dir / "config.yaml", for_evaluation=True)
    policy = load_rl_policy(rl, resolve_policy_dir(run_dir), run_updates(rl.policy, run_dir))
    return policy, rl.env, rl.algorithm.execute_steps, rl.eval.deterministic


@torch.no_grad()
def stage_rates(
    run_dir: Path,
    num_episodes: int,
    seed: int,
    execute_steps: int | None = None,
    ensemble_decay: float | None = None,
) -> dict[str, float]:
    """Fraction of worlds whose first episode reached each of ``STAGES``; ``execute_steps``
    overrides the run's ``eval.execute_steps`` (actions executed per chunk before re-planning),
    ``ensemble_decay`` switches to temporal ensembling."""
    policy, env_cfg, run_execute_steps, deterministic = run_policy(run_dir)
    env = make_env(dataclasses.replace(env_cfg, num_envs=num_episodes, pipeline_stages=1))
    if execute_steps is None:
        execute_steps = run_execute_steps
    executor = make_executor(
        policy, env.num_envs, execute_steps, deterministic, ensemble_decay=ensemble_decay
    )
    reached = np.zeros((len(STAGES), env.num_envs), dtype=bool)
    running = np.ones(env.num_envs, dtype=bool)
    rows = np.arange(env.num_envs)
    torch.manual_seed(seed)  # pi0's deterministic chunks still start from random noise
    obs, _ = env.reset(seed=seed)
    while running.any():
        step = env.step(executor.act(obs).to(env.device))
        done = step.done.cpu().numpy()
        executor.episodes_ended(step.done)
        # The step's observation is the next episode's first where done: judge the pre-reset state
        # by the success flag and by the previous observation's positions.
        fields = split_fields(obs["privileged"].cpu().numpy(), PickPlaceTask.privileged_fields)
        cubes = fields["cubes_pos"].reshape(-1, len(COLOURS), 3)
        named = fields["cube_onehot"].argmax(-1)
        lifted = cubes[..., 2] > LIFTED_M
        other = lifted & (np.arange(len(COLOURS))[None] != named[:, None])
        flags = [
            np.linalg.norm(fields["tcp_to_cube"], axis=-1) < REACHED_M,
            lifted[rows, named],
            other.any(-1),
            np.linalg.norm(fields["cube_to_pad_xy"], axis=-1) < SUCCESS_DISTANCE_M,
            step.info["episode"]["success"].cpu().numpy() & done if done.any() else done,
        ]
        reached |= np.stack(flags) & running[None]
        running &= ~done
        obs = step.obs
    env.close()
    return {stage: float(reached[index].mean()) for index, stage in enumerate(STAGES)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dirs", nargs="+", type=Path)
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument(
        "--execute-steps", type=int, nargs="+", default=[None], help="actions per chunk (0 = all)"
    )
    parser.add_argument(
        "--ensemble-decay", type=float, nargs="*", default=[], help="also: temporal ensembling"
    )
    args = parser.parse_args()
    modes = [(execute, None) for execute in args.execute_steps]
    modes += [(None, decay) for decay in args.ensemble_decay]
    print(f"machine: {machine_line()}")
    print(f"first episode of {args.episodes} worlds, split and env as in each run's SFT evaluation")
    print(f"{'run':<24} {'execute':>7} " + " ".join(f"{stage:>13}" for stage in STAGES))
    for run_dir in args.run_dirs:
        for execute_steps, decay in modes:
            rates = stage_rates(run_dir, args.episodes, args.seed, execute_steps, decay)
            label = "run cfg" if execute_steps is None else str(execute_steps)
            label = label if decay is None else f"ens {decay:g}"
            cells = " ".join(f"{100 * rates[s]:>12.1f}%" for s in STAGES)
            print(f"{run_dir.name:<24} {label:>7} {cells}", flush=True)


if __name__ == "__main__":
    main()
