"""Tiny chunk policies and toy demonstrations for the SFT tests (no VLA family needed).

* ``sft_tiny_policies:ChunkRegressor``: a Gaussian MLP regressing the whole chunk from ``proprio`` (and
  ``privileged`` when configured); the SFT loss is the masked mean squared error on inputs jittered
  with global-RNG noise (so exact resume needs the RNG state restored).
* ``ScriptedChunkPolicy``: the scripted expert's action repeated over the chunk (an upper bound).
* ``ZeroChunkPolicy``: always zero actions (a lower bound).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from torch import nn
from vla_rl.sims.tasks.scripted import scripted_action

from vla_rl.data.episode import Episode
from vla_rl.envs.base import Observation
from vla_rl.policies.chunk_policy import (
    ChunkEvaluation,
    ChunkPolicy,
    ChunkStep,
    SFTOutput,
    check_log_prob_level,
)

CONFIG_FILE = "regressor.json"
WEIGHTS_FILE = "regressor.safetensors"


def _reduce(log_prob: torch.Tensor, level: str) -> torch.Tensor:
    """[N, L, A] per-value log-probs -> the requested level."""
    if level == "action":
        return log_prob.sum(-1)
    return log_prob.sum((-1, -2))


class ChunkRegressor(ChunkPolicy):
    registry_name = "sft_tiny_policies:ChunkRegressor"
    log_prob_levels = ("action", "chunk")

    def __init__(
        self, chunk_len: int, action_dim: int, obs_dims: dict[str, int], hidden_dim: int = 32
    ) -> None:
        super().__init__()
        self.chunk_len, self.action_dim, self.obs_dims, self.hidden_dim = (
            chunk_len,
            action_dim,
            obs_dims,
            hidden_dim,
        )
        self.net = nn.Sequential(
            nn.Linear(sum(obs_dims.values()), hidden_dim),
            nn.Tanh(),
            nn.Linear(hidden_dim, chunk_len * action_dim),
        )
        self.log_std = nn.Parameter(torch.full((action_dim,), -1.0))
        self.value_head = nn.Linear(hidden_dim, 1)

    @classmethod
    def build(cls, **kwargs: object) -> ChunkRegressor:
        return cls(**kwargs)  # type: ignore[arg-type]

    def _mean(self, obs: Observation, input_noise_std: float = 0.0) -> torch.Tensor:
        inputs = torch.cat([obs[key].float() for key in self.obs_dims], dim=-1)
        if input_noise_std > 0:
            inputs = inputs + input_noise_std * torch.randn_like(inputs)
        return self.net(inputs).view(-1, self.chunk_len, self.action_dim)

    def _log_prob(self, mean: torch.Tensor, actions: torch.Tensor, temperature: float) -> torch.Tensor:
        std = self.log_std.exp() * temperature
        return -0.5 * ((actions - mean) / std).square() - std.log() - 0.5 * math.log(2 * math.pi)

    def sample(
        self,
        obs: Observation,
        *,
        temperature: float = 1.0,
        deterministic: bool = False,
        log_prob_level: str = "chunk",
        with_value: bool = False,
    ) -> ChunkStep:
        check_log_prob_level(self, log_prob_level)
        mean = self._mean(obs)
        noise = torch.zeros_like(mean) if deterministic else torch.randn_like(mean)
        actions = mean + noise * self.log_std.exp() * temperature
        log_prob = _reduce(self._log_prob(mean, actions, temperature), log_prob_level)
        return ChunkStep(actions=actions, log_prob=log_prob, sample_info={"actions": actions.detach()})

    def evaluate(
        self,
        obs: Observation,
        sample_info: dict[str, torch.Tensor],
        *,
        temperature: float = 1.0,
        log_prob_level: str = "chunk",
        with_value: bool = False,
    ) -> ChunkEvaluation:
        log_prob = self._log_prob(self._mean(obs), sample_info["actions"], temperature)
        return ChunkEvaluation(log_prob=_reduce(log_prob, log_prob_level), entropy=None)

    def sft_loss(self, obs: Observation, action_chunk: torch.Tensor, chunk_mask: torch.Tensor) -> SFTOutput:
        error = (self._mean(obs, input_noise_std=0.01) - action_chunk).square().mean(-1)
        mask = chunk_mask.float()
        loss = (error * mask).sum() / mask.sum().clamp_min(1.0)
        return SFTOutput(loss=loss, metrics={"valid_fraction": float(mask.mean())})

    def save_pretrained(self, directory: str | Path) -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        config = {
            "chunk_len": self.chunk_len,
            "action_dim": self.action_dim,
            "obs_dims": self.obs_dims,
            "hidden_dim": self.hidden_dim,
        }
        (directory / CONFIG_FILE).write_text(json.dumps(config))
        save_file(
            {k: v.detach().contiguous() for k, v in self.state_dict().items()}, str(directory / WEIGHTS_FILE)
        )

    @classmethod
    def from_pretrained(cls, directory: str | Path) -> ChunkRegressor:
        directory = Path(directory)
        policy = cls(**json.loads((directory / CONFIG_FILE).read_text()))
        policy.load_state_dict(load_file(str(directory / WEIGHTS_FILE)))
        return policy


class _FixedChunkPolicy(ChunkPolicy):
    """Deterministic chunk from a function of the observation; no parameters, no training."""

    def __init__(self, chunk_len: int = 1, action_dim: int = 4) -> None:
        super().__init__()
        self.chunk_len, self.action_dim = chunk_len, action_dim
        self.calls: list[int] = []
        """Batch size of every ``sample`` call."""

    def action(self, obs: Observation) -> torch.Tensor:
        raise NotImplementedError

    @classmethod
    def build(cls, **kwargs: object) -> _FixedChunkPolicy:
        return cls(**kwargs)  # type: ignore[arg-type]

    def sample(self, obs: Observation, **kwargs: object) -> ChunkStep:
        action = self.action(obs)
        self.calls.append(len(action))
        actions = action[:, None, :].expand(-1, self.chunk_len, -1).clone()
        return ChunkStep(actions=actions, log_prob=torch.zeros(len(actions)))

    def evaluate(
        self, obs: Observation, sample_info: dict[str, torch.Tensor], **kwargs: object
    ) -> ChunkEvaluation:
        raise NotImplementedError

    def sft_loss(self, obs: Observation, action_chunk: torch.Tensor, chunk_mask: torch.Tensor) -> SFTOutput:
        raise NotImplementedError

    def save_pretrained(self, directory: str | Path) -> None:
        raise NotImplementedError

    @classmethod
    def from_pretrained(cls, directory: str | Path) -> _FixedChunkPolicy:
        raise NotImplementedError


class ScriptedChunkPolicy(_FixedChunkPolicy):
    def __init__(self, task: str = "reach", chunk_len: int = 1) -> None:
        super().__init__(chunk_len=chunk_len)
        self.task = task

    def action(self, obs: Observation) -> torch.Tensor:
        return scripted_action(
            self.task, {k: v.cpu() if isinstance(v, torch.Tensor) else v for k, v in obs.items()}
        )


class ZeroChunkPolicy(_FixedChunkPolicy):
    def action(self, obs: Observation) -> torch.Tensor:
        return torch.zeros(len(obs["proprio"]), self.action_dim)


def toy_episodes(
    num_episodes: int, length: int = 6, proprio_dim: int = 3, seed: int = 0, action_dim: int = 2
) -> list[Episode]:
    """Episodes whose action is a fixed function of the proprio state, so a regressor can fit them."""
    rng = np.random.default_rng(seed)
    mixing = rng.normal(size=(proprio_dim, action_dim)).astype(np.float32) * 0.5
    episodes = []
    for index in range(num_episodes):
        proprio = rng.uniform(-1, 1, size=(length, proprio_dim)).astype(np.float32)
        episodes.append(
            Episode(
                images={"front": rng.integers(0, 255, size=(length, 8, 8, 3), dtype=np.uint8)},
                proprio=proprio,
                actions=np.tanh(proprio @ mixing).astype(np.float32),
                instruction=f"task {index % 2}",
                success=True,
            )
        )
    return episodes


class StatsRecordingRegressor(ChunkRegressor):
    """Records the action statistics the trainer hands over."""

    registry_name = "sft_tiny_policies:StatsRecordingRegressor"

    received: tuple[torch.Tensor, torch.Tensor] | None = None

    def set_action_statistics(self, low: torch.Tensor, high: torch.Tensor) -> None:
        self.received = (low, high)
