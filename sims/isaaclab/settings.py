"""Settings of the ``isaaclab`` backend, read and checked from an ``EnvConfig`` before any simulator work.

Isaac Lab tasks bring their own robot, controller, physics rate and randomisation, so of the generic
``EnvConfig`` fields only ``task`` (a registered Isaac Lab id such as ``Isaac-Lift-Cube-Franka-v0``),
``num_envs``, ``device``, ``max_episode_steps``, ``cameras`` and ``image_size`` are used. The backend's
own settings come from ``cfg.options`` (``IsaacLabOptions``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from vla_rl.config.structured import Schema, one_of, value_check
from vla_rl.envs.config import EnvConfig


@dataclass(frozen=True)
class TaskSpec:
    """What this project adds to an Isaac Lab task: a language instruction and how success is read."""

    instruction: str
    success_terms: tuple[str, ...] = ()
    """Termination terms that mean success. ``"terminated"`` counts any termination that is not a time
    out (for direct envs, whose only terminal condition is the goal). Empty: ``DEFAULT_SUCCESS_TERMS``."""
    add_lift_success_term: bool = False
    """Add Isaac Lab's lift ``object_reached_goal`` termination (the lift tasks do not configure one);
    reaching the goal then ends the episode as ``terminated``."""


TASK_SPECS: tuple[tuple[str, TaskSpec], ...] = (
    (
        "Isaac-Lift-Cube-",
        TaskSpec(
            "lift the cube to the target position", ("object_reached_goal",), add_lift_success_term=True
        ),
    ),
    ("Isaac-Reach-", TaskSpec("move the gripper to the target pose")),
    ("Isaac-Franka-Cabinet-Direct-", TaskSpec("open the top drawer of the cabinet", ("terminated",))),
    ("Isaac-Open-Drawer-", TaskSpec("open the top drawer of the cabinet")),
    ("Isaac-Stack-Cube-", TaskSpec("stack the cubes on top of each other")),
)
"""Task-id prefixes (first match wins) and their specs."""

DEFAULT_SUCCESS_TERMS = ("success", "object_reached_goal")
"""Termination terms read as success when present and the task spec names none."""

SEEDING_MODES = ("per_world", "batch")


@dataclass
class IsaacLabOptions:
    """The backend's own settings, ``env.options``."""

    instruction: str | None = None
    """Overrides the task's instruction (required for tasks missing from ``TASK_SPECS``)."""
    success_terms: list[str] | None = None
    """Termination terms meaning success; every one must exist in the env."""
    policy_group: str = "policy"
    """Observation group exposed as ``proprio``."""
    privileged_group: str = "critic"
    """Observation group exposed as ``privileged`` where the task has it."""
    action_bound: float = 1.0
    """For unbounded Isaac Lab action spaces: action = unit action * action_bound (the task's action
    terms then apply their own scale, e.g. 0.5 rad per unit for Franka joint targets)."""
    seeding: str = "per_world"
    """``per_world``: seeded resets reset worlds one by one, each after seeding with its own seed, so
    equal seeds give equal initial states (costs one reset call per world). ``batch``: one seed from
    all given seeds, one batched reset (fast; equal seeds need not give equal states)."""


OPTIONS = Schema(
    IsaacLabOptions,
    [
        value_check("action_bound", lambda v: math.isfinite(v) and v > 0, "must be a finite number > 0"),
        one_of("seeding", SEEDING_MODES),
        *(
            value_check(key, bool, "must be an observation group name")
            for key in ("policy_group", "privileged_group")
        ),
    ],
)


@dataclass(frozen=True)
class IsaacLabSettings:
    task: str
    num_envs: int
    device: str
    max_episode_steps: int
    """``<= 0`` keeps the task's episode length."""
    cameras: tuple[str, ...]
    image_size: int
    instruction: str
    spec: TaskSpec
    success_terms: tuple[str, ...] | None
    """Explicit ``options.success_terms`` (checked against the env), or None for the spec's default."""
    options: IsaacLabOptions
    """The backend's own settings (observation groups, action bound, seeding)."""

    @property
    def sim_device(self) -> str:
        """Isaac Lab's device string (``"cuda"`` is made explicit as ``"cuda:0"``)."""
        return "cuda:0" if self.device == "cuda" else self.device


def settings_from_config(cfg: EnvConfig) -> IsaacLabSettings:
    """Checks ``cfg`` and returns the backend's settings; raises ``ValueError`` naming the bad key."""
    options = OPTIONS.validate(cfg.options, "env.options")
    if not isinstance(cfg.task, str) or not cfg.task:
        raise ValueError("env.task must be a registered Isaac Lab task id, e.g. 'Isaac-Lift-Cube-Franka-v0'")
    if cfg.num_envs < 1:
        raise ValueError(f"env.num_envs must be >= 1, got {cfg.num_envs}")
    try:
        device = torch.device(cfg.device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"env.device: {cfg.device!r} is not a torch device") from error
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"env.device must be 'cpu' or 'cuda[:i]' for Isaac Lab, got {cfg.device!r}")
    cameras = tuple(cfg.cameras)
    if len(set(cameras)) != len(cameras) or not all(isinstance(c, str) and c.isidentifier() for c in cameras):
        raise ValueError(f"env.cameras must be distinct scene sensor names, got {list(cameras)}")
    if cameras and cfg.image_size < 1:
        raise ValueError(f"env.image_size must be >= 1 when cameras are rendered, got {cfg.image_size}")

    spec = next((task_spec for prefix, task_spec in TASK_SPECS if cfg.task.startswith(prefix)), None)
    instruction = options.instruction if options.instruction is not None else spec and spec.instruction
    if not isinstance(instruction, str) or not instruction.strip():
        raise ValueError(
            f"env.options.instruction: task {cfg.task!r} has no instruction in this backend's table; "
            "give one as a non-empty string"
        )

    return IsaacLabSettings(
        task=cfg.task,
        num_envs=int(cfg.num_envs),
        device=str(cfg.device),
        max_episode_steps=int(cfg.max_episode_steps),
        cameras=cameras,
        image_size=int(cfg.image_size),
        instruction=instruction,
        spec=spec or TaskSpec(instruction),
        success_terms=None if options.success_terms is None else tuple(options.success_terms),
        options=options,
    )
