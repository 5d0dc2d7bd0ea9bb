"""The maniskill backend's config checks, task table, availability check and missing-extra error.

None of these import ManiSkill, so they run on any machine.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from vla_rl.sims.maniskill import backend
from vla_rl.sims.maniskill.tasks import TASKS, resolve_settings

from vla_rl.envs.config import EnvConfig
from vla_rl.envs.extras import MissingExtraError
from vla_rl.envs.registry import backend_unavailable_reason, make_env


def _cfg(**overrides) -> EnvConfig:
    return EnvConfig(**{"backend": "maniskill", "task": "PickCube-v1", "num_envs": 8, **overrides})


def test_state_config_maps_to_state_dict_and_the_panda_controller():
    settings = resolve_settings(_cfg())
    assert settings.make_kwargs == {
        "num_envs": 8,
        "obs_mode": "state_dict",
        "control_mode": "pd_ee_delta_pos",
        "sim_backend": "gpu",
        "enable_shadow": False,
    }
    assert settings.instruction == "pick up the red cube and move it to the green goal"
    assert settings.privileged and not settings.ignore_terminations


def test_cameras_select_rgb_with_state_and_ask_for_square_images():
    settings = resolve_settings(_cfg(cameras=["base_camera"], image_size=96, control_mode="joint_delta"))
    assert settings.obs_mode == "rgb+state_dict" and settings.privileged
    assert settings.make_kwargs["sensor_configs"] == {"width": 96, "height": 96}
    assert settings.make_kwargs["control_mode"] == "pd_joint_delta_pos"


def test_every_table_task_without_language_has_its_own_instruction():
    fixed = {task: spec.instruction for task, spec in TASKS.items() if spec.instruction is not None}
    assert set(fixed) == {"PickCube-v1", "PushCube-v1", "StackCube-v1"}
    assert len(set(fixed.values())) == 3


def test_bridge_twin_reads_language_from_the_env_and_needs_a_camera():
    cfg = _cfg(task="PutCarrotOnPlateInScene-v1", control_mode="ee_delta_pose", cameras=["3rd_view_camera"])
    settings = resolve_settings(cfg)
    assert settings.instruction is None and not settings.privileged
    assert settings.obs_mode == "rgb+segmentation"
    assert settings.control_mode == "arm_pd_ee_target_delta_pose_align2_gripper_pd_joint_pos"
    assert "sensor_configs" not in settings.make_kwargs  # calibrated camera: rendered, then resized
    with pytest.raises(ValueError, match="renders images only"):
        resolve_settings(_cfg(task="PutCarrotOnPlateInScene-v1", control_mode="ee_delta_pose"))
    with pytest.raises(ValueError, match="env.control_mode"):
        resolve_settings(_cfg(task="PutCarrotOnPlateInScene-v1", cameras=["3rd_view_camera"]))


def test_maniskill_controller_names_and_unlisted_tasks_pass_through():
    assert resolve_settings(_cfg(control_mode="pd_ee_delta_pose")).control_mode == "pd_ee_delta_pose"
    settings = resolve_settings(
        _cfg(
            task="PegInsertionSide-v1", control_mode="pd_joint_pos", options={"instruction": "insert the peg"}
        )
    )
    assert settings.control_mode == "pd_joint_pos" and settings.instruction == "insert the peg"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"task": "PegInsertionSide-v1"}, "no instruction"),
        ({"control_mode": "pd_joint_pos"}, "env.control_mode"),
        ({"split": "ood_visual"}, "env.split"),
        ({"num_envs": 0}, "env.num_envs"),
        ({"cameras": ["a", "a"]}, "twice"),
        ({"options": {"num_world": 3}}, "unknown keys"),
        ({"options": {"ignore_terminations": "yes"}}, "ignore_terminations"),
        ({"options": {"instruction": " "}}, "instruction"),
        ({"options": {"make_kwargs": {"obs_mode": "rgb"}}}, "make_kwargs"),
        ({"options": {"make_kwargs": {"max_episode_steps": 9}}}, "make_kwargs"),
    ],
)
def test_bad_configs_raise_value_errors(overrides, message):
    with pytest.raises(ValueError, match=message):
        resolve_settings(_cfg(**overrides))


def test_options_reach_gym_make():
    options = {"reward_mode": "sparse", "make_kwargs": {"robot_uids": "panda_wristcam"}}
    kwargs = resolve_settings(_cfg(options=options, shadows=True)).make_kwargs
    assert kwargs["reward_mode"] == "sparse" and kwargs["robot_uids"] == "panda_wristcam"
    assert kwargs["enable_shadow"] is True


def test_bad_config_is_reported_before_the_missing_extra(monkeypatch):
    for module in ("mani_skill", "mani_skill.envs"):
        monkeypatch.setitem(sys.modules, module, None)  # makes `import mani_skill` fail
    with pytest.raises(ValueError, match="env.split"):
        make_env(_cfg(split="ood_all"))
    with pytest.raises(MissingExtraError, match=r'pip install -e "\.\[maniskill\]"'):
        make_env(_cfg())


def _icd_dir(tmp_path: Path, *names: str) -> Path:
    directory = tmp_path / "icd.d"
    directory.mkdir()
    for name in names:
        (directory / name).write_text("{}")
    return directory


def test_nvidia_vulkan_driver_is_told_apart_from_lavapipe(tmp_path, monkeypatch):
    monkeypatch.delenv("VK_DRIVER_FILES", raising=False)
    monkeypatch.delenv("VK_ICD_FILENAMES", raising=False)
    lavapipe = _icd_dir(tmp_path, "lvp_icd.x86_64.json")
    monkeypatch.setattr(backend, "VULKAN_ICD_DIRS", (tmp_path / "missing", lavapipe))
    assert not backend._has_nvidia_vulkan_driver()
    (lavapipe / "nvidia_icd.json").write_text("{}")
    assert backend._has_nvidia_vulkan_driver()
    monkeypatch.setenv("VK_ICD_FILENAMES", "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json")
    assert not backend._has_nvidia_vulkan_driver(), "an explicit driver list wins over the directories"


def test_unavailable_reason_names_each_missing_piece(monkeypatch):
    monkeypatch.setattr(
        backend, "missing_modules_reason", lambda modules, extra: f"needs {modules[0]} [{extra}]"
    )
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(backend, "_has_nvidia_vulkan_driver", lambda: False)
    reason = backend.unavailable_reason()
    assert reason.split("; ")[0] == "needs mani_skill [maniskill]"
    assert "CUDA" in reason and "Vulkan" in reason and "lavapipe" in reason
    monkeypatch.setattr(backend, "missing_modules_reason", lambda modules, extra: None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(backend, "_has_nvidia_vulkan_driver", lambda: True)
    assert backend.unavailable_reason() is None


def test_registry_reports_the_backends_reason():
    """On machines without the extra or an NVIDIA GPU (like CI), the conformance case and the
    real-simulator test skip with exactly this reason."""
    assert backend_unavailable_reason("maniskill") == backend.unavailable_reason()
    if not torch.cuda.is_available():
        assert "needs an NVIDIA GPU with CUDA" in backend_unavailable_reason("maniskill")
