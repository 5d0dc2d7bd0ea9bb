"""SmolVLA against LeRobot 0.4, live: LeRobot builds a tiny SmolVLA from a local SmolVLM backbone,
saves it as a user's policy folder and records ``predict_action_chunk`` (through its own pre- and
post-processor) and ``forward``'s flow-matching losses for a raw observation batch with fixed noise
and time (``smolvla_reference.py``); vla-rl loads the folder by policy name, as ``policy.init_from``
does, and must give the same numbers from the same raw inputs (float32, within 1e-4)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from smolvla_batch import lerobot_actions, observation

from vla_rl.cli import main
from vla_rl.config.structured import ConfigError
from vla_rl.policies.flow.smolvla_inputs import build_inputs
from vla_rl.policies.registry import build_chunk_policy, load_chunk_policy
from vla_rl.rollout.flat_batch import concat_zero_padded

TOLERANCE = 1e-4
"""float32 parity bound on actions and losses (the issue's)."""
SENSITIVITY = 1e-2
"""A changed input must move the actions by more than this: the parity check can then fail."""
HUB_BACKBONE = "HuggingFaceTB/SmolVLM2-500M-Video-Instruct"


VARIANTS = ("interleaved", "skipping")
"""The reference script's tiny model variants (its ``VARIANTS``)."""
FULL_SIZE = pytest.param(
    "full",
    marks=pytest.mark.skipif(
        os.environ.get("VLA_RL_SMOLVLA_FULL") != "1",
        reason="the full-size SmolVLA (450M parameters, minutes and gigabytes on a CPU) runs on request: "
        "VLA_RL_SMOLVLA_FULL=1 make test-lerobot",
    ),
)
"""The full-size variant, checked on request."""


@pytest.fixture(scope="module", params=VARIANTS)
def reference(request, run_lerobot, tmp_path_factory) -> tuple[Path, dict[str, np.ndarray]]:
    """(folder with ``policy/`` and ``vlm/``, the reference arrays) of one model variant."""
    out = tmp_path_factory.mktemp(f"smolvla_{request.param}")
    arrays = run_lerobot("smolvla_reference.py", out, request.param, out=out / "reference.npz")
    return out, arrays


def test_smolvla_actions_and_loss_equal_lerobot(reference) -> None:
    assert_equal_to_lerobot(*reference)


@pytest.mark.slow
@pytest.mark.parametrize("variant", [FULL_SIZE])
def test_full_size_smolvla_equals_lerobot(run_lerobot, tmp_path: Path, variant: str) -> None:
    """SmolVLA's defaults on the SmolVLM2-500M sizes (450M parameters, 512-pixel images, chunk 50,
    10 steps): minutes and gigabytes on a CPU, so only with ``VLA_RL_SMOLVLA_FULL=1``."""
    arrays = run_lerobot("smolvla_reference.py", tmp_path, variant, out=tmp_path / "reference.npz")
    assert_equal_to_lerobot(tmp_path, arrays)


def assert_equal_to_lerobot(out: Path, arrays: dict[str, np.ndarray]) -> None:
    """vla-rl's tokens, action chunk and flow-matching losses for the reference's raw batch, noise
    and time equal LeRobot's (``TOLERANCE``); prints the measured differences."""
    policy = load_chunk_policy("smolvla", out / "policy").eval()
    obs = observation(arrays)

    inputs = build_inputs(obs, policy.folder, policy.arch, policy.cfg, policy.tokenizer, policy.device)
    np.testing.assert_array_equal(inputs.tokens.numpy(), arrays["lang_tokens"])  # newline, truncation
    np.testing.assert_array_equal(inputs.token_mask.numpy(), arrays["lang_mask"])  # and padding

    actions = policy.predict_chunk(obs, torch.from_numpy(arrays["noise"])).numpy()
    assert actions.shape == arrays["actions"].shape
    action_error = float(np.abs(actions - arrays["actions"]).max())

    with torch.no_grad():
        losses = policy.flow_losses(
            obs,
            torch.from_numpy(arrays["raw_actions"]),
            torch.from_numpy(arrays["loss_noise"]),
            torch.from_numpy(arrays["loss_time"]),
        ).numpy()
    loss_entry_error = float(np.abs(losses - arrays["losses"]).max())
    loss_error = abs(float(losses.mean()) - float(arrays["loss"]))
    print(
        f"smolvla vs LeRobot: max |action diff| {action_error:.3g} (actions up to "
        f"{np.abs(arrays['actions']).max():.3g}), max |loss entry diff| {loss_entry_error:.3g} (entries up "
        f"to {np.abs(arrays['losses']).max():.3g}), |loss diff| {loss_error:.3g} "
        f"(loss {float(arrays['loss']):.4g})"
    )
    assert action_error <= TOLERANCE
    assert loss_entry_error <= TOLERANCE
    assert loss_error <= TOLERANCE


@pytest.mark.parametrize("change", ["image", "instruction", "state"])
def test_smolvla_actions_depend_on_each_input(reference, change: str) -> None:
    """Each input moves the actions by far more than the tolerance, so a preprocessing difference
    in any of them would fail the parity test above."""
    out, arrays = reference
    policy = load_chunk_policy("smolvla", out / "policy").eval()
    obs = observation(arrays)
    if change == "image":
        obs["rgb_wrist"] = obs["rgb_wrist"][:, ::-1].copy()
    elif change == "instruction":
        obs["instruction"] = [text.replace("red", "blue") for text in obs["instruction"]]
    else:
        obs["proprio"] = obs["proprio"] + 0.5
    actions = policy.predict_chunk(obs, torch.from_numpy(arrays["noise"])).numpy()
    assert float(np.abs(actions - arrays["actions"]).max()) > SENSITIVITY


def test_smolvla_backbone_must_be_local(reference, tmp_path: Path) -> None:
    """A user's folder names the hub backbone: without a local copy of its config and tokenizer the
    load is a ConfigError saying where to put it; with one in ``vlm/`` (or ``vlm_dir``) it loads."""
    out, arrays = reference
    folder = tmp_path / "user_policy"
    shutil.copytree(out / "policy", folder)
    config = json.loads((folder / "config.json").read_text())
    config["vlm_model_name"] = HUB_BACKBONE
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match="vlm"):
        load_chunk_policy("smolvla", folder)
    shutil.copytree(out / "vlm", folder / "vlm")
    policy = load_chunk_policy("smolvla", folder).eval()
    actions = policy.predict_chunk(observation(arrays), torch.from_numpy(arrays["noise"])).numpy()
    assert float(np.abs(actions - arrays["actions"]).max()) <= TOLERANCE


