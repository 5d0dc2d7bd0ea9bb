"""PPO on a reward model alone against PPO on the environment's dense reward, same env-step budget.

For each task: record demonstrations and failures (``vla-rl collect``: a scripted expert with
little, much and overwhelming action noise, failures kept), fit the learned reward model on them
(``vla-rl reward-train``, held-out episodes from other seeds measure it), then train PPO twice with
the same budget of environment steps: once on the environment's dense reward and once with the
environment reward switched off (``reward=learned``, weight 0) so the model's score is the only
signal. Both are judged by the environment's own success flag (64 deterministic episodes).

    python -m benchmarks.reward_model_ppo                 # reach and push
    python -m benchmarks.reward_model_ppo --tasks reach
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common import machine_line
from benchmarks.learning import SUCCESS_PATTERN

ROOT = Path("runs/bench/reward_model_ppo")
RESULTS = Path("benchmarks/results/reward_model_ppo.json")
TARGET_RATIO = 0.8

# (name, episodes, expert action noise std, seed): train and held-out sets never share a seed.
RECORDED_CAMERAS = ("front", "top", "wrist")
"""Cameras every dataset records, whichever of them a reward model reads."""
ROLLOUT_EPISODES = 100
"""Episodes of a first-round policy recorded for the second round's reward model."""
TRAIN_SETS = (("demos", 200, 0.3, 0), ("noisy", 100, 3.0, 1), ("random", 100, 8.0, 2))
HELD_OUT_SETS = (("demos", 50, 0.3, 10), ("noisy", 50, 3.0, 11), ("random", 25, 8.0, 12))


@dataclass(frozen=True)
class TaskSetting:
    cameras: tuple[str, ...]
    """Cameras the reward model reads (rendered in the learned-reward run only)."""
    env_steps: int
    """PPO budget of both runs, in environment steps."""
    reward_train_steps: int = 2000
    """Gradient steps of ``vla-rl reward-train``."""


REWARD_USES = {
    "mean": ["reward.options.score=mean"],
    "progress": ["reward.options.score=progress"],
    "potential_bonus": [
        "reward.options.score=progress",
        "reward.shaping=potential",
        "reward.success_bonus=1.0",
        "reward.success_threshold=0.5",
    ],
}
"""How the model's outputs become the reward. ``mean``: each step pays the mean of the success
probability and the progress. ``progress``: each step pays the progress alone (the shape of a dense
reward: being further along pays more on every step). ``potential_bonus``: the progress is a
potential (each step pays its change, ``gamma * phi(s') - phi(s)``) and a step pays 1 where the
success probability is at least 0.5, so a state the model rates as far along but not done pays
nothing while the policy stays in it."""

TASKS = {
    "reach": TaskSetting(("front", "wrist"), 500_000),
    "push": TaskSetting(("front",), 1_500_000),
}


def run(command: list[str], log_path: Path) -> tuple[str, float, int]:
    """Run a ``vla-rl`` command; (output, wall minutes, exit code), output also written to ``log_path``."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "vla_rl.cli", *command], capture_output=True, text=True)
    output = proc.stdout + proc.stderr
    log_path.write_text(output)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(command[:1])} failed ({proc.returncode}); see {log_path}")
    return output, (time.perf_counter() - start) / 60.0, proc.returncode


def record(task: str, folder: Path, overrides: list[str]) -> str:
    """``vla-rl collect`` of ``task`` into ``folder`` (every camera, lossless, failures kept) unless
    a dataset is already there."""
    if not (folder / "meta" / "info.json").exists():
        common = [f"env={task}", f"env.cameras=[{','.join(RECORDED_CAMERAS)}]", "video.lossless=true"]
        command = ["collect", *common, "keep_failures=true", *overrides, f"output_dir={folder}"]
        run(command, ROOT / f"{folder.name}.log")
    return str(folder)


def datasets(task: str, split: str, sets: tuple) -> list[str]:
    """Dataset folders of ``task``'s scripted-expert sets ``sets`` (recorded when missing)."""
    return [
        record(
            task,
            ROOT / "data" / f"{task}_{split}_{name}",
            [f"num_episodes={episodes}", f"noise_std={noise}", f"seed={seed}"],
        )
        for name, episodes, noise, seed in sets
    ]


