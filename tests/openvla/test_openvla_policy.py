"""``policy.name=openvla`` on a folder whose modelling code is the test's STAND-IN (standin_folder.py):
the trust_remote_code loading path, greedy decoding and log-probabilities through the model's own
forward, the env checks and maps, saving, and the registry's errors."""

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from tiny_tokenizer import EMPTY_TOKEN_ID

from vla_rl.config.structured import ConfigError
from vla_rl.policies.env_maps import DimensionMap, EnvInterface, EnvMaps
from vla_rl.policies.registry import load_chunk_policy
from vla_rl.policies.vla.openvla import OpenVLAPolicy, openvla_prompt

FIRST_ACTION_ID = 31744


def load(directory: Path, key: str = "bridge_orig", **maps: object) -> OpenVLAPolicy:
    policy = OpenVLAPolicy.from_pretrained(directory, unnorm_key=key, trust_remote_code=True)
    policy.set_env_maps(EnvMaps(camera_map={"primary": "front"}, **maps))  # type: ignore[arg-type]
    return policy


def observation(instructions: list[str], seed: int = 0) -> dict[str, object]:
    images = np.random.default_rng(seed).integers(0, 256, (len(instructions), 20, 24, 3), dtype=np.uint8)
    return {"instruction": instructions, "rgb_front": images}


def test_refused_without_trust(standin_dir: Path) -> None:
    with pytest.raises(ConfigError, match=r"policy.trust_remote_code.*modeling_prismatic.py"):
        OpenVLAPolicy.from_pretrained(standin_dir, unnorm_key="bridge_orig")


def test_unnorm_key_must_be_chosen(standin_dir: Path) -> None:
    with pytest.raises(ConfigError, match=r"policy.unnorm_key.*\['bridge_orig', 'libero_spatial'\]"):
        OpenVLAPolicy.from_pretrained(standin_dir, trust_remote_code=True)


def test_prompt_is_openvlas(standin_dir: Path) -> None:
    policy = load(standin_dir)
    assert openvla_prompt("Pick up the Red cube") == (
        "In: What action should the robot take to pick up the red cube?\nOut:"
    )
    ids = policy.prompt_ids(["Pick up the red cube"])[0]
    words = ["In", ":", "What", "action", "should", "the", "robot", "take", "to", "pick", "up", "the"]
    expected = [1] + policy.tokenizer.convert_tokens_to_ids([*words, "red", "cube", "?", "Out", ":"])
    assert ids == [*expected, EMPTY_TOKEN_ID]


def test_greedy_actions_are_the_models_argmax(standin_dir: Path) -> None:
    """Each step's token is the argmax of the model's own logits over the action ids, decoded by
    hand (reversed centres, q01/q99 where masked)."""
    policy = load(standin_dir)
    obs = observation(["pick up the red cube"])
    step = policy.sample(obs, deterministic=True, log_prob_level="token")
    ids = torch.tensor([policy.prompt_ids(obs["instruction"])[0]])  # type: ignore[arg-type]
    pixels = policy.pixel_values(obs)
    tokens = []
    with torch.no_grad():
        for _ in range(7):
            out = policy.model(input_ids=ids, attention_mask=torch.ones_like(ids), pixel_values=pixels)
            token = FIRST_ACTION_ID + int(out.logits[0, -1, FIRST_ACTION_ID:32000].argmax())
            tokens.append(token)
            ids = torch.cat([ids, torch.tensor([[token]])], dim=1)
    assert step.sample_info["action_tokens"][0, 0].tolist() == tokens
    centres = [-1 + (2 * min(max(32000 - t - 1, 0), 254) + 1) / 255 for t in tokens]
    q01 = [-0.02, -0.04, -0.03, -0.1, -0.1, -0.2, 0.0]
    q99 = [0.03, 0.04, 0.05, 0.1, 0.1, 0.2, 1.0]
    expected = [0.5 * (a + 1) * (hi - lo) + lo for a, lo, hi in zip(centres[:6], q01, q99, strict=False)]
    expected.append(centres[6])  # the gripper is not masked: the centre itself
    assert step.actions[0, 0].tolist() == pytest.approx(expected, abs=1e-6)


