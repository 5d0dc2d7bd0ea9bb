"""A hand-checkable environment and chunk policy for the chunk-rollout tests."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from vla_rl.envs.base import BatchedEnv, StepResult
from vla_rl.policies.chunk_policy import ChunkEvaluation, ChunkPolicy, ChunkStep


class TwoWorldEnv(BatchedEnv):
    """proprio = steps taken in the episode; reward 1 per step. World 0's episodes hit a time
    limit after 3 steps (truncated, failure); world 1's succeed after 2 steps (terminated)."""

    LENGTHS = (3, 2)

    def __init__(self) -> None:
        self.num_envs = 2
        self.device = torch.device("cpu")
        self.observation_space = gym.spaces.Dict({"proprio": gym.spaces.Box(-np.inf, np.inf, (1,))})
        self.action_space = gym.spaces.Box(-1.0, 1.0, (1,))
        self.max_episode_steps = 3
        self.control_hz = 10.0
        self.count = torch.zeros(2)
        self.actions: list[torch.Tensor] = []
        self.reset_seeds: list = []
        self.image_skips: list[int] = []
        """Indices (into ``actions``) of the steps whose images the caller said it would not read."""

    def skip_images_next_step(self) -> None:
        self.image_skips.append(len(self.actions))

    def _obs(self) -> dict:
        return {"proprio": self.count.clone().unsqueeze(-1), "instruction": ["a", "b"]}

    def reset(self, seed=None, env_ids=None):
        self.reset_seeds.append(seed)
        self.count.zero_()
        return self._obs(), {}

    def step(self, action: torch.Tensor) -> StepResult:
        self.actions.append(action.clone())
        self.count += 1
        ended = self.count >= torch.tensor(self.LENGTHS, dtype=torch.float32)
        final_obs = self._obs()
        self.count[ended] = 0
        success = torch.tensor([False, True]) & ended
        info = {
            "success": success,
            "final_obs": final_obs,
            "episode": {
                "return": final_obs["proprio"][:, 0].clone(),
                "length": final_obs["proprio"][:, 0].long(),
                "success": success,
                "success_once": success,
            },
        }
        return StepResult(
            obs=self._obs(),
            reward=torch.ones(2),
            terminated=torch.tensor([False, True]) & ended,
            truncated=torch.tensor([True, False]) & ended,
            info=info,
        )


class ConstantChunkPolicy(ChunkPolicy):
    """Chunks of 0.5; log-prob = -proprio; value = 10 * proprio; sample_info echoes proprio."""

    def __init__(self, chunk_len: int = 2) -> None:
        super().__init__()
        self.chunk_len, self.action_dim = chunk_len, 1
        self.weight = torch.nn.Parameter(torch.zeros(()))

    @classmethod
    def build(cls, **kwargs):
        return cls()

    def sample(self, obs, *, temperature=1.0, deterministic=False, log_prob_level="chunk", with_value=False):
        proprio = obs["proprio"][:, 0].float()
        return ChunkStep(
            actions=torch.full((len(proprio), self.chunk_len, 1), 0.5),
            log_prob=-proprio,
            value=10.0 * proprio if with_value else None,
            sample_info={"proprio": proprio.clone()},
        )

    def evaluate(self, obs, sample_info, *, temperature=1.0, log_prob_level="chunk", with_value=False):
        proprio = sample_info["proprio"]
        return ChunkEvaluation(
            -proprio + self.weight, torch.zeros_like(proprio), 10.0 * proprio if with_value else None
        )

    def sft_loss(self, obs, action_chunk, chunk_mask):
        raise NotImplementedError

    def save_pretrained(self, directory):
        raise NotImplementedError

    @classmethod
    def from_pretrained(cls, directory):
        raise NotImplementedError


class LosesWorldZeroAtThirdStep(TwoWorldEnv):
    """World 0's third step never runs (its env worker died): a fresh episode, marked lost, no
    episode statistics for it (as a replaced worker's stage returns)."""

    def step(self, action: torch.Tensor):
        result = super().step(action)
        lost = len(self.actions) == 3
        result.info["lost"] = torch.tensor([lost, False])
        if lost:
            self.count[0] = 0
            result.obs["proprio"][0] = 0.0
            result.reward[0], result.truncated[0], result.terminated[0] = 0.0, True, False
            result.info["episode"]["success"][0] = False
        return result
