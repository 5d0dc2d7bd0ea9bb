"""MetaWorld (Sawyer arm, 50 manipulation tasks) behind the ``BatchedEnv`` contract.

``EnvConfig.task`` is one v3 task (``"reach-v3"``, MetaWorld's MT1) or a benchmark (``"MT10"``,
``"MT50"``): world ``i`` then runs task ``i mod K`` of the benchmark's ``K`` tasks. Each world is
its own MetaWorld env, stepped in turn. The goal is observable (as in MetaWorld's MT benchmarks).

* Actions are MetaWorld's own: ``[dx, dy, dz, gripper]`` in [-1, 1] (1 cm of hand motion per unit
  per step; gripper -1 opens, +1 closes). Only ``control_mode="ee_delta_pos"`` is accepted.
* Observations: ``proprio`` is hand xyz + gripper opening (the first 4 entries of MetaWorld's
  39-D observation), ``privileged`` the whole 39-D observation, ``rgb_<camera>`` MetaWorld's named
  cameras (``corner``, ``topview``, ``behindGripper`` ...), ``instruction`` the task's sentence,
  ``task_onehot`` the world's task as a one-hot vector over the ``K`` tasks of ``env.task`` in their
  benchmark order (what MetaWorld's ``use_one_hot=True`` appends to its multi-task observations; the
  task identity a state policy without language reads).
* Seeding: a world's seed picks its task variation (goal and object positions) through MetaWorld's
  own sampler (``env.seed`` then ``reset``), so worlds of one task given one seed start alike.
  Without a seed a world continues its generator, so autoresets stay reproducible.
* ``options.variations`` (default ``"sampled"``, evaluations ``"benchmark"``): ``"sampled"`` is the
  seeded sampling above, a new variation every episode (training); ``"benchmark"`` plays only the 50
  fixed variations per task of MetaWorld's benchmark (``train_tasks`` of ``metaworld.MT10(seed=...)``,
  ``MT50`` or ``MT1``, see ``variations.variation_benchmark``; ``options.benchmark_seed``, default 0,
  is that seed), as MetaWorld's own evaluation does: with m worlds running one task, world j plays
  variations j, j + m, j + 2m, ... (mod 50) from each seeded reset on, so that the first 50 episodes
  of a task's worlds play each variation once.
* Episodes end by the time limit (``max_episode_steps``, default MetaWorld's 500); success is
  MetaWorld's ``info["success"]``; ``options.terminate_on_success`` also ends them on success.
* Control rate (80 Hz: 5 physics steps of 2.5 ms) and physics are MetaWorld's; ``control_hz``,
  ``physics_dt_s`` and ``num_threads`` do not apply.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from vla_rl.sims.batching import EpisodeStats, clone_obs, numpy_step_result, reset_ids, space_of
from vla_rl.sims.metaworld.cameras import TaskCameras
from vla_rl.sims.metaworld.tasks import INSTRUCTIONS, task_onehot, world_tasks
from vla_rl.sims.metaworld.variations import benchmark_train_tasks, variation_benchmark

from vla_rl.envs.base import BatchedEnv, Observation, StepResult, world_seeds
from vla_rl.envs.config import EnvConfig
from vla_rl.envs.extras import import_optional

OBS_DIM = 39
PROPRIO = slice(0, 4)
"""Hand position (m) and gripper opening (0 closed .. 1 open) inside MetaWorld's observation."""
OPTIONS = {
    "terminate_on_success": False,
    "task_layout": "interleaved",
    "variations": "sampled",
    "benchmark_seed": 0,
}
"""Backend options (``EnvConfig.options``) and their defaults."""
VARIATION_MODES = ("sampled", "benchmark")
"""``env.options.variations``: where each episode's goal and object positions come from."""


