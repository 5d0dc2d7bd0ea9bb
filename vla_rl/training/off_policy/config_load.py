"""Compose ``configs/off_policy.yaml`` and validate it against ``OffPolicyConfig`` before any work."""

from __future__ import annotations

from vla_rl.algorithms.registry import OFF_POLICY_ALGORITHMS
from vla_rl.config.load import JobSchema
from vla_rl.config.structured import Check, in_unit_interval, not_negative, positive, secret_not_saved
from vla_rl.policies.layers import is_image_key
from vla_rl.policies.sac_encoder import conv_output_px
from vla_rl.registry import is_import_path
from vla_rl.training.off_policy.config import OffPolicyConfig
from vla_rl.training.off_policy.frozen_policy_config import frozen_policy_checks


def _off_policy_checks() -> list[Check[OffPolicyConfig]]:
    return [
        Check(
            "algorithm.name",
            lambda c: c.algorithm.name in OFF_POLICY_ALGORITHMS or is_import_path(c.algorithm.name),
            f"must be one of {OFF_POLICY_ALGORITHMS} or your own as 'package.module:Class'",
        ),
        Check("policy.obs_keys", lambda c: bool(c.policy.obs_keys), "must name at least one key"),
        *_camera_encoder_checks(),
        *positive("replay.capacity", "replay.batch_size", "replay.env_steps_per_update", "total_env_steps"),
        *not_negative("replay.learning_starts", "max_minutes"),
        Check(
            "replay.learning_starts",
            lambda c: c.replay.learning_starts >= c.replay.batch_size,
            "must be at least replay.batch_size, so that the first minibatch finds enough online transitions",
        ),
        in_unit_interval("demos.share"),
        *frozen_policy_checks(),
        Check("source", lambda c: c.source in ("local", "remote"), "must be 'local' or 'remote'"),
        *positive("remote.publish_interval_updates", "remote.max_message_bytes"),
        Check("remote.port", lambda c: 0 <= c.remote.port <= 65535, "must be a TCP port (0 to 65535)"),
        secret_not_saved("remote.token"),
        Check(
            "demos.share",
            lambda c: c.demos.path is not None or c.demos.interventions_as_demos or c.demos.share == 0.5,
            "applies only with demos.path (a dataset of demonstrations) or demos.interventions_as_demos",
        ),
        *positive("demos.intervention_capacity"),
    ]


def _camera_keys(config: OffPolicyConfig) -> list[str]:
    return [key for key in config.policy.obs_keys if is_image_key(key)]


def _pairs_fit(config: OffPolicyConfig) -> bool:
    pairs = config.policy.cnn_kernel_stride
    return len(pairs) == len(config.policy.cnn_channels) and all(
        len(pair) == 2 and min(pair) >= 1 for pair in pairs
    )


def _camera_encoder_checks() -> list[Check[OffPolicyConfig]]:
    """The camera keys and the convolutions of the pixel encoder (``SACObsEncoder``)."""
    return [
        Check(
            "policy.obs_keys",
            lambda c: all(key.removeprefix("rgb_") in c.env.cameras for key in _camera_keys(c)),
            "names a camera key rgb_<camera> whose camera is not in env.cameras",
        ),
        Check(
            "policy.cnn_channels",
            lambda c: bool(c.policy.cnn_channels) and min(c.policy.cnn_channels) >= 1,
            "must list at least one convolution, each of at least 1 channel",
        ),
        Check(
            "policy.cnn_kernel_stride",
            _pairs_fit,
            "must hold one [kernel, stride] pair of positive integers per entry of policy.cnn_channels",
        ),
        Check(
            "policy.cnn_kernel_stride",
            lambda c: (
                not _camera_keys(c)
                or not _pairs_fit(c)
                or conv_output_px(c.env.image_size, c.policy.cnn_kernel_stride) >= 1
            ),
            "leaves no pixel of env.image_size images: use fewer or smaller convolutions",
        ),
        *positive("policy.cnn_feature_dim"),
    ]


OFF_POLICY_JOB = JobSchema("off_policy", OffPolicyConfig, "off_policy", _off_policy_checks)
"""``vla-rl train algorithm=sac|rlpd``'s job: an off-policy learner on a state task."""
