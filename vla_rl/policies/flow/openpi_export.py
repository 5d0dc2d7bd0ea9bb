"""Our pi0 / pi0.5 imported from an openpi PyTorch export -> an openpi PyTorch export again (``vla-rl
export --format openpi``; the exporter of both families in
``vla_rl.policies.lerobot_export.OPENPI_EXPORTERS``).

What it writes, the three parts of openpi's ``convert_jax_model_to_pytorch.py`` output:

* ``model.safetensors``: the weights under openpi's ``PI0Pytorch`` names (LeRobot's names, which
  transformers' "pi0" conversion inverts, without their ``model.`` prefix; ``lerobot_pi0_export``),
  LoRA adapters merged; the tied PaliGemma embedding once, as ``lm_head``, with the alias in the
  file's metadata as ``safetensors.torch.save_model`` records it; pi0.5's unused expert output head as
  zeros (openpi's loader needs the key);
* ``config.json``: the imported export's, with ``precision`` saying float32 (the weights written);
* ``assets/<asset_id>/norm_stats.json``: the statistics the import read (RL does not change them);
* ``tokenizer/``: the policy's tokenizer, which openpi ignores and vla-rl uses to re-import the export.

The robot-side settings of the import (``policy.openpi_delta_action_mask``, the maps) are openpi
training-config matters and are not part of the export: openpi's own config of the checkpoint applies
them. A policy imported from a LeRobot folder or built here is refused (``--format lerobot`` writes
the former); so are kept LoRA adapters (openpi's PyTorch model loads one weight file).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from safetensors.torch import save_file

from vla_rl.config.structured import ConfigError
from vla_rl.policies.flow.lerobot_pi0_export import TIED_EMBEDDING, lerobot_state_dict
from vla_rl.policies.flow.lerobot_pi0_model import LEROBOT_PREFIX
from vla_rl.policies.pretrained_io import WEIGHTS_FILE
from vla_rl.policies.vla.text_tokenizer import TOKENIZER_DIR

if TYPE_CHECKING:
    from vla_rl.policies.flow.pi0 import Pi0Policy

CONFIG_FILE = "config.json"


def openpi_name(lerobot_name: str) -> str:
    """LeRobot's weight name -> openpi's (``PI0Pytorch``'s)."""
    return lerobot_name.removeprefix(LEROBOT_PREFIX)


def export_openpi_pi0(policy: Pi0Policy, out_dir: Path, keep_lora: bool) -> None:
    """Write ``policy`` (a ``Pi0Policy`` / ``Pi05Policy`` imported from an openpi export) as an openpi
    PyTorch export into the empty directory ``out_dir``."""
    prep = policy.cfg.lerobot
    if prep is None or prep.convention != "openpi":
        origin = "built by vla-rl" if prep is None else f"imported from a LeRobot folder ({prep.source})"
        remedy = "" if prep is None else "; --format lerobot writes it back as one"
        raise ConfigError(
            f"export --format openpi: this {policy.registry_name} was {origin}, not from an openpi export, "
            f"so it does not preprocess as openpi does{remedy}"
        )
    if keep_lora and policy.cfg.lora is not None:
        raise ConfigError(
            "export --format openpi: --keep-lora has no openpi form (its PyTorch model loads one "
            "model.safetensors); export with the adapters merged"
        )
    files = dict(prep.folder_files)
    if CONFIG_FILE not in files or len(files) < 2:
        raise ConfigError(
            f"export --format openpi: the checkpoint does not keep the config.json and statistics of the "
            f"openpi export it was imported from ({prep.source}); import it again with this vla-rl"
        )
    weights = {openpi_name(name): tensor for name, tensor in lerobot_state_dict(policy, False).items()}
    alias, kept = (openpi_name(name) for name in TIED_EMBEDDING)
    weights.pop(alias, None)
    save_file(weights, str(out_dir / WEIGHTS_FILE), metadata={alias: kept})
    for name, content in files.items():
        if name == CONFIG_FILE:
            content = {**content, "precision": "float32"}
        path = out_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(content, indent=2))
    policy.tokenizer.save_pretrained(out_dir / TOKENIZER_DIR)
