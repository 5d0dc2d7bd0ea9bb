"""The config of an off-policy run (``configs/off_policy.yaml``): SAC or RLPD from state or pixels."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from vla_rl.algorithms.sac_config import SACConfig
from vla_rl.config.schema import RunConfig
from vla_rl.policies.sac_encoder import (
    DEFAULT_CNN_CHANNELS,
    DEFAULT_CNN_FEATURE_DIM,
    DEFAULT_CNN_KERNEL_STRIDE,
)
from vla_rl.training.off_policy.frozen_policy_config import FrozenPolicyConfig


@dataclass
class OffPolicyNetworkConfig:
    """The actor's and the critics' inputs and widths (``vla_rl.policies.sac_networks.SACPolicy``)."""

    obs_keys: list[str] = field(default_factory=lambda: ["proprio", "privileged"])
    """Observation keys that actor and critics read: the ``rgb_<camera>`` keys (each camera in
    ``env.cameras``) through one convolutional encoder, whose features come first, then the vector keys
    concatenated in this order."""
    hidden_sizes: list[int] = field(default_factory=lambda: [256, 256])
    """Hidden widths of the actor and of each critic."""
    activation: str = "relu"
    """Activation of the hidden layers (and of the convolutions)."""
    cnn_channels: list[int] = field(default_factory=lambda: list(DEFAULT_CNN_CHANNELS))
    """Output channels of each convolution of the camera encoder (cameras stacked along channels);
    read only when ``obs_keys`` name cameras. Default: DrQ's four of 32."""
    cnn_kernel_stride: list[list[int]] = field(
        default_factory=lambda: [list(pair) for pair in DEFAULT_CNN_KERNEL_STRIDE]
    )
    """``[kernel, stride]`` of each convolution (no padding), one pair per entry of ``cnn_channels``;
    default: DrQ's ``[[3, 2], [3, 1], [3, 1], [3, 1]]`` (64x64 images leave 25x25)."""
    cnn_feature_dim: int = DEFAULT_CNN_FEATURE_DIM
    """Width of the camera features: the flattened convolutions through one linear layer, LayerNorm
    and tanh (DrQ: 50). The critic loss trains the encoder; the actor reads its features detached."""


@dataclass
class ReplayConfig:
    """The online replay buffer and how each update samples it."""

    capacity: int = 1_000_000
    """Transitions kept (the oldest are overwritten)."""
    batch_size: int = 256
    """Transitions per minibatch (one minibatch per critic step)."""
    learning_starts: int = 1_000
    """Env steps taken with uniformly random actions before the first update (0: learn at once,
    as RLPD does with demonstrations)."""
    env_steps_per_update: int = 1
    """Batched env steps (each ``env.num_envs`` transitions) between two updates; with
    ``algorithm.utd_ratio`` critic steps per update, ``utd_ratio / (env_steps_per_update *
    num_envs)`` critic steps per transition collected."""


@dataclass
class DemoConfig:
    """Demonstrations for RLPD: a LeRobot dataset that ``vla-rl collect`` wrote (with rewards), and
    the transitions of takeovers as they arrive."""

    path: str | None = None
    """Dataset folder; None: learn from online data only."""
    max_episodes: int = 0
    """Episodes read from it (<= 0: all)."""
    share: float = 0.5
    """Share of each minibatch drawn from the demonstration pool (RLPD's symmetric sampling: 0.5):
    the demonstrations and, with ``interventions_as_demos``, the intervention transitions received,
    uniformly over the two together (a demonstration and an intervention transition are equally
    likely). While the pool is empty (no ``path``, no takeover yet) every row is online."""
    success_terminates: bool = False
    """Whether a successful demonstration ended because it succeeded, so that its last step is a
    terminal one (episodes that a reward classifier or a person ends on success). Off for the
    simulator tasks, whose episodes only end at their time limit: each demonstration's last action
    is then dropped and the step before it is a truncation, as online time-limit ends are."""
    interventions_as_demos: bool = True
    """Whether transitions that a person or an expert chose (``intervention`` set: a takeover on the
    robot, sent by ``vla-rl learn-online``'s actors) also count as demonstrations: each is kept in an
    intervention replay beside the online one and joins the demonstration pool. False: they go into
    the online replay only."""
    intervention_capacity: int = 100_000
    """Intervention transitions kept (the oldest are overwritten); saved with each checkpoint beside
    the online replay. Read only with ``interventions_as_demos``."""


@dataclass
class OffPolicyEvalConfig:
    interval_env_steps: int = 10_000
    """Evaluate every this many env steps (and at the end); <= 0: only at the end."""
    num_episodes: int = 64
    """Episodes per evaluation; <= 0 disables evaluation."""
    deterministic: bool = True
    """Act with ``tanh(mean)`` instead of sampling."""
    num_envs: int = 0
    """Worlds that run an evaluation (<= 0: ``env.num_envs``)."""
    split: str = "train"
    """Env split of the evaluation."""


@dataclass
class RemoteSourceConfig:
    """The learner server that remote actors send transitions to (``source: remote``;
    ``vla_rl.real_world.learner_server``)."""

    host: str = "127.0.0.1"
    """Address the learner server binds (``0.0.0.0``: every interface; anything but loopback needs
    ``token``)."""
    port: int = 5600
    """TCP port of the learner server (0: any free port)."""
    token: str | None = None
    """Shared secret every actor sends; None: no check (allowed on loopback only). It travels in
    clear: across an untrusted network, tunnel the connection."""
    max_message_bytes: int = 64 * 1024 * 1024
    """Largest message accepted; a larger frame is refused (``too_large``) and its connection
    closed."""
    publish_interval_updates: int = 1
    """Publish the actor's weights to the actors every this many updates."""


@dataclass
class OffPolicyConfig(RunConfig):
    """``vla-rl train algorithm=sac`` (or ``rlpd``): an off-policy learner on a state task."""

    # Not a setting: keys whose values the run's config.yaml does not keep (checkpoint.write_config).
    secret_keys: ClassVar[tuple[str, ...]] = ("remote.token",)
    job: str = "off_policy"
    run_dir: str = "runs/off_policy"
    checkpoint_interval: int = 5_000
    """Write a checkpoint (with the replay buffer) every this many updates, and at the end."""
    keep_checkpoints: int = 2
    policy: OffPolicyNetworkConfig = field(default_factory=OffPolicyNetworkConfig)
    """The networks."""
    algorithm: SACConfig = field(default_factory=SACConfig)
    """SAC's settings (``configs/algorithm/rlpd.yaml``: RLPD's)."""
    replay: ReplayConfig = field(default_factory=ReplayConfig)
    demos: DemoConfig = field(default_factory=DemoConfig)
    frozen_policy: FrozenPolicyConfig = field(default_factory=FrozenPolicyConfig)
    """A frozen chunk policy the learner acts through (DSRL or residual RL); mode none: none."""
    eval: OffPolicyEvalConfig = field(default_factory=OffPolicyEvalConfig)
    source: str = "local"
    """Where transitions come from: ``local`` (this process steps ``env``) or ``remote`` (actors on
    other machines send them to the learner server, see ``remote``; ``env`` then only gives the
    spaces and the evaluations)."""
    remote: RemoteSourceConfig = field(default_factory=RemoteSourceConfig)
    """The learner server (``source: remote`` only)."""
    total_env_steps: int = 100_000
    """The budget: env steps (transitions) collected, random warm-up included."""
    max_minutes: float = 60.0
    """Wall-clock cap of the whole run, evaluations included; it only stops a run."""
    device: str = "cpu"
    """Where the networks and the minibatches live."""
