"""The frozen-policy wrappers on MuJoCo ``reach`` (2 worlds, episodes of 6 steps) with a tiny flow
policy (chunks of 4 actions of 4, 3 denoising steps): what the env receives, bounds, reward sums and
episode ends inside a chunk."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from tiny_chunk_rl import flow_policy_dir

from vla_rl.config.load import ConfigError
from vla_rl.envs import make_env
from vla_rl.envs.base import BatchedEnv, Observation, StepResult, adopt_spec, env_spec
from vla_rl.policies.flow.flow_mlp import FlowMLPPolicy
from vla_rl.policies.registry import load_chunk_policy
from vla_rl.training.jobs import job_config
from vla_rl.training.off_policy.frozen_policy_config import BASE_ACTION_KEY, FrozenPolicyConfig
from vla_rl.training.off_policy.frozen_policy_env import (
    NoiseActionEnv,
    ResidualActionEnv,
    load_frozen_policy,
)

EPISODE_STEPS = 6


class ActionLog(BatchedEnv):
    """The real env, keeping every action it receives and every step's result."""

    def __init__(self, env: BatchedEnv) -> None:
        adopt_spec(self, env_spec(env))
        self.env = env
        self.actions: list[torch.Tensor] = []
        self.results: list[StepResult] = []

    def reset(self, seed=None, env_ids=None) -> tuple[Observation, dict[str, Any]]:  # noqa: ANN001
        return self.env.reset(seed=seed, env_ids=env_ids)

    def step(self, action: torch.Tensor) -> StepResult:
        self.actions.append(action.clone())
        self.results.append(self.env.step(action))
        return self.results[-1]


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory) -> FlowMLPPolicy:
    loaded = load_chunk_policy("flow_mlp", flow_policy_dir(tmp_path_factory.mktemp("frozen")))
    assert isinstance(loaded, FlowMLPPolicy)
    return loaded.eval()


def reach() -> ActionLog:
    cfg = job_config(
        "off_policy",
        [
            "algorithm=sac",
            "env=reach",
            "env.num_envs=2",
            "env.num_threads=1",
            f"env.max_episode_steps={EPISODE_STEPS}",
        ],
    )
    return ActionLog(make_env(cfg.env))


def test_dsrl_zero_noise_sends_the_chunk_the_chain_makes_from_zero_and_sums_its_rewards(policy) -> None:  # noqa: ANN001
    log = reach()
    env = NoiseActionEnv(log, policy, noise_scale=1.5, execute_steps=0)
    assert env.action_space.shape == (16,)
    assert (env.action_space.low == -1).all() and (env.action_space.high == 1).all()
    obs, _ = env.reset(seed=0)
    chunk = policy.denoise(obs, torch.zeros(2, 4, 4))
    result = env.step(torch.zeros(2, 16))
    assert torch.equal(torch.stack(log.actions, dim=1), chunk)  # all 4 actions, in order
    by_hand = sum(step.reward for step in log.results)
    torch.testing.assert_close(result.reward, by_hand)
    assert not result.done.any() and "episode" not in result.info
    assert torch.equal(result.obs["proprio"], log.results[-1].obs["proprio"])


def test_dsrl_episode_ending_inside_a_chunk_ends_the_transition_and_holds_still(policy) -> None:  # noqa: ANN001
    log = reach()
    env = NoiseActionEnv(log, policy, noise_scale=1.5, execute_steps=0)
    env.reset(seed=0)
    env.step(torch.zeros(2, 16))  # control steps 1-4
    obs = env.obs
    noise = torch.full((2, 16), 0.5)
    chunk = policy.denoise(obs, 0.75 * torch.ones(2, 4, 4))  # 0.5 x noise_scale 1.5
    result = env.step(noise)  # steps 5 and 6 (the time limit), then 2 of the next episode
    received = torch.stack(log.actions[4:], dim=1)
    assert torch.equal(received[:, :2], chunk[:, :2])
    assert torch.equal(received[:, 2:], torch.zeros(2, 2, 4))  # held still after the episode ended
    torch.testing.assert_close(result.reward, log.results[4].reward + log.results[5].reward)
    assert result.truncated.all() and not result.terminated.any()
    ended = log.results[5]
    assert torch.equal(result.info["final_obs"]["proprio"], ended.info["final_obs"]["proprio"])
    assert result.info["episode"]["length"].tolist() == [EPISODE_STEPS, EPISODE_STEPS]
    torch.testing.assert_close(result.info["episode"]["return"], ended.info["episode"]["return"])
    assert torch.equal(result.obs["proprio"], log.results[7].obs["proprio"])  # the new episode, 2 steps in


