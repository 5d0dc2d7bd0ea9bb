"""On-policy rollout storage, advantage estimation and collection."""

from vla_rl.rollout.buffer import Minibatch, RolloutBuffer
from vla_rl.rollout.collector import RolloutCollector, RolloutStats
from vla_rl.rollout.gae import compute_gae

__all__ = ["Minibatch", "RolloutBuffer", "RolloutCollector", "RolloutStats", "compute_gae"]
