"""Expose a vla-rl ``BatchedEnv`` as a stable-baselines3 ``VecEnv`` (for side-by-side benchmarks).

Both trainers then step the very same simulator, so a throughput comparison measures the training
stacks, not two different implementations of the task.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.vec_env import VecEnv

from vla_rl.envs import BatchedEnv


class BatchedEnvAsSB3VecEnv(VecEnv):
    """Concatenates the chosen vector observation keys into one flat Box observation."""

    def __init__(self, env: BatchedEnv, obs_keys: tuple[str, ...] = ("proprio", "privileged")) -> None:
        self.env = env
        self.obs_keys = obs_keys
        obs_dim = sum(int(np.prod(env.observation_space[k].shape)) for k in obs_keys)
        observation_space = gym.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32)
        super().__init__(env.num_envs, observation_space, env.action_space)
        self._actions: torch.Tensor | None = None

    def _flatten(self, obs: dict[str, Any]) -> np.ndarray:
        parts = [obs[k].reshape(self.num_envs, -1) for k in self.obs_keys]
        return torch.cat(parts, dim=1).cpu().numpy().astype(np.float32)

    def reset(self) -> np.ndarray:
        obs, _ = self.env.reset(seed=self._seeds[0] if self._seeds else None)
        self._reset_seeds()
        return self._flatten(obs)

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = torch.as_tensor(actions, dtype=torch.float32, device=self.env.device)

    def step_wait(self):  # noqa: ANN201 - SB3's VecEnvStepReturn
        assert self._actions is not None
        result = self.env.step(self._actions.clamp(-1.0, 1.0))
        obs = self._flatten(result.obs)
        done = result.done.cpu().numpy()
        truncated = result.truncated.cpu().numpy()
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        if done.any():
            final = self._flatten(result.info["final_obs"])
            success = result.info["success"].cpu().numpy()
            for i in np.flatnonzero(done):
                infos[i] = {
                    "terminal_observation": final[i],
                    "TimeLimit.truncated": bool(truncated[i]),
                    "is_success": bool(success[i]),
                }
        return obs, result.reward.cpu().numpy(), done, infos

    def close(self) -> None:
        self.env.close()

    def get_attr(self, attr_name: str, indices=None) -> list[Any]:  # noqa: ANN001
        return [getattr(self.env, attr_name, None)] * self.num_envs

    def set_attr(self, attr_name: str, value: Any, indices=None) -> None:  # noqa: ANN001
        setattr(self.env, attr_name, value)

    def env_method(self, method_name: str, *args: Any, indices=None, **kwargs: Any) -> list[Any]:  # noqa: ANN001
        return [getattr(self.env, method_name)(*args, **kwargs)]

    def env_is_wrapped(self, wrapper_class: type, indices=None) -> list[bool]:  # noqa: ANN001
        return [False] * self.num_envs


class SingleWorldGymEnv(gym.Env):
    """One simulated world as a plain ``gymnasium.Env``, the form SB3's own vector envs expect.

    Wraps a one-world ``BatchedEnv``; on the step an episode ends it returns the episode's last
    observation (the batched env has already reset internally, so SB3's ``reset`` call after a
    done starts yet another episode, which costs one extra reset per episode and nothing else).
    """

    def __init__(self, env: BatchedEnv, obs_keys: tuple[str, ...] = ("proprio", "privileged")) -> None:
        if env.num_envs != 1:
            raise ValueError(f"SingleWorldGymEnv wraps a one-world env, got {env.num_envs} worlds")
        self.env = env
        self.obs_keys = obs_keys
        obs_dim = sum(int(np.prod(env.observation_space[k].shape)) for k in obs_keys)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32)
        self.action_space = env.action_space

    def _flatten(self, obs: dict[str, Any]) -> np.ndarray:
        return torch.cat([obs[k].reshape(-1) for k in self.obs_keys]).cpu().numpy().astype(np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):  # noqa: ANN201
        obs, _ = self.env.reset(seed=seed)
        return self._flatten(obs), {}

    def step(self, action: np.ndarray):  # noqa: ANN201
        result = self.env.step(torch.as_tensor(action, dtype=torch.float32).clamp(-1.0, 1.0)[None])
        terminated, truncated = bool(result.terminated[0]), bool(result.truncated[0])
        obs = result.info["final_obs"] if terminated or truncated else result.obs
        info = {"is_success": bool(result.info["success"][0])}
        return self._flatten(obs), float(result.reward[0]), terminated, truncated, info

    def close(self) -> None:
        self.env.close()
