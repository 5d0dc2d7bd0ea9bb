"""Rollouts of a tiny flow policy on random observations, for the chunk-algorithm tests."""

from __future__ import annotations

import copy

import torch

from vla_rl.algorithms.chunk_config import ChunkRLConfig
from vla_rl.policies.registry import build_chunk_policy
from vla_rl.rollout.buffer import RolloutBuffer

PROPRIO_DIM = 5


def flow_policy(seed: int = 0, **overrides):
    torch.manual_seed(seed)
    values = {
        "chunk_len": 3,
        "action_dim": 2,
        "proprio_dim": PROPRIO_DIM,
        "hidden_sizes": [32],
        "num_denoising_steps": 3,
    }
    values.update(overrides)
    return build_chunk_policy("flow_mlp", **values)


def token_policy(family: str = "token_vla", seed: int = 0):
    """A tiny token VLA (random PaliGemma backbone) reading a 32x32 front image and proprio."""
    torch.manual_seed(seed)
    return build_chunk_policy(family, chunk_len=2, action_dim=3, use_proprio=True, proprio_dim=PROPRIO_DIM)


def random_obs(num_worlds: int, generator: torch.Generator) -> dict:
    return {
        "proprio": torch.randn(num_worlds, PROPRIO_DIM, generator=generator),
        "rgb_front": torch.randint(0, 256, (num_worlds, 32, 32, 3), dtype=torch.uint8, generator=generator),
        "instruction": ["pick up the cube"] * num_worlds,
    }


def rollout(
    policy,
    num_decisions: int = 3,
    num_worlds: int = 4,
    seed: int = 0,
    with_value: bool = True,
    log_prob_level: str = "chunk",
) -> RolloutBuffer:
    """Decisions sampled by ``policy`` with random rewards, 2 executed steps each; world 1's episode
    ends at the first step of decision 1."""
    generator = torch.Generator().manual_seed(seed)
    batch = RolloutBuffer(num_decisions, num_worlds)
    with torch.no_grad():
        for t in range(num_decisions):
            obs = random_obs(num_worlds, generator)
            step = policy.sample(obs, with_value=with_value, log_prob_level=log_prob_level)
            done = torch.zeros(num_worlds, dtype=torch.bool)
            done[1] = t == 1
            step_rewards = torch.randn(num_worlds, 2, generator=generator)
            executed = torch.ones(num_worlds, 2, dtype=torch.bool)
            executed[1, 1] = t != 1
            step_rewards[~executed] = 0.0
            reward = step_rewards[:, 0] + 0.9 * step_rewards[:, 1]
            valid = torch.ones(num_worlds, dtype=torch.bool)
            batch.add_decision(
                obs,
                step.sample_info,
                step.log_prob,
                step.value,
                reward,
                0.9 ** executed.sum(dim=1).float(),
                done,
                valid,
                step_rewards,
                executed,
            )
        if with_value:
            last_obs = random_obs(num_worlds, generator)
            batch.last_value = policy.sample(last_obs, with_value=True, log_prob_level=log_prob_level).value
    return batch


def config(**overrides) -> ChunkRLConfig:
    values = {"num_minibatches": 2, "num_epochs": 1}
    values.update(overrides)
    return ChunkRLConfig(**values)


def snapshot(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return copy.deepcopy({name: p.detach().clone() for name, p in module.named_parameters()})
