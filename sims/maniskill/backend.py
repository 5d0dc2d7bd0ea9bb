"""The ``maniskill`` backend: ManiSkill3 tasks simulated in parallel on an NVIDIA GPU.

``cfg.task`` is a ManiSkill env id (``PickCube-v1``, ``PushCube-v1``, ``StackCube-v1``, the Bridge
digital twins such as ``PutCarrotOnPlateInScene-v1``; see ``tasks.TASKS``). Without cameras the
worlds are observed in ManiSkill's ``state_dict`` mode, with cameras in an ``rgb`` mode; either
way ``proprio`` holds the robot's joint positions and velocities and, where ManiSkill exposes it,
``privileged`` the flattened task state. Backend settings go in ``cfg.options``
(``tasks.OPTION_KEYS``). ManiSkill sets each task's own control rate, so ``cfg.control_hz`` and
``cfg.physics_dt_s`` are not used (change them through ``options.make_kwargs.sim_config``).
"""

from __future__ import annotations

import os
from pathlib import Path

import gymnasium as gym
import torch
from vla_rl.sims.maniskill.tasks import resolve_settings

from vla_rl.envs.base import BatchedEnv
from vla_rl.envs.config import EnvConfig
from vla_rl.envs.extras import import_optional, missing_modules_reason

EXTRA = "maniskill"
VULKAN_ICD_DIRS = (
    Path("/usr/share/vulkan/icd.d"),
    Path("/etc/vulkan/icd.d"),
    Path("/usr/local/share/vulkan/icd.d"),
)
"""Where Vulkan loaders look for driver manifests; NVIDIA's is ``nvidia_icd.json``."""


def _has_nvidia_vulkan_driver() -> bool:
    named = os.environ.get("VK_DRIVER_FILES") or os.environ.get("VK_ICD_FILENAMES")
    if named:
        return any("nvidia" in Path(path).name.lower() for path in named.split(os.pathsep))
    return any(
        directory.is_dir() and any(p.name.lower().startswith("nvidia") for p in directory.iterdir())
        for directory in VULKAN_ICD_DIRS
    )


def unavailable_reason() -> str | None:
    """Why ManiSkill cannot run here: it needs its extra, a CUDA GPU and NVIDIA's Vulkan driver
    (SAPIEN simulates on CUDA and renders with Vulkan; software Vulkan such as Mesa's lavapipe
    cannot create its environments)."""
    missing = []
    extra = missing_modules_reason(["mani_skill"], extra=EXTRA)
    if extra is not None:
        missing.append(extra)
    if not torch.cuda.is_available():
        missing.append("needs an NVIDIA GPU with CUDA (SAPIEN's GPU simulation)")
    if not _has_nvidia_vulkan_driver():
        missing.append("needs NVIDIA's Vulkan driver (nvidia_icd.json; Mesa's lavapipe is not enough)")
    return "; ".join(missing) or None


def _max_episode_steps(cfg: EnvConfig) -> int:
    if cfg.max_episode_steps > 0:
        return cfg.max_episode_steps
    registration = import_optional("mani_skill.utils.registration", extra=EXTRA, backend=EXTRA)
    spec = registration.REGISTERED_ENVS.get(cfg.task)
    if spec is None or not spec.max_episode_steps:
        raise ValueError(f"config key 'env.max_episode_steps': {cfg.task} has no default time limit; set one")
    return int(spec.max_episode_steps)


def make_env(cfg: EnvConfig) -> BatchedEnv:
    from vla_rl.sims.maniskill.batched_env import ManiSkillBatchedEnv
    from vla_rl.sims.maniskill.observations import ObservationLayout

    settings = resolve_settings(cfg)
    # ManiSkill asks on stdin before downloading a task's missing assets (and exits on "n"); "1"
    # answers yes without asking. Read when the prompt would be shown, so setting it here suffices.
    os.environ.setdefault("MS_SKIP_ASSET_DOWNLOAD_PROMPT", "1")
    import_optional("mani_skill.envs", extra=EXTRA, backend=EXTRA)  # registers the env ids
    limit = _max_episode_steps(cfg)
    env = gym.make(cfg.task, max_episode_steps=limit, **settings.make_kwargs)
    layout = ObservationLayout(tuple(cfg.cameras), cfg.image_size, settings.privileged)
    try:
        return ManiSkillBatchedEnv(
            env,
            layout=layout,
            instruction=settings.instruction,
            max_episode_steps=limit,
            ignore_terminations=settings.ignore_terminations,
            device=cfg.device,
        )
    except Exception:
        env.close()
        raise
