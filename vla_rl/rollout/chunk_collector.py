"""Collects chunk-policy rollouts: one batched policy call per decision, chunks executed open loop.

All worlds decide together: every ``execute_steps`` control steps the policy is called once on the
batch and each world executes the first ``execute_steps`` actions of its chunk. A world whose episode
ends inside a chunk holds still (zero action) for the rest of it, so no action planned for one
episode acts in the next; its reward from then on is not counted. A chunk's reward is the discounted
sum over the steps it executed (``chunk_rewards``). Stored rewards are the environment's times
``reward_scale`` (so a critic fits returns of order one); episode returns in the statistics are not.
``reward="success"`` stores the task's per-step success flag (1 in a success state, else 0) in
place of its shaped reward (the binary outcome reward of SimpleVLA-RL, paid per step).
``progress_shaping=c`` adds ``c * (gamma * phi(s') - phi(s))`` to every step, with ``phi`` the task's
dense reward read as a potential (``vla_rl.rewards.shaping.potential_shaping``): credit for progress
that sums to ``c * (gamma^T phi_T - phi_0)`` over an episode, so holding a state of high progress
earns nothing. The first step of an episode gets no shaping term (the reset state's potential is
not observed).

Two ways to collect:

* ``collect``: a continuous rollout of T decisions (PPO). Episodes cut by the time limit are
  bootstrapped: ``gamma * V(final observation)`` joins the reward of the step that hit the limit.
* ``collect_episodes``: one episode per world from given reset seeds (GRPO: worlds of a group share
  a seed and so an initial state). Entries after a world's episode ended are marked invalid.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from vla_rl.envs.base import BatchedEnv, Observation, StepResult
from vla_rl.envs.batching import module_device, obs_to_device, select_worlds
from vla_rl.envs.staged import concat_observations
from vla_rl.policies.chunk_policy import ChunkPolicy, ChunkStep
from vla_rl.rewards.shaping import REWARDS, potential_shaping
from vla_rl.rollout.buffer import RolloutBuffer
from vla_rl.rollout.collector import RolloutStats
from vla_rl.rollout.gae import chunk_rewards


@dataclass
class ChunkOutcome:
    """What executing one chunk in every world produced."""

    obs: Observation
    """Observation after the chunk (worlds that ended already show their next episode)."""
    step_rewards: torch.Tensor
    """[N, H] rewards of the executed steps (0 elsewhere)."""
    executed: torch.Tensor
    """bool [N, H]: steps executed within the decision's episode."""
    ended: torch.Tensor
    """bool [N]: the episode ended inside the chunk."""
    success: torch.Tensor
    """bool [N]: that episode ended in success."""
    episode_return: torch.Tensor
    """[N] its undiscounted return (valid where ``ended``)."""
    truncated_obs: dict[int, tuple[int, Observation]]
    """world -> (step index, final observation) for time-limit ends (for bootstrapping)."""


