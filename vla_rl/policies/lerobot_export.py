"""A policy -> a LeRobot policy folder (``vla-rl export --format lerobot``): the exporters by family.

An exporter is ``exporter(policy, out_dir, keep_lora) -> None``: it writes the LeRobot folder of
``policy`` (``config.json``, ``model.safetensors`` under LeRobot's key names, the pre/post-processor
pipelines with their normalisation statistics) into ``out_dir``, an empty directory that exists.
With ``keep_lora`` the LoRA adapters are not merged: ``model.safetensors`` holds the base weights and
the adapters go to ``out_dir/lora_adapter/`` (``write_lora_adapter``). A policy the exporter cannot
express as a LeRobot folder is a ``ConfigError`` saying why.

``export_lerobot`` finds the family's exporter in ``LEROBOT_EXPORTERS`` (family name ->
``"module:attr"``; a family of your own plugs in the same way) and makes the write atomic: the
exporter writes into a hidden temporary sibling of ``OUT_DIR``, which is renamed into place when it
is complete; an existing ``OUT_DIR`` is an error unless ``force``, and is then replaced only once the
new folder is complete.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
from peft import LoraConfig
from safetensors.torch import save_file
from torch import nn

from vla_rl.config.structured import ConfigError
from vla_rl.policies.chunk_policy import ChunkPolicy
from vla_rl.policies.lora import LoraSettings, adapter_state_dict, lora_layer_names
from vla_rl.registry import UnknownNameError, resolve

LEROBOT_EXPORTERS: dict[str, str] = {
    "pi0": "vla_rl.policies.flow.lerobot_pi0_export:export_lerobot_pi0",
    "pi05": "vla_rl.policies.flow.lerobot_pi0_export:export_lerobot_pi0",
    "smolvla": "vla_rl.policies.flow.smolvla_io:export_lerobot_smolvla",
}
"""Policy family (``policy.name``) -> its exporter, ``"module:attr"``."""
OPENPI_EXPORTERS: dict[str, str] = {
    "pi0": "vla_rl.policies.flow.openpi_export:export_openpi_pi0",
    "pi05": "vla_rl.policies.flow.openpi_export:export_openpi_pi0",
}
"""Policy family -> its writer of an openpi PyTorch export (``vla-rl export --format openpi``)."""
EXPORTERS = {"lerobot": LEROBOT_EXPORTERS, "openpi": OPENPI_EXPORTERS}
"""``--format`` -> its exporters by family."""
LORA_ADAPTER_DIR = "lora_adapter"
"""Where ``--keep-lora`` puts the adapters, inside the exported folder (peft's adapter format)."""

Exporter = Callable[[ChunkPolicy, Path, bool], None]


def lerobot_exporter(family: str, folder_format: str = "lerobot") -> Exporter:
    """The exporter of policy family ``family`` to ``folder_format``; ``ConfigError`` for a family
    without one."""
    try:
        return resolve(EXPORTERS[folder_format], family, f"{folder_format} exporter")
    except UnknownNameError as error:
        raise ConfigError(
            f"export --format {folder_format}: policy family {family!r} has no exporter ({error})"
        ) from None


def export_lerobot(
    policy: ChunkPolicy,
    out_dir: str | Path,
    *,
    family: str | None = None,
    keep_lora: bool = False,
    force: bool = False,
    folder_format: str = "lerobot",
) -> Path:
    """Write ``policy`` (of ``family``, default its ``registry_name``) as a LeRobot policy folder (or,
    ``folder_format="openpi"``, an openpi PyTorch export) at ``out_dir``, atomically; returns the
    folder."""
    family = family or str(getattr(policy, "registry_name", type(policy).__name__))
    exporter = lerobot_exporter(family, folder_format)
    out = Path(out_dir)
    if out.exists() and not force:
        raise ConfigError(f"export: OUT_DIR {out} exists; give --force to replace it")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".tmp-{out.name}-", dir=out.parent))
    try:
        exporter(policy, staging, keep_lora)
        _fsync_tree(staging)
        if out.exists():
            previous = out.with_name(f".old-{out.name}-{os.getpid()}")
            out.rename(previous)
            staging.rename(out)
            shutil.rmtree(previous)
        else:
            staging.rename(out)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return out


def _fsync_tree(directory: Path) -> None:
    """Flush every file under ``directory`` to disk before it is renamed into place."""
    for path in directory.rglob("*"):
        if path.is_file():
            with path.open("rb") as handle:
                os.fsync(handle.fileno())


def write_lora_adapter(
    model: nn.Module, settings: LoraSettings, rename: Callable[[str], str], out_dir: Path
) -> None:
    """``model``'s LoRA adapters in peft's adapter format (``adapter_config.json``,
    ``adapter_model.safetensors``) in ``out_dir/LORA_ADAPTER_DIR``, under the module names of the
    exported model: ``rename`` maps one of our weight names (``<module>.weight``) to the exported
    one. peft applies it to a model with those module names (``PeftModel.from_pretrained``)."""
    layers = lora_layer_names(model)

    def exported_module(name: str) -> str:
        return rename(f"{name}.weight").removesuffix(".weight")

    modules = {name: exported_module(name) for name in layers}
    tensors: dict[str, torch.Tensor] = {}
    for name, tensor in adapter_state_dict(model).items():
        module, _, rest = name.partition(".lora_")
        kind, _, adapter_and_param = rest.partition(".")  # A / B, then "<adapter>.weight"
        parameter = adapter_and_param.split(".", 1)[1]
        tensors[f"base_model.model.{modules[module]}.lora_{kind}.{parameter}"] = tensor.detach().contiguous()
    directory = out_dir / LORA_ADAPTER_DIR
    directory.mkdir()
    config = LoraConfig(
        r=settings.rank,
        lora_alpha=settings.alpha,
        lora_dropout=settings.dropout,
        target_modules=sorted(set(modules.values())),
        bias="none",
    )
    config.save_pretrained(str(directory))
    save_file(tensors, str(directory / "adapter_model.safetensors"))