def test_dsrl_noise_is_bounded_by_noise_scale(policy) -> None:  # noqa: ANN001
    first, second = reach(), reach()
    obs, _ = NoiseActionEnv(first, policy, 1.5, 2).reset(seed=0)
    env = NoiseActionEnv(second, policy, 1.5, 2)
    env.reset(seed=0)
    env.step(torch.full((2, 16), 3.0))  # clipped to 1: noise 1.5 everywhere
    assert torch.equal(torch.stack(second.actions, 1), policy.denoise(obs, torch.full((2, 4, 4), 1.5))[:, :2])


def test_residual_zero_sends_exactly_the_frozen_actions_and_replans_every_execute_steps(policy) -> None:  # noqa: ANN001
    log = reach()
    env = ResidualActionEnv(log, policy, residual_scale=0.2, execute_steps=2)
    assert env.observation_space[BASE_ACTION_KEY].shape == (4,)
    torch.manual_seed(3)
    obs, _ = env.reset(seed=0)
    torch.manual_seed(3)  # the flow policy draws its noise as it plans
    plan = policy.sample(obs, deterministic=True).actions
    assert torch.equal(obs[BASE_ACTION_KEY], plan[:, 0])
    for _ in range(2 * EPISODE_STEPS):
        base = obs[BASE_ACTION_KEY]
        obs = env.step(torch.zeros(2, 4)).obs
        assert torch.equal(log.actions[-1], base)
    assert torch.equal(log.actions[1], plan[:, 1])  # then a new plan from the observation after 2 steps
    assert not torch.equal(log.actions[2], plan[:, 2])


def test_residual_correction_is_bounded_and_clipped_to_the_action_range(policy) -> None:  # noqa: ANN001
    log = reach()
    env = ResidualActionEnv(log, policy, residual_scale=0.2, execute_steps=2)
    env.reset(seed=0)
    env.plan[:, env.cursor[0]] = torch.tensor([0.95, 0.0, -0.5, -0.9])
    env.step(torch.tensor([[1.0, 1.0, -1.0, -1.0], [5.0, -0.5, 0.25, -7.0]]))
    # 0.95 + 0.2 -> 1 (clipped), 0 + 0.2, -0.5 - 0.2, -0.9 - 0.2 -> -1; the second row's action is
    # clipped to [-1, 1] first: 1, -0.5, 0.25, -1 times 0.2
    expected = torch.tensor([[1.0, 0.2, -0.7, -1.0], [1.0, -0.1, -0.45, -1.0]])
    torch.testing.assert_close(log.actions[0], expected)


def test_residual_final_observation_carries_the_frozen_action_there(policy) -> None:  # noqa: ANN001
    log = reach()
    env = ResidualActionEnv(log, policy, residual_scale=0.2, execute_steps=2)
    env.reset(seed=0)
    for _ in range(EPISODE_STEPS - 1):
        env.step(torch.zeros(2, 4))
    torch.manual_seed(5)
    result = env.step(torch.zeros(2, 4))  # the time limit; the plan of steps 5-6 is used up
    assert result.truncated.all()
    final = result.info["final_obs"]
    torch.manual_seed(5)  # the wrapper plans at the final observation first, then at the new one
    at_final = policy.sample(final, deterministic=True).actions[:, 0]
    at_start = policy.sample(result.obs, deterministic=True).actions[:, 0]
    assert torch.equal(final[BASE_ACTION_KEY], at_final)
    assert torch.equal(result.obs[BASE_ACTION_KEY], at_start)


def test_loading_refuses_dsrl_on_a_family_without_noise_and_too_long_execute_steps(tmp_path: Path) -> None:
    directory = flow_policy_dir(tmp_path)
    with pytest.raises(ConfigError, match="config key 'frozen_policy.mode'"):
        load_frozen_policy(FrozenPolicyConfig("dsrl", str(directory), "gaussian"), "cpu")
    with pytest.raises(ConfigError, match="config key 'frozen_policy.execute_steps'"):
        load_frozen_policy(FrozenPolicyConfig("residual", str(directory), "flow_mlp", execute_steps=5), "cpu")
    with pytest.raises(ConfigError, match="config key 'frozen_policy.name'"):
        load_frozen_policy(FrozenPolicyConfig("dsrl", str(directory)), "cpu")  # a bare policy folder
    assert load_frozen_policy(FrozenPolicyConfig(), "cpu") is None
