"""A staged environment behaves like one environment of all its worlds; the MuJoCo backend steps
asynchronously (physics in a background thread) with the same results as a plain step."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from vla_rl.envs import make_env
from vla_rl.envs.config import EnvConfig
from vla_rl.envs.staged import StagedEnv

CFG = EnvConfig(task="reach", num_envs=6, max_episode_steps=4, num_threads=2)


def _random_actions(steps: int, num_envs: int, action_dim: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(3)
    return torch.rand((steps, num_envs, action_dim), generator=generator) * 2 - 1


def _assert_same_step(a, b) -> None:
    for key in ("proprio", "privileged"):
        torch.testing.assert_close(a.obs[key], b.obs[key], rtol=0, atol=0)
        torch.testing.assert_close(a.info["final_obs"][key], b.info["final_obs"][key], rtol=0, atol=0)
    torch.testing.assert_close(a.reward, b.reward, rtol=0, atol=0)
    assert torch.equal(a.truncated, b.truncated) and torch.equal(a.terminated, b.terminated)
    assert torch.equal(a.info["success"], b.info["success"])
    assert a.obs["instruction"] == b.obs["instruction"]
    assert ("episode" in a.info) == ("episode" in b.info)
    if "episode" in a.info:
        done = a.truncated | a.terminated
        for key, value in a.info["episode"].items():
            assert torch.equal(value[done], b.info["episode"][key][done])


def test_two_stages_step_exactly_like_one_env_of_all_worlds_across_autoresets():
    single = make_env(CFG)
    staged = make_env(dataclasses.replace(CFG, pipeline_stages=2))
    assert isinstance(staged, StagedEnv) and staged.num_envs == 6 and staged.num_stages == 2
    assert [s.num_envs for s in staged.stages] == [3, 3]
    obs_single, _ = single.reset(seed=7)
    obs_staged, _ = staged.reset(seed=7)
    torch.testing.assert_close(obs_single["privileged"], obs_staged["privileged"], rtol=0, atol=0)
    for action in _random_actions(9, 6, single.action_dim):  # two autoresets at steps 4 and 8
        _assert_same_step(single.step(action), staged.step(action))
    single.close()
    staged.close()


def test_partial_reset_and_per_world_seeds_address_worlds_of_the_whole_batch():
    single = make_env(CFG)
    staged = make_env(dataclasses.replace(CFG, pipeline_stages=3))
    single.reset(seed=1)
    staged.reset(seed=1)
    action = _random_actions(1, 6, single.action_dim)[0]
    single.step(action)
    staged.step(action)
    ids = torch.tensor([1, 4])
    obs_single, _ = single.reset(seed=[11, 12], env_ids=ids)
    obs_staged, _ = staged.reset(seed=[11, 12], env_ids=ids)
    # The reset worlds start anew, the others (stage 0's world 0, stage 2's world 5) keep their state.
    torch.testing.assert_close(obs_single["proprio"], obs_staged["proprio"], rtol=0, atol=0)
    torch.testing.assert_close(obs_single["privileged"], obs_staged["privileged"], rtol=0, atol=0)
    assert staged.world_seed(5, 4) == single.world_seed(5, 4) == [5, 4]
    single.close()
    staged.close()


def test_snapshot_round_trip_continues_identically():
    staged = make_env(dataclasses.replace(CFG, pipeline_stages=2))
    staged.reset(seed=2)
    actions = _random_actions(6, 6, staged.action_dim)
    staged.step(actions[0])
    state = staged.state_dict()
    first = [staged.step(a) for a in actions[1:]]
    staged.load_state_dict(state)
    for expected, action in zip(first, actions[1:], strict=True):
        _assert_same_step(expected, staged.step(action))
    staged.close()


def test_async_step_equals_step_and_misuse_is_a_clear_error():
    env_a, env_b = make_env(CFG), make_env(CFG)
    env_a.reset(seed=4)
    env_b.reset(seed=4)
    for action in _random_actions(5, 6, env_a.action_dim):
        env_b.step_async(action)
        _assert_same_step(env_a.step(action), env_b.step_wait())
    with pytest.raises(RuntimeError, match="without a step_async"):
        env_b.step_wait()
    env_b.step_async(action)
    with pytest.raises(RuntimeError, match="twice"):
        env_b.step_async(action)
    env_b.step_wait()
    env_a.close()
    env_b.close()


@pytest.mark.parametrize("stages, message", [(4, "do not split into 4"), (0, "must be >= 1")])
def test_bad_stage_counts_are_config_errors(stages, message):
    with pytest.raises(ValueError, match=f"env.pipeline_stages.*{message}|{message}"):
        make_env(dataclasses.replace(CFG, pipeline_stages=stages))


def test_the_hint_to_skip_images_reaches_every_stage():
    staged = make_env(dataclasses.replace(CFG, pipeline_stages=2, cameras=["front"], image_size=32))
    obs, _ = staged.reset(seed=7)
    actions = _random_actions(2, 6, staged.action_dim)
    staged.skip_images_next_step()
    skipped = staged.step(actions[0])  # no episode ends at the first step
    assert torch.equal(skipped.obs["rgb_front"], obs["rgb_front"])  # the previous images, not rendered
    rendered = staged.step(actions[1])
    assert not torch.equal(rendered.obs["rgb_front"], skipped.obs["rgb_front"])
    staged.close()
