"""Actor-critic policies: the common interface, built-in Gaussian MLP/CNN policies, the registry."""

from vla_rl.policies.base import ActorCriticPolicy, PolicyStep
from vla_rl.policies.config import PolicyConfig
from vla_rl.policies.normalizer import RunningMeanStd
from vla_rl.policies.registry import build_policy, register_policy, registered_policies

__all__ = [
    "ActorCriticPolicy",
    "PolicyConfig",
    "PolicyStep",
    "RunningMeanStd",
    "build_policy",
    "register_policy",
    "registered_policies",
]
