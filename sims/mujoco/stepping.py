"""How the batched env advances physics: ``mujoco.batch`` or ``mujoco.rollout`` (C threads), or
``mj_step`` per world.

``batch`` (``batch_stepper.py``, MuJoCo >= 4.0, the default where it is installed) steps all worlds
in one ``mujoco.batch`` call that also computes what the env reads, so no per-world Python runs
around the physics when nothing is rendered. ``rollout`` (the default with an older MuJoCo) runs
all substeps of all worlds in MuJoCo's own thread pool without the Python interpreter in the loop;
``threads`` calls ``mj_step`` per world from a Python thread pool. All are deterministic.
``rollout`` and ``threads`` differ only in the constraint solver's warm start at the first substep of a
control step (``mujoco.rollout`` does not hand back the final warm start, so ``rollout`` starts each
control step cold), which changes contact forces within the solver tolerance (tested). ``batch``
carries the warm start over, as ``threads`` does. Chosen with ``EnvConfig.options["stepper"]``.
"""

from __future__ import annotations

import importlib.util
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

import mujoco
import numpy as np
from mujoco import rollout
from vla_rl.sims.mujoco.readout import WorldReadout

FULL_PHYSICS = mujoco.mjtState.mjSTATE_FULLPHYSICS
STATE_SPEC = mujoco.mjtState.mjSTATE_INTEGRATION
"""What snapshots and ``mujoco.batch`` rows hold (``mj_getState`` order)."""


def _has_batch() -> bool:
    """``mujoco.batch`` is installed (MuJoCo >= 4.0); found without importing it."""
    return importlib.util.find_spec("mujoco.batch") is not None


HAS_MUJOCO_BATCH = _has_batch()
DEFAULT_STEPPER = "batch" if HAS_MUJOCO_BATCH else "rollout"
"""The fastest stepper this MuJoCo offers (measured in the README's throughput tables)."""


class PhysicsStepper(ABC):
    """Advances every world by ``substeps`` physics steps holding each world's control fixed."""

    def __init__(self, models: Sequence[mujoco.MjModel], substeps: int, num_threads: int) -> None:
        self.models = models
        self.substeps = substeps
        self.num_threads = num_threads

    def advance(
        self,
        datas: Sequence[mujoco.MjData],
        ctrl: np.ndarray,
        run_parallel: Callable[[Callable[[np.ndarray], None], np.ndarray], None],
        refresh: Callable[[np.ndarray], None],
        parallel_refresh: bool = True,
    ) -> None:
        """Step all worlds with ``ctrl`` [N, nu]; afterwards each ``datas[i]`` holds the new state.

        Positions-derived quantities are not recomputed: ``refresh(ids)`` is called for each chunk
        of worlds as soon as they hold their new state, in the same parallel task (one hand-off
        to the thread pool per control step, not two). ``parallel_refresh=False`` asks for the
        refresh in the calling thread where the stepper can (cheap refreshes: no rendering).

        Equal to ``simulate`` followed by ``finish``: callers that want to work while the physics
        runs call ``simulate`` in a background thread and ``finish`` afterwards in their own.
        """
        self.simulate(datas, ctrl, run_parallel, refresh)
        self.finish(datas, run_parallel, refresh, parallel_refresh)

    @abstractmethod
    def simulate(
        self,
        datas: Sequence[mujoco.MjData],
        ctrl: np.ndarray,
        run_parallel: Callable[[Callable[[np.ndarray], None], np.ndarray], None],
        refresh: Callable[[np.ndarray], None],
    ) -> None:
        """The physics of ``advance``; steppers whose physics runs outside the interpreter do
        nothing else here, so this holds the GIL only briefly."""

    def finish(  # noqa: B027 - steppers that refresh inside ``simulate`` need nothing here
        self,
        datas: Sequence[mujoco.MjData],
        run_parallel: Callable[[Callable[[np.ndarray], None], np.ndarray], None],
        refresh: Callable[[np.ndarray], None],
        parallel_refresh: bool = True,
    ) -> None:
        """The rest of ``advance``: hand the new states to ``datas`` and refresh them."""

    def states_changed(self, datas: Sequence[mujoco.MjData], ids: np.ndarray) -> None:  # noqa: B027
        """Worlds ``ids`` were changed outside ``advance`` (reset, restored): re-read their state."""

    def bind_readout(self, readout: WorldReadout) -> None:  # noqa: B027
        """Offered the env's readout when nothing is rendered. A stepper that keeps every world's
        state in arrays of its own fills it in ``finish`` and leaves ``datas`` behind; the others
        ignore it (the env's ``refresh`` reads ``datas`` per world)."""

    def sync_datas(self, datas: Sequence[mujoco.MjData]) -> None:  # noqa: B027
        """Bring ``datas`` to the current states where ``finish`` leaves them behind (snapshots)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release threads."""

    def _save_states(self, datas: Sequence[mujoco.MjData], ids: np.ndarray, states: np.ndarray, spec) -> None:
        """Rows ``ids`` of ``states`` := the ``spec`` state of ``datas[ids]``."""
        for i in np.asarray(ids).tolist():
            mujoco.mj_getState(self.models[i], datas[i], states[i], spec)

    def _load_states(self, datas: Sequence[mujoco.MjData], ids: np.ndarray, states: np.ndarray, spec) -> None:
        """``datas[ids]`` := rows ``ids`` of ``states`` (``spec`` states)."""
        for i in ids.tolist():
            mujoco.mj_setState(self.models[i], datas[i], states[i], spec)

    def _load_and_refresh(self, datas, states, spec, run_parallel, refresh, parallel_refresh) -> None:
        """``finish`` of a stepper that keeps the new states in ``states``: load every world's into
        ``datas`` and refresh it, chunk by chunk in the pool (or here, see ``advance``)."""

        def load_chunk(ids: np.ndarray) -> None:
            self._load_states(datas, ids, states, spec)
            refresh(ids)

        if parallel_refresh:
            run_parallel(load_chunk, np.arange(len(datas)))
        else:
            load_chunk(np.arange(len(datas)))