def policy_rollouts(task: str, run_dir: Path) -> str:
    """``ROLLOUT_EPISODES`` episodes of the policy trained in ``run_dir`` (sampled actions), each
    labelled by the environment's success flag (recorded when missing)."""
    overrides = [f"policy_checkpoint={run_dir}", f"num_episodes={ROLLOUT_EPISODES}", "seed=20"]
    return record(task, ROOT / "data" / f"{run_dir.name}_rollouts", overrides)


def reward_model(
    task: str,
    setting: TaskSetting,
    retrain: bool,
    extra: tuple[str, ...] = (),
    name: str = "",
    progress_labels: str = "time",
) -> tuple[Path, dict]:
    """The fitted reward model's folder and its ``metrics.json`` (fitted when missing), trained on
    the task's recorded sets plus the ``extra`` dataset folders."""
    folder = ROOT / "models" / (name or task)
    if retrain or not (folder / "metrics.json").exists():
        train = ",".join([*datasets(task, "train", TRAIN_SETS), *extra])
        held_out = ",".join(datasets(task, "test", HELD_OUT_SETS))
        overrides = [
            f"task={task}",
            f"datasets=[{train}]",
            f"eval_datasets=[{held_out}]",
            f"model.cameras=[{','.join(setting.cameras)}]",
            f"steps={setting.reward_train_steps}",
            f"progress_labels={progress_labels}",
            f"output_dir={folder}",
        ]
        run(["reward-train", *overrides], ROOT / f"{folder.name}_reward_train.log")
    return folder, json.loads((folder / "metrics.json").read_text())


def train_ppo(task: str, setting: TaskSetting, reward_overrides: list[str], name: str) -> dict:
    """One PPO run of ``setting.env_steps`` steps, judged by the environment's success flag; a run
    finished by an earlier invocation (its ``<name>.json``) is reported, not repeated."""
    record = ROOT / f"{name}.json"
    if record.exists():
        return json.loads(record.read_text())
    overrides = [
        f"env={task}",
        # The network the results in benchmarks/results/reward_model_ppo.md were measured with
        # (reach's default was this until 2026-11-27; it now uses its own [64, 64]).
        "policy.hidden_sizes=[256,256,128]",
        f"total_env_steps={setting.env_steps}",
        "max_minutes=0",
        "eval.video=false",
        "logger.progress_bar=false",
        f"run_dir={ROOT / name}",
        *reward_overrides,
    ]
    output, wall_min, _ = run(["train", *overrides], ROOT / f"{name}.log")
    matches = SUCCESS_PATTERN.findall(output)
    success = float(matches[-1][1]) / 100.0 if matches else float("nan")
    result = {"success": success, "wall_min": wall_min, "env_steps": setting.env_steps}
    record.write_text(json.dumps(result))
    return result


def learned_run(task: str, setting: TaskSetting, folder: Path, use: str, name: str) -> dict:
    """PPO on the reward model in ``folder`` alone (environment reward weight 0)."""
    cameras = ",".join(setting.cameras)
    overrides = [
        "reward=learned",
        f"reward.path={folder}",
        f"env.cameras=[{cameras}]",
        f"reward.cameras=[{cameras}]",
        *REWARD_USES[use],
    ]
    return train_ppo(task, setting, overrides, name)


def print_quality(label: str, metrics: dict) -> None:
    quality = metrics["quality"]
    print(
        f"{label} (held-out {quality['episodes']} episodes, {quality['frames']} frames): "
        f"success AUROC {quality['success_auroc']:.3f}, progress Spearman vs true progress "
        f"{quality['progress_spearman_true']:.3f} (vs labels {quality['progress_spearman_labels']:.3f}), "
        f"fitted on {metrics['train_frames']:,} frames in {metrics['train_time_s'] / 60:.1f} min",
        flush=True,
    )


