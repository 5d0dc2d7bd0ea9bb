"""Evaluation counts each world's first episodes exactly and writes a video and a summary."""

from __future__ import annotations

import json
from pathlib import Path

import imageio.v2 as imageio
import torch
import toy_env

from vla_rl.envs import EnvConfig
from vla_rl.policies import PolicyConfig, build_policy
from vla_rl.training.evaluate import episode_quotas, evaluate


def _env_cfg(**changes: object) -> EnvConfig:
    base = {
        "backend": toy_env.TOY_BACKEND,
        "task": "point",
        "num_envs": 4,
        "max_episode_steps": 5,
        "num_threads": 1,
    }
    return EnvConfig(**{**base, **changes})


def _policy(cfg: EnvConfig):  # noqa: ANN202
    probe = toy_env.ToyPointEnv(cfg)
    torch.manual_seed(0)
    return build_policy(PolicyConfig(hidden_sizes=[8]), probe.observation_space, probe.action_space)


def test_episode_quotas_split_evenly() -> None:
    assert episode_quotas(10, 4).tolist() == [3, 3, 2, 2]
    assert episode_quotas(8, 4).tolist() == [2, 2, 2, 2]
    assert episode_quotas(3, 4).tolist() == [1, 1, 1, 0]


def test_counts_exactly_num_episodes_and_writes_summary(tmp_path: Path) -> None:
    cfg = _env_cfg()
    result = evaluate(_policy(cfg), cfg, num_episodes=10, summary_path=tmp_path / "summary.json")
    assert result.num_episodes == 10
    assert result.mean_length == 5.0
    assert 0.0 <= result.success_rate <= result.success_once_rate <= 1.0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["num_episodes"] == 10 and summary["split"] == "train"


def test_fewer_episodes_than_worlds_uses_fewer_worlds() -> None:
    cfg = _env_cfg(num_envs=16)
    before = len(toy_env.BUILT)
    assert evaluate(_policy(cfg), cfg, num_episodes=3).num_episodes == 3
    assert toy_env.BUILT[before].num_envs == 3


def test_state_policy_gets_a_video_env_with_the_camera(tmp_path: Path) -> None:
    cfg = _env_cfg()
    policy = _policy(cfg)
    policy.train()
    before = len(toy_env.BUILT)
    result = evaluate(
        policy, cfg, num_episodes=4, video_dir=tmp_path, split="ood_all", video_envs=2, video_size=32
    )
    assert policy.training
    video_env = toy_env.BUILT[-1]
    assert len(toy_env.BUILT) == before + 2
    assert (video_env.num_envs, video_env.cameras, video_env.image_size) == (2, ["front"], 32)
    assert result.split == "ood_all"
    frames = imageio.mimread(result.video_path)
    assert len(frames) == 1 + 5  # the reset frame and one per step of the 5-step episode
    assert frames[0].shape == (32, 2 * 32, 3)
    assert json.loads((tmp_path / "eval_summary.json").read_text())["video_path"] == result.video_path


def test_success_is_also_reported_per_instruction() -> None:
    """Two worlds with their own task sentence; world 0 succeeds on its even episodes, world 1 never."""
    from vla_rl.envs.base import StepResult
    from vla_rl.training.evaluate import run_episodes

    class TwoTasks:
        num_envs, device = 2, torch.device("cpu")

        def __init__(self) -> None:
            self.episode = 0

        def _obs(self) -> dict:
            return {"proprio": torch.zeros(2, 1), "instruction": ["open the drawer", "press the button"]}

        def reset(self, seed=None):  # noqa: ANN001, ANN202
            return self._obs(), {}

        def step(self, action: torch.Tensor) -> StepResult:
            success = torch.tensor([self.episode % 2 == 0, False])
            self.episode += 1
            done = torch.ones(2, dtype=torch.bool)
            episode = {
                "return": success.float(),
                "length": torch.ones(2),
                "success": success,
                "success_once": success,
            }
            info = {"success": success, "final_obs": self._obs(), "episode": episode}
            return StepResult(self._obs(), success.float(), ~done, done, info)

    class ZeroActions:
        def act(self, obs: dict) -> torch.Tensor:
            return torch.zeros(2, 1)

        def episodes_ended(self, done: torch.Tensor) -> None:
            pass

    result = run_episodes(ZeroActions(), TwoTasks(), num_episodes=8, seed=0)
    assert result.success_by_instruction == {"open the drawer": 0.5, "press the button": 0.0}
    assert result.success_rate == 0.25


def test_observations_reach_the_policy_on_its_device() -> None:
    """``vla-rl eval`` loads the policy on the CPU while a GPU simulator returns CUDA tensors (and a
    run may do the reverse): evaluation moves each observation to the policy's device. The ``meta``
    device stands in for the other device: mixing it with CPU tensors raises as CUDA does."""
    import gymnasium as gym

    from vla_rl.policies.base import ActorCriticPolicy
    from vla_rl.policies.chunk_policy import ChunkStep

    class PolicyOnAnotherDevice(ActorCriticPolicy):
        def __init__(self) -> None:
            super().__init__(PolicyConfig(actor_obs_keys=[]), gym.spaces.Dict(), gym.spaces.Box(-1, 1, (2,)))
            self.to("meta")
            self.seen: list[str] = []

        def sample(self, obs, **_: object) -> ChunkStep:  # noqa: ANN001
            obs["proprio"] * self.log_std  # what a network does first; raises on a device mismatch
            self.seen.append(obs["proprio"].device.type)
            zeros = torch.zeros(len(obs["proprio"]), 1, 2)  # meta tensors cannot be copied back
            return ChunkStep(actions=zeros, log_prob=zeros[:, 0, 0])

        def mean_and_value(self, obs):  # noqa: ANN001, ANN202
            raise NotImplementedError

        def get_value(self, obs):  # noqa: ANN001, ANN202
            raise NotImplementedError

    policy = PolicyOnAnotherDevice()
    result = evaluate(policy, _env_cfg(), num_episodes=4)
    assert result.num_episodes == 4
    assert set(policy.seen) == {"meta"}


def test_sampled_evaluation_draws_from_its_own_seeded_stream() -> None:
    """A state policy sampling its actions gets the same episodes whatever the global generator
    holds, and the global generator is where it was (a run's training does not feel its evaluations)."""
    cfg = _env_cfg()
    policy = _policy(cfg)
    results = []
    for global_seed in (1, 2):
        torch.manual_seed(global_seed)
        expected = torch.rand(3)
        torch.manual_seed(global_seed)
        results.append(evaluate(policy, cfg, num_episodes=6, deterministic=False, seed=7))
        assert torch.equal(torch.rand(3), expected)
    assert results[0] == results[1]
    other_seed = evaluate(policy, cfg, num_episodes=6, deterministic=False, seed=8)
    assert other_seed.mean_return != results[0].mean_return
