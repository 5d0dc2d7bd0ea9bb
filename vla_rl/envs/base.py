"""The environment contract that every simulator backend implements.

An environment holds ``num_envs`` worlds and steps them together. Everything it returns is
batched along the first dimension and lives on ``env.device``:

* observations are a flat ``dict`` of tensors (``"proprio"``, ``"privileged"``,
  ``"rgb_<camera>"`` as uint8 ``[N, H, W, 3]``) plus ``"instruction"``, a list of ``N`` strings;
* ``reward`` is float32 ``[N]``; ``terminated`` and ``truncated`` are bool ``[N]``.

Autoreset happens inside ``step``: a world whose episode ended is reset in the same call, the
returned observation is the first one of its new episode, and ``info["final_obs"]`` holds the
last observation of the finished episode (rows of worlds that did not finish are copies of the
returned observation, so the whole batch can be fed to a value function). Truncated episodes
are bootstrapped from that final observation by the algorithms.
"""

from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import torch

# A batched observation: tensors of shape [N, ...] and the instruction strings (list of N str).
Observation = dict[str, Any]


@dataclass
class StepResult:
    """What ``BatchedEnv.step`` returns for all worlds at once."""

    obs: Observation
    """Observation after the step; for worlds that finished, the first of the next episode."""
    reward: torch.Tensor
    """float32 [N]."""
    terminated: torch.Tensor
    """bool [N]: the episode reached a terminal state (no bootstrapping)."""
    truncated: torch.Tensor
    """bool [N]: the episode hit its time limit (bootstrap from ``info['final_obs']``)."""
    info: dict[str, Any] = field(default_factory=dict)
    """Always has ``"success"`` (bool [N], success at this step, before any reset) and
    ``"final_obs"``. At episode ends it also has ``"episode"``: a dict of [N] tensors
    (``return``, ``length``, ``success``, ``success_once``) valid where ``done``. An env where a
    person or an expert can take over may add ``"intervention"`` (bool [N]): the off-policy learner
    then pools those transitions with its demonstrations."""

    @property
    def done(self) -> torch.Tensor:
        return self.terminated | self.truncated


class BatchedEnv(ABC):
    """N worlds stepped together. Subclasses fill the attributes in ``__init__``."""

    num_envs: int
    device: torch.device
    observation_space: gym.spaces.Dict
    """Space of one world's observation (without the batch dimension)."""
    action_space: gym.spaces.Box
    """Space of one world's action (without the batch dimension), normalised to [-1, 1]."""
    max_episode_steps: int
    control_hz: float
    action_scale: np.ndarray | None = None
    """Per action dimension, the env's own units per unit of the normalised action (half the
    range of an env whose actions are rescaled from [-1, 1], as the Gymnasium adapter's); ``None``
    where the normalised actions are the env's own units (every built-in task)."""

    @abstractmethod
    def reset(
        self, seed: int | Sequence[int | list[int]] | None = None, env_ids: torch.Tensor | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """Reset all worlds, or only ``env_ids`` (the others keep their state).

        ``seed`` as an int seeds world ``i`` with a stream derived from ``(seed, i)``; a
        sequence gives one seed per reset world (worlds given the same seed start from the
        same initial state, which group-based algorithms rely on). Each entry may be anything
        ``world_seed`` returns, so ``[env.world_seed(seed, i) for i in ids]`` equals ``seed``.
        """

    @abstractmethod
    def step(self, action: torch.Tensor) -> StepResult:
        """Apply ``action`` ([N, action_dim], in [-1, 1]) for one control period."""

    def skip_images_next_step(self) -> None:  # noqa: B027 - optional hook
        """Hint that the caller will not read the camera images the next ``step`` returns, except
        for worlds whose episode ends in it (their ``final_obs``) or restarts (reset worlds).

        Chunk rollouts call it before every step of a chunk but the last: only the observation
        after the chunk is decided on. A backend may then skip rendering the other worlds and
        return their previous images; this default renders as usual. Wrappers that read images
        at every step (reward models) inherit this default, so the hint stops there."""

    def world_seed(self, seed: int, world: int) -> int | list[int]:
        """The seed that ``reset(seed)`` with an int gives world ``world`` (here the entropy
        ``[seed, world]`` of a ``numpy.random.SeedSequence``)."""
        return [int(seed), int(world)]

    def step_async(self, action: torch.Tensor) -> None:
        """Start ``step(action)``; ``step_wait()`` returns its result.

        Backends that can simulate in the background while the caller does other work (the MuJoCo
        backend runs the physics in a thread that releases the GIL) override both; this default
        runs the whole step inside ``step_wait``. See ``vla_rl.envs.staged``.
        """
        if getattr(self, "_pending_action", None) is not None:
            raise RuntimeError("step_async() called twice without step_wait()")
        self._pending_action: torch.Tensor | None = action

    def step_wait(self) -> StepResult:
        """The result of the step started by ``step_async``."""
        action = getattr(self, "_pending_action", None)
        if action is None:
            raise RuntimeError("step_wait() without a step_async() first")
        self._pending_action = None
        return self.step(action)

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue bit-exactly after ``load_state_dict`` (simulator state,
        random generators, episode counters). Values are numpy arrays, tensors or JSON-able
        scalars/strings. Backends that cannot snapshot raise ``NotImplementedError``; resuming
        then starts from fresh episodes."""
        raise NotImplementedError(f"{type(self).__name__} cannot snapshot its state")

    def load_state_dict(self, state: dict[str, Any]) -> Observation:
        """Restore a ``state_dict`` and return the current observation."""
        raise NotImplementedError(f"{type(self).__name__} cannot restore a snapshot")

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release simulator resources (renderers, threads)."""

    @property
    def action_dim(self) -> int:
        return int(self.action_space.shape[0])

    def __enter__(self) -> BatchedEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def world_seeds(
    env: BatchedEnv, seed: int | Sequence[int | list[int]] | None, ids: Sequence[int] | torch.Tensor
) -> list[Any]:
    """The seed of each world of ``ids`` that ``env.reset(seed)`` gives it: ``env.world_seed(seed, i)``
    for an int, the given one for a sequence (one per reset world), ``None`` without a seed."""
    if seed is None:
        return [None] * len(ids)
    if isinstance(seed, numbers.Integral):  # numpy's integers too
        return [env.world_seed(int(seed), int(world)) for world in ids]
    if len(seed) != len(ids):
        raise ValueError(f"got {len(seed)} seeds for {len(ids)} reset worlds")
    return list(seed)


SPEC_KEYS = (
    "num_envs",
    "device",
    "observation_space",
    "action_space",
    "action_scale",
    "max_episode_steps",
    "control_hz",
)
"""The attributes that describe a ``BatchedEnv`` from outside (what a wrapper or a proxy repeats)."""


def env_spec(env: BatchedEnv) -> dict[str, Any]:
    """``env``'s ``SPEC_KEYS`` attributes as a (picklable) dict."""
    return {key: getattr(env, key) for key in SPEC_KEYS}


def adopt_spec(env: BatchedEnv, spec: dict[str, Any]) -> None:
    """Give ``env`` the ``SPEC_KEYS`` attributes of ``spec`` (an ``env_spec``): a wrapper or proxy
    presents the size, device, spaces, action scale, time limit and control rate of the env it stands for."""
    for key in SPEC_KEYS:
        setattr(env, key, spec[key])
    env.device = torch.device(spec["device"])
