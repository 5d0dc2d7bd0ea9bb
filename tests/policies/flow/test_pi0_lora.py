"""pi0 with LoRA: adapters on the VLM and the action expert, the action/state/time projections and
the heads training in full, everything else frozen; saved and loaded back to the same actions."""

import pytest
import torch
from flow_fixtures import make_obs, make_pi0

from vla_rl.config import ConfigError
from vla_rl.policies.registry import load_chunk_policy

torch.set_num_threads(1)
LORA = {"rank": 4, "alpha": 8.0}
UNUSED_IN_LAST_VLM_LAYER = (
    "self_attn.q_proj",
    "self_attn.o_proj",
    "mlp.gate_proj",
    "mlp.up_proj",
    "mlp.down_proj",
)


def test_only_adapters_projections_and_heads_train():
    policy = make_pi0(lora=LORA)
    trainable = {name for name, p in policy.named_parameters() if p.requires_grad}
    assert any(".dit." in name and "lora_A" in name for name in trainable)  # action expert
    assert any(".vlm." in name and "lora_B" in name for name in trainable)  # VLM
    assert "model.action_out_proj.weight" in trainable
    assert "model.embed_action_time.state_proj.weight" in trainable
    assert any(name.startswith("value_head.") for name in trainable)
    frozen_model = [
        name
        for name in trainable
        if name.startswith("model.")
        and "lora_" not in name
        and not name.startswith(("model.action_out_proj.", "model.embed_action_time."))
    ]
    assert frozen_model == []
    loss = policy.sft_loss(make_obs(2), torch.zeros(2, 3, 4), torch.ones(2, 3, dtype=torch.bool)).loss
    loss.backward()
    # The VLM's last layer reaches the action expert through its keys and values only: its query,
    # output and MLP projections get no gradient, every other adapter does.
    last = f"model.model.vlm.language_model.layers.{len(policy.model.model.vlm.language_model.layers) - 1}."
    unused = {f"{last}{part}.lora_B.default.weight" for part in UNUSED_IN_LAST_VLM_LAYER}
    no_grad = {name for name, p in policy.named_parameters() if "lora_B" in name and p.grad is None}
    assert no_grad == unused
    assert all(p.grad is None for name, p in policy.named_parameters() if name not in trainable)


def test_lora_round_trip_gives_identical_actions(tmp_path):
    policy = make_pi0(lora=LORA)
    with torch.no_grad():
        for name, parameter in policy.named_parameters():
            if "lora_B" in name:  # B starts at zero: give the adapters an effect that a loss would show
                parameter.normal_(std=0.1)
    policy.save_pretrained(tmp_path)
    assert (tmp_path / "lora_adapter.safetensors").is_file()
    loaded = load_chunk_policy("pi0", tmp_path).eval()
    obs = make_obs(3)
    torch.manual_seed(5)
    before = policy.sample(obs)
    torch.manual_seed(5)
    after = loaded.sample(obs)
    assert torch.equal(before.actions, after.actions)
    assert torch.equal(before.log_prob, after.log_prob)
    torch.manual_seed(5)
    without = make_pi0().sample(obs)  # same seed and base weights, no adapters
    assert not torch.equal(before.actions, without.actions)


def test_the_paligemma_head_target_is_a_config_error_on_pi0():
    with pytest.raises(ConfigError, match=r"\['lm_head'\] match no module"):
        make_pi0(lora={**LORA, "target_modules": ["q_proj", "lm_head"]})
