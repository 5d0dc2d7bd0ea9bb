"""Loading and saving SmolVLA policies (local folders only, never a hub).

A LeRobot ``smolvla`` folder (``config.json``, ``model.safetensors``, the pre/post-processor files
with the normalisation statistics) holds every weight, but not the backbone's architecture or
tokenizer: its ``vlm_model_name`` names them (a hub id such as
``HuggingFaceTB/SmolVLM2-500M-Video-Instruct`` in a real checkpoint). vla-rl reads them from a local
copy of that backbone folder (its ``config.json`` and tokenizer files; no weights needed), found in
this order (``find_vlm_dir``): the ``vlm_dir`` argument, a ``vlm/`` folder inside the policy folder,
``vlm_model_name`` itself when it is a local folder.

vla-rl saves a SmolVLA policy as such a LeRobot folder again (``config.json``, the processor files
copied, ``model.safetensors`` under LeRobot's parameter names, the backbone's unused ``lm_head``
kept), with the backbone files in ``vlm/`` and what RL adds beside them::

    smolvla_policy.json       our SmolVLAPolicyConfig (camera map, state keys, chain noise)
    value_head.safetensors    the value head
    noise_head.safetensors    the Flow-Noise standard-deviation head (exploration ``flow_noise``)
    lora_adapter.safetensors  the LoRA adapters (``lora`` set; ``model.safetensors`` then holds the
                              base weights, so LeRobot reads the folder as the model before LoRA)

``vla-rl export --format lerobot`` writes the LeRobot folder alone, adapters merged into
``model.safetensors`` (or, with ``--keep-lora``, the base weights and peft's adapter folder).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file
from transformers import AutoTokenizer, PreTrainedTokenizerBase, SmolVLMConfig

from vla_rl.config.structured import ConfigError
from vla_rl.policies.flow.smolvla_config import SmolVLAArchitecture, SmolVLAPolicyConfig
from vla_rl.policies.flow.smolvla_model import SmolVLAModel
from vla_rl.policies.lerobot_export import write_lora_adapter
from vla_rl.policies.lerobot_folder import LeRobotFolder, read_lerobot_folder
from vla_rl.policies.lora import adapter_state_dict, base_state_dict, merged_state_dict
from vla_rl.policies.pretrained_io import WEIGHTS_FILE, save_weights

VLM_DIR = "vlm"
"""The backbone's config and tokenizer inside a policy folder."""
POLICY_CONFIG_FILE = "smolvla_policy.json"
VALUE_HEAD_FILE = "value_head.safetensors"
NOISE_HEAD_FILE = "noise_head.safetensors"
ADAPTER_FILE = "lora_adapter.safetensors"
KEY_PREFIXES = (
    ("model.vlm_with_expert.vlm.model.", "vlm."),
    ("model.vlm_with_expert.lm_expert.", "expert."),
    ("model.", ""),
)
"""LeRobot's parameter-name prefix -> ours (first match wins)."""
UNUSED_PREFIX = "model.vlm_with_expert.vlm.lm_head."
"""The backbone's language-model head: SmolVLA never runs it; kept to be written back."""


@dataclass
class LoadedSmolVLA:
    """A SmolVLA folder, read."""

    model: SmolVLAModel
    tokenizer: PreTrainedTokenizerBase
    folder: LeRobotFolder
    arch: SmolVLAArchitecture
    vlm_dir: Path
    unused: dict[str, torch.Tensor]
    """Tensors of the checkpoint the model does not use (under LeRobot's names)."""


def find_vlm_dir(policy_dir: Path, arch: SmolVLAArchitecture, vlm_dir: str | Path | None) -> Path:
    """The local backbone folder (``config.json`` + tokenizer) of a SmolVLA folder."""
    if vlm_dir is not None:
        if not (Path(vlm_dir) / "config.json").is_file():
            raise ConfigError(f"config key 'policy.kwargs.vlm_dir': {vlm_dir} has no config.json")
        return Path(vlm_dir)
    for candidate in (policy_dir / VLM_DIR, Path(arch.vlm_model_name)):
        if (candidate / "config.json").is_file():
            return candidate
    raise ConfigError(
        f"config key 'policy.init_from': the SmolVLA folder {policy_dir} names its backbone "
        f"{arch.vlm_model_name!r}, which is no local folder: put a copy of that backbone's config.json "
        f"and tokenizer files in {policy_dir / VLM_DIR} (no weights needed: the policy folder has them)"
    )


def to_our_key(name: str) -> str | None:
    """Our parameter name of a LeRobot one (None: unused by the model)."""
    if name.startswith(UNUSED_PREFIX):
        return None
    for theirs, ours in KEY_PREFIXES:
        if name.startswith(theirs):
            return ours + name.removeprefix(theirs)
    return None


def to_lerobot_key(name: str) -> str:
    """LeRobot's parameter name of one of ours."""
    for theirs, ours in KEY_PREFIXES:
        if ours and name.startswith(ours):
            return theirs + name.removeprefix(ours)
    return "model." + name


