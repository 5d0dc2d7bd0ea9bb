"""Steps a batched environment with a policy and fills a ``RolloutBuffer``."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch

from vla_rl.envs.base import BatchedEnv, Observation, StepResult
from vla_rl.envs.batching import obs_to_device, select_worlds
from vla_rl.envs.staged import StagedEnv, concat_observations
from vla_rl.envs.timeline import Timeline
from vla_rl.policies.base import ActorCriticPolicy, PolicyStep
from vla_rl.rewards.env_wrapper import MODEL_REWARD_KEY, resolve_model_rewards
from vla_rl.rollout.buffer import RolloutBuffer


@dataclass(kw_only=True)
class RolloutStats:
    """Summary of one collected rollout, of a state or a chunk policy. Episode means are NaN when no
    episode finished; the fields a collector does not measure are NaN or None (left out of the
    metrics)."""

    episodes: int
    """Episodes that finished during the rollout."""
    mean_return: float
    """Mean undiscounted return of the finished episodes."""
    mean_length: float = math.nan
    """Mean length (control steps) of the finished episodes."""
    success_rate: float
    """Fraction of finished episodes that ended in success."""
    success_once_rate: float = math.nan
    """Fraction of finished episodes successful at any step."""
    env_steps: int
    """Control steps collected over all worlds."""
    rollout_time_s: float
    """Wall time of the whole collection."""
    sim_time_s: float
    """Part of it spent in ``env.step``."""
    policy_time_s: float
    """Part of it spent in policy inference (acting, truncation bootstrap, last value)."""
    lost_steps: int | None = None
    """Transitions dropped because their env worker died before stepping them (state rollouts)."""
    decisions: int | None = None
    """Policy calls per world (chunk rollouts: each executes part of an action chunk)."""

    @property
    def env_steps_per_s(self) -> float:
        return self.env_steps / self.rollout_time_s if self.rollout_time_s > 0 else math.nan


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
        self.timeline: Timeline | None = None
        """Set to record the policy's span for each stage in pipelined collection."""

    def _to_buffer_device(self, obs: Observation) -> Observation:
        return obs_to_device(obs, self.buffer.device)

    def collect(self, obs: Observation, update_normalizer: bool = True) -> tuple[Observation, RolloutStats]:
        """Fill the buffer starting from ``obs``; ``update_normalizer=False`` for evaluation.

        A ``StagedEnv`` is stepped stage by stage (pipelined): each stage's physics runs in the
        background while the policy acts for the next stage.
        """
        buffer = self.buffer
        buffer.clear()
        self._pending_rewards: list = []
        tally = _EpisodeTally()
        start = time.perf_counter()
        with torch.inference_mode():
            if isinstance(self.env, StagedEnv) and self.env.num_stages > 1:
                obs = self._collect_pipelined(self.env, obs, update_normalizer, tally)
            else:
                obs = self._collect_in_step(obs, update_normalizer, tally)
            tick = time.perf_counter()
            resolve_model_rewards(self._pending_rewards, buffer.rewards)
            obs = self._to_buffer_device(obs)
            buffer.last_value.copy_(self.policy.get_value(obs))
            tally.policy_time_s += time.perf_counter() - tick
        buffer.step = buffer.num_steps
        return obs, tally.stats(buffer, time.perf_counter() - start)

    def _collect_in_step(
        self, obs: Observation, update_normalizer: bool, tally: _EpisodeTally
    ) -> Observation:
        """All worlds act, then all step, ``num_steps`` times."""
        for t in range(self.buffer.num_steps):
            tick = time.perf_counter()
            obs, step, action = self._act(obs, update_normalizer)
            tock = time.perf_counter()
            result = self.env.step(action)
            tick_record = time.perf_counter()
            tally.sim_time_s += tick_record - tock
            self._record(t, slice(None), obs, step, result, tally)
            tally.policy_time_s += (tock - tick) + (time.perf_counter() - tick_record)
            obs = result.obs
        return obs

    def _collect_pipelined(
        self, env: StagedEnv, obs: Observation, update_normalizer: bool, tally: _EpisodeTally
    ) -> Observation:
        """Stage s acts and starts stepping, then stage s + 1 waits for its physics, records, acts
        and starts, and so on: one stage simulates while the caller works on another."""
        num_steps, stages = self.buffer.num_steps, range(env.num_stages)
        parts = [select_worlds(obs, env.stage_rows(s)) for s in stages]
        acts = [
            self._act if self.timeline is None else self.timeline.timed("policy", s, self._act)
            for s in stages
        ]
        acted: list[tuple[Observation, PolicyStep]] = []
        for s in stages:
            tick = time.perf_counter()
            stage_obs, step, action = acts[s](parts[s], update_normalizer)
            tally.policy_time_s += time.perf_counter() - tick
            env.step_stage_async(s, action)
            acted.append((stage_obs, step))
        for t in range(num_steps):
            for s in stages:
                tick = time.perf_counter()
                result = env.step_stage_wait(s)
                tock = time.perf_counter()
                tally.sim_time_s += tock - tick
                self._record(t, env.stage_rows(s), *acted[s], result, tally)
                parts[s] = result.obs
                if t + 1 < num_steps:
                    stage_obs, step, action = acts[s](parts[s], update_normalizer)
                    env.step_stage_async(s, action)
                    acted[s] = (stage_obs, step)
                tally.policy_time_s += time.perf_counter() - tock
        return concat_observations(parts)

    def _act(self, obs: Observation, update_normalizer: bool) -> tuple[Observation, PolicyStep, torch.Tensor]:
        """(observation on the buffer's device, the policy's step, clamped action on the env's device)."""
        obs = self._to_buffer_device(obs)
        if update_normalizer:
            self.policy.update_normalizer(obs)
        step = self.policy.act(obs)
        return obs, step, step.action.clamp(-1.0, 1.0).to(self.env.device)

    def _record(
        self,
        t: int,
        rows: slice,
        obs: Observation,
        step: PolicyStep,
        result: StepResult,
        tally: _EpisodeTally,
    ) -> None:
        """Store the transition of ``rows`` at step ``t`` (truncations bootstrapped) and count the
        episodes that ended."""
        buffer = self.buffer
        reward = result.reward.to(buffer.device, torch.float32)
        terminated = result.terminated.to(buffer.device)
        truncated = result.truncated.to(buffer.device)
        bootstrap = truncated & ~terminated
        lost = result.info.get("lost")
        if lost is not None and lost.any():
            # The step never ran (its env worker died): cut the trajectory there and keep the
            # transition out of the losses. reward = V(s) makes its TD error, and so its share of
            # the earlier steps' GAE, exactly zero.
            lost = lost.to(buffer.device)
            bootstrap = bootstrap & ~lost
            reward = torch.where(lost, step.value.to(reward.dtype), reward)
            buffer.valid[t, rows] = ~lost
            tally.lost_steps += int(lost.sum())
        if bootstrap.any():
            ended = bootstrap.nonzero().squeeze(-1)
            final_obs = select_worlds(self._to_buffer_device(result.info["final_obs"]), ended)
            reward = reward.clone()
            reward[ended] += self.gamma * self.policy.get_value(final_obs).to(reward.dtype)
        done = terminated | truncated
        if MODEL_REWARD_KEY in result.info:
            self._pending_rewards.append((t, rows, result.info[MODEL_REWARD_KEY]))
        buffer.store(t, rows, obs, step.action, step.log_prob, step.value, reward, done, step.mean, step.std)
        finished = done if lost is None else done & ~lost.to(done.device)
        if "episode" in result.info and finished.any():
            tally.add(result.info["episode"], finished)


