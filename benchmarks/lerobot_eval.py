"""LeRobot's evaluation of an exported run next to vla-rl's own, episode by episode.

vla-rl evaluates a run's policy (``evaluate_rl_policy``: the run's seeds, worlds, executed actions per
chunk and greedy ODE) while its env records every step; ``tests/lerobot/lerobot_pi_eval.py`` then runs
the same evaluation in LeRobot's venv with LeRobot's own loading and ``select_action`` on the LeRobot
folder that ``vla-rl export`` wrote, on vla-rl's env built with the settings that evaluation used.
Both draw each chunk's initial noise from torch's generator seeded with the evaluation seed, one
``[worlds, chunk, max_action_dim]`` standard normal per chunk (vla-rl's greedy chain then takes one
more per denoising step, which it multiplies by zero; LeRobot's side drops as many), so the two runs
plan every chunk from the same noise and their episodes can be compared one by one. Run from the
repository root::

    python -m benchmarks.lerobot_eval RUN_DIR EXPORTED_FOLDER --openpi OPENPI_CHECKOUT \\
        --tokenizer TOKENIZER --work DIR [--episodes N]
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.common import lerobot_env
from vla_rl.envs.base import BatchedEnv, StepResult
from vla_rl.policies.chunk_policy import ChunkPolicy
from vla_rl.training.checkpoint import resolve_policy_dir
from vla_rl.training.chunk_rl.config import VLARLConfig
from vla_rl.training.chunk_rl.config_load import load_rl_config_file
from vla_rl.training.chunk_rl.exploration_anneal import run_updates
from vla_rl.training.chunk_rl.trainer import evaluate_rl_policy, load_rl_policy
from vla_rl.training.evaluate import EVAL_SEED_OFFSET, EvalResult, episode_quotas
from vla_rl.training.executors import make_executor

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tests" / "lerobot" / "lerobot_pi_eval.py"
EPISODE_KEYS = ("success", "success_once", "return", "length")
EVALUATE_MODULE = importlib.import_module("vla_rl.training.evaluate")
"""vla-rl's evaluation module (``vla_rl.training.evaluate`` the attribute is its function)."""


class RecordingEnv:
    """A ``BatchedEnv`` that keeps the actions it is stepped with, the first observation and the
    reports of the episodes that end; everything else is the wrapped env's."""

    def __init__(self, env: BatchedEnv, cfg: Any) -> None:
        self.env = env
        self.cfg = cfg
        """The ``EnvConfig`` the env was built from."""
        self.actions: list[np.ndarray] = []
        self.first_obs: dict[str, Any] | None = None
        self.ended: list[tuple[np.ndarray, dict[str, np.ndarray]]] = []
        """(done [N], ``info["episode"]``) of every step on which some episode ended."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def reset(self, *args: Any, **kwargs: Any) -> Any:
        obs, info = self.env.reset(*args, **kwargs)
        if self.first_obs is None:
            self.first_obs = {k: v.clone() if torch.is_tensor(v) else list(v) for k, v in obs.items()}
        return obs, info

    def step(self, action: torch.Tensor) -> StepResult:
        self.actions.append(action.detach().cpu().numpy().copy())
        step = self.env.step(action)
        done = step.done.cpu().numpy()
        if done.any():
            self.ended.append((done, {k: v.cpu().numpy() for k, v in step.info["episode"].items()}))
        return step

    def episodes(self, quotas: np.ndarray) -> dict[str, np.ndarray]:
        """Every counted episode's report (and ``world``) in the order ``run_episodes`` counts them:
        each world's first ``quotas[world]`` episodes, by the step they ended on, then by world."""
        counted = np.zeros(len(quotas), dtype=np.int64)
        rows: dict[str, list[float]] = {key: [] for key in (*EPISODE_KEYS, "world")}
        for done, report in self.ended:
            for world in np.flatnonzero(done & (counted < quotas)):
                for key in EPISODE_KEYS:
                    rows[key].append(float(report[key][world]))
                rows["world"].append(float(world))
                counted[world] += 1
        return {key: np.asarray(values) for key, values in rows.items()}


