"""Reading an OpenVLA (Prismatic) checkpoint folder: its kind, its modelling code, its statistics.

An OpenVLA folder as its authors publish it is a ``transformers`` folder whose ``config.json`` has
``model_type: "openvla"`` and an ``auto_map`` naming classes in Python files the folder carries
(``configuration_prismatic.py``, ``modeling_prismatic.py``, ``processing_prismatic.py``): the model
is not a class of ``transformers``, so it only loads by running that code (``trust_remote_code``).
``config.json`` also holds ``norm_stats``: per training dataset (the *un-normalisation key*), the
action statistics ``q01`` / ``q99`` (and an optional boolean ``mask`` of the dimensions that were
normalised), and ``n_action_bins``.

OpenVLA-OFT folders share that layout; their continuous action heads (L1 regression or diffusion)
and proprioception projector are separate ``action_head--*.pt`` / ``proprio_projector--*.pt`` files
that OFT's own scripts build and load, not the folder's ``from_pretrained``: they are refused here by
name (``OFT_HEAD_PREFIXES``).

Everything here is a ``ConfigError`` naming ``policy.init_from`` / ``policy.unnorm_key`` /
``policy.trust_remote_code`` when the folder cannot be used as asked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vla_rl.config.structured import ConfigError

OPENVLA_MODEL_TYPE = "openvla"
"""``config.json`` ``model_type`` of an OpenVLA folder."""
MODEL_AUTO_CLASSES = ("AutoModelForVision2Seq", "AutoModelForImageTextToText", "AutoModelForCausalLM")
"""``auto_map`` keys that may name the folder's model class, in the order they are looked for
(OpenVLA folders use the first; ``transformers`` 5 no longer has that auto class, so the class is
taken from the map by name rather than through the auto class)."""
OFT_HEAD_PREFIXES = ("action_head--", "proprio_projector--", "noisy_action_projector--")
"""File-name prefixes of OpenVLA-OFT's separately saved heads."""
OFT_CODE_MARKER = "NUM_ACTIONS_CHUNK"
"""A name OpenVLA-OFT's modelling code uses (its chunk length, chosen from the command line of the
process) and OpenVLA's does not: such code decodes a chunk in parallel, which the autoregressive
decoding here would silently get wrong, so the folder is refused."""
INIT_FROM_KEY = "policy.init_from"
UNNORM_KEY = "policy.unnorm_key"
TRUST_KEY = "policy.trust_remote_code"


@dataclass(frozen=True)
class ActionStats:
    """The un-normalisation of one dataset key: action = 0.5 (a + 1) (q99 - q01) + q01 where ``mask``,
    the normalised value a itself elsewhere."""

    q01: np.ndarray
    """float64 [A]: 1st percentile of each action dimension."""
    q99: np.ndarray
    """float64 [A]: 99th percentile of each action dimension."""
    mask: np.ndarray
    """bool [A]: the dimensions that were normalised (all True when the folder gives none)."""

    @property
    def action_dim(self) -> int:
        return int(self.q01.shape[0])


@dataclass(frozen=True)
class OpenVLAFolder:
    """An OpenVLA folder as read from its ``config.json``."""

    path: Path
    config: dict[str, Any]
    """``config.json``."""
    model_class_ref: str
    """``"module.Class"`` of the model in the folder's own code (from ``auto_map``)."""
    norm_stats: dict[str, Any]
    """``config.json`` ``norm_stats``: dataset key -> {"action": {"q01", "q99", "mask", ...}, ...}."""
    n_action_bins: int
    """``config.json`` ``n_action_bins`` (256 for the published checkpoints)."""

    @property
    def token_vocab_size(self) -> int:
        """The tokenizer's vocabulary before the model padded its embedding: action token ``t`` is
        bin ``token_vocab_size - t``."""
        text = self.config.get("text_config") or {}
        return int(text["vocab_size"]) - int(self.config.get("pad_to_multiple_of", 0))


def read_config(path: Path) -> dict[str, Any] | None:
    """``path/config.json`` as a dict; None when absent or not JSON."""
    config_file = path / "config.json"
    if not config_file.is_file():
        return None
    try:
        return json.loads(config_file.read_text())
    except json.JSONDecodeError:
        return None


def is_openvla_folder(path: str | Path) -> bool:
    """Whether ``path`` holds an OpenVLA folder (``config.json`` ``model_type`` ``openvla``)."""
    config = read_config(Path(path))
    return config is not None and config.get("model_type") == OPENVLA_MODEL_TYPE


