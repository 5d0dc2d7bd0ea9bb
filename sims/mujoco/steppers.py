"""The physics steppers by name (``env.options.stepper``): ``stepping``'s two and ``batch_stepper``'s."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import mujoco
from vla_rl.sims.mujoco.stepping import DEFAULT_STEPPER, PhysicsStepper, RolloutStepper, ThreadedStepper

__all__ = ["DEFAULT_STEPPER", "STEPPERS"]


def _batch_stepper(models: Sequence[mujoco.MjModel], substeps: int, num_threads: int) -> PhysicsStepper:
    from vla_rl.sims.mujoco.batch_stepper import BatchStepper  # needs mujoco >= 4.0

    return BatchStepper(models, substeps, num_threads)


STEPPERS: dict[str, Callable[[Sequence[mujoco.MjModel], int, int], PhysicsStepper]] = {
    "rollout": RolloutStepper,
    "threads": ThreadedStepper,
    "batch": _batch_stepper,
}
