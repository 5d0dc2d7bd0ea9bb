"""``vla-rl deploy``, ``vla-rl sim-robot`` and ``vla-rl policy-server`` (all read ``configs/deploy.yaml``)."""

from __future__ import annotations

import argparse
import logging
import math
from pathlib import Path
from typing import Any

from vla_rl.real_world.deploy_config import deployment_env
from vla_rl.real_world.learn_online import add_learn_online_parser, learn_online_command

from vla_rl.config import ConfigError

log = logging.getLogger(__name__)


def add_deploy_parsers(sub: Any) -> None:
    for name, help_text in (
        ("deploy", "run a trained policy on a robot over ROS, behind the safety layer"),
        ("sim-robot", "run the simulated robot as a ROS node (what `deploy` talks to in rehearsals)"),
        ("policy-server", "serve a trained policy to a remote robot side (policy.mode=remote)"),
    ):
        parser = sub.add_parser(name, help=help_text)
        parser.add_argument("overrides", nargs="*", help="e.g. checkpoint=runs/reach episodes=20")
    add_learn_online_parser(sub)


def _config(args: argparse.Namespace):  # noqa: ANN202 - DeployConfig; imported lazily
    from vla_rl.real_world.deploy_config import compose_deploy_config

    cfg = compose_deploy_config(list(args.overrides))
    if not cfg.checkpoint:
        raise ConfigError("config key 'checkpoint': give checkpoint=PATH (a vla-rl train run or checkpoint)")
    return cfg


def deploy_command(args: argparse.Namespace) -> int:
    from vla_rl.real_world.deploy import Deployment
    from vla_rl.real_world.expert_intervention import intervention_input
    from vla_rl.real_world.policy_client import PolicyClient
    from vla_rl.real_world.policy_runner import load_trained_policy
    from vla_rl.real_world.recording import session_recorder
    from vla_rl.real_world.transports import build_robot, build_sim_control

    cfg = _config(args)
    loaded = load_trained_policy(cfg.checkpoint)
    policy_env, loaded.env = loaded.env, deployment_env(cfg, loaded.env)
    if cfg.policy.mode == "remote":
        client = PolicyClient(cfg.policy.host, cfg.policy.port, cfg.policy.token, cfg.policy.timeout_s)
        infer = lambda observation: client.infer(observation).actions  # noqa: E731
    else:
        infer = loaded.infer
    output_dir = Path(cfg.output_dir)
    robot = build_robot(cfg, loaded.env)
    with robot:
        sim = build_sim_control(cfg) if cfg.robot.simulated else None
        root = Path(cfg.recording.root) if cfg.recording.root else output_dir / "dataset"
        recorder = session_recorder(cfg.recording, root, loaded.env, policy_env.cameras)
        deployment = Deployment(
            cfg,
            loaded.env,
            loaded.obs_keys,
            robot,
            infer,
            sim=sim,
            recorder=recorder,
            intervention=intervention_input(cfg, loaded.env, robot),
            instruction=cfg.instruction or "",
        )
        try:
            result = deployment.run()
        finally:
            if recorder is not None:
                recorder.close()
    result.write(output_dir / "deploy_summary.json")
    summary = result.summary()
    rate, latency = summary["success_rate"], summary["obs_to_command_ms"]
    fired = {name: count for name, count in result.safety_counts.items() if count}
    print(
        f"deployment ({summary['episodes']} episodes over {cfg.robot.transport}): "
        + (f"success rate {100 * rate:.1f} %, " if rate is not None else "")
        + (
            f"obs-to-command p50 {latency['p50']:.2f} ms, p99 {latency['p99']:.2f} ms; "
            if latency["p50"]
            else ""
        )
        + f"safety events {fired}"
    )
    print(f"summary: {output_dir / 'deploy_summary.json'}")
    return 0


def sim_robot_command(args: argparse.Namespace) -> int:
    from vla_rl.real_world.policy_runner import load_trained_policy
    from vla_rl.real_world.transports import run_sim_node

    cfg = _config(args)
    env = deployment_env(cfg, load_trained_policy(cfg.checkpoint).env)
    seconds = cfg.sim_seconds if cfg.sim_seconds > 0 else math.inf
    run_sim_node(cfg, env, seconds)
    return 0


def policy_server_command(args: argparse.Namespace) -> int:
    from vla_rl.real_world.policy_runner import load_trained_policy
    from vla_rl.real_world.policy_server import PolicyServer

    cfg = _config(args)
    loaded = load_trained_policy(cfg.checkpoint)
    try:
        policy = cfg.policy
        server = PolicyServer(loaded.infer, host=policy.host, port=policy.port, token=policy.token)
    except ValueError as error:  # a non-loopback host without a token
        raise ConfigError(f"config key 'policy.token': {error}") from None
    print(f"serving {cfg.checkpoint} on {cfg.policy.host}:{cfg.policy.port}", flush=True)
    server.serve_forever()
    return 0


DEPLOY_COMMANDS = {
    "deploy": deploy_command,
    "sim-robot": sim_robot_command,
    "policy-server": policy_server_command,
    "learn-online": learn_online_command,
}
