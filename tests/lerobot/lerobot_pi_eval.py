"""LeRobot's own evaluation of a pi0 / pi0.5 policy folder on vla-rl's MuJoCo env, in one process.

Runs with the LeRobot reference venv's python (``.venv-lerobot``)::

    python tests/lerobot/lerobot_pi_eval.py --openpi OPENPI_CHECKOUT --folder POLICY_FOLDER \\
        --tokenizer TOKENIZER --spec SPEC.json --out OUT.npz

The policy is loaded as LeRobot's evaluation loads one (``PreTrainedConfig.from_pretrained``, the
policy class's ``from_pretrained``, ``make_pre_post_processors`` from the folder's processor files; the
tokenizer step answered by the local ``--tokenizer``), with ``n_action_steps`` set to the spec's (as
``lerobot-eval --policy.n_action_steps=K`` sets it). It acts as LeRobot's ``rollout`` makes it act:
each step the env's observation goes through ``preprocess_observation`` (camera ``C`` as
``pixels[C]``, the proprioception as ``agent_pos``, the instruction as ``task``), the preprocessor,
``select_action`` (which plans a chunk when its action queue is empty and draws the chunk's initial
noise itself from torch's generator) and the postprocessor, and the action steps the env.

The env is vla-rl's own (``vla_rl.envs.make_env`` with the spec's ``env`` settings), imported from the
repository's files: only the env layer and the simulator modules it loads, which need numpy, torch,
gymnasium and mujoco, all in LeRobot's venv. ``SPEC.json`` (``benchmarks/lerobot_eval.py`` writes it
from a run's config) holds the evaluation vla-rl runs: ``env`` (its ``EnvConfig``), ``seed`` (episodes
and, through ``torch.manual_seed`` before the env is built, the noise stream), ``quotas`` (the
episodes each world contributes, its first ones), ``n_action_steps`` and
``skipped_draws_per_chunk`` (the standard normals vla-rl's greedy chain takes from the generator
after each chunk's noise and multiplies by zero; the script drops as many after each of LeRobot's
noise draws, so that both sides plan every chunk from the same noise). As in vla-rl's evaluation
the episodes run in autoreset worlds; LeRobot's action queue is one for all worlds, so every world's
episode must end on the same step (vla-rl's MuJoCo tasks end on a time limit; the script stops with
an error otherwise).

``OUT.npz`` holds, in the order vla-rl's evaluation counts episodes: ``success``, ``success_once``,
``return``, ``length`` and ``world`` of every counted episode; ``actions`` [steps, worlds, action_dim]
(the postprocessor's output, as sent to the env); and of the first chunk planned: the raw observation
(``rgb_<camera>``, ``state``, ``instructions``), the noise LeRobot drew and its whole chunk through the
postprocessor (``first_noise``, ``first_chunk``).
"""

from __future__ import annotations

import argparse
import importlib.abc
import importlib.util
import json
import sys
import tempfile
import time
import tomllib
from importlib.machinery import ModuleSpec
from pathlib import Path
from typing import Any

import numpy as np
from lerobot_pi_actions import load_lerobot
from make_pi_fixtures import lerobot_modules, patched_transformers, shrink_lerobot

REPO = Path(__file__).resolve().parents[2]
IMAGES_PREFIX = "observation.images."
STATE_OBS_KEY = "proprio"
"""The env's observation that a LeRobot dataset written by ``vla-rl collect`` holds as its state."""
EPISODE_KEYS = ("success", "success_once", "return", "length")
"""What the env reports of each finished episode (``info["episode"]``) and the script keeps."""


class PackageDirFinder(importlib.abc.MetaPathFinder):
    """Finds the packages that ``pyproject.toml``'s ``package-dir`` installs under other names
    (``vla_rl.sims`` is ``sims/``) in a checkout, as the installed package would."""

    def __init__(self, repo: Path) -> None:
        setuptools = tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["setuptools"]
        self.folders = {name: repo / folder for name, folder in setuptools["package-dir"].items()}

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        folder = self.folders.get(name)
        if folder is None or name == "vla_rl":
            return None
        return importlib.util.spec_from_file_location(
            name, folder / "__init__.py", submodule_search_locations=[str(folder)]
        )


