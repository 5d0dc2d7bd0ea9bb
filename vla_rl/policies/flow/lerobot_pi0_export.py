"""Our pi0 / pi0.5 -> a LeRobot ``pi0`` / ``pi05`` policy folder (the exporter of both families in
``vla_rl.policies.lerobot_export.LEROBOT_EXPORTERS``).

What it writes, for a policy imported from a LeRobot folder (``cfg.lerobot`` set, fine-tuned here or not):

* ``config.json``: the folder's own, as read at import (``LeRobotPreprocessing.folder_files``), with the
  values the model fixes taken from the model: ``type``, the input and output features, the
  normalisation mapping, ``chunk_size`` (``n_action_steps`` capped by it), ``max_action_dim``,
  ``max_state_dim``, ``num_inference_steps`` (the number of denoising steps this policy runs, so
  LeRobot denoises as vla-rl did), the time sampling and embedding periods, ``image_resolution``.
  Its Gemma variant names and the rest (optimizer presets, ``rtc_config``...) stay the folder's;
* ``model.safetensors``: the weights under LeRobot's names (``lerobot_key``: the inverse of
  transformers' "pi0" conversion, which pi0.5 shares), the VLM's input embedding saved once as
  ``lm_head`` as LeRobot ties them, pi0.5's unused expert output head as zeros (``EXPERT_LM_HEAD``);
  LoRA adapters merged (``lora.merged_state_dict``) unless
  ``keep_lora``;
* the folder's ``policy_preprocessor.json`` / ``policy_postprocessor.json`` and, for each of their
  steps with a ``state_file`` (the normaliser and unnormaliser), the statistics, float32, as
  ``<feature>.<statistic>``: those of the import, which RL does not change;
* ``tokenizer/``: the policy's tokenizer, readable by LeRobot's transformers 4 too
  (``save_portable_tokenizer``); LeRobot's processor names the hub's PaliGemma tokenizer, so LeRobot
  is pointed at this folder by hand; vla-rl re-imports the export with it.

A pi0 built by vla-rl itself (``cfg.lerobot`` unset) is refused: its preprocessing (our prompt layout
and word tokenizer, images resized without padding and normalised with ``image_mean`` /
``image_std``) has no LeRobot processor that computes the same, so LeRobot would not reproduce its
actions even with its statistics converted. So is a pi0 imported from an openpi export: LeRobot's
processors cannot compute openpi's preprocessing (``lerobot_preprocessing``).
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from safetensors.numpy import save_file as save_numpy_file
from safetensors.torch import save_file

from vla_rl.config.structured import ConfigError
from vla_rl.policies.flow.lerobot_pi0_io import folder_json_files
from vla_rl.policies.flow.lerobot_preprocessing import LeRobotPreprocessing
from vla_rl.policies.lerobot_export import write_lora_adapter
from vla_rl.policies.lerobot_folder import (
    NORMALIZER_STEP,
    POSTPROCESSOR_FILE,
    PREPROCESSOR_FILE,
    UNNORMALIZER_STEP,
    is_lerobot_folder,
)
from vla_rl.policies.lora import base_state_dict, merged_state_dict
from vla_rl.policies.pretrained_io import WEIGHTS_FILE
from vla_rl.policies.vla.text_tokenizer import TOKENIZER_DIR, save_portable_tokenizer

if TYPE_CHECKING:
    from vla_rl.policies.flow.pi0 import Pi0Policy

CONFIG_FILE = "config.json"
LEROBOT_KEY_RULES: tuple[tuple[str, str], ...] = (
    (r"^embed_action_time\.", "model."),
    (r"^action_out_proj\.", "model.action_out_proj."),
    (r"^model\.vlm\.language_model\.embed_tokens\.", "model.paligemma_with_expert.paligemma.lm_head."),
    (r"^model\.dit\.embed_tokens\.", "model.paligemma_with_expert.gemma_expert.lm_head."),
    (
        r"^model\.vlm\.vision_tower\.",
        "model.paligemma_with_expert.paligemma.model.vision_tower.vision_model.",
    ),
    (r"^model\.vlm\.", "model.paligemma_with_expert.paligemma.model."),
    (r"^model\.dit\.", "model.paligemma_with_expert.gemma_expert.model."),
)
"""Our (transformers') weight name -> LeRobot's: the first rule whose pattern matches rewrites it."""
TIED_EMBEDDING = (
    "model.paligemma_with_expert.paligemma.model.language_model.embed_tokens.weight",
    "model.paligemma_with_expert.paligemma.lm_head.weight",
)
"""LeRobot's PaliGemma ties its input embedding to ``lm_head`` and saves the pair once, under the
second name, recording the first as its alias in the file's metadata (safetensors' shared-tensor
convention); the export writes the same."""
EXPERT_LM_HEAD = "model.paligemma_with_expert.gemma_expert.lm_head.weight"
"""LeRobot's action expert carries an output head over the vocabulary [vocab, expert width] that
neither LeRobot nor transformers ever applies (the expert reads and writes embeddings). transformers'
PI05 has no module for it, so a pi0.5 import drops it; LeRobot's loader requires the key (a missing
key makes it fall back to a randomly initialised model with only a printed warning), so the export
writes it as zeros of its shape. pi0's maps onto transformers' unused expert embedding and is
written back as it was."""
STATISTICS_STEPS = (NORMALIZER_STEP, UNNORMALIZER_STEP)
"""The processor steps whose state file (the normalisation statistics) the export writes."""
MODEL_CONFIG_FIELDS = (
    "time_sampling_beta_alpha",
    "time_sampling_beta_beta",
    "time_sampling_scale",
    "time_sampling_offset",
    "min_period",
    "max_period",
)
"""config.json values that are transformers' PI0 config values of the same name."""


