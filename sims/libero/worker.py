"""The LIBERO worlds and the process that holds them.

robosuite environments are single-world and step in Python, so the N worlds of a batch live in one
child process (``worker_main``) and the trainer talks to it over a pipe. The worker is kept dumb:
it resets the worlds it is told to (init-state index, env seed) and steps all of them; episode
bookkeeping (time limits, autoreset, statistics, seeds) stays in the parent (``env.py``).

Protocol (tuples over a ``multiprocessing`` pipe):

* on start the worker answers ``("ready", {"instructions": [...], "num_init_states": [...]})``
  or ``("error", traceback)``;
* ``("reset", ids, init_indices, env_seeds)`` -> ``("ok", obs)`` with ``obs`` the stacked
  observation of the worlds ``ids`` (dict of numpy arrays ``[len(ids), ...]``);
* ``("step", actions [N, 7])`` -> ``("ok", (obs, reward [N], success [N]))``;
* ``("close",)`` -> closes the worlds, answers ``("ok", None)`` and exits.

A failing command answers ``("error", traceback)`` and the worker keeps serving.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np
from vla_rl.sims.libero.privileged import PRIVILEGED_DIM, GoalState
from vla_rl.sims.libero.tasks import libero_package_dir, write_libero_config

NOOP_ACTION = np.array([0, 0, 0, 0, 0, 0, -1], dtype=np.float64)
"""Warm-up action: no end-effector motion, gripper open (-1 opens, +1 closes)."""
IMAGE_ORIENTATIONS = ("upright", "rotate180")
CAMERA_ALIASES = {"image": "agentview", "wrist_image": "robot0_eye_in_hand"}
"""The names LIBERO's LeRobot datasets give robosuite's cameras: ``env.cameras: [image, wrist_image]``
renders those cameras as ``rgb_image`` and ``rgb_wrist_image``, the keys a policy trained on those
datasets reads."""


def robosuite_camera(name: str) -> str:
    """robosuite's name of camera ``name`` (itself, or the camera a ``CAMERA_ALIASES`` name means)."""
    return CAMERA_ALIASES.get(name, name)


PROPRIO_DIM = 8
"""End-effector position (3), end-effector orientation as axis-angle (3), gripper finger joints (2)."""


@dataclass(frozen=True)
class WorkerSpec:
    """Everything the worker process needs to build its worlds (picklable)."""

    suite: str
    task_ids: tuple[int, ...]
    """One LIBERO task index per world."""
    cameras: tuple[str, ...]
    image_size: int
    warmup_steps: int
    image_orientation: str
    assets_dir: str
    config_dir: str = ""
    """Where ``config.yaml`` for LIBERO is written (``$LIBERO_CONFIG_PATH`` of the worker)."""
    hard_reset: bool = False
    """robosuite's ``hard_reset``: rebuild the MuJoCo model at every reset (LIBERO's default, seconds
    each) instead of resetting the simulation in place; either way the fixed initial state is then
    loaded over the whole simulation state."""


def orient_image(image: np.ndarray, orientation: str) -> np.ndarray:
    """robosuite renders with OpenGL's bottom-left origin, so its images are upside down.

    ``"upright"`` flips rows, giving the camera's view as the other backends return it;
    ``"rotate180"`` also mirrors columns, the convention of the LIBERO datasets that OpenVLA-style
    policies were fine-tuned on.
    """
    if orientation == "upright":
        return np.ascontiguousarray(image[::-1])
    if orientation == "rotate180":
        return np.ascontiguousarray(image[::-1, ::-1])
    raise ValueError(f"image orientation must be one of {IMAGE_ORIENTATIONS}, got {orientation!r}")


def quat_xyzw_to_axis_angle(quat: np.ndarray) -> np.ndarray:
    """Unit quaternion (robosuite's x, y, z, w order) -> axis * angle in radians."""
    w = float(np.clip(quat[3], -1.0, 1.0))
    sin_half = np.sqrt(1.0 - w * w)
    if sin_half < 1e-8:
        return np.zeros(3)
    return np.asarray(quat[:3], dtype=np.float64) * (2.0 * np.arccos(w) / sin_half)


