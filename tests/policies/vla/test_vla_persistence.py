import pytest
import torch
from transformers import PaliGemmaForConditionalGeneration
from vla_fixtures import make_obs, make_policy

from vla_rl.policies.registry import build_chunk_policy, load_chunk_policy
from vla_rl.policies.vla.backbone import build_tiny_backbone
from vla_rl.policies.vla.config import LoraSettings, TokenVLAConfig
from vla_rl.policies.vla.token_vla import TokenVLA

torch.set_num_threads(1)


def perturb_adapters(policy) -> None:
    """LoRA B starts at zero; give the adapters an effect so that losing them would show."""
    with torch.no_grad():
        for name, parameter in policy.named_parameters():
            if "lora_B" in name or "lora_embedding_B" in name:
                parameter.normal_(std=0.1)


@pytest.mark.parametrize(
    ("family", "lora"), [("token_vla", None), ("chunk_vla", None), ("token_vla", LoraSettings(rank=4))]
)
def test_save_load_round_trip_gives_identical_actions(tmp_path, family, lora):
    policy = make_policy(family, lora=lora)
    perturb_adapters(policy)
    policy.set_action_statistics(torch.tensor([-0.5, -1.0, 0.0]), torch.tensor([0.5, 0.2, 1.0]))
    obs = make_obs(4)
    policy.update_normalizer(make_obs(16, seed=1))
    torch.manual_seed(123)
    before = policy.sample(obs, temperature=0.9, with_value=True)
    policy.save_pretrained(tmp_path)
    loaded = load_chunk_policy(family, tmp_path).eval()
    assert type(loaded) is type(policy)
    assert (loaded.config.lora is None) == (lora is None)
    torch.manual_seed(123)
    after = loaded.sample(obs, temperature=0.9, with_value=True)
    assert torch.equal(after.actions, before.actions)
    assert torch.equal(after.log_prob, before.log_prob)
    assert torch.equal(after.value, before.value)
    assert torch.allclose(loaded.action_tokenizer.high, torch.tensor([0.5, 0.2, 1.0]))
    assert loaded.state_normalizer.count == 16
    assert torch.equal(loaded.state_normalizer.mean, policy.state_normalizer.mean)
    if lora is not None:
        trainable = [
            name for name, p in loaded.named_parameters() if p.requires_grad and name.startswith("backbone.")
        ]
        assert trainable and all("lora_" in name for name in trainable)


def test_loading_the_wrong_family_is_an_error(tmp_path):
    make_policy("chunk_vla").save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="chunk_vla"):
        TokenVLA.from_pretrained(tmp_path)


def test_local_pretrained_backbone_loads_with_identical_logits(tmp_path):
    torch.manual_seed(0)
    model, tokenizer = build_tiny_backbone()
    model.eval()
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    config = TokenVLAConfig(chunk_len=2, action_dim=3)
    loaded = TokenVLA.from_pretrained_vlm(tmp_path, config).eval()
    original = TokenVLA.from_backbone(model, tokenizer, config).eval()
    assert loaded.tokenizer("pick up the cube")["input_ids"] == tokenizer("pick up the cube")["input_ids"]
    # PaliGemma's own forward on image tokens + text
    image_token = tokenizer.convert_tokens_to_ids("<image>")
    text = tokenizer("pick up the cube\n", add_special_tokens=False)["input_ids"]
    input_ids = torch.tensor([[image_token] * 16 + [tokenizer.bos_token_id, *text]])
    pixels = torch.randn(1, 3, 32, 32)
    token_types = torch.zeros_like(input_ids)
    with torch.no_grad():
        expected = model(input_ids=input_ids, pixel_values=pixels, token_type_ids=token_types).logits
        actual = loaded.vlm(input_ids=input_ids, pixel_values=pixels, token_type_ids=token_types).logits
    assert torch.equal(actual, expected)
    # and the policy's action-bin logits
    obs = make_obs(3)
    bins = torch.randint(0, 256, (3, 6))
    with torch.no_grad():
        expected_bins = original._teacher_forced(original.encode_prompt(obs), bins)[0]
        actual_bins = loaded._teacher_forced(loaded.encode_prompt(obs), bins)[0]
    assert torch.equal(actual_bins, expected_bins)


def test_registry_builds_from_a_local_vlm_dir(tmp_path):
    model, tokenizer = build_tiny_backbone()
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    policy = build_chunk_policy("chunk_vla", pretrained_vlm_dir=str(tmp_path), chunk_len=1, action_dim=4)
    assert torch.equal(policy.vlm.lm_head.weight, model.lm_head.weight)
    assert isinstance(policy.vlm, PaliGemmaForConditionalGeneration)
    with pytest.raises(FileNotFoundError):
        build_chunk_policy(
            "token_vla", pretrained_vlm_dir=str(tmp_path / "absent"), chunk_len=1, action_dim=4
        )


def test_state_normalizer_standardises_the_state_fed_to_the_projector():
    policy = make_policy("token_vla")
    states = torch.tensor([[1.0, 2.0, 3.0, 4.0, 5.0], [3.0, 2.0, 1.0, 0.0, -1.0]])
    policy.update_normalizer({"proprio": states})
    # Per dimension the mean is 2; population variances 1, 0, 1, 4, 9. The first row becomes
    # (1-2)/1, 0 (no spread), (3-2)/1, (4-2)/2, (5-2)/3.
    expected = torch.tensor([-1.0, 0.0, 1.0, 1.0, 1.0])
    torch.testing.assert_close(policy.state_normalizer(states[:1])[0], expected, atol=1e-6, rtol=0)


def test_a_lora_target_the_backbone_lacks_is_a_config_error():
    from vla_rl.config import ConfigError

    with pytest.raises(ConfigError, match=r"policy.lora.target_modules: \['qkv'\] match no module"):
        make_policy("token_vla", lora=LoraSettings(rank=4, target_modules=["q_proj", "qkv"]))
