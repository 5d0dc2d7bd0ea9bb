import pytest
import torch
from flow_fixtures import make_obs, make_pi0

from vla_rl.policies.registry import load_chunk_policy
from vla_rl.policies.vla.auxiliary import capture_layer_output

torch.set_num_threads(1)


def obs_with_target(batch: int) -> dict:
    obs = make_obs(batch, seed=3)
    obs["privileged"] = torch.randn(batch, 6, generator=torch.Generator().manual_seed(4))
    return obs


def policy_and_batch(batch: int, **aux_settings) -> tuple:
    """A pi0 with an auxiliary head, its normaliser fitted on ``batch`` observations, and a zero
    action chunk with a full mask for them."""
    obs = obs_with_target(batch)
    policy = make_pi0(aux_target_key="privileged", aux_target_dim=6, **aux_settings)
    policy.update_normalizer(obs)
    chunk = torch.zeros(batch, policy.chunk_len, 4)
    mask = torch.ones(batch, policy.chunk_len, dtype=torch.bool)
    return policy, obs, chunk, mask


def test_auxiliary_error_is_read_from_the_expert_state_token():
    policy, obs, chunk, mask = policy_and_batch(3, aux_coef=0.5)
    with torch.no_grad():
        output = policy.sft_loss(obs, chunk, mask)
        # The state token attends to the prefix and itself only, so its feature is the same for any
        # noisy chunk and time: the value head's feature of a cached-prefix velocity call.
        x_t = torch.randn(3, policy.chunk_len, policy.max_action_dim)
        _, hidden = policy.velocity(policy.encode_prefix(obs), x_t, 0.3)
        expected = policy.aux_head.loss(hidden[:, 0], obs["privileged"])
    assert output.metrics["aux_mse"] == pytest.approx(float(expected), rel=1e-5)
    assert float(output.loss) == pytest.approx(
        output.metrics["flow_mse"] + 0.5 * output.metrics["aux_mse"], rel=1e-5
    )
    with pytest.raises(KeyError, match="aux_target_key 'privileged'"):
        policy.sft_loss(make_obs(3), chunk, mask)
    with pytest.raises(ValueError, match="aux_target_dim"):
        make_pi0(aux_target_key="privileged")


def test_auxiliary_head_trains_and_round_trips(tmp_path):
    obs = obs_with_target(8)
    chunk = torch.zeros(8, 3, 4)
    mask = torch.ones(8, 3, dtype=torch.bool)
    policy = make_pi0(aux_target_key="privileged", aux_target_dim=6).train()
    policy.update_normalizer(obs)
    optimizer = torch.optim.Adam(policy.parameters(), lr=3e-3)
    first = policy.sft_loss(obs, chunk, mask).metrics["aux_mse"]
    for _ in range(40):
        loss = policy.sft_loss(obs, chunk, mask).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    policy.eval()
    torch.manual_seed(0)
    last = policy.sft_loss(obs, chunk, mask).metrics["aux_mse"]
    assert last < 0.5 * first
    policy.save_pretrained(tmp_path)
    assert (tmp_path / "aux_head.safetensors").is_file()
    loaded = load_chunk_policy("pi0", tmp_path).eval()
    torch.manual_seed(0)
    assert loaded.sft_loss(obs, chunk, mask).metrics["aux_mse"] == pytest.approx(last, rel=1e-5)


def test_bad_auxiliary_and_state_settings_fail_when_the_policy_is_configured():
    with pytest.raises(ValueError, match="aux_coef"):
        make_pi0(aux_target_key="privileged", aux_target_dim=6, aux_coef=-1.0)
    with pytest.raises(ValueError, match="unknown proprio fields \\['arm_qacc'\\]"):
        make_pi0(proprio_fields=["arm_qpos", "arm_qacc"])


def test_aux_layer_reads_that_expert_layer_at_the_state_token():
    policy, obs, chunk, mask = policy_and_batch(3, aux_layer=1)
    layers = policy.model.model.dit.layers
    with torch.no_grad():
        output = policy.sft_loss(obs, chunk, mask)
        with capture_layer_output(layers, 1) as first_layer:
            _, final = policy.velocity(policy.encode_prefix(obs), torch.randn(3, 3, 8), 0.6)
        expected = policy.aux_head.loss(first_layer["hidden"][:, 0], obs["privileged"])
        final_layer = policy.aux_head.loss(final[:, 0], obs["privileged"])
    assert output.metrics["aux_mse"] == pytest.approx(float(expected), rel=1e-5)
    assert float(final_layer) != pytest.approx(float(expected), rel=1e-3), "layer 1 is not the final feature"
    assert all(len(layer._forward_hooks) == 0 for layer in layers), "the capture hooks are removed"
    with pytest.raises(ValueError, match="aux_layer 3 is outside"):
        make_pi0(aux_target_key="privileged", aux_target_dim=6, aux_layer=3).sft_loss(obs, chunk, mask)
