"""No import cycle between library modules: every ``import`` statement of every module of the
installed library (``vla_rl``, and ``sims/``, ``robots/``, ``real_world/`` as ``vla_rl.sims`` etc.),
at module level, inside functions or under ``TYPE_CHECKING``, is an edge of one graph, and that
graph has no cycle."""

from __future__ import annotations

from pathlib import Path

from import_graph import Import, import_cycles, library_imports, library_modules, module_imports


def test_the_library_has_no_import_cycle() -> None:
    cycles = import_cycles(library_imports())
    printed = "\n".join(" -> ".join(cycle) for cycle in cycles)
    assert not cycles, f"import cycles between library modules:\n{printed}"


def test_the_walk_covers_the_directories_installed_under_vla_rl() -> None:
    modules = library_modules()
    for name in (
        "vla_rl.cli",
        "vla_rl.sims.mujoco.batched_env",
        "vla_rl.robots.panda",
        "vla_rl.real_world.deploy",
    ):
        assert name in modules
    edges = {(imp.importer, imp.imported) for imp in library_imports()}
    # A module-level import between mapped directories, and a function-level one.
    assert ("vla_rl.sims.mujoco.batched_env", "vla_rl.robots.panda") in edges
    assert ("vla_rl.sims.mujoco.backend", "vla_rl.sims.mujoco.batched_env") in edges


def test_relative_and_function_level_imports_resolve(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    source = "from . import b\n\ndef f():\n    from .b import thing\n    import vla_rl.envs.base\n"
    (package / "a.py").write_text(source)
    modules = {"vla_rl.pkg.a": package / "a.py", "vla_rl.pkg.b": package / "b.py", "vla_rl.envs.base": Path()}
    found = module_imports("vla_rl.pkg.a", package / "a.py", modules)
    assert [(imp.imported, imp.line_number) for imp in found] == [
        ("vla_rl.pkg.b", 1),
        ("vla_rl.pkg.b", 4),
        ("vla_rl.envs.base", 5),
    ]


def test_a_cycle_is_found_and_printed_in_import_order() -> None:
    imports = [
        Import("vla_rl.a", "vla_rl.b", 1, ""),
        Import("vla_rl.b", "vla_rl.c", 1, ""),
        Import("vla_rl.c", "vla_rl.a", 9, ""),
        Import("vla_rl.c", "vla_rl.d", 2, ""),
        Import("vla_rl.d", "vla_rl.e", 2, ""),
    ]
    assert import_cycles(imports) == [["vla_rl.a", "vla_rl.b", "vla_rl.c", "vla_rl.a"]]
    assert import_cycles(imports[:2] + imports[3:]) == []
