"""Graceful stops for training loops: SIGTERM and the first Ctrl-C finish the current step."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


def install_stop_handlers(
    request_stop: Callable[[], None], stopping: Callable[[], bool]
) -> Callable[[], None]:
    """SIGTERM and the first Ctrl-C call ``request_stop`` (the loop checkpoints and returns); a
    second Ctrl-C while ``stopping()`` interrupts at once. Returns a function restoring the previous
    handlers (a no-op outside the main thread, where signals cannot be handled)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def graceful(signum: int, frame: object) -> None:
        if stopping() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        log.warning("signal %d: stopping after this step", signum)
        request_stop()

    previous = {sig: signal.signal(sig, graceful) for sig in (signal.SIGINT, signal.SIGTERM)}

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    return restore
