"""OpenVLA's own ``predict_action`` on a folder (e.g. one vla-rl saved), in OpenVLA's environment.

    python tests/openvla/openvla_predict.py --folder DIR --inputs in.npz --unnorm-key KEY --out out.npz

``in.npz`` holds ``image`` (uint8 [H, W, 3]) and ``instruction``; ``out.npz`` gets ``actions``. The folder
loads through ``AutoModelForVision2Seq`` / ``AutoProcessor`` with ``trust_remote_code``, local files only.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--inputs", type=Path, required=True)
    parser.add_argument("--unnorm-key", required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    from PIL import Image
    from transformers import AutoModelForVision2Seq, AutoProcessor

    vla = AutoModelForVision2Seq.from_pretrained(
        str(args.folder), trust_remote_code=True, local_files_only=True, torch_dtype=torch.float32
    ).eval()
    processor = AutoProcessor.from_pretrained(str(args.folder), trust_remote_code=True, local_files_only=True)
    inputs = np.load(args.inputs)
    prompt = f"In: What action should the robot take to {str(inputs['instruction']).lower()}?\nOut:"
    batch = processor(prompt, Image.fromarray(inputs["image"]))
    with torch.no_grad():
        actions = vla.predict_action(**batch, unnorm_key=args.unnorm_key, do_sample=False)
    np.savez(args.out, actions=actions)


if __name__ == "__main__":
    main()