def test_log_probs_match_a_direct_computation(standin_dir: Path) -> None:
    policy = load(standin_dir)
    obs = observation(["pick up the red cube", "open drawer"], seed=1)
    torch.manual_seed(0)
    step = policy.sample(obs, temperature=1.5, log_prob_level="token")
    tokens = step.sample_info["action_tokens"][:, 0]
    for row in range(2):
        ids = torch.tensor([policy.prompt_ids([obs["instruction"][row]])[0] + tokens[row, :-1].tolist()])  # type: ignore[index]
        pixels = policy.pixel_values({"instruction": [""], "rgb_front": obs["rgb_front"][row : row + 1]})  # type: ignore[index]
        with torch.no_grad():
            logits = policy.model(
                input_ids=ids, attention_mask=torch.ones_like(ids), pixel_values=pixels
            ).logits
        action_logits = logits[0, -7:, FIRST_ACTION_ID:32000] / 1.5
        expected = torch.log_softmax(action_logits, -1).gather(-1, (tokens[row] - FIRST_ACTION_ID)[:, None])
        assert step.log_prob[row, 0].tolist() == pytest.approx(expected[:, 0].tolist(), abs=1e-5)


def test_evaluate_equals_sample_and_has_gradients(standin_dir: Path) -> None:
    policy = load(standin_dir)
    obs = observation(["pick up the red cube", "push blue block", "open drawer"], seed=2)
    torch.manual_seed(1)
    step = policy.sample(obs, with_value=True)
    evaluation = policy.evaluate(obs, step.sample_info, with_value=True)
    assert evaluation.log_prob.detach().tolist() == pytest.approx(step.log_prob.tolist(), abs=1e-4)
    assert evaluation.value.detach().tolist() == pytest.approx(step.value.tolist(), abs=1e-5)  # type: ignore[union-attr]
    (evaluation.log_prob.sum() + evaluation.value.sum()).backward()  # type: ignore[union-attr]
    head = policy.model.language_model.get_output_embeddings().weight
    assert head.grad is not None and float(head.grad[FIRST_ACTION_ID:32000].abs().sum()) > 0
    assert float(head.grad[:FIRST_ACTION_ID].abs().sum()) == 0.0  # other ids are outside the distribution


def test_bfloat16_model_float32_log_probs(standin_dir: Path, tmp_path: Path) -> None:
    policy = load(standin_dir)
    policy.cast_model(torch.bfloat16)
    policy.save_pretrained(tmp_path / "bf16")  # weights saved in bfloat16 (as OpenVLA publishes them)
    reloaded = OpenVLAPolicy.from_pretrained(tmp_path / "bf16", trust_remote_code=True)
    assert next(reloaded.model.parameters()).dtype == torch.float32  # loaded in float32 unless asked
    obs = observation(["pick up the red cube"], seed=5)
    torch.manual_seed(2)
    step = policy.sample(obs, with_value=True)
    evaluation = policy.evaluate(obs, step.sample_info, with_value=True)
    assert evaluation.log_prob.dtype == torch.float32 and evaluation.value.dtype == torch.float32  # type: ignore[union-attr]
    assert evaluation.log_prob.detach().tolist() == pytest.approx(step.log_prob.tolist(), abs=1e-3)


def test_rows_of_different_lengths_act_as_alone(standin_dir: Path) -> None:
    policy = load(standin_dir)
    obs = observation(["pick up the red cube", "lift"], seed=3)
    both = policy.sample(obs, deterministic=True)
    for row in range(2):
        alone = policy.sample(
            {"instruction": [obs["instruction"][row]], "rgb_front": obs["rgb_front"][row : row + 1]},  # type: ignore[index]
            deterministic=True,
        )
        assert torch.equal(alone.sample_info["action_tokens"][0], both.sample_info["action_tokens"][row])


