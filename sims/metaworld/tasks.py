"""MetaWorld task names (v3), the MT10/MT50 benchmark task lists and one instruction per task.

The names follow MetaWorld 3.x (``metaworld.env_dict.ALL_V3_ENVIRONMENTS``, whose order is the MT50
order); they are repeated here so that a config can be checked without importing the simulator.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from vla_rl.envs.base import Observation

INSTRUCTIONS: dict[str, str] = {
    "assembly-v3": "pick up the ring and place it over the peg",
    "basketball-v3": "pick up the ball and dunk it into the basket",
    "bin-picking-v3": "pick up the puck and place it into the other bin",
    "box-close-v3": "pick up the lid and put it on the box",
    "button-press-topdown-v3": "press the button from the top",
    "button-press-topdown-wall-v3": "press the button from the top behind the wall",
    "button-press-v3": "press the button from the front",
    "button-press-wall-v3": "press the button from the front behind the wall",
    "coffee-button-v3": "press the button on the coffee machine",
    "coffee-pull-v3": "pull the mug away from the coffee machine",
    "coffee-push-v3": "push the mug under the coffee machine",
    "dial-turn-v3": "turn the dial",
    "disassemble-v3": "pick the ring up off the peg",
    "door-close-v3": "close the door",
    "door-lock-v3": "turn the door lock to lock the door",
    "door-open-v3": "open the door",
    "door-unlock-v3": "turn the door lock to unlock the door",
    "hand-insert-v3": "insert the gripper into the hole",
    "drawer-close-v3": "push the drawer closed",
    "drawer-open-v3": "pull the drawer open",
    "faucet-open-v3": "rotate the faucet handle to open the faucet",
    "faucet-close-v3": "rotate the faucet handle to close the faucet",
    "hammer-v3": "pick up the hammer and hammer the nail into the wall",
    "handle-press-side-v3": "press the handle down from the side",
    "handle-press-v3": "press the handle down",
    "handle-pull-side-v3": "pull the handle up from the side",
    "handle-pull-v3": "pull the handle up",
    "lever-pull-v3": "pull the lever up",
    "pick-place-wall-v3": "pick up the puck and place it at the red goal behind the wall",
    "pick-out-of-hole-v3": "pick the puck out of the hole",
    "pick-place-v3": "pick up the puck and place it at the red goal",
    "plate-slide-v3": "slide the plate into the goal",
    "plate-slide-side-v3": "slide the plate sideways into the goal",
    "plate-slide-back-v3": "slide the plate back out of the goal",
    "plate-slide-back-side-v3": "slide the plate sideways back out of the goal",
    "peg-insert-side-v3": "pick up the peg and insert it into the hole from the side",
    "peg-unplug-side-v3": "pull the peg out of the hole sideways",
    "soccer-v3": "push the ball into the goal",
    "stick-push-v3": "grasp the stick and push the box with it",
    "stick-pull-v3": "grasp the stick and pull the box with it",
    "push-v3": "push the puck to the red goal",
    "push-wall-v3": "push the puck around the wall to the red goal",
    "push-back-v3": "push the puck back to the goal",
    "reach-v3": "reach the red goal position",
    "reach-wall-v3": "reach the red goal position behind the wall",
    "shelf-place-v3": "pick up the puck and place it on the shelf",
    "sweep-into-v3": "sweep the puck into the hole",
    "sweep-v3": "sweep the puck off the table",
    "window-open-v3": "slide the window open",
    "window-close-v3": "slide the window closed",
}
"""Language instruction of every MetaWorld v3 task, in MetaWorld's (MT50) order."""

MT50_TASKS: tuple[str, ...] = tuple(INSTRUCTIONS)
MT10_TASKS: tuple[str, ...] = (
    "reach-v3",
    "push-v3",
    "pick-place-v3",
    "door-open-v3",
    "drawer-open-v3",
    "drawer-close-v3",
    "button-press-topdown-v3",
    "peg-insert-side-v3",
    "window-open-v3",
    "window-close-v3",
)
BENCHMARKS: dict[str, tuple[str, ...]] = {"MT10": MT10_TASKS, "MT50": MT50_TASKS}


def benchmark_tasks(task: str) -> tuple[str, ...]:
    """The tasks that ``EnvConfig.task`` names: one v3 task (MT1), the MT10/MT50 task list, or
    several v3 tasks joined by ``+`` (a subset, e.g. ``"reach-v3+drawer-close-v3"``).

    Raises ``ValueError`` for any other name.
    """
    if task in BENCHMARKS:
        return BENCHMARKS[task]
    names = tuple(task.split("+"))
    unknown = [name for name in names if name not in INSTRUCTIONS]
    if not unknown and len(set(names)) == len(names):
        return names
    raise ValueError(
        f"config key 'env.task': {task!r} is neither a MetaWorld v3 task (e.g. 'reach-v3'), tasks "
        f"joined by '+' (each once), nor one of {sorted(BENCHMARKS)}"
    )


TASK_LAYOUTS = ("interleaved", "blocks")


def world_tasks(task: str, num_envs: int, layout: str = "interleaved") -> list[str]:
    """Task of each world among the ``K`` tasks ``task`` names.

    ``interleaved``: world ``i`` runs task ``i mod K``. ``blocks``: consecutive worlds share a task,
    world ``i`` runs task ``i * K // num_envs``, so that groups of consecutive worlds (GRPO's groups,
    which share a reset seed) hold one task when the group size divides ``num_envs / K``.
    """
    tasks = benchmark_tasks(task)
    if layout == "interleaved":
        return [tasks[i % len(tasks)] for i in range(num_envs)]
    if layout == "blocks":
        return [tasks[i * len(tasks) // num_envs] for i in range(num_envs)]
    raise ValueError(f"config key 'env.options.task_layout' must be one of {TASK_LAYOUTS}, got {layout!r}")


def task_onehot(task: str, instructions: Sequence[str]) -> torch.Tensor:
    """float32 [N, K]: each instruction's task as a one-hot vector over the ``K`` tasks ``task``
    names, in their benchmark order (MetaWorld's ``use_one_hot=True`` vector; every task has its
    own instruction, so the instruction identifies it)."""
    tasks = benchmark_tasks(task)
    index = {INSTRUCTIONS[name]: i for i, name in enumerate(tasks)}
    unknown = sorted(set(instructions) - set(index))
    if unknown:
        raise ValueError(f"instructions {unknown} are not those of the tasks of env.task {task!r}")
    rows = torch.tensor([index[text] for text in instructions], dtype=torch.int64)
    return torch.nn.functional.one_hot(rows, len(tasks)).float()


def task_onehot_transform(task: str) -> Callable[[Observation], Observation]:
    """For recorded data: adds ``obs["task_onehot"]`` from ``obs["instruction"]``, as the backend does."""

    def add_task_onehot(obs: Observation) -> Observation:
        obs["task_onehot"] = task_onehot(task, obs["instruction"])
        return obs

    return add_task_onehot
