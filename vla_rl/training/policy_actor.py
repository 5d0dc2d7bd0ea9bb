"""A trained ``vla-rl train`` policy acting in place of the scripted expert of ``vla-rl collect``.

Recording a policy's own rollouts gives what a reward model learns most from after a first round
of RL: the states that policy actually reaches, including those where it fools the reward model.
Each episode is labelled by the environment's success flag, as a person labelling rollouts would.
"""

from __future__ import annotations

from pathlib import Path

import torch

from vla_rl.envs.base import BatchedEnv


class CheckpointActor:
    """Acts in ``env`` with the policy of a training checkpoint (built for the env's spaces); ``act``
    mirrors ``ScriptedExpert.act``. ``functools.partial`` of it with all but ``env`` is the
    ``make_actor`` of ``vla_rl.data.collect.collect_demonstrations``."""

    def __init__(self, env: BatchedEnv, checkpoint: str | Path, deterministic: bool, seed: int = 0) -> None:
        from vla_rl.config.load import load_train_config_file
        from vla_rl.policies import build_policy
        from vla_rl.training.checkpoint import CONFIG_FILENAME, load_checkpoint, resolve_checkpoint_dir

        directory = resolve_checkpoint_dir(str(checkpoint))
        cfg = load_train_config_file(directory / CONFIG_FILENAME)
        self.policy = build_policy(cfg.policy, env.observation_space, env.action_space)
        self.policy.load_state_dict(load_checkpoint(directory).policy_state)
        self.policy.eval()
        self.deterministic = deterministic
        torch.manual_seed(seed)

    @torch.inference_mode()
    def act(self, obs: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """(executed action, the same action): a policy has no separate clean label."""
        action = self.policy.act(obs, deterministic=self.deterministic).action.clamp(-1.0, 1.0)
        return action, action
