"""Reward models: rewards from camera frames and instructions, usable by every algorithm."""

from vla_rl.rewards.base import RewardModel, RewardModelError, check_frames, check_instructions
from vla_rl.rewards.registry import build_reward_model, register_reward_model, registered_reward_models

__all__ = [
    "RewardModel",
    "RewardModelError",
    "build_reward_model",
    "check_frames",
    "check_instructions",
    "register_reward_model",
    "registered_reward_models",
]
