"""MetaWorld's scripted experts (``metaworld.policies``) acting in a batched MetaWorld env.

Each task has a hand-written policy in MetaWorld (``reach-v3`` -> ``SawyerReachV3Policy``) that
reads the full 39-D observation (goal included), i.e. ``obs["privileged"]`` of this backend.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from vla_rl.envs.extras import import_optional

POLICY_NAME_EXCEPTIONS = {"peg-insert-side-v3": "SawyerPegInsertionSideV3Policy"}
"""Tasks whose policy class name does not follow from the task name."""


def policy_class_name(task: str) -> str:
    """``"button-press-topdown-v3"`` -> ``"SawyerButtonPressTopdownV3Policy"``."""
    if task in POLICY_NAME_EXCEPTIONS:
        return POLICY_NAME_EXCEPTIONS[task]
    words = task.removesuffix("-v3").split("-")
    return "Sawyer" + "".join(word.capitalize() for word in words) + "V3Policy"


def expert_policy(task: str) -> Any:
    """An instance of MetaWorld's scripted policy for ``task`` (``get_action(obs_39d)``)."""
    policies = import_optional("metaworld.policies", extra="metaworld", backend="metaworld")
    return getattr(policies, policy_class_name(task))()


class MetaWorldExpert:
    """Per-world scripted experts; ``act`` mirrors ``vla_rl.sims.tasks.scripted.ScriptedExpert.act``.

    ``noise_std`` adds Gaussian noise (normalised action units) to the xyz part of the executed
    action, for more varied demonstrations; the clean action is returned alongside.
    """

    def __init__(self, tasks: Sequence[str], noise_std: float = 0.0, seed: int = 0) -> None:
        if noise_std < 0:
            raise ValueError(f"noise_std must not be negative, got {noise_std}")
        by_task = {task: expert_policy(task) for task in dict.fromkeys(tasks)}
        self.policies = [by_task[task] for task in tasks]
        self.noise_std = noise_std
        self.rng = np.random.default_rng(seed)

    def act(self, obs: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """(executed action, clean expert action), both float32 [N, 4] in [-1, 1]."""
        state = obs["privileged"].detach().cpu().numpy().astype(np.float64)
        with warnings.catch_warnings():
            # MetaWorld's policies warn whenever a proportional gain saturates; the env clips anyway.
            warnings.simplefilter("ignore", UserWarning)
            clean = np.stack(
                [policy.get_action(row) for policy, row in zip(self.policies, state, strict=True)]
            )
        clean = np.clip(clean, -1.0, 1.0).astype(np.float32)
        executed = clean.copy()
        if self.noise_std > 0:
            executed[:, :3] += self.rng.normal(0.0, self.noise_std, size=(len(executed), 3))
            executed = np.clip(executed, -1.0, 1.0)
        return torch.from_numpy(executed), torch.from_numpy(clean)