class ChunkCollector:
    """Runs a ``ChunkPolicy`` in a ``BatchedEnv`` and stores what PPO and GRPO train on."""

    def __init__(
        self,
        env: BatchedEnv,
        policy: ChunkPolicy,
        execute_steps: int,
        gamma: float,
        *,
        temperature: float = 1.0,
        log_prob_level: str = "chunk",
        with_value: bool = True,
        reward_scale: float = 1.0,
        reward: str = "dense",
        progress_shaping: float = 0.0,
    ) -> None:
        if reward not in REWARDS:
            raise ValueError(f"reward must be one of {list(REWARDS)}, got {reward!r}")
        if not 1 <= execute_steps <= policy.chunk_len:
            raise ValueError(
                f"execute_steps must lie in [1, chunk_len={policy.chunk_len}], got {execute_steps}"
            )
        self.env = env
        self.policy = policy
        self.execute_steps = execute_steps
        self.gamma = gamma
        self.temperature = temperature
        self.log_prob_level = log_prob_level
        self.with_value = with_value
        self.reward_scale = reward_scale
        self.reward_of = REWARDS[reward]
        self.progress_shaping = progress_shaping
        self.potential = torch.full((env.num_envs,), float("nan"))
        """phi of each world's current state (the dense reward it was reached with); NaN after a reset."""
        self.policy_time_s = 0.0
        self.sim_time_s = 0.0

    # ----- one decision ---------------------------------------------------------------------------------

    @torch.no_grad()
    def sample(
        self, obs: Observation, *, deterministic: bool = False, with_value: bool | None = None
    ) -> ChunkStep:
        start = time.perf_counter()
        step = self.policy.sample(
            obs_to_device(obs, module_device(self.policy)),
            temperature=self.temperature,
            deterministic=deterministic,
            log_prob_level=self.log_prob_level,
            with_value=self.with_value if with_value is None else with_value,
        )
        self.policy_time_s += time.perf_counter() - start
        return step

    def execute(self, actions: torch.Tensor, active: torch.Tensor) -> ChunkOutcome:
        """Run ``execute_steps`` control steps; ``actions`` [N, chunk_len, A]; worlds not ``active``
        (or whose episode ends on the way) hold still."""
        num_envs, horizon = self.env.num_envs, self.execute_steps
        step_rewards = torch.zeros(num_envs, horizon)
        executed = torch.zeros(num_envs, horizon, dtype=torch.bool)
        ended = torch.zeros(num_envs, dtype=torch.bool)
        success = torch.zeros(num_envs, dtype=torch.bool)
        episode_return = torch.zeros(num_envs)
        truncated_obs: dict[int, tuple[int, Observation]] = {}
        running = active.clone()
        obs: Observation = {}
        for j in range(horizon):
            action = torch.where(running[:, None], actions[:, j].float(), torch.zeros_like(actions[:, j]))
            start = time.perf_counter()
            if j < horizon - 1:  # only the observation after the chunk is decided on
                self.env.skip_images_next_step()
            result = self.env.step(action.to(self.env.device))
            self.sim_time_s += time.perf_counter() - start
            done = result.done.cpu()
            reward = self.reward_of(result).cpu().float()
            if self.progress_shaping:
                reward = reward + self._shaping(result, done)
            reward = self.reward_scale * reward
            step_rewards[:, j] = torch.where(running, reward, 0.0)
            executed[:, j] = running
            finished = running & done
            if finished.any():
                episode = result.info["episode"]
                success |= finished & episode["success"].cpu().bool()
                episode_return = torch.where(finished, episode["return"].cpu().float(), episode_return)
                for world in torch.nonzero(finished & result.truncated.cpu()).flatten().tolist():
                    truncated_obs[world] = (j, select_worlds(result.info["final_obs"], torch.tensor([world])))
            ended |= finished
            running &= ~done
            obs = result.obs
        return ChunkOutcome(obs, step_rewards, executed, ended, success, episode_return, truncated_obs)

    def _shaping(self, result: StepResult, done: torch.Tensor) -> torch.Tensor:
        """``progress_shaping * (gamma * phi(s') - phi(s))`` per world (0 where phi(s) is unknown:
        after a reset; a checkpoint keeps it across a resume)."""
        phi_next = result.reward.cpu().float()
        known = ~torch.isnan(self.potential)
        term = potential_shaping(torch.where(known, self.potential, 0.0), phi_next, self.gamma)
        self.potential = torch.where(done, float("nan"), phi_next)
        return self.progress_shaping * torch.where(known, term, 0.0)

    def bootstrap_truncations(self, outcome: ChunkOutcome) -> None:
        """Add ``gamma * V(final obs)`` to the reward of each step that hit the time limit."""
        if not outcome.truncated_obs or not self.with_value:
            return
        worlds = list(outcome.truncated_obs)
        parts = [outcome.truncated_obs[w][1] for w in worlds]
        values = self.sample(concat_observations(parts), deterministic=True, with_value=True).value
        assert values is not None
        for world, value in zip(worlds, values.cpu().float().tolist(), strict=True):
            outcome.step_rewards[world, outcome.truncated_obs[world][0]] += self.gamma * value

    def record(
        self,
        batch: RolloutBuffer,
        obs: Observation,
        step: ChunkStep,
        outcome: ChunkOutcome,
        valid: torch.Tensor,
    ) -> None:
        """Store one decision with its chunk reward and discount (``chunk_rewards``)."""
        reward, discount = chunk_rewards(outcome.step_rewards, outcome.executed, self.gamma)
        batch.add_decision(
            obs,
            step.sample_info,
            step.log_prob,
            step.value,
            reward,
            discount,
            outcome.ended,
            valid,
            outcome.step_rewards,
            outcome.executed,
        )

    # ----- whole rollouts -------------------------------------------------------------------------------

    def collect(
        self, obs: Observation, num_decisions: int
    ) -> tuple[RolloutBuffer, Observation, RolloutStats]:
        """A continuous rollout of ``num_decisions`` decisions of every world (PPO)."""
        start = time.perf_counter()
        self.policy_time_s = self.sim_time_s = 0.0
        batch = RolloutBuffer(num_decisions, self.env.num_envs)
        all_worlds = torch.ones(self.env.num_envs, dtype=torch.bool)
        successes, returns = [], []
        for _ in range(num_decisions):
            step = self.sample(obs)
            outcome = self.execute(step.actions.cpu(), all_worlds)
            self.bootstrap_truncations(outcome)
            self.record(batch, obs, step, outcome, all_worlds)
            successes += outcome.success[outcome.ended].tolist()
            returns += outcome.episode_return[outcome.ended].tolist()
            obs = outcome.obs
        if self.with_value:
            batch.last_value = self.sample(obs, with_value=True).value.cpu().float()  # type: ignore[union-attr]
        return batch, obs, self._stats(successes, returns, num_decisions, start)

    def collect_episodes(
        self, world_seeds: list, max_decisions: int
    ) -> tuple[RolloutBuffer, torch.Tensor, torch.Tensor, RolloutStats]:
        """One episode per world, reset from ``world_seeds`` (one per world). Returns the batch,
        each world's success (bool [N]) and return ([N], summed until its episode ended)."""
        start = time.perf_counter()
        self.policy_time_s = self.sim_time_s = 0.0
        obs, _ = self.env.reset(seed=world_seeds)
        self.potential.fill_(float("nan"))
        num_envs = self.env.num_envs
        batch = RolloutBuffer(max_decisions, num_envs)
        active = torch.ones(num_envs, dtype=torch.bool)
        success = torch.zeros(num_envs, dtype=torch.bool)
        returns = torch.zeros(num_envs)
        decisions = 0
        while active.any() and decisions < max_decisions:
            step = self._sample_active(obs, active)
            outcome = self.execute(step.actions, active)
            self.record(batch, obs, step, outcome, active)
            success |= outcome.success
            returns += outcome.step_rewards.sum(dim=1)
            active &= ~outcome.ended
            obs = outcome.obs
            decisions += 1
        stats = self._stats(success.tolist(), returns.tolist(), decisions, start)
        return batch, success, returns, stats

    def _sample_active(self, obs: Observation, active: torch.Tensor) -> ChunkStep:
        """Sample for the active worlds only; inactive rows are zeros (their entries do not train)."""
        rows = torch.nonzero(active).squeeze(1)
        step = self.sample(select_worlds(obs, rows))
        num_envs = len(active)

        def scatter(tensor: torch.Tensor) -> torch.Tensor:
            full = torch.zeros((num_envs, *tensor.shape[1:]), dtype=tensor.dtype)
            full[rows] = tensor.detach().cpu()
            return full

        return ChunkStep(
            actions=scatter(step.actions),
            log_prob=scatter(step.log_prob),
            value=None if step.value is None else scatter(step.value),
            sample_info={key: scatter(value) for key, value in step.sample_info.items()},
        )

    def _stats(self, successes: list, returns: list, decisions: int, start: float) -> RolloutStats:
        episodes = len(successes)
        nan = float("nan")
        return RolloutStats(
            episodes=episodes,
            success_rate=sum(successes) / episodes if episodes else nan,
            mean_return=sum(returns) / episodes if episodes else nan,
            env_steps=decisions * self.execute_steps * self.env.num_envs,
            decisions=decisions,
            rollout_time_s=time.perf_counter() - start,
            policy_time_s=self.policy_time_s,
            sim_time_s=self.sim_time_s,
        )
