"""The typed ``policy.kwargs`` of an SFT config: one settings dataclass per chunk-policy family.

``policy.kwargs`` are the keywords of the family's ``build``. Each built-in family documents them as
a dataclass (its policy config plus the construction-only values); ``check_policy_kwargs`` merges the
given kwargs into it when the config is validated, so an unknown key, a wrong type or a bad value is
a ``ConfigError`` naming ``policy.kwargs.<key>`` before demonstrations, models or checkpoints load.
"""

from __future__ import annotations

from typing import Any

from vla_rl.config.structured import Check, ConfigError, Schema
from vla_rl.registry import resolve

POLICY_KWARGS_KEY = "policy.kwargs"
FAMILY_SETTINGS: dict[str, str] = {
    "token_vla": "vla_rl.policies.vla.config:TokenVLABuildSettings",
    "chunk_vla": "vla_rl.policies.vla.config:TokenVLABuildSettings",
    "pi0": "vla_rl.policies.flow.pi0_config:Pi0BuildSettings",
    "flow_mlp": "vla_rl.policies.flow.flow_mlp:FlowMLPBuildSettings",
    "gaussian": "vla_rl.policies.base:GaussianChunkBuildSettings",
}
"""Built-in chunk-policy family -> ``"module:attribute"`` of the dataclass of its ``policy.kwargs``."""

_SIZES: list[Check[Any]] = [
    Check("chunk_len", lambda s: s.chunk_len >= 1, "must be at least 1"),
    Check("action_dim", lambda s: s.action_dim >= 1, "must be at least 1"),
]


def _positive(values: list[int] | None) -> bool:
    return values is None or all(value > 0 for value in values)


def _token_vla_checks() -> list[Check[Any]]:
    from vla_rl.policies.vla.config import TINY_BACKBONE_ARGS

    return [
        *_SIZES,
        Check("num_bins", lambda s: s.num_bins >= 2, "must be at least 2"),
        Check("camera_keys", lambda s: len(s.camera_keys) > 0, "must name at least one camera"),
        Check("image_size", lambda s: s.image_size is None or s.image_size > 0, "must be positive"),
        Check("proprio_dim", lambda s: s.proprio_dim >= 0, "must not be negative"),
        Check("max_instruction_tokens", lambda s: s.max_instruction_tokens >= 1, "must be at least 1"),
        Check("value_hidden_dim", lambda s: s.value_hidden_dim >= 1, "must be at least 1"),
        Check(
            "backbone",
            lambda s: (
                set(s.backbone or {}) <= set(TINY_BACKBONE_ARGS)
                and _positive(list((s.backbone or {}).values()))
            ),
            f"takes positive sizes named {list(TINY_BACKBONE_ARGS)}",
        ),
        Check("lora", lambda s: s.lora is None or s.lora.rank >= 1, "rank must be at least 1"),
    ]


def _pi0_checks() -> list[Check[Any]]:
    from vla_rl.policies.flow.pi0_io import TINY_CONFIG_ARGS

    return [
        *_SIZES,
        Check("camera_keys", lambda s: len(s.camera_keys) > 0, "must name at least one camera"),
        Check("proprio_dim", lambda s: s.proprio_dim >= 0, "must not be negative"),
        Check(
            "num_denoising_steps",
            lambda s: s.num_denoising_steps is None or s.num_denoising_steps >= 1,
            "must be at least 1",
        ),
        Check("value_hidden_dim", lambda s: s.value_hidden_dim >= 1, "must be at least 1"),
        *(
            Check(
                name,
                lambda s, name=name: getattr(s, name) is None or getattr(s, name) > 0,
                "must be positive",
            )
            for name in sorted(TINY_CONFIG_ARGS)
        ),
    ]


def _flow_mlp_checks() -> list[Check[Any]]:
    from vla_rl.policies.layers import ACTIVATIONS, is_image_key

    return [
        *_SIZES,
        Check(
            "vector_obs_dims",
            lambda s: all(dim >= 0 for dim in s.vector_obs_dims.values()),
            "widths must not be negative",
        ),
        Check("image_keys", lambda s: all(is_image_key(key) for key in s.image_keys), "must be rgb_* keys"),
        Check("proprio_dim", lambda s: s.proprio_dim is None or s.proprio_dim >= 0, "must not be negative"),
        Check("hidden_sizes", lambda s: _positive(s.hidden_sizes), "must be positive widths"),
        Check("value_hidden_sizes", lambda s: _positive(s.value_hidden_sizes), "must be positive widths"),
        Check("cnn_channels", lambda s: _positive(s.cnn_channels), "must be positive widths"),
        Check("feature_dim", lambda s: s.feature_dim >= 1, "must be at least 1"),
        Check(
            "time_embed_dim",
            lambda s: s.time_embed_dim >= 2 and s.time_embed_dim % 2 == 0,
            "must be even and at least 2",
        ),
        Check("activation", lambda s: s.activation in ACTIVATIONS, f"must be one of {sorted(ACTIVATIONS)}"),
        Check("num_denoising_steps", lambda s: s.num_denoising_steps >= 1, "must be at least 1"),
    ]


def _gaussian_checks() -> list[Check[Any]]:
    from vla_rl.policies.layers import ACTIVATIONS

    return [
        *_SIZES,
        Check("proprio_dim", lambda s: s.proprio_dim is None or s.proprio_dim >= 0, "must not be negative"),
        Check("policy.name", lambda s: s.policy.name in ("mlp", "cnn"), "must be 'mlp' or 'cnn'"),
        Check(
            "policy.activation",
            lambda s: s.policy.activation in ACTIVATIONS,
            f"must be one of {sorted(ACTIVATIONS)}",
        ),
        Check("policy.hidden_sizes", lambda s: _positive(s.policy.hidden_sizes), "must be positive widths"),
    ]


FAMILY_CHECKS = {
    "token_vla": _token_vla_checks,
    "chunk_vla": _token_vla_checks,
    "pi0": _pi0_checks,
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
