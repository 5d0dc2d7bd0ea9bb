"""PPO for chunk policies: a value head on the policy's own features, GAE over action chunks."""

from __future__ import annotations

from vla_rl.algorithms.chunk_registry import register_chunk_algorithm
from vla_rl.algorithms.chunk_update import ChunkPolicyUpdate
from vla_rl.algorithms.ppo import explained_variance
from vla_rl.rollout.chunk_batch import ChunkBatch

ADVANTAGE_EPS = 1e-8


@register_chunk_algorithm("vla_ppo")
class ChunkPPO(ChunkPolicyUpdate):
    """One update per continuous rollout; the first ``critic_warmup_iterations`` train the critic only."""

    uses_critic = True

    def update(self, batch: ChunkBatch, iteration: int) -> dict[str, float]:
        cfg = self.cfg
        advantages, returns = batch.gae(cfg.gae_lambda)
        flat = batch.flat({"advantages": advantages, "returns": returns})
        valid = flat.tensors["valid"]
        if cfg.normalize_advantages and int(valid.sum()) > 1:
            kept = flat.tensors["advantages"][valid]
            flat.tensors["advantages"] = (flat.tensors["advantages"] - kept.mean()) / (
                kept.std() + ADVANTAGE_EPS
            )
        recompute_time_s = self.recompute(flat)
        actor_active = iteration >= cfg.critic_warmup_iterations
        metrics = self.optimise(flat, actor_active)
        metrics["recompute_time_s"] = recompute_time_s
        metrics["actor_updated"] = float(actor_active)
        metrics["explained_variance"] = explained_variance(batch.stacked("values"), returns)
        metrics["mean_advantage_raw"] = float(advantages.mean())
        return metrics
