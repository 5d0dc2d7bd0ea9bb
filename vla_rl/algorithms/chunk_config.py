"""Configuration of RL fine-tuning for chunk policies (VLAs, flow policies): PPO and GRPO."""

from __future__ import annotations

from dataclasses import dataclass, field

from vla_rl.algorithms.config import ACTOR_CRITIC_CHECKS, ActorCriticConfig
from vla_rl.algorithms.grpo_advantages import ADVANTAGE_SCALES
from vla_rl.config.structured import (
    Check,
    check_values,
    in_unit_interval,
    not_negative,
    one_of,
    positive,
    value_check,
)
from vla_rl.policies.chunk_policy import LOG_PROB_LEVELS

SCORES = ("success", "return", "return_to_go")
ADVANTAGE_GRANULARITIES = ("chunk", "step")


@dataclass
class ChunkRLConfig(ActorCriticConfig):
    """PPO and GRPO settings; defaults follow the published VLA recipes (see the README)."""

    # ActorCriticConfig's settings with this config's defaults (documented there):
    num_epochs: int = 2
    value_coef: float = 0.5

    name: str = "vla_ppo"
    """``vla_ppo`` (critic, GAE over chunks) or ``vla_grpo`` (group-relative, no critic)."""
    log_prob_level: str = "chunk"
    """Granularity of the importance ratio: ``token``, ``action`` or ``chunk``."""
    execute_steps: int = 2
    """Actions of each sampled chunk executed before the next decision."""
    temperature: float = 1.0
    """Sampling temperature (token policies) or noise multiplier (flow policies) in rollouts."""
    num_decisions: int = 16
    """PPO: decisions per world per iteration (rollout length in chunks)."""
    reward_scale: float = 1.0
    """Factor on the environment's rewards before GAE; a value head that starts near 0 fits returns
    of order one in a few iterations, not hundreds (advantages are standardised, so the policy
    gradient does not depend on it)."""
    reward: str = "dense"
    """What each control step pays, ``dense`` (the task's shaped reward) or ``success`` (1 in a
    success state, else 0, as SimpleVLA-RL's binary outcome reward; no partial credit for states
    short of success, such as holding the object over the goal). PPO trains on it; GRPO's
    ``score: return`` sums it over the episode."""
    progress_shaping: float = 0.0
    """Weight ``c`` of potential-based shaping added to each step's reward: ``c * (gamma * phi(s')
    - phi(s))`` with ``phi`` the task's dense reward (its progress towards success). It telescopes
    over an episode, so unlike the dense reward itself it cannot pay a policy for holding a state
    of high progress (Ng et al. 1999: the optimal policy is unchanged); 0 disables."""
    advantage_granularity: str = "chunk"
    """PPO: ``chunk`` (each chunk one step of GAE, its executed rewards summed) or ``step`` (GAE
    over control steps, one advantage per executed action; token or action log-probs)."""
    clip_low: float = 0.2
    """Lower clip range: ratios below ``1 - clip_low`` are clipped."""
    clip_high: float = 0.28
    """Upper clip range ("clip-higher"): ratios above ``1 + clip_high`` are clipped."""
    dual_clip: float | None = 3.0
    """Cap of the loss of negative-advantage samples at ``dual_clip * |A|``; None disables."""
    huber_delta: float | None = 10.0
    """Huber threshold of the value loss; None: squared error."""
    kl_coef: float = 0.0
    """Weight of the KL to the reference (starting) policy; 0 disables and skips the reference."""
    actor_lr: float = 1e-4
    """Adam learning rate of everything but the value head (and the noise head given its own rate)."""
    value_lr: float = 1e-3
    """Adam learning rate of the value head."""
    noise_head_lr: float | None = None
    """Adam learning rate of a Flow-Noise policy's noise head (``noise_head.*``), under the actor's
    warm-up and decay; None: ``actor_lr``. The head starts from scratch and sets the standard
    deviations, so at a VLA's small actor rate it hardly moves in an hour (README)."""
    actor_lr_warmup_steps: int = 0
    """Actor gradient steps over which its learning rate rises linearly to ``actor_lr`` (step k of
    n uses ``actor_lr * k / n``); 0 starts at ``actor_lr``. Adam's first steps move every weight by
    about the learning rate whatever its gradient, which from a fine-tuned start can be a large jump."""
    actor_lr_decay_steps: int = 0
    """Actor gradient step at which its learning rate reaches 0, falling linearly from ``actor_lr``
    after the warm-up (step k uses ``actor_lr * (n - k) / (n - warmup)``, 0 from step n on); 0 keeps
    it constant. An update makes ``num_epochs * num_minibatches`` actor steps (none during
    ``critic_warmup_iterations``), so a decay that ends with a budget of ``iterations`` updates is
    ``(iterations - critic_warmup_iterations) * num_epochs * num_minibatches``. The count lives in
    the checkpoint: the rate of a step is the same on any machine and after a resume."""
    critic_warmup_iterations: int = 0
    """PPO: first iterations update the value head only."""
    critic_trains_features: bool = False
    """PPO: the value loss also trains the features it shares with the actor (the backbone); False
    keeps them the actor's alone and trains the value head only."""
    recompute_log_probs: bool = True
    """Recompute the behaviour log-probabilities with the training model after the rollout."""
    group_size: int = 8
    """GRPO: episodes per group (same initial state)."""
    score: str = "success"
    """GRPO: episode score, ``success`` or ``return`` (summed reward until the episode's end), or
    ``return_to_go``: each decision scored by the reward summed from it to the episode's end and
    compared with its group at the same decision (``vla_rl.algorithms.grpo_advantages``)."""
    score_discount: float = 1.0
    """GRPO ``return_to_go``: weight of the reward k decisions ahead, ``score_discount ** k``; below
    1 each decision is credited mostly with the next ~1 / (1 - score_discount) decisions' rewards,
    and the centred rewards-to-go are divided by their own std over each group's decisions (or the
    batch's, ``advantage_scale: batch``). 1: the undiscounted sum, scaled by the episode scores."""
    advantage_scale: str = "group"
    """GRPO: what divides the group-centred scores, ``group`` (each group's std, as published) or
    ``batch`` (one std over the kept groups of each rollout round: a group weighs by the spread of
    its scores; ``vla_rl.algorithms.grpo_advantages``)."""
    keep_success_range: list[float] = field(default_factory=lambda: [0.1, 0.9])
    """GRPO dynamic sampling: keep groups whose success rate lies in this range."""
    negative_advantage_weight: float = 1.0
    """GRPO: factor on the negative (below the group's mean) advantages; below 1 the update leans
    on the successes (positive-sample reinforcement), 0 reinforces the successes only."""
    max_sampling_rounds: int = 4
    """GRPO: rollouts collected per iteration at most to fill the batch with informative groups."""
    groups_per_update: int = 0
    """GRPO: informative groups an update waits for (collecting up to ``max_sampling_rounds``
    rollouts); 0: as many as one rollout holds (``num_envs / group_size``). More groups per update
    spread each gradient step over more initial states, at the price of fewer updates per hour."""
    decision_fraction: float = 1.0
    """GRPO: the share of an update's kept decisions that it trains on, drawn at random once per
    update (every epoch passes over the same draw); 1: all of them. Every decision of an episode
    carries that episode's advantage, so a draw keeps each episode's signal at a fraction of the
    update's cost, and more rollouts fit in an hour."""
    curriculum_pool: int = 0
    """GRPO: draw the groups' initial states (task variant and layout) from a pool of this many
    seeds, more often those the policy fails (``vla_rl.rollout.seed_curriculum``); 0: fresh seeds."""

    def validate(self) -> None:
        """``ConfigError`` (a ``ValueError``) naming ``algorithm.<key>`` for the first bad value."""
        check_values(self, chunk_rl_checks(), "algorithm")


