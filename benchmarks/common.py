"""Small helpers shared by the benchmarks: timing medians and a machine description."""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable
from datetime import date


def machine_line() -> str:
    import torch

    cpu = platform.processor() or platform.machine()
    return (
        f"{date.today().isoformat()}, {os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, "
        f"torch {torch.__version__}"
    )


def median_rate(run_once: Callable[[], int], repeats: int) -> tuple[float, list[float]]:
    """Call ``run_once`` (which returns the number of items it processed) ``repeats`` times and
    return the median items/s and all rates."""
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        items = run_once()
        rates.append(items / (time.perf_counter() - start))
    return statistics.median(rates), rates
