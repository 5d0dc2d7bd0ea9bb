"""Evaluate a chunk policy in the simulator: plan a chunk, execute its first actions, re-plan.

Each world keeps its own plan: it asks the policy for a new chunk when it has executed
``execute_steps`` actions of the current one, or when its episode has just restarted (autoreset),
so a plan never leaks into the next episode. Only the worlds that need a plan are sent to the
policy. Episode counting follows ``vla_rl.training.evaluate`` (every world contributes a fixed quota
of its first episodes), and so do the summary and the video.

The evaluation draws from its own seeded random stream and leaves the global generators as they
were, so it can run in the middle of training without changing what training does next.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from vla_rl.envs import EnvConfig, make_env
from vla_rl.envs.base import Observation
from vla_rl.envs.batching import module_device, obs_to_device, select_worlds
from vla_rl.policies.chunk_policy import ChunkPolicy
from vla_rl.training.evaluate import EvalResult, record_video, run_episodes, video_env_config, write_summary


class ChunkExecutor:
    """Turns a chunk policy into one action per world and step (open loop within a chunk)."""

    def __init__(
        self,
        policy: ChunkPolicy,
        num_envs: int,
        execute_steps: int,
        deterministic: bool = True,
        temperature: float = 1.0,
    ) -> None:
        self.policy = policy
        self.execute_steps = min(execute_steps, policy.chunk_len) if execute_steps > 0 else policy.chunk_len
        self.deterministic = deterministic
        self.temperature = temperature
        self.plan = torch.zeros(num_envs, policy.chunk_len, policy.action_dim)
        self.cursor = torch.full((num_envs,), self.execute_steps, dtype=torch.long)
        """Index of the next action of each world's plan; ``execute_steps`` means "re-plan"."""
        self.policy_calls = 0
        """Times the policy was asked for chunks (one call covers every world re-planning then)."""

    def act(self, obs: Observation) -> torch.Tensor:
        """Actions [N, action_dim] in [-1, 1] for the current observation of every world."""
        replan = torch.nonzero(self.cursor >= self.execute_steps).squeeze(1)
        if len(replan) > 0:
            subset = obs_to_device(select_worlds(obs, replan), module_device(self.policy))
            step = self.policy.sample(subset, temperature=self.temperature, deterministic=self.deterministic)
            self.plan[replan] = step.actions.detach().float().cpu()
            self.cursor[replan] = 0
            self.policy_calls += 1
        actions = self.plan[torch.arange(len(self.cursor)), self.cursor]
        self.cursor += 1
        return actions.clamp(-1.0, 1.0)

    def episodes_ended(self, done: torch.Tensor) -> None:
        """Drop the rest of the plan of worlds whose episode ended (they start a new one)."""
        self.cursor[done.cpu()] = self.execute_steps


class TemporalEnsembleExecutor:
    """Temporal ensembling (as in ACT): ask the policy for a chunk at every step and execute, per
    world, the weighted mean of every prediction made for this step by the chunks of the last
    ``chunk_len`` steps; a prediction made ``age`` steps ago weighs ``exp(decay * age)`` (decay > 0
    trusts older plans more, 0 is a plain mean). Same interface as ``ChunkExecutor``."""

    def __init__(
        self,
        policy: ChunkPolicy,
        num_envs: int,
        decay: float,
        deterministic: bool = True,
        temperature: float = 1.0,
    ) -> None:
        self.policy = policy
        self.deterministic = deterministic
        self.temperature = temperature
        self.age_weights = torch.exp(decay * torch.arange(policy.chunk_len, dtype=torch.float32))
        """[chunk_len]: weight of a chunk's k-th action, which is executed k steps after the plan."""
        self.weighted_sum = torch.zeros(num_envs, policy.chunk_len, policy.action_dim)
        """[N, k, A]: sum of weighted predictions for the step k steps from now."""
        self.weight_total = torch.zeros(num_envs, policy.chunk_len)
        self.policy_calls = 0

    def act(self, obs: Observation) -> torch.Tensor:
        step = self.policy.sample(
            obs_to_device(obs, module_device(self.policy)),
            temperature=self.temperature,
            deterministic=self.deterministic,
        )
        self.policy_calls += 1
        chunk = step.actions.detach().float().cpu()
        self.weighted_sum += self.age_weights[None, :, None] * chunk
        self.weight_total += self.age_weights[None, :]
        actions = self.weighted_sum[:, 0] / self.weight_total[:, :1]
        # Shift the horizon by one step: the plans for the next step move to the front.
        self.weighted_sum = torch.roll(self.weighted_sum, -1, dims=1)
        self.weight_total = torch.roll(self.weight_total, -1, dims=1)
        self.weighted_sum[:, -1] = 0.0
        self.weight_total[:, -1] = 0.0
        return actions.clamp(-1.0, 1.0)

    def episodes_ended(self, done: torch.Tensor) -> None:
        """Forget the plans of worlds whose episode ended."""
        ended = done.cpu()
        self.weighted_sum[ended] = 0.0
        self.weight_total[ended] = 0.0


