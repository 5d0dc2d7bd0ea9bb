"""Atomic, pickle-free checkpoints: ``<run_dir>/checkpoints/iter_000123/``.

Each checkpoint directory holds

* ``policy.safetensors``: the policy ``state_dict`` (including its observation normaliser), or
  instead whatever a ``write_extra`` callback writes (e.g. a ``save_pretrained`` policy folder);
* ``trainer_state.safetensors``: every tensor or array of the trainer state (optimizer moments,
  torch RNG, simulator state arrays);
* ``trainer_state.json``: the rest (iteration, env steps, learning rate, optimizer
  hyperparameters, Python/numpy RNG scalars, JSON-able env state) and where each tensor goes;
* ``config.yaml``: the resolved training config.

A checkpoint is written into a hidden temporary sibling, fsynced and renamed into place, and only
then does ``checkpoints/latest`` (a one-line text file, itself replaced atomically) point at it, so
a crash at any moment leaves the previous checkpoint intact and loadable.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf
from safetensors.torch import load_file, save_file

from vla_rl.config.load import ConfigError
from vla_rl.config.schema import TrainConfig
from vla_rl.config.structured import NOT_SAVED
from vla_rl.training.progress import phase_bar
from vla_rl.training.state_codec import decode_state, encode_state

CHECKPOINTS_DIRNAME = "checkpoints"
POLICY_DIRNAME = "policy"
"""Sub-folder of a chunk-policy checkpoint (SFT, RL) holding the policy's ``save_pretrained``."""
LATEST_FILENAME = "latest"
POLICY_FILENAME = "policy.safetensors"
STATE_TENSORS_FILENAME = "trainer_state.safetensors"
STATE_JSON_FILENAME = "trainer_state.json"
CONFIG_FILENAME = "config.yaml"
_PREFIX = "iter_"
_TMP_PREFIX = ".tmp-"


@dataclass
class Checkpoint:
    """A loaded checkpoint."""

    path: Path
    """The ``iter_XXXXXX`` directory."""
    iteration: int
    """Training iterations completed when it was written."""
    policy_state: dict[str, torch.Tensor]
    """Policy ``state_dict``; empty when the checkpoint stored the policy some other way."""
    trainer_state: dict[str, Any]
    """The trainer state exactly as given to ``save_checkpoint``."""
    config_path: Path
    """The resolved ``config.yaml``."""


def checkpoint_name(iteration: int) -> str:
    return f"{_PREFIX}{iteration:06d}"


def save_checkpoint(
    run_dir: str | Path,
    iteration: int,
    policy_state: dict[str, torch.Tensor] | None,
    trainer_state: dict[str, Any],
    config: TrainConfig | Any,
    keep: int = 0,
    write_extra: Callable[[Path], None] | None = None,
) -> Path:
    """Write checkpoint ``iteration`` atomically, point ``latest`` at it and prune to ``keep``
    (``<= 0`` keeps all). Returns the checkpoint directory.

    ``config`` is any structured-config dataclass. ``policy_state`` None writes no
    ``policy.safetensors``; ``write_extra(directory)`` may add files or folders to the checkpoint
    before it is fsynced and moved into place (so they are as atomic as the rest)."""
    root = Path(run_dir) / CHECKPOINTS_DIRNAME
    root.mkdir(parents=True, exist_ok=True)
    final = root / checkpoint_name(iteration)
    tmp = root / f"{_TMP_PREFIX}{final.name}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    bar = phase_bar("saving", 3, "stage", leave=False)  # write, fsync, move into place
    bar.set_postfix_str(final.name)
    try:
        _write_contents(tmp, iteration, policy_state, trainer_state, config)
        if write_extra is not None:
            write_extra(tmp)
        bar.update()
        _fsync_tree(tmp)
        bar.update()
        _replace_dir(tmp, final)
        _fsync_dir(root)
        bar.update()
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        bar.close()
    _write_text_atomic(root / LATEST_FILENAME, final.name + "\n")
    if keep > 0:
        prune_checkpoints(root, keep)
    return final


def load_checkpoint(path: str | Path) -> Checkpoint:
    """Load a checkpoint from its directory, a ``checkpoints`` folder or a run folder (the last
    two use ``latest``)."""
    directory = resolve_checkpoint_dir(path)
    meta = json.loads((directory / STATE_JSON_FILENAME).read_text())
    tensors = load_file(str(directory / STATE_TENSORS_FILENAME))
    policy_file = directory / POLICY_FILENAME
    return Checkpoint(
        path=directory,
        iteration=int(meta["iteration"]),
        policy_state=load_file(str(policy_file)) if policy_file.is_file() else {},
        trainer_state=decode_state(tensors, meta["state"]),
        config_path=directory / CONFIG_FILENAME,
    )


def resolve_checkpoint_dir(path: str | Path) -> Path:
    """Map a run folder, its ``checkpoints`` folder or a checkpoint folder to the checkpoint."""
    path = Path(path)
    if _is_checkpoint(path):
        return path
    for root in (path / CHECKPOINTS_DIRNAME, path):
        found = latest_checkpoint(root)
        if found is not None:
            return found
    raise FileNotFoundError(f"no checkpoint found at {path}")