def read_openvla_folder(path: str | Path) -> OpenVLAFolder:
    """The folder's config, model class reference and statistics; ``ConfigError`` for a folder that is
    not OpenVLA, carries OFT heads, has no modelling code or no action statistics."""
    path = Path(path)
    config = read_config(path)
    if config is None or config.get("model_type") != OPENVLA_MODEL_TYPE:
        found = None if config is None else config.get("model_type")
        raise ConfigError(
            f"config key '{INIT_FROM_KEY}': {path} is not an OpenVLA folder (config.json model_type is "
            f"{found!r}, not {OPENVLA_MODEL_TYPE!r})"
        )
    oft_heads = sorted(p.name for p in path.iterdir() if p.name.startswith(OFT_HEAD_PREFIXES))
    if oft_heads:
        raise ConfigError(
            f"config key '{INIT_FROM_KEY}': {path} is an OpenVLA-OFT folder with separately saved heads "
            f"{oft_heads}; OFT's L1-regression / diffusion action heads and proprioception projector "
            "are built by OFT's own scripts and are not mapped here (only its language-model action "
            "tokens would be)"
        )
    model_class_ref = _model_class_ref(path, config)
    code = (path / f"{model_class_ref.rsplit('.', 1)[0]}.py").read_text(errors="replace")
    if OFT_CODE_MARKER in code:
        raise ConfigError(
            f"config key '{INIT_FROM_KEY}': {path} brings OpenVLA-OFT's modelling code (it decodes "
            f"{OFT_CODE_MARKER} actions in parallel, with constants chosen from the command line and "
            "imports from OFT's own package); OFT folders are not mapped here"
        )
    return OpenVLAFolder(
        path=path,
        config=config,
        model_class_ref=model_class_ref,
        norm_stats=_norm_stats(path, config),
        n_action_bins=int(config.get("n_action_bins", 256)),
    )


def _model_class_ref(path: Path, config: dict[str, Any]) -> str:
    auto_map = config.get("auto_map") or {}
    found = [auto_map[name] for name in MODEL_AUTO_CLASSES if name in auto_map]
    if not found:
        raise ConfigError(
            f"config key '{INIT_FROM_KEY}': {path}/config.json has no auto_map entry for the model "
            f"(looked for {list(MODEL_AUTO_CLASSES)}; found {sorted(auto_map)}): an OpenVLA folder "
            "brings its own modelling code, and this one names none"
        )
    reference = found[0].split("--")[-1]  # "repo--module.Class" names code in another repository
    if "--" in found[0]:
        raise ConfigError(
            f"config key '{INIT_FROM_KEY}': {path}/config.json takes its modelling code from another "
            f"repository ({found[0]!r}); only code inside the folder is run (local files only)"
        )
    module = reference.rsplit(".", 1)[0]
    if not (path / f"{module}.py").is_file():
        raise ConfigError(
            f"config key '{INIT_FROM_KEY}': {path} has no modelling code: config.json auto_map names "
            f"{reference!r} but {module}.py is not in the folder"
        )
    return reference


def _norm_stats(path: Path, config: dict[str, Any]) -> dict[str, Any]:
    stats = config.get("norm_stats")
    if not isinstance(stats, dict) or not stats:
        raise ConfigError(
            f"config key '{INIT_FROM_KEY}': {path}/config.json has no norm_stats (the per-dataset "
            "action statistics that un-normalise its actions)"
        )
    return stats


def resolve_unnorm_key(folder: OpenVLAFolder, unnorm_key: str | None) -> str:
    """The dataset key whose statistics un-normalise the actions: ``unnorm_key``, or the only key;
    ``ConfigError`` naming the available keys when it is missing, ambiguous or unknown."""
    keys = sorted(folder.norm_stats)
    if unnorm_key is None:
        if len(keys) == 1:
            return keys[0]
        raise ConfigError(
            f"config key '{UNNORM_KEY}': {folder.path} has action statistics for {len(keys)} datasets; "
            f"choose one of {keys}"
        )
    if unnorm_key not in folder.norm_stats:
        raise ConfigError(
            f"config key '{UNNORM_KEY}': {unnorm_key!r} is not a dataset of {folder.path}; "
            f"choose one of {keys}"
        )
    return unnorm_key


def action_stats(folder: OpenVLAFolder, unnorm_key: str) -> ActionStats:
    """The ``action`` statistics of ``unnorm_key``; ``ConfigError`` when q01 / q99 are missing or
    disagree in width, or q99 < q01."""
    action = (folder.norm_stats.get(unnorm_key) or {}).get("action") or {}
    missing = [name for name in ("q01", "q99") if name not in action]
    if missing:
        raise ConfigError(
            f"config key '{UNNORM_KEY}': the {unnorm_key!r} statistics of {folder.path} have no action "
            f"{missing} (found {sorted(action)})"
        )
    q01 = np.asarray(action["q01"], dtype=np.float64)
    q99 = np.asarray(action["q99"], dtype=np.float64)
    mask = np.asarray(action.get("mask", np.ones_like(q01, dtype=bool)), dtype=bool)
    if q01.ndim != 1 or q01.shape != q99.shape or mask.shape != q01.shape:
        raise ConfigError(
            f"config key '{UNNORM_KEY}': the {unnorm_key!r} action statistics of {folder.path} differ in "
            f"width (q01 {q01.shape}, q99 {q99.shape}, mask {mask.shape})"
        )
    if bool((q99 < q01).any()):
        raise ConfigError(
            f"config key '{UNNORM_KEY}': the {unnorm_key!r} action statistics of {folder.path} have q99 < q01"
        )
    return ActionStats(q01=q01, q99=q99, mask=mask)
