"""What every policy-gradient update (state PPO, chunk PPO, GRPO) does the same way around its losses:
epochs x shuffled minibatches of gradient steps, each with the global gradient norm clipped, the loss
terms averaged over the steps as metrics, and the optimiser, the minibatch generator and the progress
counters in the checkpoint. The algorithms write the losses, the learning-rate schedule and what a
step may move (``before_step``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any, ClassVar, TypeVar

import torch
from torch import nn

Batch = TypeVar("Batch")


@dataclasses.dataclass
class StepLosses:
    """Loss terms of one minibatch: ``total`` carries the graph; the other fields (but those named in
    ``NOT_METRICS``) are detached numbers averaged over the update's steps (None: not measured)."""

    total: torch.Tensor
    """The weighted sum the step differentiates."""
    NOT_METRICS: ClassVar[tuple[str, ...]] = ("total",)
    """The fields that are not averaged into the update's metrics."""

    def metrics(self) -> dict[str, Any]:
        return {
            field.name: getattr(self, field.name)
            for field in dataclasses.fields(self)
            if field.name not in self.NOT_METRICS and getattr(self, field.name) is not None
        }


class PolicyGradient:
    """``policy`` trained by ``optimizer``; ``cfg`` gives ``num_epochs`` and ``max_grad_norm``;
    ``generator`` shuffles the minibatches (seed 0 when None)."""

    COUNTERS: ClassVar[tuple[str, ...]] = ()
    """Integer attributes that count the progress (updates, steps), saved in the checkpoint."""

    def __init__(
        self, policy: nn.Module, cfg: Any, optimizer: torch.optim.Optimizer, generator: torch.Generator | None
    ) -> None:
        self.policy = policy
        self.cfg = cfg
        self.optimizer = optimizer
        self.generator = generator if generator is not None else torch.Generator().manual_seed(0)

    def _metric(self, value: torch.Tensor | float) -> float:
        """A per-step scalar as every rank should see it (here: the value itself)."""
        return float(value)

    def reduce_gradients(self) -> None:
        """After each backward pass, before ``before_step``: where a data-parallel rank that does not
        leave it to a wrapper (DDP) combines its gradients with the other ranks' (here: nothing)."""

    def gradient_steps(
        self,
        minibatches: Callable[[], Iterable[Batch]],
        valid: Callable[[Batch], torch.Tensor],
        losses: Callable[[Batch], StepLosses],
        before_step: Callable[[StepLosses], None],
    ) -> tuple[dict[str, float], int]:
        """``cfg.num_epochs`` passes over ``minibatches()``, one gradient step per minibatch with a
        ``valid`` row; ``before_step(losses)`` runs after each backward pass, before the gradients are
        clipped. Returns the loss terms and gradient norms averaged over the steps, and the number of
        steps."""
        sums: dict[str, float] = {}
        steps = 0
        for _ in range(self.cfg.num_epochs):
            for batch in minibatches():
                if not bool(valid(batch).any()):
                    continue
                step_losses = losses(batch)
                self.optimizer.zero_grad(set_to_none=True)
                step_losses.total.backward()
                self.reduce_gradients()
                before_step(step_losses)
                grad_norm = clip_gradients(self.policy, self.cfg.max_grad_norm)
                self.optimizer.step()
                for name, value in {**step_losses.metrics(), "grad_norm": grad_norm}.items():
                    sums[name] = sums.get(name, 0.0) + self._metric(value)
                steps += 1
        return {name: total / steps for name, total in sums.items()}, steps

    def state_dict(self) -> dict[str, Any]:
        """The optimiser's state, the minibatch generator's and the counters (the policy's weights are
        saved with the policy)."""
        counters = {name: getattr(self, name) for name in self.COUNTERS}
        return {"optimizer": self.optimizer.state_dict(), "generator": self.generator.get_state(), **counters}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.load_progress(state)

    def load_progress(self, state: dict[str, Any]) -> None:
        """The minibatch generator's state and the counters of ``state`` (all but the optimiser's)."""
        if "generator" in state:  # absent in older checkpoints, as are the counters
            self.generator.set_state(state["generator"])
        for name in self.COUNTERS:
            setattr(self, name, int(state.get(name, 0)))


def clip_gradients(module: nn.Module, max_norm: float) -> torch.Tensor:
    """Clip the global gradient norm to ``max_norm`` (<= 0: no clipping); returns the norm before
    (0 when no parameter has a gradient)."""
    params = [p for p in module.parameters() if p.grad is not None]
    if not params:
        return torch.zeros(())
    if max_norm > 0:
        return nn.utils.clip_grad_norm_(params, max_norm)
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in params]))