def lerobot_key(name: str) -> str:
    """Our weight name -> LeRobot's (``LEROBOT_KEY_RULES``); ``ValueError`` for a name no rule covers."""
    for pattern, replacement in LEROBOT_KEY_RULES:
        if re.match(pattern, name):
            return re.sub(pattern, replacement, name, count=1)
    raise ValueError(f"no LeRobot name for pi0 weight {name!r}")


def export_lerobot_pi0(policy: Pi0Policy, out_dir: Path, keep_lora: bool) -> None:
    """Write ``policy`` (a ``Pi0Policy`` / ``Pi05Policy`` imported from a LeRobot folder) as a LeRobot
    folder into the empty directory ``out_dir``."""
    prep = policy.cfg.lerobot
    if prep is None:
        raise ConfigError(
            f"export --format lerobot: this {policy.registry_name} was built by vla-rl, not imported from a "
            "LeRobot folder; its preprocessing (our prompt layout and tokenizer, images resized without "
            "padding and normalised with image_mean/image_std) has no LeRobot processor that computes the "
            "same, so LeRobot would not reproduce its actions. Start RL or SFT from a LeRobot "
            f"{policy.lerobot_type} folder (policy.init_from=DIR) to export one"
        )
    if prep.convention == "openpi":
        raise ConfigError(
            f"export --format lerobot: this {policy.registry_name} was imported from an openpi export "
            f"({prep.source}) and preprocesses as openpi does (PIL resizing, its prompt layout, its "
            "normalisation epsilon, pi0.5's state bins at the robot's width); LeRobot's processors compute "
            "these differently, so a LeRobot folder would not reproduce its actions"
        )
    files = _folder_files(prep)
    (out_dir / CONFIG_FILE).write_text(json.dumps(lerobot_config(policy, files[CONFIG_FILE]), indent=4))
    _write_weights(policy, out_dir, keep_lora)
    for name in (PREPROCESSOR_FILE, POSTPROCESSOR_FILE):
        if name in files:
            _write_pipeline(files[name], prep, out_dir / name)
    save_portable_tokenizer(policy.tokenizer, out_dir / TOKENIZER_DIR)


