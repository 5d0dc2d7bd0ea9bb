"""``MujocoWarpBatchedEnv``: the MuJoCo tasks with all worlds in one batched MuJoCo Warp model.

Everything above the physics is the CPU backend's (``MujocoBatchedEnv``): task definitions,
randomisation, controllers, rewards, observations, autoreset and snapshots, so both backends give
the same observations for the same state and a policy moves between them unchanged. What differs:
stepping, per-world resets by mask, kinematics, sensors, the TCP Jacobian and rendering run on the
warp device for all worlds at once (``WarpPhysics``, ``WarpBatchRenderer``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from vla_rl.sims.mujoco.batched_env import MujocoBatchedEnv
from vla_rl.sims.mujoco.config_checks import IMAGE_WIDTH_OPTION, image_hw
from vla_rl.sims.mujoco.randomization import RANDOMIZED_MODEL_FIELDS
from vla_rl.sims.mujoco_warp.physics import (
    DEFAULT_CONSTRAINTS_PER_WORLD,
    DEFAULT_CONTACTS_PER_WORLD,
    WarpPhysics,
    warp_device,
)
from vla_rl.sims.mujoco_warp.rendering import WarpBatchRenderer

from vla_rl.envs.base import BatchedEnv


class MujocoWarpBatchedEnv(MujocoBatchedEnv):
    """Batched MuJoCo Warp manipulation environment (see ``vla_rl.envs.base`` for the contract).

    ``EnvConfig.device`` picks the warp device (``cpu`` or ``cuda[:k]``); returned tensors live
    there. ``options["contacts_per_world"]`` / ``options["constraints_per_world"]`` size the
    contact and constraint buffers of each world.
    """

    _stepper: WarpPhysics

    def _make_stepper(self) -> WarpPhysics:
        options = self.cfg.options
        return WarpPhysics(
            self.base_model,
            self.models,
            self.substeps,
            self.device,
            self._tcp_site,
            RANDOMIZED_MODEL_FIELDS,
            contacts_per_world=int(options.get("contacts_per_world", DEFAULT_CONTACTS_PER_WORLD)),
            constraints_per_world=int(options.get("constraints_per_world", DEFAULT_CONSTRAINTS_PER_WORLD)),
        )

    @property
    def physics(self) -> WarpPhysics:
        """The batched warp model and data of all worlds."""
        return self._stepper

    def _make_renderers(self) -> WarpBatchRenderer | None:
        if not self.cfg.cameras:
            return None
        if image_hw(self.cfg)[1] != self.cfg.image_size:
            raise ValueError(
                f"options.{IMAGE_WIDTH_OPTION}: the mujoco_warp backend renders square images "
                f"(env.image_size={self.cfg.image_size}); use the mujoco backend for other widths"
            )
        return WarpBatchRenderer(
            self.base_model,
            self.num_envs,
            self._camera_ids,
            self.cfg.image_size,
            warp_device(self.device),
            shadows=self.cfg.shadows,
        )

    # All worlds are handled by single batched launches: no per-world thread pool.
    def _run_parallel(self, fn, ids: np.ndarray) -> None:
        fn(ids)

    def _gather_and_render(self, ids: np.ndarray) -> None:
        self._stepper.read_into(self.readout)
        self._render(ids)

    def _refresh_worlds(self, ids: np.ndarray) -> None:
        self._stepper.refresh_after_physics(cameras=self._renderers is not None)
        self._stepper.read_into(self.readout)
        if not self._skip_images:
            self._render(ids)

    def _render(self, ids: np.ndarray) -> None:
        if self._renderers is not None:
            self._renderers.render(self._stepper.model, self._stepper.data, self._images)

    # Warp kernels on the CPU device hold the interpreter, so there is no background physics to
    # overlap with: the contract's default (the whole step inside ``step_wait``).
    step_async = BatchedEnv.step_async
    step_wait = BatchedEnv.step_wait

    def state_dict(self) -> dict[str, Any]:
        self._stepper.download(self.datas)
        return super().state_dict()

    def close(self) -> None:
        self._renderers = None  # the warp renderer holds no thread-bound context
        super().close()