@contextmanager
def recorded_envs() -> Iterator[list[RecordingEnv]]:
    """The envs that vla-rl's ``evaluate`` builds inside the block, each as a ``RecordingEnv``."""
    made: list[RecordingEnv] = []
    make_env = EVALUATE_MODULE.make_env

    def recording(cfg: Any) -> RecordingEnv:
        made.append(RecordingEnv(make_env(cfg), cfg))
        return made[-1]

    EVALUATE_MODULE.make_env = recording
    try:
        yield made
    finally:
        EVALUATE_MODULE.make_env = make_env


@dataclass
class VlaRlEvaluation:
    """vla-rl's evaluation of a policy with what LeRobot's side needs to run the same one."""

    result: EvalResult
    """What the run's evaluation reports."""
    episodes: dict[str, np.ndarray]
    """``success``, ``success_once``, ``return``, ``length``, ``world`` of every counted episode."""
    actions: np.ndarray
    """[steps, worlds, action_dim]: the actions the env was stepped with."""
    first_obs: dict[str, np.ndarray]
    """The cameras (``rgb_<name>``) and ``proprio`` of the first observation."""
    spec: dict[str, Any]
    """The evaluation for ``lerobot_pi_eval.py``: ``env``, ``seed``, ``quotas``, ``n_action_steps``,
    ``skipped_draws_per_chunk``."""


def evaluate_recorded(policy: ChunkPolicy, cfg: VLARLConfig, num_episodes: int) -> VlaRlEvaluation:
    """``evaluate_rl_policy`` (greedy) on ``cfg.env.split``, its env recorded."""
    with recorded_envs() as envs:
        result = evaluate_rl_policy(policy, cfg, cfg.env.split, num_episodes, deterministic=True)
    (env,) = envs
    quotas = episode_quotas(num_episodes, env.cfg.num_envs)
    spec = {
        "env": dataclasses.asdict(env.cfg),
        "seed": cfg.seed + EVAL_SEED_OFFSET,
        "quotas": quotas.tolist(),
        "n_action_steps": make_executor(policy, 1, cfg.algorithm.execute_steps).execute_steps,
        # vla-rl's denoising chain (exploration.sample_chain) draws one standard normal of the chunk's
        # shape per denoising step, multiplied by a zero std when the step is deterministic.
        "skipped_draws_per_chunk": policy.exploration.num_steps,
    }
    first = {k: v.numpy() for k, v in env.first_obs.items() if k.startswith("rgb_") or k == "proprio"}
    return VlaRlEvaluation(result, env.episodes(quotas), np.stack(env.actions), first, spec)


def evaluate_run(
    run_dir: Path, num_episodes: int | None = None, worlds: int | None = None, start: bool = False
) -> tuple[VLARLConfig, ChunkPolicy, VlaRlEvaluation]:
    """The run's config, a policy as the run evaluates it (its last checkpoint's, or with ``start``
    its ``policy.init_from``) and its evaluation on ``num_episodes`` episodes (default: the run's
    ``eval.num_episodes``) and ``worlds`` worlds (default: the run's ``eval.num_envs``)."""
    cfg = load_rl_config_file(run_dir / "config.yaml", for_evaluation=True)
    if worlds is not None:
        cfg.eval.num_envs = worlds
    torch.set_num_threads(cfg.torch_num_threads)
    if start:
        policy = load_rl_policy(cfg, resolve_policy_dir(cfg.policy.init_from))
    else:
        policy = load_rl_policy(cfg, resolve_policy_dir(run_dir), run_updates(cfg.policy, run_dir))
    episodes = cfg.eval.num_episodes if num_episodes is None else num_episodes
    return cfg, policy.eval(), evaluate_recorded(policy, cfg, episodes)


def evaluate_in_lerobot(
    python: Path,
    openpi: Path,
    folder: Path,
    tokenizer: Path,
    spec: dict[str, Any],
    work: Path,
    full_size: bool = False,
) -> dict[str, np.ndarray]:
    """``lerobot_pi_eval.py`` on ``folder`` with ``spec``; its arrays (files and log in ``work``).
    LeRobot builds its model at the test models' reduced width unless ``full_size``."""
    work.mkdir(parents=True, exist_ok=True)
    spec_file, out, log = work / "spec.json", work / "lerobot_eval.npz", work / "lerobot_eval.log"
    spec_file.write_text(json.dumps(spec, indent=1))
    command = [str(python), str(SCRIPT), "--openpi", str(openpi), "--folder", str(folder)]
    command += ["--tokenizer", str(tokenizer), "--spec", str(spec_file), "--out", str(out)]
    command += ["--full-size"] if full_size else []
    with log.open("w") as output:
        code = subprocess.run(
            command, stdout=output, stderr=subprocess.STDOUT, env=lerobot_env(work / "hf_home"), check=False
        ).returncode
    if code != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({code}):\n{log.read_text()[-6000:]}")
    with np.load(out) as arrays:
        return dict(arrays)