# ----- the RL interface on the loaded folder ---------------------------------------------------------------


def test_greedy_chain_equals_the_reference_ode(reference) -> None:
    """RL's deterministic chain (the chain module's time grid) is LeRobot's Euler ODE."""
    out, arrays = reference
    policy = load_chunk_policy("smolvla", out / "policy").eval()
    obs = observation(arrays)
    torch.manual_seed(3)
    greedy = policy.sample(obs, deterministic=True)
    torch.manual_seed(3)
    noise = torch.randn(3, policy.chunk_len, policy.arch.max_action_dim)
    torch.testing.assert_close(greedy.actions, policy.predict_chunk(obs, noise), atol=1e-5, rtol=0)
    torch.testing.assert_close(greedy.log_prob, torch.zeros(3))


@pytest.mark.parametrize("exploration", ["flow_sde", "flow_noise"])
def test_sampled_chain_log_prob_is_recomputed_by_evaluate(reference, exploration: str) -> None:
    out, arrays = reference
    policy = load_chunk_policy("smolvla", out / "policy").eval()
    policy.set_exploration(exploration=exploration)
    obs = observation(arrays)
    step = policy.sample(obs, temperature=0.8, with_value=True)
    assert step.actions.shape == (3, policy.chunk_len, 7)
    assert step.sample_info["chain"].shape == (3, policy.num_steps + 1, policy.chunk_len, 32)
    assert step.log_prob.shape == (3,) and torch.isfinite(step.log_prob).all()
    evaluation = policy.evaluate(obs, step.sample_info, temperature=0.8, with_value=True)
    torch.testing.assert_close(evaluation.log_prob, step.log_prob, atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(evaluation.value, step.value, atol=1e-5, rtol=1e-5)
    (evaluation.log_prob.sum() + evaluation.value.sum()).backward()
    assert policy.model.action_out_proj.weight.grad.abs().sum() > 0
    assert policy.model.vlm.vision_model.embeddings.patch_embedding.weight.grad.abs().sum() > 0
    if exploration == "flow_noise":
        assert policy.noise_head.net[0].weight.grad is not None


def test_autocast_runs_the_model_in_bf16_and_returns_float32(reference) -> None:
    """``policy.autocast=bfloat16`` on SmolVLA (the other families: tests/policies/
    test_chunk_policy_autocast.py): its log-probabilities and values stay within bf16 rounding of
    float32's, and a stored chain is recomputed under autocast as it was sampled."""
    out, arrays = reference
    plain = load_chunk_policy("smolvla", out / "policy").eval()
    mixed = load_chunk_policy("smolvla", out / "policy").eval()
    mixed.autocast_dtype = torch.bfloat16
    obs = observation(arrays)
    torch.manual_seed(0)
    step = mixed.sample(obs, with_value=True)
    assert step.actions.dtype == step.log_prob.dtype == step.value.dtype == torch.float32
    evaluation = mixed.evaluate(obs, step.sample_info, with_value=True)
    reference_evaluation = plain.evaluate(obs, step.sample_info, with_value=True)
    torch.testing.assert_close(evaluation.log_prob, step.log_prob, atol=1e-4, rtol=1e-5)
    relative = (evaluation.log_prob - reference_evaluation.log_prob).abs().max() / step.log_prob.abs().max()
    assert 0 < relative < 2**-6, relative  # a few bf16 roundings (2^-8 each) on the way
    evaluation.log_prob.sum().backward()
    assert all(p.dtype == torch.float32 for p in mixed.parameters())
    assert mixed.model.action_out_proj.weight.grad.dtype == torch.float32


def test_stored_prefix_of_a_frozen_vlm_evaluates_as_a_fresh_one(reference) -> None:
    """Prefix rows stored by two calls (short and long instructions: different prefix lengths) and
    joined zero-padded, as an RL update joins them, evaluate as a freshly encoded prefix."""
    out, arrays = reference
    policy = load_chunk_policy("smolvla", out / "policy").eval()
    obs = observation(arrays)
    assert not policy.observation_cache(obs)  # the VLM trains: its prefix must not be stored
    policy.model.vlm.requires_grad_(False)
    policy.model.state_proj.requires_grad_(False)
    step = policy.sample(obs, with_value=True)

    def rows(index: list[int]) -> dict[str, object]:
        return {
            key: [value[i] for i in index] if key == "instruction" else value[index]
            for key, value in obs.items()
        }

    parts = [policy.observation_cache(rows(index)) for index in ([0, 1], [2])]
    cache = {key: concat_zero_padded([part[key] for part in parts]) for key in parts[0]}
    fresh = policy.evaluate(obs, step.sample_info, with_value=True)
    stored = policy.evaluate(obs, {**step.sample_info, **cache}, with_value=True)
    torch.testing.assert_close(stored.log_prob, fresh.log_prob, atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(stored.value, fresh.value, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(stored.log_prob, step.log_prob, atol=1e-4, rtol=1e-5)


def test_sft_loss_counts_real_steps_and_dims_only(reference) -> None:
    out, arrays = reference
    policy = load_chunk_policy("smolvla", out / "policy")
    obs = observation(arrays)
    actions = torch.from_numpy(arrays["raw_actions"])
    mask = torch.ones(3, policy.chunk_len, dtype=torch.bool)
    mask[0, 4:] = False
    torch.manual_seed(0)
    output = policy.sft_loss(obs, actions, mask)
    output.loss.backward()
    assert torch.isfinite(output.loss) and output.metrics["flow_mse"] > 0
    assert policy.model.expert.layers[0].mlp.down_proj.weight.grad.abs().sum() > 0
    torch.manual_seed(0)
    changed = actions.clone()
    changed[0, 4:] += 5.0  # past the episode's end: padding, replaced by the last real action
    torch.testing.assert_close(policy.sft_loss(obs, changed, mask).loss, output.loss)


def test_save_and_load_keep_actions_settings_and_heads(reference, tmp_path: Path) -> None:
    out, arrays = reference
    policy = load_chunk_policy("smolvla", out / "policy").eval()
    policy.set_exploration(exploration="flow_noise", noise_level=0.3)
    with torch.no_grad():
        policy.value_head[0].weight.add_(0.5)
        policy.model.action_out_proj.bias.add_(0.25)  # as an update would
    policy.save_pretrained(tmp_path / "saved")
    loaded = load_chunk_policy("smolvla", tmp_path / "saved").eval()
    assert loaded.cfg == policy.cfg
    obs = observation(arrays)
    noise = torch.from_numpy(arrays["noise"])
    torch.testing.assert_close(loaded.predict_chunk(obs, noise), policy.predict_chunk(obs, noise))
    torch.manual_seed(1)
    want = policy.sample(obs, with_value=True)
    torch.manual_seed(1)
    got = loaded.sample(obs, with_value=True)
    torch.testing.assert_close(got.log_prob, want.log_prob)
    torch.testing.assert_close(got.value, want.value)


def test_saved_policy_loads_in_lerobot_with_the_same_actions(reference, run_lerobot, tmp_path: Path) -> None:
    """After a change to the weights (as an RL update makes), ``save_pretrained`` and ``vla-rl
    export`` write a folder that LeRobot's own ``from_pretrained`` and processors load, and
    LeRobot's actions for the same raw batch and noise equal vla-rl's."""
    out, arrays = reference
    policy = load_chunk_policy("smolvla", out / "policy").eval()
    with torch.no_grad():
        policy.model.action_out_proj.bias.add_(0.25)
        policy.model.expert.layers[1].mlp.up_proj.weight.mul_(1.1)
    obs, noise = observation(arrays), torch.from_numpy(arrays["noise"])
    ours = policy.predict_chunk(obs, noise).numpy()
    assert float(np.abs(ours - arrays["actions"]).max()) > SENSITIVITY  # the change shows
    policy.save_pretrained(tmp_path / "saved")
    # the saved checkpoint through `vla-rl export` (a LeRobot folder without what RL adds)
    exported = tmp_path / "exported"
    assert main(["export", "--format", "lerobot", str(tmp_path / "saved"), str(exported)]) == 0
    assert not (exported / "value_head.safetensors").exists()
    theirs = lerobot_actions(run_lerobot, exported, out / "reference.npz", tmp_path)
    error = float(np.abs(ours - theirs).max())
    print(f"smolvla saved by vla-rl, run by LeRobot: max |action diff| {error:.3g}")
    assert error <= TOLERANCE


def test_misconfigurations_are_config_errors_naming_the_key(reference, tmp_path: Path) -> None:
    out, arrays = reference
    folder = out / "policy"
    policy = build_chunk_policy(
        "smolvla", pretrained_dir=str(folder), chunk_len=6, camera_map={"observation.images.wrist": "side"}
    )
    obs = observation(arrays)
    with pytest.raises(ConfigError, match="'policy.camera_map'.*'side'"):
        policy.sample(obs)
    obs["rgb_side"] = obs.pop("rgb_wrist")
    assert policy.sample(obs).actions.shape == (3, 6, 7)
    obs["proprio"] = obs["proprio"][:, :5]
    with pytest.raises(ConfigError, match="'policy.state_keys'.*5 values.*8"):
        policy.sample(obs)
    with pytest.raises(ConfigError, match="'policy.kwargs.chunk_len'"):
        build_chunk_policy("smolvla", pretrained_dir=str(folder), chunk_len=4)
    with pytest.raises(ConfigError, match="'policy.kwargs.action_dim': 4 != .* 7"):
        build_chunk_policy("smolvla", pretrained_dir=str(folder), action_dim=4)
    with pytest.raises(ConfigError, match="'policy.kwargs.vlm_dir'"):
        build_chunk_policy("smolvla", pretrained_dir=str(folder), vlm_dir=str(tmp_path))
    aloha = tmp_path / "aloha"
    shutil.copytree(folder, aloha)
    config = json.loads((aloha / "config.json").read_text())
    (aloha / "config.json").write_text(json.dumps({**config, "adapt_to_pi_aloha": True}))
    with pytest.raises(ConfigError, match="adapt_to_pi_aloha"):
        load_chunk_policy("smolvla", aloha)
