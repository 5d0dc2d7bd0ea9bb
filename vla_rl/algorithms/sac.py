"""Soft actor-critic with automatic entropy tuning (Haarnoja et al. 2018) and its RLPD variant (Ball et
al. 2023): an ensemble of LayerNorm critics whose TD target takes the min over a random subset, and
many critic updates per call (update-to-data ratio). RLPD's symmetric sampling (half online, half
offline transitions per minibatch) is the batch source's job, not this module's.

One call of :meth:`SAC.update` takes ``utd_ratio`` minibatches:

* each minibatch makes one critic step towards
  ``y = r + gamma (1 - terminated) (min_{i in subset} Q'_i(s', a') - alpha log pi(a'|s'))``,
  ``a' ~ pi(s')``, with the target critics ``Q'`` then moved ``tau`` of the way to the critics;
* the last one also makes one actor step on ``mean(alpha log pi(a|s) - mean_i Q_i(s, a))`` (plus the
  optional ``bc_coef`` term on the takeover steps and ``action_l2_coef`` term on the deterministic
  action) and one temperature step on ``-mean(log alpha (log pi(a|s) + target_entropy))`` (every
  ``actor_update_every`` calls).

Observations are encoded once per minibatch by ``encode(obs) -> features`` [B, F], which actor and
critics share. Only the critic loss trains the encoder: when ``encode`` is an ``nn.Module`` its
parameters join the critic optimiser (its state joins the checkpoint), and the actor reads detached
features. A state encoder is usually parameter-free, e.g.
``functools.partial(VectorObsEncoder.encode, keys=[...])`` bound to an encoder whose running normaliser
its owner updates and saves; the target uses the online encoder (no target copy).

From pixels, ``image_shift_px`` > 0 applies DrQ's random shift (``vla_rl.data.image_shift``) to the
camera images of ``obs`` and ``next_obs`` of every minibatch before its critic step (the actor step
reads the last one's shifted ``obs``), drawn with a generator of its own that the checkpoint keeps.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

import torch
from torch import nn

from vla_rl.algorithms.policy_gradient import clip_gradients
from vla_rl.algorithms.sac_config import SACConfig
from vla_rl.data.image_shift import shift_observation_images
from vla_rl.envs.base import Observation
from vla_rl.policies.sac_networks import CriticEnsemble, SquashedGaussianActor


class TransitionBatchLike(Protocol):
    """What a minibatch of transitions carries (``vla_rl.data.replay_buffer.TransitionBatch`` fits)."""

    obs: Observation
    """Observations [B, ...] before the action."""
    action: torch.Tensor
    """Actions [B, A] in [-1, 1]."""
    reward: torch.Tensor
    """Rewards [B]."""
    next_obs: Observation
    """Observations [B, ...] after the action (the final one of an episode that ended)."""
    terminated: torch.Tensor
    """bool [B]: the episode ended in a terminal state (no bootstrap); a truncation is not one."""


Encoder = Callable[[Observation], torch.Tensor]
"""``encode(obs) -> features`` [B, F]."""
SHIFT_SEED = 1
"""Seed of the image shifts' generator when none is given (the other generator's default is 0)."""


def build_sac_networks(
    feature_dim: int, action_dim: int, cfg: SACConfig, hidden_sizes: list[int], activation: str = "relu"
) -> tuple[SquashedGaussianActor, CriticEnsemble]:
    """An actor and a critic ensemble of ``cfg.num_critics`` (LayerNorm per ``cfg.layer_norm``)."""
    actor = SquashedGaussianActor(feature_dim, action_dim, hidden_sizes, activation)
    critic = CriticEnsemble(
        feature_dim, action_dim, hidden_sizes, cfg.num_critics, activation, cfg.layer_norm
    )
    return actor, critic


def soft_td_target(
    reward: torch.Tensor,
    terminated: torch.Tensor,
    next_q: torch.Tensor,
    next_log_prob: torch.Tensor,
    alpha: torch.Tensor | float,
    gamma: float,
) -> torch.Tensor:
    """``r + gamma (1 - terminated) (next_q - alpha log pi(a'|s'))`` [B] (alpha 0: no entropy backup)."""
    not_done = 1.0 - terminated.to(reward.dtype)
    return reward + gamma * not_done * (next_q - alpha * next_log_prob)


@torch.no_grad()
def polyak_update(target: nn.Module, online: nn.Module, tau: float) -> None:
    """``target <- tau * online + (1 - tau) * target`` for every parameter; buffers are copied."""
    for target_param, param in zip(target.parameters(), online.parameters(), strict=True):
        target_param.lerp_(param, tau)
    for target_buffer, buffer in zip(target.buffers(), online.buffers(), strict=True):
        target_buffer.copy_(buffer)


@contextmanager
def frozen(module: nn.Module) -> Iterator[None]:
    """No gradients reach ``module``'s parameters inside the block (the actor loss reads the critics)."""
    flags = [param.requires_grad for param in module.parameters()]
    module.requires_grad_(False)
    try:
        yield
    finally:
        for param, flag in zip(module.parameters(), flags, strict=True):
            param.requires_grad_(flag)


