"""``env.options.variations: benchmark`` against MetaWorld's own fixed variations (``make test-metaworld``).

Each variation is compared with an env that MetaWorld's API sets to that ``Task`` directly
(``set_task`` then ``reset``): the variation drawn (``_last_rand_vec``) and the object and goal
positions of the first observation must be the same.
"""

from __future__ import annotations

import pickle
from itertools import pairwise

import numpy as np
import pytest
import torch

from vla_rl.envs.config import EnvConfig
from vla_rl.envs.registry import backend_unavailable_reason, make_env

reason = backend_unavailable_reason("metaworld")
pytestmark = pytest.mark.skipif(reason is not None, reason=f"metaworld: {reason}")

OBJECTS, GOAL = slice(4, 18), slice(36, 39)
"""Object positions and quaternions, and the goal, inside MetaWorld's 39-D observation."""


def _benchmark_env(task: str, num_envs: int, **options):
    cfg = EnvConfig(
        backend="metaworld",
        task=task,
        num_envs=num_envs,
        max_episode_steps=2,
        options={"variations": "benchmark", **options},
    )
    return make_env(cfg)


def _metaworld_start(task: object) -> tuple[np.ndarray, np.ndarray]:
    """(variation, first observation) of a fresh MetaWorld env set to ``task`` by MetaWorld's API."""
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS

    env = ALL_V3_ENVIRONMENTS[task.env_name]()
    try:
        env.set_task(task)
        obs, _ = env.reset()
        return env._last_rand_vec.copy(), obs
    finally:
        env.close()


def _variation_index(world, variations: list[np.ndarray]) -> int:
    matches = [k for k, v in enumerate(variations) if np.array_equal(world._last_rand_vec, v)]
    assert len(matches) == 1, "the world plays exactly one of the benchmark's variations"
    return matches[0]


@pytest.mark.parametrize("seed", [0, 3])
def test_a_single_task_plays_metaworlds_mt1_variations(seed):
    import metaworld

    tasks = metaworld.MT1("drawer-close-v3", seed=seed).train_tasks
    with _benchmark_env("drawer-close-v3", 2, benchmark_seed=seed) as env:
        obs, _ = env.reset(seed=11)
        for world in range(2):
            variation, expected = _metaworld_start(tasks[world])
            np.testing.assert_array_equal(env.worlds[world]._last_rand_vec, variation)
            state = obs["privileged"][world].numpy()
            np.testing.assert_allclose(state[OBJECTS], expected[OBJECTS], atol=1e-6)
            np.testing.assert_allclose(state[GOAL], expected[GOAL], atol=1e-6)


def test_mt10_worlds_play_the_variations_of_metaworlds_mt10_train_tasks():
    import metaworld

    benchmark = metaworld.MT10(seed=0)
    with _benchmark_env("MT10", 10) as env:
        obs, _ = env.reset(seed=0)
        for world, task in enumerate(env.tasks):
            first = next(t for t in benchmark.train_tasks if t.env_name == task)
            variation, expected = _metaworld_start(first)
            np.testing.assert_array_equal(env.worlds[world]._last_rand_vec, variation, err_msg=task)
            state = obs["privileged"][world].numpy()
            np.testing.assert_allclose(state[OBJECTS], expected[OBJECTS], atol=1e-6, err_msg=task)
            np.testing.assert_allclose(state[GOAL], expected[GOAL], atol=1e-6, err_msg=task)
    sampled = make_env(EnvConfig(backend="metaworld", task="MT10", num_envs=10))
    with sampled:
        sampled.reset(seed=0)
        assert not np.array_equal(sampled.worlds[0]._last_rand_vec, env.worlds[0]._last_rand_vec)


def test_world_j_of_m_plays_variations_j_j_plus_m_and_a_seeded_reset_starts_over():
    import metaworld

    tasks = metaworld.MT1("reach-v3", seed=0).train_tasks
    variations = [pickle.loads(task.data)["rand_vec"] for task in tasks]  # what set_task would install
    played: list[list[int]] = [[], [], []]
    with _benchmark_env("reach-v3", 3) as env:
        env.reset(seed=5)
        for _ in range(20):  # 2-step episodes: 11 per world
            for world in range(3):
                if env._episodes.length[world] == 0:
                    played[world].append(_variation_index(env.worlds[world], variations))
            env.step(torch.zeros(3, 4))
        assert played[0][:3] == [0, 3, 6] and played[2][:3] == [2, 5, 8]
        assert all(later - earlier == 3 for row in played for earlier, later in pairwise(row))
        # 17 + 17 + 16 first episodes (evaluate's quotas for 50 over 3 worlds) play each variation once.
        cover = [w + 3 * k for w, quota in enumerate((17, 17, 16)) for k in range(quota)]
        assert sorted(cover) == list(range(50))

        env.reset(seed=[env.world_seed(1, 1)], env_ids=torch.tensor([1]))
        assert _variation_index(env.worlds[1], variations) == 1, "a seeded reset starts the order over"
        assert _variation_index(env.worlds[0], variations) != 0, "the other worlds go on"
        env.reset(seed=9)
        assert [_variation_index(w, variations) for w in env.worlds] == [0, 1, 2]
        env.reset()  # unseeded: the next turn
        assert [_variation_index(w, variations) for w in env.worlds] == [3, 4, 5]


def test_variations_wrap_after_the_fiftieth():
    with _benchmark_env("reach-v3", 1) as env:
        env.reset(seed=0)
        first = env.worlds[0]._last_rand_vec.copy()
        for _ in range(49):
            env.reset()
        assert not np.array_equal(env.worlds[0]._last_rand_vec, first)
        env.reset()
        np.testing.assert_array_equal(env.worlds[0]._last_rand_vec, first)
