"""Steps a batched environment with a policy, state or chunk, and fills a ``RolloutBuffer``.

One collector for both kinds of policy; a state policy is the chunk case of chunk length 1 (one
decision per control step), collected step by step into a buffer allocated up front (and pipelined
over a ``StagedEnv``'s stages). Both share the truncation bootstrap (a time-limit step's reward
becomes ``r + gamma * V(final obs)``, formed in float32), the episode statistics (float32 means), and
the option ``clamp_actions`` (clamp what is sent to the env to [-1, 1]; default on for state
policies, chunk policies leave that to the env). The policy is not changed while it collects: its
observation statistics are updated by the algorithm after the update (``PPO.update``), so the
update starts from the policy that collected its batch. ``reward_scaler`` (state policies)
divides the stored rewards by a running std of the discounted return (``reward_scaling.py``).

Chunk policies: every ``execute_steps`` control steps the policy is called once on the batch and
each world executes the first ``execute_steps`` actions of its chunk. A world whose episode ends
inside a chunk holds still (zero action) for the rest of it, so no action planned for one episode
acts in the next; its reward from then on is not counted. A chunk's reward is the discounted sum over
the steps it executed (``chunk_rewards``). Stored rewards are the environment's times
``reward_scale`` (so a critic fits returns of order one); episode returns in the statistics are not.
``reward="success"`` stores the task's per-step success flag (1 in a success state, else 0) in
place of its shaped reward (the binary outcome reward of SimpleVLA-RL, paid per step).
``progress_shaping=c`` adds ``c * (gamma * phi(s') - phi(s))`` to every step, with ``phi`` the task's
dense reward read as a potential (``vla_rl.rewards.shaping.potential_shaping``): credit for progress
that sums to ``c * (gamma^T phi_T - phi_0)`` over an episode, so holding a state of high progress
earns nothing. The first step of an episode gets no shaping term (the reset state's potential is
not observed).

``collect`` makes a continuous rollout (PPO) of ``num_decisions`` decisions of every world (a state
policy's buffer fixes it: ``buffer.num_steps``); the filled storage is ``collector.buffer``. GRPO's
episodes from shared reset seeds are ``vla_rl.rollout.episodes.collect_episodes``, built on the
public chunk steps here (``sample``, ``execute``, ``record``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from vla_rl.envs.base import BatchedEnv, Observation, StepResult
from vla_rl.envs.batching import module_device, obs_to_device, select_worlds
from vla_rl.envs.staged import StagedEnv, concat_observations
from vla_rl.envs.timeline import Timeline
from vla_rl.policies.base import ActorCriticPolicy, PolicyStep
from vla_rl.policies.chunk_policy import ChunkPolicy, ChunkStep
from vla_rl.rewards.env_wrapper import MODEL_REWARD_KEY, resolve_model_rewards
from vla_rl.rewards.shaping import REWARDS, potential_shaping
from vla_rl.rollout.buffer import RolloutBuffer
from vla_rl.rollout.gae import chunk_rewards
from vla_rl.rollout.reward_scaling import RewardScaler
from vla_rl.rollout.stats import EpisodeTally, RolloutStats


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
    lost: torch.Tensor
    """bool [N]: a step of the decision never ran (its env worker died; the world restarted): the
    decision ended there, without an episode to count (included in ``ended``)."""


class RolloutCollector:
    """Runs a state policy (``ActorCriticPolicy``, step by step into ``buffer``) or a ``ChunkPolicy``
    (no ``buffer``: into a ``RolloutBuffer`` of decisions made by each ``collect``) in a
    ``BatchedEnv``; see the module's docstring. The chunk options (``execute_steps`` ..
    ``progress_shaping``) apply to chunk policies."""

    def __init__(
        self,
        env: BatchedEnv,
        policy: ActorCriticPolicy | ChunkPolicy,
        buffer: RolloutBuffer | None = None,
        gamma: float | None = None,
        *,
        clamp_actions: bool | None = None,
        execute_steps: int = 1,
        temperature: float = 1.0,
        log_prob_level: str = "chunk",
        with_value: bool = True,
        reward_scale: float = 1.0,
        reward: str = "dense",
        progress_shaping: float = 0.0,
        reward_scaler: RewardScaler | None = None,
    ) -> None:
        if gamma is None:
            raise TypeError("RolloutCollector needs gamma")
        state_policy = buffer is not None
        self.chunked = not state_policy
        """Decisions of a chunk policy (else steps of a state policy)."""
        if state_policy and not isinstance(policy, ActorCriticPolicy):
            raise ValueError("buffer= holds the steps of a state policy (ActorCriticPolicy), not chunks")
        if buffer is not None and buffer.num_envs != env.num_envs:
            raise ValueError(f"buffer holds {buffer.num_envs} worlds but the env has {env.num_envs}")
        if reward not in REWARDS:
            raise ValueError(f"reward must be one of {list(REWARDS)}, got {reward!r}")
        chunk_len = policy.chunk_len if self.chunked else 1
        if not 1 <= execute_steps <= chunk_len:
            raise ValueError(f"execute_steps must lie in [1, chunk_len={chunk_len}], got {execute_steps}")
        self.clamp_actions = state_policy if clamp_actions is None else clamp_actions
        """Clamp the actions sent to the env to [-1, 1]."""
        self.env = env
        self.policy = policy
        self.buffer = buffer
        self.gamma = gamma
        self.execute_steps = execute_steps
        self.temperature = temperature
        self.log_prob_level = log_prob_level
        self.with_value = with_value
        self.reward_scale = reward_scale
        self.reward_of = REWARDS[reward]
        self.progress_shaping = progress_shaping
        self.reward_scaler = reward_scaler
        """Divides a state rollout's rewards by a running std of the discounted return (None: off)."""
        self.potential = torch.full((env.num_envs,), float("nan"))
        """phi of each world's current state (the dense reward it was reached with); NaN after a reset."""
        self.tally = EpisodeTally()
        """The episodes and times of the collection under way (a new one per collection)."""
        self.timeline: Timeline | None = None
        """Set to record the policy's span for each stage in pipelined collection."""

    def collect(self, obs: Observation, num_decisions: int | None = None) -> tuple[Observation, RolloutStats]:
        """A continuous rollout from ``obs`` into ``self.buffer``; returns the next observation.
        ``num_decisions``: chunk policies only (a state policy's buffer fixes it).

        A ``StagedEnv`` is stepped stage by stage (pipelined): each stage's physics runs in the
        background while the policy acts for the next stage.
        """
        start = time.perf_counter()
        self.tally = EpisodeTally()
        if self.chunked:
            if num_decisions is None:
                raise ValueError("a chunk policy's rollout needs num_decisions")
            return self._collect_decisions(obs, num_decisions), self.stats(num_decisions, start)
        buffer = self.buffer
        if num_decisions not in (None, buffer.num_steps):
            raise ValueError(f"the buffer holds {buffer.num_steps} steps, not {num_decisions}")
        buffer.clear()
        self._pending_rewards: list = []
        self.tally.lost_steps = 0
        with torch.inference_mode():
            if isinstance(self.env, StagedEnv) and self.env.num_stages > 1:
                obs = self._collect_pipelined(self.env, obs)
            else:
                obs = self._collect_in_step(obs)
            tick = time.perf_counter()
            resolve_model_rewards(self._pending_rewards, buffer.rewards)
            obs = self._to_buffer_device(obs)
            buffer.last_value.copy_(self.policy.get_value(obs))
            self.tally.policy_time_s += time.perf_counter() - tick
        buffer.step = buffer.num_steps
        return obs, self.stats(buffer.num_steps, start)

    def stats(self, decisions: int, start: float) -> RolloutStats:
        """The statistics of the collection under way (``tally``): ``decisions`` per world (steps of a
        state policy), from ``start`` (a ``time.perf_counter()`` reading)."""
        env_steps = decisions * self.execute_steps * self.env.num_envs
        return self.tally.stats(env_steps, time.perf_counter() - start, decisions if self.chunked else None)

    def _bootstrap(self, rewards: torch.Tensor, index: object, values: torch.Tensor) -> None:
        """The truncation bootstrap, for state and chunk rollouts alike: ``rewards[index] += gamma *
        V(final obs)``, in the rewards' float32."""
        rewards[index] += self.gamma * values.to(rewards.dtype)

    # ----- state policies: one step per decision, into the buffer -------------------------------------

    def _to_buffer_device(self, obs: Observation) -> Observation:
        return obs_to_device(obs, self.buffer.device)

    def _collect_in_step(self, obs: Observation) -> Observation:
        """All worlds act, then all step, ``num_steps`` times."""
        tally = self.tally
        for t in range(self.buffer.num_steps):
            tick = time.perf_counter()
            obs, step, action = self._act(obs)
            tock = time.perf_counter()
            result = self.env.step(action)
            tick_record = time.perf_counter()
            tally.sim_time_s += tick_record - tock
            self._record(t, slice(None), obs, step, result)
            tally.policy_time_s += (tock - tick) + (time.perf_counter() - tick_record)
            obs = result.obs
        return obs

    def _collect_pipelined(self, env: StagedEnv, obs: Observation) -> Observation:
        """Stage s acts and starts stepping, then stage s + 1 waits for its physics, records, acts
        and starts, and so on: one stage simulates while the caller works on another."""
        tally = self.tally
        num_steps, stages = self.buffer.num_steps, range(env.num_stages)
        parts = [select_worlds(obs, env.stage_rows(s)) for s in stages]
        acts = [
            self._act if self.timeline is None else self.timeline.timed("policy", s, self._act)
            for s in stages
        ]
        acted: list[tuple[Observation, PolicyStep]] = []
        for s in stages:
            tick = time.perf_counter()
            stage_obs, step, action = acts[s](parts[s])
            tally.policy_time_s += time.perf_counter() - tick
            env.step_stage_async(s, action)
            acted.append((stage_obs, step))
        for t in range(num_steps):
            for s in stages:
                tick = time.perf_counter()
                result = env.step_stage_wait(s)
                tock = time.perf_counter()
                tally.sim_time_s += tock - tick
                self._record(t, env.stage_rows(s), *acted[s], result)
                parts[s] = result.obs
                if t + 1 < num_steps:
                    stage_obs, step, action = acts[s](parts[s])
                    env.step_stage_async(s, action)
                    acted[s] = (stage_obs, step)
                tally.policy_time_s += time.perf_counter() - tock
        return concat_observations(parts)

    def _act(self, obs: Observation) -> tuple[Observation, PolicyStep, torch.Tensor]:
        """(observation on the buffer's device, the policy's step, action on the env's device)."""
        obs = self._to_buffer_device(obs)
        step = self.policy.act(obs)  # type: ignore[union-attr]
        action = step.action.clamp(-1.0, 1.0) if self.clamp_actions else step.action
        return obs, step, action.to(self.env.device)

    def _record(self, t: int, rows: slice, obs: Observation, step: PolicyStep, result: StepResult) -> None:
        """Store the transition of ``rows`` at step ``t`` (truncations bootstrapped) and count the
        episodes that ended."""
        buffer = self.buffer
        reward = result.reward.to(buffer.device, torch.float32)
        terminated = result.terminated.to(buffer.device)
        truncated = result.truncated.to(buffer.device)
        if self.reward_scaler is not None:
            reward = self.reward_scaler(reward, terminated | truncated, rows)
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
            self.tally.lost_steps += int(lost.sum())
        if bootstrap.any():
            ended = bootstrap.nonzero().squeeze(-1)
            final_obs = select_worlds(self._to_buffer_device(result.info["final_obs"]), ended)
            reward = reward.clone()
            self._bootstrap(reward, ended, self.policy.get_value(final_obs))  # type: ignore[union-attr]
        done = terminated | truncated
        if MODEL_REWARD_KEY in result.info:
            self._pending_rewards.append((t, rows, result.info[MODEL_REWARD_KEY]))
        buffer.store(t, rows, obs, step.action, step.log_prob, step.value, reward, done, step.mean, step.std)
        finished = done if lost is None else done & ~lost.to(done.device)
        if "episode" in result.info and finished.any():
            self.tally.add(result.info["episode"], finished)

    # ----- chunk policies: one decision per execute_steps control steps -------------------------------

    @torch.no_grad()
    def sample(
        self, obs: Observation, *, deterministic: bool = False, with_value: bool | None = None
    ) -> ChunkStep:
        """One decision of the chunk policy for every world of ``obs``."""
        start = time.perf_counter()
        step = self.policy.sample(  # type: ignore[union-attr]
            obs_to_device(obs, module_device(self.policy)),
            temperature=self.temperature,
            deterministic=deterministic,
            log_prob_level=self.log_prob_level,
            with_value=self.with_value if with_value is None else with_value,
        )
        self.tally.policy_time_s += time.perf_counter() - start
        return step

    def execute(self, actions: torch.Tensor, active: torch.Tensor) -> ChunkOutcome:
        """Run ``execute_steps`` control steps; ``actions`` [N, chunk_len, A]; worlds not ``active``
        (or whose episode ends on the way) hold still."""
        num_envs, horizon = self.env.num_envs, self.execute_steps
        step_rewards = torch.zeros(num_envs, horizon)
        executed = torch.zeros(num_envs, horizon, dtype=torch.bool)
        success = torch.zeros(num_envs, dtype=torch.bool)
        episode_return = torch.zeros(num_envs)
        truncated_obs: dict[int, tuple[int, Observation]] = {}
        lost = torch.zeros(num_envs, dtype=torch.bool)
        running = active.clone()
        obs: Observation = {}
        for j in range(horizon):
            action = torch.where(running[:, None], actions[:, j].float(), torch.zeros_like(actions[:, j]))
            if self.clamp_actions:
                action = action.clamp(-1.0, 1.0)
            start = time.perf_counter()
            if j < horizon - 1:  # only the observation after the chunk is decided on
                self.env.skip_images_next_step()
            result = self.env.step(action.to(self.env.device))
            self.tally.sim_time_s += time.perf_counter() - start
            done = result.done.cpu()
            reward = self.reward_of(result).cpu().float()
            if self.progress_shaping:
                reward = reward + self._shaping(result, done)
            reward = self.reward_scale * reward
            step_rewards[:, j] = torch.where(running, reward, 0.0)
            executed[:, j] = running
            if "lost" in result.info:
                lost |= running & result.info["lost"].cpu()
            finished = running & done & ~lost
            if finished.any():
                episode = result.info["episode"]
                success |= finished & episode["success"].cpu().bool()
                episode_return = torch.where(finished, episode["return"].cpu().float(), episode_return)
                for world in torch.nonzero(finished & result.truncated.cpu()).flatten().tolist():
                    truncated_obs[world] = (j, select_worlds(result.info["final_obs"], torch.tensor([world])))
            running &= ~done
            obs = result.obs
        ended = active & ~running  # a world stops running where its episode ends
        if lost.any():
            self.tally.lost_steps = (self.tally.lost_steps or 0) + int(lost.sum())
        return ChunkOutcome(obs, step_rewards, executed, ended, success, episode_return, truncated_obs, lost)

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
        steps = torch.tensor([outcome.truncated_obs[w][0] for w in worlds])
        self._bootstrap(outcome.step_rewards, (torch.tensor(worlds), steps), values.cpu())

    def record(
        self,
        batch: RolloutBuffer,
        obs: Observation,
        step: ChunkStep,
        outcome: ChunkOutcome,
        valid: torch.Tensor,
    ) -> None:
        """Store one decision with its chunk reward and discount (``chunk_rewards``); a lost decision
        (``ChunkOutcome.lost``) is cut after its first step with reward V(s), so its TD error, and
        its share of the earlier decisions' advantages, are exactly zero, and does not train."""
        lost = outcome.lost
        if lost.any():
            outcome.executed[lost] = False
            outcome.executed[lost, 0] = True
            outcome.step_rewards[lost] = 0.0
            if step.value is not None:
                outcome.step_rewards[lost, 0] = step.value.detach().cpu().float()[lost]
        reward, discount = chunk_rewards(outcome.step_rewards, outcome.executed, self.gamma)
        batch.add_decision(
            obs,
            step.sample_info,
            step.log_prob,
            step.value,
            reward,
            discount,
            outcome.ended,
            valid & ~lost,
            outcome.step_rewards,
            outcome.executed,
        )

    def _collect_decisions(self, obs: Observation, num_decisions: int) -> Observation:
        """A continuous rollout of ``num_decisions`` decisions of every world into a new buffer."""
        batch = self.buffer = RolloutBuffer(num_decisions, self.env.num_envs)
        all_worlds = torch.ones(self.env.num_envs, dtype=torch.bool)
        for _ in range(num_decisions):
            step = self.sample(obs)
            outcome = self.execute(step.actions.cpu(), all_worlds)
            self.bootstrap_truncations(outcome)
            self.record(batch, obs, step, outcome, all_worlds)
            self.tally.add_outcomes(outcome.success, outcome.episode_return, outcome.ended & ~outcome.lost)
            obs = outcome.obs
        if self.with_value:
            batch.last_value = self.sample(obs, with_value=True).value.cpu().float()  # type: ignore[union-attr]
        return obs
