"""LeRobot's action chunk of a committed pi0 / pi0.5 fixture for a batch that lacks one of its cameras.

Runs with the LeRobot reference venv's python (``.venv-lerobot``)::

    python tests/lerobot/lerobot_camera_left_out.py --openpi OPENPI_CHECKOUT \\
        --fixture tests/fixtures/lerobot/pi0 --camera wrist --out OUT.npz

LeRobot runs a pi0 / pi0.5 whose observation lacks a camera of its config: the camera becomes a
masked-out image (as its ``empty_cameras`` slots). vla-rl's ``policy.camera_map={<camera>: null}``
leaves the camera out; the test beside this script compares the two. The fixture folder is loaded
with LeRobot's ``from_pretrained`` and its processors (openpi's transformers files applied to a
temporary copy of the venv's ``transformers`` and the reduced sizes given to LeRobot's model
construction, both as ``make_pi_fixtures.py`` does), and run on the
fixture's recorded raw batch and noise without that camera (and with it). Writes both chunks to ``OUT``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_pi_fixtures import lerobot_modules, patched_transformers, shrink_lerobot  # noqa: E402


def chunks(fixture: Path, camera: str) -> dict[str, np.ndarray]:
    """LeRobot's post-processed action chunks for the fixture's batch without ``camera``
    (``actions``) and with every camera (``actions_all_cameras``: the recorded reference again, which
    shows this loading path is the fixture's)."""
    import torch
    from lerobot.configs.policies import PreTrainedConfig
    from lerobot.envs.utils import preprocess_observation
    from lerobot.policies.factory import get_policy_class, make_pre_post_processors
    from transformers import AutoTokenizer

    folder = fixture / "policy"
    tokenizer = AutoTokenizer.from_pretrained(fixture / "tokenizer", local_files_only=True)
    config = PreTrainedConfig.from_pretrained(folder, local_files_only=True)
    modeling, _, _ = lerobot_modules(config.type)
    shrink_lerobot(modeling, len(tokenizer))  # the fixtures' reduced sizes, as they were built
    policy = get_policy_class(config.type).from_pretrained(folder, config=config, local_files_only=True)
    policy.eval()
    preprocessor, postprocessor = make_pre_post_processors(
        config,
        pretrained_path=str(folder),
        preprocessor_overrides={"tokenizer_processor": {"tokenizer": tokenizer}},
    )
    with np.load(fixture / "reference.npz") as reference:
        recorded = dict(reference)

    def chunk(left_out: set[str]) -> np.ndarray:
        pixels = {
            key.removeprefix("rgb_"): frames
            for key, frames in recorded.items()
            if key.startswith("rgb_") and key.removeprefix("rgb_") not in left_out
        }
        batch = preprocess_observation({"pixels": pixels, "agent_pos": recorded["state"]})
        batch["task"] = [str(text) for text in recorded["instructions"]]
        noise = torch.tensor(recorded["noise"])  # a copy: LeRobot denoises its noise in place
        with torch.no_grad():
            model_actions = policy.predict_action_chunk(preprocessor(batch), noise=noise)
        return postprocessor(model_actions).numpy()

    return {"actions": chunk({camera}), "actions_all_cameras": chunk(set())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--openpi", type=Path, required=True, help="an openpi checkout (its src/ tree)")
    parser.add_argument("--fixture", type=Path, required=True, help="tests/fixtures/lerobot/<type>")
    parser.add_argument("--camera", required=True, help="the camera left out of the batch")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="openpi_transformers_") as workdir:
        sys.path.insert(0, str(patched_transformers(args.openpi.resolve(), Path(workdir))))
        import torch

        torch.set_num_threads(1)
        arrays = chunks(args.fixture.resolve(), args.camera)
    np.savez_compressed(args.out, **arrays)


if __name__ == "__main__":
    main()
