"""vla-rl: reinforcement learning for robot manipulation policies."""

__version__ = "0.1.0"
