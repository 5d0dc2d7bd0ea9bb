"""``MujocoBatchedEnv``: N MuJoCo worlds (one MjModel/MjData pair each) stepped by a thread pool."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import mujoco
import numpy as np
import torch
from vla_rl.robots.controllers import CONTROLLERS, ControllerSettings, RobotState, make_controller
from vla_rl.robots.panda import PANDA, RobotDescription
from vla_rl.sims.batching import EpisodeStats, numpy_step_result, reset_ids, space_of
from vla_rl.sims.mujoco.config_checks import image_hw, validate_config
from vla_rl.sims.mujoco.observations import proprio_vector
from vla_rl.sims.mujoco.randomization import RANDOMIZED_MODEL_FIELDS, get_split, randomize_scene
from vla_rl.sims.mujoco.readout import WorldReadout
from vla_rl.sims.mujoco.rendering import ThreadLocalRenderers
from vla_rl.sims.mujoco.scene import new_scene_spec
from vla_rl.sims.mujoco.steppers import DEFAULT_STEPPER, STEPPERS
from vla_rl.sims.mujoco.stepping import STATE_SPEC, PhysicsStepper
from vla_rl.sims.tasks.base import TaskState
from vla_rl.sims.tasks.registry import make_task

from vla_rl.envs.base import BatchedEnv, Observation, StepResult, world_seeds
from vla_rl.envs.config import EnvConfig

if TYPE_CHECKING:  # the env only calls what a rollout hands it; no import of the rollout layer
    from vla_rl.sims.mujoco.device_resets import ResetSample

    from vla_rl.envs.timeline import Timeline


def build_model(cfg: EnvConfig, robot: RobotDescription = PANDA):
    """Compile the scene of ``cfg.task`` and return ``(model, task)``."""
    task = make_task(cfg.task)
    spec = new_scene_spec(robot, cfg.physics_dt_s, max(image_hw(cfg)))
    task.build_scene(spec)
    model = spec.compile()
    model.vis.quality.shadowsize = 2048 if cfg.shadows else 0
    model.vis.quality.offsamples = 4 if cfg.multisample else 0
    task.bind(model)
    return model, task


class MujocoBatchedEnv(BatchedEnv):
    """Batched MuJoCo manipulation environment (see ``vla_rl.envs.base`` for the contract)."""

    def __init__(self, cfg: EnvConfig, robot: RobotDescription = PANDA) -> None:
        validate_config(cfg)
        self.cfg = cfg
        self.robot = robot
        self.num_envs = cfg.num_envs
        self.device = torch.device(cfg.device)
        self.control_hz = float(cfg.control_hz)
        self.substeps = max(1, round(1.0 / (cfg.control_hz * cfg.physics_dt_s)))
        self.split = get_split(cfg.split)
        self.base_model, self.task = build_model(cfg, robot)
        self.max_episode_steps = (
            cfg.max_episode_steps if cfg.max_episode_steps > 0 else self.task.default_max_episode_steps
        )
        self.controller = make_controller(
            cfg.control_mode, robot, ControllerSettings(**cfg.options.get("controller", {}))
        )
        n, m = self.num_envs, self.base_model
        self.models = [copy.copy(m) for _ in range(n)]
        self.datas = [mujoco.MjData(mi) for mi in self.models]

        self._arm_qadr = np.array([m.joint(j).qposadr[0] for j in robot.arm_joint_names])
        self._arm_vadr = np.array([m.joint(j).dofadr[0] for j in robot.arm_joint_names])
        self._finger_qadr = np.array([m.joint(j).qposadr[0] for j in robot.gripper_joint_names])
        self._arm_act = np.array([m.actuator(a).id for a in robot.arm_actuator_names])
        self._gripper_act = m.actuator(robot.gripper_actuator_name).id
        self._tcp_site = m.site(robot.tcp_site_name).id
        self._camera_ids = [m.camera(robot.wrist_camera_name if c == "wrist" else c).id for c in cfg.cameras]

        self.readout = WorldReadout(m, n, self._tcp_site)
        self._ctrl = np.zeros((n, m.nu))
        self.action_space = gym.spaces.Box(-1.0, 1.0, (CONTROLLERS[cfg.control_mode].action_dim,), np.float32)
        self._images = [np.zeros((n, *image_hw(cfg), 3), np.uint8) for _ in cfg.cameras]
        self.goals = np.zeros((n, self.task.goal_dim))
        self.instructions = [""] * n
        self.episodes = EpisodeStats(n)
        self.rngs = [np.random.default_rng(s) for s in np.random.SeedSequence().spawn(n)]

        self._pool = ThreadPoolExecutor(max_workers=cfg.num_threads, thread_name_prefix="mujoco-world")
        self._physics_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mujoco-physics")
        """Runs the physics of ``step_async`` while the caller goes on."""
        self._pending_physics: Future[None] | None = None
        self.timeline: Timeline | None = None
        """Set (by ``StagedEnv.record_timeline``) to record the span of each background physics call."""
        self.timeline_stage = 0
        self._chunks = [c for c in np.array_split(np.arange(n), cfg.num_threads) if len(c)]
        self._renderers = self._make_renderers()
        self._skip_images = False
        """Set by ``skip_images_next_step`` for one step."""
        self._stepper = self._make_stepper()
        if self._renderers is None:
            self._stepper.bind_readout(self.readout)
        self._reset_worlds(np.arange(n))
        self._run_parallel(self._gather_and_render, np.arange(n))
        self.observation_space = space_of(self._observe())

    # ------------------------------------------------- what subclasses (other physics) replace
    def _make_renderers(self) -> ThreadLocalRenderers | None:
        return ThreadLocalRenderers(self.base_model, *image_hw(self.cfg)) if self.cfg.cameras else None

    def _make_stepper(self) -> PhysicsStepper:
        stepper = self.cfg.options.get("stepper", DEFAULT_STEPPER)
        return STEPPERS[stepper](self.models, self.substeps, self.cfg.num_threads)

    # ----------------------------------------------------------------- per-world work (threads)
    def _run_parallel(self, fn, ids: np.ndarray) -> None:
        chunks = (
            self._chunks
            if len(ids) == self.num_envs
            else [c for c in np.array_split(ids, len(self._chunks)) if len(c)]
        )
        if len(chunks) == 1:
            fn(chunks[0])
            return
        for future in [self._pool.submit(fn, c) for c in chunks]:
            future.result()

    def _gather_and_render(self, ids: np.ndarray) -> None:
        """Read worlds whose kinematics are current (after ``mj_forward``: resets, restores)."""
        self.readout.read(self.models, self.datas, ids, recompute=False)
        self._render(ids)

    def _render(self, ids: np.ndarray) -> None:
        if self._renderers is None:
            return
        renderer = self._renderers.get()
        for i in ids:
            for images, cam in zip(self._images, self._camera_ids, strict=True):
                renderer.render(self.models[i], self.datas[i], cam, images[i])

    def _refresh_worlds(self, ids: np.ndarray) -> None:
        """After physics: bring what is read up to date (see ``WorldReadout.read``), then render
        (unless ``skip_images_next_step`` asked to skip it; ``_finish_step`` then renders the
        worlds whose episode ends)."""
        self.readout.read(self.models, self.datas, ids, recompute=True, cameras=bool(self._camera_ids))
        if not self._skip_images:
            self._render(ids)

    def skip_images_next_step(self) -> None:
        # At 64 worlds of 64x64 pixels rendering took 53 of a step's 73 ms (2 threads).
        self._skip_images = self._renderers is not None

    @property
    def actuator_targets(self) -> np.ndarray:
        """[N, nu] actuator targets (arm joint positions, finger opening) of the last control step."""
        return self._ctrl

    # ----------------------------------------------------------------------------- resets
    def _reset_worlds(self, ids: np.ndarray) -> None:
        home = np.asarray(self.robot.home_arm_qpos)
        open_m = self.robot.gripper_max_opening_m / 2
        for i in ids:
            m, d, rng = self.models[i], self.datas[i], self.rngs[i]
            mujoco.mj_resetData(m, d)
            d.qpos[self._arm_qadr] = home
            d.qpos[self._finger_qadr] = open_m
            d.ctrl[self._arm_act] = home
            d.ctrl[self._gripper_act] = open_m
            randomize_scene(m, self.base_model, rng, self.split)
            self.task.reset_world(m, d, rng, self.split, self.goals[i])
            mujoco.mj_forward(m, d)
            self._ctrl[i] = d.ctrl
            self.instructions[i] = self.task.instruction(self.goals[i], self.split)
        self.episodes.start(ids)
        self._stepper.states_changed(self.datas, ids)

    def start_from(self, ids: Sequence[int], sample: ResetSample) -> Observation:
        """Start new episodes in worlds ``ids`` from initial states drawn elsewhere (``sample``, one
        row per world: a device env's ``last_reset``), in place of this env's own draw; the
        observation of all worlds after it."""
        ids = np.asarray(ids, dtype=np.int64)
        for row, i in enumerate(ids.tolist()):
            m, d = self.models[i], self.datas[i]
            mujoco.mj_resetData(m, d)
            d.qpos[:] = sample.qpos[row].cpu().numpy()
            d.ctrl[:] = sample.ctrl[row].cpu().numpy()
            d.mocap_pos[:] = sample.mocap_pos[row].cpu().numpy()
            d.mocap_quat[:] = sample.mocap_quat[row].cpu().numpy()
            for name, values in sample.model_fields.items():
                getattr(m, name)[:] = values[row].cpu().numpy()
            mujoco.mj_forward(m, d)
            self._ctrl[i] = d.ctrl
            self.goals[i] = sample.goals[row].cpu().numpy()
            self.instructions[i] = self.task.instruction(self.goals[i], self.split)
        self.episodes.start(ids)
        self._stepper.states_changed(self.datas, ids)
        self._run_parallel(self._gather_and_render, ids)
        return self._observe()

    def reset(
        self, seed: int | Sequence[int | list[int]] | None = None, env_ids: torch.Tensor | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        ids = np.asarray(reset_ids(env_ids, self.num_envs), dtype=np.int64)
        for i, s in zip(ids, world_seeds(self, seed, ids), strict=True) if seed is not None else ():
            entropy = int(s) if isinstance(s, int | np.integer) else [int(v) for v in s]
            self.rngs[i] = np.random.default_rng(entropy)
        self._reset_worlds(ids)
        self._run_parallel(self._gather_and_render, ids)
        return self._observe(), {}

    # ------------------------------------------------------------------------------- step
    def _robot_state(self) -> RobotState:
        return RobotState(
            arm_qpos=self.readout.qpos[:, self._arm_qadr],
            tcp_pos=self.readout.sensordata[:, 0:3],
            tcp_xmat=self.readout.tcp_xmat.reshape(-1, 3, 3),
            tcp_jacobian=self.readout.jacobian[:, :, self._arm_vadr],
        )

    def _task_state(self) -> TaskState:
        return TaskState(
            tcp_pos=self.readout.sensordata[:, 0:3],
            gripper_opening_m=self.readout.qpos[:, self._finger_qadr].sum(axis=1),
            sensordata=self.readout.sensordata,
            goals=self.goals,
        )

    def step(self, action: torch.Tensor) -> StepResult:
        self._apply_action(action)
        return self._advance()

    def step_joint_targets(self, arm_qpos_rad: np.ndarray, gripper_opening_m: np.ndarray) -> StepResult:
        """One control period towards absolute arm joint targets [N, 7] (rad) and finger distances
        [N] (m), bypassing the controller: a robot driver's joint position interface, which the
        simulated robot of deployment exposes. Targets are clipped to the joint and finger ranges."""
        arm = np.clip(np.asarray(arm_qpos_rad, np.float64), self.robot.arm_lower, self.robot.arm_upper)
        finger = np.clip(
            np.asarray(gripper_opening_m, np.float64) / 2, 0.0, self.robot.gripper_max_opening_m / 2
        )
        self._ctrl[:, self._arm_act] = arm.reshape(self.num_envs, -1)
        self._ctrl[:, self._gripper_act] = finger.reshape(self.num_envs)
        return self._advance()

    def _advance(self) -> StepResult:
        """One control period with the actuator targets in ``self._ctrl``."""
        self._stepper.advance(
            self.datas, self._ctrl, self._run_parallel, self._refresh_worlds, self._refresh_in_pool
        )
        return self._finish_step()

    def step_async(self, action: torch.Tensor) -> None:
        """Apply the controller, then simulate in a background thread until ``step_wait``.

        Only the stepper's ``simulate`` runs there (for ``mujoco.rollout``, one call that releases
        the GIL); the per-world refresh, which is many short calls holding the GIL, runs in
        ``step_wait``, so the two threads do not queue for the interpreter.
        """
        if self._pending_physics is not None:
            raise RuntimeError("step_async() called twice without step_wait()")
        self._apply_action(action)
        simulate = self._stepper.simulate
        if self.timeline is not None:
            simulate = self.timeline.timed("sim", self.timeline_stage, simulate)
        self._pending_physics = self._physics_thread.submit(
            simulate, self.datas, self._ctrl, self._run_parallel, self._refresh_worlds
        )

    def step_wait(self) -> StepResult:
        if self._pending_physics is None:
            raise RuntimeError("step_wait() without a step_async() first")
        pending, self._pending_physics = self._pending_physics, None
        pending.result()
        self._stepper.finish(self.datas, self._run_parallel, self._refresh_worlds, self._refresh_in_pool)
        return self._finish_step()

    @property
    def _refresh_in_pool(self) -> bool:
        # Without cameras the refresh is a few microseconds of GIL-holding calls per world, faster
        # in this thread than handed to the pool; rendering is worth spreading over the threads.
        return self._renderers is not None

    def _apply_action(self, action: torch.Tensor) -> None:
        action_np = np.asarray(torch.as_tensor(action).detach().cpu(), dtype=np.float64)
        if action_np.shape != (self.num_envs, self.action_dim):
            raise ValueError(f"action shape {action_np.shape} != {(self.num_envs, self.action_dim)}")
        arm_targets, gripper = self.controller(action_np, self._robot_state())
        self._ctrl[:, self._arm_act] = arm_targets
        self._ctrl[:, self._gripper_act] = gripper

    def _finish_step(self) -> StepResult:
        reward, success = self.task.reward_and_success(self._task_state())
        self.episodes.add(reward, success)
        truncated = self.episodes.length >= self.max_episode_steps
        done_ids = np.flatnonzero(truncated)
        if self._skip_images:
            self._skip_images = False
            if len(done_ids):  # their final observation is read
                self._run_parallel(self._render, done_ids)
        obs = self._observe()
        info: dict[str, Any] = {"success": torch.from_numpy(success.copy()).to(self.device), "final_obs": obs}
        if len(done_ids):
            info["episode"] = self.episodes.report(success, self.device)
            self._reset_worlds(done_ids)
            self._run_parallel(self._gather_and_render, done_ids)
            obs = self._observe()
        return numpy_step_result(obs, reward, np.zeros(self.num_envs, bool), truncated, info, self.device)

    # ------------------------------------------------------------------------ observation
    def _tensor(self, array: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(array).to(self.device)

    def _observe(self) -> Observation:
        robot, state = self._robot_state(), self._task_state()
        arm_qvel, opening = self.readout.qvel[:, self._arm_vadr], state.gripper_opening_m
        proprio = proprio_vector(robot.arm_qpos, arm_qvel, opening, robot.tcp_pos, robot.tcp_xmat)
        privileged = self.task.privileged(state).astype(np.float32)
        obs: Observation = {
            "proprio": self._tensor(proprio),
            "privileged": self._tensor(privileged),
            "objects": self._tensor(self.task.object_state(privileged)),
        }
        for cam, images in zip(self.cfg.cameras, self._images, strict=True):
            obs[f"rgb_{cam}"] = self._tensor(images.copy())
        obs["instruction"] = list(self.instructions)
        return obs

    # ----------------------------------------------------------------------------- snapshot
    def state_dict(self) -> dict[str, Any]:
        size = mujoco.mj_stateSize(self.base_model, STATE_SPEC)
        physics = np.zeros((self.num_envs, size))
        self._stepper.sync_datas(self.datas)
        for i, (m, d) in enumerate(zip(self.models, self.datas, strict=True)):
            d.ctrl[:] = self._ctrl[i]  # the rollout stepper passes controls without storing them
            mujoco.mj_getState(m, d, physics[i], STATE_SPEC)
        state: dict[str, Any] = {
            "physics_state": physics,
            **self.episodes.state(),
            "goals": self.goals.copy(),
            "rng_states": [rng.bit_generator.state for rng in self.rngs],
            "instructions": list(self.instructions),
        }
        for name in RANDOMIZED_MODEL_FIELDS:
            state[f"model_{name}"] = np.stack([getattr(m, name).copy() for m in self.models])
        return state

    def load_state_dict(self, state: dict[str, Any]) -> Observation:
        for i, (m, d) in enumerate(zip(self.models, self.datas, strict=True)):
            for name in RANDOMIZED_MODEL_FIELDS:
                getattr(m, name)[:] = np.asarray(state[f"model_{name}"])[i]
            mujoco.mj_setState(m, d, np.asarray(state["physics_state"][i], dtype=np.float64), STATE_SPEC)
            mujoco.mj_forward(m, d)
            self._ctrl[i] = d.ctrl
            self.rngs[i].bit_generator.state = state["rng_states"][i]
        self._stepper.states_changed(self.datas, np.arange(self.num_envs))
        self.episodes.load_state(state)
        self.goals[:] = np.asarray(state["goals"])
        self.instructions = list(state["instructions"])
        self._run_parallel(self._gather_and_render, np.arange(self.num_envs))
        return self._observe()

    def close(self) -> None:
        if self._pending_physics is not None:
            self._pending_physics.result()
            self._pending_physics = None
        self._physics_thread.shutdown(wait=True)
        if self._renderers is not None:
            renderers = self._renderers
            self._renderers = None
            # Each GL context must be released by the thread that owns it.
            self._run_parallel(lambda ids: renderers.close_current(), np.arange(self.num_envs))
        self._pool.shutdown(wait=True)
        self._stepper.close()
