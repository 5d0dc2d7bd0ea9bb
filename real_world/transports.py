"""Robots, simulated-robot handles and sim nodes by transport name (``robot.transport``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from vla_rl.real_world.deploy_config import DeployConfig
from vla_rl.real_world.robot import Robot
from vla_rl.real_world.safe_robot import SafeRobot
from vla_rl.real_world.sim_control import SimControl

from vla_rl.config import ConfigError
from vla_rl.envs.config import EnvConfig
from vla_rl.registry import resolve


def _robot_settings(cfg: DeployConfig, env: EnvConfig) -> dict:
    """The robot-config fields both ROS transports take, from the deployment and env configs."""
    unknown = sorted(set(cfg.robot.image_crops) - set(env.cameras))
    if unknown:
        raise ConfigError(
            f"config key 'robot.image_crops': no camera {unknown} is read here (the policy's, the success "
            f"classifier's and the recording's cameras: {env.cameras})"
        )
    return {
        "topics": cfg.robot.topics,
        "cameras": tuple(env.cameras),
        "image_size": (env.image_size, env.image_size),
        "image_crops": {camera: tuple(crop) for camera, crop in cfg.robot.image_crops.items()},
        "task_state_dim": _task_state_dim(env),
        "sync_slop_s": cfg.robot.sync_slop_s,
        "image_wait_s": cfg.robot.image_wait_s,
        "connect_timeout_s": cfg.robot.connect_timeout_s,
        "image_transport": cfg.robot.image_transport,  # both validated by DEPLOY_CHECKS
        "command_type": cfg.robot.command_type,
        "pose_frame_id": cfg.robot.pose_frame_id,
    }


def _ros1_robot(cfg: DeployConfig, env: EnvConfig) -> Robot:
    from vla_rl.real_world.ros1.robot import Ros1Robot, Ros1RobotConfig

    return Ros1Robot(Ros1RobotConfig(control_hz=env.control_hz, **_robot_settings(cfg, env)))


def _ros2_robot(cfg: DeployConfig, env: EnvConfig) -> Robot:
    from vla_rl.real_world.ros2.robot import Ros2Robot, Ros2RobotConfig

    return Ros2Robot(
        Ros2RobotConfig(
            point_time_from_start_s=1.0 / env.control_hz,
            # Header stamp = the observation's, as over ROS 1: the simulated robot tells a command's
            # age by it (latency, commands of an earlier episode). A joint_trajectory_controller
            # times the point from that stamp (one period after the observation), so a real robot's
            # controller must share this host's clock.
            stamp_trajectories=True,
            **_robot_settings(cfg, env),
        )
    )


def _task_state_dim(env: EnvConfig) -> int:
    from vla_rl.sims.tasks.registry import make_task

    return make_task(env.task).privileged_dim


ROBOTS: dict[str, Callable[[DeployConfig, EnvConfig], Robot]] = {"ros1": _ros1_robot, "ros2": _ros2_robot}
SIM_CONTROLS: dict[str, str] = {
    "ros1": "vla_rl.real_world.ros1.sim_control:Ros1SimControl",
    # DDS configuration from CYCLONEDDS_URI, as the robot's (``Ros2RobotConfig.dds_config``).
    "ros2": "vla_rl.real_world.ros2.sim_control:Ros2SimControl",
}
"""Transport -> ``"module:class"`` of its handle on the simulated robot (``class(topics)``)."""
SIM_NODES: dict[str, str] = {
    "ros1": "vla_rl.real_world.ros1.sim_node:Ros1SimNode",
    "ros2": "vla_rl.real_world.ros2.sim_node:Ros2SimNode",
}
"""Transport -> ``"module:class"`` of its simulated robot node (``class(env, topics, stats_path=...,
image_transport=...)``)."""


def build_robot(cfg: DeployConfig, env: EnvConfig) -> SafeRobot:
    """The configured transport's robot behind the safety layer (``cfg.safety``, on by default)."""
    from vla_rl.real_world.safety import SafetyLayer

    if cfg.robot.transport not in ROBOTS:
        raise ValueError(f"no robot for transport {cfg.robot.transport!r}; available: {sorted(ROBOTS)}")
    robot = ROBOTS[cfg.robot.transport](cfg, env)
    return SafeRobot(robot, SafetyLayer(cfg.safety, env.control_hz))


def build_sim_control(cfg: DeployConfig) -> SimControl:
    """The transport's handle on the simulated robot (an unknown transport fails naming the known ones)."""
    return resolve(SIM_CONTROLS, cfg.robot.transport, "simulated-robot control")(cfg.robot.topics)


def sim_robot_env(cfg: DeployConfig, env: EnvConfig) -> EnvConfig:
    """What the simulated robot runs: ``env`` with its cameras ``cfg.robot.sim_image_size`` high and
    ``cfg.robot.sim_image_width`` wide where set (the same view at more pixels, widened at the sides;
    the robot side crops and resizes the frames to ``env``'s size)."""
    from vla_rl.real_world.sim_robot import camera_env

    return camera_env(env, cfg.robot.sim_image_size, cfg.robot.sim_image_width)


def run_sim_node(cfg: DeployConfig, env: EnvConfig, seconds: float) -> None:
    """Run the transport's simulated robot node of ``sim_robot_env(cfg, env)`` for ``seconds``, its
    frames sent as ``cfg.robot.image_transport`` says (``cfg.sim_stats_path``: its statistics)."""
    node_class = resolve(SIM_NODES, cfg.robot.transport, "simulated robot node")
    stats = Path(cfg.sim_stats_path) if cfg.sim_stats_path else None
    node = node_class(
        sim_robot_env(cfg, env), cfg.robot.topics, stats_path=stats, image_transport=cfg.robot.image_transport
    )
    try:
        node.spin(seconds)
    finally:
        node.close()
