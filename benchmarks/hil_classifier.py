"""The success classifier of ``benchmarks.hil_pick_place``: labelled episodes of the scripted expert
and of the weak start (``vla-rl collect``'s writer, front camera, the simulator's success flag on
every frame), ``vla-rl reward-train`` on them, the session's episode rule (threshold and periods in a
row) chosen on validation episodes where asked, and its accuracy on held-out episodes at that rule and
the session's instruction."""

from __future__ import annotations

import dataclasses
import json
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks import hg_dagger

CAMERA = "front"
INSTRUCTION = "put the cube on the pad"
"""What the session asks the classifier (``success.instruction``): one fixed sentence, as on a real
arm. The recorded episodes carry pick_place's own instructions, which name colours."""
CLASSIFIER_SEEDS = {"train": 20_000, "held_out": 30_000, "validation": 40_000}
"""The first seed of each split's episodes; ``validation`` is recorded only to choose the episode rule."""
RULE_THRESHOLDS = (0.5, 0.7, 0.8, 0.9, 0.95, 0.98)
RULE_PERIODS = (1, 2, 3, 5, 8, 12)
"""The episode rules ``choose_episode_rule`` tries: every threshold with every number of periods."""


def load_start(run: Path) -> Any:  # noqa: ANN401 - a ChunkPolicy
    """The weak start (HG-DAgger's round 0, a ``flow_mlp`` SFT run), in eval mode."""
    from vla_rl.policies.registry import load_chunk_policy
    from vla_rl.training.checkpoint import resolve_policy_dir

    return load_chunk_policy("flow_mlp", resolve_policy_dir(run)).eval()


class StartActor:
    """The start acting for ``vla-rl collect``'s writer: the first action of a sampled chunk per world,
    re-planned every step (``act`` mirrors ``ScriptedExpert.act``)."""

    def __init__(self, env: Any, run: Path, seed: int) -> None:  # noqa: ANN401 - BatchedEnv
        import torch

        self.policy = load_start(run)
        torch.manual_seed(seed)

    def act(self, obs: dict) -> tuple[Any, Any]:
        actions = self.policy.sample(obs).actions[:, 0].float().clamp(-1.0, 1.0)
        return actions, actions


def record(folder: Path, episodes: int, seed: int, start: Path | None) -> str:
    """``episodes`` episodes of the expert (``start`` None) or of the start, front camera (lossless),
    failures kept, each frame with the simulator's success flag."""
    from vla_rl.data.collect import collect_demonstrations
    from vla_rl.data.config import compose_collect_config

    cfg = compose_collect_config(
        [
            "env=pick_place",
            f"env.cameras=[{CAMERA}]",
            f"env.num_envs={min(episodes, 4)}",
            f"num_episodes={episodes}",
            "keep_failures=true",
            "video.lossless=true",
            f"seed={seed}",
            f"output_dir={folder}",
        ]
    )
    actor = None if start is None else partial(StartActor, run=start, seed=seed)
    result = collect_demonstrations(cfg, actor)
    who = "expert" if start is None else "start"
    print(f"recorded {result.episodes_written} {who} episodes, success {100 * result.success_rate:.0f} %")
    return str(folder)


