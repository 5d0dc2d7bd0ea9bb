"""An actor in simulation for a remote learner: step ``cfg.env`` with the learner's actor network and
send every step's transitions (``python -m vla_rl.real_world.sim_actor ENV_STEPS OVERRIDES...``).

It takes the learner's overrides (``algorithm``, ``env``, ``policy``, ``remote``), so it builds the
same env and actor network (residual RL: the env seen through the frozen policy, as the learner
sees it). A simulator needs no safety layer; an actor on a robot runs the same
loop with ``safe_robot.SafeRobot`` between the network and the arm. While the client is holding (no
weights yet) it takes no step; when the learner is unreachable it goes on with the weights it has,
and its transitions wait in the client's queue.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

import numpy as np
import torch
from vla_rl.real_world.learner_client import LearnerClient

from vla_rl.envs import make_env
from vla_rl.envs.base import Observation, StepResult
from vla_rl.training.jobs import job_config
from vla_rl.training.off_policy.config import OffPolicyConfig
from vla_rl.training.off_policy.frozen_policy_env import load_frozen_policy, wrap_with_frozen_policy
from vla_rl.training.off_policy.networks import build_networks
from vla_rl.training.off_policy.remote_link import obs_dtype

HOLD_POLL_S = 0.05
"""How often a holding actor asks for weights again."""


@dataclass
class ActorReport:
    env_steps: int
    """Transitions collected (env steps times worlds)."""
    client: LearnerClient
    """The client, with its counters (``sent_rows``, ``dropped``, ``version``)."""


def transitions_message(
    keys: list[str], obs: Observation, action: torch.Tensor, result: StepResult
) -> dict[str, object]:
    """One batched step as a transitions message (``remote_link``'s layout)."""
    next_obs = result.info.get("final_obs", result.obs)

    def vectors(o: Observation) -> dict[str, np.ndarray]:
        return {key: o[key].detach().cpu().numpy().astype(obs_dtype(key)) for key in keys}

    def flags(value: torch.Tensor) -> np.ndarray:
        return value.detach().cpu().numpy().astype(bool)

    rows = len(result.reward)
    return {
        "obs": vectors(obs),
        "next_obs": vectors(next_obs),
        "action": action.detach().cpu().numpy().astype(np.float32),
        "reward": result.reward.detach().cpu().numpy().astype(np.float32),
        "terminated": flags(result.terminated),
        "truncated": flags(result.truncated),
        "intervention": np.zeros(rows, dtype=bool),
    }


def run_sim_actor(cfg: OffPolicyConfig, env_steps: int, actor_id: str | None = None) -> ActorReport:
    """Collect ``env_steps`` transitions for the learner at ``cfg.remote``, asking for its weights
    before every step; then try for up to 5 s to deliver what is still queued."""
    frozen = load_frozen_policy(cfg.frozen_policy, "cpu")
    env = wrap_with_frozen_policy(make_env(cfg.env), frozen, cfg.frozen_policy)
    action_dim = env.action_space.shape[0]
    networks = build_networks(cfg, env.observation_space, action_dim)
    remote = cfg.remote
    client = LearnerClient(remote.host, remote.port, networks.acting(), remote.token, actor_id)
    generator = torch.Generator().manual_seed(cfg.seed)
    obs, _ = env.reset(seed=cfg.seed)
    taken = 0
    try:
        while taken < env_steps:
            client.sync_weights()
            if client.holding:
                client.flush()
                time.sleep(HOLD_POLL_S)
                continue
            with torch.no_grad():
                action, _ = networks.actor.sample(networks.encode(obs), generator)
            result = env.step(action)
            client.send_transitions(transitions_message(cfg.policy.obs_keys, obs, action, result))
            obs = result.obs
            taken += env.num_envs
        deadline = time.monotonic() + 5.0
        while not client.flush() and time.monotonic() < deadline:
            time.sleep(HOLD_POLL_S)
    finally:
        client.close()
        env.close()
    return ActorReport(taken, client)


def main(argv: list[str]) -> int:
    env_steps, overrides = int(argv[0]), argv[1:]
    report = run_sim_actor(job_config("off_policy", overrides), env_steps)
    client = report.client
    print(f"collected {report.env_steps} env steps; the learner stored {client.sent_rows} transitions")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
