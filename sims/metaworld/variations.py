"""MetaWorld's fixed task variations: the 50 ``Task`` objects per env that its benchmarks carry.

A MetaWorld benchmark (``metaworld.MT1(name, seed)``, ``MT10(seed)``, ``MT50(seed)``) draws, once,
50 variations (goal and object positions) for each of its envs from NumPy's global generator seeded
with ``seed``, one env after the other; its ``train_tasks`` hold them in that order, and MetaWorld's
own evaluation (``metaworld.evaluation.evaluation``) plays episodes of those variations only. The
variations of an env therefore depend on the benchmark (reach in MT10 is not reach in MT1) and on
its seed: :func:`variation_benchmark` names the benchmark an ``env.task`` takes them from.
"""

from __future__ import annotations

import functools
from typing import Any

from vla_rl.sims.metaworld.tasks import MT10_TASKS, benchmark_tasks

from vla_rl.envs.extras import import_optional

VARIATIONS_PER_TASK = 50
"""``metaworld._N_GOALS``: variations a MetaWorld benchmark draws per env."""


def variation_benchmark(task: str) -> str:
    """The MetaWorld benchmark whose variations ``env.task`` plays: ``"MT10"`` and ``"MT50"`` their
    own, one v3 task MT1's (``"MT1:reach-v3"``, as MetaWorld's ``make_mt_envs("reach-v3")``), tasks
    joined by ``+`` those of the smallest benchmark holding them all (MT10, else MT50)."""
    tasks = benchmark_tasks(task)
    if task in ("MT10", "MT50"):
        return task
    if len(tasks) == 1:
        return f"MT1:{tasks[0]}"
    return "MT10" if set(tasks) <= set(MT10_TASKS) else "MT50"


@functools.lru_cache(maxsize=4)
def benchmark_train_tasks(benchmark: str, seed: int) -> dict[str, tuple[Any, ...]]:
    """Env name -> its ``metaworld.Task`` variations, in the order of ``benchmark.train_tasks``.

    Built by MetaWorld itself (``MT10(seed=seed)`` ...): 0.5 s for MT1, ~5 s for MT10 and ~25 s for
    MT50 on two CPU cores, so each (benchmark, seed) is built once per process.
    """
    metaworld = import_optional("metaworld", extra="metaworld", backend="metaworld")
    if benchmark.startswith("MT1:"):
        built = metaworld.MT1(benchmark.removeprefix("MT1:"), seed=seed)
    elif benchmark in ("MT10", "MT50"):
        built = getattr(metaworld, benchmark)(seed=seed)
    else:
        raise ValueError(f"unknown MetaWorld benchmark {benchmark!r}: 'MT1:<task>', 'MT10' or 'MT50'")
    by_env: dict[str, list[Any]] = {}
    for task in built.train_tasks:
        by_env.setdefault(task.env_name, []).append(task)
    return {name: tuple(tasks) for name, tasks in by_env.items()}
