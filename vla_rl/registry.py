"""Registries as tables: a name -> ``"package.module:attribute"`` mapping, imported on use.

Every registry of the library (environment backends, policies, algorithms, reward models) is a
plain ``dict`` in the module that builds from it; nothing registers itself, so no module imports the
registry that lists it. :func:`resolve` imports the named module only when it is asked for:

* a module that fails to import raises its own error (``ImportError``, ``SyntaxError`` ...), so a
  broken import is never reported as an unknown name;
* an unknown name raises :class:`UnknownNameError` listing the known names;
* a name that is not in the table but has the form ``"package.module:attribute"`` is imported as
  written: that is how a user's own env factory, policy class or algorithm plugs in.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any, NoReturn


class UnknownNameError(KeyError, ValueError):
    """A name that is neither in a registry's table nor a ``"module:attribute"`` path.

    A ``KeyError`` (a failed look-up) and a ``ValueError`` (a bad config value) at once, so callers
    that caught either before the registries became tables still do."""

    def __str__(self) -> str:
        return str(self.args[0])


def is_import_path(name: str) -> bool:
    """``"package.module:attribute"`` (what a user passes for a class of their own)."""
    module, sep, attribute = name.partition(":")
    return bool(sep and module and attribute)


def resolve(table: Mapping[str, str], name: str, kind: str, missing_hint: str = "") -> Any:
    """The object ``table[name]`` points at, or the one ``name`` points at when it is an import path.

    ``kind`` names the registry in errors (``"environment backend"``). ``missing_hint`` says how to
    install what a listed module needs; it is added to a ``ModuleNotFoundError`` for a package
    outside this library (the original error stays chained as its cause)."""
    target = table.get(name)
    if target is None:
        if not is_import_path(name):
            known = ", ".join(sorted(table))
            raise UnknownNameError(
                f"unknown {kind} {name!r}; known: {known} (or your own as 'package.module:attribute')"
            )
        target = name
    module_name, _, attribute = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        missing = error.name or ""
        if not missing_hint or missing == "vla_rl" or missing.startswith("vla_rl.") or target == name:
            raise
        raise ModuleNotFoundError(f"{module_name} needs {missing!r}: {missing_hint}", name=missing) from error
    found: Any = module
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise AttributeError(f"{kind} {name!r}: module {module_name!r} has no attribute {attribute!r}")
        found = getattr(found, part)
    return found


def removed_decorator(decorator: str, config_key: str) -> Callable[..., NoReturn]:
    """Stands in for a ``@register_*`` decorator of the former registries: calling it says what
    replaced it (code that used it fails at import, with the migration in the message)."""

    def removed(*args: object, **kwargs: object) -> NoReturn:
        raise TypeError(
            f"{decorator} was removed: registries are tables of 'module:attribute' paths now, so a "
            f"class or function of your own needs no registering: set {config_key}=package.module:attribute"
        )

    removed.__name__ = decorator
    return removed