def record_result(task: str, values: dict, group: str = "") -> None:
    """Merge ``values`` into ``results[task]`` (or ``results[task][group]``) of the results file,
    read just before writing so that invocations running side by side keep each other's rows."""
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results["machine"] = machine_line()
    entry = results.setdefault(task, {})
    (entry.setdefault(group, {}) if group else entry).update(values)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--retrain", action="store_true", help="fit the reward models again")
    parser.add_argument("--reward-use", choices=list(REWARD_USES), default="potential_bonus")
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="N > 1: before each further round, record the last PPO policy's rollouts, refit the reward "
        "model with every round's rollouts so far, and train again",
    )
    parser.add_argument(
        "--cameras",
        nargs="+",
        choices=("front", "top", "wrist"),
        help="the reward model's cameras (default: the task's)",
    )
    parser.add_argument(
        "--progress-labels",
        choices=("time", "task_state"),
        default="time",
        help="progress labels of reward-train: time on successful episodes, or every frame from the "
        "recorded simulator state (the path still to travel)",
    )
    args = parser.parse_args()
    ROOT.mkdir(parents=True, exist_ok=True)
    print(f"machine: {machine_line()}")
    for task in args.tasks:
        setting = TASKS[task]
        suffix, cameras_chosen = "", False
        if args.cameras and tuple(args.cameras) != setting.cameras:
            setting = dataclasses.replace(setting, cameras=tuple(args.cameras))
            suffix, cameras_chosen = "_" + "_".join(args.cameras), True
        if args.progress_labels != "time":
            suffix += f"_{args.progress_labels}_progress"
        labels = args.progress_labels
        folder, metrics = reward_model(
            task, setting, args.retrain, name=f"{task}{suffix}", progress_labels=labels
        )
        print_quality(f"{task} reward model", metrics)
        dense = train_ppo(task, setting, [], f"{task}_dense")
        print(
            f"{task}: {setting.env_steps:,} env steps per PPO run | dense reward "
            f"{100 * dense['success']:.1f} % ({dense['wall_min']:.1f} min)",
            flush=True,
        )
        record_result(task, {"dense": dense, f"reward_model{suffix}": metrics})
        name = f"{task}_learned" if args.reward_use == "mean" else f"{task}_learned_{args.reward_use}"
        name += suffix
        first_name, rollouts = name, []
        for round_index in range(1, args.rounds + 1):
            if round_index > 1:
                rollouts.append(policy_rollouts(task, ROOT / name))
                name = f"{first_name}_r{round_index}"
                folder, metrics = reward_model(task, setting, args.retrain, tuple(rollouts), name, labels)
                refit = f"{task} reward model refitted on the rollouts of {round_index - 1} earlier policies"
                print_quality(refit, metrics)
            learned = learned_run(task, setting, folder, args.reward_use, name)
            ratio = learned["success"] / dense["success"] if dense["success"] > 0 else float("nan")
            label = args.reward_use if round_index == 1 else f"{args.reward_use}, round {round_index}"
            label += f", cameras {' + '.join(setting.cameras)}" if cameras_chosen else ""
            label += f", progress from the {labels.replace('_', ' ')}" if labels != "time" else ""
            record_result(task, {label: {**learned, "ratio": ratio, "reward_model": metrics}}, "learned")
            print(
                f"{task}: reward model only ({label}) {100 * learned['success']:.1f} % "
                f"({learned['wall_min']:.1f} min) | ratio to dense {ratio:.2f} (target {TARGET_RATIO}) "
                f"{'PASS' if ratio >= TARGET_RATIO else 'FAIL'}",
                flush=True,
            )


if __name__ == "__main__":
    main()
