"""``vla_rl.registry.resolve``: tables of ``"module:attribute"`` paths, imported on use."""

from __future__ import annotations

import os.path
from pathlib import Path

import pytest

from vla_rl.registry import UnknownNameError, is_import_path, resolve

TABLE = {"join": "os.path:join", "sep": "os.path:sep"}


def test_a_listed_name_resolves_to_its_attribute() -> None:
    assert resolve(TABLE, "join", "thing") is os.path.join


def test_an_unknown_name_lists_the_known_names() -> None:
    with pytest.raises(UnknownNameError) as caught:
        resolve(TABLE, "jion", "path helper")
    assert str(caught.value) == (
        "unknown path helper 'jion'; known: join, sep (or your own as 'package.module:attribute')"
    )
    assert isinstance(caught.value, KeyError) and isinstance(caught.value, ValueError)


def test_an_import_path_outside_the_table_plugs_in() -> None:
    assert resolve(TABLE, "os.path:dirname", "path helper") is os.path.dirname
    assert is_import_path("pkg.mod:Class") and not is_import_path("pkg.mod") and not is_import_path(":Class")


@pytest.fixture
def plugin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_a_module_that_fails_to_import_raises_its_own_error(plugin_dir: Path) -> None:
    (plugin_dir / "layers_broken_plugin.py").write_text("def broken(:\n")
    with pytest.raises(SyntaxError):
        resolve({"broken": "layers_broken_plugin:thing"}, "broken", "policy")
    (plugin_dir / "layers_failing_plugin.py").write_text("raise RuntimeError('the real reason')\n")
    with pytest.raises(RuntimeError, match="the real reason"):
        resolve({"failing": "layers_failing_plugin:thing"}, "failing", "policy")


def test_a_missing_dependency_keeps_its_name_and_gets_the_install_hint(plugin_dir: Path) -> None:
    (plugin_dir / "layers_needs_extra.py").write_text("import layers_absent_dependency\n")
    table = {"needs": "layers_needs_extra:thing"}
    with pytest.raises(ModuleNotFoundError) as caught:
        resolve(table, "needs", "policy", missing_hint="install the extra")
    assert caught.value.name == "layers_absent_dependency"
    assert str(caught.value) == "layers_needs_extra needs 'layers_absent_dependency': install the extra"
    assert isinstance(caught.value.__cause__, ModuleNotFoundError)
    # A user's own path gets the plain error: the hint is about the library's extras.
    with pytest.raises(ModuleNotFoundError, match="No module named 'layers_absent_dependency'"):
        resolve({}, "layers_needs_extra:thing", "policy", missing_hint="install the extra")


def test_a_missing_attribute_is_named(plugin_dir: Path) -> None:
    (plugin_dir / "layers_plugin.py").write_text("class Policy:\n    pass\n")
    assert resolve({}, "layers_plugin:Policy", "policy").__name__ == "Policy"
    with pytest.raises(AttributeError, match="module 'layers_plugin' has no attribute 'Polcy'"):
        resolve({}, "layers_plugin:Polcy", "policy")


def test_the_former_register_decorators_name_their_replacement() -> None:
    from vla_rl.envs import register_backend

    with pytest.raises(TypeError, match="set env.backend=package.module:attribute"):
        register_backend("my_sim")
