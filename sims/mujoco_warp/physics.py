"""All worlds of a task in one MuJoCo Warp model/data pair, stepped as a batch.

``WarpPhysics`` plugs into ``MujocoBatchedEnv`` as its physics stepper (``PhysicsStepper``): the CPU
``MjModel``/``MjData`` per world are kept only to sample resets (randomisation, object placement) and
to take snapshots; stepping, kinematics, sensors, the TCP Jacobian and rendering run on the warp
device for all worlds at once. Warp arrays are read and written through zero-copy torch views.

On a CUDA device the substeps of a control step and the refresh that follows are captured once as
CUDA graphs over persistent buffers and replayed; on the CPU device the same kernels are launched
directly (the path the tests run).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import mujoco
import mujoco_warp as mjw
import numpy as np
import torch
import warp as wp
from vla_rl.sims.mujoco.readout import WorldReadout
from vla_rl.sims.mujoco.stepping import PhysicsStepper

wp.config.log_level = wp.LOG_WARNING  # no banner, no line per loaded kernel module; warnings stay

STATE_FIELDS = ("qpos", "qvel", "act", "ctrl", "mocap_pos", "mocap_quat", "qacc_warmstart", "time")
"""Data fields uploaded for worlds whose state was set on the CPU (resets, restored snapshots)."""


@wp.kernel
def _gather_site_position(
    site_xpos: wp.array2d(dtype=wp.vec3), site: int, out: wp.array(dtype=wp.vec3)
):  # pragma: no cover - runs as a warp kernel
    world = wp.tid()
    out[world] = site_xpos[world, site]


DEFAULT_CONTACTS_PER_WORLD = 32
DEFAULT_CONSTRAINTS_PER_WORLD = 160
"""Buffer sizes per world: about twice the most seen on the CPU backend over random-action rollouts
(pick_place: 12 contacts, 73 constraint rows); MuJoCo Warp warns when a world overflows them."""


def warp_device(torch_device: torch.device) -> str:
    return "cpu" if torch_device.type == "cpu" else f"cuda:{torch_device.index or 0}"


class WarpPhysics(PhysicsStepper):
    """Batched MuJoCo Warp state of ``num_worlds`` copies of ``model``.

    ``per_world_model_fields`` are the model arrays that differ between worlds (domain
    randomisation of colours, lights and cameras); they get a leading world dimension.
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        models: Sequence[mujoco.MjModel],
        substeps: int,
        device: torch.device,
        tcp_site: int,
        per_world_model_fields: Sequence[str],
        contacts_per_world: int = DEFAULT_CONTACTS_PER_WORLD,
        constraints_per_world: int = DEFAULT_CONSTRAINTS_PER_WORLD,
    ) -> None:
        super().__init__(models, substeps, num_threads=1)
        self.num_worlds = len(models)
        self.torch_device = device
        self.device = warp_device(device)
        self.per_world_model_fields = tuple(per_world_model_fields)
        self.use_graphs = device.type == "cuda"
        with wp.ScopedDevice(self.device):
            self.model = mjw.put_model(
                model, batch_sizes=dict.fromkeys(self.per_world_model_fields, len(models))
            )
            self.data = mjw.make_data(
                model, nworld=self.num_worlds, nconmax=contacts_per_world, njmax=constraints_per_world
            )
            self._reset_mask = wp.zeros(self.num_worlds, dtype=bool)
            self._tcp_point = wp.zeros(self.num_worlds, dtype=wp.vec3)
            self._tcp_body = wp.array(
                np.full(self.num_worlds, model.site_bodyid[tcp_site], np.int32), dtype=wp.int32
            )
            self._jacp = wp.zeros((self.num_worlds, 3, model.nv), dtype=float)
            self._jacr = wp.zeros((self.num_worlds, 3, model.nv), dtype=float)
        self.tcp_site = tcp_site
        self.view = {
            name: wp.to_torch(getattr(self.data, name))
            for name in (*STATE_FIELDS, "site_xpos", "site_xmat", "sensordata")
        }
        """Zero-copy torch views of the warp data (shared memory on the CPU device)."""
        self.model_view = {
            name: wp.to_torch(getattr(self.model, name)) for name in self.per_world_model_fields
        }
        self._reset_mask_view = wp.to_torch(self._reset_mask)
        self.jacobian_views = (wp.to_torch(self._jacp), wp.to_torch(self._jacr))
        """Zero-copy torch views of the TCP Jacobian, translational and rotational rows [N, 3, nv]."""
        self._graphs: dict[str, wp.Graph] = {}

    # ---------------------------------------------------------------------- launching kernels
    def _launch(self, name: str, body: Callable[[], None]) -> None:
        """Run ``body``; on CUDA record it as a graph on first use and replay the graph after."""
        with wp.ScopedDevice(self.device):
            if not self.use_graphs:
                body()
                return
            if name not in self._graphs:
                with wp.ScopedCapture() as capture:
                    body()
                self._graphs[name] = capture.graph
            wp.capture_launch(self._graphs[name])

    def _substeps(self) -> None:
        for _ in range(self.substeps):
            mjw.step(self.model, self.data)

    def _refresh(self, cameras: bool) -> None:
        """Positions-derived quantities of the state after the last substep (what is read)."""
        mjw.kinematics(self.model, self.data)
        mjw.com_pos(self.model, self.data)
        if cameras:
            mjw.camlight(self.model, self.data)
        mjw.sensor_pos(self.model, self.data)
        self._jacobian()

    def _jacobian(self) -> None:
        wp.launch(
            _gather_site_position,
            dim=self.num_worlds,
            inputs=[self.data.site_xpos, self.tcp_site],
            outputs=[self._tcp_point],
        )
        mjw.jac(self.model, self.data, self._jacp, self._jacr, self._tcp_point, self._tcp_body)

    def _sync_warp(self) -> None:
        """Torch reads and writes the buffers next: let warp's launches on its own stream finish."""
        if self.torch_device.type == "cuda":
            wp.synchronize_device(self.device)

    def _sync_torch(self) -> None:
        """Warp launches on its own stream: let torch's writes to the shared buffers land first."""
        if self.torch_device.type == "cuda":
            torch.cuda.synchronize(self.torch_device)

    # --------------------------------------------------------------- PhysicsStepper interface
    def simulate(self, datas, ctrl: np.ndarray, run_parallel, refresh) -> None:
        self.step_controls(torch.from_numpy(ctrl))

    def step_controls(self, ctrl: torch.Tensor | None = None) -> None:
        """Write the controls [N, nu] (any device; None: those already in ``view["ctrl"]``) and
        launch one control step's substeps; nothing is refreshed or read back (the raw-physics
        benchmark times this alone)."""
        if ctrl is not None:
            self.view["ctrl"].copy_(ctrl)
        self._sync_torch()
        self._launch("substeps", self._substeps)

    def finish(self, datas, run_parallel, refresh, parallel_refresh: bool = True) -> None:
        refresh(np.arange(self.num_worlds))

    def refresh_after_physics(self, cameras: bool) -> None:
        self._launch(f"refresh_{cameras}", lambda: self._refresh(cameras))
        self._sync_warp()

    def states_changed(self, datas: Sequence[mujoco.MjData], ids: np.ndarray) -> None:
        """Per-world reset by mask from the CPU: worlds ``ids`` get the state sampled (or restored)
        in ``datas`` and their randomised model fields (see ``write_rows``)."""
        ids = np.asarray(ids, dtype=np.int64)
        state = {
            name: torch.from_numpy(np.stack([np.atleast_1d(getattr(datas[i], name)) for i in ids]))
            for name in STATE_FIELDS
        }
        model_fields = {
            name: torch.from_numpy(np.stack([getattr(self.models[i], name) for i in ids]))
            for name in self.per_world_model_fields
        }
        self.write_rows(torch.from_numpy(ids).to(self.torch_device), state, model_fields)

    def write_rows(
        self, rows: torch.Tensor, state: dict[str, torch.Tensor], model_fields: dict[str, torch.Tensor]
    ) -> None:
        """Per-world reset by mask on the device: clear worlds ``rows``, write the given data fields
        (a subset of ``STATE_FIELDS``, each [k, ...]; the others stay as cleared) and model fields,
        then run a forward pass so that poses, sensors and cameras describe the new state before
        anything reads or renders them."""
        self._reset_mask_view.zero_()
        self._reset_mask_view[rows] = True
        self._sync_torch()
        with wp.ScopedDevice(self.device):
            mjw.reset_data(self.model, self.data, reset=self._reset_mask)
        self._sync_warp()
        for name, values in state.items():
            view = self.view[name]
            view[rows] = values.reshape(len(rows), *view.shape[1:]).to(view)
        for name, values in model_fields.items():
            self.model_view[name][rows] = values.to(self.model_view[name])
        self._sync_torch()
        with wp.ScopedDevice(self.device):
            mjw.forward(self.model, self.data)
            self._jacobian()
        self._sync_warp()

    # ---------------------------------------------------------------------------- reading out
    def read_into(self, readout: WorldReadout) -> None:
        """Copy what observations and the controller read into ``readout``'s host arrays (the
        controllers and tasks compute on the host; on a GPU this is one small copy per step)."""
        wp.synchronize_device(self.device)
        view = self.view
        readout.qpos[:] = view["qpos"].cpu().numpy()
        readout.qvel[:] = view["qvel"].cpu().numpy()
        readout.sensordata[:] = view["sensordata"].cpu().numpy()
        readout.tcp_xmat[:] = view["site_xmat"][:, self.tcp_site].reshape(self.num_worlds, 9).cpu().numpy()
        jacp, jacr = self.jacobian_views
        readout.jacobian[:, :3] = jacp.cpu().numpy()
        readout.jacobian[:, 3:] = jacr.cpu().numpy()

    def download(self, datas: Sequence[mujoco.MjData]) -> None:
        """Copy the device state of every world into ``datas`` (for snapshots)."""
        for i, data in enumerate(datas):
            for name in STATE_FIELDS:
                value = self.view[name][i].cpu().numpy().astype(np.float64)
                target = getattr(data, name)
                if np.ndim(target) == 0:
                    data.time = float(value)
                else:
                    target[:] = value.reshape(target.shape)
