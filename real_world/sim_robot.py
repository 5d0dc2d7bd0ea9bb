"""A MuJoCo task behaving like a robot driver: joint position targets in, joint states out.

The transport-agnostic core of the simulated robot node: one world of the toolkit's MuJoCo
environment, stepped one control period at a time towards the latest joint targets (held when no new
command came, as a real joint position controller holds its last target). Episodes start from a seed
on request, so a deployment over a transport can be compared with direct evaluation on the same seeds.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
from vla_rl.sims.mujoco.config_checks import IMAGE_WIDTH_OPTION
from vla_rl.sims.mujoco.observations import PROPRIO_FIELDS, split_fields

from vla_rl.envs.config import EnvConfig


def camera_env(env: EnvConfig, height: int = 0, width: int = 0) -> EnvConfig:
    """``env`` with cameras ``height`` pixels high (0: as in ``env``) and ``width`` wide (0: square):
    the same view at more pixels, widened at the sides where it is wider than high (MuJoCo keeps the
    vertical field of view), as a real camera sees the scene a policy was trained on."""
    if height <= 0 and width <= 0:
        return env
    options = {**env.options, IMAGE_WIDTH_OPTION: width} if width > 0 else env.options
    return dataclasses.replace(env, image_size=height if height > 0 else env.image_size, options=options)


@dataclass
class SimSnapshot:
    """What the simulated robot reports after a reset or a control period."""

    arm_qpos_rad: np.ndarray
    arm_qvel_rad_s: np.ndarray
    gripper_opening_m: float
    images: dict[str, np.ndarray] = field(default_factory=dict)
    task_state: np.ndarray | None = None
    episode: int = 0
    step: int = 0
    success: bool = False
    done: bool = False


class SimulatedRobot:
    """One world of a MuJoCo task driven by absolute joint targets."""

    def __init__(self, env_cfg: EnvConfig) -> None:
        from vla_rl.sims.mujoco.batched_env import MujocoBatchedEnv

        if env_cfg.backend != "mujoco":
            raise ValueError(f"the simulated robot runs the mujoco backend, not {env_cfg.backend!r}")
        self.env = MujocoBatchedEnv(dataclasses.replace(env_cfg, num_envs=1, pipeline_stages=1))
        self.cameras = tuple(env_cfg.cameras)
        self.control_hz = self.env.control_hz
        self.episode = -1
        self.done = True
        self.step_index = 0
        self._last = self._snapshot(self.env.reset(seed=0)[0], success=False)
        self._target_arm = self._last.arm_qpos_rad.copy()
        self._target_opening = self._last.gripper_opening_m

    def reset(self, seed: int) -> SimSnapshot:
        """Start a new episode from ``seed`` (the seed direct evaluation gives the same world)."""
        obs, _ = self.env.reset(seed=seed)
        self.episode += 1
        self.done = False
        self.step_index = 0
        self._last = self._snapshot(obs, success=False)
        self._target_arm = self._last.arm_qpos_rad.copy()
        self._target_opening = self._last.gripper_opening_m
        return self._last

    def set_targets(
        self, arm_qpos_rad: np.ndarray | None = None, gripper_opening_m: float | None = None
    ) -> None:
        """Latest joint targets (rad) and finger distance (m); either may be left as it was."""
        if arm_qpos_rad is not None:
            self._target_arm = np.asarray(arm_qpos_rad, dtype=np.float64).copy()
        if gripper_opening_m is not None:
            self._target_opening = float(gripper_opening_m)

    def step(self) -> SimSnapshot:
        """One control period towards the latest targets; after the episode's last step it holds."""
        if self.done:
            return self._last
        result = self.env.step_joint_targets(self._target_arm[None], np.array([self._target_opening]))
        self.step_index += 1
        success = bool(result.info["success"][0])
        self.done = bool(result.truncated[0] or result.terminated[0])
        # At the end of an episode the env has already reset the world; report the final state.
        self._last = self._snapshot(result.info["final_obs"], success=success)
        return self._last

    @property
    def last(self) -> SimSnapshot:
        return self._last

    def _snapshot(self, obs: dict, success: bool) -> SimSnapshot:
        proprio = split_fields(obs["proprio"][0].numpy().astype(np.float64), PROPRIO_FIELDS)
        return SimSnapshot(
            arm_qpos_rad=proprio["arm_qpos"],
            arm_qvel_rad_s=proprio["arm_qvel"],
            gripper_opening_m=float(proprio["gripper_opening_m"][0]),
            images={c: obs[f"rgb_{c}"][0].numpy() for c in self.cameras},
            task_state=obs["privileged"][0].numpy().astype(np.float64),
            episode=self.episode,
            step=self.step_index,
            success=success,
            done=self.done,
        )

    def close(self) -> None:
        self.env.close()
