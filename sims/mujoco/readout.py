"""What observations and the controller read from each world, copied into batched arrays."""

from __future__ import annotations

from collections.abc import Sequence

import mujoco
import numpy as np


class WorldReadout:
    """Per-world values the batched env reads every step, as arrays [N, ...]: joint positions and
    velocities, sensor data, the TCP site's orientation and its 6 x nv Jacobian."""

    def __init__(self, model: mujoco.MjModel, num_worlds: int, tcp_site: int) -> None:
        self.tcp_site = tcp_site
        self.qpos = np.zeros((num_worlds, model.nq))
        self.qvel = np.zeros((num_worlds, model.nv))
        self.sensordata = np.zeros((num_worlds, model.nsensordata))
        self.tcp_xmat = np.zeros((num_worlds, 9))
        self.jacobian = np.zeros((num_worlds, 6, model.nv))

    def read(
        self,
        models: Sequence[mujoco.MjModel],
        datas: Sequence[mujoco.MjData],
        ids: np.ndarray,
        recompute: bool,
        cameras: bool = False,
    ) -> None:
        """Copy the values of worlds ``ids``; with ``recompute`` first bring them up to date.

        After stepping, positions-derived quantities describe the state before the last substep.
        ``recompute`` redoes only what is read (poses, centres of mass for the Jacobian, position
        sensors, and cameras/lights when ``cameras``); a full ``mj_forward`` would also redo
        collisions and constraint forces, which the next step recomputes anyway. After a reset or
        a restore (``mj_forward`` already ran) nothing needs recomputing.
        """
        qpos, qvel, sensordata, tcp_xmat, jac = (
            self.qpos,
            self.qvel,
            self.sensordata,
            self.tcp_xmat,
            self.jacobian,
        )
        site = self.tcp_site
        jac_site, kinematics, com_pos, camlight, sensor_pos = (
            mujoco.mj_jacSite,
            mujoco.mj_kinematics,
            mujoco.mj_comPos,
            mujoco.mj_camlight,
            mujoco.mj_sensorPos,
        )
        for i in np.asarray(ids).tolist():  # hot loop: a few microseconds per world
            m, d = models[i], datas[i]
            if recompute:
                kinematics(m, d)
                com_pos(m, d)
                if cameras:
                    camlight(m, d)
                sensor_pos(m, d)
            qpos[i] = d.qpos
            qvel[i] = d.qvel
            sensordata[i] = d.sensordata
            tcp_xmat[i] = d.site_xmat[site]
            jac_site(m, d, jac[i, :3], jac[i, 3:], site)
