"""openpi's own code on an openpi PyTorch export that ``vla-rl export --format openpi`` wrote.

Run with a python that runs openpi (see make_openpi_fixtures.py)::

    python tests/lerobot/openpi_export_actions.py --openpi OPENPI_CHECKOUT --type pi0 \\
        --folder EXPORT --reference tests/fixtures/openpi/pi0/reference.npz --out OUT.npz [--delta]

Loads the export as openpi does (``Pi0Config.load_pytorch``: ``safetensors.torch.load_model``, strict;
``normalize.load`` of its statistics) with the fixture's reduced sizes, and runs the fixture's raw batch
through openpi's LIBERO pipeline (``make_openpi_fixtures.run_openpi``; with ``--delta`` its delta
actions) with the fixture's noise; writes the actions and the per-entry loss.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import types
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_openpi_fixtures import ASSET_ID, DELTA_MASK, prepare_openpi, run_openpi, shrink_openpi  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--openpi", type=Path, required=True)
    parser.add_argument("--type", choices=["pi0", "pi05"], required=True)
    parser.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--reference", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--delta", action="store_true", help="openpi's delta actions (its LIBERO mask)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        spm_model = prepare_openpi(args.openpi.resolve(), Path(workdir))
        import sentencepiece
        import torch
        from openpi.models import pi0_config
        from openpi.shared import normalize

        shrink_openpi(sentencepiece.SentencePieceProcessor(model_file=str(spm_model)).get_piece_size())
        saved = json.loads((args.folder / "config.json").read_text())
        config = pi0_config.Pi0Config(
            pi05=args.type == "pi05",
            action_dim=saved["action_dim"],
            action_horizon=saved["action_horizon"],
            paligemma_variant=saved["paligemma_variant"],
            action_expert_variant=saved["action_expert_variant"],
            dtype="float32",
            pytorch_compile_mode=None,
        )
        model = config.load_pytorch(
            types.SimpleNamespace(model=config), str(args.folder / "model.safetensors")
        )
        model.eval()
        norm_stats = normalize.load(args.folder / "assets" / ASSET_ID)
        with np.load(args.reference) as arrays:
            ref = dict(arrays)
        raw = {
            "base": ref["rgb_base"],
            "wrist": ref["rgb_wrist"],
            "state": ref["state"],
            "instructions": [str(text) for text in ref["instructions"]],
        }
        loss_inputs = (
            ref["loss_actions"],
            torch.as_tensor(ref["loss_noise"]),
            torch.as_tensor(ref["loss_time"]),
        )
        result = run_openpi(
            model, config, norm_stats, raw, ref["noise"], loss_inputs, DELTA_MASK if args.delta else None
        )
        np.savez(args.out, actions=result["actions"], loss_per_entry=result["per_entry"])


if __name__ == "__main__":
    main()
