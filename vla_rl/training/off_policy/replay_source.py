"""The off-policy learner's batch source: step the env, store the transitions, sample minibatches.

Each ``next_batch`` takes ``env_steps_per_update`` batched env steps with the actor (uniformly random
actions until ``learning_starts`` env steps have been taken: the first call takes them all) and adds
them to the online replay, then draws ``utd_ratio`` minibatches. With demonstrations, each minibatch
is RLPD's symmetric sample: ``share`` of its rows from the demonstrations, the rest online. An env
that reports takeovers (``info["intervention"]``, bool [N]) has those transitions pooled with the
demonstrations (``demo_sampler``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from vla_rl.data.replay_buffer import ReplayBuffer, TransitionBatch
from vla_rl.envs.base import BatchedEnv, Observation
from vla_rl.training.off_policy.config import ReplayConfig
from vla_rl.training.off_policy.demo_sampler import DemoSampler
from vla_rl.training.sources import env_state

Actor = Callable[[Observation], torch.Tensor]
"""``act(obs) -> actions`` [N, A] in [-1, 1] (the policy's sample)."""


class ReplaySource:
    """Collects into ``replay`` (and ``interventions``) from ``env`` and samples it (and the
    demonstration pool: ``demos`` and ``interventions``) for each update."""

    def __init__(
        self,
        env: BatchedEnv,
        replay: ReplayBuffer,
        cfg: ReplayConfig,
        utd_ratio: int,
        seed: int,
        demos: ReplayBuffer | None = None,
        demo_share: float = 0.5,
        interventions: ReplayBuffer | None = None,
    ) -> None:
        self.env, self.replay, self.cfg, self.utd_ratio = env, replay, cfg, utd_ratio
        self.sampler = DemoSampler(replay, cfg.batch_size, demos, interventions, demo_share)
        """Stores the transitions and draws the minibatches."""
        self.generator = torch.Generator().manual_seed(seed)
        """Draws the random warm-up actions and the minibatches."""
        self.actor: Actor | None = None
        """Set by the trainer: the policy that acts after the warm-up."""
        self.env_steps = 0
        """Env steps (transitions) taken so far."""
        self.obs, _ = env.reset(seed=seed)

    def step(self, random_actions: bool) -> list[dict[str, torch.Tensor]]:
        """One batched env step into the replay; the statistics of the episodes that ended."""
        if random_actions or self.actor is None:
            shape = (self.env.num_envs, *self.env.action_space.shape)
            action = torch.rand(shape, generator=self.generator) * 2.0 - 1.0
        else:
            action = self.actor(self.obs).detach().cpu()
        result = self.env.step(action)
        next_obs = result.info.get("final_obs", result.obs)
        intervention = result.info.get("intervention")
        self.sampler.add(
            self.obs, action, result.reward, result.terminated, result.truncated, next_obs, intervention
        )
        self.obs = result.obs
        self.env_steps += self.env.num_envs
        episode = result.info.get("episode")
        return [episode | {"done": result.done}] if episode is not None else []

    def next_batch(self) -> tuple[list[TransitionBatch], dict[str, float]]:
        ended: list[dict[str, torch.Tensor]] = []
        started_steps = self.env_steps
        while self.env_steps < self.cfg.learning_starts:
            ended += self.step(random_actions=True)
        for _ in range(self.cfg.env_steps_per_update):
            ended += self.step(random_actions=self.env_steps < self.cfg.learning_starts)
        batches = [self.sampler.minibatch(self.generator) for _ in range(self.utd_ratio)]
        return batches, {"rollout/env_steps": float(self.env_steps - started_steps), **episode_metrics(ended)}

    def state_dict(self) -> dict[str, Any]:
        """The counters, the generator and the env's snapshot (the replays are saved beside it)."""
        return {
            "env": env_state(self.env),
            "source_env_steps": self.env_steps,
            "source_generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("env") is None:
            raise ValueError("the environment cannot snapshot its state, so this run cannot resume exactly")
        self.obs = self.env.load_state_dict(state["env"])
        self.env_steps = int(state["source_env_steps"])
        self.generator.set_state(state["source_generator"])


def episode_metrics(ended: list[dict[str, torch.Tensor]]) -> dict[str, float]:
    """Mean return, length and success of the episodes that ended (none: no metrics)."""
    if not ended:
        return {}
    values = {
        key: torch.cat([report[key][report["done"]].float() for report in ended])
        for key in ("return", "length", "success")
    }
    return {
        "rollout/episodes": float(len(values["return"])),
        "rollout/mean_return": float(values["return"].mean()),
        "rollout/mean_length": float(values["length"].mean()),
        "rollout/success_rate": float(values["success"].mean()),
    }
