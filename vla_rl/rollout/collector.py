"""Steps a batched environment with a policy and fills a ``RolloutBuffer``."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch

from vla_rl.envs.base import BatchedEnv, Observation
from vla_rl.policies.base import ActorCriticPolicy
from vla_rl.rollout.buffer import RolloutBuffer


@dataclass
class RolloutStats:
    """Summary of one collected rollout. Episode means are NaN when no episode finished."""

    episodes: int
    """Episodes that finished during the rollout."""
    mean_return: float
    """Mean undiscounted return of the finished episodes."""
    mean_length: float
    """Mean length (control steps) of the finished episodes."""
    success_rate: float
    """Fraction of finished episodes successful at their last step."""
    success_once_rate: float
    """Fraction of finished episodes successful at any step."""
    env_steps: int
    """Transitions collected (``num_steps * num_envs``)."""
    rollout_time_s: float
    """Wall time of the whole collection."""
    sim_time_s: float
    """Part of it spent in ``env.step``."""
    policy_time_s: float
    """Part of it spent in policy inference (acting, truncation bootstrap, last value)."""

    @property
    def env_steps_per_s(self) -> float:
        return self.env_steps / self.rollout_time_s if self.rollout_time_s > 0 else math.nan


def select_rows(obs: Observation, rows: torch.Tensor) -> Observation:
    """The observations of the worlds ``rows`` (tensor keys indexed, lists picked)."""
    index = rows.tolist()
    return {
        key: value[rows] if isinstance(value, torch.Tensor) else [value[i] for i in index]
        for key, value in obs.items()
    }


class RolloutCollector:
    """Collects ``buffer.num_steps`` steps per world and returns the next observation.

    Truncated (time-limit) episodes are bootstrapped: the stored reward becomes
    ``r + gamma * V(final_obs)`` and the step is marked done, which equals continuing the
    return past the time limit with the critic's estimate.
    """

    def __init__(
        self, env: BatchedEnv, policy: ActorCriticPolicy, buffer: RolloutBuffer, gamma: float
    ) -> None:
        if buffer.num_envs != env.num_envs:
            raise ValueError(f"buffer holds {buffer.num_envs} worlds but the env has {env.num_envs}")
        self.env = env
        self.policy = policy
        self.buffer = buffer
        self.gamma = gamma

    def _to_buffer_device(self, obs: Observation) -> Observation:
        device = self.buffer.device
        return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in obs.items()}

    def collect(self, obs: Observation, update_normalizer: bool = True) -> tuple[Observation, RolloutStats]:
        """Fill the buffer starting from ``obs``; ``update_normalizer=False`` for evaluation."""
        buffer = self.buffer
        buffer.clear()
        returns: list[torch.Tensor] = []
        lengths: list[torch.Tensor] = []
        successes: list[torch.Tensor] = []
        successes_once: list[torch.Tensor] = []
        sim_time_s = 0.0
        policy_time_s = 0.0
        start = time.perf_counter()
        with torch.inference_mode():
            for _ in range(buffer.num_steps):
                tick = time.perf_counter()
                obs = self._to_buffer_device(obs)
                if update_normalizer:
                    self.policy.update_normalizer(obs)
                step = self.policy.act(obs)
                action = step.action.clamp(-1.0, 1.0).to(self.env.device)
                tock = time.perf_counter()
                result = self.env.step(action)
                sim_time_s += time.perf_counter() - tock

                tick_bootstrap = time.perf_counter()
                reward = result.reward.to(buffer.device, torch.float32)
                terminated = result.terminated.to(buffer.device)
                truncated = result.truncated.to(buffer.device)
                bootstrap = truncated & ~terminated
                if bootstrap.any():
                    rows = bootstrap.nonzero().squeeze(-1)
                    final_obs = select_rows(self._to_buffer_device(result.info["final_obs"]), rows)
                    reward = reward.clone()
                    reward[rows] += self.gamma * self.policy.get_value(final_obs).to(reward.dtype)
                done = terminated | truncated
                buffer.add(obs, step.action, step.log_prob, step.value, reward, done, step.mean, step.std)
                policy_time_s += (tock - tick) + (time.perf_counter() - tick_bootstrap)

                if "episode" in result.info and done.any():
                    episode = result.info["episode"]
                    ended = done.to(episode["return"].device)
                    returns.append(episode["return"][ended].float().cpu())
                    lengths.append(episode["length"][ended].float().cpu())
                    successes.append(episode["success"][ended].float().cpu())
                    successes_once.append(episode["success_once"][ended].float().cpu())
                obs = result.obs

            tick = time.perf_counter()
            obs = self._to_buffer_device(obs)
            buffer.last_value.copy_(self.policy.get_value(obs))
            policy_time_s += time.perf_counter() - tick
        rollout_time_s = time.perf_counter() - start

        def mean(chunks: list[torch.Tensor]) -> float:
            values = torch.cat(chunks) if chunks else torch.empty(0)
            return float(values.mean()) if values.numel() else math.nan

        stats = RolloutStats(
            episodes=int(sum(chunk.numel() for chunk in returns)),
            mean_return=mean(returns),
            mean_length=mean(lengths),
            success_rate=mean(successes),
            success_once_rate=mean(successes_once),
            env_steps=buffer.num_steps * buffer.num_envs,
            rollout_time_s=rollout_time_s,
            sim_time_s=sim_time_s,
            policy_time_s=policy_time_s,
        )
        return obs, stats