def load_smolvla(directory: str | Path, vlm_dir: str | Path | None = None) -> LoadedSmolVLA:
    """Build the model of a LeRobot (or vla-rl saved) ``smolvla`` folder with its weights."""
    path = Path(directory)
    folder = read_lerobot_folder(path)
    if folder.policy_type != "smolvla":
        raise ConfigError(
            f"config key 'policy.init_from': {path} is a LeRobot {folder.policy_type!r} policy, "
            "not a smolvla one (policy.name must match it)"
        )
    arch = SmolVLAArchitecture.from_lerobot(folder.config)
    backbone = find_vlm_dir(path, arch, vlm_dir)
    vlm_config = SmolVLMConfig.from_pretrained(backbone, local_files_only=True)
    model = SmolVLAModel(vlm_config, arch)
    state, unused = {}, {}
    for name, tensor in load_file(str(path / WEIGHTS_FILE)).items():
        ours = to_our_key(name)
        if ours is None:
            unused[name] = tensor
        else:
            state[ours] = tensor
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise ConfigError(
            f"config key 'policy.init_from': the weights of {path} do not fit the SmolVLA built from "
            f"{backbone}: missing {sorted(missing)[:8]}, unexpected {sorted(unexpected)[:8]}"
        )
    tokenizer = AutoTokenizer.from_pretrained(backbone, local_files_only=True)
    return LoadedSmolVLA(model, tokenizer, folder, arch, backbone, unused)


def save_smolvla(
    directory: str | Path,
    loaded: LoadedSmolVLA,
    cfg: SmolVLAPolicyConfig,
    heads: dict[str, torch.nn.Module | None],
    *,
    merge_lora: bool = False,
) -> None:
    """Write the policy as a LeRobot smolvla folder plus ``vlm/`` and our extras (module docstring);
    with ``merge_lora`` the adapters are merged into ``model.safetensors`` instead of kept apart."""
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    source = loaded.folder.path.resolve()
    if source != path.resolve():
        for item in source.iterdir():
            if item.is_file() and (item.name == "config.json" or item.name.startswith("policy_")):
                shutil.copy2(item, path / item.name)
    if (path / VLM_DIR).resolve() != loaded.vlm_dir.resolve():
        shutil.copytree(loaded.vlm_dir, path / VLM_DIR, dirs_exist_ok=True)
    model = loaded.model
    if cfg.lora is None:
        state = model.state_dict()
    elif merge_lora:
        state = merged_state_dict(model)
    else:
        state = base_state_dict(model)
        save_weights(adapter_state_dict(model), path / ADAPTER_FILE)
    weights = {to_lerobot_key(name): tensor for name, tensor in state.items()}
    save_weights({**weights, **loaded.unused}, path / WEIGHTS_FILE)
    (path / POLICY_CONFIG_FILE).write_text(json.dumps(cfg.to_dict(), indent=2))
    files = {"value_head": VALUE_HEAD_FILE, "noise_head": NOISE_HEAD_FILE}
    for name, module in heads.items():
        if module is not None:
            save_weights(module.state_dict(), path / files[name])


def read_policy_config(directory: Path) -> SmolVLAPolicyConfig | None:
    """Our saved wrapper settings, or None for a folder LeRobot wrote."""
    file = directory / POLICY_CONFIG_FILE
    return SmolVLAPolicyConfig.from_dict(json.loads(file.read_text())) if file.is_file() else None


def read_adapters(directory: Path) -> dict[str, torch.Tensor]:
    """The LoRA adapter weights ``save_smolvla`` wrote; ``ConfigError`` when the file is missing."""
    file = directory / ADAPTER_FILE
    if not file.is_file():
        raise ConfigError(
            f"config key 'policy.init_from': {directory} was saved with LoRA ({POLICY_CONFIG_FILE}) "
            f"but has no {ADAPTER_FILE}"
        )
    return load_file(str(file))


def read_head(directory: Path, name: str) -> dict[str, torch.Tensor] | None:
    """The saved weights of head ``name`` (``value_head``, ``noise_head``), or None."""
    file = directory / {"value_head": VALUE_HEAD_FILE, "noise_head": NOISE_HEAD_FILE}[name]
    return load_file(str(file)) if file.is_file() else None


def export_lerobot_smolvla(policy: torch.nn.Module, out_dir: Path, keep_lora: bool) -> None:
    """``vla-rl export --format lerobot`` of a SmolVLA policy (``LEROBOT_EXPORTERS``): its LeRobot
    folder with the backbone files in ``vlm/``, without what RL adds (heads, ``smolvla_policy.json``);
    LoRA adapters merged, or with ``keep_lora`` in peft's format in ``lora_adapter/``."""
    lora = policy.cfg.lora
    if keep_lora and lora is None:
        raise ConfigError("export --keep-lora: this smolvla policy has no LoRA adapters")
    out = Path(out_dir)
    save_smolvla(out, policy.loaded, policy.cfg, heads={}, merge_lora=not keep_lora)
    (out / POLICY_CONFIG_FILE).unlink()
    if keep_lora:
        (out / ADAPTER_FILE).unlink()
        write_lora_adapter(policy.model, lora, to_lerobot_key, out)
