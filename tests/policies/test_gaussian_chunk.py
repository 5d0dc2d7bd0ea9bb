import math

import pytest
import torch
from safetensors.torch import load_file, save_file

from vla_rl.policies.base import ActorCriticPolicy
from vla_rl.policies.pretrained_io import WEIGHTS_FILE
from vla_rl.policies.registry import build_chunk_policy, load_chunk_policy

torch.set_num_threads(1)

PROPRIO_DIM = 5


def make_obs(batch: int, seed: int = 0) -> dict:
    generator = torch.Generator().manual_seed(seed)
    return {
        "proprio": torch.randn(batch, PROPRIO_DIM, generator=generator),
        "rgb_front": torch.randint(0, 256, (batch, 32, 32, 3), dtype=torch.uint8, generator=generator),
        "instruction": ["pick up the cube"] * batch,
    }


def make_policy(seed: int = 0, **overrides: object) -> ActorCriticPolicy:
    torch.manual_seed(seed)
    values: dict[str, object] = {
        "chunk_len": 1,
        "action_dim": 2,
        "proprio_dim": PROPRIO_DIM,
        "policy": {"hidden_sizes": [16], "normalize_obs": False},
    }
    values.update(overrides)
    return build_chunk_policy("gaussian", **values)


def zero_mean(policy: ActorCriticPolicy, log_std: float) -> None:
    with torch.no_grad():
        last = policy.actor[-1]
        last.weight.zero_()
        last.bias.zero_()
        policy.log_std.fill_(log_std)


def test_log_prob_by_hand_at_both_levels():
    policy = make_policy(chunk_len=2)
    zero_mean(policy, math.log(0.5))
    actions = torch.tensor([[[0.2, -0.2], [0.0, 0.4]]])
    # log N(x; 0, 0.5^2) = -0.5 (x / 0.5)^2 - log 0.5 - 0.5 log(2 pi):
    # x = +-0.2 -> -0.305792; x = 0 -> -0.225791; x = 0.4 -> -0.545792
    evaluation = policy.evaluate(make_obs(1), {"actions": actions}, log_prob_level="action")
    expected = torch.tensor([[2 * -0.305792, -0.225791 - 0.545792]])
    torch.testing.assert_close(evaluation.log_prob, expected, atol=1e-5, rtol=0)
    chunk = policy.evaluate(make_obs(1), {"actions": actions}, log_prob_level="chunk")
    torch.testing.assert_close(chunk.log_prob, expected.sum(dim=1), atol=1e-5, rtol=0)
    # entropy per entry: 0.5 + 0.5 log(2 pi) + log 0.5 = 0.725791
    torch.testing.assert_close(chunk.entropy, torch.tensor([4 * 0.725791]), atol=1e-5, rtol=0)


def test_chunk_len_one_matches_the_ppo_state_path():
    policy = make_policy()
    obs = make_obs(4)
    step = policy.sample(obs, log_prob_level="chunk", with_value=True)
    assert step.actions.shape == (4, 1, 2)
    log_prob, _, value, _, _ = policy.evaluate_actions(obs, step.actions[:, 0])
    torch.testing.assert_close(step.log_prob, log_prob)
    torch.testing.assert_close(step.value, value)


def test_evaluate_matches_sample_and_temperature_scales_the_std():
    policy = make_policy(chunk_len=3)
    zero_mean(policy, math.log(0.3))
    obs = {
        key: value[:1].expand(20000, *value.shape[1:])
        for key, value in make_obs(1).items()
        if key != "instruction"
    }
    torch.manual_seed(0)
    step = policy.sample(obs, temperature=2.0, log_prob_level="action")
    assert step.log_prob.shape == (20000, 3)
    assert step.actions.std().item() == pytest.approx(0.6, rel=0.02)
    evaluation = policy.evaluate(obs, step.sample_info, temperature=2.0, log_prob_level="action")
    torch.testing.assert_close(evaluation.log_prob, step.log_prob)
    deterministic = policy.sample(obs, deterministic=True)
    assert (deterministic.actions == 0).all()


@pytest.mark.parametrize("loss_type", ["nll", "mse"])
def test_sft_fits_demonstrations_and_ignores_padding(loss_type):
    policy = make_policy(chunk_len=2, sft_loss_type=loss_type)
    obs = make_obs(8)
    targets = torch.rand(8, 2, 2) * 2 - 1
    mask = torch.ones(8, 2, dtype=torch.bool)
    mask[:, 1] = False
    garbage = targets.clone()
    garbage[:, 1] = 30.0
    assert policy.sft_loss(obs, garbage, mask).loss.item() == policy.sft_loss(obs, targets, mask).loss.item()
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
    initial_mse = policy.sft_loss(obs, targets, mask).metrics["mse"]
    for _ in range(150):
        loss = policy.sft_loss(obs, targets, mask).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert policy.sft_loss(obs, targets, mask).metrics["mse"] < 0.2 * initial_mse


def test_save_load_round_trip_with_a_cnn(tmp_path):
    policy = make_policy(
        chunk_len=2,
        obs_shapes={"proprio": [PROPRIO_DIM], "rgb_front": [32, 32, 3]},
        policy={
            "name": "cnn",
            "actor_obs_keys": ["rgb_front", "proprio"],
            "hidden_sizes": [16],
            "cnn_channels": [8, 8],
            "cnn_feature_dim": 16,
        },
    )
    obs = make_obs(3)
    policy.update_normalizer(obs)
    policy.save_pretrained(tmp_path)
    loaded = load_chunk_policy("gaussian", tmp_path)
    torch.manual_seed(5)
    before = policy.sample(obs, with_value=True)
    torch.manual_seed(5)
    after = loaded.sample(obs, with_value=True)
    assert torch.equal(before.actions, after.actions)
    assert torch.equal(before.log_prob, after.log_prob)
    assert torch.equal(before.value, after.value)


def test_folders_of_the_former_wrapper_load(tmp_path):
    """``gaussian`` folders written when a chunk policy wrapped the state policy hold its weights
    under ``policy.``; they load into the policy itself."""
    policy = make_policy(chunk_len=2)
    policy.save_pretrained(tmp_path)
    weights = tmp_path / WEIGHTS_FILE
    save_file({f"policy.{name}": value for name, value in load_file(str(weights)).items()}, str(weights))
    loaded = load_chunk_policy("gaussian", tmp_path)
    assert type(loaded) is type(policy)
    for name, value in policy.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], value), name


def test_token_level_is_refused():
    with pytest.raises(ValueError, match="token"):
        make_policy().sample(make_obs(1), log_prob_level="token")
