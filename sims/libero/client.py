"""The parent's handle on the LIBERO worker process (``worker.py``): start, request, close."""

from __future__ import annotations

import multiprocessing as mp
from typing import Any

from vla_rl.sims.libero.worker import WorkerSpec, WorldOpener, open_libero_worlds, worker_main

POLL_INTERVAL_S = 1.0
"""How often a waiting parent checks that the worker is still alive."""
CLOSE_TIMEOUT_S = 30.0
"""How long ``close`` waits for the worker to close its worlds before terminating it."""


class WorkerError(RuntimeError):
    """The worker process failed; the message holds its traceback."""


class WorkerClient:
    """Starts ``worker_main`` in a spawned process and exchanges its protocol messages.

    A fresh (spawned, not forked) interpreter keeps robosuite's OpenGL context and LIBERO's global
    state away from the trainer; the price is that scripts creating the env need the usual
    ``if __name__ == "__main__":`` guard.
    """

    def __init__(self, spec: WorkerSpec, opener: WorldOpener | None = None) -> None:
        context = mp.get_context("spawn")
        self._conn, child_conn = context.Pipe()
        self._process = context.Process(
            target=worker_main,
            args=(child_conn, spec, opener or open_libero_worlds),
            name="libero-worker",
            daemon=True,
        )
        self._process.start()
        child_conn.close()
        self._awaiting = False
        status, payload = self._receive()
        if status != "ready":
            self.close()
            raise WorkerError(f"the LIBERO worker could not build its worlds:\n{payload}")
        self.ready_info: dict[str, Any] = payload

    def send(self, *message: Any) -> None:
        if self._awaiting:
            raise RuntimeError("a LIBERO worker request is still waiting for its answer")
        self._conn.send(message)
        self._awaiting = True

    def receive(self) -> Any:
        """The answer to the last ``send``; raises ``WorkerError`` when the command failed."""
        self._awaiting = False
        status, payload = self._receive()
        if status == "error":
            raise WorkerError(f"the LIBERO worker failed:\n{payload}")
        return payload

    def request(self, *message: Any) -> Any:
        self.send(*message)
        return self.receive()

    def _receive(self) -> tuple[str, Any]:
        while not self._conn.poll(POLL_INTERVAL_S):
            if not self._process.is_alive():
                raise WorkerError(
                    f"the LIBERO worker exited unexpectedly (exit code {self._process.exitcode})"
                )
        try:
            return self._conn.recv()
        except (EOFError, OSError) as error:
            self._process.join(POLL_INTERVAL_S)
            raise WorkerError(
                f"the LIBERO worker exited unexpectedly (exit code {self._process.exitcode})"
            ) from error

    @property
    def alive(self) -> bool:
        return self._process.is_alive()

    def close(self) -> None:
        """Asks the worker to close its worlds and exit; terminates it if it does not."""
        if self._process.is_alive():
            try:
                if self._awaiting:
                    self._receive()
                self._conn.send(("close",))
                if self._conn.poll(CLOSE_TIMEOUT_S):
                    self._conn.recv()
            except (OSError, EOFError, WorkerError):
                pass
        self._process.join(CLOSE_TIMEOUT_S)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join()
        self._conn.close()
