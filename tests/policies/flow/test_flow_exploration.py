"""Exploration modes of the flow policies: recomputed log-probs match the sampled ones, the
deterministic chain is the Euler ODE, and Flow-Noise learns its standard deviations."""

import math

import pytest
import torch
from flow_fixtures import make_flow_mlp, make_obs, make_pi0

from vla_rl.algorithms.chunk_config import ChunkRLConfig
from vla_rl.algorithms.chunk_ppo import ChunkPPO
from vla_rl.algorithms.chunk_update import NOISE_HEAD_PREFIX
from vla_rl.policies.flow import chain
from vla_rl.policies.flow.exploration import ExplorationConfig, build_exploration, sde_std_profile
from vla_rl.policies.registry import load_chunk_policy

torch.set_num_threads(1)

MODES = [
    {"exploration": "euler_maruyama"},
    {"exploration": "flow_sde"},
    {"exploration": "flow_sde", "sde_one_step": True},
    {"exploration": "flow_noise"},
    {"exploration": "flow_sde", "noisy_chunk_steps": 1},
    {"exploration": "flow_noise", "noisy_chunk_steps": 1},
    {"exploration": "flow_noise", "noise_std_profile": "sde"},
    {"exploration": "flow_noise", "noise_mean": "sde", "noisy_chunk_steps": 1},
]
BUILDERS = {"flow_mlp": make_flow_mlp, "pi0": make_pi0}


@pytest.mark.parametrize("family", BUILDERS)
@pytest.mark.parametrize("mode", MODES, ids=lambda mode: "_".join(str(v) for v in mode.values()))
def test_evaluate_recomputes_the_sampled_log_prob(family, mode):
    policy = BUILDERS[family](num_denoising_steps=3, **mode)
    obs = make_obs(4)
    step = policy.sample(obs, temperature=0.9)
    evaluation = policy.evaluate(obs, step.sample_info, temperature=0.9)
    torch.testing.assert_close(evaluation.log_prob, step.log_prob, atol=1e-4, rtol=1e-5)
    stochastic_steps = step.sample_info["step_mask"].sum(dim=1)
    expected_steps = 1 if mode.get("sde_one_step") else 3
    assert (stochastic_steps == expected_steps).all()
    assert torch.isfinite(evaluation.entropy).all()


@pytest.mark.parametrize("family", BUILDERS)
@pytest.mark.parametrize("noisy_chunk_steps", [0, 1])
def test_only_the_noisy_chunk_steps_enter_the_log_prob(family, noisy_chunk_steps):
    # Euler-Maruyama: every sampled entry has std 0.5 * sqrt(1 / K), so the chain's entropy is
    # K x (sampled entries per step) x (0.5 + log sqrt(2 pi) + log std). pi0's fixture: chunk 3 x 4
    # action dims; flow_mlp's: chunk 2 x 3.
    policy = BUILDERS[family](num_denoising_steps=3, noise_level=0.5, noisy_chunk_steps=noisy_chunk_steps)
    chunk_len, action_dim = (3, 4) if family == "pi0" else (2, 3)
    sampled_entries = (noisy_chunk_steps or chunk_len) * action_dim
    per_entry = 0.5 + 0.5 * math.log(2 * math.pi) + math.log(0.5 * math.sqrt(1 / 3))
    obs = make_obs(2)
    step = policy.sample(obs)
    entropy = policy.evaluate(obs, step.sample_info).entropy
    torch.testing.assert_close(entropy, torch.full((2,), 3 * sampled_entries * per_entry))
    torch.testing.assert_close(policy.evaluate(obs, step.sample_info).log_prob, step.log_prob)


@pytest.mark.parametrize("family", BUILDERS)
def test_deterministic_flow_sde_chain_is_the_euler_ode(family):
    sde_policy = BUILDERS[family](num_denoising_steps=3, exploration="flow_sde")
    ode_policy = BUILDERS[family](num_denoising_steps=3, noise_level=0.0)
    obs = make_obs(2)
    torch.manual_seed(5)
    sde_step = sde_policy.sample(obs, deterministic=True)
    torch.manual_seed(5)
    ode_step = ode_policy.sample(obs)  # noise level 0: every step is the Euler mean
    torch.testing.assert_close(sde_step.actions, ode_step.actions)
    assert sde_step.log_prob.abs().max().item() == 0.0


def test_flow_noise_std_stays_in_bounds_and_learns():
    policy = make_flow_mlp(num_denoising_steps=3, exploration="flow_noise", noise_std_bounds=[0.05, 0.2])
    obs = make_obs(8)
    step = policy.sample(obs)
    chain_states = step.sample_info["chain"]
    times = chain.denoising_times(3)[:-1].repeat(8)
    features = policy.features(obs).repeat_interleave(3, dim=0)
    _, std = policy.velocity_and_std(features, chain_states[:, :-1].flatten(0, 1), times)
    assert ((std >= 0.05) & (std <= 0.2)).all()
    policy.evaluate(obs, step.sample_info).log_prob.sum().backward()
    assert policy.noise_head.net[-1].weight.grad.abs().sum() > 0


