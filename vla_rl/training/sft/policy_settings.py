"""The typed ``policy.kwargs`` of an SFT config: one settings dataclass per chunk-policy family.

``policy.kwargs`` are the keywords of the family's ``build``. Each built-in family documents them as
a dataclass (its policy config plus the construction-only values); ``check_policy_kwargs`` merges the
given kwargs into it when the config is validated, so an unknown key, a wrong type or a bad value is
a ``ConfigError`` naming ``policy.kwargs.<key>`` before demonstrations, models or checkpoints load.
"""

from __future__ import annotations

from typing import Any

from vla_rl.config.structured import Check, ConfigError, Schema, not_negative, one_of, positive, value_check
from vla_rl.registry import resolve

POLICY_KWARGS_KEY = "policy.kwargs"
FAMILY_SETTINGS: dict[str, str] = {
    "token_vla": "vla_rl.policies.vla.config:TokenVLABuildSettings",
    "chunk_vla": "vla_rl.policies.vla.config:TokenVLABuildSettings",
    "pi0": "vla_rl.policies.flow.pi0_config:Pi0BuildSettings",
    "smolvla": "vla_rl.policies.flow.smolvla_config:SmolVLABuildSettings",
    "flow_mlp": "vla_rl.policies.flow.flow_mlp:FlowMLPBuildSettings",
    "gaussian": "vla_rl.policies.base:GaussianChunkBuildSettings",
}
"""Built-in chunk-policy family -> ``"module:attribute"`` of the dataclass of its ``policy.kwargs``."""


def _widths(*keys: str) -> list[Check[Any]]:
    return [
        value_check(key, lambda widths: all(w > 0 for w in widths), "must be positive widths") for key in keys
    ]


# The checks of the sizes the settings of every family have, and those of the VLA families.
_CHUNK_SIZES: list[Check[Any]] = [*positive("chunk_len", "action_dim"), *not_negative("proprio_dim")]
_VLA: list[Check[Any]] = [
    *_CHUNK_SIZES,
    *positive("value_hidden_dim"),
    Check("camera_keys", lambda s: len(s.camera_keys) > 0, "must name at least one camera"),
]


def _token_vla_checks() -> list[Check[Any]]:
    from vla_rl.policies.vla.config import TINY_BACKBONE_ARGS

    return [
        *_VLA,
        *positive("image_size", "max_instruction_tokens"),
        Check("num_bins", lambda s: s.num_bins >= 2, "must be at least 2"),
        value_check(
            "backbone",
            lambda sizes: set(sizes) <= set(TINY_BACKBONE_ARGS) and all(v > 0 for v in sizes.values()),
            f"takes positive sizes named {list(TINY_BACKBONE_ARGS)}",
        ),
        Check("lora", lambda s: s.lora is None or s.lora.rank >= 1, "rank must be at least 1"),
    ]


def _pi0_checks() -> list[Check[Any]]:
    from vla_rl.policies.flow.pi0_io import TINY_CONFIG_ARGS

    return [*_VLA, *positive("num_denoising_steps", *sorted(TINY_CONFIG_ARGS))]


def _smolvla_checks() -> list[Check[Any]]:
    # pretrained_dir may stay unset when policy.init_from names the folder; build requires it otherwise.
    return positive("chunk_len", "action_dim", "num_denoising_steps", "value_hidden_dim")


def _flow_mlp_checks() -> list[Check[Any]]:
    from vla_rl.policies.layers import ACTIVATIONS, is_image_key

    return [
        *_CHUNK_SIZES,
        *positive("feature_dim", "num_denoising_steps"),
        value_check(
            "vector_obs_dims", lambda dims: all(d >= 0 for d in dims.values()), "widths must not be negative"
        ),
        Check("image_keys", lambda s: all(is_image_key(key) for key in s.image_keys), "must be rgb_* keys"),
        *_widths("hidden_sizes", "value_hidden_sizes", "cnn_channels"),
        Check(
            "time_embed_dim",
            lambda s: s.time_embed_dim >= 2 and s.time_embed_dim % 2 == 0,
            "must be even and at least 2",
        ),
        one_of("activation", sorted(ACTIVATIONS)),
    ]


def _gaussian_checks() -> list[Check[Any]]:
    from vla_rl.policies.layers import ACTIVATIONS

    return [
        *_CHUNK_SIZES,
        one_of("policy.name", ("mlp", "cnn")),
        one_of("policy.activation", sorted(ACTIVATIONS)),
        *_widths("policy.hidden_sizes"),
    ]


FAMILY_CHECKS = {
    "token_vla": _token_vla_checks,
    "chunk_vla": _token_vla_checks,
    "pi0": _pi0_checks,
    "smolvla": _smolvla_checks,
    "flow_mlp": _flow_mlp_checks,
    "gaussian": _gaussian_checks,
}
"""The value checks of each family's settings (built on use: they read the families' constants)."""


def family_settings_schema(name: str) -> Schema[Any]:
    """The settings dataclass of the built-in family ``name`` and its value checks."""
    return Schema(resolve(FAMILY_SETTINGS, name, "policy family settings"), FAMILY_CHECKS[name]())


def check_policy_kwargs(name: str, kwargs: dict[str, Any]) -> None:
    """``ConfigError`` naming ``policy.kwargs.<key>`` for the first unknown key, wrong type or bad
    value of ``kwargs`` for the family ``name``; ``policy.name`` when no chunk policy has that name. A
    family of your own (``package.module:Class``) checks its own keywords in ``build``."""
    if name in FAMILY_SETTINGS:
        family_settings_schema(name).validate(kwargs, POLICY_KWARGS_KEY)
        return
    from vla_rl.policies.registry import chunk_policy_class

    try:
        chunk_policy_class(name)
    except ValueError as error:
        raise ConfigError(f"config key 'policy.name': {error}") from None
