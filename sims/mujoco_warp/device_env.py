"""``MujocoWarpDeviceEnv``: the MuJoCo Warp env with everything above the physics on ``env.device``.

``MujocoWarpBatchedEnv`` steps the physics on the warp device but runs the controller, rewards,
success checks, observations and resets on the host in numpy, with a device-to-host copy of the
state every control step. Here they run as batched torch operations on the device that holds the
physics (the same code on the CPU device, which the tests compare with the host path):

* controllers: ``vla_rl.robots.torch_controllers`` (damped least-squares IK for all worlds at once);
* rewards, success and the privileged state: each task's ``*_torch`` methods;
* resets: ``DeviceResetSampler`` draws every reset world's poses, goals, colours, light and camera
  from one ``torch.Generator`` on the device and writes them into the warp state by mask;
* episode statistics: ``EpisodeStats`` on the device.

The controller and task maths run in float64 (as the host path's numpy does) on the float32 physics
state. Which worlds end an episode is known on the host without reading the device: episodes end
only at their time limit, so the host keeps a mirror of every world's step count. The one copy back
per reset is the reset worlds' goals, which the host turns into instruction strings.

Seeding (a seeded reset repeats on both forms):

* ``reset(seed=s)`` with an int seeds the device generator with ``s`` and draws every reset world at
  once, as an autoreset does: what world ``i`` gets depends on which worlds were reset with it
  (unlike the host path, where an int gives world ``i`` its own seed ``world_seed(s, i)``);
* ``reset(seed=[...])`` with one seed per reset world draws each world from the generator seeded
  with its seed alone, so worlds given one seed start alike whatever else is reset with them (a
  python loop over the distinct seeds; the conformance suite's check).

The time-limit autoresets draw all their worlds at once from the generator as the last seeded reset
left it. The draws differ from the host path's per-world numpy generators; their distributions are
the same (``tests/sims/test_device_resets.py``).
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from vla_rl.robots.controllers import ControllerSettings
from vla_rl.robots.torch_controllers import TorchRobotState, make_torch_controller
from vla_rl.sims.batching import EpisodeStats, int_seed, reset_ids
from vla_rl.sims.mujoco.device_resets import DeviceResetSampler, ResetSample
from vla_rl.sims.mujoco.observations import proprio_tensor
from vla_rl.sims.mujoco.randomization import RANDOMIZED_MODEL_FIELDS
from vla_rl.sims.mujoco_warp.batched_env import MujocoWarpBatchedEnv
from vla_rl.sims.tasks.base import TaskState

from vla_rl.envs.base import Observation, StepResult, world_seeds

MATH_DTYPE = torch.float64
"""Controller and task maths, as the host path's numpy."""


