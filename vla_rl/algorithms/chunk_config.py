"""Configuration of RL fine-tuning for chunk policies (VLAs, flow policies): PPO and GRPO."""

from __future__ import annotations

from dataclasses import dataclass, field

from vla_rl.algorithms.grpo_advantages import ADVANTAGE_SCALES
from vla_rl.policies.chunk_policy import LOG_PROB_LEVELS

SCORES = ("success", "return", "return_to_go")
ADVANTAGE_GRANULARITIES = ("chunk", "step")


@dataclass
class ChunkRLConfig:
    """PPO and GRPO settings; defaults follow the published VLA recipes (see the README)."""

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
    num_epochs: int = 2
    """Passes over each rollout."""
    num_minibatches: int = 4
    """Minibatches per epoch."""
    gamma: float = 0.99
    """Discount per control step (a chunk of k executed steps discounts by gamma ** k)."""
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
    gae_lambda: float = 0.95
    """GAE lambda, per decision (``chunk``) or per control step (``step``)."""
    advantage_granularity: str = "chunk"
    """PPO: ``chunk`` (each chunk one step of GAE, its executed rewards summed) or ``step`` (GAE
    over control steps, one advantage per executed action; token or action log-probs)."""
    clip_low: float = 0.2
    """Lower clip range: ratios below ``1 - clip_low`` are clipped."""
    clip_high: float = 0.28
    """Upper clip range ("clip-higher"): ratios above ``1 + clip_high`` are clipped."""
    dual_clip: float | None = 3.0
    """Cap of the loss of negative-advantage samples at ``dual_clip * |A|``; None disables."""
    value_clip: float = 0.2
    """Clip of the value update around the rollout's values; <= 0 disables."""
    huber_delta: float | None = 10.0
    """Huber threshold of the value loss; None: squared error."""
    value_coef: float = 0.5
    """Weight of the value loss."""
    entropy_coef: float = 0.0
    """Weight of the entropy bonus; 0 disables."""
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
    it constant. Lets a run keep what it gained instead of drifting at full rate to the end."""
    actor_lr_decay_minutes: float = 0.0
    """Wall-clock minutes of training at which the actor's learning rate reaches 0, falling linearly
    from ``actor_lr`` after the warm-up (the rate of an update is ``actor_lr * (1 - elapsed / m)``,
    ``elapsed`` the minutes of the clock ``max_minutes`` counts, evaluations included, when the
    update starts); 0 off. Unlike
    ``actor_lr_decay_steps`` it ends the decay with a ``max_minutes`` budget however fast the
    machine runs; a resumed run goes on from its own clock, so its rates follow its wall time."""
    max_grad_norm: float = 1.0
    """Gradient-norm clip; <= 0 disables."""
    critic_warmup_iterations: int = 0
    """PPO: first iterations update the value head only."""
    critic_trains_features: bool = False
    """PPO: the value loss also trains the features it shares with the actor (the backbone); False
    keeps them the actor's alone and trains the value head only."""
    recompute_log_probs: bool = True
    """Recompute the behaviour log-probabilities with the training model after the rollout."""
    normalize_advantages: bool = True
    """PPO: standardise advantages over the valid entries of the rollout."""
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
        from vla_rl.algorithms.registry import registered_chunk_algorithms
        from vla_rl.registry import is_import_path

        if self.name not in registered_chunk_algorithms() and not is_import_path(self.name):
            raise ValueError(f"unknown algorithm {self.name!r}; allowed: {registered_chunk_algorithms()}")
        if self.log_prob_level not in LOG_PROB_LEVELS:
            raise ValueError(
                f"log_prob_level must be one of {list(LOG_PROB_LEVELS)}, got {self.log_prob_level!r}"
            )
        if self.advantage_granularity not in ADVANTAGE_GRANULARITIES:
            raise ValueError(
                f"advantage_granularity must be one of {list(ADVANTAGE_GRANULARITIES)}, "
                f"got {self.advantage_granularity!r}"
            )
        if self.advantage_granularity == "step" and self.log_prob_level == "chunk":
            raise ValueError("advantage_granularity 'step' needs log_prob_level 'token' or 'action'")
        from vla_rl.rewards.shaping import REWARDS

        if self.reward not in REWARDS:
            raise ValueError(f"reward must be one of {list(REWARDS)}, got {self.reward!r}")
        if self.score not in SCORES:
            raise ValueError(f"score must be one of {list(SCORES)}, got {self.score!r}")
        if not 0.0 < self.score_discount <= 1.0:
            raise ValueError(f"score_discount must lie in (0, 1], got {self.score_discount}")
        if self.score_discount < 1.0 and self.score != "return_to_go":
            raise ValueError(f"score_discount below 1 needs score 'return_to_go', got {self.score!r}")
        if self.advantage_scale not in ADVANTAGE_SCALES:
            raise ValueError(
                f"advantage_scale must be one of {list(ADVANTAGE_SCALES)}, got {self.advantage_scale!r}"
            )
        positive = {
            "execute_steps": self.execute_steps,
            "num_decisions": self.num_decisions,
            "num_epochs": self.num_epochs,
            "num_minibatches": self.num_minibatches,
            "temperature": self.temperature,
            "reward_scale": self.reward_scale,
            "actor_lr": self.actor_lr,
            "value_lr": self.value_lr,
            "max_sampling_rounds": self.max_sampling_rounds,
        }
        if self.noise_head_lr is not None and self.noise_head_lr <= 0:
            raise ValueError(f"noise_head_lr must be > 0 or None, got {self.noise_head_lr}")
        if self.progress_shaping < 0:
            raise ValueError(f"progress_shaping must be >= 0, got {self.progress_shaping}")
        if self.actor_lr_warmup_steps < 0:
            raise ValueError(f"actor_lr_warmup_steps must be >= 0, got {self.actor_lr_warmup_steps}")
        if self.actor_lr_decay_steps and self.actor_lr_decay_steps <= self.actor_lr_warmup_steps:
            raise ValueError(
                f"actor_lr_decay_steps must be 0 or above actor_lr_warmup_steps "
                f"({self.actor_lr_warmup_steps}), got {self.actor_lr_decay_steps}"
            )
        if self.actor_lr_decay_minutes < 0:
            raise ValueError(f"actor_lr_decay_minutes must be >= 0, got {self.actor_lr_decay_minutes}")
        if self.actor_lr_decay_minutes > 0 and self.actor_lr_decay_steps > 0:
            raise ValueError("set one of actor_lr_decay_steps and actor_lr_decay_minutes, not both")
        if self.groups_per_update < 0:
            raise ValueError(f"groups_per_update must be >= 0, got {self.groups_per_update}")
        if self.curriculum_pool < 0:
            raise ValueError(f"curriculum_pool must be >= 0, got {self.curriculum_pool}")
        bad = {name: value for name, value in positive.items() if value <= 0}
        if bad:
            raise ValueError(f"these settings must be > 0: {bad}")
        if not 0.0 < self.decision_fraction <= 1.0:
            raise ValueError(f"decision_fraction must lie in (0, 1], got {self.decision_fraction}")
        if self.decision_fraction < 1.0 and self.name != "vla_grpo":
            raise ValueError(f"decision_fraction below 1 is a GRPO setting; {self.name} trains on every row")
        if self.group_size < 2:
            raise ValueError(f"group_size must be >= 2, got {self.group_size}")
        if not 0.0 < self.clip_low < 1.0 or self.clip_high <= 0.0:
            raise ValueError(
                f"need 0 < clip_low < 1 and clip_high > 0, got {self.clip_low}, {self.clip_high}"
            )
        if self.dual_clip is not None and self.dual_clip <= 1.0:
            raise ValueError(f"dual_clip must be > 1 or None, got {self.dual_clip}")
        if not 0.0 <= self.negative_advantage_weight <= 1.0:
            raise ValueError(
                f"negative_advantage_weight must lie in [0, 1], got {self.negative_advantage_weight}"
            )
        if len(self.keep_success_range) != 2:
            raise ValueError(f"keep_success_range must be [low, high], got {self.keep_success_range}")
        low, high = self.keep_success_range
        if not 0.0 <= low <= high <= 1.0:
            raise ValueError(
                f"keep_success_range must satisfy 0 <= low <= high <= 1, got {self.keep_success_range}"
            )
