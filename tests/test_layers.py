"""The layer contracts of ``.importlinter`` hold for the whole installed library, and they would
catch an upward import (import-linter run on the graph of ``import_graph.py``)."""

from __future__ import annotations

import grimp
import pytest
from import_graph import REPO_ROOT, build_graph, library_modules

pytest.importorskip("importlinter")


class _FixedGraph:
    def __init__(self, graph: grimp.ImportGraph) -> None:
        self.graph = graph

    def build(self, *args: object, **kwargs: object) -> grimp.ImportGraph:
        return self.graph


def _contracts_hold(graph: grimp.ImportGraph) -> bool:
    from importlinter import configuration
    from importlinter.application import use_cases
    from importlinter.application.app_config import settings

    configuration.configure()
    settings.configure(GRAPH_BUILDER=_FixedGraph(graph))
    return use_cases.lint_imports(str(REPO_ROOT / ".importlinter"), cache_dir=None, no_logo=True)


def test_the_library_keeps_its_layers() -> None:
    assert _contracts_hold(build_graph())


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        ("vla_rl.envs.base", "vla_rl.policies.base"),  # envs below policies
        ("vla_rl.rollout.collector", "vla_rl.training.checkpoint"),  # rollout below training
        ("vla_rl.sims.mujoco.batched_env", "vla_rl.data.episode"),  # a backend below data
        ("vla_rl.config.structured", "vla_rl.envs.config"),  # the bottom imports nothing
        ("vla_rl.algorithms.ppo", "benchmarks"),  # nothing from benchmarks/ or tests/
    ],
)
def test_an_upward_import_breaks_a_contract(importer: str, imported: str) -> None:
    graph = build_graph()
    if imported not in graph.modules:
        graph.add_module(imported, is_squashed=True)
    graph.add_import(importer=importer, imported=imported, line_number=1, line_contents="import x")
    assert not _contracts_hold(graph)


def test_every_library_module_sits_in_a_layer() -> None:
    layered = ("vla_rl.cli", "vla_rl.real_world", "vla_rl.distributed", "vla_rl.training", "vla_rl.config.")
    layered += ("vla_rl.algorithms", "vla_rl.rollout", "vla_rl.rewards", "vla_rl.data", "vla_rl.policies")
    layered += ("vla_rl.sims", "vla_rl.robots", "vla_rl.envs", "vla_rl.registry")
    contracts = (REPO_ROOT / ".importlinter").read_text()
    for prefix in layered:
        assert prefix.rstrip(".") in contracts
    unlayered = [m for m in library_modules() if not m.startswith(layered)]
    # The package roots only: ``vla_rl`` (its version), ``vla_rl.config`` (lazy re-exports),
    # ``vla_rl.configs`` (the YAML package).
    assert sorted(unlayered) == ["vla_rl", "vla_rl.config", "vla_rl.configs"]