def import_vla_rl_envs(repo: Path) -> Any:
    """``vla_rl.envs`` from the checkout ``repo`` (vla-rl is not installed in LeRobot's venv)."""
    sys.path.append(str(repo))
    sys.meta_path.insert(0, PackageDirFinder(repo))
    import vla_rl.envs

    return vla_rl.envs


def record_calls(owner: Any, name: str, calls: list[Any]) -> None:
    """Keep a copy of the tensor ``owner.name(...)`` returns in ``calls`` (a copy: LeRobot's sampling
    loop denoises its noise tensor in place); the calls themselves are unchanged."""
    method = getattr(owner, name)

    def recorded(*args: Any, **kwargs: Any) -> Any:
        result = method(*args, **kwargs)
        calls.append(result.clone())
        return result

    setattr(owner, name, recorded)


def skip_draws_after_noise(model: Any, draws: int) -> None:
    """After each chunk's noise that LeRobot's ``sample_noise`` draws, take ``draws`` more standard
    normals of its shape from the same generator and drop them: vla-rl's greedy chain draws one per
    denoising step (multiplied by a zero std), so the next chunk's noise then comes from the same
    place in the stream on both sides. The noise LeRobot uses is its own draw, unchanged."""
    import torch

    sample_noise = model.sample_noise

    def sample_noise_then_skip(shape: Any, device: Any) -> Any:
        noise = sample_noise(shape, device)
        for _ in range(draws):
            torch.randn(shape, dtype=noise.dtype, device=device)
        return noise

    model.sample_noise = sample_noise_then_skip


def lerobot_batch(obs: dict[str, Any], cameras: list[str]) -> dict[str, Any]:
    """vla-rl's observation as LeRobot's env wrappers hand one to ``preprocess_observation``."""
    from lerobot.envs.utils import preprocess_observation

    pixels = {camera: obs[f"rgb_{camera}"].cpu().numpy() for camera in cameras}
    batch = preprocess_observation({"pixels": pixels, "agent_pos": obs[STATE_OBS_KEY].cpu().numpy()})
    batch["task"] = list(obs["instruction"])
    return batch


