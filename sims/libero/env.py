"""LIBERO task suites behind the ``BatchedEnv`` contract (backend ``"libero"``).

The worlds run in a worker process (``worker.py``); this class keeps the episode bookkeeping:
per-world seeds mapped onto LIBERO's fixed initial states, the time limit, autoreset with
``final_obs`` and episode statistics. Success is LIBERO's own goal check; it ends the episode
(``terminated``) with reward 1.

Settings in ``cfg.options``:

* ``assets_dir``: LIBERO's assets directory (scenes, textures, object meshes); default
  ``$LIBERO_ASSETS_DIR``, else the ``assets/`` folder of a LIBERO source checkout, else that of the
  installed asset packages (the ``libero`` extra);
* ``warmup_steps`` (default 10): no-op steps after each reset so that objects settle;
* ``image_orientation`` (default ``"upright"``): see ``worker.orient_image``;
* ``init_states`` (default ``"random"``, evaluations ``"protocol"``): ``"random"`` draws one of the
  task's fixed initial states for every episode from the world's seeded generator (worlds given
  the same seed start alike, as GRPO's groups need); ``"protocol"`` is the field's evaluation
  protocol, in which the worlds running one task take its states in turn (with m such worlds, world
  j plays states j, j + m, j + 2m, ... after each seeded reset), so that the first 50 episodes of a
  task's worlds play each of its 50 states once;
* ``first_init_state`` (default 0): where the protocol order starts (world j plays ``first + j``,
  ...), e.g. to record demonstrations from states an evaluation from state 0 does not reach soon;
* ``workers`` (default 1): worker processes the worlds are split over (contiguous groups); each
  steps its worlds one after the other, so more of them use more cores;
* ``hard_reset`` (default false): rebuild each world's MuJoCo model at every reset, as LIBERO does by
  default (3-7 s a reset on two CPU cores against under 1 s); the fixed initial state then overwrites
  the simulation state either way, and for the same seed the observations are the same bit for bit
  (``tests/sims/test_libero_scenes.py``).
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from vla_rl.sims.batching import EpisodeStats, numpy_step_result, reset_ids
from vla_rl.sims.libero.client import WorkerPool
from vla_rl.sims.libero.privileged import PRIVILEGED_DIM
from vla_rl.sims.libero.tasks import SUITE_MAX_EPISODE_STEPS, parse_task
from vla_rl.sims.libero.worker import (
    CAMERA_ALIASES,
    IMAGE_ORIENTATIONS,
    PROPRIO_DIM,
    WorkerSpec,
    WorldOpener,
    robosuite_camera,
)

from vla_rl.envs.base import BatchedEnv, Observation, StepResult, world_seeds
from vla_rl.envs.config import EnvConfig

ACTION_DIM = 7
"""End-effector position delta (3) and axis-angle rotation delta (3) of robosuite's OSC_POSE
controller, scaled to [-1, 1], and the gripper (-1 open, +1 closed)."""
CONTROL_HZ = 20.0
"""LIBERO's control frequency."""
OPTION_DEFAULTS: dict[str, Any] = {
    "assets_dir": None,
    "warmup_steps": 10,
    "image_orientation": "upright",
    "hard_reset": False,
    "init_states": "random",
    "first_init_state": 0,
    "workers": 1,
}
INIT_STATE_ORDERS = ("protocol", "random")
"""``env.options.init_states``: how each episode picks one of its task's fixed initial states."""