def test_env_checks_and_action_map(standin_dir: Path) -> None:
    policy = OpenVLAPolicy.from_pretrained(standin_dir, unnorm_key="bridge_orig", trust_remote_code=True)
    env = EnvInterface(action_dim=4, vector_dims={"proprio": 24}, cameras=["front"])
    with pytest.raises(ConfigError, match=r"policy.action_map.*7 dimensions.*4"):
        policy.check_env(env)
    policy.set_env_maps(EnvMaps(action_map=DimensionMap(index=[0, 1, 2, 6])))
    with pytest.raises(ConfigError, match=r"policy.camera_map.*\['primary'\]"):
        policy.check_env(env)
    policy.set_env_maps(EnvMaps(camera_map={"primary": "front"}))
    policy.check_env(env)
    step = policy.sample(observation(["lift"]), log_prob_level="token")
    assert step.actions.shape == (1, 1, 4)
    assert step.log_prob[0, 0, 3:6].tolist() == [0.0, 0.0, 0.0]  # dimensions the env does not take
    assert torch.equal(
        step.actions[0, 0],
        policy.codec.bins_to_actions(step.sample_info["action_tokens"][0, 0] - FIRST_ACTION_ID)[[0, 1, 2, 6]],
    )


def test_save_and_load_round_trip(standin_dir: Path, tmp_path: Path) -> None:
    policy = load(standin_dir, key="libero_spatial")
    with torch.no_grad():
        policy.value_head[0].bias.fill_(0.3)
        policy.model.language_model.get_output_embeddings().weight[FIRST_ACTION_ID:32000] *= 2.0
    obs = observation(["push blue block"], seed=4)
    before = policy.sample(obs, deterministic=True, with_value=True)
    policy.save_pretrained(tmp_path / "saved")
    again = OpenVLAPolicy.from_pretrained(tmp_path / "saved", trust_remote_code=True)  # key and maps saved
    assert again.unnorm_key == "libero_spatial"
    after = again.sample(obs, deterministic=True, with_value=True)
    assert torch.equal(after.actions, before.actions)
    assert after.value.tolist() == pytest.approx(before.value.tolist(), abs=1e-6)  # type: ignore[union-attr]


def test_registry_loads_and_names_the_keys(standin_dir: Path, tmp_path: Path) -> None:
    policy = load_chunk_policy("openvla", standin_dir, unnorm_key="bridge_orig", trust_remote_code=True)
    assert isinstance(policy, OpenVLAPolicy)
    with pytest.raises(ConfigError, match=r"policy.name.*OpenVLA folder.*policy.name=openvla"):
        load_chunk_policy("token_vla", standin_dir)
    with pytest.raises(ConfigError, match=r"policy.unnorm_key.*'token_vla' takes no unnorm_key"):
        load_chunk_policy("token_vla", tmp_path, unnorm_key="bridge_orig")


def test_code_that_does_not_run_here_is_a_config_error(standin_dir: Path, tmp_path: Path) -> None:
    broken = Path(shutil.copytree(standin_dir, tmp_path / "broken"))
    code = broken / "modeling_prismatic.py"
    code.write_text("import a_package_this_environment_lacks\n" + code.read_text())
    with pytest.raises(ConfigError, match=r"modelling code of .* does not run in this environment"):
        OpenVLAPolicy.from_pretrained(broken, unnorm_key="bridge_orig", trust_remote_code=True)


def test_sft_loss_is_the_cross_entropy_of_openvlas_tokens(standin_dir: Path) -> None:
    """Demonstrating the greedy action: the loss is the mean -log p of its 7 tokens (OpenVLA's
    tokenisation of the decoded bin centres gives back the same tokens)."""
    policy = load(standin_dir)
    obs = observation(["pick up the red cube", "open drawer"], seed=6)
    step = policy.sample(obs, deterministic=True, log_prob_level="token")
    bins = step.sample_info["action_tokens"][:, 0] - FIRST_ACTION_ID
    assert torch.equal(policy.codec.actions_to_bins(policy.codec.bins_to_actions(bins)), bins)
    output = policy.sft_loss(obs, step.actions, torch.ones(2, 1, dtype=torch.bool))
    assert float(output.loss.detach()) == pytest.approx(float(-step.log_prob.mean()), abs=1e-5)
    only_first = policy.sft_loss(obs, step.actions, torch.tensor([[True], [False]]))
    assert float(only_first.loss.detach()) == pytest.approx(float(-step.log_prob[0].mean()), abs=1e-5)
