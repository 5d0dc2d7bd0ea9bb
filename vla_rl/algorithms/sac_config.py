"""Settings of SAC and of its RLPD variant (``vla_rl.algorithms.sac``), validated as they are made."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

BC_LOSSES = ("mse", "nll")
"""The kinds of the behaviour-cloning term (``SACConfig.bc_loss_type``)."""


@dataclass
class SACConfig:
    """Settings of SAC; the defaults are plain SAC, :meth:`rlpd` gives RLPD's."""

    name: str = "sac"
    """Algorithm name (``vla_rl.algorithms.registry.ALGORITHMS``)."""
    gamma: float = 0.99
    """Discount factor per control step."""
    tau: float = 0.005
    """Polyak rate of the target critics: ``target <- tau * online + (1 - tau) * target`` per critic step."""
    actor_lr: float = 3e-4
    """Adam learning rate of the actor."""
    critic_lr: float = 3e-4
    """Adam learning rate of the critics (and of the encoder, if it has parameters)."""
    alpha_lr: float = 3e-4
    """Adam learning rate of ``log alpha``."""
    init_alpha: float = 1.0
    """Initial temperature alpha (> 0); 0.1 is a common smaller start."""
    target_entropy: float | None = None
    """Entropy the temperature steers the policy to, in nats; None: ``-action_dim``."""
    num_critics: int = 2
    """Critics in the ensemble E (RLPD: 10)."""
    critic_subset: int = 2
    """Size of the random subset of target critics whose min forms the TD target (RLPD: 2 of 10);
    ``num_critics`` takes the min over all of them (plain SAC's clipped double Q)."""
    utd_ratio: int = 1
    """Critic steps per ``update`` call, one per minibatch given (RLPD: 20)."""
    actor_update_every: int = 1
    """The actor and the temperature make one step every this many ``update`` calls (1: every call)."""
    layer_norm: bool = False
    """LayerNorm after each hidden layer of the critics (RLPD: True); read by :func:`build_sac_networks`."""
    backup_entropy: bool = True
    """Subtract ``alpha log pi(a'|s')`` in the TD target; False backs up the plain Q value."""
    max_grad_norm: float | None = None
    """Clip of the global gradient norm of the critics' and of the actor's steps; None disables."""
    image_shift_px: int = 0
    """DrQ's augmentation of the ``rgb_*`` images of each minibatch (``obs`` and ``next_obs``): pad by
    this many pixels, repeating the edges, and crop back at a random corner per sample, which moves
    the image by up to this many pixels each way (DrQ, RLPD from pixels: 4); 0 disables it."""

    bc_coef: float = 0.0
    """Weight of a behaviour-cloning term in the actor's loss, on the minibatch's transitions flagged
    ``intervention`` (a person's or the scripted expert's takeover steps); 0: off."""
    bc_loss_type: str = "mse"
    """The behaviour-cloning term per action dimension: ``"mse"``, the squared difference between the
    actor's deterministic action and the stored one (moves the Gaussian's mean only); ``"nll"``, the
    negative log-likelihood of the stored action under the actor's squashed Gaussian (moves the mean
    and also narrows the width where the takeovers are, so that samples stay near them; each row's
    error on the mean is weighed by the inverse variance, so a badly fitted row widens the Gaussian
    rather than moving the mean)."""
    action_l2_coef: float = 0.0
    """Weight of a penalty on the actor's deterministic action, its mean square per dimension over the
    minibatch; 0: off. With a frozen policy's residual (``frozen_policy=residual``) it holds the
    residual near zero, the frozen policy's own action, where Q does not pay for moving it."""

    def __post_init__(self) -> None:
        if not 0.0 < self.gamma <= 1.0:
            raise ValueError(f"gamma must be in (0, 1], got {self.gamma}")
        if not 0.0 < self.tau <= 1.0:
            raise ValueError(f"tau must be in (0, 1], got {self.tau}")
        for name in ("actor_lr", "critic_lr", "alpha_lr", "init_alpha"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        for name in ("bc_coef", "action_l2_coef"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0 (0: off), got {getattr(self, name)}")
        if self.bc_loss_type not in BC_LOSSES:
            raise ValueError(f"bc_loss_type must be one of {BC_LOSSES}, got {self.bc_loss_type!r}")
        for name in ("num_critics", "utd_ratio", "actor_update_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 1 <= self.critic_subset <= self.num_critics:
            raise ValueError(
                f"critic_subset must be in [1, num_critics={self.num_critics}], got {self.critic_subset}"
            )
        if self.max_grad_norm is not None and self.max_grad_norm <= 0:
            raise ValueError(f"max_grad_norm must be > 0 or None, got {self.max_grad_norm}")
        if self.image_shift_px < 0:
            raise ValueError(f"image_shift_px must be >= 0 (0: off), got {self.image_shift_px}")

    @classmethod
    def rlpd(cls, **overrides: Any) -> SACConfig:
        """RLPD's settings (10 LayerNorm critics, min over 2, 20 critic steps a call), then ``overrides``."""
        settings: dict[str, Any] = {
            "num_critics": 10,
            "critic_subset": 2,
            "utd_ratio": 20,
            "layer_norm": True,
        }
        return cls(**{**settings, **overrides})
