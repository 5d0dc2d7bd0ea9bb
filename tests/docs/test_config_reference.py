"""The generated config reference (``docs/gen_config_reference.py``) lists every field of every schema
with its type, default and the docstring written under it."""

from __future__ import annotations

import dataclasses
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _generator():
    path = ROOT / "docs" / "gen_config_reference.py"
    spec = importlib.util.spec_from_file_location("gen_config_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = _generator()


@dataclass
class _Inner:
    rate_hz: float = 20.0
    """Control rate."""
    name: str | None = None
    """Optional; ``None`` means unnamed."""


@dataclass
class _Outer:
    inner: _Inner = field(default_factory=_Inner)
    """The inner section."""
    sizes: list[int] = field(default_factory=lambda: [64, 64])
    """Layer widths."""
    path: str = ""
    undocumented: bool = True


def test_sections_walk_nested_dataclasses_with_types_defaults_and_docstrings() -> None:
    sections = list(gen.sections(_Outer, "", "t"))
    assert [(prefix, cls) for prefix, cls, _ in sections] == [("", _Outer), ("inner", _Inner)]
    outer_rows, inner_rows = sections[0][2], sections[1][2]
    assert outer_rows == [
        ("inner", "_Inner", "[section](#t-inner)", "The inner section."),
        ("sizes", "list[int]", "`[64, 64]`", "Layer widths."),
        ("path", "str", '`""`', ""),
        ("undocumented", "bool", "`true`", ""),
    ]
    assert inner_rows == [
        ("inner.rate_hz", "float", "`20.0`", "Control rate."),
        ("inner.name", "str &#124; None", "`null`", "Optional; `None` means unnamed."),
    ]


def _all_keys(cls: type, prefix: str = "") -> list[str]:
    keys = []
    for f in dataclasses.fields(cls):
        keys.append(prefix + f.name)
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if dataclasses.is_dataclass(default) and not isinstance(default, type):
            keys += _all_keys(type(default), f"{prefix}{f.name}.")
    return keys


@pytest.mark.parametrize("root", [path for _, path, _ in gen.ROOTS])
def test_the_page_lists_every_field_of_each_command_schema(root: str) -> None:
    page = gen.render()
    cls = gen.load(root)
    keys = _all_keys(cls)
    assert keys, root
    missing = [key for key in keys if f"| `{key}` |" not in page]
    assert missing == []
    docs = gen.field_docstrings(cls)
    for name, text in docs.items():
        assert gen.markdown_docstring(text) in page, f"{root}.{name}'s docstring is not on the page"


@pytest.mark.parametrize("key, table_path", [(key, path) for key, path, _, _ in gen.TYPED_OPTIONS])
def test_the_page_lists_every_typed_option_of_each_name(key: str, table_path: str) -> None:
    """``reward.options`` and ``policy.kwargs`` are typed per reward model and per policy family: each
    name of the table gets a heading and every field of its dataclass a row under ``key``."""
    page = gen.render()
    table = gen.load(table_path)
    assert table, table_path
    for name, target in table.items():
        cls = gen.options_class(gen.load(target))
        assert dataclasses.is_dataclass(cls), (name, cls)
        assert f"### `{name}`" in page
        missing = [k for k in _all_keys(cls, f"{key}.") if f"| `{k}` |" not in page]
        assert missing == [], f"{key} of {name}"


def test_options_class_reads_a_schema_or_a_dataclass() -> None:
    from vla_rl.config.structured import Schema

    assert gen.options_class(_Inner) is _Inner
    assert gen.options_class(Schema(_Inner)) is _Inner
