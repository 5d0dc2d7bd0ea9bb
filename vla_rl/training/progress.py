"""What a run shows on the console: one progress bar per phase (training, evaluation, saving).

``run_console(run_dir)`` is on while a trainer runs. Inside it:

* Python warnings (``logging.captureWarnings``) and the records of every library's loggers go to
  ``<run_dir>/train.log``, with vla_rl's own records; the console keeps vla_rl's messages and any
  logger's errors.
* Other libraries' tqdm bars are off: Hugging Face's through its switches, the rest through
  ``TQDM_DISABLE``, which the ``vla-rl`` command sets before tqdm is imported (tqdm reads it then).

The run's own bars (``phase_bar``) set ``disable`` themselves and draw only on a terminal, so CI logs and
redirected output carry no bar updates; ``VLA_RL_PROGRESS=1`` or ``0`` forces them on or off.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, TypeVar

from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

LOG_FILENAME = "train.log"
"""The run's log file under ``run_dir``: warnings and every logger's records."""
OWN_LOGGER = "vla_rl"
PROGRESS_ENV = "VLA_RL_PROGRESS"
_open_logs: list[Path] = []
"""The log files of the ``run_console`` now on (an inner one, e.g. evaluation inside training, adds none)."""
Method = TypeVar("Method", bound=Callable[..., Any])


def bars_enabled() -> bool:
    """Progress bars draw on a terminal only, unless ``VLA_RL_PROGRESS`` says ``1`` or ``0``."""
    forced = os.environ.get(PROGRESS_ENV)
    if forced is not None:
        return forced.strip().lower() in ("1", "true", "yes", "on")
    return sys.stderr.isatty()


def phase_bar(
    phase: str, total: float | None, unit: str, initial: int = 0, leave: bool = True, scale: bool = False
) -> tqdm:
    """The bar of one phase (``training`` over env steps or iterations, ``evaluation`` over
    episodes, ``saving``): tqdm shows the count (with k/M prefixes if ``scale``), the rate in
    ``unit``/s and the postfix (success)."""
    return tqdm(
        total=total,
        initial=initial,
        desc=phase,
        unit=unit,
        unit_scale=scale,
        dynamic_ncols=True,
        leave=leave,
        disable=not bars_enabled(),
    )


class _OwnOrErrors(logging.Filter):
    """Lets through vla_rl's records and any logger's errors."""

    def filter(self, record: logging.LogRecord) -> bool:
        own = record.name == OWN_LOGGER or record.name.startswith(OWN_LOGGER + ".")
        return own or record.levelno >= logging.ERROR


def _is_console(handler: logging.Handler) -> bool:
    stream = getattr(handler, "stream", None)
    return not isinstance(handler, logging.FileHandler) and stream in (
        sys.stderr,
        sys.stdout,
        sys.__stderr__,
        sys.__stdout__,
    )


@contextmanager
def run_console(run_dir: str | Path) -> Iterator[Path]:
    """Route warnings and library output to ``<run_dir>/train.log`` while the run is on; yields its path."""
    if _open_logs:
        yield _open_logs[-1]
        return
    path = Path(run_dir) / LOG_FILENAME
    path.parent.mkdir(parents=True, exist_ok=True)
    file_handler = logging.FileHandler(path, encoding="utf-8")
    file_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    console_filter = _OwnOrErrors()
    with ExitStack() as undo:
        undo.enter_context(logging_redirect_tqdm())  # vla_rl's messages print above the bars
        # The root logger, and loggers that print on their own (transformers' does), get the file
        # and a console that keeps only vla_rl's records and errors.
        loggers = [logging.getLogger()] + [
            logger
            for logger in logging.root.manager.loggerDict.values()
            if isinstance(logger, logging.Logger) and not logger.propagate and logger.handlers
        ]
        for logger in loggers:
            logger.addHandler(file_handler)
            undo.callback(logger.removeHandler, file_handler)
            for handler in logger.handlers:
                if _is_console(handler):
                    handler.addFilter(console_filter)
                    undo.callback(handler.removeFilter, console_filter)
        logging.captureWarnings(True)
        undo.callback(logging.captureWarnings, False)
        undo.enter_context(_library_bars_off())
        undo.callback(file_handler.close)
        _open_logs.append(path)
        undo.callback(_open_logs.pop)
        yield path


def logs_to_run_dir(method: Method) -> Method:
    """A trainer method run inside ``run_console`` of the trainer's ``run_dir``. On ``__init__(self, cfg,
    ...)`` it is ``cfg.run_dir``, so that model loading is covered too; on ``train`` and ``evaluate``,
    ``self.run_dir``."""

    @functools.wraps(method)
    def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
        run_dir = getattr(self, "run_dir", None)
        if run_dir is None:
            run_dir = (args[0] if args else kwargs["cfg"]).run_dir
        with run_console(run_dir):
            return method(self, *args, **kwargs)

    return wrapped  # type: ignore[return-value]


@contextmanager
def _library_bars_off() -> Iterator[None]:
    """Hugging Face's bars (downloads, weight loading) off. Bars of plain tqdm that do not pass
    ``disable`` are off in the ``vla-rl`` command: it sets ``TQDM_DISABLE`` before tqdm is imported."""
    hub = sys.modules.get("huggingface_hub")
    transformers = sys.modules.get("transformers")
    hub_was_on = hub is not None and not hub.utils.are_progress_bars_disabled()
    transformers_was_on = transformers is not None and transformers.utils.logging.is_progress_bar_enabled()
    if hub_was_on:
        hub.utils.disable_progress_bars()
    if transformers_was_on:
        transformers.utils.logging.disable_progress_bar()
    try:
        yield
    finally:
        if hub_was_on:
            hub.utils.enable_progress_bars()
        if transformers_was_on:
            transformers.utils.logging.enable_progress_bar()
