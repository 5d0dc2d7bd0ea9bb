"""Typed configuration of a policy (the ``policy`` group of the Hydra configs)."""

from __future__ import annotations

from dataclasses import dataclass, field

GENERIC_HIDDEN_SIZES = [256, 256, 128]
"""MLP head widths where neither the config nor the task says otherwise."""


@dataclass
class PolicyConfig:
    name: str = "mlp"
    """Policy class: ``mlp`` (Gaussian MLP actor-critic on vector observations) or ``cnn``
    (convolutional encoder for ``rgb_*`` images, concatenated with vector observations), or your
    own ``ActorCriticPolicy`` as ``package.module:Class``."""
    actor_obs_keys: list[str] | None = None
    """Observation keys the actor sees; keys starting with ``rgb_`` are images. ``None`` takes them
    from the env (``vla_rl.policies.obs_keys``): ``mlp`` reads its state, ``proprio`` and
    ``privileged`` (those it has; for an env with neither, every vector key), ``cnn`` every
    ``rgb_*`` image and the same state less ``privileged``. A training run writes the keys it
    used into its saved config; a key the env lacks is a ``ConfigError`` before training."""
    critic_obs_keys: list[str] | None = None
    """Observation keys the critic sees; ``None`` uses ``actor_obs_keys``. Giving the critic
    privileged state while the actor sees pixels is the asymmetric actor-critic."""
    hidden_sizes: list[int] | None = None
    """Hidden layer widths of the actor and critic MLP heads; ``None`` takes the task's own default
    (``default_policy_hidden_sizes`` of its class, filled in when a train config is validated:
    [64, 64] for ``reach``, as Isaac Lab's reach agents, ``GENERIC_HIDDEN_SIZES`` for the others)."""
    activation: str = "elu"
    """Activation of the MLP heads: ``elu``, ``relu``, ``tanh``, ``gelu``, ``silu``."""
    init_log_std: float = 0.0
    """Initial log standard deviation of the (state-independent) Gaussian action noise, in the
    env's own action units: an env that rescales the policy's [-1, 1] actions to its bounds (a
    Gymnasium env) starts each dimension at ``init_log_std - log(half range)``, so 0 is a standard
    deviation of one unit of the env's action whatever its bounds."""
    normalize_obs: bool = True
    """Keep a running mean/std of vector observations inside the model and normalise with it."""
    image_encoder: str = "conv"
    """Image encoder of ``cnn``: ``conv`` (strided convolutions, flattened) or ``spatial_softmax``
    (convolutions read out as the expected image coordinates of ``cnn_channels[-1]`` keypoints)."""
    cnn_channels: list[int] = field(default_factory=lambda: [32, 64, 64])
    """Output channels of the convolution layers (``cnn`` only)."""
    cnn_kernel_stride: list[list[int]] | None = None
    """``conv`` encoder: [kernel, stride] of each convolution (padding 0), one pair per entry of
    ``cnn_channels``; ``None`` is the Atari-style [[8, 4], [4, 2], [3, 1], ...]. Smaller first
    strides keep more resolution (finer localisation) at a higher compute cost."""
    cnn_coord_channels: bool = False
    """``conv`` encoder: append two pixel-coordinate planes (x, y in [-1, 1]) to the image
    (CoordConv), which helps convolutions say where something is."""
    cnn_feature_dim: int = 256
    """Width of the image embedding after the convolutions (``cnn`` only)."""
    aux_target_key: str | None = None
    """``cnn`` only: a vector observation key (e.g. ``privileged``) that a linear head on the actor's
    image features learns to predict (normalised, mean squared error), an auxiliary loss added to
    PPO's. Like the asymmetric critic it uses simulator state only in training: the actor still acts
    from pixels and proprioception. It teaches the encoder where things are from a dense supervised
    signal instead of the sparse policy gradient alone."""
    aux_coef: float = 1.0
    """Weight of the auxiliary loss."""
    share_encoder: bool = True
    """Actor and critic share the image encoder (``cnn`` only)."""

    def head_sizes(self) -> list[int]:
        """``hidden_sizes``, or ``GENERIC_HIDDEN_SIZES`` where no task filled it in."""
        return list(GENERIC_HIDDEN_SIZES if self.hidden_sizes is None else self.hidden_sizes)