def check_config(cfg: EnvConfig) -> dict[str, Any]:
    """Raise ``ValueError`` for settings this backend cannot honour; return the options with defaults."""
    world_tasks(cfg.task, 1, cfg.options.get("task_layout", OPTIONS["task_layout"]))
    if cfg.num_envs < 1:
        raise ValueError(f"config key 'env.num_envs' must be >= 1, got {cfg.num_envs}")
    if cfg.control_mode != "ee_delta_pos":
        raise ValueError(
            f"config key 'env.control_mode': MetaWorld acts in 'ee_delta_pos' (xyz delta + gripper), "
            f"got {cfg.control_mode!r}"
        )
    if cfg.split != "train":
        raise ValueError(f"config key 'env.split': MetaWorld has only the 'train' split, got {cfg.split!r}")
    if cfg.cameras and cfg.image_size < 1:
        raise ValueError(f"config key 'env.image_size' must be >= 1, got {cfg.image_size}")
    unknown = sorted(set(cfg.options) - set(OPTIONS))
    if unknown:
        raise ValueError(
            f"config key 'env.options': unknown MetaWorld option(s) {unknown}; known: {sorted(OPTIONS)}"
        )
    options = {**OPTIONS, **cfg.options}
    if options["variations"] not in VARIATION_MODES:
        raise ValueError(
            f"config key 'env.options.variations' must be one of {VARIATION_MODES}, "
            f"got {options['variations']!r}"
        )
    seed = options["benchmark_seed"]
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"config key 'env.options.benchmark_seed' must be an integer >= 0, got {seed!r}")
    return options


