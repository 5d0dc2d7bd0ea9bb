"""Reading an OpenVLA folder: what is recognised and each ConfigError (no model is run here)."""

import json
import shutil
from pathlib import Path

import pytest

from vla_rl.config.structured import ConfigError
from vla_rl.policies.openvla_folder import (
    action_stats,
    is_openvla_folder,
    read_openvla_folder,
    resolve_unnorm_key,
)


def config_only(tmp_path: Path, **changes: object) -> Path:
    """A folder with an OpenVLA config.json and an (empty) modelling file, ``changes`` applied."""
    config = {
        "model_type": "openvla",
        "auto_map": {"AutoModelForVision2Seq": "modeling_prismatic.OpenVLAForActionPrediction"},
        "norm_stats": {"a": {"action": {"q01": [0.0, -1.0], "q99": [1.0, 1.0]}}},
        "text_config": {"vocab_size": 32064},
        "pad_to_multiple_of": 64,
    }
    config.update(changes)
    config = {key: value for key, value in config.items() if value is not None}
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "modeling_prismatic.py").write_text("")
    return tmp_path


def test_recognised_and_read(tmp_path: Path) -> None:
    folder = read_openvla_folder(config_only(tmp_path))
    assert is_openvla_folder(tmp_path)
    assert folder.model_class_ref == "modeling_prismatic.OpenVLAForActionPrediction"
    assert folder.token_vocab_size == 32000  # 32064 - 64
    assert folder.n_action_bins == 256
    stats = action_stats(folder, resolve_unnorm_key(folder, None))
    assert stats.mask.tolist() == [True, True]  # no mask given: every dimension normalised


def test_other_folders_are_not_openvla(tmp_path: Path) -> None:
    assert not is_openvla_folder(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"type": "pi0"}))
    assert not is_openvla_folder(tmp_path)
    with pytest.raises(ConfigError, match="policy.init_from.*not an OpenVLA folder"):
        read_openvla_folder(tmp_path)


def test_no_modelling_code(tmp_path: Path) -> None:
    config_only(tmp_path)
    (tmp_path / "modeling_prismatic.py").unlink()
    with pytest.raises(ConfigError, match="has no modelling code.*modeling_prismatic.py"):
        read_openvla_folder(tmp_path)


def test_no_auto_map(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no auto_map entry for the model"):
        read_openvla_folder(config_only(tmp_path, auto_map={"AutoConfig": "configuration_prismatic.X"}))


def test_code_from_another_repository_is_refused(tmp_path: Path) -> None:
    remote = {"AutoModelForVision2Seq": "someone/repo--modeling_prismatic.OpenVLAForActionPrediction"}
    with pytest.raises(ConfigError, match="another repository"):
        read_openvla_folder(config_only(tmp_path, auto_map=remote))


def test_no_norm_stats(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no norm_stats"):
        read_openvla_folder(config_only(tmp_path, norm_stats=None))


def test_oft_heads_are_named_and_refused(tmp_path: Path) -> None:
    config_only(tmp_path)
    (tmp_path / "action_head--150000_checkpoint.pt").write_bytes(b"")
    with pytest.raises(ConfigError, match="OpenVLA-OFT.*action_head--150000_checkpoint.pt"):
        read_openvla_folder(tmp_path)


def test_oft_modelling_code_is_refused(tmp_path: Path) -> None:
    config_only(tmp_path)
    (tmp_path / "modeling_prismatic.py").write_text("from prismatic.vla.constants import NUM_ACTIONS_CHUNK\n")
    with pytest.raises(ConfigError, match="OpenVLA-OFT's modelling code.*not mapped"):
        read_openvla_folder(tmp_path)


def test_unnorm_key_choices(tmp_path: Path) -> None:
    stats = {"b": {"action": {"q01": [0.0], "q99": [1.0]}}, "a": {"action": {"q01": [0.0], "q99": [1.0]}}}
    folder = read_openvla_folder(config_only(tmp_path, norm_stats=stats))
    with pytest.raises(ConfigError, match=r"policy.unnorm_key.*2 datasets.*\['a', 'b'\]"):
        resolve_unnorm_key(folder, None)
    with pytest.raises(ConfigError, match=r"policy.unnorm_key.*'c' is not a dataset.*\['a', 'b'\]"):
        resolve_unnorm_key(folder, "c")
    assert resolve_unnorm_key(folder, "b") == "b"


def test_bad_action_statistics(tmp_path: Path) -> None:
    stats = {
        "no_q99": {"action": {"q01": [0.0]}},
        "widths": {"action": {"q01": [0.0, 0.0], "q99": [1.0]}},
        "upside_down": {"action": {"q01": [1.0], "q99": [0.0]}},
    }
    folder = read_openvla_folder(config_only(tmp_path, norm_stats=stats))
    with pytest.raises(ConfigError, match=r"no action \['q99'\]"):
        action_stats(folder, "no_q99")
    with pytest.raises(ConfigError, match="differ in width"):
        action_stats(folder, "widths")
    with pytest.raises(ConfigError, match="q99 < q01"):
        action_stats(folder, "upside_down")


def test_standin_folder_is_read(standin_dir: Path, tmp_path: Path) -> None:
    copy = Path(shutil.copytree(standin_dir, tmp_path / "copy"))
    folder = read_openvla_folder(copy)
    assert sorted(folder.norm_stats) == ["bridge_orig", "libero_spatial"]
    assert action_stats(folder, "bridge_orig").mask.tolist() == [True] * 6 + [False]
