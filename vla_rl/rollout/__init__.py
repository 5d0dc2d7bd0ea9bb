"""On-policy rollout storage, advantage estimation and collection."""

from vla_rl.rollout.buffer import Minibatch, RolloutBuffer
from vla_rl.rollout.collector import RolloutCollector
from vla_rl.rollout.episodes import collect_episodes
from vla_rl.rollout.gae import compute_gae
from vla_rl.rollout.stats import RolloutStats

__all__ = [
    "Minibatch",
    "RolloutBuffer",
    "RolloutCollector",
    "RolloutStats",
    "collect_episodes",
    "compute_gae",
]
