"""Typed configuration of the reward layer (the ``reward`` group of a training config)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vla_rl.config.structured import Check, in_unit_interval, one_of, positive

FREQUENCIES = ("step", "every_k", "episode_end")
SHAPINGS = ("none", "potential")
REWARD_OPTIONS_KEY = "reward.options"
REWARD_MODEL_OPTIONS: dict[str, str] = {
    "learned": "vla_rl.rewards.learned:LEARNED_OPTIONS",
    "contrastive": "vla_rl.rewards.contrastive:CONTRASTIVE_OPTIONS",
    "vlm_judge": "vla_rl.rewards.vlm_judge:VLM_JUDGE_OPTIONS",
}
"""Built-in reward model -> ``"module:attribute"`` of the ``Schema`` of its ``reward.options`` (a
documented dataclass and its value checks), imported when a config naming the model is validated."""


@dataclass
class RewardConfig:
    """Where a run's reward comes from: ``env_weight * r_env + model_weight * r_model`` (+ bonus).

    With ``model: ""`` (the default) the environment reward is used unchanged.
    """

    model: str = ""
    """Reward model (``learned``, ``contrastive``, ``vlm_judge``, or your own ``package.module:builder``);
    empty: none."""
    path: str = ""
    """Local directory the model loads from (nothing is downloaded)."""
    options: dict[str, Any] = field(default_factory=dict)
    """The model's own options, typed per model and checked when the config is validated (an
    unknown key or a bad value is a ``ConfigError`` naming ``reward.options.<key>``):
    ``LearnedOptions`` (``learned``), ``ContrastiveOptions`` (``contrastive``: ``goal_prompt``,
    ``alpha``, ...), ``VLMJudgeOptions`` (``vlm_judge``); see ``REWARD_MODEL_OPTIONS``."""
    cameras: list[str] = field(default_factory=lambda: ["front"])
    """Cameras the model reads, in its order; each must be rendered (listed in ``env.cameras``)."""
    env_weight: float = 1.0
    """Weight of the environment's reward; 0 trains on the model alone."""
    model_weight: float = 1.0
    """Weight of the model's term."""
    shaping: str = "none"
    """``none``: the model term is the frame's score. ``potential``: the score is a potential phi and
    the term is ``gamma * phi(s') - phi(s)``, which leaves the optimal policy unchanged."""
    gamma: float = 0.99
    """Discount of the potential-based term (use the algorithm's gamma)."""
    success_bonus: float = 0.0
    """Added when the model's success probability reaches ``success_threshold``."""
    success_threshold: float = 0.5
    """Success probability at which ``success_bonus`` is paid."""
    frequency: str = "step"
    """When frames are scored: ``step`` (every control step), ``every_k`` (every ``every_k`` steps of
    an episode and at its end) or ``episode_end`` (the last frame only)."""
    every_k: int = 1
    """Scoring period in control steps for ``frequency: every_k``."""
    worker: bool = False
    """Score in a background thread while the simulator steps on; the model term is added to the
    stored rewards when the rollout ends (episode returns logged during the rollout then hold the
    environment's part only)."""


REWARD_CHECKS: list[Check[Any]] = [
    Check(
        "reward.options",
        lambda c: bool(c.reward.model) or not c.reward.options,
        "are the options of a reward model: set reward.model too",
    ),
    *(
        Check(check.key, lambda c, check=check: not c.reward.model or check.holds(c), check.message)
        for check in [
            one_of("reward.frequency", FREQUENCIES),
            one_of("reward.shaping", SHAPINGS),
            *positive("reward.every_k"),
            Check("reward.cameras", lambda c: len(c.reward.cameras) > 0, "must name at least one camera"),
            Check(
                "reward.cameras",
                lambda c: set(c.reward.cameras) <= set(c.env.cameras),
                "not rendered: each must be in env.cameras",
            ),
            in_unit_interval("reward.gamma"),
            in_unit_interval("reward.success_threshold"),
        ]
    ),
]
"""The checks of the ``reward`` group of a run's config (with a model; its ``env`` renders the
cameras the model reads)."""


def is_torch_device(name: str) -> bool:
    """Whether torch parses ``name`` as a device (``cpu``, ``cuda:0``, ...)."""
    import torch

    try:
        torch.device(name)
    except RuntimeError:
        return False
    return True
