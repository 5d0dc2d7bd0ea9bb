"""An Isaac Lab RL env (``ManagerBasedRLEnv`` or ``DirectRLEnv``) behind the ``BatchedEnv`` contract.

* Observations: the ``policy`` group becomes ``"proprio"``, the ``critic`` group (where the task has
  one) ``"privileged"``, each camera sensor named in ``cfg.cameras`` ``"rgb_<camera>"``.
* Autoreset: Isaac Lab resets finished worlds inside ``step``. With ``compute_final_obs`` switched on
  in the env config, it puts the observation taken just before that reset in ``extras["final_obs"]``,
  which becomes ``info["final_obs"]`` here. Camera images (and observations, on Isaac Lab versions
  without that flag) are copied by ``PreResetCapture``, which runs just before the env's
  ``_reset_idx`` inside ``step``.
* Terminated / truncated: Isaac Lab splits its termination terms by their ``time_out`` flag; a world
  that both times out and terminates counts as terminated only (nothing to bootstrap).
* Success: the termination terms named by the task spec (``termination_manager.get_term``), read at
  the step, before the reset.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from vla_rl.sims.batching import (
    EpisodeStats,
    batch_vector,
    clone_obs,
    int_seed,
    merge_rows,
    reset_ids,
    space_of,
    unit_to_env_action,
)
from vla_rl.sims.isaaclab.conversions import flatten_group, rgb_uint8
from vla_rl.sims.isaaclab.settings import DEFAULT_SUCCESS_TERMS, IsaacLabSettings

from vla_rl.envs.base import BatchedEnv, Observation, StepResult, world_seeds

ANY_TERMINATION = "terminated"
"""Success-term name meaning "any termination that is not a time out"."""


class PreResetCapture:
    """Copies what ``capture`` returns just before the env's ``_reset_idx`` runs, while armed.

    It wraps the instance's ``_reset_idx`` (which Isaac Lab's ``step`` calls on the finished worlds),
    so the capture sees the last state of the finished episodes. Disarmed (during ``reset``) it only
    passes the call on.
    """

    def __init__(self, env: Any, capture: Callable[[], dict[str, Any]]) -> None:
        self._reset_idx = env._reset_idx
        self._capture = capture
        self.armed = False
        self.captured: dict[str, Any] | None = None
        env._reset_idx = self._capturing_reset_idx

    def _capturing_reset_idx(self, env_ids: Any, *args: Any, **kwargs: Any) -> Any:
        if self.armed and self.captured is None:
            self.captured = self._capture()
        return self._reset_idx(env_ids, *args, **kwargs)

    def arm(self) -> None:
        self.armed, self.captured = True, None

    def disarm(self) -> dict[str, Any] | None:
        self.armed = False
        return self.captured


class IsaacLabBatchedEnv(BatchedEnv):
    """Wraps an unwrapped Isaac Lab env built for ``settings`` (see ``launch.make_isaaclab_env``)."""

    def __init__(self, env: Any, settings: IsaacLabSettings) -> None:
        self._env = env
        self._settings = settings
        self.num_envs = int(env.num_envs)
        self.device = torch.device(settings.device)
        self._sim_device = env.device
        self._manager_based = hasattr(env, "termination_manager")
        self._native_final_obs = bool(getattr(env.cfg, "compute_final_obs", False))
        self._success_terms = self._resolve_success_terms()
        self.max_episode_steps = int(env.max_episode_length)
        self.control_hz = 1.0 / float(env.step_dt)
        self._instructions = [settings.instruction] * self.num_envs

        space = env.single_action_space
        bounded = bool(np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high)))
        self._action_low = self._action_high = None
        if bounded:
            self._action_low = torch.as_tensor(space.low, dtype=torch.float32, device=self._sim_device)
            self._action_high = torch.as_tensor(space.high, dtype=torch.float32, device=self._sim_device)
        self.action_space = gym.spaces.Box(-1.0, 1.0, space.shape, np.float32)

        needs_capture = bool(settings.cameras) or not self._native_final_obs
        self._capture = PreResetCapture(env, self._pre_reset_snapshot) if needs_capture else None

        self._obs = self._reset_worlds(list(range(self.num_envs)), seeds=None)
        self.observation_space = space_of(self._obs)
        self._episodes = EpisodeStats(self.num_envs, self.device)

    # ---------------------------------------------------------------- reading the env
    def _resolve_success_terms(self) -> tuple[str, ...]:
        explicit = self._settings.success_terms
        wanted = (
            explicit if explicit is not None else (self._settings.spec.success_terms or DEFAULT_SUCCESS_TERMS)
        )
        active = list(self._env.termination_manager.active_terms) if self._manager_based else []
        available = [ANY_TERMINATION, *active]
        missing = [name for name in wanted if name not in available]
        if explicit is not None and missing:
            raise ValueError(
                f"env.options.success_terms: {missing} are not termination terms; terms: {available}"
            )
        return tuple(name for name in wanted if name in available)

    def _observation(self, groups: dict[str, Any], images: dict[str, Any]) -> Observation:
        options = self._settings.options
        if options.policy_group not in groups:
            raise ValueError(
                f"env.options.policy_group: {options.policy_group!r} is not an observation group of "
                f"{self._settings.task!r}; groups: {sorted(groups)}"
            )
        obs: Observation = {
            "proprio": flatten_group(groups[options.policy_group], self.num_envs, self.device)
        }
        if options.privileged_group in groups:
            obs["privileged"] = flatten_group(groups[options.privileged_group], self.num_envs, self.device)
        for name, image in images.items():
            obs[f"rgb_{name}"] = rgb_uint8(image, self.device)
        obs["instruction"] = list(self._instructions)
        return obs

    def _images(self) -> dict[str, Any]:
        images = {}
        for name in self._settings.cameras:
            output = self._env.scene.sensors[name].data.output  # "rgb", or "rgba" where only that is set
            images[name] = output["rgb"] if "rgb" in output else output["rgba"]
        return images

    def _compute_groups(self) -> dict[str, Any]:
        if self._manager_based:
            return self._env.observation_manager.compute()
        return self._env._get_observations()

    def _pre_reset_snapshot(self) -> dict[str, Any]:
        images = {name: torch.as_tensor(image).clone() for name, image in self._images().items()}
        groups = None if self._native_final_obs else _clone_tree(self._compute_groups())
        return {"images": images, "groups": groups}

    def _success(self, terminated: torch.Tensor) -> torch.Tensor:
        success = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        for name in self._success_terms:
            value = terminated if name == ANY_TERMINATION else self._env.termination_manager.get_term(name)
            success |= torch.as_tensor(value).to(self.device, torch.bool)
        return success

    # ---------------------------------------------------------------- resets
    def world_seed(self, seed: int, world: int) -> int:
        """Isaac Lab seeds are ints: a 32-bit draw of ``SeedSequence([seed, world])``."""
        return int_seed([seed, world])

    def _reset_ids(self, ids: list[int]) -> dict[str, Any]:
        """Resets worlds ``ids`` of the Isaac Lab env and returns its observation groups."""
        env = self._env
        if self._manager_based:  # ManagerBasedEnv.reset(env_ids=...) resets only those worlds
            groups, _ = env.reset(env_ids=torch.tensor(ids, dtype=torch.int64, device=self._sim_device))
            return groups
        # DirectRLEnv.reset resets every world; this is its sequence restricted to ``ids``.
        env._reset_idx(torch.tensor(ids, dtype=torch.int32, device=self._sim_device))
        env.scene.write_data_to_sim()
        env.sim.forward()
        if getattr(env, "has_rtx_sensors", False):
            for _ in range(int(getattr(env.cfg, "num_rerenders_on_reset", 0))):
                env.sim.render()
        return env._get_observations()

    def _reset_worlds(self, ids: list[int], seeds: list[int] | None) -> Observation:
        if seeds is None:
            groups = self._reset_ids(ids)
        elif self._settings.options.seeding == "per_world":
            for world, seed in zip(ids, seeds, strict=True):
                self._env.seed(seed)
                groups = self._reset_ids([world])
        else:
            self._env.seed(int_seed(seeds))
            groups = self._reset_ids(ids)
        return self._observation(groups, self._images())

    def reset(
        self, seed: int | Sequence[int | list[int]] | None = None, env_ids: torch.Tensor | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        ids = sorted(set(reset_ids(env_ids, self.num_envs)))
        seeds = None if seed is None else [int_seed(s) for s in world_seeds(self, seed, ids)]
        if not ids:
            return clone_obs(self._obs), {}
        fresh = self._reset_worlds(ids, seeds)
        rows = torch.tensor(ids, dtype=torch.int64, device=self.device)
        for key, value in fresh.items():
            if key != "instruction":
                self._obs[key][rows] = value[rows]
        self._episodes.start(rows)
        return clone_obs(self._obs), {}

    # ---------------------------------------------------------------- stepping
    def step(self, action: torch.Tensor) -> StepResult:
        low, high, bound = self._action_low, self._action_high, self._settings.options.action_bound
        env_action = unit_to_env_action(
            action, self.num_envs, self.action_dim, low, high, bound, self._sim_device
        )
        if self._capture is not None:
            self._capture.arm()
        try:
            groups, reward, terminated, time_outs, extras = self._env.step(env_action)
        finally:
            snapshot = self._capture.disarm() if self._capture is not None else None
        native_final = extras.pop("final_obs", None)  # popped: a stale entry must not reach later steps
        # copies: Isaac Lab overwrites these buffers in place on its next step
        terminated = batch_vector(terminated, self.num_envs, self.device, torch.bool)
        truncated = batch_vector(time_outs, self.num_envs, self.device, torch.bool) & ~terminated
        done = terminated | truncated
        success = self._success(terminated)
        reward = batch_vector(reward, self.num_envs, self.device, torch.float32)

        self._obs = self._observation(groups, self._images())
        final = clone_obs(self._obs)
        if bool(done.any()):
            final = merge_rows(final, self._pre_reset_observation(native_final, snapshot), done)

        self._episodes.add(reward, success)
        info: dict[str, Any] = {"success": success, "final_obs": final}
        if bool(done.any()):
            info["episode"] = self._episodes.report(success, self.device)
            self._episodes.start(done)
        return StepResult(clone_obs(self._obs), reward, terminated, truncated, info)

    def _pre_reset_observation(self, native_final: Any, snapshot: dict[str, Any] | None) -> Observation:
        groups = native_final if self._native_final_obs else (snapshot or {}).get("groups")
        images = (snapshot or {}).get("images", {}) if self._settings.cameras else {}
        if groups is None or len(images) != len(self._settings.cameras):
            raise RuntimeError(
                "Isaac Lab reset worlds in step without exposing their last observation (no "
                "extras['final_obs'] and no _reset_idx call); this Isaac Lab version is not supported"
            )
        return self._observation(groups, images)

    def close(self) -> None:
        self._env.close()


def _clone_tree(groups: Any) -> Any:
    if isinstance(groups, dict):
        return {key: _clone_tree(value) for key, value in groups.items()}
    return torch.as_tensor(groups).clone()
