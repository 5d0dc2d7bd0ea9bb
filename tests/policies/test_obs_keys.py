"""Default observation keys of the Gaussian policies and the errors for keys an env lacks."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from vla_rl.policies import PolicyConfig, build_policy
from vla_rl.policies.obs_keys import default_actor_obs_keys, obs_key_errors, with_env_obs_keys


def _box(*shape: int) -> gym.spaces.Box:
    return gym.spaces.Box(-np.inf, np.inf, shape, np.float32)


def _image() -> gym.spaces.Box:
    return gym.spaces.Box(0, 255, (16, 16, 3), np.uint8)


SIM_SPACE = gym.spaces.Dict(
    {
        "instruction": gym.spaces.Text(64),
        "objects": _box(3),
        "privileged": _box(6),
        "proprio": _box(24),
        "rgb_front": _image(),
        "rgb_wrist": _image(),
    }
)
"""What the built-in MuJoCo env provides with two cameras (gymnasium sorts the keys)."""
GOAL_SPACE = gym.spaces.Dict({"observation": _box(10), "desired_goal": _box(3), "achieved_goal": _box(3)})
"""A foreign Dict observation (Gymnasium-Robotics style): no contract state key."""
ACTIONS = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)


def test_mlp_reads_the_contract_state_in_its_order_and_skips_derived_and_image_keys() -> None:
    assert default_actor_obs_keys("mlp", SIM_SPACE) == ["proprio", "privileged"]


def test_mlp_reads_every_vector_key_of_an_env_without_the_contract_state() -> None:
    # gymnasium sorts the keys of a Dict space: achieved_goal, desired_goal, observation.
    assert default_actor_obs_keys("mlp", GOAL_SPACE) == ["achieved_goal", "desired_goal", "observation"]
    assert default_actor_obs_keys("mlp", gym.spaces.Dict({"proprio": _box(11)})) == ["proprio"]


def test_cnn_reads_images_and_state_but_not_privileged() -> None:
    assert default_actor_obs_keys("cnn", SIM_SPACE) == ["rgb_front", "rgb_wrist", "proprio"]
    pixels_only = gym.spaces.Dict({"rgb_pixels": _image()})
    assert default_actor_obs_keys("cnn", pixels_only) == ["rgb_pixels"]


def test_explicit_keys_are_kept_and_none_is_filled_in() -> None:
    explicit = PolicyConfig(actor_obs_keys=["proprio"])
    assert with_env_obs_keys(explicit, SIM_SPACE) is explicit
    filled = with_env_obs_keys(PolicyConfig(), GOAL_SPACE)
    assert filled.actor_obs_keys == ["achieved_goal", "desired_goal", "observation"]


def test_errors_name_the_config_field_and_the_missing_key() -> None:
    cfg = PolicyConfig(critic_obs_keys=["proprio", "privileged"], aux_target_key="objects")
    errors = obs_key_errors(cfg, gym.spaces.Dict({"proprio": _box(11)}))
    assert [key for key, _ in errors] == ["critic_obs_keys", "aux_target_key"]
    assert "'privileged'" in errors[0][1] and "['proprio']" in errors[0][1]
    assert "'objects'" in errors[1][1]
    assert (
        "null reads the actor's keys" in errors[0][1] and "null turns the auxiliary loss off" in errors[1][1]
    )
    assert obs_key_errors(PolicyConfig(), SIM_SPACE) == []


def test_an_image_only_env_asks_for_the_cnn() -> None:
    errors = obs_key_errors(PolicyConfig(), gym.spaces.Dict({"rgb_pixels": _image()}))
    assert len(errors) == 1 and errors[0][0] == "actor_obs_keys" and "policy=cnn" in errors[0][1]


def test_policies_built_with_default_keys_read_the_env_keys() -> None:
    mlp = build_policy(PolicyConfig(hidden_sizes=[8]), SIM_SPACE, ACTIONS)
    assert mlp.actor_keys == ["proprio", "privileged"]
    cnn = build_policy(
        PolicyConfig(name="cnn", hidden_sizes=[8], cnn_channels=[4], cnn_feature_dim=8), SIM_SPACE, ACTIONS
    )
    assert cnn.actor_image_keys == ["rgb_front", "rgb_wrist"]
    assert cnn.actor_vector_keys == ["proprio"]


def test_a_registered_policy_of_another_name_reads_the_env_state() -> None:
    assert default_actor_obs_keys("my_policy", SIM_SPACE) == ["proprio", "privileged"]


def test_on_the_builtin_simulator_the_defaults_are_the_committed_configs_keys() -> None:
    from vla_rl.envs import EnvConfig, make_env

    env = make_env(EnvConfig(num_envs=1, num_threads=1, cameras=["front", "wrist"], image_size=16))
    try:
        space = env.observation_space
    finally:
        env.close()
    # configs/policy/mlp.yaml read [proprio, privileged] before its keys became null, and
    # configs/policy/cnn.yaml's actor reads [rgb_front, rgb_wrist, proprio].
    assert default_actor_obs_keys("mlp", space) == ["proprio", "privileged"]
    assert default_actor_obs_keys("cnn", space) == ["rgb_front", "rgb_wrist", "proprio"]
