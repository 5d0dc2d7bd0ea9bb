"""On-policy RL algorithms (PPO) and their registry."""

from vla_rl.algorithms.config import PPOConfig
from vla_rl.algorithms.ppo import PPO, PPOLosses
from vla_rl.algorithms.registry import build_algorithm, register_algorithm, registered_algorithms

__all__ = ["PPO", "PPOConfig", "PPOLosses", "build_algorithm", "register_algorithm", "registered_algorithms"]
