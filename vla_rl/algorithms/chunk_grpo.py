"""GRPO for chunk policies: group-relative advantages of whole episodes, no critic.

The worlds of a rollout form groups of ``group_size`` consecutive worlds that started from the same
initial state. Each episode's score is centred on its group's mean, divided by the group's std (or by
one std over the batch, ``advantage_scale: batch``) and carried by every decision of that episode
(``score: return_to_go``: each decision's reward-to-go, centred per decision, by the same scale, or
discounted by ``score_discount`` per decision and divided by its own std over the group's decisions);
groups whose success rate lies outside ``keep_success_range`` (all fail or all succeed) are dropped,
and its batch source (``vla_rl.training.sources.GroupRollouts``) samples more rounds to refill
the batch (dynamic sampling). An update may train
on a random share of the kept decisions (``decision_fraction``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from vla_rl.algorithms.chunk_update import ChunkPolicyUpdate
from vla_rl.algorithms.grpo_advantages import (
    advantage_scales,
    broadcast_to_steps,
    centred_advantages,
    informative_groups,
    pooled_decision_scales,
    returns_to_go,
    weight_negatives,
)
from vla_rl.rollout.buffer import RolloutBuffer
from vla_rl.rollout.flat_batch import FlatBatch, concat_flat


@dataclass
class GroupedRollout:
    """The trainable rows of one episode rollout and what its groups showed."""

    rows: FlatBatch | None
    """Decisions of kept groups, before each episode's end, with their advantages (None: none kept)."""
    groups: int
    kept_groups: int


class ChunkGRPO(ChunkPolicyUpdate):
    uses_critic = False
    episodic = True

    def grouped_rows(
        self, batch: RolloutBuffer, success: torch.Tensor, returns: torch.Tensor
    ) -> GroupedRollout:
        """Advantages from the episodes' scores; only the decisions of informative groups remain."""
        cfg = self.cfg
        num_worlds = len(success)
        if num_worlds % cfg.group_size:
            raise ValueError(f"{num_worlds} worlds do not split into groups of {cfg.group_size}")
        scores = (success.float() if cfg.score == "success" else returns.float()).view(-1, cfg.group_size)
        keep_group = informative_groups(success.view(-1, cfg.group_size), *cfg.keep_success_range)
        keep_group &= ~batch.lost.view(-1, cfg.group_size).any(dim=1)  # an episode cut short: no score
        keep_world = keep_group.repeat_interleave(cfg.group_size)
        step_mask = batch.stacked("valid") & keep_world[None, :]
        scale = advantage_scales(scores, keep_group, cfg.advantage_scale)
        if cfg.score == "return_to_go":
            to_go = returns_to_go(batch.stacked("step_rewards").sum(dim=2), cfg.score_discount)
            to_go = to_go.view(len(to_go), -1, cfg.group_size)
            if cfg.score_discount < 1.0:
                centred = to_go - to_go.mean(dim=-1, keepdim=True)
                valid = step_mask.view_as(to_go)
                scale = pooled_decision_scales(centred, valid, keep_group, cfg.advantage_scale)
            advantages = centred_advantages(to_go, scale).flatten(1) * step_mask
        else:
            advantages = broadcast_to_steps(centred_advantages(scores, scale).flatten(), step_mask)
        advantages = weight_negatives(advantages, cfg.negative_advantage_weight)
        flat = batch.flat({"advantages": advantages})
        flat.tensors["valid"] = step_mask.flatten()
        kept = flat.valid_rows() if bool(step_mask.any()) else None
        return GroupedRollout(kept, groups=len(keep_group), kept_groups=int(keep_group.sum()))

    def update(self, rollouts: list[GroupedRollout]) -> dict[str, float]:
        parts = [rollout.rows for rollout in rollouts if rollout.rows is not None]
        groups = sum(r.groups for r in rollouts)
        kept = sum(r.kept_groups for r in rollouts)
        metrics = {"groups": float(groups), "kept_groups": float(kept)}
        self.updates += 1
        if not parts:
            return metrics  # every group all-fail or all-success: nothing to learn from
        flat = concat_flat(parts)
        if self.cfg.decision_fraction < 1.0:
            flat = flat.sample(self.cfg.decision_fraction, self.generator)
        metrics["trained_decisions"] = float(len(flat))
        metrics["recompute_time_s"] = self.recompute(flat)
        metrics.update(self.optimise(flat))
        return metrics
