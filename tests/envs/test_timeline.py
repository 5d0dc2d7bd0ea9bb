"""Pipelined rollouts overlap one stage's physics with the policy of another, as recorded."""

from __future__ import annotations

import pytest
import torch

from vla_rl.envs import EnvConfig, make_env
from vla_rl.envs.timeline import Span, Timeline
from vla_rl.policies import PolicyConfig, build_policy
from vla_rl.rollout.buffer import RolloutBuffer
from vla_rl.rollout.collector import RolloutCollector


def test_overlap_by_hand():
    timeline = Timeline()
    timeline.spans = [
        Span("sim", 0, 0.0, 1.0),
        Span("policy", 1, 0.5, 2.0),  # overlaps stage 0's physics for 0.5 s
        Span("policy", 0, 0.2, 0.9),  # same stage: not counted
        Span("sim", 1, 2.0, 3.0),
        Span("policy", 0, 2.5, 2.75),  # overlaps stage 1's physics for 0.25 s
    ]
    assert timeline.overlap_s("sim", "policy") == 0.75


def test_timed_records_one_span_per_call_even_when_it_raises():
    timeline = Timeline()
    wrapped = timeline.timed("policy", 2, lambda x: 1 / x)
    assert wrapped(4) == 0.25
    with pytest.raises(ZeroDivisionError):
        wrapped(0)
    assert [(s.phase, s.stage) for s in timeline.spans] == [("policy", 2), ("policy", 2)]
    assert all(s.end_s >= s.start_s for s in timeline.spans)


def test_two_stages_simulate_while_the_policy_acts_for_the_other():
    env = make_env(EnvConfig(task="push", num_envs=32, pipeline_stages=2, num_threads=1))
    obs, _ = env.reset(seed=0)
    torch.manual_seed(0)
    policy = build_policy(PolicyConfig(hidden_sizes=[256, 256]), env.observation_space, env.action_space)
    buffer = RolloutBuffer(16, env.num_envs, env.observation_space, env.action_dim)
    collector = RolloutCollector(env, policy, buffer, gamma=0.99)
    timeline = Timeline()
    env.record_timeline(timeline)
    collector.timeline = timeline
    collector.collect(obs)
    phases = {(span.phase, span.stage) for span in timeline.spans}
    assert phases == {("sim", 0), ("sim", 1), ("policy", 0), ("policy", 1)}
    sims = [s for s in timeline.spans if s.phase == "sim"]
    assert len(sims) == 2 * 16
    assert timeline.overlap_s("sim", "policy") > 0.0, "no physics ran while the policy acted"
    env.close()
