"""Flow-matching policies: pi0 (transformers' ``PI0ForConditionalGeneration``), SmolVLA (LeRobot's
folders, ``smolvla``; imported on use) and a small MLP flow policy."""

from vla_rl.policies.flow.flow_mlp import FlowMLPConfig, FlowMLPPolicy
from vla_rl.policies.flow.normalization import NormStats
from vla_rl.policies.flow.pi0 import Pi0Policy, PrefixCache
from vla_rl.policies.flow.pi0_config import Pi0PolicyConfig, tiny_pi0_config

__all__ = [
    "FlowMLPConfig",
    "FlowMLPPolicy",
    "NormStats",
    "Pi0Policy",
    "Pi0PolicyConfig",
    "PrefixCache",
    "tiny_pi0_config",
]