def make_executor(
    policy: ChunkPolicy,
    num_envs: int,
    execute_steps: int,
    deterministic: bool = True,
    temperature: float = 1.0,
    ensemble_decay: float | None = None,
) -> ChunkExecutor | TemporalEnsembleExecutor:
    """Temporal ensembling when ``ensemble_decay`` is set, else chunks executed ``execute_steps``
    actions at a time."""
    if ensemble_decay is None:
        return ChunkExecutor(policy, num_envs, execute_steps, deterministic, temperature)
    return TemporalEnsembleExecutor(policy, num_envs, ensemble_decay, deterministic, temperature)


@torch.no_grad()
def evaluate_chunk_policy(
    policy: ChunkPolicy,
    env_cfg: EnvConfig,
    num_episodes: int,
    execute_steps: int,
    seed: int,
    video_dir: str | Path | None = None,
    *,
    deterministic: bool = True,
    temperature: float = 1.0,
    num_envs: int = 0,
    split: str | None = None,
    video_envs: int = 4,
    video_camera: str = "front",
    video_size: int = 128,
    summary_path: str | Path | None = None,
    ensemble_decay: float | None = None,
) -> EvalResult:
    """Success rate (and return, length) of ``policy`` over ``num_episodes`` episodes of a fresh env.

    ``execute_steps <= 0`` executes whole chunks. ``num_envs <= 0`` uses ``env_cfg.num_envs`` worlds
    (never more than episodes); ``split`` overrides ``env_cfg.split``. With ``video_dir`` an mp4 of
    the first episode of ``video_envs`` worlds is written there, with ``eval_summary.json``.
    ``ensemble_decay`` switches to temporal ensembling (``TemporalEnsembleExecutor``).
    """
    split = split or env_cfg.split
    worlds = min(num_envs if num_envs > 0 else env_cfg.num_envs, max(num_episodes, 1))
    eval_cfg = dataclasses.replace(env_cfg, num_envs=worlds, split=split, pipeline_stages=1)
    was_training = policy.training
    policy.eval()
    try:
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            env = make_env(eval_cfg)
            try:
                executor = make_executor(
                    policy, env.num_envs, execute_steps, deterministic, temperature, ensemble_decay
                )
                result = run_episodes(executor.act, env, num_episodes, seed, executor.episodes_ended)
            finally:
                env.close()
            result.split = split
            if video_dir is not None and video_envs > 0:
                video_cfg = video_env_config(eval_cfg, video_envs, video_camera, video_size)
                recorder = make_executor(
                    policy, video_envs, execute_steps, deterministic, temperature, ensemble_decay
                )
                result.video_path = record_video(
                    recorder.act, video_cfg, video_camera, seed, video_dir, recorder.episodes_ended
                )
    finally:
        policy.train(was_training)
    write_summary(result, summary_path, video_dir)
    return result
