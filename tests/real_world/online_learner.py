"""A real learner server with its remote source (the trainer's side without the trainer) and an
online actor on the simulated robot of this process, for the online actor's tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from vla_rl.real_world.learner_client import LearnerClient
from vla_rl.real_world.learner_server import LearnerServer
from vla_rl.real_world.local_sim import LocalSimControl, LocalSimRobot
from vla_rl.real_world.online_actor import OnlineActor, actor_networks
from vla_rl.real_world.online_config import LearnerSection, LearnOnlineConfig, actor_env, learner_config
from vla_rl.real_world.online_reset import SimReset
from vla_rl.real_world.online_success import SimSuccess

from vla_rl.data.replay_buffer import ReplayBuffer
from vla_rl.training.off_policy.config import ReplayConfig
from vla_rl.training.off_policy.remote_link import TransitionSpec
from vla_rl.training.off_policy.remote_source import RemoteSource

LEARNER = ["algorithm=sac", "env=reach", "env.num_envs=1", "policy.hidden_sizes=[16,16]"]
PIXELS = [*LEARNER, "observations=pixels", "env.image_size=32"]
"""The learner from the front and wrist cameras (and ``proprio``), at 32x32 to keep tests quick."""


def config(**changes) -> LearnOnlineConfig:  # noqa: ANN003
    base = {
        "learner": LearnerSection(overrides=list(LEARNER)),
        "episodes": 2,
        "max_steps": 8,
        "seed": 7,
        "first_weights_timeout_s": 5.0,
    }
    return LearnOnlineConfig(**(base | changes))


class Learner:
    """A real learner server and its remote source (the trainer's side without the trainer)."""

    def __init__(self, cfg: LearnOnlineConfig) -> None:
        self.off = learner_config(cfg)
        self.networks = actor_networks(self.off)
        space = self._space()
        spec = TransitionSpec.of_space(space, self.off.policy.obs_keys, 4, 1)
        replay = ReplayBuffer(256, 1, obs_keys=self.off.policy.obs_keys)
        self.source = RemoteSource(spec, replay, ReplayConfig(256, 2, 2), 1, 0, self.networks.acting())
        self.server = LearnerServer(self.source.link)

    def _space(self):  # noqa: ANN202
        from vla_rl.envs import make_env

        env = make_env(self.off.env)
        try:
            return env.observation_space
        finally:
            env.close()

    def rows(self) -> list:
        return [entry.rows for entry in self.source.link.inbox.drain()]

    def go_silent(self) -> None:
        """Stop serving: the actor's calls are refused, as by a learner process that died."""
        self._address = self.server.address
        self.server.stop()

    def come_back(self) -> None:
        """Serve the same learner (inbox and weights) on the same address again."""
        self.server = LearnerServer(self.source.link, *self._address).start()


def build_actor(cfg: LearnOnlineConfig, learner: Learner, robot: LocalSimRobot, **parts) -> OnlineActor:  # noqa: ANN003
    env = actor_env(cfg, learner.off.env)
    networks = actor_networks(learner.off)
    host, port = learner.server.address
    client = LearnerClient(host, port, networks.acting(), backoff_s=0.05, max_backoff_s=0.2)
    sim = LocalSimControl(robot)
    parts = {"success": SimSuccess(sim), "reset": SimReset(sim)} | parts
    return OnlineActor(cfg, env, learner.off.policy.obs_keys, networks, client, robot, **parts)


@contextmanager
def serving(cfg: LearnOnlineConfig) -> Iterator[Learner]:
    """``cfg``'s learner, serving on 127.0.0.1 until the block ends."""
    learner = Learner(cfg)
    with learner.server:
        try:
            yield learner
        finally:
            learner.server.stop()  # the one serving now, if ``come_back`` replaced the first