def check_config(cfg: EnvConfig) -> dict[str, Any]:
    """ValueError naming the bad key of ``cfg``; returns the options with their defaults filled in."""
    unknown = set(cfg.options) - set(OPTION_DEFAULTS)
    if unknown:
        raise ValueError(
            f"unknown env.options for libero: {sorted(unknown)}; known: {sorted(OPTION_DEFAULTS)}"
        )
    options = {**OPTION_DEFAULTS, **cfg.options}
    warmup = options["warmup_steps"]
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"config key 'env.options.warmup_steps' must be an integer >= 0, got {warmup!r}")
    if not isinstance(options["hard_reset"], bool):
        raise ValueError(
            f"config key 'env.options.hard_reset' must be true or false, got {options['hard_reset']!r}"
        )
    first = options["first_init_state"]
    if isinstance(first, bool) or not isinstance(first, int) or first < 0:
        raise ValueError(f"config key 'env.options.first_init_state' must be an integer >= 0, got {first!r}")
    workers = options["workers"]
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"config key 'env.options.workers' must be an integer >= 1, got {workers!r}")
    if options["init_states"] not in INIT_STATE_ORDERS:
        raise ValueError(
            f"config key 'env.options.init_states' must be one of {INIT_STATE_ORDERS}, "
            f"got {options['init_states']!r}"
        )
    if options["image_orientation"] not in IMAGE_ORIENTATIONS:
        raise ValueError(
            f"config key 'env.options.image_orientation' must be one of {IMAGE_ORIENTATIONS}, "
            f"got {options['image_orientation']!r}"
        )
    if cfg.num_envs < 1:
        raise ValueError(f"config key 'env.num_envs' must be >= 1, got {cfg.num_envs}")
    cameras = [robosuite_camera(camera) for camera in cfg.cameras]
    if len(set(cameras)) < len(cameras):
        raise ValueError(
            f"config key 'env.cameras': {list(cfg.cameras)} names one camera twice "
            f"(aliases: {CAMERA_ALIASES})"
        )
    if cfg.cameras and cfg.image_size < 1:
        raise ValueError(f"config key 'env.image_size' must be >= 1, got {cfg.image_size}")
    parse_task(cfg.task)
    return options


def worker_spec(cfg: EnvConfig, assets_dir: Path) -> WorkerSpec:
    """The worker's share of ``cfg`` (checked by ``check_config``)."""
    options = check_config(cfg)
    task = parse_task(cfg.task)
    return WorkerSpec(
        suite=task.suite,
        task_ids=tuple(task.task_ids[i % len(task.task_ids)] for i in range(cfg.num_envs)),
        cameras=tuple(cfg.cameras),
        image_size=cfg.image_size,
        warmup_steps=options["warmup_steps"],
        image_orientation=options["image_orientation"],
        assets_dir=str(assets_dir),
        hard_reset=options["hard_reset"],
    )


