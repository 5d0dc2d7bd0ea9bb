"""The scripted expert as the person who takes over (``ExpertIntervention``), through the deployment loop
on the simulated ``pick_place`` robot: it leaves a policy that does what it would do alone, takes over a
policy that drifts for exactly the configured segments, and its steps are sent through the safety layer
and recorded with the intervention flag and its labels, as a person's are."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from vla_rl.real_world.deploy import Deployment, DeployResult
from vla_rl.real_world.deploy_config import DeployConfig, InterventionSection, compose_deploy_config
from vla_rl.real_world.expert_intervention import ExpertIntervention, intervention_input
from vla_rl.real_world.local_sim import LocalSimControl, LocalSimRobot
from vla_rl.real_world.recording import DeploymentRecorder
from vla_rl.real_world.safety_config import SafetyConfig
from vla_rl.sims.tasks.scripted import scripted_action

from vla_rl.config import ConfigError
from vla_rl.envs.config import EnvConfig

ENV = EnvConfig(task="pick_place", num_envs=1, num_threads=1)
STEPS = 120
"""pick_place's episode length (periods)."""
FAST_SAFETY = SafetyConfig(max_ee_speed_m_s=0.6, max_joint_speed_rad_s=3.0, max_gripper_speed_m_s=1.0)
"""Limits the expert's own speed (0.5 m/s at the TCP) passes, so its labels are its actions."""


def expert_policy(observation: dict) -> np.ndarray:
    """The scripted expert as the deployed policy (a chunk of one action)."""
    batch = {key: torch.as_tensor(observation[key])[None] for key in ("proprio", "privileged")}
    return scripted_action("pick_place", batch).numpy()


def still_policy(observation: dict) -> np.ndarray:
    """A policy that never moves: it drifts from the expert from the first step on."""
    return np.zeros((1, 4), np.float32)


def _deploy(
    infer, settings: InterventionSection, episodes: int = 1, recorder: DeploymentRecorder | None = None
) -> tuple[DeployResult, ExpertIntervention, LocalSimRobot]:  # noqa: ANN001
    expert = ExpertIntervention("pick_place", settings)
    robot = LocalSimRobot(ENV)
    cfg = DeployConfig(episodes=episodes, safety=FAST_SAFETY)
    with robot:
        deployment = Deployment(
            cfg,
            ENV,
            ["proprio"],
            robot,
            infer,
            sim=LocalSimControl(robot),
            recorder=recorder,
            intervention=expert,
        )
        return deployment.run(), expert, robot


def test_a_policy_that_does_what_the_expert_would_is_left_alone() -> None:
    result, expert, _ = _deploy(expert_policy, InterventionSection(kind="expert"), episodes=2)
    assert [e.interventions for e in result.episodes] == [0, 0]
    assert expert.takeovers == 0 and expert.total_steps == 0
    assert result.success_rate == 1.0
    # Judged from step 5 on: the IK's approximation keeps the distance far below the threshold.
    assert len(expert.drift_log) == 2 * (STEPS - 5) and max(expert.drift_log) < 0.15


def _takeover_steps(start: int, window: int, takeover: int, length: int = STEPS) -> list[int]:
    """Policy for ``window`` steps, expert for ``takeover``, repeated (takeovers start at once)."""
    steps, step = [], start
    while step < length:
        steps += range(step, min(step + takeover, length))
        step += takeover + window
    return steps


