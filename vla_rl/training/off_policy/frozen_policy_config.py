"""``frozen_policy``: an off-policy learner that acts through a frozen chunk policy (DSRL, residual RL).

``configs/frozen_policy/dsrl.yaml`` and ``residual.yaml`` set these keys (and, for ``residual``, the
``base_action`` observation key); ``vla_rl.training.off_policy.frozen_policy_env`` does the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vla_rl.config.structured import Check, one_of, positive

FROZEN_POLICY_MODES = ("none", "dsrl", "residual")
BASE_ACTION_KEY = "base_action"
"""The observation key that holds the frozen policy's proposed action in ``residual`` mode."""


@dataclass
class FrozenPolicyConfig:
    """A frozen (SFT'd) chunk policy that SAC acts through instead of acting in the env itself."""

    mode: str = "none"
    """``none``: SAC's action goes to the env. ``dsrl``: SAC's action is the initial noise of a
    frozen flow policy's denoising chain (DSRL, Wagenmaker et al. 2025); the deterministic chain
    turns it into a chunk, which the env executes. ``residual``: SAC's action is a bounded correction
    added to each action of a frozen chunk policy of any family (token, chunk, flow)."""
    checkpoint: str | None = None
    """The frozen policy: an SFT or RL run folder (its latest checkpoint), one of its checkpoint
    folders, or a policy folder written by ``save_pretrained``; needed unless ``mode`` is ``none``."""
    name: str | None = None
    """Its family (``flow_mlp``, ``pi0``, ``token_vla``, ...); None: the ``policy.name`` of the
    ``config.yaml`` beside the checkpoint (a run or checkpoint folder has one)."""
    noise_scale: float = 1.5
    """``dsrl``: the bound of the noise, in standard deviations of the flow's N(0, I) noise: the chain
    starts from SAC's (tanh-squashed) action in [-1, 1] times this, so each entry lies in
    [-noise_scale, noise_scale]."""
    residual_scale: float = 0.2
    """``residual``: the bound of the correction in normalised action units (the env's range [-1, 1]
    is 2 wide): the env receives ``clip(frozen action + residual_scale * SAC action, -1, 1)``."""
    execute_steps: int = 0
    """Actions of each frozen chunk executed before the frozen policy plans again (<= 0: the whole
    chunk). ``dsrl``: one SAC decision per ``execute_steps`` control steps; ``residual``: the frozen
    policy plans every ``execute_steps`` steps and SAC corrects every step."""

    @property
    def active(self) -> bool:
        return self.mode != "none"


def frozen_policy_checks() -> list[Check[Any]]:
    """The checks of ``frozen_policy`` in an ``OffPolicyConfig`` (the family and the chunk length are
    checked when the policy loads: ``load_frozen_policy``)."""
    return [
        one_of("frozen_policy.mode", FROZEN_POLICY_MODES),
        *positive("frozen_policy.noise_scale", "frozen_policy.residual_scale"),
        Check(
            "frozen_policy.checkpoint",
            lambda c: not c.frozen_policy.active or bool(c.frozen_policy.checkpoint),
            "must name the frozen policy's run, checkpoint or policy folder (frozen_policy.mode is not none)",
        ),
        Check(
            "policy.obs_keys",
            lambda c: (BASE_ACTION_KEY in c.policy.obs_keys) == (c.frozen_policy.mode == "residual"),
            f"must list {BASE_ACTION_KEY!r} (the frozen policy's action, which the residual corrects) "
            "exactly when frozen_policy.mode is residual; frozen_policy=residual sets both",
        ),
        Check(
            "frozen_policy.mode",
            lambda c: c.frozen_policy.mode != "dsrl" or c.source == "local",
            "dsrl needs source local (remote actors run the frozen policy only for residual RL)",
        ),
        Check(
            "demos.path",
            lambda c: c.demos.path is None or not c.frozen_policy.active,
            "takes no demonstrations with a frozen policy: their actions are the env's, not noise or "
            "corrections",
        ),
    ]
