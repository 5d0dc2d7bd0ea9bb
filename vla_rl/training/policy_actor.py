"""A trained ``vla-rl train`` policy acting in place of the scripted expert of ``vla-rl collect``.

Recording a policy's own rollouts gives what a reward model learns most from after a first round
of RL: the states that policy actually reaches, including those where it fools the reward model.
Each episode is labelled by the environment's success flag, as a person labelling rollouts would.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import gymnasium as gym
import torch

from vla_rl.envs.base import BatchedEnv


class CheckpointActor:
    """Acts with the policy of a training checkpoint; ``act`` mirrors ``ScriptedExpert.act``."""

    def __init__(
        self,
        checkpoint: str | Path,
        observation_space: gym.spaces.Dict,
        action_space: gym.spaces.Box,
        deterministic: bool,
        seed: int = 0,
    ) -> None:
        from vla_rl.config.load import load_train_config_file
        from vla_rl.policies import build_policy
        from vla_rl.training.checkpoint import CONFIG_FILENAME, load_checkpoint, resolve_checkpoint_dir

        directory = resolve_checkpoint_dir(str(checkpoint))
        cfg = load_train_config_file(directory / CONFIG_FILENAME)
        self.policy = build_policy(cfg.policy, observation_space, action_space)
        self.policy.load_state_dict(load_checkpoint(directory).policy_state)
        self.policy.eval()
        self.deterministic = deterministic
        torch.manual_seed(seed)

    @torch.inference_mode()
    def act(self, obs: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """(executed action, the same action): a policy has no separate clean label."""
        action = self.policy.act(obs, deterministic=self.deterministic).action.clamp(-1.0, 1.0)
        return action, action


def checkpoint_actor_factory(
    checkpoint: str | Path, deterministic: bool, seed: int = 0
) -> Callable[[BatchedEnv], CheckpointActor]:
    """``make_actor`` for ``vla_rl.data.collect.collect_demonstrations``: the checkpoint's policy
    built for the env's observation and action spaces."""

    def make_actor(env: BatchedEnv) -> CheckpointActor:
        return CheckpointActor(checkpoint, env.observation_space, env.action_space, deterministic, seed)

    return make_actor
