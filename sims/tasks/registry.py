"""Task name -> task class."""

from __future__ import annotations

from collections.abc import Callable

from vla_rl.sims.tasks.base import Task
from vla_rl.sims.tasks.lift import LiftTask
from vla_rl.sims.tasks.pick_place import PickPlaceTask
from vla_rl.sims.tasks.push import PushTask
from vla_rl.sims.tasks.reach import ReachTask

from vla_rl.envs.base import Observation

TASKS: dict[str, type[Task]] = {
    "reach": ReachTask,
    "push": PushTask,
    "lift": LiftTask,
    "pick_place": PickPlaceTask,
}


def default_policy_hidden_sizes(name: str) -> list[int] | None:
    """The MLP head widths task ``name`` declares; None where it declares none (or is another
    backend's task)."""
    sizes = TASKS[name].default_policy_hidden_sizes if name in TASKS else None
    return list(sizes) if sizes is not None else None


def make_task(name: str) -> Task:
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; allowed: {', '.join(sorted(TASKS))}")
    return TASKS[name]()


def object_state_transform(name: str) -> Callable[[Observation], Observation] | None:
    """For recorded data: a function adding ``obs["objects"]`` from ``obs["privileged"]`` the way the
    simulator computes it for task ``name``; None for unknown tasks or tasks without objects."""
    if name not in TASKS or not TASKS[name].object_fields:
        return None
    task = TASKS[name]()

    def add_objects(obs: Observation) -> Observation:
        if "privileged" in obs:
            obs["objects"] = task.object_state(obs["privileged"])
        return obs

    return add_objects
