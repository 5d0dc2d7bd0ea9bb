"""ManiSkill3 tasks this backend knows, and the validated settings an ``EnvConfig`` resolves to.

Nothing here imports ManiSkill, so configs are checked (and rejected with a ``ValueError``) before
any simulator starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vla_rl.envs.config import EnvConfig

PANDA_CONTROL_MODES = {
    "joint_delta": "pd_joint_delta_pos",
    "ee_delta_pos": "pd_ee_delta_pos",
    "ee_delta_pose": "pd_ee_delta_pose",
}
"""The toolkit's control modes -> ManiSkill's controller names for the Panda arm."""
BRIDGE_CONTROL_MODES = {"ee_delta_pose": "arm_pd_ee_target_delta_pose_align2_gripper_pd_joint_pos"}
"""The only controller of ManiSkill's WidowX Bridge digital twins (end-effector pose deltas)."""


@dataclass(frozen=True)
class TaskSpec:
    instruction: str | None
    """Fixed instruction for every world; ``None`` reads ``env.get_language_instruction()``."""
    control_modes: dict[str, str]
    """Toolkit control mode -> ManiSkill ``control_mode``."""
    rgb_obs_mode: str = "rgb+state_dict"
    """ManiSkill ``obs_mode`` when cameras are rendered. ``+state_dict`` keeps the ground-truth
    object state (the ``privileged`` observation) next to the images."""
    state_obs_mode: str | None = "state_dict"
    """ManiSkill ``obs_mode`` without cameras; ``None``: the task only runs with cameras."""
    native_camera_size: bool = False
    """Render at the camera's calibrated size and resize afterwards (cameras given by a fixed
    intrinsic matrix cannot simply be asked for another width and height)."""


def _bridge_twin() -> TaskSpec:
    # The Bridge digital twins green-screen a real photograph behind the scene, which needs the
    # segmentation texture; they support no other observation mode and no state-only mode.
    return TaskSpec(
        instruction=None,
        control_modes=BRIDGE_CONTROL_MODES,
        rgb_obs_mode="rgb+segmentation",
        state_obs_mode=None,
        native_camera_size=True,
    )


TASKS: dict[str, TaskSpec] = {
    "PickCube-v1": TaskSpec("pick up the red cube and move it to the green goal", PANDA_CONTROL_MODES),
    "PushCube-v1": TaskSpec("push the blue cube onto the red and white target", PANDA_CONTROL_MODES),
    "StackCube-v1": TaskSpec("stack the red cube on top of the green cube", PANDA_CONTROL_MODES),
    "PutCarrotOnPlateInScene-v1": _bridge_twin(),
    "PutEggplantInBasketScene-v1": _bridge_twin(),
    "PutSpoonOnTableClothInScene-v1": _bridge_twin(),
    "StackGreenCubeOnYellowCubeBakedTexInScene-v1": _bridge_twin(),
}

OPTION_KEYS = {
    "instruction": "instruction for every world (required for task ids not in TASKS)",
    "ignore_terminations": "bool: episodes end only at the time limit, not on success",
    "reward_mode": "ManiSkill reward_mode (normalized_dense, dense, sparse, none)",
    "make_kwargs": "dict of further gym.make keyword arguments (robot_uids, sim_config, ...)",
}
"""Keys of ``EnvConfig.options`` this backend reads; any other key is a config error."""


@dataclass(frozen=True)
class ManiSkillSettings:
    """Everything the factory needs, resolved from an ``EnvConfig``."""

    obs_mode: str
    control_mode: str
    instruction: str | None
    ignore_terminations: bool
    make_kwargs: dict[str, Any]
    """Keyword arguments for ``gym.make`` (without ``max_episode_steps``)."""

    @property
    def privileged(self) -> bool:
        """Whether ManiSkill returns the ground-truth task state in this observation mode."""
        return "state" in self.obs_mode


def resolve_settings(cfg: EnvConfig) -> ManiSkillSettings:
    """Check ``cfg`` for this backend and translate it to ManiSkill's arguments."""
    unknown = sorted(set(cfg.options) - set(OPTION_KEYS))
    if unknown:
        known = "; ".join(f"{key}: {text}" for key, text in OPTION_KEYS.items())
        raise ValueError(f"config key 'env.options' has unknown keys {unknown} for maniskill ({known})")
    if cfg.num_envs < 1:
        raise ValueError(f"config key 'env.num_envs' must be >= 1, got {cfg.num_envs}")
    if cfg.split != "train":
        raise ValueError(
            f"config key 'env.split': maniskill tasks have only the 'train' split, got {cfg.split!r}"
        )
    if len(set(cfg.cameras)) != len(cfg.cameras):
        raise ValueError(f"config key 'env.cameras' lists a camera twice: {cfg.cameras}")
    if cfg.cameras and cfg.image_size < 1:
        raise ValueError(f"config key 'env.image_size' must be >= 1, got {cfg.image_size}")

    instruction = cfg.options.get("instruction")
    if instruction is not None and (not isinstance(instruction, str) or not instruction.strip()):
        raise ValueError("config key 'env.options.instruction' must be a non-empty string")
    spec = TASKS.get(cfg.task)
    if spec is None:
        if instruction is None:
            raise ValueError(
                f"config key 'env.task': {cfg.task!r} has no instruction in the maniskill task table "
                f"({', '.join(TASKS)}); give one in env.options.instruction"
            )
        spec = TaskSpec(instruction=instruction, control_modes=PANDA_CONTROL_MODES)

    if cfg.control_mode in spec.control_modes:
        control_mode = spec.control_modes[cfg.control_mode]
    elif cfg.control_mode in spec.control_modes.values() or cfg.task not in TASKS:
        control_mode = cfg.control_mode  # a ManiSkill controller name, passed through
    else:
        raise ValueError(
            f"config key 'env.control_mode': {cfg.task} supports {sorted(spec.control_modes)} "
            f"(or ManiSkill's {sorted(spec.control_modes.values())}), got {cfg.control_mode!r}"
        )

    if cfg.cameras:
        obs_mode = spec.rgb_obs_mode
    elif spec.state_obs_mode is None:
        raise ValueError(f"config key 'env.cameras': {cfg.task} renders images only; name a camera")
    else:
        obs_mode = spec.state_obs_mode

    ignore_terminations = cfg.options.get("ignore_terminations", False)
    if not isinstance(ignore_terminations, bool):
        raise ValueError("config key 'env.options.ignore_terminations' must be true or false")
    extra = cfg.options.get("make_kwargs", {})
    if not isinstance(extra, dict):
        raise ValueError("config key 'env.options.make_kwargs' must be a mapping")
    make_kwargs: dict[str, Any] = {
        "num_envs": cfg.num_envs,
        "obs_mode": obs_mode,
        "control_mode": control_mode,
        "sim_backend": "gpu",
        "enable_shadow": cfg.shadows,
    }
    if cfg.cameras and not spec.native_camera_size:
        make_kwargs["sensor_configs"] = {"width": cfg.image_size, "height": cfg.image_size}
    if "reward_mode" in cfg.options:
        make_kwargs["reward_mode"] = cfg.options["reward_mode"]
    clashes = sorted(set(extra) & (set(make_kwargs) | {"max_episode_steps"}))
    if clashes:
        raise ValueError(f"config key 'env.options.make_kwargs' sets {clashes}, which the env config sets")
    make_kwargs.update(extra)

    return ManiSkillSettings(
        obs_mode=obs_mode,
        control_mode=control_mode,
        instruction=instruction if instruction is not None else spec.instruction,
        ignore_terminations=ignore_terminations,
        make_kwargs=make_kwargs,
    )
