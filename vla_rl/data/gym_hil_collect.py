"""Record the scripted pick-cube expert on gym-hil as a LeRobot v3.0 dataset (state only, with rewards).

    python -m vla_rl.data.gym_hil_collect --episodes 20 --output datasets/gym_hil_pick_cube

The dataset is the one both sides of ``benchmarks/gym_hil_sac.py`` read: ``demos.path`` of
``vla-rl train`` and LeRobot's offline replay buffer (``ReplayBuffer.from_lerobot_dataset``).
``observation.state`` is gym-hil's ``agent_pos``, ``observation.privileged`` the cube's position,
``action`` the unit action (end-effector delta / 2.5 cm, gripper increment), and an episode ends at
the expert's success (gym-hil terminates it there).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from vla_rl.data.collect import CollectResult, record_dataset, recorded_feature_names
from vla_rl.envs.config import EnvConfig
from vla_rl.envs.registry import make_env
from vla_rl.sims.gym_hil.expert import PickCubeExpert

TASK = "vla_rl.sims.gym_hil.env:GymHilPickCube-v0"
STATE_FIELDS = (("joint_pos", 7), ("joint_vel", 7), ("gripper_command", 1), ("pinch_pos", 3))
PRIVILEGED_FIELDS = (("cube_pos", 3),)


def collect_pick_cube_demonstrations(
    num_episodes: int,
    output_dir: str | Path,
    *,
    num_envs: int = 2,
    random_block_position: bool = False,
    python: str | None = None,
    seed: int = 0,
) -> CollectResult:
    """Write ``num_episodes`` successful expert episodes (``python``: the interpreter with gym-hil)."""
    if num_episodes < 1:
        raise ValueError(f"num_episodes must be >= 1, got {num_episodes}")
    start = time.perf_counter()
    cfg = EnvConfig(
        backend="gymnasium",
        task=TASK,
        num_envs=num_envs,
        options={"python": python, "random_block_position": random_block_position},
    )
    names = recorded_feature_names(STATE_FIELDS, PRIVILEGED_FIELDS, record_expert=False)
    env = make_env(cfg)
    try:
        return record_dataset(
            env,
            PickCubeExpert(env.num_envs),
            output_dir,
            [],
            names,
            start,
            num_episodes=num_episodes,
            max_attempts=0,
            keep_failures=False,
            seed=seed,
            robot_type="panda",
            video=None,
            append=False,
        )
    finally:
        env.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: collect, print the expert's success; exit 1 when fewer episodes were written."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--episodes", type=int, required=True, help="successful episodes to write")
    parser.add_argument("--output", required=True, help="dataset directory to create")
    parser.add_argument("--num-envs", type=int, default=2, help="worlds (worker processes) stepped together")
    parser.add_argument("--random-block-position", action="store_true", help="gym-hil's random cube start")
    parser.add_argument("--python", default=None, help="the Python with gym-hil (default .venv-lerobot's)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    result = collect_pick_cube_demonstrations(
        args.episodes,
        args.output,
        num_envs=args.num_envs,
        random_block_position=args.random_block_position,
        python=args.python,
        seed=args.seed,
    )
    print(
        f"{result.episodes_written} episodes ({result.frames_written} frames) written to {result.path}; "
        f"expert success {result.successes}/{result.episodes_attempted} = {100 * result.success_rate:.1f} %"
    )
    return 0 if result.episodes_written == args.episodes else 1


if __name__ == "__main__":
    raise SystemExit(main())
