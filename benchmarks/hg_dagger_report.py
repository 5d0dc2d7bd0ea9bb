"""The HG-DAgger benchmark's report (``benchmarks.hg_dagger``): a row's classifier columns and the
markdown table of the rounds."""

from __future__ import annotations

from typing import Any

import numpy as np


def classifier_columns(summary: dict[str, Any]) -> dict[str, Any]:
    """Where a classifier ended the deployed episodes: the simulator's success rate beside it and the
    share of episodes on which the two agree (else nothing)."""
    episodes = summary["per_episode"]
    if summary.get("sim_success_rate") is None:
        return {}
    agree = [e["success"] == e["sim_success"] for e in episodes]
    return {
        "deploy_sim_success_rate": summary["sim_success_rate"],
        "classifier_agreement": float(np.mean(agree)),
    }


def deployed_success(row: dict[str, Any]) -> str:
    """The deployed episodes' success; where a classifier ended them, the simulator's beside it."""
    if "deploy_sim_success_rate" not in row:
        return percent(row["deploy_success_rate"])
    return (
        f"{percent(row['deploy_success_rate'])} by the classifier, "
        f"{percent(row['deploy_sim_success_rate'])} by the simulator"
    )


def percent(rate: float | None) -> str:
    return "-" if rate is None else f"{100 * rate:.1f} %"


def table(rows: list[dict[str, Any]], eval_episodes: int, eval_seed: int) -> str:
    """The markdown table of ``run_rounds``'s rows."""
    lines = [
        "| round | success (no interventions) | control: demonstrations only, same steps "
        "| deployed episodes | deployed success (with expert) | intervention steps / deployed steps "
        "| frames trained on (demonstration + takeover) | wall-clock |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        wall = f"{row['wall_s'] / 60:.1f} min"
        if row["round"] == 0:
            lines.append(
                f"| 0 (weak start) | {100 * row['success_rate']:.1f} % | - | - | - | - | "
                f"{row['frames_trained_on']} + 0 | {wall} |"
            )
            continue
        demo_frames = row["frames_trained_on"] - row["aggregate_intervention_frames"]
        lines.append(
            f"| {row['round']} | {100 * row['success_rate']:.1f} % | "
            f"{percent(row['control_success_rate'])} | {row['deploy_episodes']} | "
            f"{deployed_success(row)} | {row['intervention_steps']} / "
            f"{row['deploy_steps']} | {demo_frames} + {row['aggregate_intervention_frames']} | {wall} |"
        )
    lines.append("")
    lines.append(
        f"Success over {eval_episodes} evaluation episodes per policy (seeds from {eval_seed}); "
        "a round's wall-clock is its deployment, SFT and evaluation (not the control's)."
    )
    return "\n".join(lines) + "\n"