def chunk_rl_checks() -> list[Check[ChunkRLConfig]]:
    """The value checks of ``ChunkRLConfig`` (built on use: they read the registries' names)."""
    from vla_rl.algorithms.registry import registered_chunk_algorithms
    from vla_rl.registry import is_import_path
    from vla_rl.rewards.shaping import REWARDS

    algorithms = registered_chunk_algorithms()
    return [
        Check(
            "name",
            lambda c: c.name in algorithms or is_import_path(c.name),
            f"unknown algorithm; allowed: {algorithms} (or your own as 'package.module:Class')",
        ),
        *ACTOR_CRITIC_CHECKS,
        one_of("log_prob_level", LOG_PROB_LEVELS),
        one_of("advantage_granularity", ADVANTAGE_GRANULARITIES),
        Check(
            "advantage_granularity",
            lambda c: c.advantage_granularity != "step" or c.log_prob_level != "chunk",
            "'step' needs log_prob_level 'token' or 'action'",
        ),
        one_of("reward", REWARDS),
        one_of("score", SCORES),
        in_unit_interval("score_discount", open_low=True),
        Check(
            "score_discount",
            lambda c: c.score_discount == 1.0 or c.score == "return_to_go",
            "below 1 needs score 'return_to_go'",
        ),
        one_of("advantage_scale", ADVANTAGE_SCALES),
        *positive("execute_steps", "num_decisions", "temperature", "reward_scale", "max_sampling_rounds"),
        *positive("actor_lr", "value_lr", "noise_head_lr"),
        *not_negative("progress_shaping", "actor_lr_warmup_steps", "groups_per_update", "curriculum_pool"),
        Check(
            "actor_lr_decay_steps",
            lambda c: c.actor_lr_decay_steps == 0 or c.actor_lr_decay_steps > c.actor_lr_warmup_steps,
            "must be 0 or above actor_lr_warmup_steps",
        ),
        in_unit_interval("decision_fraction", open_low=True),
        Check(
            "decision_fraction",
            lambda c: c.decision_fraction == 1.0 or c.name == "vla_grpo",
            "below 1 is a GRPO setting (other algorithms train on every row)",
        ),
        Check("group_size", lambda c: c.group_size >= 2, "must be at least 2"),
        Check("clip_low", lambda c: 0.0 < c.clip_low < 1.0, "must be in (0, 1)"),
        *positive("clip_high"),
        value_check("dual_clip", lambda v: v > 1.0, "must be above 1, or null to disable it"),
        in_unit_interval("negative_advantage_weight"),
        Check(
            "keep_success_range",
            lambda c: (
                len(c.keep_success_range) == 2
                and 0.0 <= c.keep_success_range[0] <= c.keep_success_range[1] <= 1.0
            ),
            "must be [low, high] with 0 <= low <= high <= 1",
        ),
    ]
