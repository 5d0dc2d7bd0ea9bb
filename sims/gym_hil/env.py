"""gym-hil's Panda tasks as Gymnasium envs of the main venv, stepped in a worker process.

gym-hil 0.1.14 does not run on MuJoCo 4 (``worker.py`` says why), so each env here starts
``worker.py`` with a Python that has gym-hil and MuJoCo 3.8 (by default ``.venv-lerobot``'s, the one
LeRobot's HIL-SERL runs it with) and proxies ``reset``/``step`` over the worker's pipes. Importing
this module registers :data:`PICK_CUBE_ID`, so the ``gymnasium`` backend reaches it as
``env.task=vla_rl.sims.gym_hil.env:GymHilPickCube-v0`` (``configs/env/gym_hil_pick_cube.yaml``).

Observations are ``proprio`` (gym-hil's ``agent_pos``: 7 joint positions, 7 joint velocities, the
gripper command, the pinch point's position) and ``privileged`` (``environment_state``: the cube's
position); the per-step ``success`` is gym-hil's ``succeed``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

PICK_CUBE_ID = "GymHilPickCube-v0"
"""Registered id; ``vla_rl.sims.gym_hil.env:GymHilPickCube-v0`` from a config."""
GYM_HIL_PICK_CUBE = "gym_hil/PandaPickCube-v0"
"""The gym-hil id the worker makes: the one LeRobot's HIL-SERL trains on (end-effector deltas of
at most 2.5 cm per axis, gripper command in [0, 2], 100 steps of 0.1 s, sparse reward 1 when the
cube is lifted 10 cm, the episode ending then)."""
OBS_KEYS = {"agent_pos": "proprio", "environment_state": "privileged"}
"""gym-hil observation key -> the key the env exposes."""
WORKER_SCRIPT = Path(__file__).with_name("worker.py")
VENV_HINT = "gym-hil 0.1.14 needs MuJoCo < 3.9; build the venv that has it with `make .venv-lerobot`"


class GymHilWorkerError(RuntimeError):
    """The worker process failed; the message holds its traceback."""


def default_python() -> Path | None:
    """``.venv-lerobot/bin/python`` in the working directory or the repository root, if present."""
    repo_root = Path(__file__).resolve().parents[1]
    for root in (Path.cwd(), repo_root):
        candidate = root / ".venv-lerobot" / "bin" / "python"
        if candidate.exists():
            return candidate
    return None


class GymHilEnv(gym.Env):
    """One gym-hil env in a worker process.

    ``python``: the interpreter that has gym-hil (``None``: :func:`default_python`);
    ``gym_hil_id``: the gym-hil id to make; every other keyword goes to its ``gym.make``.
    ``reset_delay_seconds`` defaults to 0 (gym-hil sleeps 1 s per reset for a human watching).
    """

    metadata = {"render_modes": []}

    def __init__(self, python: str | None = None, gym_hil_id: str = GYM_HIL_PICK_CUBE, **make_kwargs: Any):
        interpreter = Path(python) if python else default_python()
        if interpreter is None or not interpreter.exists():
            where = interpreter or ".venv-lerobot"
            raise FileNotFoundError(f"no Python with gym-hil at {where}: {VENV_HINT}")
        make_kwargs.setdefault("reset_delay_seconds", 0.0)
        self._process = subprocess.Popen(
            [str(interpreter), str(WORKER_SCRIPT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        spaces = self._request({"env_id": gym_hil_id, "kwargs": make_kwargs})["spaces"]
        shapes = spaces["observation_shapes"]
        unknown = sorted(set(shapes) - set(OBS_KEYS))
        if unknown:
            self.close()
            raise ValueError(f"gym-hil observation keys {unknown} are not supported (state only)")
        self.observation_space = gym.spaces.Dict(
            {
                OBS_KEYS[key]: gym.spaces.Box(-np.inf, np.inf, tuple(shape), np.float32)
                for key, shape in shapes.items()
            }
        )
        low = np.asarray(spaces["action_low"], np.float32)
        high = np.asarray(spaces["action_high"], np.float32)
        self.action_space = gym.spaces.Box(low, high, dtype=np.float32)
        self.control_dt_s = float(spaces["control_dt"])
        self.metadata = {"render_modes": [], "render_fps": round(1.0 / self.control_dt_s)}

    def _request(self, message: dict[str, Any]) -> dict[str, Any]:
        if self._process.poll() is not None:
            raise GymHilWorkerError(f"the gym-hil worker exited with code {self._process.returncode}")
        self._process.stdin.write(json.dumps(message) + "\n")
        self._process.stdin.flush()
        line = self._process.stdout.readline()
        if not line:
            code = self._process.wait()
            raise GymHilWorkerError(f"the gym-hil worker closed its output (exit code {code})")
        reply = json.loads(line)
        if not reply.get("ok"):
            raise GymHilWorkerError(f"the gym-hil worker failed:\n{reply.get('error')}")
        return reply

    @staticmethod
    def _obs(raw: dict[str, list[float]]) -> dict[str, np.ndarray]:
        return {OBS_KEYS[key]: np.asarray(value, np.float32) for key, value in raw.items()}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        return self._obs(self._request({"cmd": "reset", "seed": seed})["obs"]), {}

    def step(self, action: np.ndarray):
        reply = self._request({"cmd": "step", "action": np.asarray(action, np.float64).tolist()})
        info = dict(reply["info"])
        info["success"] = bool(info.pop("succeed", False))
        return self._obs(reply["obs"]), reply["reward"], reply["terminated"], reply["truncated"], info

    def close(self) -> None:
        process = getattr(self, "_process", None)
        if process is None or process.poll() is not None:
            return
        try:
            self._request({"cmd": "close"})
            process.wait(timeout=10)
        except (GymHilWorkerError, OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait()


if PICK_CUBE_ID not in gym.registry:
    gym.register(id=PICK_CUBE_ID, entry_point=GymHilEnv, max_episode_steps=100, disable_env_checker=True)
