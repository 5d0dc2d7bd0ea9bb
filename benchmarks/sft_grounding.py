"""Does an SFT policy on ``pick_place`` read the instruction? Open-loop checks on unseen episodes.

Success in the simulator mixes many failure causes. This benchmark isolates the first decision:
on demonstrations the policy never saw (a fresh noise-free expert collection, other seed) it
compares the policy's greedy first action with the expert's at a few steps of each episode, and at
step 0 (same arm pose in every episode, so only the instruction and the object positions say where
to go) checks which cube the policy's horizontal motion points at. A policy that copies motion
instead of reading the instruction points at the named cube about a third of the time (chance with
three cubes).

    python -m benchmarks.sft_grounding --policy token_vla=runs/.../checkpoints/iter_016000/policy
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
from vla_rl.sims.tasks.pick_place import COLOURS, PickPlaceTask
from vla_rl.sims.tasks.registry import object_state_transform

from benchmarks.common import machine_line
from vla_rl.data.lerobot_reader import LeRobotDataset
from vla_rl.policies.chunk_registry import load_chunk_policy
from vla_rl.training.sft.chunk_sampler import observation_at

STEPS = (0, 1, 5, 15, 30, 60)
"""Episode steps at which the first action of the chunk is compared with the expert's."""


def privileged_slice(name: str) -> slice:
    start = 0
    for field, width in PickPlaceTask.privileged_fields:
        if field == name:
            return slice(start, start + width)
        start += width
    raise KeyError(name)


def pointed_cube(actions_xy: np.ndarray, privileged: np.ndarray) -> np.ndarray:
    """Index of the cube whose horizontal direction from the gripper is closest (cosine) to the
    action's horizontal component; the gripper position is the named cube minus ``tcp_to_cube``."""
    cubes = privileged[:, privileged_slice("cubes_pos")].reshape(len(privileged), len(COLOURS), 3)
    named = privileged[:, privileged_slice("cube_onehot")].argmax(-1)
    tcp = cubes[np.arange(len(cubes)), named] - privileged[:, privileged_slice("tcp_to_cube")]
    to_cubes = cubes[..., :2] - tcp[:, None, :2]
    to_cubes /= np.linalg.norm(to_cubes, axis=-1, keepdims=True)
    direction = actions_xy / np.linalg.norm(actions_xy, axis=-1, keepdims=True).clip(min=1e-9)
    return np.einsum("nkd,nd->nk", to_cubes, direction).argmax(-1)


def collect_heldout(dataset: Path, num_episodes: int) -> None:
    if (dataset / "meta" / "info.json").is_file():
        return
    command = [sys.executable, "-m", "vla_rl.cli", "collect", "env=pick_place"]
    command += [f"num_episodes={num_episodes}", f"output_dir={dataset}", "seed=424242"]
    subprocess.run(command, check=True, capture_output=True, text=True)


@torch.no_grad()
def grounding_report(family: str, policy_dir: Path, dataset: Path) -> dict[str, float]:
    policy = load_chunk_policy(family, policy_dir).eval()
    episodes = list(LeRobotDataset(dataset).episodes())
    add_objects = object_state_transform("pick_place")
    report: dict[str, float] = {}
    for step in STEPS:
        pairs = [(episode, step) for episode in episodes if len(episode) > step]
        obs = add_objects(observation_at(pairs))
        predicted = policy.sample(obs, deterministic=True).actions[:, 0].cpu().numpy()
        expert = np.stack([episode.actions[t] for episode, t in pairs])
        report[f"error_step{step}"] = float(np.abs(predicted - expert).mean())
        if step == 0:
            privileged = obs["privileged"].numpy()
            named = privileged[:, privileged_slice("cube_onehot")].argmax(-1)
            report["named_cube_policy"] = float((pointed_cube(predicted[:, :2], privileged) == named).mean())
            report["named_cube_expert"] = float((pointed_cube(expert[:, :2], privileged) == named).mean())
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", nargs="+", required=True, help="FAMILY=POLICY_DIR ...")
    parser.add_argument("--episodes", type=int, default=48, help="unseen expert demonstrations")
    parser.add_argument("--dataset", type=Path, default=Path("runs/bench/sft_grounding/heldout"))
    args = parser.parse_args()
    torch.set_num_threads(2)
    collect_heldout(args.dataset, args.episodes)
    print(f"machine: {machine_line()}")
    print(f"{args.episodes} unseen noise-free expert episodes; greedy first action of each chunk")
    header = " ".join(f"{'err@' + str(step):>7}" for step in STEPS)
    print(f"{'family':<10} {header} {'named cube (policy / expert)':>30}")
    for spec in args.policy:
        family, _, directory = spec.partition("=")
        report = grounding_report(family, Path(directory), args.dataset)
        errors = " ".join(f"{report[f'error_step{step}']:>7.3f}" for step in STEPS)
        named = f"{100 * report['named_cube_policy']:.0f} % / {100 * report['named_cube_expert']:.0f} %"
        print(f"{family:<10} {errors} {named:>30}", flush=True)


if __name__ == "__main__":
    main()