class LiberoWorld:
    """One LIBERO environment (``OffScreenRenderEnv`` interface) and its task's initial states."""

    def __init__(
        self,
        env: Any,
        init_states: np.ndarray,
        instruction: str,
        spec: WorkerSpec,
        goal: GoalState | None = None,
    ) -> None:
        """``goal`` reads the privileged state; without one (an env that is not a LIBERO problem)
        ``obs["privileged"]`` is zeros."""
        self.env = env
        self.init_states = init_states
        self.instruction = instruction
        self.cameras = spec.cameras
        self.warmup_steps = spec.warmup_steps
        self.orientation = spec.image_orientation
        self.goal = goal

    def use_own_gl_context(self) -> None:
        """Makes this world's OpenGL context current. robosuite renders into whichever context is
        current, so with several worlds in one process each would otherwise draw into the context
        of the last one built: black frames, or another world's."""
        renderer = getattr(getattr(self.env, "sim", None), "_render_context_offscreen", None)
        if renderer is not None:
            renderer.gl_ctx.make_current()

    def reset(self, init_index: int, env_seed: int) -> dict[str, np.ndarray]:
        """Start from initial state ``init_index``, then let objects settle for the warm-up steps."""
        self.use_own_gl_context()
        self.env.seed(env_seed)
        self.env.reset()
        # robosuite's grippers integrate their commands into ``current_action``, which only a hard
        # reset (a new gripper model) clears: clear it so that an in-place reset starts as a hard one.
        for robot in self.env.robots:
            robot.gripper.current_action = np.zeros_like(robot.gripper.current_action)
        raw = self.env.set_init_state(self.init_states[init_index])
        if self.goal is not None:
            self.goal.refresh()
        for _ in range(self.warmup_steps):
            raw, _, _, _ = self.env.step(NOOP_ACTION)
        return self.observe(raw)

    def step(self, action: np.ndarray) -> tuple[dict[str, np.ndarray], float, bool]:
        self.use_own_gl_context()
        raw, reward, done, _ = self.env.step(action)
        # LIBERO's step reports done exactly when the task's goal predicates hold.
        return self.observe(raw), float(reward), bool(done)

    def observe(self, raw: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        proprio = np.concatenate(
            [
                raw["robot0_eef_pos"],
                quat_xyzw_to_axis_angle(raw["robot0_eef_quat"]),
                raw["robot0_gripper_qpos"],
            ]
        ).astype(np.float32)
        privileged = self.goal.read() if self.goal is not None else np.zeros(PRIVILEGED_DIM, np.float32)
        obs = {"proprio": proprio, "privileged": privileged}
        for camera in self.cameras:
            obs[f"rgb_{camera}"] = orient_image(raw[f"{robosuite_camera(camera)}_image"], self.orientation)
        return obs

    def close(self) -> None:
        self.env.close()


WorldOpener = Callable[[WorkerSpec], list[LiberoWorld]]


def open_libero_worlds(spec: WorkerSpec) -> list[LiberoWorld]:
    """Builds one ``OffScreenRenderEnv`` per world from LIBERO's benchmark (runs in the worker)."""
    package_dir = libero_package_dir()
    if package_dir is None:
        raise ImportError("the LIBERO package (import name 'libero') is not installed in this environment")
    if not spec.config_dir:
        raise ValueError("WorkerSpec.config_dir is empty: LIBERO's config.yaml needs a directory")
    assets_dir = Path(spec.assets_dir)
    # LIBERO reads its paths from $LIBERO_CONFIG_PATH/config.yaml when imported and asks on stdin
    # when that file is missing: write it first so nothing prompts.
    write_libero_config(Path(spec.config_dir), package_dir, assets_dir)
    os.environ["LIBERO_CONFIG_PATH"] = spec.config_dir
    import libero.libero as libero_root

    if hasattr(libero_root, "get_assets_path"):
        # The PyPI builds look assets up through get_assets_path(), which returns this cache when
        # it exists and otherwise downloads them; setting it keeps everything local.
        libero_root._assets_path_cache = str(assets_dir)
    elif assets_dir.resolve() != (package_dir / "assets").resolve():
        raise ValueError(
            f"this LIBERO install reads its assets only from {package_dir / 'assets'}; "
            f"env.options.assets_dir ({assets_dir}) must point there"
        )
    from libero.libero import benchmark
    from libero.libero.envs import OffScreenRenderEnv

    suite = benchmark.get_benchmark_dict()[spec.suite]()
    init_states = {i: np.asarray(suite.get_task_init_states(i)) for i in set(spec.task_ids)}
    worlds = []
    for task_id in spec.task_ids:
        env = OffScreenRenderEnv(
            bddl_file_name=suite.get_task_bddl_file_path(task_id),
            camera_names=[robosuite_camera(c) for c in spec.cameras] or ["agentview"],
            use_camera_obs=bool(spec.cameras),
            camera_heights=spec.image_size,
            camera_widths=spec.image_size,
            ignore_done=True,  # the parent enforces the time limit
            hard_reset=spec.hard_reset,
        )
        language = suite.get_task(task_id).language
        worlds.append(LiberoWorld(env, init_states[task_id], language, spec, GoalState(env)))
    return worlds


def _stack(observations: Sequence[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {key: np.stack([obs[key] for obs in observations]) for key in observations[0]}


def worker_main(conn: Connection, spec: WorkerSpec, opener: WorldOpener = open_libero_worlds) -> None:
    """The worker process: builds the worlds with ``opener`` and serves commands until ``close``."""
    try:
        worlds = opener(spec)
    except BaseException:
        conn.send(("error", traceback.format_exc()))
        conn.close()
        return
    conn.send(
        (
            "ready",
            {
                "instructions": [w.instruction for w in worlds],
                "num_init_states": [len(w.init_states) for w in worlds],
            },
        )
    )
    try:
        while True:
            try:
                command, *args = conn.recv()
            except EOFError:  # the parent is gone
                return
            if command == "close":
                break
            try:
                conn.send(("ok", _serve(worlds, command, args)))
            except Exception:
                conn.send(("error", traceback.format_exc()))
    finally:
        for world in worlds:
            world.close()
    conn.send(("ok", None))
    conn.close()


def _serve(worlds: list[LiberoWorld], command: str, args: list[Any]) -> Any:
    if command == "reset":
        ids, init_indices, env_seeds = args
        return _stack(
            [worlds[i].reset(int(k), int(s)) for i, k, s in zip(ids, init_indices, env_seeds, strict=True)]
        )
    if command == "step":
        (actions,) = args
        results = [world.step(action) for world, action in zip(worlds, actions, strict=True)]
        reward = np.array([r for _, r, _ in results], dtype=np.float32)
        success = np.array([s for _, _, s in results], dtype=bool)
        return _stack([obs for obs, _, _ in results]), reward, success
    raise ValueError(f"unknown worker command {command!r}")
