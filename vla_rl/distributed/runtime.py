"""One interface for running workers in this process or as Ray actors.

A worker is a plain Python class. ``runtime.spawn(cls, *args)`` builds one and returns a handle;
``handle.call("method", *args)`` starts a method call and returns a future whose ``result()`` is
the method's return value. The in-process runtime runs the call at once (the default: importing it
never imports Ray); the Ray runtime runs the class as an actor (``ray.remote``), with the resources
asked for, so the same driver code works on one machine and on a cluster.
"""

from __future__ import annotations

import contextlib
import os
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import Future, as_completed
from dataclasses import dataclass, field
from typing import Any

from vla_rl.envs.extras import import_optional


@dataclass(frozen=True)
class Resources:
    """What one worker asks of the cluster (ignored in-process)."""

    num_cpus: float = 1.0
    num_gpus: float = 0.0
    custom: dict[str, float] = field(default_factory=dict)
    """Ray custom resources, e.g. ``{"node:10.0.0.2": 0.01}`` to pin a worker to a node."""
    placement_group: Any = None
    """A Ray placement group (``RayRuntime.gpu_placement_group``) to schedule the worker in ..."""
    bundle_index: int = -1
    """... on this bundle of it (one bundle per GPU: the ``WorkerSlot.gpu`` of a placement plan)."""