def classifier_data(
    work: Path, start: Path, expert_episodes: int, start_rollouts: int, validation: bool = False
) -> dict[str, list[str]]:
    """Labelled episodes under ``work``: per split (``CLASSIFIER_SEEDS``) the expert's and the start's,
    a third as many held out (and, with ``validation``, as many again for choosing the rule) as
    trained on."""
    data = work / "classifier_data"
    sets: dict[str, list[str]] = {}
    for split, seed in CLASSIFIER_SEEDS.items():
        if split == "validation" and not validation:
            continue
        share = 1 if split == "train" else 3
        sets[split] = [
            record(data / f"{split}_expert", max(1, expert_episodes // share), seed, None),
            record(data / f"{split}_start", max(1, start_rollouts // share), seed + 5_000, start),
        ]
    return sets


def train_classifier(work: Path, sets: dict[str, list[str]], steps: int, batch_size: int) -> Path:
    """``vla-rl reward-train`` on the front camera, scored by it on the held-out episodes too."""
    out = work / "classifier"
    hg_dagger.vla_rl(
        "reward-train",
        "task=pick_place",
        f"datasets=[{','.join(sets['train'])}]",
        f"eval_datasets=[{','.join(sets['held_out'])}]",
        f"model.cameras=[{CAMERA}]",
        f"steps={steps}",
        f"batch_size={batch_size}",
        f"output_dir={out}",
    )
    return out


def fires(probabilities: Any, threshold: float, consecutive: int) -> bool:  # noqa: ANN401 - array
    """Whether a run of ``consecutive`` probabilities at ``threshold`` occurs (the session's rule)."""
    streak = 0
    for p in probabilities:
        streak = streak + 1 if p >= threshold else 0
        if streak >= consecutive:
            return True
    return False


def choose_episode_rule(
    probabilities: list[Any], succeeded: list[bool], thresholds: tuple = RULE_THRESHOLDS,
    periods: tuple = RULE_PERIODS,
) -> dict[str, Any]:  # fmt: skip
    """The episode rule with the best episode accuracy on labelled episodes (each episode's per-frame
    probabilities, and whether the simulator flagged success on any of its frames); ties go to fewer
    false positives, then fewer periods, then the lower threshold. Returns the rule and every rule's
    accuracy and false positives (``grid``)."""
    grid = []
    for threshold in thresholds:
        for consecutive in periods:
            judged = [fires(p, threshold, consecutive) for p in probabilities]
            right = sum(j == t for j, t in zip(judged, succeeded, strict=True))
            false_positives = sum(j and not t for j, t in zip(judged, succeeded, strict=True))
            grid.append(
                {
                    "threshold": threshold,
                    "consecutive_steps": consecutive,
                    "episode_accuracy": right / len(succeeded),
                    "episode_false_positives": false_positives,
                }
            )
    best = max(
        grid,
        key=lambda r: (
            r["episode_accuracy"], -r["episode_false_positives"], -r["consecutive_steps"], -r["threshold"]
        ),
    )  # fmt: skip
    return {**best, "episodes": len(succeeded), "grid": grid}


def scored_episodes(model_dir: Path, folders: list[str]) -> tuple[Any, Any, Any]:
    """The classifier's success probability of every frame of ``folders``, asked the session's
    instruction, with each frame's label (the simulator's flag of the state shown) and episode index."""
    from vla_rl.rewards.fit import load_frames, score_frames
    from vla_rl.rewards.learned import load_learned_reward_model

    model = load_learned_reward_model(model_dir, score="success")
    frames = load_frames(folders, [CAMERA])
    frames = dataclasses.replace(frames, instructions=[INSTRUCTION] * len(frames))
    probability, _ = score_frames(model, frames)
    return probability, frames.success.numpy() > 0.5, frames.episode.numpy()


def per_episode(probability: Any, label: Any, episodes: Any) -> tuple[list[Any], list[bool]]:  # noqa: ANN401
    """Each episode's probabilities, and whether any of its frames was a success."""
    import numpy as np

    indices = np.unique(episodes)
    return [probability[episodes == i] for i in indices], [bool(label[episodes == i].any()) for i in indices]


def rule_on_validation(model_dir: Path, validation: list[str]) -> dict[str, Any]:
    """``choose_episode_rule`` on the validation episodes (never the held-out ones it is scored on)."""
    return choose_episode_rule(*per_episode(*scored_episodes(model_dir, validation)))


def classifier_accuracy(
    model_dir: Path, held_out: list[str], threshold: float, consecutive_steps: int
) -> dict[str, Any]:
    """Held-out accuracy at the session's threshold and instruction: per frame (the label: the
    simulator's flag of the state shown) and per episode (fires under the session's rule vs the
    simulator flagged success on some step)."""
    import numpy as np

    from vla_rl.rewards.fit import METRICS_FILE

    probability, label, episodes = scored_episodes(model_dir, held_out)
    said = probability >= threshold
    episode_probabilities, truth = per_episode(probability, label, episodes)
    truth_a = np.array(truth)
    judged_a = np.array([fires(p, threshold, consecutive_steps) for p in episode_probabilities])
    metrics = json.loads((model_dir / METRICS_FILE).read_text())
    return {
        "frames": int(len(label)),
        "positive_frames": int(label.sum()),
        "frame_accuracy": float((said == label).mean()),
        "frame_true_positive_rate": float(said[label].mean()) if label.any() else None,
        "frame_true_negative_rate": float((~said[~label]).mean()) if (~label).any() else None,
        "episodes": len(truth),
        "successful_episodes": int(truth_a.sum()),
        "episode_accuracy": float((truth_a == judged_a).mean()),
        "episode_false_positives": int((judged_a & ~truth_a).sum()),
        "episode_false_negatives": int((~judged_a & truth_a).sum()),
        "reward_train_quality": metrics.get("quality"),
    }
