"""Typed configuration of an environment (the ``env`` group of the Hydra configs)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vla_rl.config.structured import Check, positive


@dataclass
class EnvConfig:
    backend: str = "mujoco"
    """Simulator backend: a name of ``vla_rl.envs.registry.BACKENDS`` (``mujoco``, ``gymnasium`` ...) or
    your own factory as ``package.module:make_env``."""
    task: str = "reach"
    """Task name within the backend: ``reach``, ``push``, ``lift``, ``pick_place`` for MuJoCo, a
    Gymnasium id such as ``Pendulum-v1`` for the ``gymnasium`` backend."""
    num_envs: int = 64
    """Number of worlds stepped together."""
    control_mode: str = "ee_delta_pos"
    """``joint_delta`` (7 joint-position deltas + gripper), ``ee_delta_pos`` (end-effector
    position delta + gripper, orientation held pointing down) or ``ee_delta_pose`` (position and
    axis-angle rotation delta + gripper). End-effector modes use damped least-squares IK."""
    control_hz: float = 20.0
    """Policy/control rate; the physics runs ``round(1 / (control_hz * physics_dt_s))`` substeps."""
    physics_dt_s: float = 0.005
    """Physics timestep in seconds."""
    max_episode_steps: int = 0
    """Time limit in control steps; ``<= 0`` uses the task's default."""
    split: str = "train"
    """Domain-randomisation split: ``train`` (in-distribution) or an out-of-distribution split
    (``ood_visual``, ``ood_position``, ``ood_semantic``, ``ood_all``)."""
    cameras: list[str] = field(default_factory=list)
    """Cameras rendered into the observation as ``rgb_<name>``; empty disables rendering."""
    image_size: int = 64
    """Height and width of rendered images in pixels."""
    shadows: bool = False
    """Render shadows (dominates CPU render cost)."""
    multisample: bool = False
    """Multisample anti-aliasing when rendering (costly on CPU)."""
    pipeline_stages: int = 1
    """Split the worlds into this many equal groups, each its own simulator; rollouts step them in
    turn so that one group's physics runs in the background while the policy acts for another
    (``vla_rl.envs.staged``). 1 steps all worlds at once. ``num_envs`` must be a multiple."""
    num_threads: int = 2
    """Worker threads stepping (and rendering) the worlds."""
    device: str = "cpu"
    """Torch device of returned tensors."""
    options: dict[str, Any] = field(default_factory=dict)
    """Backend-specific options passed through unchanged (e.g. Gymnasium ``make`` kwargs)."""


ENV_CHECKS: list[Check[EnvConfig]] = [
    *positive("num_envs", "control_hz"),
    Check(
        "physics_dt_s",
        lambda env: 0 < env.physics_dt_s <= 1.0 / env.control_hz,
        "must be positive and at most one control period",
    ),
    *positive("image_size", "num_threads", "pipeline_stages"),
]
"""The value checks of an ``env`` group, whatever the job reads it (``nested("env", ENV_CHECKS)``)."""
