"""``RewardModelEnv``: an environment whose reward (partly) comes from a reward model.

It wraps any ``BatchedEnv`` that renders the model's cameras. After each step the frames of the
state each world reached (for a world whose episode just ended: its last frame, from
``info["final_obs"]``) are scored in one batch, turned into the model term (the score, or a
potential-based difference of scores) and mixed with the environment reward. The environment's
success flags pass through untouched: they say how well the policy does, not what it is paid.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import torch

from vla_rl.envs.base import BatchedEnv, Observation, StepResult, adopt_spec, env_spec
from vla_rl.rewards.base import RewardModel
from vla_rl.rewards.config import RewardConfig
from vla_rl.rewards.shaping import combine_rewards, potential_shaping

MODEL_REWARD_KEY = "model_reward"
"""``info`` key of the pending model term (a ``Future`` of float32 [N]) in worker mode."""
TRACKED_STATE = ("potential", "episode_steps", "episode_return")
"""The per-world tensors a ``RewardModelEnv`` keeps across steps, saved with the env's state."""


class RewardModelEnv(BatchedEnv):
    """Delegates to ``env``; replaces its reward by the mix ``cfg`` describes."""

    def __init__(self, env: BatchedEnv, model: RewardModel, cfg: RewardConfig) -> None:
        keys = [f"rgb_{camera}" for camera in cfg.cameras]
        missing = [key for key in keys if key not in env.observation_space.spaces]
        if missing:
            raise ValueError(f"the reward model reads {missing}, which the environment does not render")
        self.env, self.model, self.cfg, self.keys = env, model, cfg, keys
        adopt_spec(self, env_spec(env))
        n = env.num_envs
        self.potential = torch.zeros(n)
        """phi of each world's current state (potential shaping)."""
        self.episode_steps = torch.zeros(n, dtype=torch.long)
        self.episode_return = torch.zeros(n)
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="reward") if cfg.worker else None

    # ------------------------------------------------------------------ scoring
    def frames(self, obs: Observation, rows: torch.Tensor | None = None) -> torch.Tensor:
        """uint8 frames of ``rows`` as the model takes them ([B, H, W, 3] or [B, V, H, W, 3])."""
        views = [obs[key] if rows is None else obs[key][rows] for key in self.keys]
        return views[0].cpu() if len(views) == 1 else torch.stack(views, dim=1).cpu()

    def _score(self, frames: torch.Tensor, instructions: Sequence[str]) -> torch.Tensor:
        return self.model.score_during_training(frames, instructions).float().cpu()

    def _init_potential(self, obs: Observation, rows: torch.Tensor) -> None:
        if self.cfg.shaping == "potential" and len(rows):
            instructions = [obs["instruction"][i] for i in rows.tolist()]
            self.potential[rows] = self._score(self.frames(obs, rows), instructions)

    def _scored_rows(self, done: torch.Tensor, episode_steps: torch.Tensor) -> torch.Tensor:
        if self.cfg.frequency == "step":
            return torch.ones_like(done)
        if self.cfg.frequency == "every_k":
            return (episode_steps % self.cfg.every_k == 0) | done
        return done.clone()

    def _model_term(
        self, reached: Observation, done: torch.Tensor, next_obs: Observation, episode_steps: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(model term [N], success probability [N] or None) for the states ``reached``, the
        ``episode_steps``-th state of each world's episode."""
        scored = self._scored_rows(done, episode_steps)
        rows = scored.nonzero().squeeze(-1)
        instructions = [reached["instruction"][i] for i in rows.tolist()]
        frames = self.frames(reached, rows)
        score = torch.zeros(self.num_envs)
        success = torch.zeros(self.num_envs) if self.cfg.success_bonus else None
        if len(rows) and success is not None:
            row_score, row_success = self.model.score_and_success_during_training(frames, instructions)
            score[rows] = row_score.float().cpu()
            success[rows] = row_success.float().cpu()
        elif len(rows):
            score[rows] = self._score(frames, instructions)
        if self.cfg.shaping == "potential":
            phi_next = torch.where(scored, score, self.potential)
            term = potential_shaping(self.potential, phi_next, self.cfg.gamma)
            self.potential = phi_next
            self._init_potential(next_obs, done.nonzero().squeeze(-1))
        elif self.cfg.frequency == "every_k":
            # A score stands for the steps since the previous scoring (at the last multiple of k),
            # so returns keep the scale they have when every step is scored.
            k = self.cfg.every_k
            since = episode_steps - k * torch.div(episode_steps - 1, k, rounding_mode="floor")
            term = torch.where(scored, score * since, torch.zeros_like(score))
        else:
            term = score
        return term, success

    # ------------------------------------------------------------------ BatchedEnv
    def reset(self, seed=None, env_ids: torch.Tensor | None = None) -> tuple[Observation, dict[str, Any]]:  # noqa: ANN001
        obs, info = self.env.reset(seed=seed, env_ids=env_ids)
        rows = torch.arange(self.num_envs) if env_ids is None else torch.as_tensor(env_ids).cpu()
        self._wait_worker()
        self.episode_steps[rows] = 0
        self.episode_return[rows] = 0
        self._init_potential(obs, rows)
        return obs, info

    def step(self, action: torch.Tensor) -> StepResult:
        result = self.env.step(action)
        done = result.done.cpu()
        self.episode_steps += 1
        reached = result.info["final_obs"]
        env_reward = result.reward.cpu().float()
        if self._worker is not None:
            snapshot = (self._copy_frames(reached), done.clone(), self._copy_frames(result.obs))
            future = self._worker.submit(self._deferred_term, *snapshot, self.episode_steps.clone())
            result.info[MODEL_REWARD_KEY] = future
            reward = self.cfg.env_weight * env_reward
        else:
            term, success = self._model_term(reached, done, result.obs, self.episode_steps)
            reward = self._combine(env_reward, term, success, self.cfg.env_weight)
            self._report_returns(result, reward, done)
        self.episode_steps[done] = 0
        result.reward = reward.to(result.reward.device)
        return result

    def _copy_frames(self, obs: Observation) -> Observation:
        copied: Observation = {key: obs[key].clone() for key in self.keys}
        copied["instruction"] = list(obs["instruction"])
        return copied

    def _deferred_term(
        self, reached: Observation, done: torch.Tensor, next_obs: Observation, episode_steps: torch.Tensor
    ) -> torch.Tensor:
        term, success = self._model_term(reached, done, next_obs, episode_steps)
        return self._combine(torch.zeros_like(term), term, success, 0.0)

    def _combine(
        self, env_reward: torch.Tensor, term: torch.Tensor, success: torch.Tensor | None, env_weight: float
    ) -> torch.Tensor:
        """``combine_rewards`` with the config's model weight and success bonus."""
        cfg = self.cfg
        return combine_rewards(
            env_reward, term, env_weight, cfg.model_weight, success, cfg.success_bonus, cfg.success_threshold
        )

    def _report_returns(self, result: StepResult, reward: torch.Tensor, done: torch.Tensor) -> None:
        """Episode returns in ``info["episode"]`` become those of the mixed reward (the environment's
        own stays as ``env_return``)."""
        self.episode_return += reward
        episode = result.info.get("episode")
        if episode is not None:
            episode["env_return"] = episode["return"]
            episode["return"] = self.episode_return.to(episode["return"].device)
        self.episode_return = torch.where(done, torch.zeros_like(self.episode_return), self.episode_return)

    def _wait_worker(self) -> None:
        if self._worker is not None:
            self._worker.submit(lambda: None).result()

    def state_dict(self) -> dict[str, Any]:
        self._wait_worker()
        state = self.env.state_dict()
        state["reward_model_env"] = {name: getattr(self, name).clone() for name in TRACKED_STATE}
        return state

    def load_state_dict(self, state: dict[str, Any]) -> Observation:
        state = dict(state)
        own = state.pop("reward_model_env", None)
        obs = self.env.load_state_dict(state)
        if own is not None:
            for name in TRACKED_STATE:
                setattr(self, name, own[name].clone())
        return obs

    def world_seed(self, seed: int, world: int) -> int | list[int]:
        return self.env.world_seed(seed, world)

    def close(self) -> None:
        if self._worker is not None:
            self._worker.shutdown(wait=True)
        self.env.close()


def resolve_model_rewards(pending: list[tuple[int, slice, Future]], rewards: torch.Tensor) -> None:
    """Add each pending model term into ``rewards[t, rows]`` (worker mode, at the end of a rollout)."""
    for t, rows, future in pending:
        rewards[t, rows] += future.result().to(rewards.device, rewards.dtype)


def wrap_with_reward_model(env: BatchedEnv, cfg: RewardConfig) -> BatchedEnv:
    """``env`` itself when ``cfg.model`` is empty, else a ``RewardModelEnv`` with the built model."""
    if not cfg.model:
        return env
    from vla_rl.rewards.registry import build_reward_model

    model = build_reward_model(cfg.model, cfg.path, cfg.options)
    return RewardModelEnv(env, model.eval(), cfg)
