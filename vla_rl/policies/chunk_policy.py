"""The interface every action-chunk policy implements (token VLAs, chunk VLAs, flow policies).

A chunk policy maps a batch of observations (camera images, proprioception, instruction) to an
*action chunk*: the next ``chunk_len`` actions of ``action_dim`` values each, in the environment's
normalised action units ([-1, 1]). The rollout layer executes the chunk (or its first steps) and the
RL algorithms read the log-probability of what was sampled at the granularity they ask for:

* ``"token"``:  ``[N, chunk_len, action_dim]``: one entry per action token (token policies only);
* ``"action"``: ``[N, chunk_len]``: one entry per action of the chunk;
* ``"chunk"``:  ``[N]``: the whole chunk.

``ChunkStep.sample_info`` carries whatever the policy needs to recompute the same log-probability
later (``evaluate``): the sampled token ids of a token policy, the denoising chain of a flow policy.
Tensors in it are batched along dim 0 so the rollout buffer can store and slice them.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from vla_rl.envs.base import Observation
from vla_rl.policies.env_maps import EnvInterface
from vla_rl.policies.pretrained_io import read_module_dir, save_module_dir
from vla_rl.sims.mujoco.observations import PROPRIO_FIELDS, field_slices

LOG_PROB_LEVELS = ("token", "action", "chunk")
SampleInfo = dict[str, torch.Tensor]
"""What a sample stores for ``evaluate`` (``ChunkStep.sample_info``)."""


def state_vector(
    obs: Observation, keys: list[str], device: torch.device, proprio_fields: list[str] | None = None
) -> torch.Tensor:
    """float32 [N, sum of widths]: the vector observations ``keys`` (e.g. ``proprio``, ``objects``)
    concatenated in order; the state that VLAs embed next to their images and instruction.

    ``proprio_fields`` keeps only these named parts of ``obs["proprio"]`` (layout
    ``PROPRIO_FIELDS``, in that layout's order); None keeps all of it."""
    missing = [key for key in keys if key not in obs]
    if missing:
        raise KeyError(f"state keys {missing} are not in the observation (it has {sorted(obs)})")
    parts = []
    for key in keys:
        part = torch.as_tensor(obs[key], device=device, dtype=torch.float32)
        part = part.reshape(len(part), -1)
        if key == "proprio" and proprio_fields is not None:
            part = part[:, proprio_columns(proprio_fields)]
        parts.append(part)
    return torch.cat(parts, dim=-1)


def proprio_columns(names: list[str]) -> list[int]:
    """Column indices of the named ``PROPRIO_FIELDS`` parts, in layout order."""
    slices = field_slices(PROPRIO_FIELDS)
    unknown = sorted(set(names) - set(slices))
    if unknown:
        raise ValueError(f"unknown proprio fields {unknown}; the layout has {list(slices)}")
    return [i for name, part in slices.items() if name in names for i in range(part.start, part.stop)]


@dataclass
class ChunkStep:
    """What ``ChunkPolicy.sample`` returns for a batch of N observations."""

    actions: torch.Tensor
    """float32 [N, chunk_len, action_dim] in normalised env units."""
    log_prob: torch.Tensor
    """Log-probability of the sample at the requested level (shapes in the module docstring)."""
    value: torch.Tensor | None = None
    """float32 [N] value estimate from the policy's own features, when ``with_value``."""
    sample_info: dict[str, torch.Tensor] = field(default_factory=dict)
    """Batched tensors that ``evaluate`` needs to recompute ``log_prob`` for this sample."""


@dataclass
class ChunkEvaluation:
    """What ``ChunkPolicy.evaluate`` returns: differentiable quantities for the stored samples."""

    log_prob: torch.Tensor
    """Same shape as ``ChunkStep.log_prob`` at the same level."""
    entropy: torch.Tensor | None
    """Entropy (or an estimate) at the same level, when the policy family has one."""
    value: torch.Tensor | None = None
    """float32 [N], when ``with_value``."""


@dataclass
class SFTOutput:
    """Loss of a supervised batch plus scalar metrics for logging."""

    loss: torch.Tensor
    metrics: dict[str, float] = field(default_factory=dict)


class ChunkPolicy(nn.Module, ABC):
    """Batched observation -> action chunk, with log-probabilities and an optional value head.

    A family implements ``build``, ``_sample``, ``_evaluate`` and ``sft_loss``, and either
    ``from_config`` (saved as its dataclass ``cfg`` in ``config_file``) or its own
    ``save_pretrained`` / ``from_pretrained``."""

    chunk_len: int
    action_dim: int
    log_prob_levels: tuple[str, ...] = ("action", "chunk")
    """Granularities this family supports (a subset of ``LOG_PROB_LEVELS``)."""
    registry_name: str = ""
    """The class's name in ``vla_rl.policies.registry.POLICIES`` (written into saved checkpoints)."""
    config_file: str = ""
    """File name of the JSON config written by the default ``save_pretrained``."""
    critic_trains_features: bool = True
    """Whether the value loss reaches the features the value head reads (shared with the actor);
    RL sets it from ``algorithm.critic_trains_features``. False trains the value head alone."""
    autocast_dtype: torch.dtype | None = None
    """Mixed precision (``policy.autocast``): ``sample``, ``evaluate`` and ``observation_cache`` run
    under ``torch.autocast`` with this dtype (bfloat16: the matrix products in bf16) while the weights,
    their gradients and the optimizer's state stay float32; what ``sample`` and ``evaluate`` return
    is float32, and the families compute log-probabilities from float32 casts. None: everything in
    the weights' dtype."""

    def critic_input(self, features: torch.Tensor) -> torch.Tensor:
        """The features as the value head should see them (detached unless ``critic_trains_features``)."""
        return features if self.critic_trains_features else features.detach()

    def check_env(self, env: EnvInterface) -> None:  # noqa: B027 - optional hook
        """``ConfigError`` where this policy cannot run on ``env`` (its action width, state or
        cameras); called before training and evaluation. Nothing by default (a family built here is
        built for the env); an imported checkpoint checks its own against the env through
        ``policy.action_map`` / ``state_map`` / ``camera_map`` (``vla_rl.policies.env_maps``)."""

    def observation_cache(self, obs: Observation) -> dict[str, torch.Tensor]:
        """Per-row tensors [N, ...] that ``evaluate`` may read from ``sample_info`` instead of computing
        them again: features of the observation alone made by parts that do not train (``obs`` as
        stored, on any device: the policy moves what it reads). An RL update computes them once per
        batch and reuses them in every epoch; rows from different calls are zero-padded to one
        shape, so a zero entry must mean "absent". Runs the family's ``_observation_cache`` in the
        policy's ``precision``."""
        with self.precision():
            return self._observation_cache(obs)

    def _observation_cache(self, obs: Observation) -> dict[str, torch.Tensor]:
        """``observation_cache`` of a family; nothing by default."""
        return {}

    def precision(self) -> AbstractContextManager:
        """The numeric mode of the policy's computations: ``torch.autocast`` to ``autocast_dtype`` on
        the weights' device, or nothing."""
        if self.autocast_dtype is None:
            return nullcontext()
        device = next(self.parameters()).device
        return torch.autocast(device.type, dtype=self.autocast_dtype)

    @classmethod
    @abstractmethod
    def build(cls, **kwargs: object) -> ChunkPolicy:
        """A fresh policy from plain (config) values, e.g. ``chunk_len=4, action_dim=4, ...``.

        Families document their keyword arguments; the SFT and RL configs pass them through.
        """

    def sample(
        self,
        obs: Observation,
        *,
        temperature: float = 1.0,
        deterministic: bool = False,
        log_prob_level: str = "chunk",
        with_value: bool = False,
    ) -> ChunkStep:
        """Sample an action chunk per observation (greedy / noise-free when ``deterministic``).

        Checks the level and runs the family's ``_sample`` without gradients."""
        check_log_prob_level(self, log_prob_level)
        with torch.no_grad(), self.precision():
            step = self._sample(obs, temperature, deterministic, log_prob_level, with_value)
        return float32_outputs(step) if self.autocast_dtype is not None else step

    def evaluate(
        self,
        obs: Observation,
        sample_info: dict[str, torch.Tensor],
        *,
        temperature: float = 1.0,
        log_prob_level: str = "chunk",
        with_value: bool = False,
    ) -> ChunkEvaluation:
        """Log-probability (with gradients) of samples described by ``sample_info``.

        Checks the level and runs the family's ``_evaluate``."""
        check_log_prob_level(self, log_prob_level)
        with self.precision():
            evaluation = self._evaluate(obs, sample_info, temperature, log_prob_level, with_value)
        return float32_outputs(evaluation) if self.autocast_dtype is not None else evaluation

    def _sample(
        self, obs: Observation, temperature: float, deterministic: bool, level: str, with_value: bool
    ) -> ChunkStep:
        """``sample`` of a family, at a ``level`` it provides."""
        raise NotImplementedError(f"{type(self).__name__} implements neither sample nor _sample")

    def _evaluate(
        self, obs: Observation, sample_info: SampleInfo, temperature: float, level: str, with_value: bool
    ) -> ChunkEvaluation:
        """``evaluate`` of a family, at a ``level`` it provides."""
        raise NotImplementedError(f"{type(self).__name__} implements neither evaluate nor _evaluate")

    @abstractmethod
    def sft_loss(self, obs: Observation, action_chunk: torch.Tensor, chunk_mask: torch.Tensor) -> SFTOutput:
        """Supervised loss on demonstrated chunks.

        ``action_chunk`` float32 [N, chunk_len, action_dim] in normalised env units; ``chunk_mask``
        bool [N, chunk_len] is False for steps past the end of the episode (padding).
        """

    def save_pretrained(self, directory: str | Path) -> None:
        """Write weights (safetensors), config and action statistics to ``directory``.

        By default the dataclass ``self.cfg`` as ``config_file`` next to ``model.safetensors``
        (``pretrained_io``); families with more parts (a backbone, a tokenizer) override it."""
        save_module_dir(self, self.cfg.to_dict(), directory, self.config_file)

    @classmethod
    def from_pretrained(cls, directory: str | Path) -> ChunkPolicy:
        """Load a policy written by ``save_pretrained`` (local directory only, never a hub).

        By default ``from_config`` of the saved config, with the saved weights."""
        config, state = read_module_dir(directory, cls.config_file)
        policy = cls.from_config(config)
        policy.load_state_dict(state)
        return policy

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> ChunkPolicy:
        """A fresh policy from the config dict that the default ``save_pretrained`` writes."""
        raise NotImplementedError(f"{cls.__name__} is saved its own way: it overrides from_pretrained")


def float32_outputs(outputs: Any) -> Any:
    """A ``ChunkStep`` or ``ChunkEvaluation`` with its floating tensors (``sample_info``'s too) in
    float32, computed under autocast; the rollout stores and the losses read float32."""

    def cast(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            return value.float()
        if isinstance(value, dict):
            return {key: cast(item) for key, item in value.items()}
        return value

    return dataclasses.replace(
        outputs, **{f.name: cast(getattr(outputs, f.name)) for f in dataclasses.fields(outputs)}
    )


def check_log_prob_level(policy: ChunkPolicy, level: str) -> None:
    """Clear error for a granularity the policy family does not provide."""
    if level not in policy.log_prob_levels:
        raise ValueError(
            f"{type(policy).__name__} provides log-probabilities at {list(policy.log_prob_levels)}, "
            f"not {level!r}"
        )