class MetaWorldBatchedEnv(BatchedEnv):
    """``cfg.num_envs`` MetaWorld worlds; see the module docstring for what each setting means."""

    def __init__(self, cfg: EnvConfig) -> None:
        options = check_config(cfg)
        self.terminate_on_success = bool(options["terminate_on_success"])
        self.tasks = world_tasks(cfg.task, cfg.num_envs, options["task_layout"])
        self.instructions = [INSTRUCTIONS[task] for task in self.tasks]
        self._task_onehot = task_onehot(cfg.task, self.instructions)
        env_dict = import_optional("metaworld.env_dict", extra="metaworld", backend="metaworld")
        task_type = import_optional("metaworld.types", extra="metaworld", backend="metaworld").Task

        self.num_envs = cfg.num_envs
        self.device = torch.device(cfg.device)
        self.worlds = [env_dict.ALL_V3_ENVIRONMENTS[task]() for task in self.tasks]
        default_steps = int(self.worlds[0].max_path_length)
        self.max_episode_steps = cfg.max_episode_steps if cfg.max_episode_steps > 0 else default_steps
        for task, world in zip(self.tasks, self.worlds, strict=True):
            _observe_goal_and_seed_variations(world, task, task_type)
            world.max_path_length = self.max_episode_steps
        self.control_hz = 1.0 / float(self.worlds[0].dt)
        self.variations: list[tuple[Any, ...]] | None = None
        """Per world, its task's fixed benchmark variations (``options.variations: benchmark``)."""
        if options["variations"] == "benchmark":
            by_task = benchmark_train_tasks(variation_benchmark(cfg.task), options["benchmark_seed"])
            self.variations = [by_task[task] for task in self.tasks]
        # Each world's rank among the worlds of its task, their number, and the episodes the world has
        # started since its last seeded reset: its next benchmark variation.
        self._task_rank = np.array([self.tasks[:i].count(task) for i, task in enumerate(self.tasks)])
        self._task_worlds = np.array([self.tasks.count(task) for task in self.tasks])
        self._episodes_started = np.zeros(self.num_envs, dtype=np.int64)
        self.cameras = list(cfg.cameras)
        self.image_size = cfg.image_size

        self._obs = np.zeros((self.num_envs, OBS_DIM), dtype=np.float64)
        self._episodes = EpisodeStats(self.num_envs)
        self._renderers: dict[str, TaskCameras] = {}
        obs, _ = self.reset(seed=0)  # images not rendered yet, but of their shape: the space reads that
        try:
            for task, world in zip(self.tasks, self.worlds, strict=True):
                if self.cameras and task not in self._renderers:
                    self._renderers[task] = TaskCameras(
                        world.model, world.data, self.cameras, cfg.image_size, cfg.shadows, cfg.multisample
                    )
        except Exception:
            self.close()
            raise

        self.observation_space = space_of(obs)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)

    # ---------------------------------------------------------------- observations
    def _observe(self, rows: Observation | None = None, ids: Sequence[int] = ()) -> Observation:
        """The current observation of every world; given ``rows`` (an earlier observation), a copy of
        it with only the worlds ``ids`` read (and rendered) anew."""
        state = torch.as_tensor(self._obs, dtype=torch.float32, device=self.device)
        if rows is None:
            obs: Observation = {"proprio": state[:, PROPRIO], "privileged": state}
            obs["instruction"] = list(self.instructions)
            obs["task_onehot"] = self._task_onehot.to(self.device, copy=True)
            for camera in self.cameras:
                size = (self.num_envs, self.image_size, self.image_size, 3)
                obs[f"rgb_{camera}"] = torch.empty(size, dtype=torch.uint8, device=self.device)
            ids = range(self.num_envs)
        else:
            obs = clone_obs(rows)
            obs["proprio"][ids] = state[ids, PROPRIO]
            obs["privileged"][ids] = state[ids]
        for i in ids if self._renderers else ():
            world = self.worlds[i]
            images = self._renderers[self.tasks[i]].render(world.model, world.data)
            for camera, image in zip(self.cameras, images, strict=True):
                obs[f"rgb_{camera}"][i] = torch.from_numpy(image.copy())
        return obs

    # ---------------------------------------------------------------- contract
    def reset(
        self, seed: int | Sequence[int | list[int]] | None = None, env_ids: torch.Tensor | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        ids = reset_ids(env_ids, self.num_envs)
        for i, world_seed in zip(ids, world_seeds(self, seed, ids), strict=True):
            self._reset_world(i, world_seed)
        return self._observe(), {}

    def _reset_world(self, i: int, seed: int | list[int] | None) -> None:
        world = self.worlds[i]
        if seed is not None:
            # MetaWorld seeds from one int; the entropy [seed, world] becomes one through SeedSequence.
            world.seed(int(np.random.SeedSequence(seed).generate_state(1)[0]))
            self._episodes_started[i] = 0
        if self.variations is not None:
            turn = self._task_rank[i] + self._episodes_started[i] * self._task_worlds[i]
            world.set_task(self.variations[i][turn % len(self.variations[i])])
        self._episodes_started[i] += 1
        self._obs[i], _ = world.reset()
        self._episodes.start(i)

    def step(self, action: torch.Tensor) -> StepResult:
        actions = action.detach().to("cpu", torch.float64).numpy()
        if actions.shape != (self.num_envs, 4):
            raise ValueError(f"action must have shape {(self.num_envs, 4)}, got {actions.shape}")
        actions = np.clip(actions, -1.0, 1.0)
        reward = np.zeros(self.num_envs, dtype=np.float64)
        success = np.zeros(self.num_envs, dtype=bool)
        for i, world in enumerate(self.worlds):
            self._obs[i], reward[i], _, _, info = world.step(actions[i])
            success[i] = bool(info["success"])
        self._episodes.add(reward, success)
        terminated = success & self.terminate_on_success
        truncated = (self._episodes.length >= self.max_episode_steps) & ~terminated
        done = terminated | truncated

        final = self._observe()
        info_out: dict[str, Any] = {"success": torch.as_tensor(success, device=self.device)}
        ended = [int(i) for i in np.flatnonzero(done)]
        if ended:
            info_out["episode"] = self._episodes.report(success, self.device)
            for i in ended:
                self._reset_world(i, None)
        obs = self._observe(final, ended)
        info_out["final_obs"] = final
        return numpy_step_result(obs, reward, terminated, truncated, info_out, self.device)

    def close(self) -> None:
        for cameras in self._renderers.values():
            cameras.close()
        self._renderers = {}
        for world in self.worlds:
            world.close()


def _observe_goal_and_seed_variations(world: Any, task: str, task_type: type) -> None:
    """Give ``world`` its task with the goal in the observation (MetaWorld's MT setting), then let
    every reset draw a new variation from the world's seeded generator instead of the fixed one a
    ``Task`` carries (what MetaWorld's benchmarks do when they sample their goals)."""
    data = {"env_cls": type(world), "rand_vec": None, "partially_observable": False}
    world.set_task(task_type(env_name=task, data=pickle.dumps(data)))
    world._freeze_rand_vec = False
    world.seeded_rand_vec = True
