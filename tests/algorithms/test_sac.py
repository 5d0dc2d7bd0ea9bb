"""SAC and RLPD updates checked against numbers worked out by hand, and a 1-step bandit it must solve
(the networks: ``tests/policies/test_sac_networks.py``)."""

from __future__ import annotations

import copy
import functools
import math
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from vla_rl.algorithms.sac import (
    SAC,
    build_sac_networks,
    polyak_update,
    soft_td_target,
)
from vla_rl.algorithms.sac_config import SACConfig
from vla_rl.policies.layers import VectorObsEncoder
from vla_rl.policies.sac_encoder import SACObsEncoder


@dataclass
class Batch:
    obs: dict[str, torch.Tensor]
    action: torch.Tensor
    reward: torch.Tensor
    next_obs: dict[str, torch.Tensor]
    terminated: torch.Tensor


def state(obs: dict[str, torch.Tensor]) -> torch.Tensor:
    return obs["state"]


def one_sample_batch(reward: float, terminated: bool) -> Batch:
    return Batch(
        obs={"state": torch.zeros(1, 1)},
        action=torch.zeros(1, 1),
        reward=torch.tensor([reward]),
        next_obs={"state": torch.ones(1, 1)},
        terminated=torch.tensor([terminated]),
    )


def random_batch(generator: torch.Generator, size: int = 8, obs_dim: int = 3, action_dim: int = 2) -> Batch:
    return Batch(
        obs={"state": torch.randn(size, obs_dim, generator=generator)},
        action=torch.rand(size, action_dim, generator=generator) * 2 - 1,
        reward=torch.randn(size, generator=generator),
        next_obs={"state": torch.randn(size, obs_dim, generator=generator)},
        terminated=torch.rand(size, generator=generator) < 0.3,
    )


class FixedActor(nn.Module):
    """Samples always ``action`` with log-probability ``log_prob`` (a parameter with no effect keeps
    Adam and backward working)."""

    def __init__(self, action: float, log_prob: float, action_dim: int = 1) -> None:
        super().__init__()
        self.action_dim = action_dim
        self.action = action
        self.log_prob = log_prob
        self.unused = nn.Parameter(torch.zeros(()))

    def sample(self, features, generator=None):
        batch = features.shape[0]
        action = torch.full((batch, self.action_dim), self.action) + 0.0 * self.unused
        return action, torch.full((batch,), self.log_prob) + 0.0 * self.unused

    def deterministic(self, features):
        return self.sample(features)[0]


class ConstantCritics(nn.Module):
    """Critic i returns ``values[i]`` everywhere; the values are its parameters."""

    def __init__(self, values: list[float]) -> None:
        super().__init__()
        self.num_critics = len(values)
        self.values = nn.Parameter(torch.tensor(values))

    def forward(self, features, action, members=None):
        values = self.values if members is None else self.values[members]
        return values[:, None].expand(len(values), features.shape[0])


def stub_sac(critic_values: list[float], log_prob: float, **cfg) -> SAC:
    cfg.setdefault("num_critics", len(critic_values))
    cfg.setdefault("critic_subset", len(critic_values))
    return SAC(FixedActor(0.3, log_prob), ConstantCritics(critic_values), state, SACConfig(**cfg))


def small_sac(**cfg) -> SAC:
    torch.manual_seed(0)
    config = SACConfig(**cfg)
    actor, critic = build_sac_networks(3, 2, config, hidden_sizes=[16, 16])
    return SAC(actor, critic, state, config, torch.Generator().manual_seed(1))


# --- TD target --------------------------------------------------------------------------------------


def test_td_target_on_one_sample_by_hand():
    # r = 1, gamma = 0.9, target critics 2 and 3 -> min 2, log pi(a'|s') = -0.5, alpha = 0.2:
    # y = 1 + 0.9 * (2 - 0.2 * (-0.5)) = 1 + 0.9 * 2.1 = 2.89.
    sac = stub_sac([2.0, 3.0], log_prob=-0.5, gamma=0.9, init_alpha=0.2)
    torch.testing.assert_close(sac.td_target(one_sample_batch(1.0, False)), torch.tensor([2.89]))


def test_td_target_without_entropy_backup_by_hand():
    # y = 1 + 0.9 * 2 = 2.8.
    sac = stub_sac([2.0, 3.0], log_prob=-0.5, gamma=0.9, init_alpha=0.2, backup_entropy=False)
    torch.testing.assert_close(sac.td_target(one_sample_batch(1.0, False)), torch.tensor([2.8]))