@dataclass
class _EpisodeTally:
    """Episodes finished during one collection, and where its time went."""

    returns: list[torch.Tensor] = field(default_factory=list)
    lengths: list[torch.Tensor] = field(default_factory=list)
    successes: list[torch.Tensor] = field(default_factory=list)
    successes_once: list[torch.Tensor] = field(default_factory=list)
    sim_time_s: float = 0.0
    policy_time_s: float = 0.0
    lost_steps: int = 0

    def add(self, episode: dict[str, torch.Tensor], done: torch.Tensor) -> None:
        ended = done.to(episode["return"].device)
        self.returns.append(episode["return"][ended].float().cpu())
        self.lengths.append(episode["length"][ended].float().cpu())
        self.successes.append(episode["success"][ended].float().cpu())
        self.successes_once.append(episode["success_once"][ended].float().cpu())

    def stats(self, buffer: RolloutBuffer, rollout_time_s: float) -> RolloutStats:
        def mean(chunks: list[torch.Tensor]) -> float:
            values = torch.cat(chunks) if chunks else torch.empty(0)
            return float(values.mean()) if values.numel() else math.nan

        return RolloutStats(
            episodes=int(sum(chunk.numel() for chunk in self.returns)),
            mean_return=mean(self.returns),
            mean_length=mean(self.lengths),
            success_rate=mean(self.successes),
            success_once_rate=mean(self.successes_once),
            env_steps=buffer.num_steps * buffer.num_envs,
            rollout_time_s=rollout_time_s,
            sim_time_s=self.sim_time_s,
            policy_time_s=self.policy_time_s,
            lost_steps=self.lost_steps,
        )