def evaluate(policy: Any, preprocessor: Any, postprocessor: Any, spec: dict[str, Any], envs: Any) -> dict:
    """LeRobot's rollout on vla-rl's env until every world has run its quota of first episodes."""
    import torch

    cameras = [
        key.removeprefix(IMAGES_PREFIX)
        for key in policy.config.image_features
        if "empty_camera" not in key  # LeRobot's stand-ins for cameras no observation fills
    ]
    torch.manual_seed(spec["seed"])  # vla-rl's evaluation draws its noise from this stream too
    env = envs.make_env(envs.EnvConfig(**spec["env"]))
    quotas = np.asarray(spec["quotas"], dtype=np.int64)
    if len(quotas) != env.num_envs:
        raise SystemExit(f"spec: {len(quotas)} quotas for {env.num_envs} worlds")
    missing = [f"rgb_{c}" for c in cameras if f"rgb_{c}" not in env.observation_space.spaces]
    if missing:
        raise SystemExit(f"the policy reads cameras {cameras}; the env gives no {missing}")
    noises: list[Any] = []
    skip_draws_after_noise(policy.model, int(spec["skipped_draws_per_chunk"]))
    chunks: list[Any] = []
    record_calls(policy.model, "sample_noise", noises)
    record_calls(policy, "predict_action_chunk", chunks)
    counted = np.zeros(env.num_envs, dtype=np.int64)
    episodes: dict[str, list[float]] = {key: [] for key in (*EPISODE_KEYS, "world")}
    actions: list[np.ndarray] = []
    first: dict[str, np.ndarray] = {}
    try:
        obs, _ = env.reset(seed=spec["seed"])
        policy.reset()
        first = {f"rgb_{c}": obs[f"rgb_{c}"].numpy() for c in cameras}
        first.update(state=obs[STATE_OBS_KEY].numpy(), instructions=np.array(obs["instruction"]))
        while (counted < quotas).any():
            with torch.inference_mode():
                action = postprocessor(policy.select_action(preprocessor(lerobot_batch(obs, cameras))))
            actions.append(action.numpy())
            step = env.step(action)
            obs = step.obs
            done = step.done.cpu().numpy()
            if not done.any():
                continue
            if not done.all():
                raise SystemExit(
                    "episodes ended on different steps: LeRobot's one action queue cannot follow"
                )
            policy.reset()  # a new episode in every world: LeRobot's rollout starts with a fresh queue
            report = {k: v.cpu().numpy() for k, v in step.info["episode"].items()}
            for world in np.flatnonzero(counted < quotas):
                for key in EPISODE_KEYS:
                    episodes[key].append(float(report[key][world]))
                episodes["world"].append(float(world))
                counted[world] += 1
    finally:
        env.close()
    with torch.inference_mode():
        first_chunk = postprocessor(chunks[0])
    return {
        **{key: np.asarray(values) for key, values in episodes.items()},
        "actions": np.stack(actions),
        **first,
        "first_noise": noises[0].numpy(),
        "first_chunk": first_chunk.numpy(),
        "chunks_planned": np.array(len(chunks)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--openpi", type=Path, required=True, help="an openpi checkout (its src/ tree)")
    parser.add_argument("--folder", type=Path, required=True, help="a LeRobot pi0 / pi0.5 policy folder")
    parser.add_argument("--tokenizer", type=Path, required=True, help="local stand-in for the hub tokenizer")
    parser.add_argument(
        "--spec", type=Path, required=True, help="the evaluation (benchmarks/lerobot_eval.py)"
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--repo", type=Path, default=REPO, help="the vla-rl checkout whose env runs")
    parser.add_argument(
        "--full-size",
        action="store_true",
        help="LeRobot's model at its configured sizes (default: the reduced width of the test models)",
    )
    args = parser.parse_args()
    if "transformers" in sys.modules:
        raise SystemExit("transformers was imported before openpi's files could be applied")
    spec = json.loads(args.spec.read_text())
    policy_type = json.loads((args.folder / "config.json").read_text())["type"]

    with tempfile.TemporaryDirectory(prefix="openpi_transformers_") as workdir:
        sys.path.insert(0, str(patched_transformers(args.openpi.resolve(), Path(workdir))))
        import torch
        from transformers import AutoTokenizer

        torch.set_num_threads(1)
        envs = import_vla_rl_envs(args.repo.resolve())
        tokenizer = AutoTokenizer.from_pretrained(args.tokenizer, local_files_only=True)
        if not args.full_size:
            modeling, _, _ = lerobot_modules(policy_type)
            image_side = json.loads((args.folder / "config.json").read_text())["image_resolution"][0]
            shrink_lerobot(modeling, len(tokenizer), image_side=image_side)
        policy, preprocessor, postprocessor = load_lerobot(
            policy_type, args.folder, tokenizer, n_action_steps=spec["n_action_steps"]
        )
        started = time.perf_counter()
        result = evaluate(policy, preprocessor, postprocessor, spec, envs)
        result["seconds"] = np.array(time.perf_counter() - started)
    np.savez(args.out, **result)
    print(
        f"LeRobot on {len(result['success'])} episodes: success {100 * result['success'].mean():.1f} %, "
        f"mean return {result['return'].mean():.3f} ({float(result['seconds']):.0f} s)"
    )


if __name__ == "__main__":
    main()
