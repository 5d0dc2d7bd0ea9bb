"""Auxiliary state prediction for VLAs: regress a privileged state vector from the prompt feature.

Behaviour cloning of a language-conditioned task gives the instruction a weak training signal: the
demonstrated action names the target object only in the few frames where the expert turns towards
it, and a small model trained from scratch then learns to copy motion rather than to read which
object the words name. Asking the feature the value head reads (the hidden state before the first
action token) to also predict, e.g., the task's privileged state (the named object's one-hot and
the vector from the gripper to it) supplies that signal on every frame. The head is used in
training only; acting never reads the privileged state. pi0 uses the same head on its action
expert's state-token feature (the feature its value head reads).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from vla_rl.envs.base import Observation
from vla_rl.policies.normalizer import RunningMeanStd


def check_auxiliary_settings(target_key: str | None, target_dim: int, coef: float) -> None:
    """Config-time checks of ``aux_target_key`` / ``aux_target_dim`` / ``aux_coef``."""
    if target_key is not None and target_dim <= 0:
        raise ValueError("aux_target_key needs aux_target_dim > 0")
    if coef < 0:
        raise ValueError(f"aux_coef must be >= 0, got {coef}")


def auxiliary_target(obs: Observation, key: str, device: torch.device) -> torch.Tensor:
    """``obs[key]`` as float [N, D] (the auxiliary head's regression target)."""
    if key not in obs:
        raise KeyError(f"aux_target_key {key!r} is not in the observation (it has {sorted(obs)})")
    return torch.as_tensor(obs[key], device=device, dtype=torch.float32).reshape(len(obs[key]), -1)


class AuxiliaryStateHead(nn.Module):
    """MLP from the prompt feature to a standardised target vector, trained with mean squared error."""

    def __init__(self, hidden_size: int, target_dim: int, mlp_dim: int) -> None:
        super().__init__()
        self.mlp = nn.Sequential(
            nn.LayerNorm(hidden_size),  # middle-layer residual streams are not normalised
            nn.Linear(hidden_size, mlp_dim),
            nn.GELU(),
            nn.Linear(mlp_dim, target_dim),
        )
        self.target_normalizer = RunningMeanStd((target_dim,))
        """Target statistics, fit on the demonstrations before training (``update``)."""

    def update(self, target: torch.Tensor) -> None:
        self.target_normalizer.update(target.float())

    def loss(self, feature: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Mean over batch and dimensions of the squared error to the standardised target."""
        predicted = self.mlp(feature.float())
        return (predicted - self.target_normalizer(target.float())).square().mean()


@contextmanager
def capture_output(module: nn.Module) -> Iterator[dict[str, torch.Tensor]]:
    """While active, ``captured["hidden"]`` holds the output of ``module`` at its last call (the
    first element of a tuple or model output, e.g. a decoder's last hidden state)."""
    captured: dict[str, torch.Tensor] = {}

    def hook(_module: nn.Module, _inputs: object, output: object) -> None:
        captured["hidden"] = output if isinstance(output, torch.Tensor) else output[0]  # type: ignore[index]

    handle = module.register_forward_hook(hook)
    try:
        yield captured
    finally:
        handle.remove()


@contextmanager
def capture_layer_output(layers: nn.ModuleList, layer: int | None) -> Iterator[dict]:
    """While active, ``captured["hidden"]`` holds the output [N, L, hidden] of decoder layer
    ``layer`` (1-based) of ``layers`` at its last call; ``layer=None`` captures nothing (the dict
    stays empty)."""
    if layer is None:
        yield {}
        return
    if not 1 <= layer <= len(layers):
        raise ValueError(f"aux_layer {layer} is outside the decoder's layers 1..{len(layers)}")
    with capture_output(layers[layer - 1]) as captured:
        yield captured
