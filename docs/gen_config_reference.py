"""The config reference page, generated from the dataclass schemas when the site is built.

Each command's config is a dataclass (``TrainConfig`` for ``vla-rl train``, ``VLARLConfig`` for a
recipe run, ...) with a docstring under every field. This module walks those schemas, nested
sections included, and writes one table per section: key, type, default and the field's docstring.
The site build runs it (``docs/hooks.py``), so the page follows the code and cannot go stale;
``python docs/gen_config_reference.py`` prints the page.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import textwrap
import typing
from collections.abc import Iterator
from functools import cache
from typing import Any

ROOTS: tuple[tuple[str, str, str], ...] = (
    ("vla-rl train", "vla_rl.config.schema:TrainConfig", "PPO on a task (`configs/train.yaml`)."),
    (
        "vla-rl train recipe=NAME",
        "vla_rl.training.chunk_rl.config:VLARLConfig",
        "RL fine-tuning of a VLA or flow policy (`configs/rl.yaml` and `configs/recipe/`).",
    ),
    (
        "vla-rl train algorithm=sac|rlpd",
        "vla_rl.training.off_policy.config:OffPolicyConfig",
        "Off-policy learning of a state policy, SAC or RLPD (`configs/off_policy.yaml`).",
    ),
    ("vla-rl sft", "vla_rl.training.sft.config:SFTConfig", "Supervised fine-tuning (`configs/sft.yaml`)."),
    (
        "vla-rl collect",
        "vla_rl.data.config:CollectConfig",
        "Recording demonstrations (`configs/collect.yaml`).",
    ),
    (
        "vla-rl reward-train",
        "vla_rl.rewards.train_config:RewardTrainConfig",
        "Fitting a learned reward model (`configs/reward_train.yaml`).",
    ),
    (
        "vla-rl deploy",
        "vla_rl.real_world.deploy_config:DeployConfig",
        "Deployment over ROS (`configs/deploy.yaml`); `vla-rl sim-robot` and `vla-rl policy-server` "
        "read the same file.",
    ),
)
"""(command, ``module:class`` of its schema, what it configures). A schema that cannot be imported
fails the build with its real error."""

TYPED_OPTIONS: tuple[tuple[str, str, str, str], ...] = (
    (
        "reward.options",
        "vla_rl.rewards.config:REWARD_MODEL_OPTIONS",
        "reward model",
        "The options of each built-in reward model (`reward.model`), checked when the config is validated.",
    ),
    (
        "policy.kwargs",
        "vla_rl.training.sft.policy_settings:FAMILY_SETTINGS",
        "chunk-policy family",
        "The build settings of each chunk-policy family (`vla-rl sft sft/policy=NAME`), checked when the "
        "config is validated, before demonstrations or models load.",
    ),
)
"""(key, ``module:attribute`` of its table name -> ``"module:attribute"`` of a ``Schema`` or a
dataclass, what a name is, what the key holds): keys typed per name rather than by one dataclass."""


def load(path: str) -> type:
    module_name, _, attribute = path.partition(":")
    return getattr(importlib.import_module(module_name), attribute)


@cache
def field_docstrings(cls: type) -> dict[str, str]:
    """``{field: docstring}`` from the string literal written under each field, base classes included."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        body = ast.parse(source).body[0].body
        for node, following in zip(body, [*body[1:], None], strict=True):
            documented = (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            )
            if documented:
                docs[node.target.id] = inspect.cleandoc(following.value.value)
    return docs


@cache
def annotations_as_written(cls: type) -> dict[str, str]:
    """Each field's annotation as written in the source (``str | None``), base classes included."""
    written: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        for name, annotation in getattr(klass, "__annotations__", {}).items():
            written[name] = annotation if isinstance(annotation, str) else _type_name(annotation)
    return written


def _type_name(annotation: Any) -> str:
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")


def nested_dataclass(cls: type, field: dataclasses.Field, default: Any) -> type | None:
    """The dataclass a field holds (its default's class, or one named in its type), if any."""
    if dataclasses.is_dataclass(default) and not isinstance(default, type):
        return type(default)
    try:
        hint = typing.get_type_hints(cls).get(field.name)
    except Exception:  # noqa: BLE001 - a hint that cannot be resolved just names no section
        return None
    candidates = typing.get_args(hint) or (hint,)
    found = [c for c in candidates if isinstance(c, type) and dataclasses.is_dataclass(c)]
    return found[0] if len(found) == 1 else None


