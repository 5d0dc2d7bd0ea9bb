"""What the simulator backends' batched envs share: reading ``reset``'s arguments (which worlds, an
integer seed from a world's seed entry; ``vla_rl.envs.base.world_seeds`` gives the entries and each
backend seeds its worlds its own way), the running episodes' statistics, mapping actions and
per-world values, copying and merging observations and describing their space."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from vla_rl.envs.base import Observation, StepResult


def reset_ids(env_ids: torch.Tensor | None, num_envs: int) -> list[int]:
    """The worlds ``reset(env_ids=...)`` names, as ints: every world for None."""
    if env_ids is None:
        return list(range(num_envs))
    return [int(i) for i in torch.as_tensor(env_ids).reshape(-1).tolist()]


def int_seed(entry: int | Sequence[int], bits: int = 32) -> int:
    """A simulator's integer seed from a ``world_seeds`` entry: an int as it is, a list of ints as the
    low ``bits`` bits of the first draw of the ``numpy.random.SeedSequence`` they are the entropy of."""
    if isinstance(entry, int | np.integer):
        return int(entry)
    return int(np.random.SeedSequence([int(x) for x in entry]).generate_state(1)[0]) & ((1 << bits) - 1)


def clone_obs(obs: Observation) -> Observation:
    """A copy of a batched observation that later steps cannot change (tensors cloned, the
    instruction list copied)."""
    return {key: list(value) if isinstance(value, list) else value.clone() for key, value in obs.items()}


def space_of(obs: Observation) -> gym.spaces.Dict:
    """The space of one world's observation, read off a batched one: uint8 tensors are images in
    [0, 255], other tensors unbounded float32, the instruction text."""
    spaces: dict[str, gym.Space] = {}
    for key, value in obs.items():
        if key == "instruction":
            spaces[key] = gym.spaces.Text(max_length=256)
        elif value.dtype == torch.uint8:
            spaces[key] = gym.spaces.Box(0, 255, tuple(value.shape[1:]), np.uint8)
        else:
            spaces[key] = gym.spaces.Box(-np.inf, np.inf, tuple(value.shape[1:]), np.float32)
    return gym.spaces.Dict(spaces)


class EpisodeStats:
    """Return, length and success so far of every world's running episode, what ``info["episode"]``
    reports when episodes end: numpy arrays, or tensors on ``device`` for backends whose rewards
    are tensors."""

    def __init__(self, num_envs: int, device: torch.device | None = None) -> None:
        if device is None:
            self.episode_return: Any = np.zeros(num_envs)
            self.length: Any = np.zeros(num_envs, np.int64)
            self.success_once: Any = np.zeros(num_envs, bool)
        else:
            self.episode_return = torch.zeros(num_envs, dtype=torch.float32, device=device)
            self.length = torch.zeros(num_envs, dtype=torch.int64, device=device)
            self.success_once = torch.zeros(num_envs, dtype=torch.bool, device=device)

    def add(self, reward: Any, success: Any) -> None:
        """One step of every world: its reward [N] and success [N]."""
        self.episode_return += reward
        self.length += 1
        self.success_once |= success

    def start(self, ids: Any) -> None:
        """Worlds ``ids`` (indices or a bool mask) begin new episodes."""
        self.episode_return[ids] = 0.0
        self.length[ids] = 0
        self.success_once[ids] = False

    def state(self) -> dict[str, np.ndarray]:
        """Host copies of the statistics, under the keys the MuJoCo envs' snapshots use."""

        def host(value: Any) -> np.ndarray:
            return value.cpu().numpy().copy() if isinstance(value, torch.Tensor) else np.array(value)

        return {
            "step_count": host(self.length),
            "episode_return": host(self.episode_return),
            "episode_success_once": host(self.success_once),
        }

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore what ``state`` returned (arrays or tensors; kept on this object's device)."""
        for name, key in (
            ("length", "step_count"),
            ("episode_return", "episode_return"),
            ("success_once", "episode_success_once"),
        ):
            target = getattr(self, name)
            if isinstance(target, torch.Tensor):
                target.copy_(torch.as_tensor(np.asarray(state[key])))
            else:
                target[:] = np.asarray(state[key])

    def report(self, success: Any, device: torch.device) -> dict[str, torch.Tensor]:
        """``info["episode"]``: copies of the statistics (return as float32) and of this step's
        ``success``, on ``device``."""

        def copy(value: Any, dtype: torch.dtype | None = None) -> torch.Tensor:
            return torch.as_tensor(value).to(device=device, dtype=dtype, copy=True)

        return {
            "return": copy(self.episode_return, torch.float32),
            "length": copy(self.length),
            "success": copy(success),
            "success_once": copy(self.success_once),
        }


def merge_rows(obs: Observation, final: Observation, done: torch.Tensor) -> Observation:
    """``obs`` with the rows of finished worlds taken from ``final``."""
    merged: Observation = {}
    for key, value in obs.items():
        if isinstance(value, list):
            merged[key] = [final[key][i] if done[i] else text for i, text in enumerate(value)]
        else:
            merged[key] = torch.where(done.view(-1, *[1] * (value.dim() - 1)), final[key], value)
    return merged


def numpy_step_result(
    obs: Observation, reward: np.ndarray, terminated: np.ndarray, truncated: np.ndarray, info: dict, device
) -> StepResult:
    """The ``StepResult`` of worlds stepped on the host: numpy [N] rewards (as float32) and end flags
    as tensors on ``device``."""
    terminated_and_truncated = [torch.as_tensor(flags).to(device) for flags in (terminated, truncated)]
    return StepResult(obs, torch.as_tensor(reward).to(device, torch.float32), *terminated_and_truncated, info)


def batch_vector(value: Any, num_envs: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """A simulator's per-world value (tensor or array, [N] or [N, 1]) as a fresh ``dtype`` [N] tensor
    on ``device`` (simulators overwrite their buffers in place on the next step)."""
    return torch.as_tensor(value).reshape(num_envs).to(device=device, dtype=dtype, copy=True)


def unit_to_env_action(
    action: torch.Tensor,
    num_envs: int,
    action_dim: int,
    low: torch.Tensor | None,
    high: torch.Tensor | None,
    bound: float,
    device: str | torch.device,
) -> torch.Tensor:
    """Maps ``[N, A]`` actions in [-1, 1] (clipped) to the env: affinely onto ``[low, high]`` where the
    env's action space is bounded, else multiplied by ``bound``."""
    if tuple(action.shape) != (num_envs, action_dim):
        raise ValueError(f"action must have shape {(num_envs, action_dim)}, got {tuple(action.shape)}")
    unit = action.detach().to(device=device, dtype=torch.float32).clamp(-1.0, 1.0)
    if low is None or high is None:
        return unit * bound
    return low + (unit + 1.0) * 0.5 * (high - low)
