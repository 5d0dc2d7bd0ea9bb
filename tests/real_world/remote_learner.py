"""The small learner the learner-process tests start (``vla-rl train`` fed by remote actors), and a
free port for it."""

from __future__ import annotations

import socket

REMOTE_REACH_LEARNER = [
    "algorithm=sac",
    "env=reach",
    "env.backend=mujoco",
    "env.num_envs=2",
    "policy.hidden_sizes=[16,16]",
    "replay.batch_size=8",
    "replay.learning_starts=8",
    "eval.num_episodes=0",
    "logger.progress_bar=false",
    "logger.tensorboard=false",
    "logger.wandb_mode=disabled",
    "source=remote",
]
"""SAC on reach with two worlds per message and tiny networks, updating from the 8th transition, with
no evaluation or logging, its transitions from remote actors."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