def test_a_drifting_policy_is_taken_over_for_the_configured_segments(tmp_path: Path) -> None:
    """A still arm drifts by the expert's whole action (at least its gripper's 1) from the first step.
    Window 5: steps 0-4 are the policy's, the drift is judged at step 5 and the expert drives 5-24;
    the window starts empty: 25-29 are the policy's again, 30-49 the expert's, and so on."""
    settings = InterventionSection(kind="expert", drift_window=5, takeover_steps=20)
    recorder = DeploymentRecorder(tmp_path / "rec", ENV.control_hz, ENV.control_mode, [])
    with recorder:
        result, expert, robot = _deploy(still_policy, settings, recorder=recorder)
    expected = _takeover_steps(5, 5, 20)
    assert len(expected) == 95 == result.episodes[0].interventions == expert.total_steps
    assert expert.takeovers == 5
    assert result.success_rate == 1.0, "the expert finishes the task from where the policy left it"

    from vla_rl.data.lerobot_format import open_dataset

    (episode,) = open_dataset(tmp_path / "rec").episodes()
    assert np.flatnonzero(episode.extras["intervention"]).tolist() == expected
    # What was recorded is what the safety layer let through, as for a person's takeover.
    sent = np.stack([c.arm_qpos_rad for c in robot.sent])
    np.testing.assert_allclose(episode.extras["command.arm_qpos_rad"], sent)
    # The label of an intervention frame is the expert's action for the recorded state (the TCP
    # motion of the sent joint target: damped IK reaches the asked-for step within a few percent),
    # where the safety layer let the command through unchanged.
    batch = {"proprio": torch.as_tensor(episode.proprio), "privileged": torch.as_tensor(episode.privileged)}
    expert_actions = scripted_action("pick_place", batch).numpy()
    taken = episode.extras["intervention"]
    unclamped = taken & (episode.extras["safety.events"] == 0)
    assert unclamped.sum() >= 0.9 * taken.sum()
    np.testing.assert_allclose(episode.actions[unclamped][:, 3], expert_actions[unclamped][:, 3], atol=1e-6)
    error = np.abs(episode.actions[unclamped][:, :3] - expert_actions[unclamped][:, :3])
    assert np.median(error) < 0.02 and np.max(error) < 0.1  # measured: 0.0067 and 0.075
    # The policy's frames keep the policy's own (zero) action.
    np.testing.assert_array_equal(episode.actions[~taken], 0.0)


def test_a_slow_watcher_takes_over_later_by_its_seeded_draws() -> None:
    """Probability 0.3 per step: the first takeover starts at step 5 + (index of the first draw of
    ``default_rng(7)`` below 0.3), and lasts 10 steps."""
    settings = InterventionSection(kind="expert", takeover_steps=10, takeover_probability=0.3, seed=7)
    result, expert, _ = _deploy(still_policy, settings)
    draws = np.random.default_rng(7).random(50)
    delay = int(np.flatnonzero(draws < 0.3)[0])
    assert expert.drift_log[: delay + 1] and all(d > settings.drift_threshold for d in expert.drift_log)
    assert result.episodes[0].interventions == expert.total_steps
    assert expert.takeovers >= 2
    first = _deploy(still_policy, InterventionSection(kind="expert", takeover_steps=10, seed=7))[1]
    assert expert.total_steps < first.total_steps  # slower to react, less of the episode taken over
    slow = ExpertIntervention("pick_place", settings)
    assert slow.rng.random() == draws[0]  # one stream, seeded by intervention.seed


def test_an_expert_that_watches_some_episodes_leaves_the_others_to_the_policy() -> None:
    """Watch probability 0.5, seed 9: the watching draws come from ``default_rng([9, 1])``, one as the
    expert is made and one as each episode starts; below 0.5 it watches. A still arm is taken over for
    the usual 95 steps in a watched episode and never in the others."""
    settings = InterventionSection(kind="expert", watch_probability=0.5, seed=9)
    draws = np.random.default_rng([9, 1]).random(4)
    watched = (draws[1:] < 0.5).tolist()
    assert watched == [True, False, True]  # the seed gives both kinds
    result, expert, _ = _deploy(still_policy, settings, episodes=3)
    assert [e.interventions for e in result.episodes] == [95 if w else 0 for w in watched]
    assert expert.takeovers == 10 and expert.watching is True
    assert [e.success for e in result.episodes] == watched, "alone, the still arm fails"


def test_the_deploy_config_selects_and_checks_the_expert() -> None:
    cfg = compose_deploy_config(["intervention.kind=expert", "intervention.takeover_steps=7"])
    robot = LocalSimRobot(ENV)
    chosen = intervention_input(cfg, ENV, robot)
    assert isinstance(chosen, ExpertIntervention) and chosen.settings.takeover_steps == 7
    assert intervention_input(compose_deploy_config([]), ENV, robot) is None  # no teleop on this robot
    with pytest.raises(ConfigError, match="'intervention.kind'.*no scripted expert"):
        intervention_input(cfg, EnvConfig(task="pick_place", backend="gymnasium"), robot)
    for overrides, key in (
        (["intervention.kind=person"], "intervention.kind"),
        (["intervention.takeover_probability=0"], "intervention.takeover_probability"),
        (["intervention.watch_probability=1.5"], "intervention.watch_probability"),
        (["intervention.drift_window=0"], "intervention.drift_window"),
        (["intervention.kind=expert", "robot.simulated=false", "max_steps=5"], "intervention.kind"),
    ):
        with pytest.raises(ConfigError, match=f"'{key}'"):
            compose_deploy_config(overrides)
