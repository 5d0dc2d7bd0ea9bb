"""``BatchStepper``: every world's state in one ``mujoco.batch.Batch`` (MuJoCo >= 4.0).

The batch holds each world's integration state as a row and steps all rows on MuJoCo's own thread
pool. One call per control step runs the substeps and then the position and velocity stages at the
new state, and copies the fields the env reads (sensors, site poses, joint axes) into arrays of all
worlds, so nothing is done per world in Python. The batch is persistent (one ``MjData`` per world),
so the next step continues from those stages instead of computing them again. Physics equals
``mj_step`` per world with its warm start carried over, like ``ThreadedStepper``.

Without cameras the stepper fills the env's ``WorldReadout`` from those arrays and leaves the
env's ``MjData`` behind (``sync_datas`` catches them up for snapshots). With cameras it loads the
new states into them and refreshes them per world for rendering, as ``RolloutStepper`` does.
"""

from __future__ import annotations

from collections.abc import Sequence

import mujoco
import numpy as np
from vla_rl.sims.mujoco.readout import WorldReadout
from vla_rl.sims.mujoco.stepping import STATE_SPEC, PhysicsStepper


def load_batch_module():  # noqa: ANN201 - the mujoco.batch module
    """``mujoco.batch``, or an ImportError that says which MuJoCo it needs."""
    try:
        from mujoco import batch
    except ImportError as err:
        raise ImportError(
            f"options.stepper='batch' needs mujoco>=4.0 (mujoco.batch); this is mujoco "
            f"{mujoco.__version__}. Upgrade it (pip install -U 'mujoco>=4.0') or choose "
            "options.stepper='rollout'."
        ) from err
    return batch


class AxisJacobian:
    """The translational and rotational Jacobian of a site from the joint axes and anchors.

    For a hinge joint ``j`` above the site, column ``j`` is ``axis_j x (p_site - anchor_j)``
    (translation) and ``axis_j`` (rotation); for a slide joint it is ``axis_j`` and zero. Joints
    not above the site give zero columns. This is what ``mj_jacSite`` returns for such chains,
    computed for all worlds at once from the batch's ``xaxis``, ``xanchor`` and ``site_xpos``.
    """

    def __init__(self, model: mujoco.MjModel, site: int) -> None:
        ancestors, body = [], int(model.site_bodyid[site])
        while body > 0:
            ancestors.append(body)
            body = int(model.body_parentid[body])
        hinges, slides = [], []
        for joint in range(model.njnt):
            if int(model.jnt_bodyid[joint]) not in ancestors:
                continue
            kind = model.jnt_type[joint]
            if kind == mujoco.mjtJoint.mjJNT_HINGE:
                hinges.append(joint)
            elif kind == mujoco.mjtJoint.mjJNT_SLIDE:
                slides.append(joint)
            else:
                raise ValueError(
                    f"joint {model.joint(joint).name!r} above site {model.site(site).name!r} is "
                    f"{mujoco.mjtJoint(kind).name}; the batch stepper's Jacobian handles hinge "
                    "and slide joints only (use options.stepper='rollout')"
                )
        self.site = site
        self.hinges = np.array(hinges, np.int64)
        self.slides = np.array(slides, np.int64)
        self.hinge_dofs = model.jnt_dofadr[self.hinges]
        self.slide_dofs = model.jnt_dofadr[self.slides]

    def __call__(
        self, xaxis: np.ndarray, xanchor: np.ndarray, site_xpos: np.ndarray, out: np.ndarray
    ) -> None:
        """Write the [N, 6, nv] Jacobian into ``out`` (rows 0-2 translation, 3-5 rotation)."""
        site_pos = site_xpos[:, self.site]
        hinge_axes = xaxis[:, self.hinges]
        lever = site_pos[:, None, :] - xanchor[:, self.hinges]
        out[:, :3, self.hinge_dofs] = np.cross(hinge_axes, lever).transpose(0, 2, 1)
        out[:, 3:, self.hinge_dofs] = hinge_axes.transpose(0, 2, 1)
        out[:, :3, self.slide_dofs] = xaxis[:, self.slides].transpose(0, 2, 1)


class BatchStepper(PhysicsStepper):
    def __init__(self, models: Sequence[mujoco.MjModel], substeps: int, num_threads: int) -> None:
        super().__init__(models, substeps, num_threads)
        batch = load_batch_module()
        self._batch = batch.Batch(models[0], nsim=len(models), nthread=num_threads, persistent=True)
        self._batch.set_models(models)
        self._ctrl = self._batch.bind("ctrl")
        self._qpos = self._batch.bind("qpos")
        self._qvel = self._batch.bind("qvel")
        self._sensordata = self._batch.bind("sensordata")
        self._site_xpos = self._batch.bind("site_xpos")
        self._site_xmat = self._batch.bind("site_xmat")
        self._xaxis = self._batch.bind("xaxis")
        self._xanchor = self._batch.bind("xanchor")
        self._readout: WorldReadout | None = None
        self._jacobian: AxisJacobian | None = None

    def bind_readout(self, readout: WorldReadout) -> None:
        self._readout = readout
        self._jacobian = AxisJacobian(self.models[0], readout.tcp_site)

    def states_changed(self, datas: Sequence[mujoco.MjData], ids: np.ndarray) -> None:
        self._save_states(datas, ids, self._batch.state, STATE_SPEC)
        # Resets edit the worlds' models (colours, lights, cameras); the batch reads them anew.
        self._batch.set_models(self.models)

    def simulate(self, datas, ctrl, run_parallel, refresh) -> None:
        """One batch call (it releases the GIL): substeps, then positions and velocities at the
        new state. Controls go into the rows; ``datas`` are not touched."""
        self._ctrl[:] = ctrl
        self._batch.step(nstep=self.substeps, stage=mujoco.mjtStage.mjSTAGE_VEL)

    def finish(self, datas, run_parallel, refresh, parallel_refresh=True) -> None:
        readout = self._readout
        if readout is not None:
            readout.qpos[:] = self._qpos
            readout.qvel[:] = self._qvel
            readout.sensordata[:] = self._sensordata
            readout.tcp_xmat[:] = self._site_xmat[:, readout.tcp_site]
            self._jacobian(self._xaxis, self._xanchor, self._site_xpos, readout.jacobian)
            return
        self._load_and_refresh(datas, self._batch.state, STATE_SPEC, run_parallel, refresh, parallel_refresh)

    def sync_datas(self, datas: Sequence[mujoco.MjData]) -> None:
        self._load_states(datas, np.arange(len(datas)), self._batch.state, STATE_SPEC)

    def close(self) -> None:
        self._batch = None
