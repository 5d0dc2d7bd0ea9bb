"""LeRobot's action chunks of a saved pi0 folder on frames of a LeRobot dataset, for a given initial noise.

Runs with the LeRobot reference venv's python (``.venv-lerobot``)::

    python tests/lerobot/lerobot_pi0_actions.py --openpi OPENPI_CHECKOUT --folder PRETRAINED_MODEL \\
        --tokenizer TOKENIZER --dataset DATASET_ROOT --out OUT.npz

The frames (``--frames`` indices) are read by LeRobot's ``LeRobotDataset`` and turned back into the raw
observation an env gives (uint8 H x W x 3 images, the state, the task string); LeRobot's
``from_pretrained``, its pre/post-processors (the tokenizer step answered by ``--tokenizer``) and
``predict_action_chunk`` act on them. The model is built at the reduced sizes of
``lerobot_pi0_sft.py`` (``shrink_lerobot``) before the weights load. ``OUT.npz`` holds the raw batch,
the noise and the actions.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
from make_pi_fixtures import patched_transformers, shrink_lerobot

SEED = 84


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--openpi", type=Path, required=True, help="an openpi checkout (its src/ tree)")
    parser.add_argument("--folder", type=Path, required=True, help="LeRobot's saved pi0 policy folder")
    parser.add_argument("--tokenizer", type=Path, required=True, help="the local tokenizer folder")
    parser.add_argument("--dataset", type=Path, required=True, help="a LeRobot dataset's root folder")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--frames", type=int, nargs="+", default=[0, 7])
    args = parser.parse_args()
    if "transformers" in sys.modules:
        raise SystemExit("transformers was imported before openpi's files could be applied")

    with tempfile.TemporaryDirectory(prefix="openpi_transformers_") as workdir:
        sys.path.insert(0, str(patched_transformers(args.openpi.resolve(), Path(workdir))))
        import torch
        from lerobot.configs.policies import PreTrainedConfig
        from lerobot.datasets.lerobot_dataset import LeRobotDataset
        from lerobot.envs.utils import preprocess_observation
        from lerobot.policies.factory import get_policy_class, make_pre_post_processors
        from lerobot.policies.pi0 import modeling_pi0
        from transformers import AutoTokenizer

        torch.set_num_threads(1)
        dataset = LeRobotDataset(f"local/{args.dataset.name}", root=args.dataset, video_backend="pyav")
        items = [dataset[index] for index in args.frames]
        cameras = [key.removeprefix("observation.images.") for key in dataset.meta.camera_keys]
        pixels = {
            camera: np.stack(
                [
                    (item[f"observation.images.{camera}"].permute(1, 2, 0).numpy() * 255)
                    .round()
                    .astype(np.uint8)
                    for item in items
                ]
            )
            for camera in cameras
        }
        state = np.stack([item["observation.state"].numpy() for item in items]).astype(np.float32)
        tasks = [item["task"] for item in items]

        config = PreTrainedConfig.from_pretrained(args.folder, local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
        shrink_lerobot(modeling_pi0, len(tokenizer), image_side=config.image_resolution[0])
        policy = get_policy_class("pi0").from_pretrained(args.folder, config=config, local_files_only=True)
        policy.eval()
        preprocessor, postprocessor = make_pre_post_processors(
            config,
            pretrained_path=str(args.folder),
            preprocessor_overrides={"tokenizer_processor": {"tokenizer": tokenizer}},
        )
        generator = torch.Generator().manual_seed(SEED)
        noise = torch.randn(len(items), config.chunk_size, config.max_action_dim, generator=generator)
        batch = preprocess_observation({"pixels": pixels, "agent_pos": state})
        batch["task"] = list(tasks)
        with torch.no_grad():
            actions = postprocessor(policy.predict_action_chunk(preprocessor(batch), noise=noise.clone()))
    arrays = {f"rgb_{camera}": frames for camera, frames in pixels.items()}
    arrays.update(state=state, instructions=np.array(tasks), noise=noise.numpy(), actions=actions.numpy())
    np.savez(args.out, **arrays)


if __name__ == "__main__":
    main()
