"""Record scripted-expert demonstrations in the batched MuJoCo env and write them as a dataset.

Every world of the batched env runs the expert; when a world's episode ends its recorded steps
become an ``Episode`` (the observation *before* each action, the action, the reward and success
flag *after* it), which is written at once, so an interrupted collection keeps what it finished.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Protocol

import numpy as np
import torch

from vla_rl.data.config import CollectConfig
from vla_rl.data.episode import Episode
from vla_rl.data.lerobot_format import (
    DEFAULT_CODEBASE_VERSION,
    DEFAULT_FINALIZE_EVERY_EPISODES,
    dataset_writer,
)
from vla_rl.data.lerobot_layout import ACTION_KEY, PRIVILEGED_KEY, STATE_KEY
from vla_rl.data.video import VideoSettings
from vla_rl.envs import BatchedEnv, Observation, make_env
from vla_rl.envs.batching import obs_to_device

log = logging.getLogger(__name__)

EXPERT_ACTION_KEY = "expert_action"


class Actor(Protocol):
    """What acts while recording: the scripted expert or a trained policy."""

    def act(self, obs: Observation) -> tuple[torch.Tensor, torch.Tensor]:
        """(executed action [N, A], clean action label [N, A])."""
        ...


ActorFactory = Callable[[BatchedEnv], Actor]
EE_DELTA_POS_ACTION_NAMES = ["dx", "dy", "dz", "gripper"]


def field_names(fields: Sequence[tuple[str, int]]) -> list[str]:
    """Per-dimension names of a field layout: ``(("tcp_pos", 3), ("opening", 1))`` ->
    ``["tcp_pos_0", "tcp_pos_1", "tcp_pos_2", "opening"]``."""
    return [name if size == 1 else f"{name}_{i}" for name, size in fields for i in range(size)]


def recorded_feature_names(
    state_fields: Sequence[tuple[str, int]],
    privileged_fields: Sequence[tuple[str, int]] | None,
    record_expert: bool,
    action_names: Sequence[str] = EE_DELTA_POS_ACTION_NAMES,
) -> dict[str, list[str]]:
    """Names of the state and action dimensions a collection records (``ee_delta_pos`` by default),
    and of the privileged state (when ``privileged_fields`` is given) and the expert action
    (``record_expert``)."""
    names = {STATE_KEY: field_names(state_fields), ACTION_KEY: list(action_names)}
    if privileged_fields is not None:
        names[PRIVILEGED_KEY] = field_names(privileged_fields)
    if record_expert:
        names[EXPERT_ACTION_KEY] = list(action_names)
    return names


@dataclass(frozen=True)
class ExpertRecording:
    """A backend's scripted expert and the layout of what a collection in that backend records."""

    make_expert: Callable[[], Actor]
    """Builds the expert (not called when a policy checkpoint acts instead)."""
    state_fields: Sequence[tuple[str, int]]
    """Layout of ``obs["proprio"]`` (stored as ``observation.state``)."""
    privileged_fields: Sequence[tuple[str, int]]
    """Layout of ``obs["privileged"]``."""
    action_names: Sequence[str]


def mujoco_recording(cfg: CollectConfig) -> ExpertRecording:
    """The built-in tasks' scripted experts (``vla_rl.sims.tasks.scripted``)."""
    from vla_rl.sims.mujoco.observations import PROPRIO_FIELDS
    from vla_rl.sims.tasks.registry import TASKS
    from vla_rl.sims.tasks.scripted import ScriptedExpert

    expert = partial(ScriptedExpert, cfg.env.task, noise_std=cfg.noise_std, seed=cfg.seed)
    return ExpertRecording(
        expert, PROPRIO_FIELDS, TASKS[cfg.env.task].privileged_fields, EE_DELTA_POS_ACTION_NAMES
    )


def libero_recording(cfg: CollectConfig) -> ExpertRecording:
    """LIBERO's pick-and-place expert (``vla_rl.sims.libero.expert``), 7-D OSC_POSE actions."""
    from vla_rl.sims.libero.expert import ACTION_NAMES, STATE_FIELDS, LiberoExpert
    from vla_rl.sims.libero.privileged import PRIVILEGED_FIELDS

    expert = partial(LiberoExpert, noise_std=cfg.noise_std, seed=cfg.seed)
    return ExpertRecording(expert, STATE_FIELDS, PRIVILEGED_FIELDS, ACTION_NAMES)