def test_terminated_masks_the_bootstrap_and_truncated_does_not():
    sac = stub_sac([2.0, 3.0], log_prob=-0.5, gamma=0.9, init_alpha=0.2)
    # Terminated: y = r. A truncated step is not terminated in the batch, so it bootstraps (2.89).
    torch.testing.assert_close(sac.td_target(one_sample_batch(1.0, True)), torch.tensor([1.0]))
    torch.testing.assert_close(sac.td_target(one_sample_batch(1.0, False)), torch.tensor([2.89]))


def test_soft_td_target_elementwise():
    y = soft_td_target(
        reward=torch.tensor([1.0, -1.0]),
        terminated=torch.tensor([False, True]),
        next_q=torch.tensor([4.0, 100.0]),
        next_log_prob=torch.tensor([1.0, 1.0]),
        alpha=0.5,
        gamma=0.5,
    )
    # 1 + 0.5 * (4 - 0.5) = 2.75; -1 (terminated).
    torch.testing.assert_close(y, torch.tensor([2.75, -1.0]))


def test_subset_min_uses_only_the_drawn_critics(monkeypatch):
    # Critics 5, 1, 3, 2: the min over all is 1, over the subset {0, 2} it is 3.
    sac = stub_sac([5.0, 1.0, 3.0, 2.0], log_prob=0.0, gamma=0.5, critic_subset=2)
    monkeypatch.setattr(sac, "draw_critic_subset", lambda: torch.tensor([0, 2]))
    # y = 0 + 0.5 * (3 - alpha * 0) = 1.5.
    torch.testing.assert_close(sac.td_target(one_sample_batch(0.0, False)), torch.tensor([1.5]))


def test_critic_subsets_are_distinct_and_cover_the_ensemble():
    sac = stub_sac([0.0] * 10, log_prob=0.0, critic_subset=2)
    seen = set()
    for _ in range(200):
        subset = sac.draw_critic_subset().tolist()
        assert len(subset) == 2 and len(set(subset)) == 2
        seen.update(subset)
    assert seen == set(range(10))


# --- target critics, temperature, update counts ---------------------------------------------------


def test_polyak_update_by_hand():
    online, target = nn.Linear(1, 1, bias=False), nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        online.weight.fill_(2.0)
        target.weight.fill_(10.0)
    polyak_update(target, online, tau=0.25)
    # 0.25 * 2 + 0.75 * 10 = 8.
    assert float(target.weight.detach()) == 8.0


def test_critic_step_moves_targets_by_tau_by_hand():
    # One critic Q = theta = 1, target theta' = 1; terminated with r = 0 gives y = 0, so the gradient
    # of (theta - 0)^2 is 2 > 0 and Adam's first step moves theta by -lr: theta = 1 - 0.1 = 0.9.
    # Then theta' = 0.5 * 0.9 + 0.5 * 1 = 0.95.
    sac = stub_sac([1.0], log_prob=0.0, critic_lr=0.1, tau=0.5)
    sac.update([one_sample_batch(0.0, True)])
    assert float(sac.critic.values.detach()) == pytest.approx(0.9, abs=1e-6)
    assert float(sac.target_critic.values) == pytest.approx(0.95, abs=1e-6)


@pytest.mark.parametrize(
    ("log_prob", "direction"),
    [
        # log pi + target_entropy = 0 + (-1) < 0: entropy 0 is above the target -1, alpha falls.
        (0.0, -1.0),
        # 2 + (-1) > 0: entropy -2 is below the target -1, alpha rises.
        (2.0, 1.0),
    ],
)
def test_alpha_moves_towards_the_target_entropy(log_prob, direction):
    # d/d(log_alpha) of -log_alpha * (log pi + target_entropy) is -(log pi + target_entropy); Adam's
    # first step moves log_alpha by alpha_lr * sign(log pi + target_entropy).
    sac = stub_sac([0.0, 0.0], log_prob=log_prob, alpha_lr=0.01, init_alpha=0.5)
    assert sac.target_entropy == -1.0
    metrics = sac.update([one_sample_batch(0.0, True)])
    assert float(sac.log_alpha.detach()) == pytest.approx(math.log(0.5) + direction * 0.01, abs=1e-6)
    assert metrics["alpha"] == pytest.approx(math.exp(math.log(0.5) + direction * 0.01), abs=1e-6)


def first_step_count(optimizer: torch.optim.Optimizer) -> int:
    return int(next(iter(optimizer.state.values()))["step"])


