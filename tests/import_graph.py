"""The import graph of the installed library, for the layer contracts and the import-cycle test.

The repository installs ``sims/``, ``robots/`` and ``real_world/`` as ``vla_rl.sims`` and so on
(``[tool.setuptools] package-dir`` in ``pyproject.toml``). Grimp, which import-linter uses, finds a
package's modules below its own directory only, so it would see neither those modules nor the
imports of them. This file walks every directory of that table with ``ast`` instead: every
``import`` statement counts, at module level, inside functions and under ``TYPE_CHECKING``.

``python tests/import_graph.py`` runs import-linter's ``lint-imports`` (contracts in
``.importlinter``) on this graph; ``make test`` does so.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import grimp

REPO_ROOT = Path(__file__).resolve().parents[1]
ROOT_PACKAGE = "vla_rl"


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line_number: int
    line_contents: str


def package_directories(repo_root: Path = REPO_ROOT) -> dict[str, Path]:
    """``{"vla_rl": <repo>/vla_rl, "vla_rl.sims": <repo>/sims, ...}`` from ``pyproject.toml``."""
    with (repo_root / "pyproject.toml").open("rb") as file:
        table = tomllib.load(file)["tool"]["setuptools"]["package-dir"]
    return {package: repo_root / directory for package, directory in table.items()}


def library_modules(repo_root: Path = REPO_ROOT) -> dict[str, Path]:
    """Every Python module of the installed library, by its import name."""
    modules: dict[str, Path] = {}
    for package, directory in package_directories(repo_root).items():
        for path in sorted(directory.rglob("*.py")):
            parts = list(path.relative_to(directory).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join([package, *parts])
            # A sub-package mapped to its own directory (vla_rl.sims) is walked from there.
            if name in modules:
                raise ValueError(f"module {name} found twice: {modules[name]} and {path}")
            modules[name] = path
    return modules


def _resolve(name: str, modules: dict[str, Path]) -> str:
    """The module an imported dotted name lands in: the library module (``vla_rl.envs.base.BatchedEnv``
    -> ``vla_rl.envs.base``), or the top-level package of anything else (``torch.nn`` -> ``torch``)."""
    if name != ROOT_PACKAGE and not name.startswith(ROOT_PACKAGE + "."):
        return name.split(".")[0]
    while name not in modules:
        name = name.rpartition(".")[0]
    return name


def module_imports(name: str, path: Path, modules: dict[str, Path]) -> list[Import]:
    """What module ``name`` imports, from any statement anywhere in it: library modules, and the
    top-level name of everything else (``torch``, ``benchmarks``)."""
    source = path.read_text()
    lines = source.splitlines()
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(ast.parse(source, filename=str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join(anchor + ([base] if base else []))
            # ``from package import module`` imports the module; ``from module import name`` the module.
            targets = [f"{base}.{alias.name}" for alias in node.names]
        for target in targets:
            imported = _resolve(target, modules)
            if imported != name:
                line = lines[node.lineno - 1].strip()
                found.append(Import(name, imported, node.lineno, line))
    return list(dict.fromkeys(found))


def all_imports(repo_root: Path = REPO_ROOT) -> list[Import]:
    """Every import of every library module, external ones included."""
    modules = library_modules(repo_root)
    return [imp for name, path in modules.items() for imp in module_imports(name, path, modules)]


def library_imports(repo_root: Path = REPO_ROOT) -> list[Import]:
    """The imports between library modules."""
    return [imp for imp in all_imports(repo_root) if _in_library(imp.imported)]


def _in_library(module: str) -> bool:
    return module == ROOT_PACKAGE or module.startswith(ROOT_PACKAGE + ".")


def build_graph(repo_root: Path = REPO_ROOT) -> grimp.ImportGraph:
    """The library's import graph as grimp's ``ImportGraph`` (what import-linter checks), with every
    external package the library imports as one squashed module."""
    graph = grimp.ImportGraph()
    for name in library_modules(repo_root):
        graph.add_module(name)
    imports = all_imports(repo_root)
    for external in sorted({imp.imported for imp in imports if not _in_library(imp.imported)}):
        graph.add_module(external, is_squashed=True)
    for imp in imports:
        graph.add_import(
            importer=imp.importer,
            imported=imp.imported,
            line_number=imp.line_number,
            line_contents=imp.line_contents,
        )
    return graph


def import_cycles(imports: list[Import]) -> list[list[str]]:
    """The strongly connected components of more than one module (each holds an import cycle),
    found with Tarjan's algorithm; each is returned as one cycle through its modules."""
    edges: dict[str, set[str]] = {}
    for imp in imports:
        edges.setdefault(imp.importer, set()).add(imp.imported)
        edges.setdefault(imp.imported, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(start: str) -> None:
        # Iterative Tarjan: (node, iterator over its successors).
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(edges[successor]))))
                    advanced = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                components.append(component)

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return [_cycle_through(component, edges) for component in components if len(component) > 1]


def _cycle_through(component: set[str], edges: dict[str, set[str]]) -> list[str]:
    """One cycle ``[a, b, ..., a]`` inside a strongly connected component (breadth-first back to
    its first module)."""
    start = min(component)
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        next_frontier = []
        for node in frontier:
            for successor in sorted(edges[node] & component):
                if successor == start:
                    chain = [node]
                    while chain[-1] != start:
                        chain.append(previous[chain[-1]])
                    return [*reversed(chain), start]
                if successor not in previous:
                    previous[successor] = node
                    next_frontier.append(successor)
        frontier = next_frontier
    raise AssertionError("a strongly connected component always holds a cycle")


class _LibraryGraphBuilder:
    """import-linter's graph builder, answering with :func:`build_graph`."""

    def build(self, root_package_names, cache_dir=None, include_external_packages=False, **_):
        if list(root_package_names) != [ROOT_PACKAGE] or not include_external_packages:
            raise ValueError(
                f".importlinter must name root_package = {ROOT_PACKAGE} and include_external_packages = True"
            )
        return build_graph()


def main() -> None:
    from importlinter import cli
    from importlinter.application.app_config import settings

    settings.configure(GRAPH_BUILDER=_LibraryGraphBuilder())
    sys.exit(cli.lint_imports_command([str(REPO_ROOT / ".importlinter"), "--no-cache"]))


if __name__ == "__main__":
    main()
