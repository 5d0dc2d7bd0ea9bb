"""Trainer -> inference weight sync: versioned state dicts, a checksum to compare copies, and the
inference worker that receives them."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import gymnasium as gym
import safetensors.torch
import torch

from vla_rl.distributed.runtime import Runtime, WorkerHandle
from vla_rl.envs.base import Observation
from vla_rl.policies import PolicyConfig, build_policy


def state_checksum(state: dict[str, torch.Tensor]) -> str:
    """SHA-256 of ``state`` as safetensors serialises it: the names, dtypes, shapes and bytes of its
    tensors, in an order that does not depend on the dict's."""
    tensors = {
        name: value.detach().cpu().clone(memory_format=torch.contiguous_format)
        for name, value in state.items()
    }
    return hashlib.sha256(safetensors.torch.save(tensors)).hexdigest()


def cpu_state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A detached CPU copy of ``module``'s state dict (what is shipped to inference workers)."""
    return {name: value.detach().cpu().clone() for name, value in module.state_dict().items()}


class VersionedWeights:
    """Mixin for inference workers: ``load_weights`` with a version into the worker's ``policy``;
    ``weights_version`` reports it."""

    weights_version_loaded: int = -1
    policy: torch.nn.Module
    """The module the weights load into."""

    def load_weights(self, state: dict[str, torch.Tensor], version: int) -> tuple[int, str]:
        if version <= self.weights_version_loaded:
            raise ValueError(f"weights version {version} is not newer than {self.weights_version_loaded}")
        self.policy.load_state_dict(state)
        self.weights_version_loaded = version
        return self.weights_version()

    def weights_version(self) -> tuple[int, str]:
        return self.weights_version_loaded, state_checksum(cpu_state(self.policy))


class InferenceWorker(VersionedWeights):
    """Builds the policy ``cfg`` for the given spaces; ``act`` samples actions (no gradients) with the
    weights last loaded."""

    def __init__(
        self, cfg: PolicyConfig, observation_space: gym.spaces.Dict, action_space: gym.spaces.Box
    ) -> None:
        self.policy = build_policy(cfg, observation_space, action_space)
        self.policy.eval()

    @torch.no_grad()
    def act(self, obs: Observation, deterministic: bool = False) -> torch.Tensor:
        return self.policy.act(obs, deterministic=deterministic).action


def broadcast_weights(
    runtime: Runtime, workers: Sequence[WorkerHandle], state: dict[str, torch.Tensor], version: int
) -> str:
    """Send ``state`` as ``version`` to every worker (once through Ray's object store when the runtime
    has one) and check that each now holds exactly it; returns the checksum."""
    expected = state_checksum(state)
    payload = runtime.share(state)
    reports = runtime.gather([worker.call("load_weights", payload, version) for worker in workers])
    for index, (got_version, checksum) in enumerate(reports):
        if got_version != version or checksum != expected:
            raise RuntimeError(
                f"inference worker {index} holds version {got_version} ({checksum[:12]}), "
                f"expected {version} ({expected[:12]})"
            )
    return expected
