"""A small success/progress model trained by ``vla-rl reward-train``: no pretrained VLM needed.

One sample is the frames of ``V`` cameras (stacked along channels, as the pixel policies do) and
the instruction. A convolutional encoder and a bag of hashed instruction words feed two heads:
the logit that the frame shows the task done, and the task's progress in [0, 1]. The model is
saved as ``reward_model.json`` plus ``model.safetensors`` and loaded by the same code that the
``learned`` entry of the reward-model registry runs.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from vla_rl.config.structured import Check, Schema, validate_structured
from vla_rl.policies.cnn import ImageEncoder
from vla_rl.policies.layers import build_mlp
from vla_rl.policies.pretrained_io import read_module_dir, save_module_dir
from vla_rl.rewards.base import RewardModel
from vla_rl.rewards.config import REWARD_OPTIONS_KEY, is_torch_device
from vla_rl.rewards.contrastive import ImagePreprocessing

CONFIG_FILE = "reward_model.json"
BACKBONE_DIRNAME = "backbone"
SCORES = ("progress", "success", "mean")


@dataclass
class LearnedRewardConfig:
    """Architecture of the learned reward model (stored next to its weights)."""

    cameras: list[str] = field(default_factory=lambda: ["front"])
    """Cameras one sample holds, in this order (frames ``[B, V, H, W, 3]`` when more than one)."""
    image_size: int = 64
    """Height and width of the frames the model reads."""
    channels: list[int] = field(default_factory=lambda: [16, 32, 32])
    """Output channels of the convolutions."""
    feature_dim: int = 128
    """Size of the image feature vector."""
    word_buckets: int = 512
    """Instruction words are hashed into this many embedding rows."""
    word_dim: int = 16
    """Size of the instruction embedding."""
    hidden_dims: list[int] = field(default_factory=lambda: [128])
    """Hidden layers of the heads' shared MLP."""
    backbone: str = "cnn"
    """Image encoder: ``cnn`` (``channels``, trained from scratch) or ``pretrained`` (the image tower
    of the CLIP/SigLIP checkpoint at ``backbone_path``, fine-tuned)."""
    backbone_path: str = ""
    """Local CLIP/SigLIP directory for ``backbone: pretrained``."""
    freeze_backbone: bool = False
    """Keep the pretrained tower's weights fixed and train the projection and heads only."""


@dataclass
class LearnedOptions:
    """Options of the ``learned`` entry of the reward-model registry."""

    score: str = "mean"
    """What ``score`` returns: ``progress``, ``success`` (probability) or ``mean`` of the two."""
    device: str = "cpu"
    """Torch device the model runs on."""


LEARNED_OPTION_CHECKS = (
    Check("score", lambda o: o.score in SCORES, f"must be one of {list(SCORES)}"),
    Check("device", lambda o: is_torch_device(o.device), "must be a torch device such as 'cpu' or 'cuda:0'"),
)
LEARNED_OPTIONS = Schema(LearnedOptions, LEARNED_OPTION_CHECKS)
"""``reward.options`` of ``reward.model: learned``, checked when a config is validated."""


def word_ids(instruction: str, buckets: int) -> list[int]:
    """Lower-cased words of ``instruction`` hashed (crc32, stable across runs) into ``buckets``."""
    return [zlib.crc32(word.encode()) % buckets for word in instruction.lower().split()]


class PretrainedImageEncoder(nn.Module):
    """uint8 frames ``[B, V, H, W, 3]`` -> features ``[B, feature_dim]`` through a CLIP/SigLIP tower.

    ``vla-rl reward-train model.backbone=pretrained model.backbone_path=DIR`` fine-tunes the image
    tower of the local checkpoint (or keeps it frozen with ``model.freeze_backbone=true``) under the
    success/progress heads instead of training the small CNN from scratch. Each camera is embedded by
    the same tower; the embeddings are concatenated and projected to ``feature_dim``. The tower's
    config and image-processor settings are saved next to the reward model (``backbone/``), so the
    saved model loads without the original directory.
    """

    def __init__(self, directory: str | Path, num_views: int, feature_dim: int, freeze: bool) -> None:
        super().__init__()
        path = Path(directory)
        if not path.is_dir():
            raise FileNotFoundError(f"model.backbone_path {str(directory)!r} is not a local model directory")
        from transformers import AutoImageProcessor, AutoModel

        model = AutoModel.from_pretrained(path, local_files_only=True, dtype=torch.float32)
        if not hasattr(model, "get_image_features"):
            raise ValueError(f"{path}: {type(model).__name__} has no image tower (get_image_features)")
        self.processor = AutoImageProcessor.from_pretrained(path, local_files_only=True)
        self.model = model
        self.preprocess = ImagePreprocessing.from_processor(
            self.processor, model.config.vision_config.image_size
        )
        self.frozen = freeze
        if freeze:
            self.model.requires_grad_(False)
        embed_dim = self._embed(torch.zeros(1, 8, 8, 3, dtype=torch.uint8)).shape[-1]
        self.project = nn.Sequential(nn.Linear(num_views * embed_dim, feature_dim), nn.ELU())

    def _embed(self, frames: torch.Tensor) -> torch.Tensor:
        output = self.model.get_image_features(pixel_values=self.preprocess(frames))
        return output if isinstance(output, torch.Tensor) else output.pooler_output

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        batch, views = frames.shape[:2]
        with torch.set_grad_enabled(torch.is_grad_enabled() and not self.frozen):
            embeddings = self._embed(frames.flatten(0, 1))
        return self.project(embeddings.reshape(batch, views * embeddings.shape[-1]))

    def save_backbone(self, directory: str | Path) -> Path:
        """Write the tower's config, weights and image processor into ``directory/backbone``."""
        path = Path(directory) / BACKBONE_DIRNAME
        self.model.save_pretrained(path)
        self.processor.save_pretrained(path)
        return path


