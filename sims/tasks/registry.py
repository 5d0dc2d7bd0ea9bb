"""Task name -> task class."""

from __future__ import annotations

from vla_rl.sims.tasks.base import Task
from vla_rl.sims.tasks.lift import LiftTask
from vla_rl.sims.tasks.pick_place import PickPlaceTask
from vla_rl.sims.tasks.push import PushTask
from vla_rl.sims.tasks.reach import ReachTask

TASKS: dict[str, type[Task]] = {
    "reach": ReachTask,
    "push": PushTask,
    "lift": LiftTask,
    "pick_place": PickPlaceTask,
}


def make_task(name: str) -> Task:
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; allowed: {', '.join(sorted(TASKS))}")
    return TASKS[name]()
