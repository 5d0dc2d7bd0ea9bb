"""The SFT curve: in-distribution success vs. demonstrations, one line per family.

Reads the rows ``benchmarks.sft_pick_place`` writes: each row names the decoding it is judged on
(``decoding``, a solid line) and holds every decoding measured (``success_by_decoding``; the others
are dashed). Redraw the committed figure from its JSON with

    python -m benchmarks.sft_plot
"""

from __future__ import annotations

import json
from pathlib import Path


def plot(results: dict[str, dict[str, dict]], full: int, target_success: float, path: Path) -> None:
    """``results[family][budget]`` rows (budget "0" = ``full`` demonstrations) -> a PNG at ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(5.4, 3.6), dpi=120)
    for family, by_budget in results.items():
        budgets = sorted(int(b) or full for b in by_budget)
        rows = [by_budget[str(b if b != full else 0)] for b in budgets]
        criterion = rows[-1]["decoding"]
        (line,) = axes.plot(
            budgets,
            [100 * row["success_by_decoding"][criterion] for row in rows],
            marker="o",
            label=f"{family}, {criterion}",
        )
        others = sorted({name for row in rows for name in row["success_by_decoding"]} - {criterion})
        for decoding in others:  # dashed, where that decoding was measured
            points = [
                (b, 100 * row["success_by_decoding"][decoding])
                for b, row in zip(budgets, rows, strict=True)
                if decoding in row["success_by_decoding"]
            ]
            xs, ys = zip(*points, strict=True)
            axes.plot(
                xs, ys, marker="x", linestyle="--", color=line.get_color(), label=f"{family}, {decoding}"
            )
    axes.axhline(100 * target_success, color="grey", linestyle="--", linewidth=1, label="target (full)")
    axes.set_xscale("log")
    axes.set_xlabel("demonstrations")
    axes.set_ylabel("success, in distribution (%)")
    axes.set_ylim(-3, 103)
    axes.set_title("SFT on pick_place")
    axes.legend(loc="upper left", fontsize=8)
    figure.tight_layout()
    figure.savefig(path)


def main() -> None:
    from benchmarks.common import results_files
    from benchmarks.sft_pick_place import TARGET_SUCCESS

    results_path, plot_path = results_files("sft_pick_place")
    saved = json.loads(results_path.read_text())
    plot(saved["results"], saved["full"], TARGET_SUCCESS, plot_path)


if __name__ == "__main__":
    main()