def first_chunk_difference(policy: ChunkPolicy, theirs: dict[str, np.ndarray]) -> float:
    """max |vla-rl - LeRobot| of the first chunk LeRobot planned, for its observation and noise."""
    obs: dict[str, Any] = {k: v for k, v in theirs.items() if k.startswith("rgb_")}
    obs.update(proprio=torch.as_tensor(theirs["state"]), instruction=[str(t) for t in theirs["instructions"]])
    ours = policy.predict_action_chunk(obs, torch.as_tensor(theirs["first_noise"]))
    return float(np.abs(ours.numpy() - theirs["first_chunk"]).max())


def compare(policy: ChunkPolicy, ours: VlaRlEvaluation, theirs: dict[str, np.ndarray]) -> dict[str, Any]:
    """The two evaluations side by side: rates, per-episode agreement and action differences (the
    env clips actions to [-1, 1], so LeRobot's are compared clipped)."""
    executed = np.clip(theirs["actions"], -1.0, 1.0)
    steps = int(ours.spec["n_action_steps"])
    same_obs = all(
        np.array_equal(value, theirs["state" if key == "proprio" else key])
        for key, value in ours.first_obs.items()
        if key == "proprio" or key in theirs
    )
    return {
        "episodes": len(ours.episodes["success"]),
        "vla_rl": {key: float(ours.episodes[key].mean()) for key in EPISODE_KEYS},
        "lerobot": {key: float(theirs[key].mean()) for key in EPISODE_KEYS},
        "episodes_same_success": int((ours.episodes["success"] == theirs["success"]).sum()),
        "episodes_same_success_once": int((ours.episodes["success_once"] == theirs["success_once"]).sum()),
        "episodes_same_world": bool(np.array_equal(ours.episodes["world"], theirs["world"])),
        "max_return_difference": float(np.abs(ours.episodes["return"] - theirs["return"]).max()),
        "first_observation_equal": same_obs,
        "first_chunk_max_difference": first_chunk_difference(policy, theirs),
        "first_executed_max_difference": float(np.abs(ours.actions[:steps] - executed[:steps]).max()),
        "executed_max_difference": float(np.abs(ours.actions - executed).max()),
        "executed_share_within_1e-4": float((np.abs(ours.actions - executed).max(-1) < 1e-4).mean()),
        "steps": [len(ours.actions), len(executed)],
        "lerobot_seconds": float(theirs["seconds"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path, help="a vla-rl RL run (its last checkpoint is evaluated)")
    parser.add_argument("folder", type=Path, help="the run's export (vla-rl export --format lerobot)")
    parser.add_argument("--openpi", type=Path, required=True, help="an openpi checkout (its src/ tree)")
    parser.add_argument("--tokenizer", type=Path, required=True, help="local stand-in for the hub tokenizer")
    parser.add_argument("--work", type=Path, required=True, help="folder for the spec, arrays and log")
    parser.add_argument("--episodes", type=int, default=None, help="default: the run's eval.num_episodes")
    parser.add_argument("--lerobot-python", type=Path, default=REPO / ".venv-lerobot" / "bin" / "python")
    parser.add_argument(
        "--full-size", action="store_true", help="a folder at LeRobot's sizes, not the test models' width"
    )
    args = parser.parse_args()
    _, policy, ours = evaluate_run(args.run_dir, args.episodes)
    theirs = evaluate_in_lerobot(
        args.lerobot_python, args.openpi, args.folder, args.tokenizer, ours.spec, args.work, args.full_size
    )
    print(json.dumps(compare(policy, ours, theirs), indent=1))


if __name__ == "__main__":
    main()
