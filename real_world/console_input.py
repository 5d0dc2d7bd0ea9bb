"""Lines a person types on the actor's terminal, read in the background so the control loop never
blocks on them (``success.kind: keyboard`` labels, ``reset.kind: person`` confirmations)."""

from __future__ import annotations

import queue
import sys
import threading
from typing import TextIO


class ConsoleLines:
    """A daemon thread reads ``stream`` (default: stdin) line by line into a queue."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stdin
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.closed = False
        """True once the stream ended (nobody can type any more)."""
        self._thread = threading.Thread(target=self._read, name="console-lines", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self.stream:
            self.lines.put(line.strip().lower())
        self.lines.put(None)

    def poll(self) -> str | None:
        """The next line typed, if any (without waiting)."""
        return self.get(0.0)

    def get(self, timeout_s: float | None) -> str | None:
        """The next line, waiting up to ``timeout_s`` (None: for ever); None when none came or the
        stream ended."""
        if self.closed:
            return None
        try:
            line = self.lines.get(timeout=timeout_s) if timeout_s != 0.0 else self.lines.get_nowait()
        except queue.Empty:
            return None
        if line is None:
            self.closed = True
        return line

    def drain(self) -> None:
        """Forget what was typed before now (a label meant for an earlier episode)."""
        while self.poll() is not None:
            pass