EXPERT_RECORDINGS: dict[str, Callable[[CollectConfig], ExpertRecording]] = {
    "mujoco": mujoco_recording,
    "libero": libero_recording,
}
"""``env.backend`` -> its scripted expert for ``vla-rl collect`` (MetaWorld's experts record through
``vla_rl.data.metaworld_collect``)."""


class EpisodeRecorder:
    """Per-world step buffers of a batched env, turned into Episodes as worlds finish."""

    def __init__(self, num_envs: int, cameras: Sequence[str], record_privileged: bool, record_expert: bool):
        self.cameras = list(cameras)
        self.record_privileged = record_privileged
        self.record_expert = record_expert
        self.buffers: list[dict[str, list]] = [self._empty() for _ in range(num_envs)]
        self.instructions: list[str] = [""] * num_envs

    def _empty(self) -> dict[str, list]:
        keys = ["proprio", "privileged", "actions", "expert", "rewards", "success"]
        return {key: [] for key in keys + [f"rgb_{camera}" for camera in self.cameras]}

    def record(
        self,
        obs: Observation,
        action: torch.Tensor,
        expert_action: torch.Tensor,
        reward: torch.Tensor,
        success: torch.Tensor,
    ) -> None:
        """One step of all worlds: ``obs`` before ``action``, ``reward``/``success`` after it."""
        arrays = {
            "proprio": obs["proprio"].cpu().numpy(),
            "actions": action.cpu().numpy(),
            "rewards": reward.cpu().numpy(),
            "success": success.cpu().numpy(),
        }
        if self.record_privileged:
            arrays["privileged"] = obs["privileged"].cpu().numpy()
        if self.record_expert:
            arrays["expert"] = expert_action.cpu().numpy()
        for camera in self.cameras:
            arrays[f"rgb_{camera}"] = obs[f"rgb_{camera}"].cpu().numpy()
        for world, buffer in enumerate(self.buffers):
            if not buffer["actions"] and "instruction" in obs:  # an env without instructions records ""
                self.instructions[world] = obs["instruction"][world]
            for key, value in arrays.items():
                buffer[key].append(value[world].copy())

    def finish(self, world: int, success: bool) -> Episode:
        """The finished episode of ``world``; its buffers start empty for the next one."""
        buffer, self.buffers[world] = self.buffers[world], self._empty()
        extras = {}
        if self.record_expert:
            extras[EXPERT_ACTION_KEY] = np.stack(buffer["expert"]).astype(np.float32)
        return Episode(
            images={camera: np.stack(buffer[f"rgb_{camera}"]) for camera in self.cameras},
            proprio=np.stack(buffer["proprio"]).astype(np.float32),
            actions=np.stack(buffer["actions"]).astype(np.float32),
            instruction=self.instructions[world],
            success=success,
            rewards=np.asarray(buffer["rewards"], dtype=np.float32),
            privileged=np.stack(buffer["privileged"]).astype(np.float32) if self.record_privileged else None,
            success_per_step=np.asarray(buffer["success"], dtype=bool),
            extras=extras,
        )


@dataclass
class CollectResult:
    """What a collection produced."""

    path: Path
    """Dataset directory."""
    episodes_written: int
    """Episodes written by this collection (not counting ones already in an appended dataset)."""
    episodes_attempted: int
    """Episodes run to their end, successful or not."""
    successes: int
    """Attempted episodes that ended in success."""
    frames_written: int
    """Frames (control steps) in the written episodes."""
    wall_time_s: float
    """Seconds from env creation to the dataset being closed."""

    @property
    def success_rate(self) -> float:
        return self.successes / max(self.episodes_attempted, 1)

    @property
    def episodes_per_minute(self) -> float:
        return 60.0 * self.episodes_written / max(self.wall_time_s, 1e-9)


