"""The two ways a round of ``benchmarks.hg_dagger`` deploys a policy on the simulated robot: the
deployment loop in this process, or the ROS 1 rehearsal (``roscore`` + ``vla-rl sim-robot`` +
``vla-rl deploy``). Both return the summary ``vla-rl deploy`` writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def deploy_locally(run: Path, overrides: list[str], dataset: Path | None) -> dict[str, Any]:
    """The deployment loop on the simulated robot in this process; the summary ``vla-rl deploy`` writes."""
    from vla_rl.real_world.deploy import Deployment
    from vla_rl.real_world.deploy_config import RecordingSection, compose_deploy_config, deployment_env
    from vla_rl.real_world.expert_intervention import intervention_input
    from vla_rl.real_world.local_sim import LocalSimControl, LocalSimRobot
    from vla_rl.real_world.policy_runner import load_trained_policy
    from vla_rl.real_world.recording import session_recorder

    cfg = compose_deploy_config(overrides)
    loaded = load_trained_policy(run)
    policy_cameras = loaded.env.cameras
    env = loaded.env = deployment_env(cfg, loaded.env)  # + the success classifier's cameras
    recorder = None  # else as `vla-rl deploy` records: the policy's cameras, the env's controller
    if dataset is not None:
        recorder = session_recorder(RecordingSection(enabled=True), dataset, env, policy_cameras)
    robot = LocalSimRobot(env)
    try:
        with robot:
            deployment = Deployment(
                cfg,
                env,
                loaded.obs_keys,
                robot,
                loaded.infer,
                sim=LocalSimControl(robot),
                recorder=recorder,
                intervention=intervention_input(cfg, env, robot),
            )
            result = deployment.run()
    finally:
        if recorder is not None:
            recorder.close()
    return result.summary()


def deploy_over_ros(run: Path, overrides: list[str], dataset: Path, work_dir: Path) -> dict[str, Any]:
    from vla_rl.real_world.rehearsal import run_rehearsal

    recording = ["recording.enabled=true", f"recording.root={dataset.resolve()}"]
    result = run_rehearsal([f"checkpoint={run.resolve()}", *overrides, *recording], work_dir)
    return result["deploy"]
