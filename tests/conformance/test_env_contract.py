"""The ``BatchedEnv`` contract (``vla_rl.envs.base``), checked the same way for every backend.

Backends come from ``backend_cases.CASES``; each test resets the module's env first, so they run in
any order on one env per backend.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch
from backend_cases import EPISODE_STEPS, NUM_ENVS

from vla_rl.rollout.collector import RolloutCollector


def _actions(env, steps: int, seed: int = 0) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [(torch.rand(env.num_envs, env.action_dim, generator=gen) * 2 - 1) for _ in range(steps)]


def _rows_equal(obs_a: dict, obs_b: dict, row: int) -> bool:
    for key, value in obs_a.items():
        if key == "instruction":
            if value[row] != obs_b[key][row]:
                return False
        elif not torch.equal(value[row].cpu(), obs_b[key][row].cpu()):
            return False
    return True


def _assert_observation(env, obs: dict) -> None:
    assert set(obs) == set(env.observation_space.spaces), "observation keys differ from the space"
    for key, space in env.observation_space.spaces.items():
        value = obs[key]
        if key == "instruction":
            assert isinstance(value, list) and len(value) == env.num_envs
            assert all(isinstance(text, str) and text.strip() for text in value), "empty instruction"
            continue
        assert isinstance(value, torch.Tensor), key
        assert value.device.type == env.device.type, f"{key} on {value.device}, env on {env.device}"
        assert tuple(value.shape) == (env.num_envs, *space.shape), key
        assert value.dtype == torch.from_numpy(np.zeros(0, space.dtype)).dtype, key
        if key.startswith("rgb_"):
            assert value.dtype == torch.uint8 and value.shape[-1] == 3, key
        else:
            assert torch.isfinite(value).all(), f"{key} has non-finite values"


def test_spaces_shapes_dtypes_and_device(env, case):
    obs, _ = env.reset(seed=0)
    _assert_observation(env, obs)
    assert env.num_envs == NUM_ENVS and env.max_episode_steps == EPISODE_STEPS
    assert env.action_space.shape == (env.action_dim,)
    assert np.all(env.action_space.low == -1) and np.all(env.action_space.high == 1)
    result = env.step(_actions(env, 1)[0].to(env.device))
    _assert_observation(env, result.obs)
    for name, tensor in (
        ("reward", result.reward),
        ("terminated", result.terminated),
        ("truncated", result.truncated),
        ("success", result.info["success"]),
    ):
        assert tuple(tensor.shape) == (NUM_ENVS,), name
        assert tensor.device.type == env.device.type, name
    assert result.reward.dtype == torch.float32
    assert result.terminated.dtype == result.truncated.dtype == result.info["success"].dtype == torch.bool


def test_images_are_uint8_views_of_a_scene_the_right_way_up(env, case):
    obs, _ = env.reset(seed=1)
    for camera in case.cameras:
        images = obs[f"rgb_{camera}"]
        assert tuple(images.shape) == (NUM_ENVS, case.image_size, case.image_size, 3)
        assert images.dtype == torch.uint8
        assert images.float().std() > 1.0, f"camera {camera} renders a blank image"
        if case.upright is not None and camera == case.cameras[0]:
            assert all(case.upright(image.cpu().numpy()) for image in images), f"{camera} upside down"


def test_autoreset_reports_final_observation_and_episode_statistics(env, case):
    obs, _ = env.reset(seed=2)
    actions = _actions(env, 2 * EPISODE_STEPS, seed=2)
    returns = torch.zeros(NUM_ENVS)
    for t, action in enumerate(actions, start=1):
        result = env.step(action.to(env.device))
        returns += result.reward.cpu()
        done = result.done.cpu()
        final = result.info["final_obs"]
        _assert_observation(env, final)
        if t % EPISODE_STEPS:
            assert not done.any(), f"episode ended early at step {t}"
            assert _rows_equal(final, result.obs, 0), "final_obs must equal obs where nothing ended"
            continue
        assert done.all() and result.truncated.cpu().all(), "the time limit must truncate every world"
        episode = result.info["episode"]
        assert torch.equal(episode["length"].cpu().long(), torch.full((NUM_ENVS,), EPISODE_STEPS))
        torch.testing.assert_close(episode["return"].cpu().float(), returns, rtol=1e-4, atol=1e-4)
        assert episode["success"].dtype == torch.bool and episode["success_once"].dtype == torch.bool
        assert not torch.equal(final["proprio"].cpu(), result.obs["proprio"].cpu()), (
            "after autoreset obs must be the new episode's first, final_obs the old one's last"
        )
        returns.zero_()


def test_seeded_resets_and_steps_are_reproducible(env, case):
    actions = _actions(env, 3, seed=3)

    def trajectory(seed: int) -> list[dict]:
        obs, _ = env.reset(seed=seed)
        out = [obs]
        for action in actions:
            out.append(env.step(action.to(env.device)).obs)
        return out

    first, second = trajectory(7), trajectory(7)
    for obs_a, obs_b in zip(first, second, strict=True):
        assert all(_rows_equal(obs_a, obs_b, row) for row in range(NUM_ENVS)), "same seed, other trajectory"
    if case.randomized:
        other = trajectory(8)
        assert not _rows_equal(first[0], other[0], 0), "another seed must give another initial state"


def test_shared_seeds_give_shared_initial_states_and_partial_reset_touches_only_its_worlds(env, case):
    shared, _ = env.reset(seed=[env.world_seed(11, 0)] * NUM_ENVS)
    for row in range(1, NUM_ENVS):
        assert _rows_equal(shared, _shift(shared, row), 0), "worlds given one seed must start alike"
    before, _ = env.reset(seed=5)
    after, _ = env.reset(seed=[env.world_seed(11, 0)], env_ids=torch.tensor([1]))
    assert _rows_equal(before, after, 0) and _rows_equal(before, after, 2), "other worlds changed"
    assert _rows_equal(after, shared, 1), "a partial reset must give the seeded initial state"
    if case.instruction_varies:
        texts = {env.reset(seed=seed)[0]["instruction"][0] for seed in range(12)}
        assert len(texts) > 1, "instructions are expected to change with the episode"
        again, _ = env.reset(seed=[env.world_seed(11, 0)], env_ids=torch.tensor([0]))
        assert again["instruction"][0] == shared["instruction"][0], "instruction not re-read after reset"


def _shift(obs: dict, row: int) -> dict:
    """``obs`` with row ``row`` moved to row 0 (to compare two worlds with ``_rows_equal``)."""
    return {
        k: ([v[row]] + v[1:] if isinstance(v, list) else torch.roll(v, -row, dims=0)) for k, v in obs.items()
    }


def test_success_flags_are_per_world_booleans(env, case):
    env.reset(seed=4)
    for action in _actions(env, EPISODE_STEPS, seed=4):
        result = env.step(action.to(env.device))
        success = result.info["success"]
        assert success.dtype == torch.bool and tuple(success.shape) == (NUM_ENVS,)
    episode = result.info["episode"]
    assert bool((episode["success_once"].cpu() | ~episode["success"].cpu()).all()), (
        "success at the end implies success at some step"
    )


def test_action_chunk_stops_at_episode_end_inside_the_chunk(env, case):
    """A chunk longer than what is left of the episode: the world runs until its time limit, then
    holds still; the executed mask says which actions acted."""
    env.reset(seed=6)
    env.step(torch.zeros(NUM_ENVS, env.action_dim, device=env.device))
    chunk_len = EPISODE_STEPS + 1
    collector = RolloutCollector(
        env, SimpleNamespace(chunk_len=chunk_len), gamma=1.0, execute_steps=chunk_len
    )
    actions = torch.stack(_actions(env, chunk_len, seed=6), dim=1)
    outcome = collector.execute(actions, active=torch.ones(NUM_ENVS, dtype=torch.bool))
    left = EPISODE_STEPS - 1
    expected = torch.tensor([True] * left + [False] * (chunk_len - left)).expand(NUM_ENVS, -1)
    assert torch.equal(outcome.executed, expected)
    assert outcome.ended.all()
    assert set(outcome.truncated_obs) == set(range(NUM_ENVS))