class ThreadedStepper(PhysicsStepper):
    def simulate(self, datas, ctrl, run_parallel, refresh) -> None:
        """Physics runs in the pool, so the refresh does too (right after each world's step)."""
        models, substeps = self.models, self.substeps

        def step_chunk(ids: np.ndarray) -> None:
            for i in ids.tolist():
                datas[i].ctrl[:] = ctrl[i]
                mujoco.mj_step(models[i], datas[i], substeps)
            refresh(ids)

        run_parallel(step_chunk, np.arange(len(datas)))


class RolloutStepper(PhysicsStepper):
    def __init__(self, models: Sequence[mujoco.MjModel], substeps: int, num_threads: int) -> None:
        super().__init__(models, substeps, num_threads)
        model, n = models[0], len(models)
        state_size = mujoco.mj_stateSize(model, FULL_PHYSICS)
        self._initial = np.zeros((n, state_size))
        self._cold_warmstart = np.zeros((n, model.nv))
        self._control = np.zeros((n, substeps, model.nu))
        self._states = np.zeros((n, substeps, state_size))
        self._scratch = [mujoco.MjData(model) for _ in range(num_threads)]
        self._runner = rollout.Rollout(nthread=num_threads)

    def states_changed(self, datas: Sequence[mujoco.MjData], ids: np.ndarray) -> None:
        self._save_states(datas, ids, self._initial, FULL_PHYSICS)

    def simulate(self, datas, ctrl, run_parallel, refresh) -> None:
        """One ``mujoco.rollout`` call (it releases the GIL). Controls are passed to the rollout,
        not stored in ``datas`` (the caller keeps them)."""
        self._control[:] = ctrl[:, None, :]
        self._runner.rollout(
            self.models,
            self._scratch,
            self._initial,
            self._control,
            nstep=self.substeps,
            initial_warmstart=self._cold_warmstart,
            state=self._states,
            skip_checks=True,
        )
        # The next control step starts where this one ended; datas only change between steps
        # through resets, which report them with ``states_changed``.
        self._initial[:] = self._states[:, -1]

    def finish(self, datas, run_parallel, refresh, parallel_refresh=True) -> None:
        final = self._states[:, -1]
        self._load_and_refresh(datas, final, FULL_PHYSICS, run_parallel, refresh, parallel_refresh)

    def close(self) -> None:
        self._runner.close()
