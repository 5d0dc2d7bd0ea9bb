"""The policy side of deployment: load a trained policy, build its observation from what the robot
reports, and turn its normalised actions into joint targets.

The policy was trained on the simulator's observation dict (``proprio``, ``privileged``,
``rgb_<camera>``, ``instruction``). On a robot, ``proprio`` is rebuilt from the measured joint
state with the arm's kinematics (same layout, ``PROPRIO_FIELDS``), ``privileged`` is the task state
from a tracker (the simulated robot publishes its own), and images come from the cameras. Actions
become joint targets through the same controllers the simulator uses (``vla_rl.robots.controllers``),
from the measured pose of the period they are executed in.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from vla_rl.real_world.kinematics import ArmKinematics
from vla_rl.real_world.robot import JointCommand, RobotObservation
from vla_rl.robots.controllers import Controller, ControllerSettings, make_controller
from vla_rl.robots.panda import PANDA
from vla_rl.sims.mujoco.observations import proprio_vector

from vla_rl.config import ConfigError, TrainConfig, load_train_config_file
from vla_rl.envs.config import EnvConfig
from vla_rl.policies.chunk_policy import ChunkPolicy

PolicyObservation = dict[str, Any]
"""One observation as the policy reads it: float32 vectors, uint8 images, the instruction string."""


@dataclass
class LoadedPolicy:
    """A trained policy with what deployment needs to know about it."""

    env: EnvConfig
    """The training run's environment config (task, control mode and rate, cameras)."""
    obs_keys: list[str]
    """Observation keys the policy reads."""
    policy: ChunkPolicy
    """Every policy is a chunk policy: ``infer`` returns its whole chunk (one action for PPO's)."""

    def infer(self, observation: PolicyObservation) -> np.ndarray:
        """float32 [chunk_len, action_dim]: the deterministic actions for one observation (a chunk of
        one for PPO's actor-critics)."""
        return deterministic_chunk(self.policy, observation)


def deterministic_chunk(policy: ChunkPolicy, observation: PolicyObservation) -> np.ndarray:
    """float32 [chunk_len, action_dim] in [-1, 1]: ``policy``'s noise-free chunk for one observation
    (a batch of one world built from ``observation``)."""
    batch = {
        key: torch.as_tensor(np.asarray(value))[None] if key != "instruction" else [value]
        for key, value in observation.items()
    }
    with torch.no_grad():
        actions = policy.sample(batch, deterministic=True).actions[0]
    return actions.float().clamp(-1.0, 1.0).numpy().astype(np.float32)


def load_trained_policy(checkpoint: str | Path) -> LoadedPolicy:
    """The policy of a ``vla-rl train``, ``vla-rl sft`` or VLA RL run (or checkpoint) folder, on the
    CPU, in eval mode."""
    from omegaconf import OmegaConf

    from vla_rl.policies.registry import is_state_policy, policy_class
    from vla_rl.training.checkpoint import CONFIG_FILENAME
    from vla_rl.training.jobs import resolve_run_checkpoint

    directory = resolve_run_checkpoint(checkpoint, "checkpoint")
    name = OmegaConf.select(OmegaConf.load(directory / CONFIG_FILENAME), "policy.name")
    if is_state_policy(policy_class(str(name))):
        return _load_actor_critic(directory)
    return _load_chunk_policy(directory, str(name))


def _load_actor_critic(directory: Path) -> LoadedPolicy:
    from vla_rl.training.checkpoint import CONFIG_FILENAME, load_trained_actor_critic

    cfg: TrainConfig = load_train_config_file(directory / CONFIG_FILENAME)
    env_cfg = dataclasses.replace(cfg.env, num_envs=1, pipeline_stages=1, device="cpu")
    policy = load_trained_actor_critic(dataclasses.replace(cfg, env=env_cfg), directory).eval()
    return LoadedPolicy(env=env_cfg, obs_keys=list(cfg.policy.actor_obs_keys), policy=policy)


