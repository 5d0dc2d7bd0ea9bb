"""Does an SFT policy on ``pick_place`` read the instruction? Open-loop checks on unseen episodes.

Success in the simulator mixes many failure causes. This benchmark isolates the first decision:
on demonstrations the policy never saw (a fresh noise-free expert collection, other seed) it
compares the policy's greedy first action with the expert's at a few steps of each episode, and at
step 0 (same arm pose in every episode, so only the instruction and the object positions say where
to go) checks which cube the policy's horizontal motion points at. A policy that copies motion
instead of reading the instruction points at the named cube about a third of the time (chance with
three cubes).

    python -m benchmarks.sft_grounding runs/bench/sft_pick_place/token_vla_full [...]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
from vla_rl.sims.mujoco.observations import field_slices
from vla_rl.sims.tasks.pick_place import COLOURS, PickPlaceTask
from vla_rl.sims.tasks.registry import object_state_transform

from benchmarks.common import machine_line
from vla_rl.data.lerobot_format import open_dataset
from vla_rl.policies.registry import load_chunk_policy
from vla_rl.training.checkpoint import latest_checkpoint
from vla_rl.training.sft.chunk_sampler import observation_at
from vla_rl.training.sft.config_load import load_sft_config_file

STEPS = (0, 1, 5, 15, 30, 60)
"""Episode steps at which the first action of the chunk is compared with the expert's."""
PRIVILEGED = field_slices(PickPlaceTask.privileged_fields)
"""Column slices of ``obs["privileged"]`` by field name."""


def pointed_cube(actions_xy: np.ndarray, privileged: np.ndarray) -> np.ndarray:
    """Index of the cube whose horizontal direction from the gripper is closest (cosine) to the
    action's horizontal component; the gripper position is the named cube minus ``tcp_to_cube``."""
    cubes = privileged[:, PRIVILEGED["cubes_pos"]].reshape(len(privileged), len(COLOURS), 3)
    named = privileged[:, PRIVILEGED["cube_onehot"]].argmax(-1)
    tcp = cubes[np.arange(len(cubes)), named] - privileged[:, PRIVILEGED["tcp_to_cube"]]
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
def grounding_report(run_dir: Path, dataset: Path) -> dict[str, float]:
    """Errors and named-cube rate of the last checkpoint of the ``vla-rl sft`` run in ``run_dir``."""
    checkpoint = latest_checkpoint(run_dir / "checkpoints")
    if checkpoint is None:
        raise FileNotFoundError(f"{run_dir} has no checkpoint")
    family = load_sft_config_file(run_dir / "config.yaml").policy.name
    policy = load_chunk_policy(family, checkpoint / "policy").eval()
    episodes = list(open_dataset(dataset).episodes())
    add_objects = object_state_transform("pick_place")
    report: dict[str, float] = {}
    torch.manual_seed(0)  # pi0's deterministic chunks still start from random noise
    for step in STEPS:
        pairs = [(episode, step) for episode in episodes if len(episode) > step]
        obs = add_objects(observation_at(pairs))
        predicted = policy.sample(obs, deterministic=True).actions[:, 0].cpu().numpy()
        expert = np.stack([episode.actions[t] for episode, t in pairs])
        report[f"error_step{step}"] = float(np.abs(predicted - expert).mean())
        if step == 0:
            privileged = obs["privileged"].numpy()
            named = privileged[:, PRIVILEGED["cube_onehot"]].argmax(-1)
            report["named_cube_policy"] = float((pointed_cube(predicted[:, :2], privileged) == named).mean())
            report["named_cube_expert"] = float((pointed_cube(expert[:, :2], privileged) == named).mean())
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dirs", nargs="+", type=Path, help="vla-rl sft run folders")
    parser.add_argument("--episodes", type=int, default=48, help="unseen expert demonstrations")
    parser.add_argument("--dataset", type=Path, default=Path("runs/bench/sft_grounding/heldout"))
    args = parser.parse_args()
    torch.set_num_threads(2)
    collect_heldout(args.dataset, args.episodes)
    print(f"machine: {machine_line()}")
    print(f"{args.episodes} unseen noise-free expert episodes; greedy first action of each chunk")
    header = " ".join(f"{'err@' + str(step):>7}" for step in STEPS)
    print(f"{'run':<16} {header} {'named cube (policy / expert)':>30}")
    for run_dir in args.run_dirs:
        report = grounding_report(run_dir, args.dataset)
        errors = " ".join(f"{report[f'error_step{step}']:>7.3f}" for step in STEPS)
        named = f"{100 * report['named_cube_policy']:.0f} % / {100 * report['named_cube_expert']:.0f} %"
        print(f"{run_dir.name:<16} {errors} {named:>30}", flush=True)


if __name__ == "__main__":
    main()
