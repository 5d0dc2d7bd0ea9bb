import pytest
import torch
from vla_fixtures import make_obs, make_policy

from vla_rl.policies.registry import load_chunk_policy
from vla_rl.policies.vla.auxiliary import AuxiliaryStateHead

torch.set_num_threads(1)


def test_auxiliary_loss_is_the_squared_error_to_the_standardised_target():
    head = AuxiliaryStateHead(hidden_size=4, target_dim=2, mlp_dim=8)
    head.update(torch.tensor([[1.0, 2.0], [3.0, 6.0]]))  # mean (2, 4), population std (1, 2)
    with torch.no_grad():
        head.mlp[-1].weight.zero_()
        head.mlp[-1].bias.copy_(torch.tensor([0.5, 0.0]))  # the head predicts (0.5, 0) everywhere
    target = torch.tensor([[3.0, 4.0]])  # standardised: (1, 0)
    # ((0.5 - 1)^2 + (0 - 0)^2) / 2 = 0.125
    assert float(head.loss(torch.randn(1, 4), target).detach()) == pytest.approx(0.125)


def obs_with_target(batch: int) -> dict:
    obs = make_obs(batch, seed=5)
    obs["privileged"] = torch.randn(batch, 6, generator=torch.Generator().manual_seed(2))
    return obs


def test_sft_loss_adds_the_weighted_auxiliary_error():
    obs = obs_with_target(4)
    actions = torch.rand(4, 2, 3, generator=torch.Generator().manual_seed(1)) * 2 - 1
    mask = torch.ones(4, 2, dtype=torch.bool)
    plain = make_policy("token_vla")
    weighted = make_policy("token_vla", aux_target_key="privileged", aux_target_dim=6, aux_coef=0.5)
    for policy in (plain, weighted):
        policy.update_normalizer(obs)  # the same state statistics in both
    output = weighted.sft_loss(obs, actions, mask)
    assert output.metrics["aux_mse"] > 0.0
    # Same seed, same backbone: the cross-entropy is the plain policy's.
    cross_entropy = plain.sft_loss(obs, actions, mask).loss.item()
    assert output.metrics["cross_entropy"] == pytest.approx(cross_entropy, rel=1e-5)
    assert output.loss.item() == pytest.approx(cross_entropy + 0.5 * output.metrics["aux_mse"], rel=1e-5)
    with pytest.raises(KeyError, match="aux_target_key 'privileged'"):
        weighted.sft_loss(make_obs(4), actions, mask)
    with pytest.raises(ValueError, match="aux_target_dim"):
        make_policy("token_vla", aux_target_key="privileged")


@pytest.mark.parametrize("family", ["token_vla", "chunk_vla"])
def test_auxiliary_head_trains_and_round_trips(tmp_path, family):
    obs = obs_with_target(8)
    actions = torch.zeros(8, 2, 3)
    mask = torch.ones(8, 2, dtype=torch.bool)
    policy = make_policy(family, aux_target_key="privileged", aux_target_dim=6).train()
    policy.update_normalizer(obs)
    optimizer = torch.optim.Adam(policy.parameters(), lr=3e-3)
    first = policy.sft_loss(obs, actions, mask).metrics["aux_mse"]
    for _ in range(40):
        loss = policy.sft_loss(obs, actions, mask).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    policy.eval()
    last = policy.sft_loss(obs, actions, mask).metrics["aux_mse"]
    assert last < 0.5 * first
    policy.save_pretrained(tmp_path)
    loaded = load_chunk_policy(family, tmp_path).eval()
    assert loaded.sft_loss(obs, actions, mask).metrics["aux_mse"] == pytest.approx(last, rel=1e-5)


def test_aux_layer_reads_that_decoder_layer_at_the_last_prompt_position():
    obs = obs_with_target(3)
    policy = make_policy("token_vla", aux_target_key="privileged", aux_target_dim=6, aux_layer=1)
    policy.update_normalizer(obs)
    prompt = policy.encode_prompt(obs)
    with torch.no_grad():
        hidden_states = policy.vlm.model(
            inputs_embeds=prompt.embeds,
            attention_mask=prompt.attention_mask,
            position_ids=prompt.position_ids,
            token_type_ids=torch.zeros_like(prompt.attention_mask),
            output_hidden_states=True,
        ).hidden_states  # (embeddings, layer 1, layer 2 + final norm)
        # The action tokens are causal and come after the prompt: the prompt's states do not see them.
        expected = policy.aux_head.loss(hidden_states[1][:, prompt.length - 1], obs["privileged"])
        layers = policy.vlm.model.language_model.layers
        hooks_before = [len(layer._forward_hooks) for layer in layers]  # transformers adds its own
        output = policy.sft_loss(obs, torch.zeros(3, 2, 3), torch.ones(3, 2, dtype=torch.bool))
    assert output.metrics["aux_mse"] == pytest.approx(float(expected), rel=1e-5)
    assert [len(layer._forward_hooks) for layer in layers] == hooks_before, "the capture hook is removed"
    with pytest.raises(ValueError, match="aux_layer 3 is outside"):
        make_policy("token_vla", aux_target_key="privileged", aux_target_dim=6, aux_layer=3).sft_loss(
            obs, torch.zeros(3, 2, 3), torch.ones(3, 2, dtype=torch.bool)
        )
