"""One gym-hil environment served over stdin/stdout, run by an interpreter that has gym-hil.

gym-hil 0.1.14 calls MuJoCo 3's ``mj_fullM(model, dst, data.qM)``, which MuJoCo 4 (the main venv's)
no longer has, and pins ``mujoco<3.9``. So its worlds live in a child process started with the
Python of ``.venv-lerobot`` (MuJoCo 3.8.1, gym-hil 0.1.14, as LeRobot runs them): this file is run
as a script there and imports nothing from vla-rl, only the standard library, NumPy, Gymnasium and
gym-hil.

Protocol: one JSON object per line each way. The first line the worker reads is the spec
``{"env_id": ..., "kwargs": {...}}``; it answers ``{"ok": true, "spaces": ...}`` with the observation
keys' shapes and the action bounds, or ``{"ok": false, "error": traceback}`` and exits. Then:

* ``{"cmd": "reset", "seed": int | null}`` -> ``{"ok": true, "obs": {...}}``;
* ``{"cmd": "step", "action": [...]}`` -> ``{"ok": true, "obs": {...}, "reward": float,
  "terminated": bool, "truncated": bool, "info": {...}}`` (the info entries that are numbers or
  flags);
* ``{"cmd": "close"}`` -> ``{"ok": true}`` and the worker exits.

A failing command answers ``{"ok": false, "error": traceback}``; the worker keeps serving.
"""

from __future__ import annotations

import json
import sys
import traceback
import warnings
from typing import Any


def _flat(value: Any) -> Any:
    """A JSON-ready copy of an observation: nested dicts of lists of floats."""
    if isinstance(value, dict):
        return {key: _flat(item) for key, item in value.items()}
    return [float(x) for x in value.reshape(-1)]


def _scalars(info: dict[str, Any]) -> dict[str, Any]:
    """The info entries that are flags (as bools) or numbers (as floats); others are left out."""
    import numpy as np

    out: dict[str, Any] = {}
    for key, value in info.items():
        if isinstance(value, (bool, np.bool_)):
            out[key] = bool(value)
        elif isinstance(value, (int, float, np.number, np.ndarray)) and np.size(value) == 1:
            out[key] = float(np.asarray(value).reshape(()))
    return out


def _spaces(env: Any) -> dict[str, Any]:
    obs_space = env.observation_space
    shapes = {key: list(space.shape) for key, space in obs_space.spaces.items()}
    action = env.action_space
    return {
        "observation_shapes": shapes,
        "action_low": [float(x) for x in action.low],
        "action_high": [float(x) for x in action.high],
        "control_dt": float(env.unwrapped.control_dt),
    }


def _handle(env: Any, message: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    command = message["cmd"]
    if command == "reset":
        obs, _ = env.reset(seed=message.get("seed"))
        return {"ok": True, "obs": _flat(obs)}
    if command == "step":
        action = np.asarray(message["action"], dtype=np.float32)
        obs, reward, terminated, truncated, info = env.step(action)
        return {
            "ok": True,
            "obs": _flat(obs),
            "reward": float(reward),
            "terminated": bool(terminated),
            "truncated": bool(truncated),
            "info": _scalars(info),
        }
    raise ValueError(f"unknown command {command!r}")


def serve(lines_in: Any, lines_out: Any) -> None:
    """Builds the env from the first line of ``lines_in`` and answers every further line."""

    def answer(reply: dict[str, Any]) -> None:
        lines_out.write(json.dumps(reply) + "\n")
        lines_out.flush()

    # gym-hil's float64 action bounds make Gymnasium warn on every make; the bounds are exact in float32.
    warnings.filterwarnings("ignore", message=".*precision lowered by casting to float32.*")
    try:
        import gym_hil  # noqa: F401  (registers the gym_hil/* ids)
        import gymnasium as gym

        spec = json.loads(lines_in.readline())
        env = gym.make(spec["env_id"], disable_env_checker=True, **spec.get("kwargs", {}))
        answer({"ok": True, "spaces": _spaces(env)})
    except Exception:
        answer({"ok": False, "error": traceback.format_exc()})
        return
    for line in lines_in:
        message = json.loads(line)
        if message.get("cmd") == "close":
            env.close()
            answer({"ok": True})
            return
        try:
            answer(_handle(env, message))
        except Exception:
            answer({"ok": False, "error": traceback.format_exc()})


if __name__ == "__main__":
    # Anything gym-hil or MuJoCo prints goes to stderr; stdout carries the protocol only.
    protocol_out = sys.stdout
    sys.stdout = sys.stderr
    serve(sys.stdin, protocol_out)
