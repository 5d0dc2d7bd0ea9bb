"""Validation of an ``EnvConfig`` for the MuJoCo backend, with messages naming the allowed values."""

from __future__ import annotations

from vla_rl.robots.controllers import CONTROLLERS
from vla_rl.sims.mujoco.randomization import SPLITS
from vla_rl.sims.mujoco.steppers import DEFAULT_STEPPER, STEPPERS
from vla_rl.sims.tasks.registry import TASKS

from vla_rl.config.structured import check_values
from vla_rl.envs.config import ENV_CHECKS, EnvConfig

CAMERAS = ("front", "top", "wrist")
IMAGE_WIDTH_OPTION = "image_width"
"""``env.options.image_width``: the cameras' width in pixels (their height is ``env.image_size``);
unset, the images are square. MuJoCo keeps the vertical field of view, so a wider image shows more
at the sides, as a real 4:3 or 16:9 camera does, and its square centre is the square image
(``robot.sim_image_width`` uses it to rehearse a real camera and its crop)."""


def image_hw(cfg: EnvConfig) -> tuple[int, int]:
    """(height, width) of the rendered images."""
    return cfg.image_size, int(cfg.options.get(IMAGE_WIDTH_OPTION, cfg.image_size))


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
    check_values(cfg, ENV_CHECKS, "env")  # sizes, rates and a physics step within a control period
    stepper = cfg.options.get("stepper", DEFAULT_STEPPER)
    _check_choice("options.stepper", stepper, STEPPERS)
    width = cfg.options.get(IMAGE_WIDTH_OPTION, cfg.image_size)
    if isinstance(width, bool) or not isinstance(width, int) or width < 1:
        raise ValueError(f"options.{IMAGE_WIDTH_OPTION} must be a whole number of pixels >= 1, got {width!r}")
