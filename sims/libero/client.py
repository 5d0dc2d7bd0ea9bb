"""The parent's handle on the LIBERO worker process (``worker.py``): start, request, close."""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
from collections.abc import Sequence
from typing import Any

import numpy as np
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

    def __init__(self, spec: WorkerSpec, opener: WorldOpener | None = None, wait: bool = True) -> None:
        """Starts the worker; with ``wait`` also waits until it has built its worlds (else call
        ``wait_ready``, so that several workers build theirs at once)."""
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
        self.ready_info: dict[str, Any] = {}
        if wait:
            self.wait_ready()

    def wait_ready(self) -> None:
        """Waits for the worker's ``ready`` (its worlds' instructions and initial-state counts)."""
        status, payload = self._receive()
        if status != "ready":
            self.close()
            raise WorkerError(f"the LIBERO worker could not build its worlds:\n{payload}")
        self.ready_info = payload

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


class WorkerPool:
    """The worlds of ``spec`` split over ``num_workers`` worker processes (contiguous groups, as
    equal as possible), addressed as one: robosuite steps one world at a time in Python, so on a
    machine with more cores more processes step more worlds at once."""

    def __init__(self, spec: WorkerSpec, num_workers: int, opener: WorldOpener | None = None) -> None:
        groups = np.array_split(np.arange(len(spec.task_ids)), min(num_workers, len(spec.task_ids)))
        self._groups = [group.tolist() for group in groups]
        self._clients: list[WorkerClient] = []
        try:
            for group in self._groups:
                group_spec = dataclasses.replace(spec, task_ids=tuple(spec.task_ids[i] for i in group))
                self._clients.append(WorkerClient(group_spec, opener, wait=False))
            for client in self._clients:
                client.wait_ready()
        except BaseException:
            self.close()
            raise
        self.ready_info = {
            key: [value for client in self._clients for value in client.ready_info[key]]
            for key in ("instructions", "num_init_states")
        }
        self._worker_of = {
            world: (k, j) for k, group in enumerate(self._groups) for j, world in enumerate(group)
        }
        """World -> (its worker, its index there)."""

    def reset(
        self, ids: Sequence[int], init_indices: Sequence[int], env_seeds: Sequence[int]
    ) -> dict[str, np.ndarray]:
        """Resets worlds ``ids``; their observations stacked in the order of ``ids``."""
        requests: dict[int, list[tuple[int, int, int, int]]] = {}
        for position, (world, init_index, seed) in enumerate(zip(ids, init_indices, env_seeds, strict=True)):
            worker, local = self._worker_of[int(world)]
            requests.setdefault(worker, []).append((position, local, int(init_index), int(seed)))
        for worker, entries in requests.items():
            self._clients[worker].send("reset", *([e[k] for e in entries] for k in (1, 2, 3)))
        answers = {worker: self._clients[worker].receive() for worker in requests}
        out: dict[str, np.ndarray] = {}
        for worker, entries in requests.items():
            for key, value in answers[worker].items():
                if key not in out:
                    out[key] = np.zeros((len(ids), *value.shape[1:]), value.dtype)
                out[key][[e[0] for e in entries]] = value
        return out

    def send_step(self, actions: np.ndarray) -> None:
        """Sends every worker the actions of its worlds; ``receive_step`` collects the results."""
        for client, group in zip(self._clients, self._groups, strict=True):
            client.send("step", actions[group])

    def receive_step(self) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        """``(observations, reward, success)`` of all worlds, in world order."""
        answers = [client.receive() for client in self._clients]
        obs = {key: np.concatenate([answer[0][key] for answer in answers]) for key in answers[0][0]}
        return obs, np.concatenate([a[1] for a in answers]), np.concatenate([a[2] for a in answers])

    @property
    def alive(self) -> bool:
        """Whether any worker process is still running."""
        return any(client.alive for client in self._clients)

    def close(self) -> None:
        for client in self._clients:
            client.close()