def default_of(field: dataclasses.Field) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING


def format_value(value: Any) -> str:
    if value is dataclasses.MISSING:
        return "required"
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f"`{value}`" if value else '`""`'
    if dataclasses.is_dataclass(value):
        return "section below"
    text = repr(value).replace("'", "")
    return f"`{text}`"


def markdown_docstring(text: str) -> str:
    """One table cell: reST double backticks become Markdown code, lines join, pipes are escaped."""
    return " ".join(text.replace("``", "`").split()).replace("|", "&#124;")


def sections(cls: type, prefix: str, tag: str) -> Iterator[tuple[str, type, list[tuple[str, str, str, str]]]]:
    """``(dotted prefix, class, rows)`` for ``cls`` and then every dataclass nested in it."""
    docs = field_docstrings(cls)
    written = annotations_as_written(cls)
    rows: list[tuple[str, str, str, str]] = []
    nested: list[tuple[str, type]] = []
    for field in dataclasses.fields(cls):
        default = default_of(field)
        child = nested_dataclass(cls, field, default)
        key = f"{prefix}{field.name}"
        type_text = written.get(field.name, _type_name(field.type)).replace("|", "&#124;")
        cell = "section below" if child is not None and default is not None else format_value(default)
        if child is not None:
            nested.append((key, child))
            cell = f"[section](#{anchor(tag, key)})" if default is not None else cell
        rows.append((key, type_text, cell, markdown_docstring(docs.get(field.name, ""))))
    yield prefix.rstrip("."), cls, rows
    for key, child in nested:
        yield from sections(child, f"{key}.", tag)


def anchor(tag: str, key: str) -> str:
    """A heading id unique over the page: the command's tag, then the dotted key."""
    return f"{tag}-" + key.replace(".", "-").replace("_", "-").lower()


def render() -> str:
    lines = [
        "# Config reference",
        "",
        "Generated from the dataclass schemas when this site is built (`docs/gen_config_reference.py`),",
        "so it always matches the code. Every key is set on the command line in Hydra syntax",
        "(`vla-rl train env.num_envs=128 algorithm.learning_rate=3e-4`); an unknown key, a wrong type or",
        "a bad value stops the command with a `ConfigError` naming the key (exit code 2) before anything",
        "is built. Defaults here are the schema's; a config group or recipe YAML may set other values",
        "(e.g. `env=push`, `recipe=token_vla_grpo`). `vla-rl eval` reads the checkpoint's own",
        "`TrainConfig` and takes `checkpoint` and `output_dir` besides.",
        "",
    ]
    for command, path, what in ROOTS:
        root = load(path)
        lines += [f"## `{command}`", "", f"{what} Schema: `{root.__module__}.{root.__qualname__}`.", ""]
        tag = command.split()[1].split("=")[0] + ("-rl" if "recipe" in command else "")
        for prefix, cls, rows in sections(root, "", tag):
            if prefix:
                title = f"`{prefix}`"
                lines += [f"### {title} {{ #{anchor(tag, prefix)} }}", "", f"`{cls.__qualname__}`", ""]
            lines += ["| key | type | default | description |", "|---|---|---|---|"]
            lines += [f"| `{key}` | {type_} | {default} | {doc} |" for key, type_, default, doc in rows]
            lines.append("")
    for key, table_path, kind, what in TYPED_OPTIONS:
        heading = f"## `{key}` {{ #{key.replace('.', '-')} }}"
        lines += [heading, "", f"{what} Schemas are looked up in `{table_path.replace(':', '.')}`.", ""]
        for name, target in load(table_path).items():
            cls = options_class(load(target))
            tag = f"{key}-{name}".replace(".", "-").replace("_", "-")
            lines += [f"### `{name}` {{ #{tag} }}", "", f"The {kind} `{name}`: `{cls.__qualname__}`.", ""]
            lines += ["| key | type | default | description |", "|---|---|---|---|"]
            for _, _, rows in sections(cls, f"{key}.", tag):  # nested sections follow in the same table
                for k, type_, default, doc in rows:
                    default = "keys below" if default.startswith("[section]") else default
                    lines.append(f"| `{k}` | {type_} | {default} | {doc} |")
            lines.append("")
    return "\n".join(lines)


def options_class(target: Any) -> type:
    """The dataclass behind a table entry: the dataclass itself, or a ``Schema``'s ``type``."""
    return target if isinstance(target, type) else target.type


if __name__ == "__main__":
    print(render())