def test_sde_std_profile_hand_values():
    # K = 4: t = 1 (capped at 0.75), 0.75, 0.5, 0.25 -> sqrt(t / (1 - t)) = sqrt3, sqrt3, 1, 1/sqrt3;
    # their product is sqrt3, so the geometric mean is 3 ** (1 / 8).
    profile = sde_std_profile(chain.denoising_times(4))
    root3, mean = math.sqrt(3.0), 3.0**0.125
    assert profile == pytest.approx([root3 / mean, root3 / mean, 1 / mean, 1 / (root3 * mean)])
    assert math.prod(profile) == pytest.approx(1.0)


@pytest.mark.parametrize("profile", ["flat", "sde"])
def test_flow_noise_scales_the_learned_std_by_its_step_profile(profile):
    exploration = build_exploration(ExplorationConfig(exploration="flow_noise", noise_std_profile=profile), 4)
    factors = [1.0] * 4 if profile == "flat" else sde_std_profile(chain.denoising_times(4))
    x, velocity = torch.zeros(2, 3), torch.ones(2, 3)
    learned = torch.tensor([[0.1, 0.2, 0.3], [0.1, 0.1, 0.1]])
    for k in range(4):
        mean, std = exploration.step(x, velocity, k, torch.tensor([True, False]), 0.5, learned)
        torch.testing.assert_close(mean, torch.full((2, 3), -0.25))  # the Euler step, dt = -1/4
        torch.testing.assert_close(std[0], learned[0] * factors[k] * 0.5)
        assert std[1].abs().sum().item() == 0.0  # a deterministic sample stays on the ODE


def test_flow_noise_sde_mean_hand_values():
    # K = 4, step k = 1: t = 0.75, delta = 0.25; x = v = 1 -> action_hat = 0.25, noise_hat = 1.25.
    # Euler: 1 - 0.25 = 0.75. With std 0.2 (variance 0.04) the mean is pulled back by
    # 1.25 * 0.04 / 1.5 = 1 / 30: 0.125 + 1.25 * (0.5 - 0.04 / 1.5) = 0.71667.
    exploration = build_exploration(ExplorationConfig(exploration="flow_noise", noise_mean="sde"), 4)
    x, velocity = torch.ones(2, 3), torch.ones(2, 3)
    learned = torch.full((2, 3), 0.2)
    mean, std = exploration.step(x, velocity, 1, torch.tensor([True, False]), 1.0, learned)
    torch.testing.assert_close(mean[0], torch.full((3,), 0.75 - 1.0 / 30.0))
    torch.testing.assert_close(mean[1], torch.full((3,), 0.75))  # a deterministic sample: the ODE step
    torch.testing.assert_close(std[0], learned[0])


def test_flow_noise_sde_mean_and_profile_at_flow_sdes_scale_is_flow_sde():
    # Flow-SDE at a = 0.5, K = 4: transition stds 0.25 sigma_t (a = 1), whose geometric mean is
    # 0.25 * 3 ** (1 / 8) = 0.2868; the sde profile spreads one learned std of that size the same way.
    noise = build_exploration(
        ExplorationConfig(exploration="flow_noise", noise_mean="sde", noise_std_profile="sde"), 4
    )
    flow_sde = build_exploration(ExplorationConfig(exploration="flow_sde", noise_level=0.5), 4)
    torch.manual_seed(0)
    x, velocity, stochastic = torch.randn(3, 2), torch.randn(3, 2), torch.ones(3, dtype=torch.bool)
    learned = torch.full((3, 2), 0.25 * 3.0**0.125)
    for k in range(4):
        sde_mean, sde_std = flow_sde.step(x, velocity, k, stochastic, 1.0)
        noise_mean, noise_std = noise.step(x, velocity, k, stochastic, 1.0, learned)
        torch.testing.assert_close(noise_mean, sde_mean)
        torch.testing.assert_close(noise_std, sde_std.expand_as(x))


def test_flow_noise_sde_mean_keeps_the_odes_marginal_where_the_euler_mean_widens_it():
    # A 1-D Gaussian target a ~ N(1, 0.5^2) has the exact velocity E[noise - a | x_t], linear in x_t.
    # K = 100 steps; three columns with learned stds 0, 0.1 / sqrt(K) and 0.3 / sqrt(K) per step.
    # The noise-free chain ends with std 0.4945 here (discretisation); the marginal-preserving mean
    # keeps every column there, the Euler mean adds the injected noise (0.558 in the widest column).
    mu, s, num_steps, n = 1.0, 0.5, 100, 40_000

    def velocity(x, t):
        var_x = t**2 + (1 - t) ** 2 * s**2
        return -mu + (t - (1 - t) * s**2) / var_x * (x - (1 - t) * mu)

    final_stds = {}
    for mean_kind in ("sde", "euler"):
        exploration = build_exploration(
            ExplorationConfig(exploration="flow_noise", noise_mean=mean_kind), num_steps
        )
        generator = torch.Generator().manual_seed(0)
        x = torch.randn(n, 3, generator=generator)
        learned = (torch.tensor([0.0, 0.1, 0.3]) / math.sqrt(num_steps)).expand(n, 3)
        stochastic = torch.ones(n, dtype=torch.bool)
        for k in range(num_steps):
            v = velocity(x, float(exploration.times[k]))
            mean, std = exploration.step(x, v, k, stochastic, 1.0, learned)
            x = mean + std * torch.randn(mean.shape, generator=generator)
        final_stds[mean_kind] = x.std(0)
    ode_std = final_stds["sde"][0]  # column 0 has no noise: the ODE
    assert ode_std.item() == pytest.approx(0.4945, abs=0.005)
    assert (final_stds["sde"] - ode_std).abs().max().item() < 0.01
    assert final_stds["euler"][2].item() - ode_std.item() > 0.04


