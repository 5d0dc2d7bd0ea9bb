"""Residual RL on the robot (``frozen_policy=residual`` with robot actors): the frozen policy's plans
and the residual's conversions worked out by hand, and a ``vla-rl learn-online --rehearsal`` whose
actor runs a saved Gaussian chunk policy under the learner's corrections over a real
roscore: every transition the learner stored carries the frozen action it corrected, planned from
the right observation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from test_learn_online import LEARNER, learner_list, rehearsal_unavailable, rehearse_session
from vla_rl.real_world.online_residual import FrozenPlanner
from vla_rl.real_world.policy_runner import deterministic_chunk, save_chunk_policy_checkpoint

from vla_rl.data.replay_buffer import ReplayBuffer
from vla_rl.envs.config import EnvConfig
from vla_rl.policies.registry import build_chunk_policy, load_chunk_policy
from vla_rl.training.checkpoint import resolve_policy_dir
from vla_rl.training.off_policy.frozen_policy_config import BASE_ACTION_KEY

PROPRIO_DIM = 24


@pytest.fixture(scope="module")
def frozen_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A saved Gaussian chunk policy (chunks of 4 actions on reach's proprioception, untrained): its
    noise-free chunk is its mean, so a test can compute the plans an actor made."""
    torch.manual_seed(0)
    policy = build_chunk_policy("gaussian", chunk_len=4, action_dim=4, proprio_dim=PROPRIO_DIM)
    run_dir = tmp_path_factory.mktemp("residual") / "frozen"
    save_chunk_policy_checkpoint(policy, "gaussian", EnvConfig(task="reach"), run_dir)
    return run_dir


@pytest.fixture(scope="module")
def frozen(frozen_run: Path):  # noqa: ANN201 - a ChunkPolicy
    return load_chunk_policy("gaussian", resolve_policy_dir(frozen_run)).eval()


def observation(seed: int) -> dict[str, np.ndarray]:
    return {"proprio": np.random.default_rng(seed).normal(size=PROPRIO_DIM).astype(np.float32)}


def test_the_planner_plans_every_execute_steps_periods_and_after_a_reset(frozen) -> None:  # noqa: ANN001
    planner = FrozenPlanner(frozen, residual_scale=0.2, execute_steps=3)
    assert planner.execute_steps == 3 < frozen.chunk_len
    first, second, third = observation(1), observation(2), observation(3)
    plan = deterministic_chunk(frozen, first)
    np.testing.assert_array_equal(planner.base_action(first), plan[0])
    np.testing.assert_array_equal(planner.base_action(second), plan[0])  # same period: no new plan
    planner.advance()
    np.testing.assert_array_equal(planner.base_action(second), plan[1])
    planner.advance()
    np.testing.assert_array_equal(planner.base_action(second), plan[2])
    planner.advance()  # 3 actions executed: the next period plans from its own observation
    np.testing.assert_array_equal(planner.base_action(third), deterministic_chunk(frozen, third)[0])
    planner.advance()
    planner.reset()  # a new episode plans at once
    np.testing.assert_array_equal(planner.base_action(first), plan[0])
    assert planner.plans == 3
    assert not np.array_equal(plan[0], deterministic_chunk(frozen, third)[0])  # the check can tell


def test_the_residual_moves_the_frozen_action_by_at_most_its_scale_and_a_takeover_becomes_its_label(
    frozen,  # noqa: ANN001
) -> None:
    planner = FrozenPlanner(frozen, residual_scale=0.2, execute_steps=0)
    assert planner.execute_steps == frozen.chunk_len  # 0: the whole chunk
    base = np.array([0.9, -0.5, 0.0, 0.1], np.float32)
    residual = np.array([1.0, 1.0, -0.5, 2.0], np.float32)
    # 0.9 + 0.2 = 1.1 -> 1; -0.5 + 0.2; 0 - 0.1; the residual 2 is clipped to 1: 0.1 + 0.2
    np.testing.assert_allclose(planner.executed(base, residual), [1.0, -0.3, -0.1, 0.3], atol=1e-6)
    taken_over = np.array([1.0, -0.3, -0.1, 0.9], np.float32)
    # (1 - 0.9) / 0.2; (-0.3 + 0.5) / 0.2; (-0.1 - 0) / 0.2; (0.9 - 0.1) / 0.2 = 4 -> 1
    np.testing.assert_allclose(planner.label(base, taken_over), [0.5, 1.0, -0.5, 1.0], atol=1e-5)


@pytest.mark.skipif(rehearsal_unavailable() is not None, reason=str(rehearsal_unavailable()))
def test_a_residual_rehearsal_stores_each_step_with_the_frozen_action_it_corrected(
    tmp_path: Path,
    frozen_run: Path,
    frozen,  # noqa: ANN001
) -> None:
    execute_steps = 2
    out = tmp_path / "session"
    overrides = [
        *LEARNER,
        "frozen_policy=residual",
        f"frozen_policy.checkpoint={frozen_run}",
        f"frozen_policy.execute_steps={execute_steps}",
    ]
    args = [
        "--master-port=11412",
        f"'{learner_list(overrides)}'",
        "episodes=2",
        "max_steps=12",
        "learner.port=5614",
        "intervention.drift_threshold=-1",  # the expert takes over whenever its window is full
        "intervention.takeover_steps=3",
    ]
    result = rehearse_session(out, args)
    (actor,) = result["actors"]
    replay = ReplayBuffer.load(Path(result["learner"]["last_checkpoint"]) / "replay.safetensors")
    rows = replay.gather(replay.valid_slots())
    stored = len(rows.action)  # what the learner took into its replay before its last checkpoint
    assert 0 < stored == result["learner"]["env_steps"] <= actor["sent_rows"] == actor["steps"]
    assert rows.intervention.any() and not rows.intervention.all()
    assert torch.all(rows.action.abs() <= 1.0)
    base, nxt = rows.obs[BASE_ACTION_KEY].numpy(), rows.next_obs[BASE_ACTION_KEY].numpy()
    ends = list(np.cumsum([episode["steps"] for episode in actor["per_episode"]]))  # no period was held
    stored_ends = np.flatnonzero((rows.terminated | rows.truncated).numpy()) + 1
    assert list(stored_ends) == [end for end in ends if end <= stored]
    for start, end in zip([0, *ends[:-1]], ends, strict=True):
        end = min(end, stored)
        for row in range(start, end, execute_steps):  # a plan from this period's observation ...
            plan = deterministic_chunk(frozen, {"proprio": rows.obs["proprio"][row].numpy()})
            for k in range(min(execute_steps, end - row)):  # ... gives the frozen actions it covers
                np.testing.assert_allclose(base[row + k], plan[k], atol=1e-5)
        # a step's next observation carries the frozen action of the episode's next step
        np.testing.assert_allclose(nxt[start : end - 1], base[start + 1 : end], atol=1e-6)