def _load_chunk_policy(directory: Path, name: str) -> LoadedPolicy:
    from omegaconf import OmegaConf

    from vla_rl.policies.registry import load_chunk_policy
    from vla_rl.training.checkpoint import CONFIG_FILENAME, resolve_policy_dir

    raw_env = OmegaConf.select(OmegaConf.load(directory / CONFIG_FILENAME), "env")
    env_cfg: EnvConfig = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(EnvConfig), raw_env))
    env_cfg = dataclasses.replace(env_cfg, num_envs=1, pipeline_stages=1, device="cpu")
    try:
        policy = load_chunk_policy(name, resolve_policy_dir(directory))
    except ValueError as error:
        raise ConfigError(f"config key 'checkpoint': {error}") from None
    obs_keys = ["proprio", *(f"rgb_{camera}" for camera in env_cfg.cameras)]
    return LoadedPolicy(env=env_cfg, obs_keys=obs_keys, policy=policy.eval())


def save_chunk_policy_checkpoint(
    policy: torch.nn.Module, family: str, env: EnvConfig, run_dir: str | Path
) -> Path:
    """Package a chunk policy built or loaded elsewhere (e.g. a VLA from a local pretrained folder)
    as a deployable checkpoint: the layout and config ``vla-rl sft`` writes, through the same code."""
    from vla_rl.training.checkpoint import POLICY_DIRNAME, save_checkpoint
    from vla_rl.training.sft.config import SFTConfig, SFTPolicyConfig

    config = SFTConfig(env=env, policy=SFTPolicyConfig(name=family))
    return save_checkpoint(
        run_dir,
        0,
        None,
        {},
        config,
        write_extra=lambda directory: policy.save_pretrained(directory / POLICY_DIRNAME),
    )


class ObservationBuilder:
    """``RobotObservation`` -> the policy's observation dict."""

    def __init__(self, kinematics: ArmKinematics, instruction: str = "") -> None:
        self.kinematics = kinematics
        self.instruction = instruction

    def __call__(self, obs: RobotObservation) -> PolicyObservation:
        tcp_pos, tcp_mat = self.kinematics.tcp_pose(obs.arm_qpos_rad)
        proprio = proprio_vector(
            np.asarray(obs.arm_qpos_rad)[None],
            np.asarray(obs.arm_qvel_rad_s)[None],
            np.array([obs.gripper_opening_m]),
            tcp_pos[None],
            tcp_mat[None],
        )
        policy_obs: PolicyObservation = {
            "proprio": proprio[0],
            "instruction": self.instruction,
        }
        if obs.task_state is not None:
            policy_obs["privileged"] = obs.task_state.astype(np.float32)
        for camera, image in obs.images.items():
            policy_obs[f"rgb_{camera}"] = image
        return policy_obs


def missing_keys(obs_keys: list[str], observation: PolicyObservation) -> list[str]:
    """Keys the policy reads that the robot's observation does not provide."""
    return [key for key in obs_keys if key not in observation]


class CommandMapper:
    """Normalised action [A] + measured pose -> ``JointCommand`` (the simulator's controller)."""

    def __init__(self, env: EnvConfig, kinematics: ArmKinematics) -> None:
        self.controller: Controller = make_controller(
            env.control_mode, PANDA, ControllerSettings(**env.options.get("controller", {}))
        )
        self.kinematics = kinematics

    def __call__(self, action: np.ndarray, obs: RobotObservation, stamp_s: float) -> JointCommand:
        state = self.kinematics.robot_state(obs.arm_qpos_rad)
        arm, finger = self.controller(np.asarray(action, dtype=np.float64)[None], state)
        # The controller's gripper target is one finger's opening; commands carry the finger distance.
        return JointCommand(arm_qpos_rad=arm[0], gripper_opening_m=float(2 * finger[0]), stamp_s=stamp_s)