def collect_demonstrations(cfg: CollectConfig, make_actor: ActorFactory | None = None) -> CollectResult:
    """Run the scripted expert of ``cfg.env.task`` until ``cfg.num_episodes`` episodes are written.

    ``make_actor(env)`` builds what acts instead: ``vla-rl collect`` passes one that loads the
    policy of ``cfg.policy_checkpoint`` (``vla_rl.training.policy_actor``, a layer above this one)."""
    torch.set_num_threads(cfg.torch_num_threads)
    start = time.perf_counter()
    recording = EXPERT_RECORDINGS[cfg.env.backend](cfg)
    record_expert = cfg.record_expert_actions and cfg.noise_std > 0 and not cfg.policy_checkpoint
    privileged_fields = recording.privileged_fields if cfg.record_privileged else None
    names = recorded_feature_names(
        recording.state_fields, privileged_fields, record_expert, recording.action_names
    )
    env = make_env(cfg.env)
    try:
        actor = _actor(cfg, env, make_actor, recording.make_expert)
        result = record_dataset(
            env,
            actor,
            cfg.output_dir,
            cfg.env.cameras,
            names,
            start,
            num_episodes=cfg.num_episodes,
            max_attempts=cfg.max_attempts,
            keep_failures=cfg.keep_failures,
            seed=cfg.seed,
            robot_type=cfg.robot_type,
            video=cfg.video.settings(),
            append=cfg.append,
            codebase_version=cfg.codebase_version,
            finalize_every_episodes=cfg.finalize_every_episodes,
        )
    finally:
        env.close()
    if result.episodes_written < cfg.num_episodes:
        log.warning(
            "collect %s: only %d of %d episodes after %d attempts (success rate %.2f)",
            cfg.env.task,
            result.episodes_written,
            cfg.num_episodes,
            result.episodes_attempted,
            result.success_rate,
        )
    return result


def record_dataset(
    env: BatchedEnv,
    actor: Actor,
    output_dir: str | Path,
    cameras: Sequence[str],
    feature_names: dict[str, list[str]],
    start_s: float,
    *,
    num_episodes: int,
    max_attempts: int,
    keep_failures: bool,
    seed: int,
    robot_type: str,
    video: VideoSettings | None,
    append: bool,
    success_key: str = "success",
    codebase_version: str = DEFAULT_CODEBASE_VERSION,
    finalize_every_episodes: int = DEFAULT_FINALIZE_EVERY_EPISODES,
) -> CollectResult:
    """Step ``env`` from ``reset(seed)`` with ``actor`` and write each episode as it ends (failed ones
    only with ``keep_failures``) into the dataset at ``output_dir`` (new, or continued with ``append``)
    until ``num_episodes`` are written or ``max_attempts`` have ended (``<= 0``: ``10 * num_episodes``).
    ``success_key`` is the ``info["episode"]`` flag that says an episode succeeded; ``codebase_version``
    is the LeRobot dataset version written (a v3.0 writer finalises every ``finalize_every_episodes``).
    The episodes keep the privileged state and the expert action when ``feature_names`` names them
    (``recorded_feature_names``). ``start_s`` is the ``time.perf_counter()`` the collection began at."""
    recorder = EpisodeRecorder(
        env.num_envs, cameras, PRIVILEGED_KEY in feature_names, EXPERT_ACTION_KEY in feature_names
    )
    max_attempts = max_attempts if max_attempts > 0 else 10 * num_episodes
    written = attempted = successes = frames = 0
    writer = dataset_writer(
        output_dir,
        env.control_hz,
        codebase_version,
        robot_type=robot_type,
        video=video,
        feature_names=feature_names,
        append=append,
        finalize_every_episodes=finalize_every_episodes,
    )
    with writer:
        obs, _ = env.reset(seed=seed)
        while written < num_episodes and attempted < max_attempts:
            executed, clean = actor.act(obs_to_device(obs, "cpu"))
            result = env.step(executed.to(env.device))
            recorder.record(obs, executed, clean, result.reward, result.info["success"])
            for world in result.done.nonzero().flatten().tolist():
                if written >= num_episodes or attempted >= max_attempts:
                    break
                success = bool(result.info["episode"][success_key][world])
                episode = recorder.finish(world, success)
                attempted += 1
                successes += success
                if success or keep_failures:
                    writer.add_episode(episode)
                    written += 1
                    frames += len(episode)
            if result.done.any():
                log.info("collect: %d/%d episodes written, %d attempted", written, num_episodes, attempted)
            obs = result.obs
    return CollectResult(
        Path(output_dir), written, attempted, successes, frames, time.perf_counter() - start_s
    )


def _actor(
    cfg: CollectConfig, env: BatchedEnv, make_actor: ActorFactory | None, make_expert: Callable[[], Actor]
) -> Actor:
    """What acts: ``make_actor(env)``, or else the task's scripted expert (``make_expert()``)."""
    if make_actor is not None:
        return make_actor(env)
    if cfg.policy_checkpoint:
        raise ValueError(
            "policy_checkpoint is set: pass make_actor "
            "(a functools.partial of vla_rl.training.policy_actor.CheckpointActor)"
        )
    return make_expert()
