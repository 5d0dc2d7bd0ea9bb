"""Validation of an ``EnvConfig`` for the MuJoCo backend, with messages naming the allowed values."""

from __future__ import annotations

from vla_rl.robots.controllers import CONTROLLERS
from vla_rl.sims.mujoco.randomization import SPLITS
from vla_rl.sims.mujoco.stepping import DEFAULT_STEPPER, STEPPERS
from vla_rl.sims.tasks.registry import TASKS

from vla_rl.envs.config import EnvConfig

CAMERAS = ("front", "top", "wrist")


def _check_choice(field: str, value: object, allowed) -> None:
    if value not in allowed:
        raise ValueError(f"unknown {field} {value!r}; allowed: {', '.join(sorted(allowed))}")


def validate_config(cfg: EnvConfig) -> None:
    """Raise ``ValueError`` for any setting the MuJoCo backend cannot honour."""
    _check_choice("task", cfg.task, TASKS)
    _check_choice("control_mode", cfg.control_mode, CONTROLLERS)
    _check_choice("split", cfg.split, SPLITS)
    for camera in cfg.cameras:
        _check_choice("camera", camera, CAMERAS)
    for field in ("num_envs", "image_size", "num_threads", "control_hz", "physics_dt_s"):
        if getattr(cfg, field) <= 0:
            raise ValueError(f"{field} must be > 0, got {getattr(cfg, field)!r}")
    if cfg.physics_dt_s * cfg.control_hz > 1.0:
        raise ValueError(
            f"physics_dt_s={cfg.physics_dt_s} is longer than one control period (control_hz={cfg.control_hz})"
        )
    stepper = cfg.options.get("stepper", DEFAULT_STEPPER)
    _check_choice("options.stepper", stepper, STEPPERS)
