"""Record MetaWorld's scripted experts as a LeRobot-format dataset (the one ``vla-rl collect`` writes).

    python -m vla_rl.data.metaworld_collect reach-v3 --episodes 50 --output datasets/mw_reach
    python -m vla_rl.data.metaworld_collect MT10 --episodes 200 --output datasets/mt10 --cameras corner
    python -m vla_rl.data.metaworld_collect reach-v3 --episodes 50 --output datasets/mw_reach_v21 \
        --codebase-version v2.1

Every world of a batched MetaWorld env runs its task's expert; each finished episode (with camera
frames, the task's instruction, proprio, the 39-D state, actions, rewards and per-step success) is
written at once, as a LeRobot v3.0 dataset (``--codebase-version v2.1`` for the older layout). By
default an episode ends at the expert's first success, so demonstrations do
not idle until the time limit.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from vla_rl.data.collect import CollectResult, record_dataset, recorded_feature_names
from vla_rl.data.lerobot_format import DATASET_WRITERS, DEFAULT_CODEBASE_VERSION
from vla_rl.data.video import VideoSettings
from vla_rl.envs.config import EnvConfig
from vla_rl.sims.metaworld.batched_env import MetaWorldBatchedEnv
from vla_rl.sims.metaworld.experts import MetaWorldExpert

STATE_FIELDS = (("hand_pos", 3), ("gripper_opening", 1))
PRIVILEGED_FIELDS = (
    *STATE_FIELDS,
    ("objects", 14),
    ("prev_hand_pos", 3),
    ("prev_gripper_opening", 1),
    ("prev_objects", 14),
    ("goal_pos", 3),
)
"""MetaWorld's 39-D observation: hand, gripper, up to two objects' position + quaternion (zero padded),
the same for the previous step, and the goal position."""


def collect_metaworld_demonstrations(
    task: str,
    num_episodes: int,
    output_dir: str | Path,
    *,
    num_envs: int = 10,
    cameras: Sequence[str] = ("corner",),
    image_size: int = 64,
    max_episode_steps: int = 0,
    stop_at_success: bool = True,
    noise_std: float = 0.0,
    keep_failures: bool = False,
    max_attempts: int = 0,
    seed: int = 0,
    video: VideoSettings | None = None,
    append: bool = False,
    codebase_version: str = DEFAULT_CODEBASE_VERSION,
) -> CollectResult:
    """Write ``num_episodes`` expert episodes of ``task`` (a v3 task, ``"MT10"`` or ``"MT50"``).

    An episode is a success when the expert succeeded at any step (MetaWorld's own measure). Failed
    episodes are dropped unless ``keep_failures``; after ``max_attempts`` finished episodes
    (``<= 0``: ``10 * num_episodes``) the collection stops with what it has. ``codebase_version`` is
    the LeRobot dataset version written (``v3.0`` or ``v2.1``).
    """
    if num_episodes < 1:
        raise ValueError(f"num_episodes must be >= 1, got {num_episodes}")
    start = time.perf_counter()
    cfg = EnvConfig(
        backend="metaworld",
        task=task,
        num_envs=num_envs,
        max_episode_steps=max_episode_steps,
        cameras=list(cameras),
        image_size=image_size,
        options={"terminate_on_success": stop_at_success},
    )
    names = recorded_feature_names(STATE_FIELDS, PRIVILEGED_FIELDS, record_expert=noise_std > 0)
    with MetaWorldBatchedEnv(cfg) as env:
        return record_dataset(
            env,
            MetaWorldExpert(env.tasks, noise_std=noise_std, seed=seed),
            output_dir,
            cfg.cameras,
            names,
            start,
            num_episodes=num_episodes,
            max_attempts=max_attempts,
            keep_failures=keep_failures,
            seed=seed,
            robot_type="sawyer",
            video=video,
            append=append,
            success_key="success_once",
            codebase_version=codebase_version,
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: collect, print a summary; exit 1 when fewer episodes than asked were written."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("task", help="MetaWorld v3 task (reach-v3), MT10 or MT50")
    parser.add_argument("--episodes", type=int, required=True, help="episodes to write")
    parser.add_argument("--output", required=True, help="dataset directory to create")
    parser.add_argument("--num-envs", type=int, default=10, help="worlds stepped together")
    parser.add_argument("--cameras", nargs="*", default=["corner"], help="MetaWorld cameras to record")
    parser.add_argument("--image-size", type=int, default=64, help="image height and width in pixels")
    parser.add_argument("--max-steps", type=int, default=0, help="time limit (0: MetaWorld's 500)")
    parser.add_argument("--noise-std", type=float, default=0.0, help="xyz action noise of the expert")
    parser.add_argument("--keep-failures", action="store_true", help="also write failed episodes")
    parser.add_argument("--seed", type=int, default=0, help="seed of the task variations and noise")
    parser.add_argument("--append", action="store_true", help="add to an existing dataset")
    parser.add_argument(
        "--codebase-version",
        choices=sorted(DATASET_WRITERS),
        default=DEFAULT_CODEBASE_VERSION,
        help="LeRobot dataset version written (appending needs the existing dataset's)",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    result = collect_metaworld_demonstrations(
        args.task,
        args.episodes,
        args.output,
        num_envs=args.num_envs,
        cameras=args.cameras,
        image_size=args.image_size,
        max_episode_steps=args.max_steps,
        noise_std=args.noise_std,
        keep_failures=args.keep_failures,
        seed=args.seed,
        append=args.append,
        codebase_version=args.codebase_version,
    )
    print(
        f"wrote {result.episodes_written} episodes ({result.frames_written} frames) to {result.path} in "
        f"{result.wall_time_s:.1f} s; expert success {100 * result.success_rate:.1f} % over "
        f"{result.episodes_attempted} attempts"
    )
    return 0 if result.episodes_written >= args.episodes else 1


if __name__ == "__main__":
    raise SystemExit(main())
