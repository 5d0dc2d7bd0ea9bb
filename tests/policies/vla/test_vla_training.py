import pytest
import torch
from vla_fixtures import make_obs, make_policy

from vla_rl.policies.vla.config import LoraSettings

torch.set_num_threads(1)


def fixed_batch(
    batch: int = 4, chunk_len: int = 2, action_dim: int = 3
) -> tuple[dict, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(11)
    actions = torch.rand(batch, chunk_len, action_dim, generator=generator) * 2 - 1
    return make_obs(batch, seed=3), actions, torch.ones(batch, chunk_len, dtype=torch.bool)


def train(policy, steps: int, lr: float) -> tuple[float, float, dict]:
    obs, actions, mask = fixed_batch()
    optimizer = torch.optim.Adam([p for p in policy.parameters() if p.requires_grad], lr=lr)
    first = policy.sft_loss(obs, actions, mask)
    for _ in range(steps):
        output = policy.sft_loss(obs, actions, mask)
        optimizer.zero_grad()
        output.loss.backward()
        optimizer.step()
    last = policy.sft_loss(obs, actions, mask)
    return float(first.loss.detach()), float(last.loss.detach()), last.metrics


@pytest.mark.parametrize("family", ["token_vla", "chunk_vla"])
def test_full_fine_tuning_reduces_sft_loss(family):
    policy = make_policy(family).train()
    initial, final, metrics = train(policy, steps=30, lr=3e-3)
    assert initial > 4.0  # about log(256) for an untrained model
    assert final < 0.5 * initial
    assert metrics["token_accuracy"] > 0.3


@pytest.mark.parametrize("family", ["token_vla", "chunk_vla"])
def test_lora_reduces_sft_loss_and_only_touches_adapters_and_heads(family):
    policy = make_policy(family, lora=LoraSettings(rank=8, alpha=16.0)).train()
    frozen = {
        name: tensor.detach().clone()
        for name, tensor in policy.named_parameters()
        if name.startswith("backbone.") and "lora_" not in name
    }
    assert not any(policy.get_parameter(name).requires_grad for name in frozen)
    adapters_before = {n: p.detach().clone() for n, p in policy.named_parameters() if "lora_" in n}
    initial, final, _ = train(policy, steps=30, lr=1e-2)
    assert final < 0.5 * initial
    for name, before in frozen.items():
        assert torch.equal(policy.get_parameter(name), before), name
    assert any(not torch.equal(policy.get_parameter(n), before) for n, before in adapters_before.items())


def test_sft_loss_is_the_mean_negative_log_prob_of_valid_tokens():
    policy = make_policy("token_vla")
    obs, actions, _ = fixed_batch()
    mask = torch.tensor([[True, True], [True, False], [False, False], [True, True]])
    tokens = policy.action_tokenizer.encode(actions)
    token_log_probs = policy.evaluate(obs, {"action_tokens": tokens}, log_prob_level="token").log_prob
    weight = mask[..., None].expand_as(token_log_probs).float()
    expected = -(token_log_probs * weight).sum() / weight.sum()
    output = policy.sft_loss(obs, actions, mask)
    assert torch.allclose(output.loss, expected, atol=1e-5)
    changed = actions.clone()
    changed[1, 1] = -changed[1, 1]  # a masked step: the loss must not move
    changed[2] = 0.3
    assert torch.allclose(policy.sft_loss(obs, changed, mask).loss, output.loss, atol=1e-6)


def test_freeze_vision_freezes_the_vision_tower_only():
    policy = make_policy("token_vla", freeze_vision=True)
    assert not any(p.requires_grad for p in policy.vlm.model.vision_tower.parameters())
    assert all(p.requires_grad for p in policy.vlm.model.language_model.parameters())
