"""Evaluate a policy (state or chunk) on whole episodes of a fresh environment, optionally recording a video.

Every world contributes a fixed quota of its *first* episodes (the quotas sum to
``num_episodes``), so short episodes, which finish more often, are not over-counted. The video
comes from a separate small env with a camera, so metric worlds never pay for rendering.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from vla_rl.envs import EnvConfig, make_env
from vla_rl.envs.base import BatchedEnv
from vla_rl.envs.registry import evaluation_env_config
from vla_rl.policies.base import ActorCriticPolicy
from vla_rl.policies.chunk_policy import ChunkPolicy
from vla_rl.training.env_fit import check_policy_env
from vla_rl.training.executors import Executor, make_executor
from vla_rl.training.progress import phase_bar

log = logging.getLogger(__name__)

EVAL_SEED_OFFSET = 1_000_003
"""A run's evaluations use the episodes (and sampling noise) of seed ``cfg.seed + EVAL_SEED_OFFSET``:
fixed per run, apart from training's."""
SUMMARY_FILENAME = "eval_summary.json"
VIDEO_FILENAME = "eval.mp4"


@dataclass
class EvalResult:
    success_rate: float
    """Fraction of episodes successful at their last step."""
    success_once_rate: float
    """Fraction of episodes successful at any step."""
    mean_return: float
    """Mean undiscounted episode return."""
    mean_length: float
    """Mean episode length in control steps."""
    num_episodes: int
    """Episodes counted."""
    split: str
    """Randomisation split evaluated."""
    video_path: str | None = None
    """The mp4 written, if any."""
    success_by_instruction: dict[str, float] = field(default_factory=dict)
    """Success rate (at the last step) of the episodes of each instruction: per task on multi-task
    benchmarks such as MetaWorld's MT10."""


