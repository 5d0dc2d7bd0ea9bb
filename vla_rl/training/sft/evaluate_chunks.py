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
import json
from pathlib import Path

import numpy as np
import torch

from vla_rl.envs import EnvConfig, make_env
from vla_rl.envs.base import BatchedEnv, Observation
from vla_rl.policies.chunk_policy import ChunkPolicy
from vla_rl.training.evaluate import (
    SUMMARY_FILENAME,
    VIDEO_FILENAME,
    EvalResult,
    episode_quotas,
    tile_worlds,
    video_env_config,
)
from vla_rl.training.sft.batching import module_device, obs_to_device, select_worlds


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
) -> EvalResult:
    """Success rate (and return, length) of ``policy`` over ``num_episodes`` episodes of a fresh env.

    ``execute_steps <= 0`` executes whole chunks. ``num_envs <= 0`` uses ``env_cfg.num_envs`` worlds
    (never more than episodes); ``split`` overrides ``env_cfg.split``. With ``video_dir`` an mp4 of
    the first episode of ``video_envs`` worlds is written there, with ``eval_summary.json``.
    """
    split = split or env_cfg.split
    worlds = min(num_envs if num_envs > 0 else env_cfg.num_envs, max(num_episodes, 1))
    eval_cfg = dataclasses.replace(env_cfg, num_envs=worlds, split=split)
    was_training = policy.training
    policy.eval()
    try:
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            env = make_env(eval_cfg)
            try:
                executor = ChunkExecutor(policy, env.num_envs, execute_steps, deterministic, temperature)
                result = _run_episodes(executor, env, num_episodes, seed)
            finally:
                env.close()
            result.split = split
            if video_dir is not None and video_envs > 0:
                video_cfg = video_env_config(eval_cfg, video_envs, video_camera, video_size)
                recorder = ChunkExecutor(policy, video_envs, execute_steps, deterministic, temperature)
                result.video_path = _record_video(recorder, video_cfg, video_camera, seed, video_dir)
    finally:
        policy.train(was_training)
    if summary_path is None and video_dir is not None:
        summary_path = Path(video_dir) / SUMMARY_FILENAME
    if summary_path is not None:
        Path(summary_path).parent.mkdir(parents=True, exist_ok=True)
        Path(summary_path).write_text(json.dumps(dataclasses.asdict(result), indent=2) + "\n")
    return result


def _run_episodes(executor: ChunkExecutor, env: BatchedEnv, num_episodes: int, seed: int) -> EvalResult:
    quotas = episode_quotas(num_episodes, env.num_envs)
    counted = np.zeros(env.num_envs, dtype=np.int64)
    returns: list[float] = []
    lengths: list[float] = []
    successes: list[bool] = []
    success_once: list[bool] = []
    obs, _ = env.reset(seed=seed)
    while (counted < quotas).any():
        step = env.step(executor.act(obs).to(env.device))
        obs = step.obs
        done = step.done.cpu()
        if not bool(done.any()):
            continue
        executor.episodes_ended(done)
        episode = {k: v.cpu().numpy() for k, v in step.info["episode"].items()}
        for i in np.flatnonzero(done.numpy() & (counted < quotas)):
            returns.append(float(episode["return"][i]))
            lengths.append(float(episode["length"][i]))
            successes.append(bool(episode["success"][i]))
            success_once.append(bool(episode["success_once"][i]))
            counted[i] += 1
    count = len(returns)
    return EvalResult(
        success_rate=float(np.mean(successes)) if count else 0.0,
        success_once_rate=float(np.mean(success_once)) if count else 0.0,
        mean_return=float(np.mean(returns)) if count else 0.0,
        mean_length=float(np.mean(lengths)) if count else 0.0,
        num_episodes=count,
        split="",
    )


def _record_video(
    executor: ChunkExecutor, cfg: EnvConfig, camera: str, seed: int, video_dir: str | Path
) -> str | None:
    """Each world's first episode side by side; finished worlds hold their last frame."""
    import imageio.v2 as imageio

    key = f"rgb_{camera}"
    env = make_env(cfg)
    try:
        if key not in env.observation_space.spaces:
            return None
        obs, _ = env.reset(seed=seed)
        frames = [tile_worlds(obs[key])]
        finished = torch.zeros(env.num_envs, dtype=torch.bool)
        last = obs[key].cpu().clone()
        while not bool(finished.all()):
            step = env.step(executor.act(obs).to(env.device))
            done = step.done.cpu()
            executor.episodes_ended(done)
            current = torch.where(
                done[:, None, None, None], step.info["final_obs"][key].cpu(), step.obs[key].cpu()
            )
            last = torch.where(finished[:, None, None, None], last, current)
            finished |= done
            frames.append(tile_worlds(last))
            obs = step.obs
    finally:
        env.close()
    path = Path(video_dir) / VIDEO_FILENAME
    path.parent.mkdir(parents=True, exist_ok=True)
    imageio.mimwrite(path, frames, fps=max(int(round(cfg.control_hz)), 1), macro_block_size=1)
    return str(path)