class MujocoWarpDeviceEnv(MujocoWarpBatchedEnv):
    """``MujocoWarpBatchedEnv`` with controllers, rewards, observations and resets on the device."""

    _device_ready = False

    def _setup_device(self) -> None:
        """What the device path keeps beside the host env's fields (built at the first reset)."""
        device, n = self.device, self.num_envs
        self.sampler = DeviceResetSampler(self.base_model, self.task, self.robot, self.split, device)
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(int(np.random.SeedSequence().generate_state(1)[0]))
        settings = ControllerSettings(**self.cfg.options.get("controller", {}))
        self.torch_controller = make_torch_controller(self.cfg.control_mode, self.robot, settings)
        self.goals_device = torch.zeros((n, self.task.goal_dim), dtype=MATH_DTYPE, device=device)
        self.episodes = EpisodeStats(n, device)
        self.host_length = np.zeros(n, np.int64)
        """Mirror of ``episodes.length``: which worlds hit their time limit, without a device read."""
        self.last_reset: tuple[np.ndarray, ResetSample] | None = None
        """The worlds last reset and what was drawn for them (to replay a reset elsewhere)."""
        self._image_tensors: list[torch.Tensor] = []

        def index(values: Any) -> torch.Tensor:
            return torch.as_tensor(np.asarray(values), dtype=torch.int64, device=device)

        self._arm_q, self._arm_v, self._finger_q, self._arm_ctrl = (
            index(self._arm_qadr),
            index(self._arm_vadr),
            index(self._finger_qadr),
            index(self._arm_act),
        )
        self._device_ready = True

    # ----------------------------------------------------------------------------- state
    def _robot_state_device(self) -> TorchRobotState:
        view = self._stepper.view
        jacp, jacr = self._stepper.jacobian_views
        return TorchRobotState(
            arm_qpos=view["qpos"][:, self._arm_q].to(MATH_DTYPE),
            tcp_pos=view["sensordata"][:, 0:3].to(MATH_DTYPE),
            tcp_xmat=view["site_xmat"][:, self._tcp_site].reshape(-1, 3, 3).to(MATH_DTYPE),
            tcp_jacobian=torch.cat([jacp, jacr], dim=1)[:, :, self._arm_v].to(MATH_DTYPE),
        )

    def _task_state_device(self) -> TaskState:
        view = self._stepper.view
        sensordata = view["sensordata"].to(MATH_DTYPE)
        return TaskState(
            tcp_pos=sensordata[:, 0:3],
            gripper_opening_m=view["qpos"][:, self._finger_q].to(MATH_DTYPE).sum(dim=1),
            sensordata=sensordata,
            goals=self.goals_device,
        )

    # ----------------------------------------------------------------------------- resets
    def _reset_worlds(self, ids: np.ndarray) -> None:
        """New episodes in worlds ``ids`` from one batched draw of the device generator."""
        if not self._device_ready:
            self._setup_device()
        self._start_worlds(ids, self.sampler.sample(len(ids), self.generator))

    def _seeded_sample(self, seeds: list[Any]) -> ResetSample:
        """One world's draw per seed, each from the generator seeded with it alone (worlds given one
        seed start alike, whatever else is reset with them); a python loop over the distinct seeds,
        which only explicit ``reset(seed=...)`` calls pay."""
        drawn: dict[int, ResetSample] = {}
        for seed in seeds:
            key = int_seed(seed, bits=63)
            if key not in drawn:
                self.generator.manual_seed(key)
                drawn[key] = self.sampler.sample(1, self.generator)
        return ResetSample.cat([drawn[int_seed(seed, bits=63)] for seed in seeds])

    def _start_worlds(self, ids: np.ndarray, sample: ResetSample) -> None:
        """Write ``sample`` (one row per world of ``ids``) into the device state."""
        ids = np.asarray(ids, dtype=np.int64)
        rows = torch.as_tensor(ids, device=self.device)
        state = {"qpos": sample.qpos, "ctrl": sample.ctrl}
        state.update(mocap_pos=sample.mocap_pos, mocap_quat=sample.mocap_quat)
        self._stepper.write_rows(rows, state, sample.model_fields)
        self.goals_device[rows] = sample.goals.to(MATH_DTYPE)
        self.episodes.start(rows)
        self.host_length[ids] = 0
        for i, goal in zip(ids.tolist(), sample.goals.cpu().numpy(), strict=True):
            self.instructions[i] = self.task.instruction(goal, self.split)
        self.last_reset = (ids, sample)

    def reset(
        self, seed: int | Sequence[int | list[int]] | None = None, env_ids: torch.Tensor | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        ids = np.asarray(reset_ids(env_ids, self.num_envs), dtype=np.int64)
        if seed is None:
            self._reset_worlds(ids)
        elif isinstance(seed, numbers.Integral):  # one batched draw (a seeded reset of 4,096 worlds)
            self.generator.manual_seed(int_seed([int(seed)], bits=63))
            self._reset_worlds(ids)
        else:
            seeds = world_seeds(self, seed, ids)
            self._start_worlds(ids, self._seeded_sample(seeds))
            # The autoresets that follow draw from a generator seeded by all of these seeds.
            self.generator.manual_seed(int_seed([int_seed(s, bits=63) for s in seeds], bits=63))
        self._gather_and_render(ids)
        return self._observe(), {}

    # ------------------------------------------------------------------------------- step
    def _apply_action(self, action: torch.Tensor) -> None:
        action = torch.as_tensor(action).detach().to(self.device, MATH_DTYPE)
        if tuple(action.shape) != (self.num_envs, self.action_dim):
            raise ValueError(f"action shape {tuple(action.shape)} != {(self.num_envs, self.action_dim)}")
        arm_targets, finger_target_m = self.torch_controller(action, self._robot_state_device())
        ctrl = self._stepper.view["ctrl"]
        ctrl[:, self._arm_ctrl] = arm_targets.to(ctrl.dtype)
        ctrl[:, self._gripper_act] = finger_target_m.to(ctrl.dtype)

    def step_joint_targets(self, arm_qpos_rad: np.ndarray, gripper_opening_m: np.ndarray) -> StepResult:
        arm = np.clip(np.asarray(arm_qpos_rad, np.float64), self.robot.arm_lower, self.robot.arm_upper)
        finger = np.clip(
            np.asarray(gripper_opening_m, np.float64) / 2, 0.0, self.robot.gripper_max_opening_m / 2
        )
        ctrl = self._stepper.view["ctrl"]
        ctrl[:, self._arm_ctrl] = torch.from_numpy(arm.reshape(self.num_envs, -1)).to(ctrl)
        ctrl[:, self._gripper_act] = torch.from_numpy(finger.reshape(self.num_envs)).to(ctrl)
        return self._advance()

    @property
    def actuator_targets(self) -> np.ndarray:
        return self._stepper.view["ctrl"].cpu().numpy().astype(np.float64)

    def _advance(self) -> StepResult:
        self._stepper.step_controls()
        self._stepper.refresh_after_physics(cameras=self._renderers is not None)
        if not self._skip_images:
            self._render_device()
        return self._finish_step()

    def _finish_step(self) -> StepResult:
        reward, success = self.task.reward_and_success_torch(self._task_state_device())
        self.episodes.add(reward, success)
        self.host_length += 1
        done_ids = np.flatnonzero(self.host_length >= self.max_episode_steps)
        truncated = self.episodes.length >= self.max_episode_steps
        if self._skip_images:
            self._skip_images = False
            if len(done_ids):  # their final observation is read
                self._render_device()
        obs = self._observe()
        info: dict[str, Any] = {"success": success.clone(), "final_obs": obs}
        if len(done_ids):
            info["episode"] = self.episodes.report(success, self.device)
            self._reset_worlds(done_ids)
            self._gather_and_render(done_ids)
            obs = self._observe()
        terminated = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        return StepResult(obs, reward.to(torch.float32), terminated, truncated, info)

    # ------------------------------------------------------------------------ observation
    def _gather_and_render(self, ids: np.ndarray) -> None:
        self._render_device()

    def _render_device(self) -> None:
        if self._renderers is not None:
            self._image_tensors = self._renderers.render_tensors(self._stepper.model, self._stepper.data)

    def _observe(self) -> Observation:
        robot, state = self._robot_state_device(), self._task_state_device()
        arm_qvel = self._stepper.view["qvel"][:, self._arm_v].to(MATH_DTYPE)
        proprio = proprio_tensor(
            robot.arm_qpos, arm_qvel, state.gripper_opening_m, robot.tcp_pos, robot.tcp_xmat
        )
        privileged = self.task.privileged_torch(state).to(torch.float32)
        obs: Observation = {
            "proprio": proprio,
            "privileged": privileged,
            "objects": self.task.object_state(privileged),
        }
        for cam, images in zip(self.cfg.cameras, self._image_tensors, strict=True):
            obs[f"rgb_{cam}"] = images.clone()
        obs["instruction"] = list(self.instructions)
        return obs

    # ----------------------------------------------------------------------------- snapshot
    def _sync_host(self) -> None:
        """Bring the host copies a snapshot reads up to date: controls, goals, model fields."""
        self._ctrl[:] = self._stepper.view["ctrl"].cpu().numpy()
        self.goals[:] = self.goals_device.cpu().numpy()
        for name in RANDOMIZED_MODEL_FIELDS:
            values = self._stepper.model_view[name].cpu().numpy()
            for model, row in zip(self.models, values, strict=True):
                getattr(model, name)[:] = row

    def state_dict(self) -> dict[str, Any]:
        self._sync_host()
        state = super().state_dict()
        state["device_generator_state"] = self.generator.get_state().cpu()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> Observation:
        super().load_state_dict(state)
        self.goals_device.copy_(torch.as_tensor(self.goals))
        self.host_length[:] = np.asarray(state["step_count"])
        self.generator.set_state(torch.as_tensor(state["device_generator_state"]))
        return self._observe()
