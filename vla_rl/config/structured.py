"""Typed configs from dicts and YAML: ``ConfigError``, value checks and Hydra composition.

The bottom of the library's layers: every layer's own config dataclass is validated with
:func:`validate_structured`, so an unknown key, a wrong type or a bad value is a ``ConfigError``
naming the dotted key before any work starts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields, is_dataclass
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar, get_type_hints

# omegaconf is imported where configs are composed or validated, so that the modules that only declare
# checks (the env layer, which tests/lerobot/lerobot_pi_eval.py imports in LeRobot's venv) load without it.
if TYPE_CHECKING:
    from omegaconf import DictConfig

ConfigT = TypeVar("ConfigT")


class ConfigError(ValueError):
    """A configuration problem, with the dotted key it concerns."""


def compose_config_module(config_name: str, overrides: Sequence[str] = ()) -> DictConfig:
    """Compose ``configs/<config_name>.yaml`` with ``overrides`` without validating it (for
    configs of other jobs, e.g. ``eval``)."""
    from hydra import compose, initialize_config_module
    from hydra.errors import HydraException

    try:
        with initialize_config_module(config_module="vla_rl.configs", version_base="1.3"):
            return compose(config_name=config_name, overrides=list(overrides))
    except HydraException as error:
        raise override_error(error) from None


def load_config_file(
    path: str | Path, overrides: Sequence[str], validate: Callable[[DictConfig], ConfigT]
) -> ConfigT:
    """Load a resolved config file of any job, apply Hydra-syntax ``overrides`` and ``validate`` it."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf

    path = Path(path).resolve()
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    if not overrides:
        return validate(OmegaConf.load(path))
    try:
        with initialize_config_dir(config_dir=str(path.parent), version_base="1.3"):
            composed = compose(config_name=path.stem, overrides=list(overrides))
    except HydraException as error:
        raise override_error(error) from None
    return validate(composed)


def override_error(error: Exception) -> ConfigError:
    message = str(error)
    unknown = re.search(r"Could not override '([^']+)'", message)
    if unknown:
        return ConfigError(
            f"unknown config key '{unknown.group(1)}' (check the spelling; a key the config does not "
            f"have, or a dict value with new keys, is added with a leading '+')"
        )
    return ConfigError(f"invalid configuration override: {message}")


@dataclass(frozen=True)
class Check(Generic[ConfigT]):
    """One value-range rule of a config: ``holds(config)`` must be true, else ``key``: ``message``."""

    key: str
    holds: Callable[[ConfigT], bool]
    message: str


def validate_structured(
    schema: type[ConfigT],
    raw: DictConfig | dict[str, Any],
    checks: Sequence[Check[ConfigT]],
    prefix: str = "",
) -> ConfigT:
    """Merge ``raw`` into the dataclass ``schema`` (unknown keys and wrong types fail), then apply
    ``checks`` in order; the first one that fails is a ``ConfigError`` naming its dotted key, below
    ``prefix`` (e.g. ``reward.options``) when the schema is one group of a larger config. With a
    ``prefix``, a ``ValueError`` of the schema's ``__post_init__`` is a ``ConfigError`` naming the
    field its message starts with (else ``prefix``)."""
    from omegaconf import DictConfig, OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    if not isinstance(raw, DictConfig):
        raw = OmegaConf.create(raw)
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), raw)
        config: ConfigT = OmegaConf.to_object(merged)
    except OmegaConfBaseException as error:
        key = _full_key(prefix, getattr(error, "full_key", None) or "?")
        reason = str(error).splitlines()[0]
        if "not in" in reason:
            raise ConfigError(f"unknown config key '{key}' ({reason})") from None
        raise ConfigError(f"config key '{key}': {reason}") from None
    except ValueError as error:
        key = (
            _post_init_key(schema, prefix, str(error))
            if prefix
            else _nested_post_init_key(schema, str(error))
        )
        if key is None:
            raise
        raise ConfigError(f"config key '{key}': {error}") from None
    check_values(config, checks, prefix)
    return config


