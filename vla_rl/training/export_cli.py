"""``vla-rl export --format lerobot|openpi RUN_OR_CHECKPOINT OUT_DIR``: a trained policy as a LeRobot
folder, or (a pi0 / pi0.5 imported from one) as an openpi PyTorch export.

``RUN_OR_CHECKPOINT`` is found as ``policy.init_from`` is (``checkpoint.resolve_policy_dir``): an SFT
or RL run folder (its latest checkpoint), a checkpoint folder, or a policy folder (a LeRobot folder or
an openpi export too). The policy's family is the LeRobot folder's ``type`` (an openpi export's, as its
weights say), else ``--policy``, else the checkpoint's ``config.yaml`` ``policy.name``. The folder is
written by the family's exporter (``vla_rl.policies.lerobot_export``), atomically.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from omegaconf import OmegaConf

from vla_rl.config.structured import ConfigError

EXPORT_FORMATS = ("lerobot", "openpi")
"""What ``--format`` accepts."""


def add_export_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``export`` sub-command to a ``vla-rl`` sub-parser set."""
    parser = subparsers.add_parser(
        "export",
        help="write a trained policy in another toolkit's format (a LeRobot policy folder, an openpi export)",
    )
    parser.add_argument("--format", required=True, choices=EXPORT_FORMATS, help="the folder format")
    parser.add_argument("source", metavar="RUN_OR_CHECKPOINT", help="run, checkpoint or policy folder")
    parser.add_argument("out_dir", metavar="OUT_DIR", help="the folder to write (must not exist)")
    parser.add_argument(
        "--keep-lora",
        action="store_true",
        help="keep LoRA adapters apart (OUT_DIR/lora_adapter/, peft format) instead of merging them",
    )
    parser.add_argument("--force", action="store_true", help="replace an existing OUT_DIR")
    parser.add_argument(
        "--policy", metavar="NAME", help="the policy family (pi0, pi05) when the checkpoint does not say"
    )
    parser.add_argument(
        "--tokenizer-dir",
        metavar="DIR",
        help="tokenizer of a LeRobot folder or openpi export that carries none",
    )
    return parser


def policy_family(directory: Path, given: str | None) -> str:
    """The family of the policy in ``directory``: a LeRobot folder's ``type``, else ``given``, else
    ``policy.name`` of the checkpoint's ``config.yaml`` (next to the ``policy/`` folder)."""
    from vla_rl.policies.flow.lerobot_pi0_io import read_pi_folder
    from vla_rl.policies.lerobot_folder import is_lerobot_folder
    from vla_rl.policies.openpi_folder import is_openpi_export
    from vla_rl.training.checkpoint import CONFIG_FILENAME

    if is_lerobot_folder(directory):
        return str(json.loads((directory / "config.json").read_text())["type"])
    if is_openpi_export(directory):
        return read_pi_folder(directory).policy_type
    if given:
        return given
    config_file = directory.parent / CONFIG_FILENAME
    if config_file.is_file():
        name = OmegaConf.select(OmegaConf.load(config_file), "policy.name")
        if name:
            return str(name)
    raise ConfigError(
        f"export: {directory} does not say which policy family it holds (no config.yaml beside it); "
        "give --policy NAME"
    )


def export_command(args: argparse.Namespace) -> int:
    from vla_rl.policies.lerobot_export import export_lerobot
    from vla_rl.policies.registry import load_chunk_policy
    from vla_rl.training.checkpoint import resolve_policy_dir

    if Path(args.out_dir).exists() and not args.force:  # before loading a model that may be large
        raise ConfigError(f"export: OUT_DIR {args.out_dir} exists; give --force to replace it")
    directory = resolve_policy_dir(args.source)
    family = policy_family(directory, args.policy)
    try:
        policy = load_chunk_policy(family, directory, args.tokenizer_dir)
    except ConfigError as error:
        if "policy.tokenizer_dir" not in str(error):
            raise
        raise ConfigError(f"{error} (export: --tokenizer-dir DIR)") from None
    out = export_lerobot(
        policy,
        args.out_dir,
        family=family,
        keep_lora=args.keep_lora,
        force=args.force,
        folder_format=args.format,
    )
    lora = getattr(getattr(policy, "cfg", None), "lora", None)
    how = "" if lora is None else (" (LoRA kept apart)" if args.keep_lora else " (LoRA merged)")
    kind = "an openpi PyTorch export" if args.format == "openpi" else "a LeRobot folder"
    print(f"exported the {family} policy of {directory} as {kind}{how}: {out}")
    return 0