def episode_quotas(num_episodes: int, num_envs: int) -> np.ndarray:
    """Episodes each world contributes: as equal as possible, the first worlds take the remainder.

    >>> episode_quotas(10, 4).tolist()
    [3, 3, 2, 2]
    """
    quotas = np.full(num_envs, num_episodes // num_envs, dtype=np.int64)
    quotas[: num_episodes % num_envs] += 1
    return quotas


@torch.no_grad()
def evaluate(
    policy: ChunkPolicy,
    env_cfg: EnvConfig,
    num_episodes: int,
    deterministic: bool = True,
    video_dir: str | Path | None = None,
    split: str | None = None,
    *,
    seed: int = EVAL_SEED_OFFSET,
    execute_steps: int = 0,
    temperature: float = 1.0,
    ensemble_decay: float | None = None,
    num_envs: int = 0,
    video_envs: int = 4,
    video_camera: str = "front",
    video_size: int = 128,
    summary_path: str | Path | None = None,
    wrap_env: Callable[[BatchedEnv], BatchedEnv] | None = None,
) -> EvalResult:
    """Run ``num_episodes`` episodes of ``policy`` (a state or a chunk policy) on a fresh env built
    from ``env_cfg``.

    A chunk policy executes ``execute_steps`` actions of each chunk before re-planning (``<= 0``:
    whole chunks), or ensembles its plans with ``ensemble_decay`` (``vla_rl.training.executors``);
    ``temperature`` scales its sampling noise. ``split`` overrides ``env_cfg.split``;
    ``num_envs <= 0`` uses ``env_cfg.num_envs`` (never more worlds than episodes). With
    ``video_dir`` an mp4 of the first episode of ``video_envs`` worlds side by side is written
    there. The summary JSON goes to ``summary_path`` (default ``video_dir``/eval_summary.json).
    ``wrap_env`` turns each env built into the one the policy acts in (e.g. an off-policy learner's
    frozen policy, ``vla_rl.training.off_policy.frozen_policy_env``).

    The evaluation draws from its own random stream seeded with ``seed`` and leaves the global
    generators as they were, so it can run in the middle of training without changing what
    training does next.
    """
    split = split or env_cfg.split
    worlds = min(num_envs if num_envs > 0 else env_cfg.num_envs, max(num_episodes, 1))
    eval_cfg = dataclasses.replace(
        evaluation_env_config(env_cfg), num_envs=worlds, split=split, pipeline_stages=1
    )

    def executor(num_worlds: int) -> Executor:
        return make_executor(policy, num_worlds, execute_steps, deterministic, temperature, ensemble_decay)

    was_training = policy.training
    policy.eval()
    try:
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            env = make_env(eval_cfg)
            env = wrap_env(env) if wrap_env is not None else env
            try:
                if isinstance(policy, ChunkPolicy):
                    check_policy_env(policy, env)
                result = run_episodes(executor(env.num_envs), env, num_episodes, seed)
            finally:
                env.close()
            result.split = split
            if video_dir is not None and video_envs > 0:
                video_cfg = video_env_config(eval_cfg, video_envs, video_camera, video_size)
                result.video_path = record_video(
                    executor(video_envs), video_cfg, video_camera, seed, video_dir, wrap_env
                )
    finally:
        policy.train(was_training)
    write_summary(result, summary_path, video_dir)
    return result


def evaluate_run(
    policy: ActorCriticPolicy | ChunkPolicy,
    cfg: Any,
    out_dir: Path | None = None,
    video: bool | None = None,
    summary_name: str = SUMMARY_FILENAME,
    **settings: Any,
) -> EvalResult:
    """A run's evaluation of ``policy`` on the run's evaluation episodes (seed ``cfg.seed +
    EVAL_SEED_OFFSET``): the settings of ``cfg.eval`` that are keywords of ``evaluate`` (same
    names: ``num_episodes``, ``deterministic``, ``split``, ``num_envs``, ``execute_steps``, ...),
    ``settings`` in place of any of them. With ``out_dir`` the summary goes there as
    ``summary_name``, and the video too when ``video`` (default: ``cfg.eval.video``, off where the
    job has no such key) is on."""
    ecfg = cfg.eval
    keywords = inspect.signature(evaluate).parameters
    given = {name: value for name, value in vars(ecfg).items() if name in keywords}
    video = getattr(ecfg, "video", False) if video is None else video
    return evaluate(
        policy,
        cfg.env,
        **{**given, **settings},
        video_dir=out_dir if video else None,
        seed=cfg.seed + EVAL_SEED_OFFSET,
        summary_path=None if out_dir is None else out_dir / summary_name,
    )


def write_summary(result: EvalResult, summary_path: str | Path | None, video_dir: str | Path | None) -> None:
    """Write ``result`` as JSON to ``summary_path`` (default: ``video_dir``/eval_summary.json, if any)."""
    if summary_path is None and video_dir is not None:
        summary_path = Path(video_dir) / SUMMARY_FILENAME
    if summary_path is not None:
        Path(summary_path).parent.mkdir(parents=True, exist_ok=True)
        Path(summary_path).write_text(json.dumps(dataclasses.asdict(result), indent=2) + "\n")


def run_episodes(executor: Executor, env: BatchedEnv, num_episodes: int, seed: int) -> EvalResult:
    """Step ``env`` with ``executor`` until every world has finished its quota of first episodes.

    The executor hears of every step on which some episode ended (before its next ``act``).
    """
    quotas = episode_quotas(num_episodes, env.num_envs)
    counted = np.zeros(env.num_envs, dtype=np.int64)
    counts: dict[str, list[float]] = {key: [] for key in ("success", "success_once", "return", "length")}
    """Of every counted episode: its entry of the env's ``info["episode"]``."""
    by_instruction: dict[str, list[bool]] = {}
    bar = phase_bar("evaluation", int(quotas.sum()), "episode")
    obs, _ = env.reset(seed=seed)
    while (counted < quotas).any():
        step = env.step(executor.act(obs).to(env.device))
        obs = step.obs
        done = step.done.cpu()
        if not bool(done.any()):
            continue
        executor.episodes_ended(done)
        episode = {k: v.cpu().numpy() for k, v in step.info["episode"].items()}
        instructions = step.info["final_obs"].get("instruction")  # absent on plain Gymnasium envs
        for i in np.flatnonzero(done.numpy() & (counted < quotas)):
            if instructions is not None:
                by_instruction.setdefault(instructions[i], []).append(bool(episode["success"][i]))
            for key, values in counts.items():
                values.append(float(episode[key][i]))
            counted[i] += 1
        if counts["success"]:
            bar.update(len(counts["success"]) - bar.n)
            bar.set_postfix(success=f"{np.mean(counts['success']):.2f}")
    bar.close()
    mean = {key: float(np.mean(values)) if values else 0.0 for key, values in counts.items()}
    return EvalResult(
        success_rate=mean["success"],
        success_once_rate=mean["success_once"],
        mean_return=mean["return"],
        mean_length=mean["length"],
        num_episodes=len(counts["success"]),
        split="",
        success_by_instruction={
            text: float(np.mean(flags)) for text, flags in sorted(by_instruction.items())
        },
    )


def video_env_config(cfg: EnvConfig, video_envs: int, camera: str, size: int) -> EnvConfig:
    """Pixel policies keep their cameras and image size (the policy needs them); state policies
    get just the video camera at ``size``."""
    if cfg.cameras:
        cameras = list(cfg.cameras) + ([camera] if camera not in cfg.cameras else [])
        return dataclasses.replace(cfg, num_envs=video_envs, cameras=cameras, pipeline_stages=1)
    return dataclasses.replace(cfg, num_envs=video_envs, cameras=[camera], image_size=size, pipeline_stages=1)


def record_video(
    executor: Executor,
    cfg: EnvConfig,
    camera: str,
    seed: int,
    video_dir: str | Path,
    wrap_env: Callable[[BatchedEnv], BatchedEnv] | None = None,
) -> str | None:
    """Record each world's first episode side by side; finished worlds hold their last frame."""
    import imageio.v2 as imageio

    key = f"rgb_{camera}"
    env = make_env(cfg)
    env = wrap_env(env) if wrap_env is not None else env
    try:
        if key not in env.observation_space.spaces:
            log.warning("environment has no %r observation; no video written", key)
            return None
        obs, _ = env.reset(seed=seed)
        frames = [tile_worlds(obs[key])]
        finished = torch.zeros(env.num_envs, dtype=torch.bool)
        last = obs[key].cpu().clone()
        while not bool(finished.all()):
            step = env.step(executor.act(obs).to(env.device))
            done = step.done.cpu()
            executor.episodes_ended(done)
            current = torch.where(
                done[:, None, None, None], step.info["final_obs"][key].cpu(), step.obs[key].cpu()
            )
            last = torch.where(finished[:, None, None, None], last, current)
            finished |= done
            frames.append(tile_worlds(last))
            obs = step.obs
    finally:
        env.close()
    path = Path(video_dir) / VIDEO_FILENAME
    path.parent.mkdir(parents=True, exist_ok=True)
    imageio.mimwrite(path, frames, fps=max(int(round(cfg.control_hz)), 1), macro_block_size=1)
    return str(path)


def tile_worlds(images: torch.Tensor) -> np.ndarray:
    """[N, H, W, 3] uint8 -> [H, N * W, 3], worlds side by side."""
    images = images.cpu()
    return torch.cat(list(images), dim=1).numpy()
