"""Load pi0 / pi0.5 folders with LeRobot's own ``from_pretrained`` and processors; record their actions.

Runs with the LeRobot reference venv's python (``.venv-lerobot``)::

    python tests/lerobot/lerobot_pi_actions.py --openpi OPENPI_CHECKOUT --type pi0 \\
        --tokenizer TOKENIZER_DIR --inputs INPUTS.npz --out OUT.npz FOLDER [FOLDER ...]

Each ``FOLDER`` is loaded as LeRobot's evaluation loads a policy: ``PreTrainedConfig.from_pretrained``,
the policy class's ``from_pretrained`` and ``make_pre_post_processors(pretrained_path=FOLDER)`` (its
tokenizer step answered by the local ``TOKENIZER_DIR`` instead of the hub's PaliGemma tokenizer). The raw
batch of ``INPUTS.npz`` (``rgb_<camera>`` uint8 HWC frames, ``state``, ``instructions``, ``noise``) goes
through its preprocessor, ``predict_action_chunk`` with that noise and its postprocessor; the actions
of folder ``i`` are saved as ``actions_<i>``.

LeRobot's pi0 / pi0.5 ``from_pretrained`` prints a warning and keeps its random initialisation when
the weights do not load, so the script checks the loading itself: ``weights_differing_<i>`` counts the
file's tensors that the loaded policy does not hold bit for bit (absent ones included) and
``weights_not_in_file_<i>`` the policy's tensors that the file does not name and that are not tied to
one it names (LeRobot ties the PaliGemma input embedding to ``lm_head`` and saves the pair once).

The folders are LeRobot's pi0 / pi0.5 at the reduced width of ``make_pi_fixtures.py``, whose size patch
(``shrink_lerobot``) and openpi ``transformers`` copy (``patched_transformers``) are reused here.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from make_pi_fixtures import lerobot_modules, patched_transformers, shrink_lerobot


def load_lerobot(
    policy_type: str, folder: Path, tokenizer: Any, n_action_steps: int | None = None
) -> tuple[Any, Any, Any]:
    """LeRobot's policy and processors of ``folder``, loaded as its evaluation does (with
    ``n_action_steps`` in place of the folder's, as ``--policy.n_action_steps`` gives it there)."""
    from lerobot.configs.policies import PreTrainedConfig
    from lerobot.policies.factory import get_policy_class, make_pre_post_processors

    config = PreTrainedConfig.from_pretrained(folder, local_files_only=True)
    if config.type != policy_type:
        raise SystemExit(f"{folder} is a LeRobot {config.type!r} policy, not {policy_type!r}")
    if n_action_steps is not None:
        if not 0 < n_action_steps <= config.chunk_size:
            raise SystemExit(f"n_action_steps {n_action_steps} is not in 1..{config.chunk_size} (chunk_size)")
        config.n_action_steps = n_action_steps
    policy = get_policy_class(policy_type).from_pretrained(folder, config=config, local_files_only=True)
    policy.eval()
    overrides = {"tokenizer_processor": {"tokenizer": tokenizer}}
    preprocessor, postprocessor = make_pre_post_processors(
        config, pretrained_path=str(folder), preprocessor_overrides=overrides
    )
    return policy, preprocessor, postprocessor


def loading_check(policy: Any, folder: Path) -> tuple[int, int]:
    """(file tensors the policy does not hold bit for bit, policy tensors that the file does not name
    and that are not tied to (share memory with) one it names)."""
    import torch
    from safetensors.torch import load_file

    saved = load_file(str(folder / "model.safetensors"))
    held = policy.state_dict()
    differing = sum(
        1 for name, tensor in saved.items() if name not in held or not torch.equal(held[name], tensor)
    )
    named = {held[name].data_ptr() for name in saved if name in held}
    untied = [name for name in set(held) - set(saved) if held[name].data_ptr() not in named]
    return differing, len(untied)


def actions_of(
    policy: Any, preprocessor: Any, postprocessor: Any, inputs: dict[str, np.ndarray]
) -> np.ndarray:
    import torch
    from lerobot.envs.utils import preprocess_observation

    cameras = sorted(key.removeprefix("rgb_") for key in inputs if key.startswith("rgb_"))
    pixels = {camera: inputs[f"rgb_{camera}"] for camera in cameras}
    batch = preprocess_observation({"pixels": pixels, "agent_pos": inputs["state"]})
    batch["task"] = [str(text) for text in inputs["instructions"]]
    processed = preprocessor(batch)
    with torch.no_grad():
        model_actions = policy.predict_action_chunk(processed, noise=torch.as_tensor(inputs["noise"]).clone())
    return postprocessor(model_actions).numpy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--openpi", type=Path, required=True, help="an openpi checkout (its src/ tree)")
    parser.add_argument("--type", required=True, choices=["pi0", "pi05"])
    parser.add_argument("--tokenizer", type=Path, required=True, help="local stand-in for the hub tokenizer")
    parser.add_argument("--inputs", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("folders", type=Path, nargs="+")
    args = parser.parse_args()
    if "transformers" in sys.modules:
        raise SystemExit("transformers was imported before openpi's files could be applied")

    with tempfile.TemporaryDirectory(prefix="openpi_transformers_") as workdir:
        sys.path.insert(0, str(patched_transformers(args.openpi.resolve(), Path(workdir))))
        import torch
        from transformers import AutoTokenizer

        torch.set_num_threads(1)
        tokenizer = AutoTokenizer.from_pretrained(args.tokenizer, local_files_only=True)
        modeling, _, _ = lerobot_modules(args.type)
        shrink_lerobot(modeling, len(tokenizer))
        with np.load(args.inputs) as arrays:
            inputs = dict(arrays)
        results: dict[str, np.ndarray] = {}
        for index, folder in enumerate(args.folders):
            policy, preprocessor, postprocessor = load_lerobot(args.type, folder, tokenizer)
            differing, not_in_file = loading_check(policy, folder)
            results[f"weights_differing_{index}"] = np.array(differing)
            results[f"weights_not_in_file_{index}"] = np.array(not_in_file)
            results[f"actions_{index}"] = actions_of(policy, preprocessor, postprocessor, inputs)
            print(folder, "differing", differing, "not in file", not_in_file)
        np.savez(args.out, **results)


if __name__ == "__main__":
    main()