def test_flow_noise_head_survives_a_save_load_round_trip(tmp_path):
    policy = make_flow_mlp(num_denoising_steps=3, exploration="flow_noise")
    with torch.no_grad():
        policy.noise_head.net[-1].bias.fill_(0.7)
    policy.save_pretrained(tmp_path)
    loaded = load_chunk_policy("flow_mlp", tmp_path).eval()
    obs = make_obs(3)
    step = policy.sample(obs)
    torch.testing.assert_close(loaded.evaluate(obs, step.sample_info).log_prob, step.log_prob)


@pytest.mark.parametrize("family", BUILDERS)
def test_mean_chain_log_prob_is_the_sum_over_the_denoising_steps_divided_by_k(family, tmp_path):
    policy = BUILDERS[family](num_denoising_steps=3, exploration="flow_noise", noisy_chunk_steps=1)
    obs = make_obs(3)
    step = policy.sample(obs)
    summed = policy.evaluate(obs, step.sample_info)
    policy.set_exploration(chain_log_prob="mean")
    averaged = policy.evaluate(obs, step.sample_info)
    torch.testing.assert_close(averaged.log_prob, summed.log_prob / 3)
    torch.testing.assert_close(averaged.entropy, summed.entropy / 3)
    policy.save_pretrained(tmp_path)
    loaded = load_chunk_policy(family, tmp_path).eval()
    assert loaded.cfg.chain_log_prob == "mean"
    torch.testing.assert_close(
        loaded.evaluate(obs, step.sample_info).log_prob, averaged.log_prob, atol=1e-4, rtol=1e-5
    )


def test_bad_exploration_settings_fail_clearly():
    with pytest.raises(ValueError, match="unknown exploration mode"):
        ExplorationConfig(exploration="sde").validate_exploration()
    with pytest.raises(ValueError, match="one_step"):
        ExplorationConfig(exploration="flow_noise", sde_one_step=True).validate_exploration()
    with pytest.raises(ValueError, match="std_profile"):
        ExplorationConfig(exploration="flow_sde", noise_std_profile="sde").validate_exploration()
    with pytest.raises(ValueError, match="std_profile"):
        ExplorationConfig(exploration="flow_noise", noise_std_profile="cosine").validate_exploration()
    with pytest.raises(ValueError, match="mean"):
        ExplorationConfig(exploration="flow_sde", noise_mean="sde").validate_exploration()
    with pytest.raises(ValueError, match="mean must be one of"):
        make_pi0(exploration="flow_noise", noise_mean="heun")
    with pytest.raises(ValueError, match="noisy_chunk_steps"):
        make_flow_mlp(noisy_chunk_steps=-1)
    with pytest.raises(ValueError, match="0 < min < max"):
        make_pi0(exploration="flow_noise", noise_std_bounds=[0.2, 0.1])
    with pytest.raises(ValueError, match="chain_log_prob"):
        make_pi0(exploration="flow_noise", chain_log_prob="product")


@pytest.mark.parametrize("family", BUILDERS)
def test_set_exploration_switches_an_sft_policy_to_flow_noise_and_round_trips(family, tmp_path):
    policy = BUILDERS[family](num_denoising_steps=3)
    assert policy.noise_head is None
    policy.set_exploration(exploration="flow_noise", noise_std_bounds=[0.1, 0.3])
    with torch.no_grad():
        policy.noise_head.net[-1].bias.fill_(-0.4)
    obs = make_obs(2)
    step = policy.sample(obs)
    policy.save_pretrained(tmp_path)
    loaded = load_chunk_policy(family, tmp_path).eval()
    assert loaded.cfg.exploration == "flow_noise"
    torch.testing.assert_close(
        loaded.evaluate(obs, step.sample_info).log_prob, step.log_prob, atol=1e-4, rtol=1e-5
    )


def test_pi0_noise_head_is_the_group_noise_head_lr_trains():
    policy = make_pi0(exploration="flow_noise")
    algorithm = ChunkPPO(policy, ChunkRLConfig(log_prob_level="chunk", actor_lr=5e-6, noise_head_lr=1e-3))
    groups = {group["name"]: group for group in algorithm.optimizer.param_groups}
    head = {id(p) for name, p in policy.named_parameters() if name.startswith(NOISE_HEAD_PREFIX)}
    assert head and head == {id(p) for p in groups["noise_head"]["params"]}
    assert groups["noise_head"]["lr"] == 1e-3 and groups["actor"]["lr"] == 5e-6