def _folder_files(prep: LeRobotPreprocessing) -> dict[str, Any]:
    """The imported folder's JSON files: kept with the policy, else (a checkpoint saved before they
    were kept) read from the folder it was imported from, if that is still there."""
    files = dict(prep.folder_files)
    if not files and prep.source and is_lerobot_folder(prep.source):
        files = folder_json_files(Path(prep.source))
    missing = [name for name in (CONFIG_FILE, PREPROCESSOR_FILE) if name not in files]
    if missing:
        raise ConfigError(
            f"export --format lerobot: the checkpoint does not keep the {missing} of the LeRobot folder it "
            f"was imported from, and that folder ({prep.source or 'unknown'}) is gone; import the folder "
            "again with this vla-rl and save the policy"
        )
    return files


def lerobot_config(policy: Pi0Policy, imported: dict[str, Any]) -> dict[str, Any]:
    """The imported config.json with the values the model and its preprocessing fix."""
    prep: LeRobotPreprocessing = policy.cfg.lerobot
    model_config = policy.model.config
    config = copy.deepcopy(imported)
    config.update(
        type=prep.policy_type,
        input_features=copy.deepcopy(prep.input_features),
        output_features=copy.deepcopy(prep.output_features),
        normalization_mapping=dict(prep.normalization_mapping),
        chunk_size=policy.chunk_len,
        n_action_steps=min(int(config.get("n_action_steps", policy.chunk_len)), policy.chunk_len),
        max_state_dim=int(getattr(model_config, "max_state_dim", None) or prep.max_state_dim),
        max_action_dim=policy.max_action_dim,
        num_inference_steps=policy.num_steps,
        image_resolution=list(prep.image_resolution),
    )
    for name in MODEL_CONFIG_FIELDS:
        config[name] = float(getattr(model_config, name))
    return config


def lerobot_state_dict(policy: Pi0Policy, keep_lora: bool) -> dict[str, torch.Tensor]:
    """The model's weights under LeRobot's names (adapters merged unless ``keep_lora``)."""
    model = policy.model
    if policy.cfg.lora is None:
        state = model.state_dict()
    else:
        state = base_state_dict(model) if keep_lora else merged_state_dict(model)
    weights = {lerobot_key(name): tensor.detach().contiguous() for name, tensor in state.items()}
    if EXPERT_LM_HEAD not in weights:
        vocab = weights[TIED_EMBEDDING[1]].shape[0]
        width = int(policy.model.config.dit_config.hidden_size)
        weights[EXPERT_LM_HEAD] = torch.zeros(vocab, width, dtype=weights[TIED_EMBEDDING[1]].dtype)
    return weights


def _write_weights(policy: Pi0Policy, out_dir: Path, keep_lora: bool) -> None:
    weights = lerobot_state_dict(policy, keep_lora)
    alias, kept = TIED_EMBEDDING
    weights.pop(alias, None)  # LeRobot's name of it; ours is the lm_head name already
    save_file(weights, str(out_dir / WEIGHTS_FILE), metadata={alias: kept})
    if keep_lora and policy.cfg.lora is not None:
        write_lora_adapter(policy.model, policy.cfg.lora, lerobot_key, out_dir)


def _write_pipeline(pipeline: dict[str, Any], prep: LeRobotPreprocessing, path: Path) -> None:
    """A processor pipeline JSON and the statistics file of each of its steps that names one."""
    path.write_text(json.dumps(pipeline, indent=2))
    stats = {
        f"{key}.{name}": np.asarray(values, dtype=np.float32)
        for key, per_stat in prep.stats.items()
        for name, values in per_stat.items()
    }
    for step in pipeline.get("steps", []):
        state_file = step.get("state_file")
        if not state_file:
            continue
        if step.get("registry_name") not in STATISTICS_STEPS:
            raise ConfigError(
                f"export --format lerobot: {path.name}'s step {step.get('registry_name')!r} has a state "
                f"file ({state_file}) that the import did not keep; only {list(STATISTICS_STEPS)} are written"
            )
        save_numpy_file(stats, str(path.parent / state_file))
