"""Algorithms by name (``algorithm.name``): one table for the state, chunk and supervised learners.

Every algorithm has the training loop's contract: ``update(batch) -> dict[str, float]`` (the batch
its source gives: a ``RolloutBuffer`` (of state steps or chunk decisions), GRPO's grouped rollouts, SFT's
minibatches, the off-policy learner's replay minibatches), ``state_dict()`` and
``load_state_dict(state)``. They differ in what builds them: a state algorithm is ``cls(policy,
cfg)`` with a ``PPOConfig``, a chunk algorithm ``cls(policy, cfg, reference_policy)`` with a
``ChunkRLConfig``, SFT ``cls(policy, optim, steps, device)``, SAC ``cls(actor, critic, encode,
cfg)`` with a ``SACConfig``. An algorithm of your own plugs in as ``"package.module:Class"`` in
place of a name.
"""

from __future__ import annotations

from typing import Any

from vla_rl.algorithms.config import PPOConfig
from vla_rl.policies.base import ActorCriticPolicy
from vla_rl.policies.chunk_policy import ChunkPolicy
from vla_rl.registry import removed_decorator, resolve

ALGORITHMS: dict[str, str] = {
    # State algorithms: train an ActorCriticPolicy from a RolloutBuffer.
    "ppo": "vla_rl.algorithms.ppo:PPO",
    # Chunk algorithms: train a ChunkPolicy from a RolloutBuffer of decisions (VLA and flow policies).
    "vla_ppo": "vla_rl.algorithms.chunk_ppo:ChunkPPO",
    "vla_grpo": "vla_rl.algorithms.chunk_grpo:ChunkGRPO",
    # Supervised: train a ChunkPolicy on demonstration minibatches (vla-rl sft).
    "sft": "vla_rl.algorithms.sft:SFT",
    # Off-policy: train an actor and a critic ensemble from replay minibatches (SAC; RLPD's settings).
    "sac": "vla_rl.algorithms.sac:SAC",
}
"""Built-in algorithms: name -> ``"module:Class"``."""

register_algorithm = removed_decorator("register_algorithm", "algorithm.name")
register_chunk_algorithm = removed_decorator("register_chunk_algorithm", "algorithm.name")

STATE_ALGORITHMS = ("ppo",)
"""The built-in names :func:`build_algorithm` builds."""
SUPERVISED_ALGORITHMS = ("sft",)
"""Built by ``vla-rl sft``."""
OFF_POLICY_ALGORITHMS = ("sac",)
"""Built by the off-policy trainer (``cls(actor, critic, encode, cfg)``); the rest are chunk algorithms."""


def algorithm_class(name: str) -> type:
    """The class of algorithm ``name`` (a name of :data:`ALGORITHMS` or ``"module:Class"``)."""
    return resolve(ALGORITHMS, name, "algorithm")


def registered_algorithms() -> list[str]:
    """The built-in state algorithms (``algorithm.name`` of ``vla-rl train``)."""
    return sorted(STATE_ALGORITHMS)


def registered_chunk_algorithms() -> list[str]:
    """The built-in chunk algorithms (``algorithm.name`` of a VLA RL recipe)."""
    return sorted(set(ALGORITHMS) - {*STATE_ALGORITHMS, *SUPERVISED_ALGORITHMS, *OFF_POLICY_ALGORITHMS})


def build_algorithm(cfg: PPOConfig, policy: ActorCriticPolicy) -> Any:
    """Build the state algorithm named ``cfg.name`` training ``policy``."""
    _refuse_off_policy(cfg.name)
    if cfg.name in registered_chunk_algorithms():
        raise ValueError(
            f"algorithm {cfg.name!r} trains chunk policies (a VLA RL recipe); "
            f"state algorithms: {registered_algorithms()}"
        )
    return algorithm_class(cfg.name)(policy, cfg)


def build_chunk_algorithm(cfg: Any, policy: ChunkPolicy, reference_policy: ChunkPolicy | None = None) -> Any:
    """Build the chunk algorithm named ``cfg.name`` (a ``ChunkRLConfig``, which validates its name
    against this registry) training ``policy``."""
    _refuse_off_policy(cfg.name)
    if cfg.name in registered_algorithms():
        raise ValueError(
            f"algorithm {cfg.name!r} trains state policies; chunk algorithms: {registered_chunk_algorithms()}"
        )
    return algorithm_class(cfg.name)(policy, cfg, reference_policy)


def _refuse_off_policy(name: str) -> None:
    if name in OFF_POLICY_ALGORITHMS:
        raise ValueError(
            f"algorithm {name!r} is the off-policy learner: run it as `vla-rl train algorithm={name}` "
            f"(or algorithm=rlpd), which builds it from configs/off_policy.yaml"
        )
