"""What ends an episode of the online actor and gives its sparse reward (``success.kind``); the
classifier also ends ``vla-rl deploy``'s episodes.

Each source judges the observation that follows an action (a ``Judgement``): success (reward 1, the
episode terminates), ended (no reward; the episode is truncated: the simulator's time limit, or a
person's failure label) or neither. Sources:

* ``SimSuccess``: the simulated robot's success flag of that period (rehearsals only).
* ``ClassifierSuccess``: the learned success model of ``vla-rl reward-train`` (loaded by
  ``vla_rl.rewards.learned.load_learned_reward_model``) on the robot's camera images; success once
  its success probability reaches ``threshold`` on ``consecutive_steps`` periods in a row. On a
  simulated robot it also reports the simulator's flag beside its own judgement (not used by it).
* ``KeyboardSuccess``: a person types ``s`` (success) or ``f`` (failure) and Enter.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
import torch
from vla_rl.real_world.console_input import ConsoleLines
from vla_rl.real_world.deploy_config import SuccessSection
from vla_rl.real_world.robot import RobotError, RobotObservation
from vla_rl.real_world.sim_control import SimControl


@dataclass(frozen=True)
class Judgement:
    success: bool = False
    """The task is done: reward 1, the episode terminates."""
    ended: str = ""
    """Why the episode ends without success (it is truncated: its last state is bootstrapped):
    ``time_limit`` (the simulator's) or ``failure`` (a person's label); empty: it goes on."""
    probability: float | None = None
    """The classifier's success probability, where one was computed."""
    sim_success: bool | None = None
    """The simulator's own success flag of the period, where a simulated robot reported it (the ground
    truth beside a classifier in rehearsals); None otherwise."""


class SuccessSource(ABC):
    @abstractmethod
    def judge(self, observation: RobotObservation, period_s: float) -> Judgement:
        """Judge the observation a step led to."""

    def reset(self) -> None:  # noqa: B027 - optional hook
        """A new episode starts."""


class SimSuccess(SuccessSource):
    """The simulated robot's status of the observation's period."""

    def __init__(self, sim: SimControl) -> None:
        self.sim = sim

    def judge(self, observation: RobotObservation, period_s: float) -> Judgement:
        status = self.sim.status_at(observation.joint_state_stamp_s, period_s)
        if status is None:
            return Judgement()
        success = bool(status.success)
        return Judgement(success=success, ended="time_limit" if status.done else "", sim_success=success)


class ClassifierSuccess(SuccessSource):
    """A learned success model on the robot's images (see the module docstring). With ``sim`` (a
    simulated robot's handle) each judgement also carries the simulator's own flag, which plays no
    part in the decision."""

    def __init__(
        self,
        path: str,
        threshold: float,
        consecutive_steps: int = 1,
        instruction: str = "",
        sim: SimControl | None = None,
    ) -> None:
        from vla_rl.rewards.learned import load_learned_reward_model

        self.model = load_learned_reward_model(path, score="success")
        self.cameras = list(self.model.config.cameras)
        self.threshold, self.consecutive_steps = threshold, consecutive_steps
        self.instruction = instruction
        self.sim = sim
        self.streak = 0

    def reset(self) -> None:
        self.streak = 0

    def probability(self, observation: RobotObservation) -> float:
        missing = [camera for camera in self.cameras if camera not in observation.images]
        if missing:
            raise RobotError(
                f"the success classifier reads cameras {missing}, which the robot does not report"
            )
        views = [torch.from_numpy(np.ascontiguousarray(observation.images[c])) for c in self.cameras]
        frames = (views[0] if len(views) == 1 else torch.stack(views))[None]
        return float(self.model.success_probability(frames, [self.instruction])[0])

    def judge(self, observation: RobotObservation, period_s: float) -> Judgement:
        probability = self.probability(observation)
        self.streak = self.streak + 1 if probability >= self.threshold else 0
        status = None if self.sim is None else self.sim.status_at(observation.joint_state_stamp_s, period_s)
        return Judgement(
            success=self.streak >= self.consecutive_steps,
            probability=probability,
            sim_success=None if status is None else bool(status.success),
        )


class KeyboardSuccess(SuccessSource):
    """``s`` + Enter: success; ``f`` + Enter: failure (ended); anything else is ignored."""

    def __init__(self, console: ConsoleLines) -> None:
        self.console = console

    def reset(self) -> None:
        self.console.drain()

    def judge(self, observation: RobotObservation, period_s: float) -> Judgement:
        line = self.console.poll()
        return Judgement(success=line == "s", ended="failure" if line == "f" else "")


def success_source(
    settings: SuccessSection, sim: SimControl | None, console: ConsoleLines | None = None
) -> SuccessSource:
    """The source ``settings.kind`` names (validated by the config's checks)."""
    if settings.kind == "sim":
        if sim is None:
            raise RobotError("success.kind=sim needs the simulated robot's control handle")
        return SimSuccess(sim)
    if settings.kind == "classifier":
        return ClassifierSuccess(
            settings.classifier_path,
            settings.threshold,
            settings.consecutive_steps,
            settings.instruction,
            sim,
        )
    return KeyboardSuccess(console or ConsoleLines())
