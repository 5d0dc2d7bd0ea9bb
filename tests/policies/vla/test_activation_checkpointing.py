"""Activation checkpointing of the token VLAs' backbone layers (``policy.activation_checkpointing``):
in eval mode, as RL runs the policy, the update's log-probabilities, entropies and values and their
gradients are the same, and the tensors kept for the backward pass shrink."""

from __future__ import annotations

import copy

import pytest
import torch
from vla_fixtures import make_obs, make_policy

from vla_rl.config.load import ConfigError
from vla_rl.policies.activation_checkpointing import checkpoint_transformer_layers


def _update_pass(policy, obs, sample_info) -> tuple[torch.Tensor, list[torch.Tensor], int]:
    """A PPO-like loss over the evaluated chunks, its gradients, and the bytes of the non-parameter
    tensors autograd kept for the backward pass (counted by a saved-tensors hook)."""
    parameter_ptrs = {p.data_ptr() for p in policy.parameters()}
    kept_bytes = 0

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        nonlocal kept_bytes
        if tensor.data_ptr() not in parameter_ptrs:
            kept_bytes += tensor.numel() * tensor.element_size()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        evaluation = policy.evaluate(obs, sample_info, log_prob_level="token", with_value=True)
        loss = -evaluation.log_prob.sum() - 0.01 * evaluation.entropy.sum() + evaluation.value.square().sum()
    trained = [p for p in policy.parameters() if p.requires_grad]
    return loss.detach(), list(torch.autograd.grad(loss, trained)), kept_bytes


@pytest.mark.parametrize("family", ["token_vla", "chunk_vla"])
def test_checkpointed_backbone_gives_the_same_update_and_keeps_less(family):
    plain = make_policy(family, seed=0)
    checkpointed = copy.deepcopy(plain)
    layers = checkpointed.checkpoint_activations()
    text = plain.vlm.config.text_config.num_hidden_layers
    vision = plain.vlm.config.vision_config.num_hidden_layers
    assert layers == text + vision
    assert checkpointed.checkpoint_activations() == layers  # a second call wraps nothing again
    assert checkpointed.training is False  # RL's eval mode, where transformers' own switch is inert

    obs = make_obs(4, seed=2)
    torch.manual_seed(5)
    sample_info = plain.sample(obs).sample_info
    plain_loss, plain_grads, plain_kept = _update_pass(plain, obs, sample_info)
    loss, grads, kept = _update_pass(checkpointed, obs, sample_info)

    # Tolerance zero: the recomputation runs the same kernels on the same inputs.
    assert torch.equal(loss, plain_loss)
    assert all(torch.equal(grad, plain_grad) for grad, plain_grad in zip(grads, plain_grads, strict=True))
    # Measured (this tiny backbone, 4 layers, batch 4): 2.23 MB -> 0.38 MB kept (0.17) for token_vla,
    # 2.28 -> 0.39 MB for chunk_vla; what stays is the layers' inputs, the logits and the heads'.
    assert kept < plain_kept, (kept, plain_kept)
    # Sampling (no gradients; the token VLA decodes with a KV cache) is untouched.
    torch.manual_seed(5)
    checkpointed_actions = checkpointed.sample(obs).actions
    torch.manual_seed(5)
    assert torch.equal(checkpointed_actions, plain.sample(obs).actions)
    assert checkpointed.state_dict().keys() == plain.state_dict().keys()


def test_a_layer_called_with_a_cache_runs_plainly():
    """A decode step writes the KV cache inside each layer: a recomputation in the backward pass
    would write it a second time."""
    policy = make_policy("token_vla", seed=0)
    checkpoint_transformer_layers(policy.backbone)
    prompt = policy.encode_prompt(make_obs(2, seed=3))
    mask = prompt.attention_mask
    hidden, cache = policy.run_backbone(
        prompt.embeds, mask, prompt.position_ids, torch.zeros_like(mask), use_cache=True
    )
    hidden.float().sum().backward()
    assert cache.get_seq_length() == prompt.embeds.shape[1]


def test_the_rl_config_switches_it_on_and_a_family_without_it_is_refused(tmp_path):
    from vla_rl.training.chunk_rl.config_load import compose_rl_config
    from vla_rl.training.chunk_rl.learner import checkpoint_activations, load_rl_policy

    make_policy("token_vla", seed=0).save_pretrained(tmp_path / "policy")
    cfg = compose_rl_config(
        [
            "recipe=token_vla_ppo",
            f"policy.init_from={tmp_path / 'policy'}",
            "policy.activation_checkpointing=true",
        ]
    )
    loaded = load_rl_policy(cfg, tmp_path / "policy")
    assert "forward" in vars(loaded.vlm.model.language_model.layers[0])  # wrapped

    with pytest.raises(ConfigError, match="'policy.activation_checkpointing': flow_mlp policies"):
        checkpoint_activations(torch.nn.Linear(2, 2), "flow_mlp")