class LiberoBatchedEnv(BatchedEnv):
    """``cfg.num_envs`` LIBERO worlds stepped by one worker process."""

    def __init__(self, cfg: EnvConfig, assets_dir: Path, opener: WorldOpener | None = None) -> None:
        spec = worker_spec(cfg, assets_dir)
        options = check_config(cfg)
        self.num_envs = cfg.num_envs
        self.device = torch.device(cfg.device)
        self.control_hz = CONTROL_HZ
        self.max_episode_steps = (
            cfg.max_episode_steps if cfg.max_episode_steps > 0 else SUITE_MAX_EPISODE_STEPS[spec.suite]
        )
        self.action_space = gym.spaces.Box(-1.0, 1.0, (ACTION_DIM,), np.float32)
        spaces: dict[str, gym.Space] = {
            "proprio": gym.spaces.Box(-np.inf, np.inf, (PROPRIO_DIM,), np.float32),
            "privileged": gym.spaces.Box(-np.inf, np.inf, (PRIVILEGED_DIM,), np.float32),
        }
        for camera in cfg.cameras:
            spaces[f"rgb_{camera}"] = gym.spaces.Box(0, 255, (cfg.image_size, cfg.image_size, 3), np.uint8)
        spaces["instruction"] = gym.spaces.Text(max_length=256)
        self.observation_space = gym.spaces.Dict(spaces)

        self._pending_step = False
        self._config_dir = tempfile.TemporaryDirectory(prefix="vla_rl_libero_")
        spec = dataclasses.replace(spec, config_dir=self._config_dir.name)
        try:
            self._workers: WorkerPool | None = WorkerPool(spec, options["workers"], opener)
        except BaseException:
            self._config_dir.cleanup()
            raise
        self._instructions: list[str] = list(self._workers.ready_info["instructions"])
        self._num_init_states = np.asarray(self._workers.ready_info["num_init_states"], dtype=np.int64)
        self._init_state_order = options["init_states"]
        self._first_init_state = options["first_init_state"]
        # For the protocol order: each world's rank among the worlds of its task, their number, and the
        # episodes the world has started since its last seeded reset.
        self._task_rank = np.array([spec.task_ids[:i].count(t) for i, t in enumerate(spec.task_ids)])
        self._task_worlds = np.array([spec.task_ids.count(t) for t in spec.task_ids])
        self._episodes_started = np.zeros(self.num_envs, dtype=np.int64)
        # Each world draws (init-state index, env seed) per episode from its own generator.
        self._rngs = [np.random.default_rng(np.random.SeedSequence([0, i])) for i in range(self.num_envs)]
        self._obs: dict[str, np.ndarray] | None = None
        self._episodes = EpisodeStats(self.num_envs)

    # ---------------------------------------------------------------- helpers
    def _start_episodes(self, ids: Sequence[int]) -> None:
        """Resets worlds ``ids`` in the worker with the next draws of their generators."""
        draws = [(self._next_init_state(i), int(self._rngs[i].integers(2**31 - 1))) for i in ids]
        obs = self._workers.reset(list(ids), [d[0] for d in draws], [d[1] for d in draws])
        if self._obs is None:
            self._obs = {
                key: np.zeros((self.num_envs, *value.shape[1:]), value.dtype) for key, value in obs.items()
            }
        for key, value in obs.items():
            self._obs[key][list(ids)] = value
        self._episodes.start(ids)

    def _next_init_state(self, world: int) -> int:
        if self._init_state_order == "random":
            return int(self._rngs[world].integers(self._num_init_states[world]))
        turn = (
            self._first_init_state
            + self._task_rank[world]
            + self._episodes_started[world] * self._task_worlds[world]
        )
        self._episodes_started[world] += 1
        return int(turn % self._num_init_states[world])

    def _torch_obs(self) -> Observation:
        out: Observation = {
            key: torch.from_numpy(value.copy()).to(self.device) for key, value in self._obs.items()
        }
        out["instruction"] = list(self._instructions)
        return out

    # ---------------------------------------------------------------- contract
    def reset(
        self, seed: int | Sequence[int | list[int]] | None = None, env_ids: torch.Tensor | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        if self._pending_step:
            raise RuntimeError("reset() between step_async() and step_wait()")
        ids = reset_ids(env_ids, self.num_envs)
        if self._obs is None and len(ids) < self.num_envs:
            raise RuntimeError("the first reset must reset every world")
        for i, world_seed in zip(ids, world_seeds(self, seed, ids), strict=True) if seed is not None else ():
            self._rngs[i] = np.random.default_rng(np.random.SeedSequence(world_seed))
            self._episodes_started[i] = 0
        self._start_episodes(ids)
        return self._torch_obs(), {}

    def step_async(self, action: torch.Tensor) -> None:
        """Sends the actions to the worker; the trainer can work while the worlds step."""
        if self._obs is None:
            raise RuntimeError("reset() the env before stepping it")
        actions = action.detach().to("cpu", torch.float64).numpy()
        if actions.shape != (self.num_envs, ACTION_DIM):
            raise ValueError(f"action must have shape {(self.num_envs, ACTION_DIM)}, got {actions.shape}")
        self._workers.send_step(np.clip(actions, -1.0, 1.0))
        self._pending_step = True

    def step_wait(self) -> StepResult:
        if not self._pending_step:
            raise RuntimeError("step_wait() without a step_async() first")
        self._pending_step = False
        obs, reward, success = self._workers.receive_step()
        self._obs = obs
        self._episodes.add(reward, success)
        terminated = success.copy()
        truncated = (self._episodes.length >= self.max_episode_steps) & ~terminated
        done = terminated | truncated
        info: dict[str, Any] = {
            "success": torch.from_numpy(success.copy()).to(self.device),
            "final_obs": self._torch_obs(),
        }
        if done.any():
            info["episode"] = self._episodes.report(success, self.device)
            self._start_episodes(np.flatnonzero(done).tolist())
        return numpy_step_result(self._torch_obs(), reward, terminated, truncated, info, self.device)

    def step(self, action: torch.Tensor) -> StepResult:
        self.step_async(action)
        return self.step_wait()

    def close(self) -> None:
        workers = getattr(self, "_workers", None)
        if workers is not None:
            workers.close()
            self._workers = None
        self._config_dir.cleanup()
