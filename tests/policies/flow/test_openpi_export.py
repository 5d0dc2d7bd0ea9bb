"""openpi PyTorch exports of pi0 and pi0.5 loaded by vla-rl, against openpi itself.

The fixtures ``tests/fixtures/openpi/pi0`` and ``.../pi05`` were written by
``tests/lerobot/make_openpi_fixtures.py`` with openpi's own code: a reduced-width ``PI0Pytorch`` saved as
openpi's conversion script saves it (``model.safetensors``, ``config.json``,
``assets/<asset_id>/norm_stats.json``), and the outputs of openpi's LIBERO policy pipeline
(``Policy.infer``: its transforms, ``sample_actions``, unnormalisation) for a raw batch and a given
noise, and of ``PI0Pytorch.forward`` (the flow-matching loss) for given noise and time. Here the same
folder goes through ``from_pretrained`` (the path of ``policy.init_from``) and the same raw batch
through our preprocessing.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from openpi_export_steps import FAMILIES, FIXTURES, copy_export
from openpi_export_steps import import_export as load
from openpi_export_steps import observation as raw_observation
from openpi_export_steps import reference as reference_arrays

from vla_rl.config import ConfigError
from vla_rl.policies.flow.lerobot_pi0_io import read_pi_folder
from vla_rl.policies.flow.pi0 import Pi0Policy
from vla_rl.policies.flow.pi0_inputs import unreduced_loss
from vla_rl.policies.image_resize import resize_with_pad_pil
from vla_rl.policies.lerobot_folder import normalize

TOLERANCE = 1e-4
"""float32 parity with the reference (the issue's bound)."""
ASSET_ID = "tiny/libero_like"


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def policy_type(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def reference(policy_type: str) -> dict[str, np.ndarray]:
    return reference_arrays(policy_type)


@pytest.fixture(scope="module")
def policy(policy_type: str) -> Pi0Policy:
    return load(policy_type)


def test_export_is_read_as_its_weights_say(policy_type: str) -> None:
    folder = read_pi_folder(FIXTURES / policy_type / "policy")
    assert (folder.policy_type, folder.convention) == (policy_type, "openpi")
    assert folder.config["asset_id"] == ASSET_ID
    expected_mode = {"pi0": "MEAN_STD", "pi05": "QUANTILES"}[policy_type]
    assert folder.normalization_mapping == {
        "VISUAL": "IDENTITY",
        "STATE": expected_mode,
        "ACTION": expected_mode,
    }
    assert folder.config["tokenizer_max_length"] == {"pi0": 48, "pi05": 200}[policy_type]
    assert folder.output_features["action"].shape == (7,)
    assert folder.input_features["observation.state"].shape == (8,)


def test_folder_settings_are_read(policy: Pi0Policy, policy_type: str) -> None:
    assert type(policy) is FAMILIES[policy_type]
    assert policy.cfg.camera_keys == ["base_0_rgb", "left_wrist_0_rgb", "right_wrist_0_rgb"]
    assert (policy.action_dim, policy.chunk_len, policy.num_steps) == (7, 10, 10)
    assert policy.model.config.max_action_dim == 32
    assert policy.model.config.vlm_config.vision_config.image_size == 224


def test_prompt_and_state_equal_openpi_transforms(
    policy: Pi0Policy, reference: dict[str, np.ndarray]
) -> None:
    inputs = policy.prepare_inputs(raw_observation(reference))
    width = reference["lang_tokens"].shape[1]
    np.testing.assert_array_equal(inputs.input_ids[:, -width:].numpy(), reference["lang_tokens"])
    np.testing.assert_array_equal(inputs.attention_mask[:, -width:].numpy(), reference["lang_mask"])
    np.testing.assert_allclose(inputs.state.numpy(), reference["normalized_state"], rtol=0, atol=1e-6)


def test_action_chunk_equals_openpi(policy: Pi0Policy, reference: dict[str, np.ndarray]) -> None:
    actions = policy.predict_action_chunk(raw_observation(reference), torch.as_tensor(reference["noise"]))
    assert actions.shape == reference["actions"].shape
    difference = float(np.abs(actions.numpy() - reference["actions"]).max())
    print(f"{type(policy).__name__} action chunk: max |vla-rl - openpi| = {difference:.3g}")
    assert difference < TOLERANCE


def test_flow_matching_loss_equals_openpi(policy: Pi0Policy, reference: dict[str, np.ndarray]) -> None:
    """Our SFT loss (the mean over the robot's 7 action dims) and the model's per-entry loss over all
    32 padded dims, against ``PI0Pytorch.forward``'s."""
    obs = raw_observation(reference)
    actions = torch.as_tensor(reference["loss_actions"])
    noise, time = torch.as_tensor(reference["loss_noise"]), torch.as_tensor(reference["loss_time"])
    batch, chunk = actions.shape[:2]
    with torch.no_grad():
        output = policy.sft_loss(
            obs, actions, torch.ones(batch, chunk, dtype=torch.bool), noise=noise, time=time
        )
        inputs = policy.prepare_inputs(obs)
        with unreduced_loss(policy.model.config):
            per_entry = policy.model(
                **policy.state_input(inputs.state),
                input_ids=inputs.input_ids,
                pixel_values=inputs.pixel_values,
                pixel_attention_mask=inputs.pixel_attention_mask,
                attention_mask=inputs.attention_mask,
                actions=policy.to_model_actions(actions),
                noise=noise,
                timestep=time,
            ).loss
    difference = abs(float(output.loss) - float(reference["loss"]))
    print(f"{type(policy).__name__} loss: {float(output.loss):.7f} vs openpi {float(reference['loss']):.7f}")
    assert difference < TOLERANCE
    assert float((per_entry - torch.as_tensor(reference["loss_per_entry"])).abs().max()) < TOLERANCE


def test_saved_import_keeps_openpi_preprocessing(
    policy: Pi0Policy, reference: dict[str, np.ndarray], tmp_path: Path
) -> None:
    policy.save_pretrained(str(tmp_path / "saved"))
    reloaded = type(policy).from_pretrained(str(tmp_path / "saved")).eval()
    assert reloaded.cfg.lerobot == policy.cfg.lerobot
    assert reloaded.cfg.lerobot.convention == "openpi"
    actions = reloaded.predict_action_chunk(raw_observation(reference), torch.as_tensor(reference["noise"]))
    assert float(np.abs(actions.numpy() - reference["actions"]).max()) < TOLERANCE


def test_rl_config_loads_the_export(policy_type: str, reference: dict[str, np.ndarray]) -> None:
    """``vla-rl train ... policy.init_from=EXPORT policy.tokenizer_dir=TOK policy.camera_map=...``."""
    from vla_rl.training.chunk_rl.config_load import compose_rl_config
    from vla_rl.training.chunk_rl.trainer import load_rl_policy

    fixture = FIXTURES / policy_type
    cfg = compose_rl_config(
        [
            "recipe=pi0_flow_sde_ppo",
            f"policy.name={policy_type}",
            f"policy.init_from={fixture / 'policy'}",
            f"policy.tokenizer_dir={fixture / 'tokenizer'}",
            f"policy.openpi_asset_id={ASSET_ID}",
            "policy.camera_map={base_0_rgb:base,left_wrist_0_rgb:wrist,right_wrist_0_rgb:null}",
        ]
    )
    policy = load_rl_policy(cfg, fixture / "policy")
    assert type(policy) is FAMILIES[policy_type]
    actions = policy.predict_action_chunk(raw_observation(reference), torch.as_tensor(reference["noise"]))
    assert float(np.abs(actions.numpy() - reference["actions"]).max()) < TOLERANCE


def test_delta_actions_equal_openpis_absolute_actions(
    policy_type: str, reference: dict[str, np.ndarray], tmp_path: Path
) -> None:
    """An export trained on actions relative to the state (openpi's ``DeltaActions`` /
    ``AbsoluteActions`` with its LIBERO mask): actions and loss against openpi's pipeline with them."""
    mask = [bool(value) for value in reference["delta_action_mask"]]
    policy = load(policy_type, openpi_delta_action_mask=mask)
    obs = raw_observation(reference)
    actions = policy.predict_action_chunk(obs, torch.as_tensor(reference["noise"]))
    difference = float(np.abs(actions.numpy() - reference["delta_actions"]).max())
    print(f"{type(policy).__name__} delta actions: max |vla-rl - openpi| = {difference:.3g}")
    assert difference < TOLERANCE
    assert float(np.abs(reference["delta_actions"] - reference["actions"]).max()) > 0.1  # the mask matters
    batch, chunk = reference["loss_actions"].shape[:2]
    with torch.no_grad():
        output = policy.sft_loss(
            obs,
            torch.as_tensor(reference["loss_actions"]),
            torch.ones(batch, chunk, dtype=torch.bool),
            noise=torch.as_tensor(reference["loss_noise"]),
            time=torch.as_tensor(reference["loss_time"]),
        )
    assert abs(float(output.loss) - float(reference["delta_loss"])) < TOLERANCE
    policy.save_pretrained(str(tmp_path / "saved"))
    reloaded = type(policy).from_pretrained(str(tmp_path / "saved")).eval()
    assert reloaded.cfg.lerobot.delta_action_mask == mask
    again = reloaded.predict_action_chunk(obs, torch.as_tensor(reference["noise"]))
    assert float(np.abs(again.numpy() - reference["delta_actions"]).max()) < TOLERANCE


def test_rl_config_takes_the_delta_action_mask(policy_type: str, reference: dict[str, np.ndarray]) -> None:
    from vla_rl.training.chunk_rl.config_load import compose_rl_config
    from vla_rl.training.chunk_rl.trainer import load_rl_policy

    fixture = FIXTURES / policy_type
    cfg = compose_rl_config(
        [
            "recipe=pi0_flow_sde_ppo",
            f"policy.name={policy_type}",
            f"policy.init_from={fixture / 'policy'}",
            f"policy.tokenizer_dir={fixture / 'tokenizer'}",
            "policy.openpi_delta_action_mask=[true,true,true,true,true,true,false]",
            "policy.camera_map={base_0_rgb:base,left_wrist_0_rgb:wrist,right_wrist_0_rgb:null}",
        ]
    )
    policy = load_rl_policy(cfg, fixture / "policy")
    actions = policy.predict_action_chunk(raw_observation(reference), torch.as_tensor(reference["noise"]))
    assert float(np.abs(actions.numpy() - reference["delta_actions"]).max()) < TOLERANCE


def test_bfloat16_export_loads_as_float32(policy_type: str, policy: Pi0Policy, tmp_path: Path) -> None:
    """openpi's default ``precision=bfloat16`` casts the whole model before saving: such an export loads
    into a float32 model holding exactly the bfloat16 values (not compared with openpi's bfloat16 run)."""
    from safetensors.torch import load_file, save_file

    export = copy_export(policy_type, tmp_path)
    weights = {
        name: value.to(torch.bfloat16) for name, value in load_file(str(export / "model.safetensors")).items()
    }
    save_file(weights, str(export / "model.safetensors"), metadata={"format": "pt"})
    config = json.loads((export / "config.json").read_text())
    (export / "config.json").write_text(json.dumps({**config, "precision": "bfloat16"}))
    loaded = load(policy_type, export)
    assert loaded.model.dtype == torch.float32
    ours = loaded.model.state_dict()
    reference = policy.model.state_dict()
    rounded = [name for name in ours if not torch.equal(ours[name], reference[name])]
    assert rounded, "bfloat16 rounding should change some weights"
    for name in ours:
        torch.testing.assert_close(ours[name], reference[name].to(torch.bfloat16).float(), rtol=0, atol=0)


# ----- errors ----------------------------------------------------------------------------------------


def test_openpi_normalisation_maths() -> None:
    """openpi adds 1e-6 to std and to q99 - q01 in both directions; statistics wider than the values
    are cut to their width."""
    folder = read_pi_folder(FIXTURES / "pi0" / "policy")
    folder.stats = {
        "observation.state": {"mean": np.array([1.0, -2.0, 9.0]), "std": np.array([0.5, 2.0, 1.0])},
        "action": {"q01": np.array([-1.0, 0.0]), "q99": np.array([3.0, 1.0])},
    }
    state = torch.tensor([[2.0, 0.0]])
    expected = torch.tensor([[1.0 / 0.500001, 2.0 / 2.000001]])
    torch.testing.assert_close(normalize(state, "observation.state", folder), expected, rtol=0, atol=1e-7)
    torch.testing.assert_close(
        normalize(torch.tensor([[2.0, 4.0]]), "observation.state", folder, inverse=True),
        torch.tensor([[2.0 * 0.500001 + 1.0, 4.0 * 2.000001 - 2.0]]),
        rtol=0,
        atol=1e-6,
    )
    folder.normalization_mapping = {**folder.normalization_mapping, "ACTION": "QUANTILES"}
    action = torch.tensor([[1.0, 0.25]])
    expected = torch.tensor([[2.0 / 4.000001 * 2 - 1, 0.25 / 1.000001 * 2 - 1]])
    torch.testing.assert_close(normalize(action, "action", folder), expected, rtol=0, atol=1e-7)
    torch.testing.assert_close(
        normalize(torch.tensor([[0.0, 1.0]]), "action", folder, inverse=True),
        torch.tensor([[0.5 * 4.000001 - 1.0, 1.000001]]),
        rtol=0,
        atol=1e-6,
    )


def test_pil_resize_with_pad_layout() -> None:
    """A 2 x 4 frame into 4 x 4: scaled by 1 (no change), pasted at row int(2 / 2) = 1 on black; a
    4 x 8 constant frame into 4 x 4 halves to 2 x 4 and keeps its value."""
    frame = np.arange(24, dtype=np.uint8).reshape(1, 2, 4, 3)
    out = resize_with_pad_pil(frame, 4, 4)
    assert out.shape == (1, 4, 4, 3)
    np.testing.assert_array_equal(out[0, 1:3], frame[0])
    assert not out[0, 0].any() and not out[0, 3].any()
    constant = np.full((2, 4, 8, 3), 200, dtype=np.uint8)
    out = resize_with_pad_pil(constant, 4, 4)
    assert (out[:, 1:3] == 200).all() and not out[:, 0].any() and not out[:, 3].any()
    same = np.zeros((1, 4, 4, 3), dtype=np.uint8)
    assert resize_with_pad_pil(same, 4, 4) is same


def test_lerobot_export_of_an_openpi_import_is_refused(policy: Pi0Policy, tmp_path: Path) -> None:
    from vla_rl.policies.lerobot_export import export_lerobot

    with pytest.raises(ConfigError, match="imported from an openpi export"):
        export_lerobot(policy, tmp_path / "out")


def test_full_size_export_maps_onto_transformers_pi0_base(policy_type: str) -> None:
    """The weight names and shapes of openpi's default-size export (recorded by the fixture script on
    the meta device, under the names ``save_model`` writes) give transformers' default config (pi0
    base: Gemma 2B + Gemma 300M + SigLIP So400m/14 at 224 px), and both hold the same number of weights
    but the expert's unused output head."""
    import math

    from vla_rl.policies.flow.lerobot_pi0_model import MODELS, pi0_model_config
    from vla_rl.policies.openpi_folder import read_openpi_export

    fixture = FIXTURES / policy_type
    shapes = {
        name: tuple(shape)
        for name, shape in json.loads((fixture / "full_size_shapes.json").read_text()).items()
    }
    folder = read_openpi_export(fixture / "policy", set(shapes))
    assert folder.policy_type == policy_type
    config = pi0_model_config(folder, {"model." + name: shape for name, shape in shapes.items()})
    config_class, model_class = MODELS[policy_type]
    default = config_class()
    for group, names in {
        "vlm_config.text_config": ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers"),
        "vlm_config.vision_config": ("hidden_size", "intermediate_size", "num_hidden_layers", "patch_size"),
        "dit_config": (
            "hidden_size",
            "intermediate_size",
            "num_hidden_layers",
            "num_key_value_heads",
            "head_dim",
        ),
    }.items():
        for name in names:
            ours, theirs = config, default
            for part in f"{group}.{name}".split("."):
                ours, theirs = getattr(ours, part), getattr(theirs, part)
            assert ours == theirs, f"{group}.{name}"
    assert config.vlm_config.vision_config.image_size == 224
    with torch.device("meta"):
        model = model_class(config)
    ours = sum(tensor.numel() for tensor in model.state_dict().values())
    # openpi saves the VLM's tied embedding once (as lm_head) and keeps the expert's lm_head, which
    # transformers' conversion loads as pi0's (unused) expert input embedding; PI05 has none and drops it.
    unused = {"paligemma_with_expert.gemma_expert.lm_head.weight"} if policy_type == "pi05" else set()
    theirs = sum(math.prod(shape) for name, shape in shapes.items() if name not in unused)
    assert ours == theirs
