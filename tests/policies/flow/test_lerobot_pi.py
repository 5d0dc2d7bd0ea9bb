"""LeRobot pi0 and pi0.5 folders loaded by vla-rl, against LeRobot 0.4 itself.

The fixtures ``tests/fixtures/lerobot/pi0`` and ``.../pi05`` were written by
``tests/lerobot/make_pi_fixtures.py`` in the LeRobot venv (with openpi's transformers files): LeRobot's
``PI0Policy`` / ``PI05Policy`` at reduced width, saved by its
``save_pretrained`` with its processors, and its outputs for a raw observation batch: the action chunk
of ``predict_action_chunk`` through its pre- and post-processor for a given initial noise, and the
flow-matching loss of ``forward`` for a given noise and time. Here the same folder goes through
``Pi0Policy`` / ``Pi05Policy.from_pretrained`` (the path of ``policy.init_from``) and the same raw batch
through our own preprocessing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from vla_rl.config import ConfigError
from vla_rl.policies.flow.pi0 import Pi0Policy
from vla_rl.policies.flow.pi05 import Pi05Policy

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "lerobot"
FAMILIES = {"pi0": Pi0Policy, "pi05": Pi05Policy}
"""LeRobot policy type -> the family that imports it."""
TOLERANCE = 1e-4
"""float32 parity with the reference (the issue's bound)."""


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def policy_type(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def reference(policy_type: str) -> dict[str, np.ndarray]:
    with np.load(FIXTURES / policy_type / "reference.npz") as arrays:
        return dict(arrays)


@pytest.fixture(scope="module")
def policy(policy_type: str) -> Pi0Policy:
    fixture = FIXTURES / policy_type
    family = FAMILIES[policy_type]
    return family.from_pretrained(str(fixture / "policy"), tokenizer_dir=str(fixture / "tokenizer")).eval()


def raw_observation(reference: dict[str, np.ndarray]) -> dict[str, object]:
    """The reference's raw batch in our observation layout (uint8 HWC frames, state, instructions)."""
    return {
        "rgb_front": reference["rgb_front"],
        "rgb_wrist": reference["rgb_wrist"],
        "proprio": torch.as_tensor(reference["state"]),
        "instruction": [str(text) for text in reference["instructions"]],
    }


def test_folder_settings_are_read(policy: Pi0Policy, policy_type: str) -> None:
    assert type(policy) is FAMILIES[policy_type]
    assert policy.cfg.lerobot is not None and policy.cfg.lerobot.policy_type == policy_type
    assert policy.cfg.camera_keys == ["front", "wrist"]
    assert (policy.action_dim, policy.chunk_len, policy.num_steps) == (7, 10, 10)
    assert policy.model.config.max_action_dim == 32


def test_prompt_and_state_equal_lerobot_preprocessor(
    policy: Pi0Policy, reference: dict[str, np.ndarray]
) -> None:
    inputs = policy.prepare_inputs(raw_observation(reference))
    width = reference["lang_tokens"].shape[1]
    np.testing.assert_array_equal(inputs.input_ids[:, -width:].numpy(), reference["lang_tokens"])
    np.testing.assert_array_equal(inputs.attention_mask[:, -width:].numpy(), reference["lang_mask"])
    np.testing.assert_allclose(
        inputs.state[:, :8].numpy(), reference["normalized_state"][:, :8], rtol=0, atol=1e-6
    )
    assert not inputs.state[:, 8:].any()


def test_action_chunk_equals_lerobot(policy: Pi0Policy, reference: dict[str, np.ndarray]) -> None:
    actions = policy.predict_action_chunk(raw_observation(reference), torch.as_tensor(reference["noise"]))
    assert actions.shape == reference["actions"].shape
    difference = float(np.abs(actions.numpy() - reference["actions"]).max())
    print(f"{type(policy).__name__} action chunk: max |vla-rl - LeRobot| = {difference:.3g}")
    assert difference < TOLERANCE


def test_flow_matching_loss_equals_lerobot(policy: Pi0Policy, reference: dict[str, np.ndarray]) -> None:
    batch, chunk = reference["loss_actions"].shape[:2]
    with torch.no_grad():
        output = policy.sft_loss(
            raw_observation(reference),
            torch.as_tensor(reference["loss_actions"]),
            torch.ones(batch, chunk, dtype=torch.bool),
            noise=torch.as_tensor(reference["loss_noise"]),
            time=torch.as_tensor(reference["loss_time"]),
        )
    difference = abs(float(output.loss) - float(reference["loss"]))
    print(f"{type(policy).__name__} loss: {float(output.loss):.7f} vs LeRobot {float(reference['loss']):.7f}")
    assert difference < TOLERANCE


def test_saved_import_keeps_lerobot_preprocessing(
    policy: Pi0Policy, reference: dict[str, np.ndarray], tmp_path: Path
) -> None:
    """An RL checkpoint of an imported policy preprocesses as the folder did, without the folder."""
    policy.save_pretrained(str(tmp_path / "saved"))
    reloaded = type(policy).from_pretrained(str(tmp_path / "saved")).eval()
    assert reloaded.cfg.lerobot == policy.cfg.lerobot
    obs, noise = raw_observation(reference), torch.as_tensor(reference["noise"])
    torch.testing.assert_close(
        reloaded.predict_action_chunk(obs, noise), policy.predict_action_chunk(obs, noise)
    )


def test_folder_without_tokenizer_needs_tokenizer_dir(tmp_path: Path, policy_type: str) -> None:
    shutil.copytree(FIXTURES / policy_type / "policy", tmp_path / "policy")
    with pytest.raises(ConfigError, match="policy.tokenizer_dir"):
        FAMILIES[policy_type].from_pretrained(str(tmp_path / "policy"))


def test_folder_of_the_other_type_is_refused(policy_type: str) -> None:
    other = next(name for name in FAMILIES if name != policy_type)
    fixture = FIXTURES / policy_type
    with pytest.raises(ConfigError, match=f"policy.name={policy_type}"):
        FAMILIES[other].from_pretrained(str(fixture / "policy"), tokenizer_dir=str(fixture / "tokenizer"))


def test_tokenizer_inside_the_folder_is_used(
    tmp_path: Path, reference: dict[str, np.ndarray], policy_type: str
) -> None:
    shutil.copytree(FIXTURES / policy_type / "policy", tmp_path / "policy")
    shutil.copytree(FIXTURES / policy_type / "tokenizer", tmp_path / "policy" / "tokenizer")
    policy = FAMILIES[policy_type].from_pretrained(str(tmp_path / "policy"))
    width = reference["lang_tokens"].shape[1]
    ids = policy.prepare_inputs(raw_observation(reference)).input_ids[:, -width:]
    np.testing.assert_array_equal(ids.numpy(), reference["lang_tokens"])


def test_rl_config_loads_the_folder_with_its_tokenizer_dir(policy_type: str, reference: dict) -> None:
    """``vla-rl train ... policy.name=<type> policy.init_from=DIR policy.tokenizer_dir=TOK`` loads
    the folder through ``load_rl_policy`` (the trainer's path) and acts as LeRobot does."""
    from vla_rl.training.chunk_rl.config_load import compose_rl_config
    from vla_rl.training.chunk_rl.trainer import load_rl_policy

    fixture = FIXTURES / policy_type
    cfg = compose_rl_config(
        [
            "recipe=pi0_flow_sde_ppo",
            f"policy.name={policy_type}",
            f"policy.init_from={fixture / 'policy'}",
            f"policy.tokenizer_dir={fixture / 'tokenizer'}",
        ]
    )
    policy = load_rl_policy(cfg, fixture / "policy")
    assert type(policy) is FAMILIES[policy_type]
    actions = policy.predict_action_chunk(raw_observation(reference), torch.as_tensor(reference["noise"]))
    assert float(np.abs(actions.numpy() - reference["actions"]).max()) < TOLERANCE


def test_tokenizer_dir_for_a_family_without_one_is_refused() -> None:
    from vla_rl.policies.registry import load_chunk_policy

    with pytest.raises(ConfigError, match="policy.tokenizer_dir"):
        load_chunk_policy("flow_mlp", FIXTURES / "pi0" / "policy", tokenizer_dir="somewhere")


def test_missing_camera_and_wrong_state_width_are_config_errors(
    policy: Pi0Policy, reference: dict[str, np.ndarray]
) -> None:
    obs = raw_observation(reference)
    without_wrist = {key: value for key, value in obs.items() if key != "rgb_wrist"}
    with pytest.raises(ConfigError, match="observation.images.wrist"):
        policy.prepare_inputs(without_wrist)
    with pytest.raises(ConfigError, match="state has 8 values, the observation gives 6"):
        policy.prepare_inputs({**obs, "proprio": torch.as_tensor(reference["state"][:, :6])})


@pytest.mark.parametrize("exploration", ["flow_sde", "flow_noise"])
def test_imported_policy_recomputes_its_sampled_chain_for_rl(
    policy_type: str, reference: dict[str, np.ndarray], exploration: str
) -> None:
    """RL on an import: a sampled chain's log-probability and value are recomputed from the stored
    chain (what PPO does) and gradients reach the action expert and the vision tower."""
    fixture = FIXTURES / policy_type
    policy = FAMILIES[policy_type].from_pretrained(
        str(fixture / "policy"), tokenizer_dir=str(fixture / "tokenizer")
    )
    policy.set_exploration(exploration=exploration)
    policy.eval()
    obs = raw_observation(reference)
    torch.manual_seed(0)
    step = policy.sample(obs, temperature=1.0, with_value=True)
    assert step.actions.shape == (2, policy.chunk_len, 7)
    evaluation = policy.evaluate(obs, step.sample_info, temperature=1.0, with_value=True)
    torch.testing.assert_close(evaluation.log_prob, step.log_prob, atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(evaluation.value, step.value, atol=1e-5, rtol=1e-5)
    (evaluation.log_prob.sum() + evaluation.value.sum()).backward()
    assert policy.model.action_out_proj.weight.grad is not None
    assert policy.model.model.vlm.vision_tower.embeddings.patch_embedding.weight.grad is not None


ARCHITECTURE = {
    "vlm_config.text_config": (
        "vocab_size",
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "hidden_act",
    ),
    "vlm_config.vision_config": (
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "patch_size",
        "image_size",
        "projection_dim",
    ),
    "vlm_config": ("image_token_id",),
    "dit_config": (
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "hidden_act",
    ),
}
"""The sizes ``pi0_model_config`` reads from a checkpoint (or takes as LeRobot's fixed choices)."""


def _field(config: object, path: str) -> object:
    for part in path.split("."):
        config = getattr(config, part)
    return config


def test_full_size_checkpoint_maps_onto_transformers_pi0_base(policy_type: str) -> None:
    """The weight shapes of LeRobot's default-size model (recorded by the fixture script on the meta
    device) give transformers' own default config, which is that of LeRobot's published
    ``pi0_base`` / ``pi05_base``; and the two models hold the same number of weights."""
    import json
    import math

    from vla_rl.policies.flow.lerobot_pi0_model import EXPERT, MODELS, VLM, pi0_model_config
    from vla_rl.policies.lerobot_folder import read_lerobot_folder

    fixture = FIXTURES / policy_type
    shapes = {
        name: tuple(shape)
        for name, shape in json.loads((fixture / "full_size_shapes.json").read_text()).items()
    }
    folder = read_lerobot_folder(fixture / "policy")
    folder.config = {**folder.config, "image_resolution": [224, 224]}
    config = pi0_model_config(folder, shapes)
    config_class, model_class = MODELS[policy_type]
    default = config_class()
    for group, names in ARCHITECTURE.items():
        for name in names:
            assert _field(config, f"{group}.{name}") == _field(default, f"{group}.{name}"), f"{group}.{name}"
    with torch.device("meta"):
        model = model_class(config)
    ours = sum(tensor.numel() for tensor in model.state_dict().values())
    # LeRobot's PaliGemma lm_head is its embedding (tied); pi0.5's expert keeps an unused lm_head.
    unused = {VLM + "lm_head.weight"} | ({EXPERT + "lm_head.weight"} if policy_type == "pi05" else set())
    theirs = sum(math.prod(shape) for name, shape in shapes.items() if name not in unused)
    assert ours == theirs


def test_prompt_length_is_the_preprocessors(
    tmp_path: Path, reference: dict[str, np.ndarray], policy_type: str
) -> None:
    """LeRobot pads and truncates to its tokenizer step's ``max_length``: a folder whose processor says
    8 gets the reference prompts cut to their first 8 tokens."""
    import json

    shutil.copytree(FIXTURES / policy_type / "policy", tmp_path / "policy")
    path = tmp_path / "policy" / "policy_preprocessor.json"
    pipeline = json.loads(path.read_text())
    for step in pipeline["steps"]:
        if step["registry_name"] == "tokenizer_processor":
            step["config"]["max_length"] = 8
    path.write_text(json.dumps(pipeline))
    policy = FAMILIES[policy_type].from_pretrained(
        str(tmp_path / "policy"), tokenizer_dir=str(FIXTURES / policy_type / "tokenizer")
    )
    ids = policy.prepare_inputs(raw_observation(reference)).input_ids
    np.testing.assert_array_equal(ids[:, -8:].numpy(), reference["lang_tokens"][:, :8])
    assert (ids[:, :-8] == policy.model.config.vlm_config.image_token_id).all()


def test_cameras_are_named_as_before_the_preprocessors_renaming(
    tmp_path: Path, reference: dict[str, np.ndarray], policy_type: str
) -> None:
    """A processor that renames ``observation.images.top`` to the policy's ``front`` reads the raw
    observation's ``top`` camera, as LeRobot does."""
    import json

    shutil.copytree(FIXTURES / policy_type / "policy", tmp_path / "policy")
    path = tmp_path / "policy" / "policy_preprocessor.json"
    pipeline = json.loads(path.read_text())
    pipeline["steps"][0]["config"]["rename_map"] = {"observation.images.top": "observation.images.front"}
    path.write_text(json.dumps(pipeline))
    policy = FAMILIES[policy_type].from_pretrained(
        str(tmp_path / "policy"), tokenizer_dir=str(FIXTURES / policy_type / "tokenizer")
    )
    assert policy.cfg.camera_keys == ["top", "wrist"]
    obs = raw_observation(reference)
    obs["rgb_top"] = obs.pop("rgb_front")
    actions = policy.predict_action_chunk(obs, torch.as_tensor(reference["noise"]))
    assert float(np.abs(actions.numpy() - reference["actions"]).max()) < TOLERANCE
