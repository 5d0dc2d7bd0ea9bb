"""Gymnasium environments behind the ``BatchedEnv`` contract (backend ``"gymnasium"``).

Any Gymnasium id (or an existing ``gym.vector.VectorEnv``) becomes a batched, torch-speaking
environment: observations are mapped to the flat dict of tensors the policies expect, actions
are taken in [-1, 1] and rescaled to the wrapped env's bounds, and episodes autoreset in the
same step with the finished episode's last observation in ``info["final_obs"]``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from vla_rl.envs.base import BatchedEnv, Observation, StepResult, world_seeds
from vla_rl.envs.config import EnvConfig

VECTOR_OBS_KEY = "proprio"
"""Key under which a Box (non-dict) observation is exposed."""
IMAGE_OBS_KEY = "rgb_pixels"
"""Key under which a Box observation that is an RGB image (uint8 [H, W, 3]) is exposed, so that the
``cnn`` policy reads it as a camera."""
SUCCESS_INFO_KEYS = ("success", "is_success")
"""Info keys read (first found wins) as the per-step success flag."""


def _as_float32(space: gym.Space) -> gym.Space:
    """float64 Boxes are exposed as float32, matching the tensors ``step`` returns."""
    if isinstance(space, gym.spaces.Box) and space.dtype == np.float64:
        return gym.spaces.Box(space.low.astype(np.float32), space.high.astype(np.float32), dtype=np.float32)
    return space


def _box_key(space: gym.spaces.Box) -> str:
    """``IMAGE_OBS_KEY`` for an RGB image Box, ``VECTOR_OBS_KEY`` for any other."""
    is_image = space.dtype == np.uint8 and len(space.shape) == 3 and space.shape[-1] == 3
    return IMAGE_OBS_KEY if is_image else VECTOR_OBS_KEY


def _observation_space_as_dict(space: gym.Space) -> gym.spaces.Dict:
    if isinstance(space, gym.spaces.Dict):
        return gym.spaces.Dict({key: _as_float32(sub) for key, sub in space.spaces.items()})
    if isinstance(space, gym.spaces.Box):
        return gym.spaces.Dict({_box_key(space): _as_float32(space)})
    raise TypeError(f"unsupported observation space {space}; expected Box or Dict")


class GymnasiumBatchedEnv(BatchedEnv):
    """Wraps ``num_envs`` copies of a Gymnasium env (or a ready vector env) as a ``BatchedEnv``.

    Episode statistics (return, length, success at the end, success at any step) are tracked
    here rather than taken from wrappers, so they are identical for every wrapped env.
    """

    def __init__(
        self,
        env_fn: Callable[[], gym.Env] | None = None,
        num_envs: int = 1,
        vector_env: gym.vector.VectorEnv | None = None,
        device: str | torch.device = "cpu",
        control_hz: float | None = None,
    ) -> None:
        if (env_fn is None) == (vector_env is None):
            raise ValueError("give exactly one of env_fn or vector_env")
        if vector_env is None:
            vector_env = gym.vector.SyncVectorEnv(
                [env_fn] * num_envs, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP
            )
        mode = vector_env.metadata.get("autoreset_mode")
        if mode is not None and mode != gym.vector.AutoresetMode.SAME_STEP:
            raise ValueError(f"the vector env must autoreset in SAME_STEP mode, got {mode}")
        self.vector_env = vector_env
        self.num_envs = int(vector_env.num_envs)
        self.device = torch.device(device)

        single_action = vector_env.single_action_space
        if not isinstance(single_action, gym.spaces.Box) or len(single_action.shape) != 1:
            raise TypeError(f"only 1-D Box action spaces are supported, got {single_action}")
        if not (np.all(np.isfinite(single_action.low)) and np.all(np.isfinite(single_action.high))):
            raise ValueError("the wrapped action space must be bounded to rescale from [-1, 1]")
        self._action_low = single_action.low.astype(np.float64)
        self._action_high = single_action.high.astype(np.float64)
        self._action_dtype = single_action.dtype
        self.action_space = gym.spaces.Box(-1.0, 1.0, single_action.shape, np.float32)
        self.action_scale = (0.5 * (self._action_high - self._action_low)).astype(np.float32)
        self._is_dict_obs = isinstance(vector_env.single_observation_space, gym.spaces.Dict)
        self.observation_space = _observation_space_as_dict(vector_env.single_observation_space)
        self._box_key = next(iter(self.observation_space.spaces))
        """The one key of a Box observation (unused for Dict observations)."""

        self.max_episode_steps = _time_limit(vector_env)
        fps = vector_env.metadata.get("render_fps")
        self.control_hz = float(control_hz if control_hz is not None else (fps or 0.0))

        self._episode_return = np.zeros(self.num_envs, dtype=np.float64)
        self._episode_length = np.zeros(self.num_envs, dtype=np.int64)
        self._episode_success_once = np.zeros(self.num_envs, dtype=bool)

    # ---------------------------------------------------------------- conversions
    def _obs_to_torch(self, obs: Any) -> Observation:
        if not self._is_dict_obs:
            obs = {self._box_key: obs}
        out: Observation = {}
        for key, value in obs.items():
            array = np.asarray(value)
            if array.dtype == np.float64:
                array = array.astype(np.float32)
            out[key] = torch.as_tensor(array, device=self.device)
        return out

    def _final_obs(self, obs: Observation, info: dict[str, Any], done: np.ndarray) -> Observation:
        final = {key: value.clone() for key, value in obs.items()}
        if not done.any():
            return final
        finished = info["final_obs"]
        for i in np.flatnonzero(done):
            row = finished[i] if self._is_dict_obs else {self._box_key: finished[i]}
            for key, value in row.items():
                final[key][i] = torch.as_tensor(np.asarray(value), dtype=final[key].dtype)
        return final

    def _scale_action(self, action: torch.Tensor) -> np.ndarray:
        unit = action.detach().to("cpu", torch.float64).numpy()
        if unit.shape != (self.num_envs, self.action_dim):
            raise ValueError(f"action must have shape {(self.num_envs, self.action_dim)}, got {unit.shape}")
        unit = np.clip(unit, -1.0, 1.0)
        scaled = self._action_low + (unit + 1.0) * 0.5 * (self._action_high - self._action_low)
        return scaled.astype(self._action_dtype)

    def _success(self, info: dict[str, Any], done: np.ndarray) -> np.ndarray:
        """Success flags at this step; finished worlds read their final (pre-reset) info."""
        success = _masked_flag(info, self.num_envs)
        if done.any() and "final_info" in info:
            from_final = _masked_flag(info["final_info"], self.num_envs)
            success[done] = from_final[done]
        return success

    # ---------------------------------------------------------------- contract
    def world_seed(self, seed: int, world: int) -> int:
        """Gymnasium seeds are ints: world ``i`` gets ``seed + i``."""
        return int(seed) + int(world)

    def reset(
        self, seed: int | Sequence[int | list[int]] | None = None, env_ids: torch.Tensor | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        if env_ids is None:
            mask = np.ones(self.num_envs, dtype=bool)
        else:
            mask = np.zeros(self.num_envs, dtype=bool)
            mask[torch.as_tensor(env_ids).cpu().numpy()] = True
        ids = np.flatnonzero(mask)
        seeds: list[int | None] = [None] * self.num_envs
        for i, world_seed in zip(ids, world_seeds(self, seed, ids), strict=True):
            seeds[i] = None if world_seed is None else int(world_seed)
        options = None if env_ids is None else {"reset_mask": mask}
        obs, info = self.vector_env.reset(seed=seeds, options=options)
        self._episode_return[mask] = 0.0
        self._episode_length[mask] = 0
        self._episode_success_once[mask] = False
        return self._obs_to_torch(obs), info

    def step(self, action: torch.Tensor) -> StepResult:
        step = self.vector_env.step(self._scale_action(action))
        obs_np, reward_np, terminated_np, truncated_np, info = step
        terminated_np = np.asarray(terminated_np, dtype=bool)
        truncated_np = np.asarray(truncated_np, dtype=bool)
        reward_np = np.asarray(reward_np, dtype=np.float64)
        done = terminated_np | truncated_np
        success = self._success(info, done)

        self._episode_return += reward_np
        self._episode_length += 1
        self._episode_success_once |= success

        obs = self._obs_to_torch(obs_np)
        out_info: dict[str, Any] = {
            "success": torch.as_tensor(success, device=self.device),
            "final_obs": self._final_obs(obs, info, done),
        }
        if done.any():
            out_info["episode"] = {
                "return": torch.tensor(self._episode_return, dtype=torch.float32, device=self.device),
                "length": torch.tensor(self._episode_length, device=self.device),
                "success": torch.as_tensor(success, device=self.device),
                "success_once": torch.tensor(self._episode_success_once, device=self.device),
            }
            self._episode_return[done] = 0.0
            self._episode_length[done] = 0
            self._episode_success_once[done] = False
        return StepResult(
            obs=obs,
            reward=torch.as_tensor(reward_np, dtype=torch.float32, device=self.device),
            terminated=torch.tensor(terminated_np, device=self.device),
            truncated=torch.tensor(truncated_np, device=self.device),
            info=out_info,
        )

    def close(self) -> None:
        self.vector_env.close()


def _time_limit(vector_env: gym.vector.VectorEnv) -> int:
    """Episode step limit from the env spec or a ``TimeLimit`` wrapper; 0 when unknown."""
    spec = getattr(vector_env, "spec", None)
    if spec is not None and spec.max_episode_steps:
        return int(spec.max_episode_steps)
    if hasattr(vector_env, "envs"):
        env = vector_env.envs[0]
        if env.spec is not None and env.spec.max_episode_steps:
            return int(env.spec.max_episode_steps)
        while isinstance(env, gym.Wrapper):
            if isinstance(env, gym.wrappers.TimeLimit):
                return int(env._max_episode_steps)
            env = env.env
    return 0


def _masked_flag(info: dict[str, Any], num_envs: int) -> np.ndarray:
    """Reads a batched boolean info entry (with its ``_key`` validity mask) as bool [N]."""
    for key in SUCCESS_INFO_KEYS:
        if key in info:
            values = np.asarray(info[key]).astype(bool).reshape(num_envs)
            valid = np.asarray(info.get(f"_{key}", np.ones(num_envs, dtype=bool)), dtype=bool)
            return values & valid
    return np.zeros(num_envs, dtype=bool)


def unknown_task_reason(task: str) -> str | None:
    """Why ``task`` is not a registered Gymnasium id (Gymnasium's own suggestion), or ``None``; reads
    the registry only, nothing is built. A ``"module:EnvId"`` task imports its module first, as
    ``gym.make`` does, so that the module can register the id."""
    module, _, env_id = task.rpartition(":")
    try:
        if module:
            importlib.import_module(module)
        gym.spec(env_id)
    except ModuleNotFoundError as error:
        return f"{task}: {error}"
    except gym.error.Error as error:
        return str(error)
    return None


def make_gymnasium_env(cfg: EnvConfig) -> GymnasiumBatchedEnv:
    """``cfg.task`` is a Gymnasium id, ``cfg.options`` its ``gym.make`` kwargs."""
    options = dict(cfg.options)
    if cfg.max_episode_steps > 0:
        options["max_episode_steps"] = cfg.max_episode_steps

    def env_fn() -> gym.Env:
        return gym.make(cfg.task, **options)

    return GymnasiumBatchedEnv(env_fn=env_fn, num_envs=cfg.num_envs, device=cfg.device)
