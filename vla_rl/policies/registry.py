"""Policies by name (``policy.name``): one table, imported on use.

Every policy is a ``ChunkPolicy``: ``cls.build(**values)`` from plain (config) values or
``cls.from_pretrained(directory)``. The Gaussian state policies (``ActorCriticPolicy``: ``mlp``,
``cnn``) are chunk policies too (``gaussian`` builds either as a chunk policy from its config);
state PPO builds them for one world's spaces from a ``PolicyConfig`` (:func:`build_policy`).
A policy of your own plugs in as ``"package.module:Class"`` in place of a name.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import gymnasium as gym

from vla_rl.config.structured import ConfigError
from vla_rl.policies.base import GAUSSIAN_POLICIES, ActorCriticPolicy
from vla_rl.policies.chunk_policy import ChunkPolicy
from vla_rl.policies.config import PolicyConfig
from vla_rl.policies.lerobot_folder import LEROBOT_POLICY_TYPES, PREPROCESSOR_FILE, is_lerobot_folder
from vla_rl.policies.openpi_folder import is_openpi_export
from vla_rl.policies.openvla_folder import is_openvla_folder
from vla_rl.registry import removed_decorator, resolve

POLICIES: dict[str, str] = {
    # Gaussian actor-critics (``mlp``, ``cnn``): state PPO's policies, and chunk policies of any length.
    **GAUSSIAN_POLICIES,
    "gaussian": "vla_rl.policies.base:ActorCriticPolicy",
    # Chunk policies only (token and flow VLAs need the vla extra).
    "flow_mlp": "vla_rl.policies.flow.flow_mlp:FlowMLPPolicy",
    "pi0": "vla_rl.policies.flow.pi0:Pi0Policy",
    "pi05": "vla_rl.policies.flow.pi05:Pi05Policy",
    "smolvla": "vla_rl.policies.flow.smolvla:SmolVLAPolicy",
    "token_vla": "vla_rl.policies.vla.token_vla:TokenVLA",
    "chunk_vla": "vla_rl.policies.vla.chunk_vla:ChunkVLA",
    "openvla": "vla_rl.policies.vla.openvla:OpenVLAPolicy",
}
"""Built-in policies: name -> ``"module:Class"``."""

STATE_POLICIES = ("cnn", "mlp")
"""The built-in names :func:`build_policy` builds from a ``PolicyConfig`` (state PPO's ``policy.name``)."""

register_policy = removed_decorator("register_policy", "policy.name")
register_chunk_policy = removed_decorator("register_chunk_policy", "policy.name")

VLA_EXTRA_HINT = "install the VLA extra with pip install -e '.[vla]'"


def policy_class(name: str) -> type:
    """The class of policy ``name`` (a name of :data:`POLICIES` or ``"module:Class"``)."""
    return resolve(POLICIES, name, "policy", missing_hint=VLA_EXTRA_HINT)


def registered_policies() -> list[str]:
    """The built-in state policies (what ``policy.name`` of ``vla-rl train`` accepts by name)."""
    return sorted(STATE_POLICIES)


def registered_chunk_policies() -> list[str]:
    """What ``policy.name`` of the chunk RL and SFT commands accepts by name."""
    return sorted(set(POLICIES) - set(STATE_POLICIES))


def is_state_policy(cls: object) -> bool:
    """Whether ``cls`` is built for one world's spaces from a ``PolicyConfig`` (a concrete
    ``ActorCriticPolicy``; ``gaussian`` is their family, built from a chunk config)."""
    return isinstance(cls, type) and issubclass(cls, ActorCriticPolicy) and not inspect.isabstract(cls)


def build_policy(
    cfg: PolicyConfig, observation_space: gym.spaces.Dict, action_space: gym.spaces.Box
) -> ActorCriticPolicy:
    """Build the state policy named ``cfg.name`` for one world's observation and action spaces."""
    cls = policy_class(cfg.name)
    if not is_state_policy(cls):
        raise ValueError(
            f"policy {cfg.name!r} is not a state policy (ActorCriticPolicy); "
            f"state policies: {registered_policies()}"
        )
    return cls(cfg, observation_space, action_space)


def chunk_policy_class(name: str) -> type[ChunkPolicy]:
    """The ``ChunkPolicy`` subclass of policy ``name``."""
    cls = policy_class(name)
    if not (isinstance(cls, type) and issubclass(cls, ChunkPolicy)):
        raise ValueError(
            f"policy {name!r} is not a chunk policy (ChunkPolicy); "
            f"chunk policies: {registered_chunk_policies()}"
        )
    return cls


def build_chunk_policy(name: str, **kwargs: Any) -> ChunkPolicy:
    """``chunk_policy_class(name).build(**kwargs)``: each family defines ``build`` from plain values."""
    return chunk_policy_class(name).build(**kwargs)


def load_chunk_policy(
    name: str,
    directory: str | Path,
    tokenizer_dir: str | None = None,
    openpi_asset_id: str | None = None,
    openpi_delta_action_mask: list[bool] | None = None,
    unnorm_key: str | None = None,
    trust_remote_code: bool = False,
) -> ChunkPolicy:
    """Policy ``name`` saved in ``directory``; ``tokenizer_dir`` (``policy.tokenizer_dir``) is handed to
    the families that import folders without a tokenizer (``pi0``, ``pi05``: LeRobot folders and
    openpi exports), ``openpi_asset_id`` / ``openpi_delta_action_mask`` (``policy.openpi_...``) to
    those that import openpi exports, ``unnorm_key`` / ``trust_remote_code`` (``policy.unnorm_key``,
    ``policy.trust_remote_code``) to those that import folders bringing their own code and statistics
    (``openvla``)."""
    cls = chunk_policy_class(name)
    accepted = inspect.signature(cls.from_pretrained).parameters
    given = {
        key: value
        for key, value in {
            "tokenizer_dir": tokenizer_dir,
            "openpi_asset_id": openpi_asset_id,
            "openpi_delta_action_mask": None
            if openpi_delta_action_mask is None
            else list(openpi_delta_action_mask),
            "unnorm_key": unnorm_key,
            "trust_remote_code": trust_remote_code or None,
        }.items()
        if value is not None
    }
    for key in given:
        if key not in accepted:
            raise ConfigError(f"config key 'policy.{key}': policy {name!r} takes no {key}")
    check_folder_kind(name, cls, Path(directory))
    try:
        return cls.from_pretrained(directory, **given)
    except FileNotFoundError as error:
        raise ConfigError(
            f"config key 'policy.init_from': {directory} is neither a LeRobot policy folder, an openpi "
            f"export nor a {name!r} policy saved here ({error}){_lerobot_hint(Path(directory))}"
        ) from None


def check_folder_kind(name: str, cls: type[ChunkPolicy], directory: Path) -> None:
    """``ConfigError`` for a LeRobot policy folder given to a family that does not import LeRobot
    folders (naming the folder's type and the families that import it)."""
    if is_openvla_folder(directory) and cls.registry_name != "openvla":
        raise ConfigError(
            f"config key 'policy.name': {directory} is an OpenVLA folder; policy.name=openvla imports it "
            f"({name!r} policies do not)"
        )
    imports_lerobot = getattr(cls, "lerobot_type", None) or cls.registry_name in LEROBOT_POLICY_TYPES
    if imports_lerobot:
        return
    if is_openpi_export(directory):
        raise ConfigError(
            f"config key 'policy.name': {directory} is an openpi PyTorch export; {name!r} policies do not "
            "import it (policy.name=pi0 or pi05, as its weights say)"
        )
    if not is_lerobot_folder(directory):
        return
    policy_type = json.loads((directory / "config.json").read_text())["type"]
    remedy = (
        f"policy.name={policy_type} imports it"
        if policy_type in POLICIES
        else f"the LeRobot types that load are {list(LEROBOT_POLICY_TYPES)}"
    )
    raise ConfigError(
        f"config key 'policy.name': {directory} is a LeRobot {policy_type!r} policy folder; {name!r} "
        f"policies do not import LeRobot folders ({remedy})"
    )


def _lerobot_hint(directory: Path) -> str:
    """A hint for a folder whose config.json has a LeRobot ``type`` but no processor files."""
    config = directory / "config.json"
    try:
        policy_type = json.loads(config.read_text()).get("type") if config.is_file() else None
    except (json.JSONDecodeError, AttributeError):
        return ""
    if policy_type is None:
        return ""
    return (
        f"; its config.json names a LeRobot {policy_type!r} policy but it has no {PREPROCESSOR_FILE} "
        "(LeRobot 0.4 saves the normalisation statistics in its processor files)"
    )
