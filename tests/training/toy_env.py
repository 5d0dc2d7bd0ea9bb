"""A tiny snapshot-capable batched env (``env.backend=toy_env:make_toy_point``) for trainer tests.

A 2-D point must reach a random target: ``pos += 0.2 * action``, reward ``-|target - pos|``,
success when the distance is below 0.15, episodes of ``max_episode_steps`` (default 10). With
``cameras`` it renders ``rgb_<camera>`` images (target red, point green) for video tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from vla_rl.envs import BatchedEnv, EnvConfig, StepResult

STEP_SCALE = 0.2
SUCCESS_RADIUS = 0.15


class ToyPointEnv(BatchedEnv):
    def __init__(self, cfg: EnvConfig) -> None:
        self.num_envs = cfg.num_envs
        self.device = torch.device(cfg.device)
        self.max_episode_steps = cfg.max_episode_steps if cfg.max_episode_steps > 0 else 10
        self.control_hz = cfg.control_hz
        self.cameras = list(cfg.cameras)
        self.image_size = cfg.image_size
        spaces: dict[str, gym.Space] = {
            "proprio": gym.spaces.Box(-np.inf, np.inf, (2,), np.float32),
            "privileged": gym.spaces.Box(-np.inf, np.inf, (2,), np.float32),
        }
        for camera in self.cameras:
            spaces[f"rgb_{camera}"] = gym.spaces.Box(0, 255, (self.image_size, self.image_size, 3), np.uint8)
        self.observation_space = gym.spaces.Dict(spaces)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.pos = np.zeros((self.num_envs, 2))
        self.target = np.zeros((self.num_envs, 2))
        self.steps = np.zeros(self.num_envs, dtype=np.int64)
        self.ep_return = np.zeros(self.num_envs)
        self.ep_success_once = np.zeros(self.num_envs, dtype=bool)
        self.rngs = [np.random.default_rng(i) for i in range(self.num_envs)]
        self.constructed = True

    def _reset_rows(self, rows: np.ndarray) -> None:
        for i in rows:
            self.pos[i] = self.rngs[i].uniform(-1, 1, 2)
            self.target[i] = self.rngs[i].uniform(-1, 1, 2)
        self.steps[rows] = 0
        self.ep_return[rows] = 0.0
        self.ep_success_once[rows] = False

    def _obs(self) -> dict[str, Any]:
        obs: dict[str, Any] = {
            "proprio": torch.tensor(self.pos, dtype=torch.float32),
            "privileged": torch.tensor(self.target, dtype=torch.float32),
        }
        for camera in self.cameras:
            obs[f"rgb_{camera}"] = self._render()
        return obs

    def _render(self) -> torch.Tensor:
        size = self.image_size
        image = np.zeros((self.num_envs, size, size, 3), dtype=np.uint8)
        for channel, points in ((0, self.target), (1, self.pos)):
            pix = np.clip(((points + 2) / 4 * (size - 1)).round().astype(int), 0, size - 1)
            image[np.arange(self.num_envs), pix[:, 1], pix[:, 0], channel] = 255
        return torch.from_numpy(image)

    def reset(
        self, seed: int | Sequence[int] | None = None, env_ids: torch.Tensor | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        rows = np.arange(self.num_envs) if env_ids is None else torch.as_tensor(env_ids).numpy()
        if seed is not None:
            seeds = [seed + int(i) for i in rows] if isinstance(seed, int) else list(seed)
            for i, s in zip(rows, seeds, strict=True):
                self.rngs[i] = np.random.default_rng(s)
        self._reset_rows(rows)
        return self._obs(), {}

    def step(self, action: torch.Tensor) -> StepResult:
        self.pos = self.pos + STEP_SCALE * np.clip(action.double().numpy(), -1, 1)
        distance = np.linalg.norm(self.target - self.pos, axis=1)
        reward = -distance
        success = distance < SUCCESS_RADIUS
        self.steps += 1
        self.ep_return += reward
        self.ep_success_once |= success
        truncated = self.steps >= self.max_episode_steps
        terminated = np.zeros(self.num_envs, dtype=bool)
        info: dict[str, Any] = {"success": torch.from_numpy(success.copy())}
        final_obs = self._obs()
        if truncated.any():
            info["episode"] = {
                "return": torch.tensor(self.ep_return, dtype=torch.float32),
                "length": torch.from_numpy(self.steps.copy()),
                "success": torch.from_numpy(success.copy()),
                "success_once": torch.from_numpy(self.ep_success_once.copy()),
            }
            self._reset_rows(np.flatnonzero(truncated))
        obs = self._obs()
        info["final_obs"] = final_obs
        return StepResult(
            obs,
            torch.tensor(reward, dtype=torch.float32),
            torch.from_numpy(terminated),
            torch.from_numpy(truncated),
            info,
        )

    def state_dict(self) -> dict[str, Any]:
        return {
            "pos": self.pos.copy(),
            "target": self.target.copy(),
            "steps": self.steps.copy(),
            "ep_return": self.ep_return.copy(),
            "ep_success_once": self.ep_success_once.copy(),
            "rngs": [rng.bit_generator.state for rng in self.rngs],
        }

    def load_state_dict(self, state: dict[str, Any]) -> dict[str, Any]:
        self.pos = state["pos"].copy()
        self.target = state["target"].copy()
        self.steps = state["steps"].copy()
        self.ep_return = state["ep_return"].copy()
        self.ep_success_once = state["ep_success_once"].copy()
        for rng, rng_state in zip(self.rngs, state["rngs"], strict=True):
            rng.bit_generator.state = rng_state
        return self._obs()


TOY_BACKEND = "toy_env:make_toy_point"
"""``env.backend`` of this env: a backend of ours plugged in by its import path."""

BUILT: list[ToyPointEnv] = []
"""Every env built, so tests can check whether (and how many) envs were constructed."""


def make_toy_point(cfg: EnvConfig) -> ToyPointEnv:
    env = ToyPointEnv(cfg)
    BUILT.append(env)
    return env


TOY_OVERRIDES = [
    f"env.backend={TOY_BACKEND}",
    "env.task=point",
    "env.num_envs=8",
    "env.num_threads=1",
    "algorithm.num_steps=10",
    "algorithm.num_minibatches=2",
    "algorithm.num_epochs=2",
    "policy.hidden_sizes=[16,16]",
    "logger.progress_bar=false",
    "logger.tensorboard=false",
    "logger.wandb_mode=disabled",
    "eval.num_episodes=8",
    "eval.video=false",
    "max_minutes=0",
]
"""Overrides turning the default config into a seconds-long toy run."""