class SAC:
    """Trains ``actor`` and ``critic`` (duck types of ``SquashedGaussianActor`` and ``CriticEnsemble``)
    on minibatches of transitions whose observations ``encode`` turns into features.

    ``generator`` (on the networks' device; seed 0 when None) draws the critic subsets and the actions'
    noise, and ``shift_generator`` (on the CPU; seed ``SHIFT_SEED`` when None) the image shifts; both
    are saved with the checkpoint so a resumed run makes the same updates. The off-policy trainer
    seeds them from the run's seed (``seed`` and ``seed + SHIFT_SEED``).
    """

    def __init__(
        self,
        actor: SquashedGaussianActor,
        critic: CriticEnsemble,
        encode: Encoder,
        cfg: SACConfig,
        generator: torch.Generator | None = None,
        shift_generator: torch.Generator | None = None,
    ) -> None:
        if critic.num_critics != cfg.num_critics:
            raise ValueError(f"num_critics is {cfg.num_critics} but the critic has {critic.num_critics}")
        self.cfg = cfg
        self.actor = actor
        self.critic = critic
        self.encode = encode
        self.target_critic = copy.deepcopy(critic).requires_grad_(False)
        self.device = next(critic.parameters()).device
        self.generator = generator if generator is not None else torch.Generator(self.device).manual_seed(0)
        self.shift_generator = (
            shift_generator if shift_generator is not None else torch.Generator().manual_seed(SHIFT_SEED)
        )
        self.target_entropy = float(-actor.action_dim if cfg.target_entropy is None else cfg.target_entropy)
        self.log_alpha = torch.tensor(math.log(cfg.init_alpha), device=self.device, requires_grad=True)
        # The modules the critic loss trains: the critics and the encoder when it has parameters.
        self.critic_modules = nn.ModuleList([critic, *([encode] if isinstance(encode, nn.Module) else [])])
        self.critic_optimizer = torch.optim.Adam(self.critic_modules.parameters(), lr=cfg.critic_lr)
        self.actor_optimizer = torch.optim.Adam(actor.parameters(), lr=cfg.actor_lr)
        self.alpha_optimizer = torch.optim.Adam([self.log_alpha], lr=cfg.alpha_lr)
        self.updates_done = 0
        """``update`` calls so far; ``actor_update_every`` reads it."""

    @property
    def alpha(self) -> torch.Tensor:
        """The temperature ``exp(log_alpha)``, detached."""
        return self.log_alpha.detach().exp()

    @torch.no_grad()
    def act(self, obs: Observation, deterministic: bool = False) -> torch.Tensor:
        """Actions [B, A] in [-1, 1]: sampled (with the algorithm's generator) or ``tanh(mean)``."""
        features = self.encode(obs)
        if deterministic:
            return self.actor.deterministic(features)
        return self.actor.sample(features, self.generator)[0]

    def draw_critic_subset(self) -> torch.Tensor:
        """``critic_subset`` distinct critic indices, drawn uniformly with the algorithm's generator."""
        order = torch.randperm(self.cfg.num_critics, generator=self.generator, device=self.generator.device)
        return order[: self.cfg.critic_subset].to(self.device)

    @torch.no_grad()
    def td_target(self, batch: TransitionBatchLike) -> torch.Tensor:
        """The soft TD target [B] of ``batch`` (see the module docstring); one subset for the batch."""
        subset = self.draw_critic_subset()
        next_features = self.encode(batch.next_obs)
        next_action, next_log_prob = self.actor.sample(next_features, self.generator)
        next_q = self.target_critic(next_features, next_action, subset.tolist()).min(dim=0).values
        alpha = self.alpha if self.cfg.backup_entropy else 0.0
        return soft_td_target(batch.reward, batch.terminated, next_q, next_log_prob, alpha, self.cfg.gamma)

    def critic_step(self, batch: TransitionBatchLike) -> dict[str, torch.Tensor]:
        """One critic step on the squared TD error averaged over critics and batch, then the Polyak
        update of the target critics."""
        target = self.td_target(batch)
        q_values = self.critic(self.encode(batch.obs), batch.action)
        loss = (q_values - target).square().mean()
        self.critic_optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = clip_gradients(self.critic_modules, self.cfg.max_grad_norm or 0.0)
        self.critic_optimizer.step()
        polyak_update(self.target_critic, self.critic, self.cfg.tau)
        return {
            "critic_loss": loss.detach(),
            "q_mean": q_values.detach().mean(),
            "target_q_mean": target.mean(),
            "critic_grad_norm": grad_norm,
        }

    def actor_and_alpha_step(self, batch: TransitionBatchLike) -> dict[str, torch.Tensor]:
        """One actor step on ``mean(alpha log pi - mean over all critics of Q)`` and one temperature
        step on ``-mean(log_alpha (log pi + target_entropy))``, both from the same sampled actions."""
        with torch.no_grad():
            features = self.encode(batch.obs)
        alpha = self.alpha
        action, log_prob = self.actor.sample(features, self.generator)
        with frozen(self.critic):
            q_mean = self.critic(features, action).mean(dim=0)
        terms = self.action_terms(features, batch)
        actor_loss = (alpha * log_prob - q_mean).mean() + sum(terms.values())
        self.actor_optimizer.zero_grad(set_to_none=True)
        actor_loss.backward()
        grad_norm = clip_gradients(self.actor, self.cfg.max_grad_norm or 0.0)
        self.actor_optimizer.step()

        alpha_loss = -(self.log_alpha * (log_prob.detach() + self.target_entropy)).mean()
        self.alpha_optimizer.zero_grad(set_to_none=True)
        alpha_loss.backward()
        self.alpha_optimizer.step()
        return {
            **{name: term.detach() for name, term in terms.items()},
            "actor_loss": actor_loss.detach(),
            "alpha_loss": alpha_loss.detach(),
            "entropy": -log_prob.detach().mean(),
            "actor_grad_norm": grad_norm,
        }

    def action_terms(self, features: torch.Tensor, batch: TransitionBatchLike) -> dict[str, torch.Tensor]:
        """The actor loss's optional terms, weighted: ``bc_loss`` (on the rows flagged
        ``intervention``; 0 in a minibatch without any) and ``action_l2``; empty when both are off."""
        cfg, terms = self.cfg, {}
        if cfg.bc_coef == 0 and cfg.action_l2_coef == 0:
            return terms
        action = self.actor.deterministic(features)
        if cfg.action_l2_coef > 0:
            terms["action_l2"] = cfg.action_l2_coef * action.square().mean()
        if cfg.bc_coef > 0:
            flags = getattr(batch, "intervention", None)
            rows = torch.zeros(len(action), dtype=torch.bool) if flags is None else flags.bool()
            rows = rows.to(action.device)
            stored = batch.action.to(action.device)
            if cfg.bc_loss_type == "nll":
                error = -self.actor.log_prob(features, stored) / stored.shape[-1]
            else:
                error = (action - stored).square().mean(dim=-1)
            terms["bc_loss"] = cfg.bc_coef * (error * rows).sum() / rows.sum().clamp(min=1)
        return terms

    def shifted(self, batch: TransitionBatchLike) -> TransitionBatchLike:
        """``batch`` (a dataclass) with the camera images of ``obs`` and ``next_obs`` randomly shifted by
        up to ``image_shift_px`` pixels, independently; ``batch`` itself when the shift is off."""
        if self.cfg.image_shift_px == 0:
            return batch
        pixels, generator = self.cfg.image_shift_px, self.shift_generator
        obs = shift_observation_images(batch.obs, pixels, generator)
        next_obs = shift_observation_images(batch.next_obs, pixels, generator)
        return dataclasses.replace(batch, obs=obs, next_obs=next_obs)

    def update(self, batches: list[TransitionBatchLike]) -> dict[str, float]:
        """``utd_ratio`` critic steps, one per minibatch of ``batches`` (each :meth:`shifted` first),
        then (every ``actor_update_every`` calls) one actor and temperature step on the last minibatch.
        Returns the critic terms averaged over the steps, the actor terms and ``alpha`` after the
        update."""
        if len(batches) != self.cfg.utd_ratio:
            raise ValueError(f"update takes utd_ratio={self.cfg.utd_ratio} minibatches, got {len(batches)}")
        batches = [self.shifted(batch) for batch in batches]
        sums: dict[str, torch.Tensor] = {}
        for batch in batches:
            for name, value in self.critic_step(batch).items():
                sums[name] = sums.get(name, 0.0) + value
        metrics = {name: float(total) / len(batches) for name, total in sums.items()}
        if self.updates_done % self.cfg.actor_update_every == 0:
            metrics.update(
                {name: float(value) for name, value in self.actor_and_alpha_step(batches[-1]).items()}
            )
        self.updates_done += 1
        metrics["alpha"] = float(self.alpha)
        return metrics

    def state_dict(self) -> dict[str, Any]:
        """Everything a resumed run needs to make the same next update: networks, target critics,
        ``log_alpha``, the three optimisers, the generator and the call counter (and the encoder's state
        when it is a module, the shift generator's when the shift is on)."""
        state = {
            "actor": self.actor.state_dict(),
            "critic": self.critic.state_dict(),
            "target_critic": self.target_critic.state_dict(),
            "log_alpha": self.log_alpha.detach().clone(),
            "actor_optimizer": self.actor_optimizer.state_dict(),
            "critic_optimizer": self.critic_optimizer.state_dict(),
            "alpha_optimizer": self.alpha_optimizer.state_dict(),
            "generator": self.generator.get_state(),
            "updates_done": self.updates_done,
        }
        if isinstance(self.encode, nn.Module):
            state["encoder"] = self.encode.state_dict()
        if self.cfg.image_shift_px > 0:
            state["shift_generator"] = self.shift_generator.get_state()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        self.target_critic.load_state_dict(state["target_critic"])
        if isinstance(self.encode, nn.Module):
            self.encode.load_state_dict(state["encoder"])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.actor_optimizer.load_state_dict(state["actor_optimizer"])
        self.critic_optimizer.load_state_dict(state["critic_optimizer"])
        self.alpha_optimizer.load_state_dict(state["alpha_optimizer"])
        self.generator.set_state(state["generator"])
        if self.cfg.image_shift_px > 0:
            self.shift_generator.set_state(state["shift_generator"])
        self.updates_done = int(state["updates_done"])
