"""Every misconfiguration of a LeRobot pi0 / pi0.5 import that issue 84 lists, each a ``ConfigError``
naming what is wrong, in one place: a folder of an unknown kind, missing normalisation statistics, an
action or state width that does not match the env without ``policy.action_map`` / ``state_map``, a
map entry out of range, cameras the env lacks without ``policy.camera_map``, and LoRA targets that
match no module. The checks against the env run on ``EnvInterface``s here; the trainer-level test
(``tests/training/chunk_rl/test_lerobot_import_run.py``) shows the same error stopping ``vla-rl
train`` before its first update."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from vla_rl.config import ConfigError
from vla_rl.policies.env_maps import EnvInterface, EnvMaps
from vla_rl.policies.flow.pi0 import Pi0Policy
from vla_rl.policies.flow.pi05 import Pi05Policy
from vla_rl.policies.lora import LoraSettings
from vla_rl.policies.registry import load_chunk_policy

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "lerobot"
FAMILIES = {"pi0": Pi0Policy, "pi05": Pi05Policy}
REACH = EnvInterface(action_dim=4, vector_dims={"proprio": 24}, cameras=["top", "wrist"])
"""MuJoCo ``reach`` with ``env.cameras=[top, wrist]``: 4 ``ee_delta_pos`` actions, a 24-wide proprio."""
FITTING_MAPS = EnvMaps(
    action_map={"index": [0, 1, 2, 6]},
    state_map={"index": [15, 16, 17, None, None, None, 14, 14]},
    camera_map={"front": "top"},
)
"""Maps with which both fixtures (8-dim state, 7-dim action, cameras front and wrist) run on ``REACH``."""


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def policy_type(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def imported(policy_type: str, folder: Path | None = None) -> Pi0Policy:
    fixture = FIXTURES / policy_type
    return FAMILIES[policy_type].from_pretrained(
        str(folder or fixture / "policy"), tokenizer_dir=str(fixture / "tokenizer")
    )


@pytest.fixture(scope="module")
def policy(policy_type: str) -> Pi0Policy:
    return imported(policy_type)


def with_maps(policy: Pi0Policy, **maps: object) -> Pi0Policy:
    """``policy`` with exactly ``maps`` (the others cleared)."""
    assert policy.cfg.lerobot is not None
    policy.cfg.lerobot.maps = EnvMaps()
    policy.set_env_maps(EnvMaps(**maps))  # type: ignore[arg-type]
    return policy


def copied_folder(tmp_path: Path, policy_type: str) -> Path:
    return Path(shutil.copytree(FIXTURES / policy_type / "policy", tmp_path / "policy"))


# ----- the folder ---------------------------------------------------------------------------------------


def test_a_lerobot_folder_of_an_unknown_type_is_refused(tmp_path: Path, policy_type: str) -> None:
    folder = copied_folder(tmp_path, policy_type)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "type": "act"}))
    with pytest.raises(ConfigError, match=r"policy.init_from: .* LeRobot 'act' policy.*\['pi0', 'pi05'"):
        imported(policy_type, folder)


def test_a_folder_of_neither_kind_is_refused(tmp_path: Path) -> None:
    (tmp_path / "weights").mkdir()
    with pytest.raises(
        ConfigError,
        match=r"'policy.init_from': .* neither a LeRobot policy folder, an openpi export nor a 'pi0'",
    ):
        load_chunk_policy("pi0", tmp_path / "weights")


def test_a_lerobot_config_without_its_processors_is_named(tmp_path: Path, policy_type: str) -> None:
    """A folder with LeRobot's config.json but not its processor files (an older LeRobot's layout)."""
    folder = tmp_path / "old"
    folder.mkdir()
    shutil.copy(FIXTURES / policy_type / "policy" / "config.json", folder)
    with pytest.raises(
        ConfigError, match=f"LeRobot '{policy_type}' policy but it has no policy_preprocessor"
    ):
        load_chunk_policy(policy_type, folder)


def test_a_lerobot_folder_given_to_a_family_that_does_not_import_it(policy_type: str) -> None:
    with pytest.raises(
        ConfigError, match=f"'policy.name': .*'flow_mlp'.*policy.name={policy_type} imports it"
    ):
        load_chunk_policy("flow_mlp", FIXTURES / policy_type / "policy")


def test_missing_normalisation_statistics_are_refused(tmp_path: Path, policy_type: str) -> None:
    folder = copied_folder(tmp_path, policy_type)
    next(folder.glob("policy_preprocessor_step_*_normalizer_processor.safetensors")).unlink()
    with pytest.raises(ConfigError, match="policy.init_from: .* lacks the normalisation statistics"):
        imported(policy_type, folder)


def test_a_statistic_the_normalisation_mode_needs_is_named(tmp_path: Path, policy_type: str) -> None:
    from safetensors.torch import load_file, save_file

    folder = copied_folder(tmp_path, policy_type)
    stats_file = next(folder.glob("policy_preprocessor_step_*_normalizer_processor.safetensors"))
    mode, statistic = {"pi0": ("MEAN_STD", "std"), "pi05": ("QUANTILES", "q99")}[policy_type]
    stats = {k: v for k, v in load_file(str(stats_file)).items() if k != f"observation.state.{statistic}"}
    save_file(stats, str(stats_file))
    with pytest.raises(ConfigError, match=rf"'observation.state' with {mode} .*\['{statistic}'\]"):
        imported(policy_type, folder)


# ----- the env: widths and cameras ----------------------------------------------------------------------


def test_action_width_mismatch_without_action_map_names_both_widths(policy: Pi0Policy) -> None:
    with_maps(policy, state_map=FITTING_MAPS.state_map, camera_map=FITTING_MAPS.camera_map)
    with pytest.raises(ConfigError, match=r"'policy.action_map': .*actions have 7 dimensions, the env's 4"):
        policy.check_env(REACH)


def test_state_width_mismatch_without_state_map_names_both_widths(policy: Pi0Policy) -> None:
    with_maps(policy, action_map=FITTING_MAPS.action_map, camera_map=FITTING_MAPS.camera_map)
    with pytest.raises(
        ConfigError, match=r"'policy.state_map': .*state has 8 dimensions, the env's state 24"
    ):
        policy.check_env(REACH)


def test_cameras_the_env_lacks_without_camera_map_are_listed(policy: Pi0Policy) -> None:
    with_maps(policy, action_map=FITTING_MAPS.action_map, state_map=FITTING_MAPS.state_map)
    with pytest.raises(
        ConfigError,
        match=r"'policy.camera_map': .*cameras \['front'\] are not .* \(it has \['top', 'wrist'\]\)",
    ):
        policy.check_env(REACH)


def test_the_fitting_maps_pass(policy: Pi0Policy) -> None:
    with_maps(policy, **vars(FITTING_MAPS))
    policy.check_env(REACH)
    assert policy.action_dim == 4


# ----- the maps themselves ------------------------------------------------------------------------------


def test_an_action_map_entry_beyond_the_checkpoints_actions(policy: Pi0Policy) -> None:
    with pytest.raises(
        ConfigError, match=r"'policy.action_map.index': entry 3 is 7; the checkpoint's action has 7"
    ):
        with_maps(policy, action_map={"index": [0, 1, 2, 7]})


def test_an_action_map_of_the_wrong_length_for_the_env(policy: Pi0Policy) -> None:
    with_maps(policy, **{**vars(FITTING_MAPS), "action_map": {"index": [0, 1, 2]}})
    with pytest.raises(
        ConfigError, match=r"'policy.action_map.index': has 3 entries; the env's actions have 4"
    ):
        policy.check_env(REACH)


def test_a_state_map_entry_beyond_the_envs_state(policy: Pi0Policy) -> None:
    with_maps(policy, **{**vars(FITTING_MAPS), "state_map": {"index": [0, 1, 2, 3, 4, 5, 6, 24]}})
    with pytest.raises(ConfigError, match=r"'policy.state_map.index': entry 7 is 24; the env's state has 24"):
        policy.check_env(REACH)


def test_a_state_map_of_the_wrong_length_for_the_checkpoint(policy: Pi0Policy) -> None:
    with pytest.raises(
        ConfigError, match=r"'policy.state_map.index': has 3 entries; .* state dimension \(8\)"
    ):
        with_maps(policy, state_map={"index": [0, 1, 2]})


def test_a_camera_map_key_the_checkpoint_lacks(policy: Pi0Policy) -> None:
    with pytest.raises(
        ConfigError, match=r"'policy.camera_map': \['side'\] are not cameras of the checkpoint"
    ):
        with_maps(policy, camera_map={"side": "top"})


def test_a_camera_map_value_the_env_lacks(policy: Pi0Policy) -> None:
    with_maps(policy, **{**vars(FITTING_MAPS), "camera_map": {"observation.images.front": "side"}})
    with pytest.raises(
        ConfigError, match=r"'policy.camera_map': the cameras it maps to \(\{'front': 'side'\}\)"
    ):
        policy.check_env(REACH)


def test_a_camera_map_that_leaves_out_every_camera(policy: Pi0Policy) -> None:
    with_maps(policy, **{**vars(FITTING_MAPS), "camera_map": {"front": None, "wrist": None}})
    with pytest.raises(ConfigError, match="'policy.camera_map': leaves out every camera"):
        policy.check_env(REACH)


def test_maps_on_a_policy_not_imported_from_lerobot() -> None:
    from vla_rl.policies.registry import build_chunk_policy
    from vla_rl.training.chunk_rl.config import RLPolicyConfig
    from vla_rl.training.env_fit import apply_env_maps

    settings = RLPolicyConfig(name="flow_mlp", camera_map={"front": "top"})
    flow = build_chunk_policy("flow_mlp", chunk_len=2, action_dim=4, proprio_dim=3, hidden_sizes=[8])
    with pytest.raises(ConfigError, match="'policy.camera_map': flow_mlp policies take no maps"):
        apply_env_maps(flow, settings, "flow_mlp")
    pi0 = build_chunk_policy("pi0", chunk_len=2, action_dim=4, proprio_dim=3)
    with pytest.raises(
        ConfigError, match="'policy.camera_map': maps apply to a policy imported from a LeRobot"
    ):
        apply_env_maps(pi0, settings, "pi0")


# ----- LoRA ---------------------------------------------------------------------------------------------


def test_lora_targets_that_match_no_module_of_the_import(policy_type: str) -> None:
    policy = imported(policy_type)
    with pytest.raises(ConfigError, match=r"policy.lora.target_modules: \['qkv'\] match no module"):
        policy.add_lora(LoraSettings(target_modules=["q_proj", "qkv"]))
