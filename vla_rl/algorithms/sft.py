"""Supervised fine-tuning of a chunk policy: the policy's own ``sft_loss`` and an AdamW step.

One ``update`` is one optimizer step over the ``grad_accum_steps`` minibatches it is given (each
loss divided by their number), with the global gradient norm clipped to ``grad_clip_norm`` and the
learning rate following a linear warm-up and a cosine decay over the run's ``total_steps``
(``lr_schedule.warmup_cosine_factor``).
"""

from __future__ import annotations

from typing import Any

import torch

from vla_rl.algorithms.lr_schedule import warmup_cosine_factor
from vla_rl.algorithms.policy_gradient import clip_gradients
from vla_rl.envs.batching import obs_to_device
from vla_rl.policies.chunk_policy import ChunkPolicy


class SFT:
    """``cfg``: the run's ``optim`` settings (``SFTOptimConfig``); ``total_steps``: the run's steps."""

    def __init__(self, policy: ChunkPolicy, cfg: Any, total_steps: int, device: torch.device) -> None:
        self.policy, self.cfg, self.total_steps, self.device = policy, cfg, total_steps, device
        self.parameters = [p for p in policy.parameters() if p.requires_grad]
        if not self.parameters:
            raise ValueError(f"policy {type(policy).__name__} has no trainable parameters")
        self.optimizer = torch.optim.AdamW(
            self.parameters,
            lr=cfg.learning_rate,
            betas=(cfg.betas[0], cfg.betas[1]),
            weight_decay=cfg.weight_decay,
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self.lr_factor)

    def lr_factor(self, step: int) -> float:
        return warmup_cosine_factor(step, self.total_steps, self.cfg.warmup_steps, self.cfg.min_lr_ratio)

    def update(self, batches: list[Any]) -> dict[str, float]:
        """One optimizer step on ``batches`` (each with ``obs``, ``action_chunk``, ``chunk_mask``)."""
        self.policy.train()
        self.optimizer.zero_grad(set_to_none=True)
        sums: dict[str, float] = {}
        for batch in batches:
            output = self.policy.sft_loss(
                obs_to_device(batch.obs, self.device),
                batch.action_chunk.to(self.device),
                batch.chunk_mask.to(self.device),
            )
            (output.loss / len(batches)).backward()
            for name, value in {"loss": float(output.loss.detach()), **output.metrics}.items():
                sums[name] = sums.get(name, 0.0) + float(value) / len(batches)
        grad_norm = clip_gradients(self.policy, self.cfg.grad_clip_norm)
        learning_rate = self.optimizer.param_groups[0]["lr"]
        self.optimizer.step()
        self.scheduler.step()
        return {**sums, "grad_norm": float(grad_norm), "learning_rate": float(learning_rate)}

    def state_dict(self) -> dict[str, Any]:
        scheduler = {k: v for k, v in self.scheduler.state_dict().items() if k != "lr_lambdas"}
        return {"optimizer": self.optimizer.state_dict(), "scheduler": scheduler}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict({**state["scheduler"], "lr_lambdas": [None]})
