"""The physics steppers by name (``env.options.stepper``): ``stepping``'s two and ``batch_stepper``'s
(importable with any MuJoCo; building a ``BatchStepper`` needs mujoco >= 4.0)."""

from __future__ import annotations

from vla_rl.sims.mujoco.batch_stepper import BatchStepper
from vla_rl.sims.mujoco.stepping import DEFAULT_STEPPER, PhysicsStepper, RolloutStepper, ThreadedStepper

__all__ = ["DEFAULT_STEPPER", "STEPPERS"]

STEPPERS: dict[str, type[PhysicsStepper]] = {
    "rollout": RolloutStepper,
    "threads": ThreadedStepper,
    "batch": BatchStepper,
}