def find_resume_checkpoint(resume: str | None, run_dir: str | Path) -> Checkpoint | None:
    """The checkpoint a run continues from: none without ``resume``; with ``auto``, the latest in
    ``run_dir`` if there is one; otherwise the run or checkpoint folder ``resume`` names."""
    if not resume:
        return None
    if resume == "auto":
        found = latest_checkpoint(Path(run_dir) / CHECKPOINTS_DIRNAME)
        return load_checkpoint(found) if found is not None else None
    return load_checkpoint(resume)


def latest_checkpoint(checkpoints_dir: str | Path) -> Path | None:
    """The checkpoint ``latest`` names in ``checkpoints_dir``, else the highest iteration."""
    root = Path(checkpoints_dir)
    latest_file = root / LATEST_FILENAME
    if latest_file.is_file():
        candidate = root / latest_file.read_text().strip()
        if _is_checkpoint(candidate):
            return candidate
    found = list_checkpoints(root)
    return found[-1] if found else None


def list_checkpoints(checkpoints_dir: str | Path) -> list[Path]:
    """Complete checkpoint directories, oldest first."""
    root = Path(checkpoints_dir)
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.is_dir() and p.name.startswith(_PREFIX)]
    return sorted(found, key=lambda p: p.name)


def prune_checkpoints(checkpoints_dir: str | Path, keep: int) -> list[Path]:
    """Delete all but the newest ``keep`` checkpoints (never the one ``latest`` names)."""
    found = list_checkpoints(checkpoints_dir)
    latest = latest_checkpoint(checkpoints_dir)
    removed = [p for p in found[: max(len(found) - keep, 0)] if p != latest]
    for path in removed:
        shutil.rmtree(path)
    return removed


def write_config(directory: Path, config: Any) -> None:
    """``config`` (a config dataclass) resolved into ``directory/config.yaml``, its ``secret_keys``
    (e.g. a learner server's token) replaced by ``NOT_SAVED`` where set."""
    tree = OmegaConf.structured(config)
    for key in getattr(config, "secret_keys", ()):
        if OmegaConf.select(tree, key) is not None:
            OmegaConf.update(tree, key, NOT_SAVED)
    (directory / CONFIG_FILENAME).write_text(OmegaConf.to_yaml(tree))


def _is_checkpoint(path: Path) -> bool:
    """The trainer state is written into every checkpoint, whatever holds the policy."""
    return (path / STATE_JSON_FILENAME).is_file()


def _write_contents(
    directory: Path,
    iteration: int,
    policy_state: dict[str, torch.Tensor] | None,
    trainer_state: dict[str, Any],
    config: Any,
) -> None:
    if policy_state is not None:
        policy_tensors = {k: v.detach().cpu().clone().contiguous() for k, v in policy_state.items()}
        save_file(policy_tensors, str(directory / POLICY_FILENAME))
    tensors, skeleton = encode_state(trainer_state)
    save_file(tensors, str(directory / STATE_TENSORS_FILENAME))
    meta = {"iteration": iteration, "state": skeleton}
    (directory / STATE_JSON_FILENAME).write_text(json.dumps(meta, indent=1))
    write_config(directory, config)


def _fsync_tree(directory: Path) -> None:
    """fsync every file below ``directory``, then the folders themselves (deepest first)."""
    folders = [directory]
    for path in sorted(directory.rglob("*")):
        if path.is_dir():
            folders.append(path)
        else:
            _fsync_file(path)
    for folder in reversed(folders):
        _fsync_dir(folder)


def _replace_dir(source: Path, target: Path) -> None:
    """``os.replace`` for directories; an existing ``target`` (same iteration written again after
    a resume) is moved aside first and deleted after the swap."""
    if not target.exists():
        os.replace(source, target)
        return
    aside = target.with_name(f"{_TMP_PREFIX}old-{target.name}-{os.getpid()}")
    os.replace(target, aside)
    os.replace(source, target)
    shutil.rmtree(aside, ignore_errors=True)


def _write_text_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f"{_TMP_PREFIX}{path.name}-{os.getpid()}")
    tmp.write_text(text)
    _fsync_file(tmp)
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def resolve_policy_dir(path: str | Path) -> Path:
    """The policy folder of ``policy.init_from``: an SFT or RL run folder (its latest checkpoint), a
    checkpoint folder, or a policy folder itself."""
    path = Path(path)
    if (path / CHECKPOINTS_DIRNAME).is_dir():
        found = latest_checkpoint(path / CHECKPOINTS_DIRNAME)
        if found is None:
            raise ConfigError(f"config key 'policy.init_from': {path} has no checkpoint yet")
        path = found
    if (path / POLICY_DIRNAME).is_dir():
        return path / POLICY_DIRNAME
    if path.is_dir():
        return path
    raise ConfigError(f"config key 'policy.init_from': {path} is not a folder")


def load_trained_actor_critic(cfg: Any, directory: str | Path) -> torch.nn.Module:
    """The actor-critic of a ``vla-rl train`` checkpoint: built for one world of ``cfg.env`` (a
    ``TrainConfig``; the spaces come from a probe env) and loaded with the checkpoint's weights."""
    import dataclasses

    from vla_rl.envs import make_env
    from vla_rl.policies import build_policy

    probe = make_env(dataclasses.replace(cfg.env, num_envs=1, pipeline_stages=1))
    try:
        policy = build_policy(cfg.policy, probe.observation_space, probe.action_space)
    finally:
        probe.close()
    policy.load_state_dict(load_checkpoint(directory).policy_state)
    return policy