def test_utd_ratio_makes_k_critic_steps_and_one_actor_step():
    sac = small_sac(utd_ratio=3)
    generator = torch.Generator().manual_seed(2)
    metrics = sac.update([random_batch(generator) for _ in range(3)])
    assert first_step_count(sac.critic_optimizer) == 3
    assert first_step_count(sac.actor_optimizer) == 1
    assert first_step_count(sac.alpha_optimizer) == 1
    assert {"critic_loss", "q_mean", "actor_loss", "alpha_loss", "entropy", "alpha"} <= set(metrics)
    with pytest.raises(ValueError, match="utd_ratio=3"):
        sac.update([random_batch(generator)])


def test_actor_update_every_skips_calls():
    sac = small_sac(actor_update_every=2)
    generator = torch.Generator().manual_seed(2)
    for _ in range(3):
        sac.update([random_batch(generator)])
    assert first_step_count(sac.critic_optimizer) == 3
    assert first_step_count(sac.actor_optimizer) == 2


def test_actor_step_leaves_critics_without_gradients():
    sac = small_sac()
    sac.actor_and_alpha_step(random_batch(torch.Generator().manual_seed(2)))
    assert all(param.grad is None for param in sac.critic.parameters())
    assert all(param.requires_grad for param in sac.critic.parameters())


def test_config_checks_and_rlpd_preset():
    rlpd = SACConfig.rlpd()
    assert (rlpd.num_critics, rlpd.critic_subset, rlpd.utd_ratio, rlpd.layer_norm) == (10, 2, 20, True)
    with pytest.raises(ValueError, match="critic_subset"):
        SACConfig(num_critics=2, critic_subset=3)
    with pytest.raises(ValueError, match="tau"):
        SACConfig(tau=0.0)
    with pytest.raises(ValueError, match="num_critics"):
        SAC(FixedActor(0.0, 0.0), ConstantCritics([0.0, 0.0, 0.0]), state, SACConfig())


# --- exact resume -------------------------------------------------------------------------------------


def test_state_dict_round_trip_gives_the_identical_next_update():
    cfg = {"num_critics": 4, "critic_subset": 2, "utd_ratio": 2, "layer_norm": True}
    generator = torch.Generator().manual_seed(5)
    first, second = [random_batch(generator) for _ in range(2)], [random_batch(generator) for _ in range(2)]
    sac = small_sac(**cfg)
    sac.update(first)
    saved = copy.deepcopy(sac.state_dict())
    expected_metrics = sac.update(second)

    torch.manual_seed(123)
    config = SACConfig(**cfg)
    resumed = SAC(*build_sac_networks(3, 2, config, hidden_sizes=[16, 16]), state, config)
    resumed.load_state_dict(saved)
    assert resumed.update(second) == expected_metrics
    for name in ("actor", "critic", "target_critic"):
        for key, value in getattr(sac, name).state_dict().items():
            torch.testing.assert_close(getattr(resumed, name).state_dict()[key], value, rtol=0, atol=0)
    assert float(resumed.log_alpha.detach()) == float(sac.log_alpha.detach())


# --- from pixels: the encoder and the image shift ----------------------------------------------------------

PIXEL_SPACE = gym.spaces.Dict(
    {
        "rgb_front": gym.spaces.Box(0, 255, (8, 8, 3), np.uint8),
        "proprio": gym.spaces.Box(-np.inf, np.inf, (2,), np.float32),
    }
)


def pixel_sac(seed: int = 0, **cfg) -> SAC:
    torch.manual_seed(seed)
    config = SACConfig(**cfg)
    encoder = SACObsEncoder(["rgb_front", "proprio"], PIXEL_SPACE, [4], [[3, 2]], 8)
    actor, critic = build_sac_networks(encoder.output_dim, 2, config, hidden_sizes=[16, 16])
    return SAC(actor, critic, encoder, config, torch.Generator().manual_seed(1))


def pixel_batch(generator: torch.Generator, size: int = 8) -> Batch:
    def obs() -> dict[str, torch.Tensor]:
        image = torch.randint(0, 256, (size, 8, 8, 3), dtype=torch.uint8, generator=generator)
        return {"rgb_front": image, "proprio": torch.randn(size, 2, generator=generator)}

    return Batch(
        obs=obs(),
        action=torch.rand(size, 2, generator=generator) * 2 - 1,
        reward=torch.randn(size, generator=generator),
        next_obs=obs(),
        terminated=torch.zeros(size, dtype=torch.bool),
    )


