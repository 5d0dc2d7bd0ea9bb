"""Mixed precision of chunk policies (``policy.autocast=bfloat16``): the matrix products run in bf16
under ``torch.autocast`` (CPU autocast here, the same switch as on a GPU), the weights, gradients and
what the policy returns stay float32, and a small optimizer step is not rounded away as it is in a
model held in bf16 (``policy.dtype=bfloat16``)."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest
import torch

sys.path[:0] = [str(Path(__file__).parent / "vla"), str(Path(__file__).parent / "flow")]
from flow_fixtures import make_flow_mlp, make_obs, make_pi0  # noqa: E402
from vla_fixtures import make_obs as make_vla_obs  # noqa: E402
from vla_fixtures import make_policy  # noqa: E402

from vla_rl.config.load import ConfigError  # noqa: E402
from vla_rl.policies.flow.pi0_prefix import PREFIX_KEYS  # noqa: E402

torch.set_num_threads(1)

FAMILIES = {
    "token_vla": (lambda: make_policy("token_vla", seed=0), lambda: make_vla_obs(4, seed=2)),
    "chunk_vla": (lambda: make_policy("chunk_vla", seed=0), lambda: make_vla_obs(4, seed=2)),
    "pi0": (lambda: make_pi0(noise_level=0.5), lambda: make_obs(4)),
    "flow_mlp": (lambda: make_flow_mlp(noise_level=0.5), lambda: make_obs(4)),
}


def linear_output_dtypes(policy: torch.nn.Module) -> tuple[set[torch.dtype], list]:
    """The dtypes of every ``nn.Linear`` output while the hooks are in place."""
    seen: set[torch.dtype] = set()
    hooks = [
        module.register_forward_hook(lambda _m, _i, out: seen.add(out.dtype))
        for module in policy.modules()
        if isinstance(module, torch.nn.Linear)
    ]
    return seen, hooks


@pytest.mark.parametrize("family", list(FAMILIES))
def test_autocast_computes_in_bf16_and_returns_float32(family):
    make, make_observations = FAMILIES[family]
    plain = make()
    mixed = copy.deepcopy(plain)
    mixed.autocast_dtype = torch.bfloat16
    obs = make_observations()
    torch.manual_seed(0)
    sampled = plain.sample(obs, with_value=True)

    seen, hooks = linear_output_dtypes(mixed)
    torch.manual_seed(0)
    mixed_sample = mixed.sample(obs, with_value=True)
    evaluation = mixed.evaluate(obs, sampled.sample_info, with_value=True)
    for hook in hooks:
        hook.remove()
    assert seen == {torch.bfloat16}  # every matrix product of the policy ran in bf16

    for tensor in (mixed_sample.actions, mixed_sample.log_prob, mixed_sample.value, evaluation.log_prob):
        assert tensor.dtype == torch.float32
    reference = plain.evaluate(obs, sampled.sample_info, with_value=True)
    # A few bf16 roundings (2^-8 relative each) on the way to each log-probability: measured here
    # 1e-3 to 1.2e-2 on log-probabilities of magnitude 11 to 34 (relative <= 1e-3); float32 would
    # give 0 difference, a product left in float32 would not reach the hook set above.
    relative = (evaluation.log_prob - reference.log_prob).abs().max() / reference.log_prob.abs().max()
    assert 0 < relative < 2**-6, relative
    torch.testing.assert_close(evaluation.value, reference.value, atol=2e-2, rtol=2**-6)

    (evaluation.log_prob.sum() + evaluation.value.sum()).backward()
    trained = [p for p in mixed.parameters() if p.requires_grad]
    assert all(p.dtype == torch.float32 for p in mixed.parameters())
    assert all(p.grad is None or p.grad.dtype == torch.float32 for p in trained)
    assert sum(int(p.grad is not None and p.grad.abs().sum() > 0) for p in trained) > 0


def changed_fraction(policy: torch.nn.Module, obs: dict, lr: float) -> float:
    """One Adam step of ``lr`` on a log-likelihood: the fraction of the pretrained model's weight
    entries (with a non-zero gradient) that changed."""
    model = policy.model
    torch.manual_seed(0)
    step = policy.sample(obs)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    optimizer = torch.optim.Adam(policy.parameters(), lr=lr)
    policy.evaluate(obs, step.sample_info).log_prob.sum().backward()
    moving = {name: p.grad != 0 for name, p in model.named_parameters() if p.grad is not None}
    optimizer.step()
    changed = sum(
        int((p.detach() != before[name])[moving[name]].sum())
        for name, p in model.named_parameters()
        if name in moving
    )
    return changed / sum(int(mask.sum()) for mask in moving.values())


def test_a_small_step_moves_float32_masters_but_is_rounded_away_in_bf16_weights():
    """Why autocast rather than bf16 weights for RL: Adam's first step moves each weight by about
    the learning rate; bf16 keeps 8 mantissa bits, so a weight of magnitude w only moves when
    lr > w * 2^-9, and pi0's initial weights are mostly larger than 1e-5 * 2^9 = 5e-3."""
    obs = make_obs(4)
    mixed = make_pi0(noise_level=0.5)
    mixed.autocast_dtype = torch.bfloat16
    bf16_weights = make_pi0(noise_level=0.5)
    bf16_weights.cast_model(torch.bfloat16)
    masters = changed_fraction(mixed, obs, lr=1e-5)
    rounded = changed_fraction(bf16_weights, obs, lr=1e-5)
    assert masters == 1.0
    assert rounded < 0.5, rounded  # measured 0.13 with this tiny pi0's initialisation


def test_a_frozen_prefix_stored_under_autocast_evaluates_as_a_fresh_one():
    """pi0's prefix stored under autocast (``observation_cache``) reads back as the prefix encoded
    afresh under autocast gives."""
    policy = make_pi0(seed=1, exploration="flow_noise")
    policy.model.model.vlm.requires_grad_(False)
    policy.autocast_dtype = torch.bfloat16
    obs = make_obs(3, seed=5)
    step = policy.sample(obs, with_value=True)
    cache = policy.observation_cache(obs)
    assert cache[PREFIX_KEYS].shape[0] == 3
    fresh = policy.evaluate(obs, step.sample_info, with_value=True)
    stored = policy.evaluate(obs, {**step.sample_info, **cache}, with_value=True)
    torch.testing.assert_close(stored.log_prob, fresh.log_prob, atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(stored.value, fresh.value, atol=1e-5, rtol=1e-5)


def test_the_rl_config_switches_it_on_and_refuses_it_with_bf16_weights(tmp_path):
    from vla_rl.training.chunk_rl.config_load import compose_rl_config
    from vla_rl.training.chunk_rl.learner import load_rl_policy

    make_policy("token_vla", seed=0).save_pretrained(tmp_path / "policy")
    base = ["recipe=token_vla_ppo", f"policy.init_from={tmp_path / 'policy'}"]
    cfg = compose_rl_config([*base, "policy.autocast=bfloat16"])
    assert load_rl_policy(cfg, tmp_path / "policy").autocast_dtype == torch.bfloat16
    assert load_rl_policy(compose_rl_config(base), tmp_path / "policy").autocast_dtype is None
    with pytest.raises(ConfigError, match="'policy.autocast'.*float32"):
        compose_rl_config([*base, "policy.autocast=bfloat16", "policy.dtype=bfloat16"])
    with pytest.raises(ConfigError, match="'policy.autocast'"):
        compose_rl_config([*base, "policy.autocast=float16"])