class WorkerHandle(ABC):
    @abstractmethod
    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Start ``worker.method(*args, **kwargs)``; returns a future (``.result()`` waits)."""


class Runtime(ABC):
    name: str

    @abstractmethod
    def spawn(self, cls: type, *args: Any, resources: Resources | None = None, **kwargs: Any) -> WorkerHandle:
        """Build ``cls(*args, **kwargs)`` as a worker."""

    def gather(self, futures: Sequence[Any]) -> list[Any]:
        """The results of ``futures``, in order."""
        return [future.result() for future in futures]

    def gather_group(self, futures: Sequence[Any], death_check_timeout_s: float = 10.0) -> list[Any]:
        """``gather`` for the calls of a group of workers that wait on each other (collectives). If a
        call fails, a worker that died is the cause when there is one (the survivors' collectives
        with it fail too, often first): its death error is raised (each survivor waited on for up
        to ``death_check_timeout_s`` to learn it); otherwise the first failure is."""
        try:
            return self.gather(futures)
        except Exception:
            for future in futures:
                try:
                    future.result(timeout=death_check_timeout_s)
                except self.worker_death_errors():
                    raise
                except Exception:  # noqa: S112 - failed or still waiting: not the dead worker
                    continue
            raise

    def stop_all(
        self, workers: Sequence[WorkerHandle], last_call: str = "", timeout_s: float | None = None
    ) -> None:
        """End ``workers`` (after their ``last_call`` method when one is named, waiting up to
        ``timeout_s`` for it); errors are ignored: a dead worker, or a runtime already shut down."""
        for worker in workers:
            if last_call:
                with contextlib.suppress(Exception):
                    worker.call(last_call).result(timeout=timeout_s)
            with contextlib.suppress(Exception):
                self.stop(worker)

    def share(self, value: Any) -> Any:
        """``value`` in a form many calls can take without copying it each time (Ray: one object-store
        entry, resolved to the value in every actor); in-process, the value itself."""
        return value

    def worker_death_errors(self) -> tuple[type[BaseException], ...]:
        """Errors a call raises when its worker died (in-process workers do not die alone)."""
        return ()

    def available_cpus(self) -> float | None:
        """CPUs free for new workers now; None when workers do not wait for CPUs (in-process)."""
        return None

    def stop(self, worker: WorkerHandle) -> None:  # noqa: B027 - in-process workers just go out of scope
        """End ``worker`` and free what it was given (its resources, for the Ray runtime)."""

    def shutdown(self) -> None:  # noqa: B027 - optional hook
        """Release what the runtime started."""


class _LocalHandle(WorkerHandle):
    def __init__(self, worker: object) -> None:
        self.worker = worker

    def call(self, method: str, *args: Any, **kwargs: Any) -> Future:
        future: Future = Future()
        try:
            future.set_result(getattr(self.worker, method)(*args, **kwargs))
        except Exception as error:  # delivered by result(), as a remote call would
            future.set_exception(error)
        return future


class InProcessRuntime(Runtime):
    """Workers are ordinary objects of this process; a call runs when it is made."""

    name = "inprocess"

    def spawn(self, cls: type, *args: Any, resources: Resources | None = None, **kwargs: Any) -> WorkerHandle:
        return _LocalHandle(cls(*args, **kwargs))


class _RayHandle(WorkerHandle):
    def __init__(self, actor: Any) -> None:
        self.actor = actor

    def call(self, method: str, *args: Any, **kwargs: Any) -> Future:
        return getattr(self.actor, method).remote(*args, **kwargs).future()


class RayRuntime(Runtime):
    """Workers are Ray actors. ``address=None`` starts a local Ray on loopback (tests, one machine);
    ``address="auto"`` joins the cluster started with ``ray start`` on each node."""

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        num_cpus: int | None = None,
        num_gpus: int | None = None,
        resources: dict | None = None,
    ) -> None:
        if address is None:
            # One machine: keep every Ray server on loopback. Ray otherwise resolves even an explicit
            # 127.0.0.1 to the host's routable address (so that other nodes could join) and listens
            # there; this switch, read when ray is imported, turns that off.
            os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        self.ray = import_optional("ray", extra="ray", backend="ray runtime")
        self._started = False
        self._groups: dict[int, Any] = {}
        if not self.ray.is_initialized():
            options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if address is None:
                # num_gpus declares GPUs (also on a CPU machine, for testing placement)
                options.update(num_cpus=num_cpus, num_gpus=num_gpus, resources=resources)
                options["_node_ip_address"] = "127.0.0.1"
            self.ray.init(address=address, **options)
            self._started = True

    def spawn(self, cls: type, *args: Any, resources: Resources | None = None, **kwargs: Any) -> WorkerHandle:
        resources = resources or Resources()
        options: dict[str, Any] = {
            "num_cpus": resources.num_cpus,
            "num_gpus": resources.num_gpus,
            "resources": dict(resources.custom) or None,
        }
        if resources.placement_group is not None:
            strategies = import_optional("ray.util.scheduling_strategies", extra="ray", backend="ray runtime")
            options["scheduling_strategy"] = strategies.PlacementGroupSchedulingStrategy(
                placement_group=resources.placement_group, placement_group_bundle_index=resources.bundle_index
            )
        actor_cls = self.ray.remote(**options)(cls)
        return _RayHandle(actor_cls.remote(*args, **kwargs))

    def share(self, value: Any) -> Any:
        return self.ray.put(value)

    def stop(self, worker: WorkerHandle) -> None:
        self.ray.kill(worker.actor)

    def worker_death_errors(self) -> tuple[type[BaseException], ...]:
        return (self.ray.exceptions.RayActorError,)

    def available_cpus(self) -> float:
        """Ray's unreserved CPUs over the cluster (an actor asking for more waits until they are free)."""
        return float(self.ray.available_resources().get("CPU", 0.0))

    def gpu_placement_group(self, num_gpus: int, strategy: str = "PACK", timeout_s: float = 60.0) -> Any:
        """A placement group of one ``{"GPU": 1}`` bundle per GPU, reserved (waits until it is)."""
        placement = import_optional("ray.util.placement_group", extra="ray", backend="ray runtime")
        group = placement.placement_group([{"GPU": 1}] * num_gpus, strategy=strategy)
        self.ray.get(group.ready(), timeout=timeout_s)
        return group

    def shared_gpu_placement_group(self, num_gpus: int) -> Any:
        """One ``gpu_placement_group`` of ``num_gpus`` for all the roles of a run (made on first use,
        removed by ``shutdown``)."""
        if num_gpus not in self._groups:
            self._groups[num_gpus] = self.gpu_placement_group(num_gpus)
        return self._groups[num_gpus]

    def gather(self, futures: Sequence[Any]) -> list[Any]:
        """Fails fast: the first call that fails raises at once, while the others may still run
        (e.g. ranks waiting in a collective for a dead one), so the caller can stop them."""
        for future in as_completed(futures):
            future.result()
        return super().gather(futures)

    def shutdown(self) -> None:
        """Remove this runtime's placement groups; end Ray if this runtime started it."""
        if self.ray.is_initialized():
            for group in self._groups.values():
                self.ray.util.remove_placement_group(group)
        self._groups.clear()
        if self._started:
            self.ray.shutdown()
            self._started = False


class Worker:
    """Base of the library's worker classes: what every one of them answers."""

    def assigned_gpus(self) -> list[str]:
        """The GPUs Ray gave this worker (empty outside a Ray worker, or with none)."""
        ray = sys.modules.get("ray")
        if ray is None or not ray.is_initialized():
            return []
        return [str(gpu) for gpu in ray.get_gpu_ids()]


RUNTIMES: dict[str, Callable[..., Runtime]] = {"inprocess": InProcessRuntime, "ray": RayRuntime}


def make_runtime(name: str, **options: Any) -> Runtime:
    """The runtime registered as ``name`` (``inprocess`` or ``ray``)."""
    if name not in RUNTIMES:
        raise ValueError(f"unknown runtime {name!r}; known: {sorted(RUNTIMES)}")
    return RUNTIMES[name](**options)