def test_the_critic_step_trains_the_image_encoder_and_the_actor_step_leaves_it():
    sac = pixel_sac()
    assert isinstance(sac.encode, nn.Module)
    batch = pixel_batch(torch.Generator().manual_seed(2))
    before = copy.deepcopy(sac.encode.state_dict())
    actor_before = copy.deepcopy(sac.actor.state_dict())
    sac.actor_and_alpha_step(batch)
    assert all(param.grad is None for param in sac.encode.parameters())
    for key, value in sac.encode.state_dict().items():
        assert torch.equal(value, before[key]), key
    assert any(not torch.equal(v, actor_before[k]) for k, v in sac.actor.state_dict().items())
    sac.critic_step(batch)
    for key in ("convs.0.weight", "project.0.weight", "project.1.weight"):
        assert not torch.equal(sac.encode.state_dict()[key], before[key]), key


def test_image_shift_moves_the_images_of_obs_and_next_obs_of_each_critic_minibatch():
    sac = pixel_sac(image_shift_px=2, utd_ratio=2)
    batches = [pixel_batch(torch.Generator().manual_seed(seed)) for seed in (3, 4)]
    seen: list[Batch] = []
    critic_step = sac.critic_step
    sac.critic_step = lambda batch: (seen.append(batch), critic_step(batch))[1]
    sac.update(batches)
    assert len(seen) == 2
    for given, used in zip(batches, seen, strict=True):
        for field in ("obs", "next_obs"):
            images, shifted = getattr(given, field)["rgb_front"], getattr(used, field)["rgb_front"]
            assert shifted.dtype == torch.uint8 and not torch.equal(images, shifted)
            assert getattr(used, field)["proprio"] is getattr(given, field)["proprio"]
        assert used.action is given.action
    plain = pixel_sac()
    assert plain.shifted(batches[0]) is batches[0]
    assert "shift_generator" not in plain.state_dict()
    with pytest.raises(ValueError, match="image_shift_px"):
        SACConfig(image_shift_px=-1)


def test_pixel_state_dict_round_trip_with_the_shift_gives_the_identical_next_update():
    cfg = {"image_shift_px": 2, "num_critics": 3, "critic_subset": 2, "utd_ratio": 2, "layer_norm": True}
    generator = torch.Generator().manual_seed(5)
    first = [pixel_batch(generator) for _ in range(2)]
    second = [pixel_batch(generator) for _ in range(2)]
    sac = pixel_sac(**cfg)
    sac.update(first)
    saved = copy.deepcopy(sac.state_dict())
    assert {"encoder", "shift_generator"} <= set(saved)
    expected_metrics = sac.update(second)

    resumed = pixel_sac(seed=123, **cfg)
    resumed.load_state_dict(saved)
    assert resumed.update(second) == expected_metrics
    for key, value in sac.encode.state_dict().items():
        torch.testing.assert_close(resumed.encode.state_dict()[key], value, rtol=0, atol=0)


@pytest.fixture
def one_thread():
    """Tiny networks run fastest on one thread (several fight over the cores for little work)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# --- learning --------------------------------------------------------------------------------------------


BANDIT_SETTINGS = {"init_alpha": 0.1, "actor_lr": 3e-3, "critic_lr": 3e-3, "alpha_lr": 3e-3}


@pytest.mark.parametrize(
    "config",
    [SACConfig(**BANDIT_SETTINGS), SACConfig.rlpd(**BANDIT_SETTINGS, utd_ratio=4)],
    ids=["sac", "rlpd"],
)
def test_sac_solves_a_one_step_continuous_bandit(config: SACConfig, one_thread):
    """reward = -(a - 0.5)^2 and every step terminates, so Q(s, a) = reward and the best action is 0.5."""
    torch.manual_seed(0)
    space = gym.spaces.Dict({"proprio": gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)})
    encoder = VectorObsEncoder(["proprio"], space, normalize=False)
    encode = functools.partial(encoder.encode, keys=["proprio"])
    actor, critic = build_sac_networks(encoder.output_dim(["proprio"]), 1, config, hidden_sizes=[32, 32])
    sac = SAC(actor, critic, encode, config, torch.Generator().manual_seed(0))
    data = torch.Generator().manual_seed(1)
    obs = {"proprio": torch.ones(64, 2)}

    def batch() -> Batch:
        action = torch.rand(64, 1, generator=data) * 2 - 1
        return Batch(obs, action, -((action[:, 0] - 0.5) ** 2), obs, torch.ones(64, dtype=torch.bool))

    for _ in range(400 // config.utd_ratio):  # 400 critic steps: ~3 s (SAC), ~8 s (RLPD) on one core
        metrics = sac.update([batch() for _ in range(config.utd_ratio)])
    action = float(sac.act({"proprio": torch.ones(1, 2)}, deterministic=True))
    assert action == pytest.approx(0.5, abs=0.1), metrics
