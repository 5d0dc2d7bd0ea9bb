"""Residual RL on the robot: the frozen SFT policy runs in the actor, the learner's SAC actor corrects
it (``frozen_policy=residual`` in ``learner.overrides``).

The actor does what ``ResidualActionEnv`` does in simulation, one world at a time: the frozen
policy plans a chunk from the robot's observation every ``execute_steps`` control periods; the
coming period's frozen action is the observation key ``base_action`` that the SAC actor and the
critics read; the robot is sent ``clip(base + residual_scale * residual, -1, 1)``; a takeover's
action is stored as the residual that would have produced it (``residual_label``), which is exact
while the person stays within ``residual_scale`` of the frozen action.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from vla_rl.real_world.policy_runner import PolicyObservation, deterministic_chunk

from vla_rl.policies.chunk_policy import ChunkPolicy
from vla_rl.training.off_policy.frozen_policy_env import (
    corrected_action,
    load_frozen_policy,
    residual_label,
)


class FrozenPlanner:
    """The frozen policy's plans for one robot and the conversions between residual and action."""

    def __init__(self, policy: ChunkPolicy, residual_scale: float, execute_steps: int) -> None:
        self.policy, self.residual_scale = policy, residual_scale
        self.execute_steps = min(execute_steps, policy.chunk_len) if execute_steps > 0 else policy.chunk_len
        """Frozen actions executed (control periods) before the next plan."""
        self.plan: np.ndarray | None = None
        """The current chunk [chunk_len, A]."""
        self.cursor = self.execute_steps
        """Index in ``plan`` of the coming period's action (``execute_steps``: plan again)."""
        self.plans = 0
        """Chunks planned so far."""

    def reset(self) -> None:
        """A new episode: the next period plans from its observation."""
        self.plan, self.cursor = None, self.execute_steps

    def base_action(self, observation: PolicyObservation) -> np.ndarray:
        """The frozen action [A] for the coming period; plans from ``observation`` when the current plan
        is used up. Calling it again in the same period changes nothing."""
        if self.plan is None or self.cursor >= self.execute_steps:
            self.plan, self.cursor = deterministic_chunk(self.policy, observation), 0
            self.plans += 1
        return self.plan[self.cursor]

    def advance(self) -> None:
        """One control period has passed."""
        self.cursor += 1

    def executed(self, base: np.ndarray, residual: np.ndarray) -> np.ndarray:
        """The action sent for ``residual`` on top of ``base`` (``corrected_action``)."""
        out = corrected_action(torch.from_numpy(base), torch.from_numpy(residual), self.residual_scale)
        return out.numpy().astype(np.float32)

    def label(self, base: np.ndarray, action: np.ndarray) -> np.ndarray:
        """The residual a takeover's ``action`` stands for (``residual_label``)."""
        out = residual_label(torch.from_numpy(base), torch.from_numpy(action), self.residual_scale)
        return out.numpy().astype(np.float32)


def frozen_planner(off_cfg: Any) -> FrozenPlanner | None:  # noqa: ANN401 - OffPolicyConfig
    """The planner of the learner's ``frozen_policy`` (None unless its mode is ``residual``), on the CPU."""
    frozen = off_cfg.frozen_policy
    if frozen.mode != "residual":
        return None
    policy = load_frozen_policy(frozen, "cpu")
    assert policy is not None  # mode residual
    return FrozenPlanner(policy, frozen.residual_scale, frozen.execute_steps)