class LearnedRewardModel(RewardModel):
    """Frames + instruction -> (success logit, progress)."""

    def __init__(self, config: LearnedRewardConfig, score: str = "mean") -> None:
        super().__init__()
        if score not in SCORES:
            raise ValueError(f"score must be one of {list(SCORES)}, got {score!r}")
        self.config = config
        self.score_kind = score
        self.num_views = len(config.cameras)
        self.image_size = config.image_size
        self.keys = [f"rgb_{camera}" for camera in config.cameras]
        if config.backbone == "pretrained":
            self.encoder = PretrainedImageEncoder(
                config.backbone_path, self.num_views, config.feature_dim, config.freeze_backbone
            )
        elif config.backbone == "cnn":
            box = gym.spaces.Box(0, 255, (config.image_size, config.image_size, 3), np.uint8)
            space = gym.spaces.Dict({key: box for key in self.keys})
            self.encoder = ImageEncoder(self.keys, space, list(config.channels), config.feature_dim, "elu")
        else:
            raise ValueError(f"backbone must be 'cnn' or 'pretrained', got {config.backbone!r}")
        self.words = nn.EmbeddingBag(config.word_buckets, config.word_dim, mode="mean")
        # Two outputs: the success logit and the progress logit.
        self.heads = build_mlp(config.feature_dim + config.word_dim, list(config.hidden_dims), 2, "elu", 0.01)
        self._word_cache: dict[str, list[int]] = {}

    def forward(self, frames: torch.Tensor, instructions: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """(success logit [B], progress logit [B]) for uint8 frames as ``check_inputs`` accepts them."""
        views = frames.unsqueeze(1) if self.num_views == 1 else frames
        if self.config.backbone == "pretrained":
            image_features = self.encoder(views)
        else:
            image_features = self.encoder({key: views[:, v] for v, key in enumerate(self.keys)})
        ids, offsets = self._words(instructions, frames.device)
        features = torch.cat([image_features, self.words(ids, offsets)], dim=-1)
        logits = self.heads(features)
        return logits[:, 0], logits[:, 1]

    def _words(self, instructions: Sequence[str], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        ids: list[int] = []
        offsets: list[int] = []
        for text in instructions:
            if text not in self._word_cache:
                self._word_cache[text] = word_ids(text, self.config.word_buckets)
            offsets.append(len(ids))
            ids.extend(self._word_cache[text])
        return torch.tensor(ids, device=device), torch.tensor(offsets, device=device)

    @torch.inference_mode()
    def heads_out(
        self, frames: torch.Tensor, instructions: Sequence[str]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(success probability [B], progress [B]), both in [0, 1], after checking the inputs."""
        self.check_inputs(frames, instructions)
        device = next(self.parameters()).device
        success_logit, progress_logit = self(frames.to(device), instructions)
        return torch.sigmoid(success_logit).float(), torch.sigmoid(progress_logit).float()

    def score(self, frames: torch.Tensor, instructions: Sequence[str]) -> torch.Tensor:
        return self._score_of(*self.heads_out(frames, instructions))

    def score_and_success_during_training(
        self, frames: torch.Tensor, instructions: Sequence[str]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        success, progress = self.heads_out(frames, instructions)
        return self._score_of(success, progress), success

    def _score_of(self, success: torch.Tensor, progress: torch.Tensor) -> torch.Tensor:
        if self.score_kind == "success":
            return success
        if self.score_kind == "progress":
            return progress
        return 0.5 * (success + progress)

    def success_probability(self, frames: torch.Tensor, instructions: Sequence[str]) -> torch.Tensor:
        return self.heads_out(frames, instructions)[0]

    def progress(self, frames: torch.Tensor, instructions: Sequence[str]) -> torch.Tensor:
        """float32 [B] in [0, 1]: the estimated fraction of the task done."""
        return self.heads_out(frames, instructions)[1]

    def save_pretrained(self, directory: str | Path) -> None:
        """Write ``reward_model.json`` and ``model.safetensors`` into ``directory`` (and, with a
        pretrained backbone, its config and image processor into ``directory/backbone``)."""
        config = asdict(self.config)
        if self.config.backbone == "pretrained":
            # Stored relative to the model folder, which carries its own copy of the tower.
            config["backbone_path"] = self.encoder.save_backbone(directory).name
        save_module_dir(self, config, directory, CONFIG_FILE)


def load_learned_reward_model(directory: str | Path, score: str = "mean") -> LearnedRewardModel:
    """The model ``save_pretrained`` wrote into the local ``directory``."""
    path = Path(directory)
    if not (path / CONFIG_FILE).is_file():
        raise FileNotFoundError(f"{path} holds no {CONFIG_FILE}: train one with `vla-rl reward-train`")
    config_dict, state = read_module_dir(path, CONFIG_FILE)
    config = validate_structured(LearnedRewardConfig, config_dict, ())
    if config.backbone == "pretrained":
        config.backbone_path = str(path / config.backbone_path)
    model = LearnedRewardModel(config, score)
    model.load_state_dict(state)
    return model.eval()


def build_learned(path: str, options: dict[str, Any]) -> RewardModel:
    opts = LEARNED_OPTIONS.validate(options, REWARD_OPTIONS_KEY)
    if not path:
        raise FileNotFoundError("the learned reward model needs reward.path: a `vla-rl reward-train` output")
    return load_learned_reward_model(path, opts.score).to(opts.device)
