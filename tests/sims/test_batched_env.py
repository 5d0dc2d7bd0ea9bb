import json

import numpy as np
import pytest
import torch
from vla_rl.robots.panda import PANDA
from vla_rl.sims.mujoco.batched_env import MujocoBatchedEnv
from vla_rl.sims.mujoco.observations import PROPRIO_FIELDS, split_fields

from vla_rl.envs.config import EnvConfig
from vla_rl.envs.registry import make_env


def _env(task="push", n=3, **kwargs) -> MujocoBatchedEnv:
    return MujocoBatchedEnv(EnvConfig(task=task, num_envs=n, num_threads=2, **kwargs))


def _random_actions(steps: int, n: int, dim: int, seed: int = 0) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.rand(n, dim, generator=gen) * 2 - 1 for _ in range(steps)]


def _assert_obs_equal(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        if key == "instruction":
            assert a[key] == b[key]
        else:
            assert torch.equal(a[key], b[key]), key


def test_backend_is_registered_and_spaces_match_observations():
    env = make_env(EnvConfig(backend="mujoco", task="lift", num_envs=2, cameras=["wrist"], image_size=32))
    obs, _ = env.reset(seed=0)
    assert isinstance(env, MujocoBatchedEnv)
    assert env.action_space.shape == (4,) and env.max_episode_steps == 80 and env.substeps == 10
    for key in ("proprio", "privileged", "rgb_wrist"):
        assert tuple(obs[key].shape) == (2, *env.observation_space[key].shape)
    assert obs["rgb_wrist"].dtype == torch.uint8 and obs["proprio"].dtype == torch.float32
    assert obs["instruction"] == ["pick up the cube"] * 2
    env.close()


def test_autoreset_returns_fresh_episode_and_final_obs_is_last_obs():
    env, twin = _env(max_episode_steps=3), _env(max_episode_steps=100)
    for e in (env, twin):
        e.reset(seed=5)
        e.reset(seed=[11], env_ids=torch.tensor([0]))  # world 0 starts its own stream
    actions = _random_actions(3, 3, 4)
    twin_return = twin.step(actions[0]).reward.clone()
    env.step(actions[0])
    # World 0 restarts one step later, so only worlds 1 and 2 hit the limit at step 3.
    env.reset(seed=[12], env_ids=torch.tensor([0]))
    twin.reset(seed=[12], env_ids=torch.tensor([0]))
    for a in actions[1:]:
        result, twin_result = env.step(a), twin.step(a)
        twin_return += twin_result.reward
    assert result.truncated.tolist() == [False, True, True]
    assert not result.terminated.any()
    final, last = result.info["final_obs"], twin_result.obs
    for key in ("proprio", "privileged"):
        assert torch.equal(final[key], last[key]), key  # final rows are the pre-reset observation
        assert torch.equal(result.obs[key][0], last[key][0])  # unfinished world unchanged
        assert not torch.equal(result.obs[key][1:], last[key][1:])
    home = torch.tensor(PANDA.home_arm_qpos, dtype=torch.float32)
    arm_qpos = split_fields(result.obs["proprio"], PROPRIO_FIELDS)["arm_qpos"]
    torch.testing.assert_close(arm_qpos[1:], home.expand(2, 7))  # a fresh episode starts at home
    episode = result.info["episode"]
    assert episode["length"][1:].tolist() == [3, 3]
    torch.testing.assert_close(episode["return"][1:], twin_return[1:])
    assert torch.equal(result.reward, twin_result.reward)
    assert env.episodes.length.tolist() == [2, 0, 0]
    env.close()
    twin.close()


def test_episode_return_sums_rewards():
    env = _env(task="reach", n=2, max_episode_steps=4)
    env.reset(seed=0)
    total = torch.zeros(2)
    for a in _random_actions(4, 2, 4):
        result = env.step(a)
        total += result.reward
    torch.testing.assert_close(result.info["episode"]["return"], total)
    env.close()


def test_same_seed_same_trajectory_different_seed_differs():
    envs = [_env(n=4, max_episode_steps=6) for _ in range(3)]
    obs = [e.reset(seed=s)[0] for e, s in zip(envs, (42, 42, 43), strict=True)]
    _assert_obs_equal(obs[0], obs[1])
    assert not torch.equal(obs[0]["privileged"], obs[2]["privileged"])
    for a in _random_actions(8, 4, 4):  # crosses an autoreset
        r = [e.step(a) for e in envs]
        _assert_obs_equal(r[0].obs, r[1].obs)
        assert torch.equal(r[0].reward, r[1].reward)
    assert not torch.equal(r[0].obs["privileged"], r[2].obs["privileged"])
    for e in envs:
        e.close()


def test_worlds_given_the_same_seed_start_identically():
    env = _env(task="pick_place", n=3)
    obs, _ = env.reset(seed=[7, 7, 8])
    assert torch.equal(obs["privileged"][0], obs["privileged"][1])
    assert obs["instruction"][0] == obs["instruction"][1]
    assert not torch.equal(obs["privileged"][0], obs["privileged"][2])
    env.close()


def test_partial_reset_leaves_other_worlds_untouched():
    env = _env(n=3)
    env.reset(seed=0)
    for a in _random_actions(3, 3, 4):
        before = env.step(a).obs
    after, _ = env.reset(seed=[99], env_ids=torch.tensor([1]))
    for key in ("proprio", "privileged"):
        assert torch.equal(after[key][[0, 2]], before[key][[0, 2]])
        assert not torch.equal(after[key][1], before[key][1])
    assert env.episodes.length.tolist() == [3, 0, 3]
    env.close()


@pytest.mark.parametrize("task", ["push", "pick_place"])
def test_state_dict_round_trip_continues_bit_identically(task):
    env = _env(task=task, n=3, max_episode_steps=7, cameras=["front"], image_size=32)
    env.reset(seed=1)
    actions = _random_actions(14, 3, 4, seed=3)
    for a in actions[:4]:
        env.step(a)
    state = env.state_dict()
    # Everything is a numpy array or JSON-able (the trainer saves it to safetensors + JSON).
    json.dumps({k: v for k, v in state.items() if not isinstance(v, np.ndarray)})
    expected = [env.step(a) for a in actions[4:]]  # crosses an autoreset
    restored = _env(task=task, n=3, max_episode_steps=7, cameras=["front"], image_size=32)
    restored.reset(seed=1234)
    restored.load_state_dict(
        json.loads(
            json.dumps({k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in state.items()})
        )
    )
    for a, exp in zip(actions[4:], expected, strict=True):
        got = restored.step(a)
        _assert_obs_equal(got.obs, exp.obs)
        assert torch.equal(got.reward, exp.reward)
        assert torch.equal(got.truncated, exp.truncated)
    env.close()
    restored.close()


@pytest.mark.parametrize(
    ("field", "value", "allowed"),
    [
        ("task", "stack", "pick_place"),
        ("control_mode", "torque", "ee_delta_pos"),
        ("split", "ood_weather", "ood_visual"),
        ("cameras", ["side"], "wrist"),
        ("image_size", 0, "image_size"),
        ("num_envs", -1, "num_envs"),
    ],
)
def test_config_errors_name_bad_and_allowed_values(field, value, allowed):
    cfg = EnvConfig(num_envs=2)
    setattr(cfg, field, value)
    with pytest.raises(ValueError, match=allowed) as err:
        MujocoBatchedEnv(cfg)
    assert str(value if not isinstance(value, list) else value[0]) in str(err.value)


def test_wrong_action_shape_is_rejected():
    env = _env(n=2)
    with pytest.raises(ValueError, match="action shape"):
        env.step(torch.zeros(2, 7))
    env.close()


def test_skipped_images_stay_stale_except_for_worlds_whose_episode_ends():
    # Twin worlds, same seed and actions; ``skipping`` is told before each step that its images go
    # unread. Episodes end after 3 steps, so the hint before step 3 covers an episode end.
    make = lambda: _env(task="lift", n=2, max_episode_steps=3, cameras=["front"], image_size=32)  # noqa: E731
    skipping, rendering = make(), make()
    obs_skip, _ = skipping.reset(seed=4)
    obs_full, _ = rendering.reset(seed=4)
    for step, action in enumerate(_random_actions(4, 2, 4, seed=2)):
        previous = obs_skip["rgb_front"]
        skipping.skip_images_next_step()
        out_skip, out_full = skipping.step(action), rendering.step(action)
        obs_skip, obs_full = out_skip.obs, out_full.obs
        assert torch.equal(obs_skip["proprio"], obs_full["proprio"])
        if step == 2:  # episodes ended: final images rendered, reset worlds rendered afresh
            assert bool(out_skip.truncated.all())
            _assert_obs_equal(out_skip.info["final_obs"], out_full.info["final_obs"])
            _assert_obs_equal(obs_skip, obs_full)
        else:
            assert torch.equal(obs_skip["rgb_front"], previous)
            assert not torch.equal(obs_full["rgb_front"], previous)  # the scene did move
    # the hint lasts one step: the next step renders again
    action = _random_actions(1, 2, 4, seed=3)[0]
    _assert_obs_equal(skipping.step(action).obs, rendering.step(action).obs)


def test_a_world_runs_alike_whatever_the_number_of_worlds_beside_it():
    # Eight seeded worlds in one env and the same seeds split over two envs of four: observations
    # (images included), rewards and success match bit for bit, across an autoreset. RL trains on
    # more worlds than it evaluates on, so a world must not depend on its neighbours.
    make = lambda n: _env(task="pick_place", n=n, max_episode_steps=4, cameras=["front"], image_size=32)  # noqa: E731
    seeds = [[7, world] for world in range(8)]
    whole, halves = make(8), [make(4), make(4)]
    obs_whole, _ = whole.reset(seed=seeds)
    obs_halves = [env.reset(seed=seeds[4 * k : 4 * k + 4])[0] for k, env in enumerate(halves)]

    def joined(parts: list[dict]) -> dict:
        return {
            key: sum((p[key] for p in parts), [])
            if key == "instruction"
            else torch.cat([p[key] for p in parts])
            for key in parts[0]
        }

    _assert_obs_equal(obs_whole, joined(obs_halves))
    for action in _random_actions(6, 8, 4, seed=5):  # crosses an autoreset
        out_whole = whole.step(action)
        out_halves = [env.step(action[4 * k : 4 * k + 4]) for k, env in enumerate(halves)]
        _assert_obs_equal(out_whole.obs, joined([out.obs for out in out_halves]))
        assert torch.equal(out_whole.reward, torch.cat([out.reward for out in out_halves]))
        assert torch.equal(out_whole.info["success"], torch.cat([out.info["success"] for out in out_halves]))
    for env in (whole, *halves):
        env.close()
