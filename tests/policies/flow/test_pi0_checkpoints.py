import torch
from flow_fixtures import make_obs, make_pi0

from vla_rl.policies.flow.normalization import NormStats
from vla_rl.policies.flow.pi0 import Pi0Policy
from vla_rl.policies.flow.pi0_config import Pi0PolicyConfig
from vla_rl.policies.registry import build_chunk_policy, load_chunk_policy

torch.set_num_threads(1)


def sample_with_seed(policy: Pi0Policy, obs: dict, seed: int):
    torch.manual_seed(seed)
    return policy.sample(obs, with_value=True)


def test_transformers_pi0_checkpoint_loads_from_a_local_dir(tmp_path):
    policy = make_pi0()
    policy.model.save_pretrained(tmp_path)
    policy.tokenizer.save_pretrained(tmp_path)
    loaded = Pi0Policy.from_pretrained_pi0(str(tmp_path), Pi0PolicyConfig(action_dim=4)).eval()
    obs = make_obs(3)
    before, after = sample_with_seed(policy, obs, 7), sample_with_seed(loaded, obs, 7)
    assert torch.equal(before.actions, after.actions)
    assert torch.equal(before.log_prob, after.log_prob)
    assert loaded.chunk_len == policy.chunk_len


def test_build_with_pretrained_dir_goes_through_from_pretrained_pi0(tmp_path):
    policy = make_pi0()
    policy.model.save_pretrained(tmp_path)
    policy.tokenizer.save_pretrained(tmp_path / "tokenizer")
    loaded = build_chunk_policy("pi0", chunk_len=3, action_dim=4, pretrained_dir=str(tmp_path)).eval()
    obs = make_obs(2)
    assert torch.equal(sample_with_seed(policy, obs, 1).actions, sample_with_seed(loaded, obs, 1).actions)


def test_policy_save_load_round_trip_is_identical(tmp_path):
    stats = NormStats("quantile", q01=[-0.5] * 4, q99=[0.5, 0.5, 1.0, 1.0])
    policy = make_pi0(action_stats=stats, noise_level=0.3, num_denoising_steps=3)
    with torch.no_grad():
        policy.value_head[-1].bias.fill_(0.25)
    policy.save_pretrained(tmp_path)
    loaded = load_chunk_policy("pi0", tmp_path).eval()
    assert loaded.cfg == policy.cfg
    obs = make_obs(3)
    before, after = sample_with_seed(policy, obs, 11), sample_with_seed(loaded, obs, 11)
    assert torch.equal(before.actions, after.actions)
    assert torch.equal(before.log_prob, after.log_prob)
    assert torch.equal(before.value, after.value)
    assert torch.equal(before.sample_info["chain"], after.sample_info["chain"])


def repeat_obs(obs: dict, times: int) -> dict:
    return {
        key: value * times if key == "instruction" else value.repeat(times, *[1] * (value.dim() - 1))
        for key, value in obs.items()
    }


def test_full_fine_tuning_reduces_the_flow_matching_loss_on_a_fixed_batch():
    # 4 observations x 8 copies: each copy draws its own flow time and noise, which keeps the
    # seeded before/after comparison from hinging on a single draw of t.
    policy = make_pi0().train()
    obs = repeat_obs(make_obs(4), 8)
    actions = torch.rand(4, policy.chunk_len, 4, generator=torch.Generator().manual_seed(0)) * 2 - 1
    actions = actions.repeat(8, 1, 1)
    mask = torch.ones(32, policy.chunk_len, dtype=torch.bool)

    def seeded_loss() -> float:
        torch.manual_seed(123)
        with torch.no_grad():
            return policy.sft_loss(obs, actions, mask).loss.item()

    initial = seeded_loss()
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
    vision_before = policy.model.model.vlm.vision_tower.embeddings.patch_embedding.weight.clone()
    for step in range(60):
        torch.manual_seed(step)
        loss = policy.sft_loss(obs, actions, mask).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert seeded_loss() < 0.75 * initial
    assert not torch.equal(
        vision_before, policy.model.model.vlm.vision_tower.embeddings.patch_embedding.weight
    )


def test_frozen_vision_tower_gets_no_gradient():
    policy = make_pi0(freeze_vision=True)
    loss = policy.sft_loss(make_obs(2), torch.zeros(2, 3, 4), torch.ones(2, 3, dtype=torch.bool)).loss
    loss.backward()
    assert policy.model.model.vlm.vision_tower.embeddings.patch_embedding.weight.grad is None
    assert policy.model.action_out_proj.weight.grad is not None
