"""``benchmarks.metaworld_mt10_sft_rl`` end to end at a toy scale on real MetaWorld (``make
test-metaworld``): every stage runs and the protocol scores both checkpoints (a check of the
machinery, not a result)."""

from __future__ import annotations

import json

import pytest

from benchmarks import metaworld_mt10_sft_rl
from vla_rl.envs.registry import backend_unavailable_reason

reason = backend_unavailable_reason("metaworld")


def test_the_sft_policy_reads_the_state_and_one_slot_per_task():
    overrides = metaworld_mt10_sft_rl.policy_overrides(10)
    assert "policy.kwargs.vector_obs_dims.privileged=39" in overrides
    assert "+policy.kwargs.vector_obs_dims.task_onehot=10" in overrides
    assert "policy.kwargs.vector_obs_dims.proprio=0" in overrides, "proprio is the observation's first 4"


@pytest.mark.skipif(reason is not None, reason=f"metaworld: {reason}")
def test_metaworld_demonstrations_sft_rl_and_both_evaluations_run(tmp_path, monkeypatch):
    monkeypatch.setattr(metaworld_mt10_sft_rl, "RESULTS_DIR", tmp_path)
    argv = ["--root", str(tmp_path / "run"), "--task", "reach-v3+drawer-close-v3", "--demos-per-task", "2",
            "--episode-steps", "40", "--sft-steps", "5", "--worlds", "8", "--updates", "1",
            "--episodes-per-task", "2", "--eval-worlds-per-task", "1", "--results-name", "toy"]  # fmt: skip
    result = metaworld_mt10_sft_rl.main(argv)
    saved = json.loads((tmp_path / "toy.json").read_text())
    assert saved["rl"]["updates"] == 1
    # one update: 8 worlds x 40 steps per sampling round, one or two rounds (recipe: at most 2)
    assert saved["rl"]["env_steps"] in (320, 640)
    for stage in ("sft", "sft_rl"):
        assert list(result[stage]["success_by_task"]) == ["reach-v3", "drawer-close-v3"]
        assert result[stage]["episodes_per_task"] == 2 and result[stage]["max_episode_steps"] == 500
    assert set(saved["minutes"]) == {"collect", "sft", "rl"}
