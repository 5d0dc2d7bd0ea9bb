"""A simulated robot whose camera frames miss their joint state now and then, as a ROS robot's do."""

from __future__ import annotations

from vla_rl.real_world.local_sim import LocalSimRobot
from vla_rl.real_world.robot import RobotObservation

from vla_rl.envs.config import EnvConfig


class LaggingCameras(LocalSimRobot):
    """A simulated robot whose ``front`` frame misses its joint state every 7th period and whose
    ``wrist`` frame every 5th (of the cameras it has), reported as a ROS robot reports them
    (``unsynced_cameras``)."""

    def __init__(self, env_cfg: EnvConfig) -> None:
        super().__init__(env_cfg)
        self.unsynced: list[list[str]] = []
        """What each observation handed out reported, in order."""

    def get_observation(self) -> RobotObservation:
        obs = super().get_observation()
        period = round(obs.joint_state_stamp_s * self.env_cfg.control_hz)
        obs.extras["unsynced_cameras"] = [
            c for c, every in (("front", 7), ("wrist", 5)) if c in obs.images and period % every == 0
        ]
        self.unsynced.append(obs.extras["unsynced_cameras"])
        return obs
