"""Optional simulator backends: import them lazily and say which extra installs them."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Sequence
from types import ModuleType


class MissingExtraError(ImportError):
    """A backend's package is not installed; the message names the pip extra that installs it."""


def install_hint(extra: str) -> str:
    return f'pip install -e ".[{extra}]"'


def import_optional(module: str, *, extra: str, backend: str) -> ModuleType:
    """``importlib.import_module(module)``, or a ``MissingExtraError`` naming ``extra``."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise MissingExtraError(
            f"the {backend!r} backend needs the Python package {module!r} "
            f"({error}); install it with {install_hint(extra)}"
        ) from error


def missing_modules_reason(modules: Sequence[str], *, extra: str) -> str | None:
    """``None`` when every module can be found, else a sentence saying what to install.

    Uses ``importlib.util.find_spec``, so nothing heavy is imported to answer.
    """
    missing = [name for name in modules if importlib.util.find_spec(name.split(".")[0]) is None]
    if not missing:
        return None
    return f"needs {', '.join(missing)}: {install_hint(extra)}"