def check_values(config: ConfigT, checks: Iterable[Check[ConfigT]], prefix: str = "") -> None:
    """Apply ``checks`` to ``config`` in order: the first that fails is a ``ConfigError`` naming its
    dotted key (below ``prefix``) and the value found there."""
    for check in checks:
        if not check.holds(config):
            value = attrgetter(check.key)(config)
            raise ConfigError(f"config key '{_full_key(prefix, check.key)}': {check.message} (got {value!r})")


NOT_SAVED = "<not saved>"
"""What a run's saved files hold in place of a secret (``secret_keys`` of its config class, a
``*token=`` command-line override): a resumed run must be given it again."""


def secret_not_saved(key: str) -> Check[Any]:
    """``key`` must not be :data:`NOT_SAVED`: a run resumed from its saved config needs the secret again."""
    return value_check(
        key, lambda value: value != NOT_SAVED, f"was not saved with the run; give it again ({key}=...)"
    )


def value_check(key: str, holds: Callable[[Any], bool], message: str) -> Check[Any]:
    """A check of the value at the dotted ``key`` (read by attribute path) alone: ``holds(value)``
    must be true; ``None`` (an optional setting left unset) passes."""
    return Check(key, lambda c, get=attrgetter(key): get(c) is None or holds(get(c)), message)


def positive(*keys: str) -> list[Check[Any]]:
    """One check per dotted key: its value must be positive (``None`` passes)."""
    return [value_check(key, lambda v: v > 0, "must be positive") for key in keys]


def not_negative(*keys: str) -> list[Check[Any]]:
    """One check per dotted key: its value must not be negative (``None`` passes)."""
    return [value_check(key, lambda v: v >= 0, "must not be negative") for key in keys]


def in_unit_interval(key: str, *, open_low: bool = False) -> Check[Any]:
    """The value at ``key`` must lie in ``[0, 1]``, or ``(0, 1]`` with ``open_low`` (``None`` passes)."""
    if open_low:
        return value_check(key, lambda v: 0 < v <= 1, "must be in (0, 1]")
    return value_check(key, lambda v: 0 <= v <= 1, "must be in [0, 1]")


def nested(prefix: str, checks: Iterable[Check[Any]]) -> list[Check[Any]]:
    """The ``checks`` of a section, applied to the section at the dotted ``prefix`` of a larger config."""
    section = attrgetter(prefix)
    return [
        Check(f"{prefix}.{c.key}", lambda config, c=c: c.holds(section(config)), c.message) for c in checks
    ]


def one_of(key: str, choices: Iterable[str]) -> Check[Any]:
    """The value at ``key`` must be one of ``choices`` (``None`` passes)."""
    allowed = tuple(choices)
    return value_check(key, lambda v: v in allowed, "must be one of " + ", ".join(map(repr, allowed)))


@dataclass(frozen=True)
class Schema(Generic[ConfigT]):
    """A dataclass of settings and the value checks applied after merging into it: the typed
    options of one reward model or the build settings of one policy family."""

    type: type[ConfigT]
    checks: Sequence[Check[ConfigT]] = ()

    def validate(self, raw: DictConfig | dict[str, Any], prefix: str) -> ConfigT:
        """``raw`` as an instance of ``type``; ``ConfigError`` naming the key below ``prefix``."""
        return validate_structured(self.type, raw, self.checks, prefix)


def _post_init_key(schema: type, prefix: str, message: str) -> str:
    """The key a ``__post_init__`` error concerns: the field its message starts with, else ``prefix``."""
    first_word = message.split(" ", 1)[0]
    names = {field.name for field in fields(schema)} if is_dataclass(schema) else set()
    return _full_key(prefix, first_word) if first_word in names else prefix


def _nested_post_init_key(schema: type, message: str, prefix: str = "") -> str | None:
    """The dotted key of a ``__post_init__`` error raised by a dataclass nested in ``schema`` (a group
    such as ``algorithm``): the first group, depth first, with a field the message starts with."""
    if not is_dataclass(schema):
        return None
    first_word = message.split(" ", 1)[0]
    for name, hint in get_type_hints(schema).items():
        if is_dataclass(hint):
            group = _full_key(prefix, name)
            if first_word in {field.name for field in fields(hint)}:
                return _full_key(group, first_word)
            if (key := _nested_post_init_key(hint, message, group)) is not None:
                return key
    return None


def _full_key(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key
