"""PPO for chunk policies: a value head on the policy's own features, GAE over action chunks or steps."""

from __future__ import annotations

from vla_rl.algorithms.chunk_update import ChunkPolicyUpdate, executed_entry_mask
from vla_rl.algorithms.ppo import explained_variance
from vla_rl.algorithms.surrogate import normalize_advantages
from vla_rl.rollout.buffer import RolloutBuffer


class ChunkPPO(ChunkPolicyUpdate):
    """One update per continuous rollout; the first ``critic_warmup_iterations`` train the critic only.

    ``advantage_granularity``: ``chunk`` runs GAE over decisions (a chunk's executed rewards summed,
    its successor discounted by ``gamma ** steps``); ``step`` runs it over control steps and gives
    each executed action its own advantage (``RolloutBuffer.step_gae``)."""

    uses_critic = True

    def update(self, batch: RolloutBuffer, iteration: int | None = None) -> dict[str, float]:
        """One update on a continuous rollout; ``iteration`` (default: the updates made so far)
        decides whether the critic is still warming up."""
        cfg = self.cfg
        iteration = self.updates if iteration is None else iteration
        self.updates = iteration + 1
        if cfg.advantage_granularity == "step":
            advantages, returns = batch.step_gae(cfg.gamma, cfg.gae_lambda)
        else:
            advantages, returns = batch.gae(cfg.gae_lambda)
        flat = batch.flat({"advantages": advantages, "returns": returns})
        if cfg.normalize_advantages:  # over the entries that train: valid rows (per step: executed steps)
            tensors = flat.tensors
            level = "chunk" if cfg.advantage_granularity == "chunk" else cfg.log_prob_level
            trained = executed_entry_mask(
                tensors["advantages"].shape,
                level,
                cfg.execute_steps,
                tensors["valid"],
                tensors.get("executed"),
            )
            tensors["advantages"] = normalize_advantages(tensors["advantages"], trained)
        recompute_time_s = self.recompute(flat)
        actor_active = iteration >= cfg.critic_warmup_iterations
        metrics = self.optimise(flat, actor_active)
        metrics["recompute_time_s"] = recompute_time_s
        metrics["actor_updated"] = float(actor_active)
        metrics["explained_variance"] = explained_variance(batch.stacked("values"), returns)
        metrics["mean_advantage_raw"] = float(advantages.mean())
        return metrics
