"""A GPU-parallel ManiSkill3 env (from ``gym.make(..., num_envs=N)``) behind the ``BatchedEnv`` contract.

Autoreset mirrors ManiSkill's ``ManiSkillVectorEnv``: after a step, worlds whose episode ended are
reset with ``reset(options={"env_idx": ids})`` and the last observation of the finished episode is
kept for ``info["final_obs"]``. It is done here rather than by that wrapper so that the final
observation is mapped (and copied) before the reset overwrites ManiSkill's buffers.

Seeding. ManiSkill seeds a reset *call*, not a world: ``reset(seed=[s0, s1, ...])`` seeds the
per-world numpy generators with ``s_i`` but torch, which most tasks (``PickCube``, ``PushCube``,
...) sample initial states with, only with ``s0``, so in one call world ``i``'s initial state also
depends on its position in the batch. To give each world a state that depends on its seed alone,
a seeded reset resets the worlds one at a time, each call with ``seed=[s] * num_envs`` and
``env_idx=[i]``. A seeded reset of k worlds therefore costs k ManiSkill resets (each renders the
cameras of all worlds); unseeded resets and autoresets are one call, drawing from ManiSkill's own
generators. World ``i`` of ``reset(seed=s)`` gets ``world_seed(s, i)``, a 31-bit integer from
``numpy.random.SeedSequence([s, i])``.
"""

from __future__ import annotations

from collections.abc import Sequence
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
from vla_rl.sims.maniskill.observations import ObservationLayout, map_observation

from vla_rl.envs.base import BatchedEnv, Observation, StepResult, world_seeds

SEED_BITS = 31
"""ManiSkill draws its seeds below 2**31; seeds made from lists of ints are kept there too."""


class ManiSkillBatchedEnv(BatchedEnv):
    """Wraps a ManiSkill env made with ``num_envs`` parallel worlds.

    ``instruction`` is the text of every world, or ``None`` to read the task's
    ``get_language_instruction()`` (one string per world) after every reset.
    """

    def __init__(
        self,
        env: gym.Env,
        *,
        layout: ObservationLayout,
        instruction: str | None,
        max_episode_steps: int,
        ignore_terminations: bool = False,
        device: str | torch.device = "cpu",
    ) -> None:
        if max_episode_steps < 1:
            raise ValueError(f"max_episode_steps must be >= 1, got {max_episode_steps}")
        self.env = env
        self.base = env.unwrapped
        self.num_envs = int(self.base.num_envs)
        self.device = torch.device(device)
        self.sim_device = torch.device(self.base.device)
        self.layout = layout
        self.max_episode_steps = int(max_episode_steps)
        self.control_hz = float(self.base.control_freq)
        self.ignore_terminations = ignore_terminations
        self._fixed_instruction = instruction
        self._instructions = [instruction or ""] * self.num_envs

        single = self.base.single_action_space
        if not isinstance(single, gym.spaces.Box) or len(single.shape) != 1:
            raise TypeError(f"only flat Box action spaces are supported, got {single}")
        if not (np.all(np.isfinite(single.low)) and np.all(np.isfinite(single.high))):
            raise ValueError("the ManiSkill action space must be bounded to rescale from [-1, 1]")
        self._action_low = torch.as_tensor(single.low, dtype=torch.float32, device=self.sim_device)
        self._action_high = torch.as_tensor(single.high, dtype=torch.float32, device=self.sim_device)
        self.action_space = gym.spaces.Box(-1.0, 1.0, single.shape, np.float32)

        self._episodes = EpisodeStats(self.num_envs, self.device)
        obs, _ = self.reset()  # reads shapes and checks that the cameras exist
        self.observation_space = space_of(obs)

    # ---------------------------------------------------------------- helpers
    def _observe(self, raw: dict[str, Any]) -> Observation:
        return map_observation(raw, self.layout, self._instructions, self.device)

    def _read_instructions(self, ids: Sequence[int]) -> None:
        if self._fixed_instruction is not None:
            return
        texts = self.base.get_language_instruction()
        for i in ids:
            self._instructions[i] = str(texts[i])

    def scale_action(self, action: torch.Tensor) -> torch.Tensor:
        """[-1, 1] -> the env's bounds: ``low + (a + 1) / 2 * (high - low)``, after clipping."""
        low, high = self._action_low, self._action_high
        return unit_to_env_action(action, self.num_envs, self.action_dim, low, high, 1.0, self.sim_device)

    # ---------------------------------------------------------------- contract
    def world_seed(self, seed: int, world: int) -> int:
        return int_seed([seed, world], SEED_BITS)

    def reset(
        self, seed: int | Sequence[int | list[int]] | None = None, env_ids: torch.Tensor | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        ids = reset_ids(env_ids, self.num_envs)
        seeds = None if seed is None else [int_seed(s, SEED_BITS) for s in world_seeds(self, seed, ids)]

        if not ids:  # nothing to reset: the current observation
            raw, info = self.base.get_obs(), {}
        elif seeds is None:
            options = None if env_ids is None else {"env_idx": torch.tensor(ids, device=self.sim_device)}
            raw, info = self.env.reset(options=options)
        else:
            for world, world_seed in zip(ids, seeds, strict=True):
                one = {"env_idx": torch.tensor([world], device=self.sim_device)}
                raw, info = self.env.reset(seed=[world_seed] * self.num_envs, options=one)
        self._read_instructions(ids)
        self._episodes.start(torch.tensor(ids, dtype=torch.long, device=self.device))
        return self._observe(raw), info

    def step(self, action: torch.Tensor) -> StepResult:
        raw, reward, terminated, truncated, info = self.env.step(self.scale_action(action))
        n, device = self.num_envs, self.device
        reward = batch_vector(reward, n, device, torch.float32)
        terminated = batch_vector(terminated, n, device, torch.bool)
        if self.ignore_terminations:
            terminated.zero_()
        success = info.get("success")
        success = torch.zeros(n, dtype=torch.bool, device=device) if success is None else success
        success = batch_vector(success, n, device, torch.bool)
        self._episodes.add(reward, success)
        truncated = batch_vector(truncated, n, device, torch.bool)
        truncated |= self._episodes.length >= self.max_episode_steps
        done = terminated | truncated

        obs = self._observe(raw)
        out_info: dict[str, Any] = {"success": success}
        if done.any():
            ended = done.nonzero().view(-1)
            out_info["episode"] = self._episodes.report(success, self.device)
            final = obs
            raw, _ = self.env.reset(options={"env_idx": ended.to(self.sim_device)})
            self._read_instructions(ended.tolist())
            self._episodes.start(ended)
            obs = self._observe(raw)
            out_info["final_obs"] = merge_rows(obs, final, done)
        else:
            out_info["final_obs"] = clone_obs(obs)
        return StepResult(obs=obs, reward=reward, terminated=terminated, truncated=truncated, info=out_info)

    def close(self) -> None:
        self.env.close()
