"""The exploration of a ``benchmarks.hil_pick_place`` session's learner, measured after the session.

The session's actor runs SAC's *sampled* residual; the benchmark's final evaluation runs its mean.
This evaluates the learner's last checkpoint both ways on the same episodes, and measures how far a
sample moves the executed action from the mean one, in action units (the residual's range times the
squashed sample's distance from the squashed mean), over the mean policy's own evaluation states.
It also measures how much of the stored takeover residuals the actor's mean reproduces, over the
takeover transitions the learner kept (the slope of one on the other, both ways, and the variance
of the takeovers that the mean explains):

    python -m benchmarks.hil_exploration runs/bench/hil_pick_place_g/with_expert/learner \\
        runs/bench/hil_pick_place_g/no_interventions/learner --results-name hil_pick_place_g_exploration
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import torch

from benchmarks.common import RESULTS_DIR, machine_line, write_report
from benchmarks.hil_evaluation import EVAL_SEED, eval_env, evaluate_learner, saved_transitions
from vla_rl.algorithms.ppo import explained_variance

SAMPLES_PER_STATE = 8
"""Residual samples drawn per state to measure their spread."""
ZERO_RESIDUAL = 0.01
"""A stored takeover residual below this in magnitude counts as zero (the expert did what the start
did in that dimension)."""


@torch.no_grad()
def sample_spread(policy: Any, wrap: Any, worlds: int, steps: int) -> dict[str, float]:  # noqa: ANN401
    """Over ``steps`` periods of ``worlds`` evaluation episodes driven by the mean residual: the mean
    per-dimension distance of a sampled executed action from the mean one (action units), its median
    over states, and the median standard deviation of the actor's Gaussian (before the tanh).
    ``policy`` and ``wrap``: a learner's networks and frozen-policy wrapper (``load_off_policy_run``)."""
    from vla_rl.envs.registry import make_env

    env = wrap(make_env(eval_env(worlds)))
    try:
        obs, _ = env.reset(seed=EVAL_SEED)
        distances, stds = [], []
        for _ in range(steps):
            features = policy.encode(obs)
            mean, log_std = policy.actor(features)
            samples = torch.stack([policy.actor.sample(features)[0] for _ in range(SAMPLES_PER_STATE)])
            distances.append(env.residual_scale * (samples - torch.tanh(mean)).abs().mean(dim=(0, 2)))
            stds.append(log_std.exp().flatten())
            obs = env.step(torch.tanh(mean)).obs
    finally:
        env.close()
    distance, std = torch.cat(distances), torch.cat(stds)
    return {
        "residual_scale": float(env.residual_scale),
        "states": int(distance.numel()),
        "mean_sample_distance": float(distance.mean()),
        "median_sample_distance": float(distance.median()),
        "median_pre_tanh_std": float(std.median()),
    }


def slope_through_origin(x: torch.Tensor, y: torch.Tensor) -> float:
    """The least-squares slope of ``y`` on ``x`` through the origin, all elements pooled:
    ``sum(x y) / sum(x^2)``."""
    return float((x * y).sum() / x.square().sum())


@torch.no_grad()
def takeover_imitation(policy: Any, run_dir: Path) -> dict[str, Any] | None:  # noqa: ANN401
    """Over the takeover transitions in the learner's last checkpoint (its intervention replay), with
    their count (None without any):

    * ``slope``: of the actor's mean residual on the stored one (1: the mean reproduces the
      takeovers; 0: it ignores them). Where the stored corrections vary at the same observation, even
      their exact average scores below 1 here: about the share of their variance it explains;
    * ``slope_stored_on_mean``: the other way round, 1 for their average whatever that variation;
      a mean shrunk towards zero by a factor ``k`` scores ``1 / k``;
    * ``explained_variance`` of the stored corrections by the mean, all dimensions pooled;
    * per action dimension: ``slope``, the actor's median std before the tanh, and the share of rows
      whose stored residual is (nearly) zero.

    ``policy``: the learner's networks (``load_off_policy_run``)."""
    from vla_rl.training.off_policy.trainer import INTERVENTIONS_FILENAME

    batch = saved_transitions(run_dir, INTERVENTIONS_FILENAME)
    if batch is None:
        return None
    mean, log_std = policy.actor(policy.encode(batch.obs))
    stored, mean_action = batch.action, torch.tanh(mean)
    dims = range(stored.shape[-1])
    return {
        "transitions": len(batch),
        "slope": slope_through_origin(stored, mean_action),
        "slope_stored_on_mean": slope_through_origin(mean_action, stored),
        "explained_variance": explained_variance(mean_action.flatten(), stored.flatten()),
        "slope_per_dim": [slope_through_origin(stored[:, d], mean_action[:, d]) for d in dims],
        "median_pre_tanh_std_per_dim": log_std.exp().median(dim=0).values.tolist(),
        "zero_share_per_dim": (stored.abs() < ZERO_RESIDUAL).float().mean(dim=0).tolist(),
    }


def measure(run_dir: Path, episodes: int, worlds: int, steps: int) -> dict[str, Any]:
    """Both evaluations, the spread and the takeovers' imitation of one learner. Torch's global
    generator (the samples', and the frozen flow policy's starting noise) is seeded first, so that a
    repeat gives the same figures."""
    from vla_rl.training.off_policy.networks import load_off_policy_run

    torch.manual_seed(EVAL_SEED)
    policy, wrap = load_off_policy_run(run_dir)
    return {
        "run": str(run_dir),
        "mean_residual": evaluate_learner(run_dir, episodes, worlds),
        "sampled_residual": evaluate_learner(run_dir, episodes, worlds, deterministic=False),
        "spread": sample_spread(policy, wrap, worlds, steps),
        "takeovers": takeover_imitation(policy, run_dir),
    }


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| learner | mean residual: success on any step | sampled residual | sample's distance from the "
        "mean action (mean, median; action units) | actor's std before tanh (median) | slope of the mean "
        "residual on the stored takeovers', and back (transitions) |",
        "|---|---:|---:|---|---:|---|",
    ]
    for row in rows:
        mean, sampled, spread = row["mean_residual"], row["sampled_residual"], row["spread"]
        takeovers = row["takeovers"]
        imitation = (
            "none"
            if takeovers is None
            else f"{takeovers['slope']:.2f}, {takeovers['slope_stored_on_mean']:.2f} "
            f"({takeovers['transitions']:,})"
        )
        lines.append(
            f"| {row['run']} | {100 * mean['success_once_rate']:.1f} % | "
            f"{100 * sampled['success_once_rate']:.1f} % | {spread['mean_sample_distance']:.3f}, "
            f"{spread['median_sample_distance']:.3f} | {spread['median_pre_tanh_std']:.3f} | {imitation} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, nargs="+", help="learner run folders of the sessions")
    parser.add_argument("--episodes", type=int, default=200, help="evaluation episodes, each way")
    parser.add_argument("--worlds", type=int, default=10)
    parser.add_argument("--steps", type=int, default=120, help="periods the spread is measured over")
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    parser.add_argument("--results-name", default="hil_exploration")
    args = parser.parse_args(argv)
    rows = [measure(run, args.episodes, args.worlds, args.steps) for run in args.runs]
    report = {"machine": machine_line(), "episodes": args.episodes, "learners": rows}
    markdown = f"Machine: {report['machine']}.\n\n" + table(rows)
    write_report(args.results_dir, args.results_name, report, markdown)
    print(markdown)


if __name__ == "__main__":
    sys.exit(main())
