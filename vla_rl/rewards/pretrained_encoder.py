"""The image tower of a local CLIP/SigLIP checkpoint as the learned reward model's encoder.

``vla-rl reward-train model.backbone=pretrained model.backbone_path=DIR`` fine-tunes the tower (or
keeps it frozen with ``model.freeze_backbone=true``) under the success/progress heads instead of
training the small CNN from scratch. Each camera is embedded by the same tower; the embeddings
are concatenated and projected to ``feature_dim``. The tower's config and image-processor
settings are saved next to the reward model (``backbone/``), so the saved model loads without the
original directory.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from vla_rl.rewards.contrastive import ImagePreprocessing

BACKBONE_DIRNAME = "backbone"


class PretrainedImageEncoder(nn.Module):
    """uint8 frames ``[B, V, H, W, 3]`` -> features ``[B, feature_dim]`` through a CLIP/SigLIP tower."""

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
