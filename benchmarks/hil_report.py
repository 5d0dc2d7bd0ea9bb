"""What ``benchmarks.hil_pick_place`` reports of its sessions: each session's episodes in order, success
per block of episodes by the simulator's flag (all, and unassisted: no takeover in the episode), the
first episode at which the trailing ``TRAILING`` episodes reach ``TARGET``, the same over the episodes
the expert did not watch (``watch_probability`` < 1: those are the policy's alone), the success judge's
agreement with the simulator, and the markdown table of the whole report."""

from __future__ import annotations

from typing import Any

TRAILING = 20
TARGET = 0.8


def ordered_episodes(actors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every actor's episodes, round-robin by episode index (the order they ran in, roughly)."""
    return sorted(
        (episode | {"actor": i} for i, actor in enumerate(actors) for episode in actor["per_episode"]),
        key=lambda e: (e["index"], e["actor"]),
    )


def first_reaching(flags: list[bool]) -> int | None:
    """The 1-based episode at which the trailing ``TRAILING`` episodes first reach ``TARGET``."""
    for end in range(TRAILING, len(flags) + 1):
        if sum(flags[end - TRAILING : end]) >= TARGET * TRAILING:
            return end
    return None


def unwatched_summary(episodes: list[dict[str, Any]]) -> dict[str, Any]:
    """Success over the episodes the expert did not watch, and the session's 1-based episode at which
    the trailing ``TRAILING`` of them first reach ``TARGET`` (None: not reached, or none unwatched)."""
    alone = [(n, bool(e["sim_success"])) for n, e in enumerate(episodes, 1) if e.get("watched") is False]
    flags = [success for _, success in alone]
    reached = first_reaching(flags)
    return {
        "unwatched_episodes": len(alone),
        "unwatched_sim_success_rate": sum(flags) / len(flags) if flags else None,
        "first_episode_trailing_80_unwatched": alone[reached - 1][0] if reached else None,
    }


def episode_summary(episodes: list[dict[str, Any]], block: int = 10) -> dict[str, Any]:
    if any(e["sim_success"] is None for e in episodes):
        raise SystemExit("an episode lacks the simulator's success flag (sim_success)")
    sim = [bool(e["sim_success"]) for e in episodes]
    unassisted = [bool(e["sim_success"]) and e["intervention_steps"] == 0 for e in episodes]
    judged = [bool(e["success"]) for e in episodes]
    blocks = []
    for first in range(0, len(episodes), block):
        part = episodes[first : first + block]
        n = len(part)
        blocks.append(
            {
                "episodes": f"{first + 1}-{first + n}",
                "sim_success": sum(sim[first : first + n]) / n,
                "unassisted_sim_success": sum(unassisted[first : first + n]) / n,
                "classifier_success": sum(judged[first : first + n]) / n,
                "intervention_steps": sum(e["intervention_steps"] for e in part),
                "steps": sum(e["steps"] for e in part),
                "held_steps": sum(e["held_steps"] for e in part),
            }
        )
    agree = [a == b for a, b in zip(sim, judged, strict=True)]
    return {
        "episodes": len(episodes),
        "sim_success_rate": sum(sim) / max(1, len(sim)),
        "first_episode_trailing_80": first_reaching(sim),
        "first_episode_trailing_80_unassisted": first_reaching(unassisted),
        "intervention_steps": sum(e["intervention_steps"] for e in episodes),
        "steps": sum(e["steps"] for e in episodes),
        "held_steps": sum(e["held_steps"] for e in episodes),
        "classifier_agreement": sum(agree) / max(1, len(agree)),
        "classifier_false_positives": sum(j and not t for t, j in zip(sim, judged, strict=True)),
        "classifier_false_negatives": sum(t and not j for t, j in zip(sim, judged, strict=True)),
        **unwatched_summary(episodes),
        "blocks": blocks,
        "per_episode": episodes,
    }


def pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f} %"


def rule_line(rule: dict[str, Any] | None, settings: dict[str, Any]) -> list[str]:
    """The classifier's episode rule: chosen on validation episodes, or the settings' own."""
    if settings["success"] != "classifier":
        return []
    rule_text = f"{settings['threshold']:g} on {settings['consecutive_steps']} periods in a row"
    if rule is None:
        return [f"Episode rule (fixed): {rule_text}."]
    return [
        f"Episode rule, chosen on {rule['episodes']} validation episodes: {rule_text} (validation "
        f"episode accuracy {pct(rule['episode_accuracy'])}, "
        f"{rule['episode_false_positives']} false positives)."
    ]


def table(report: dict[str, Any]) -> str:
    start, acc = report["start"], report["classifier"]
    judge = "classifier" if acc else "success flag (the simulator's)"
    lines = [
        f"Start: {pct(start['eval']['success_once_rate'])} success on any step "
        f"({pct(start['eval']['success_rate'])} at the last) over {start['eval']['episodes']} episodes "
        f"(at most {pct(report['settings']['start_max_success'])}: {'yes' if start['weak'] else 'NO'}).",
        f"Classifier, held out: frame accuracy {pct(acc['frame_accuracy'])} over {acc['frames']} frames "
        f"({acc['positive_frames']} successful), episode accuracy {pct(acc['episode_accuracy'])} over "
        f"{acc['episodes']} episodes ({acc['episode_false_positives']} false positives, "
        f"{acc['episode_false_negatives']} false negatives)."
        if acc
        else "No classifier: the simulator's success flag ends the episodes and gives the reward.",
        *rule_line(report.get("episode_rule"), report["settings"]),
        "",
        "| session | episodes | simulator success | first episode with trailing-20 >= 80 % (unassisted) "
        "| intervention steps / steps | held by the safety layer "
        f"| {judge} agrees with simulator (FP / FN) "
        "| final evaluation (success on any step, at the last) | learner updates | wall-clock |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in report["sessions"]:
        final = row["final_eval"]
        lines.append(
            f"| {row['name']} | {row['episodes']} | {pct(row['sim_success_rate'])} | "
            f"{row['first_episode_trailing_80'] or 'not reached'} "
            f"({row['first_episode_trailing_80_unassisted'] or 'not reached'}) | "
            f"{row['intervention_steps']} / {row['steps']} | {row['held_steps']} | "
            f"{pct(row['classifier_agreement'])} "
            f"({row['classifier_false_positives']} / {row['classifier_false_negatives']}) | "
            f"{pct(final['success_once_rate'])}, {pct(final['success_rate'])} | "
            f"{row['learner']['updates']} | {row['wall_s'] / 60:.1f} min |"
        )
    for row in report["sessions"]:
        if row.get("unwatched_episodes"):
            reached = row["first_episode_trailing_80_unwatched"]
            lines += [
                "",
                f"{row['name']}: {row['unwatched_episodes']} episodes the expert did not watch, simulator "
                f"success {pct(row['unwatched_sim_success_rate'])}; trailing-20 of them >= 80 % "
                f"{f'at episode {reached}' if reached else 'not reached'}.",
            ]
    for row in report["sessions"]:
        lines += [
            "",
            f"Blocks of {row['name']} (simulator's flag; unassisted: no takeover in the episode):",
            "",
        ]
        lines += [f"| episodes | simulator success | unassisted | {judge} | intervention steps / steps |"]
        lines += ["|---|---|---|---|---|"]
        for b in row["blocks"]:
            lines.append(
                f"| {b['episodes']} | {pct(b['sim_success'])} | {pct(b['unassisted_sim_success'])} | "
                f"{pct(b['classifier_success'])} | {b['intervention_steps']} / {b['steps']} |"
            )
    return "\n".join(lines) + "\n"
