"""The isaaclab backend's registration, config checks and env-config patching (no Isaac Sim needed)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
from vla_rl.sims.isaaclab import backend
from vla_rl.sims.isaaclab.launch import configure_env_cfg
from vla_rl.sims.isaaclab.settings import settings_from_config

from vla_rl.envs.config import EnvConfig
from vla_rl.envs.extras import MissingExtraError
from vla_rl.envs.registry import make_env, registered_backends


def config(**overrides) -> EnvConfig:
    fields = {"backend": "isaaclab", "task": "Isaac-Lift-Cube-Franka-v0", "num_envs": 2, **overrides}
    return EnvConfig(**fields)


@pytest.fixture
def no_runtime(monkeypatch):
    """As on a machine without Isaac Lab: no module can be found."""
    monkeypatch.setattr(backend.importlib.util, "find_spec", lambda name: None)


def test_registered_and_unavailable_reason_says_what_is_needed(no_runtime):
    assert "isaaclab" in registered_backends()
    reason = backend.unavailable_reason()
    for needed in ("isaaclab", "Isaac Sim", "Python 3.12", "NVIDIA GPU", "not a pip extra"):
        assert needed in reason
    assert "isaaclab, isaaclab_tasks, isaacsim cannot be imported" in reason


def test_missing_runtime_raises_after_the_config_is_checked(no_runtime):
    with pytest.raises(MissingExtraError, match="Isaac Lab 3.x"):
        make_env(config())
    with pytest.raises(ValueError, match="num_envs"):
        make_env(config(num_envs=0))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"num_envs": 0}, "num_envs"),
        ({"options": {"bogus": 1}}, "bogus"),
        ({"task": "Isaac-Humanoid-v0"}, "instruction"),
        ({"options": {"seeding": "sometimes"}}, "seeding"),
        ({"options": {"action_bound": 0.0}}, "action_bound"),
        ({"options": {"success_terms": "success"}}, "success_terms"),
        ({"cameras": ["front", "front"]}, "cameras"),
        ({"cameras": ["front"], "image_size": 0}, "image_size"),
        ({"device": "mps"}, "device"),
        ({"device": "not-a-device"}, "device"),
    ],
)
def test_bad_config_is_a_value_error_naming_the_key(overrides, message):
    with pytest.raises(ValueError, match=message):
        settings_from_config(config(**overrides))


def test_task_table_and_instruction_override():
    lift = settings_from_config(config())
    assert lift.instruction == "lift the cube to the target position"
    assert lift.spec.success_terms == ("object_reached_goal",) and lift.spec.add_lift_success_term
    assert settings_from_config(config(task="Isaac-Franka-Cabinet-Direct-v0")).spec.success_terms == (
        "terminated",
    )
    custom = settings_from_config(config(task="Isaac-Humanoid-v0", options={"instruction": "walk forward"}))
    assert custom.instruction == "walk forward" and custom.spec.success_terms == ()
    assert settings_from_config(config(device="cuda")).sim_device == "cuda:0"


def lift_like_env_cfg(**extra) -> SimpleNamespace:
    """The fields of an Isaac Lab ManagerBasedRLEnvCfg that the backend sets (Lift: 0.01 s x 2)."""
    scene = SimpleNamespace(
        robot=SimpleNamespace(), table_cam=SimpleNamespace(data_types=["rgb"], width=84, height=84)
    )
    return SimpleNamespace(
        sim=SimpleNamespace(dt=0.01), decimation=2, episode_length_s=5.0, seed=None, scene=scene, **extra
    )


def test_configure_env_cfg_sets_episode_length_final_obs_and_cameras():
    env_cfg = lift_like_env_cfg(compute_final_obs=False, num_rerenders_on_reset=0)
    settings = settings_from_config(config(max_episode_steps=4, cameras=["table_cam"], image_size=32))
    configure_env_cfg(env_cfg, settings)
    # Isaac Lab's limit: ceil(episode_length_s / (dt * decimation)) = ceil(0.07 / 0.02) = 4 steps
    assert env_cfg.episode_length_s == pytest.approx(0.07)
    assert math.ceil(env_cfg.episode_length_s / (0.01 * 2)) == 4
    assert env_cfg.compute_final_obs is True and env_cfg.seed == 0
    assert (env_cfg.scene.table_cam.width, env_cfg.scene.table_cam.height) == (32, 32)
    assert env_cfg.num_rerenders_on_reset == 1


def test_configure_env_cfg_keeps_task_defaults_and_rejects_unknown_cameras():
    env_cfg = lift_like_env_cfg()
    configure_env_cfg(env_cfg, settings_from_config(config()))
    assert env_cfg.episode_length_s == 5.0 and not hasattr(env_cfg, "compute_final_obs")
    with pytest.raises(ValueError, match="table_cam"):
        configure_env_cfg(lift_like_env_cfg(), settings_from_config(config(cameras=["wrist"])))
