"""Contrastive image-text rewards from a CLIP- or SigLIP-style dual encoder (``transformers``).

The reward of a frame is the similarity of its image embedding to the embedding of a goal text
built from the frame's instruction, optionally refined by one of two published variants:

* goal-baseline projection (Rocamonde et al., "Vision-Language Models are Zero-Shot Reward
  Models"): only the component of the image embedding along the baseline -> goal direction counts;
* positive/negative contrast (Huang et al., VLM-RL): similarity to the goal minus similarity to a
  negated goal ("the red cube is not on the pad").

The model, tokenizer and image-processor settings load from one local directory written by
``save_pretrained`` (``local_files_only=True``).
"""

from __future__ import annotations

import math
import string
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from vla_rl.config.structured import Check, ConfigError, Schema
from vla_rl.policies.normalizer import RunningMeanStd
from vla_rl.rewards.base import RewardModel
from vla_rl.rewards.config import REWARD_OPTIONS_KEY, is_torch_device

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

_NORM_EPS = 1e-8
_BICUBIC = 3
"""PIL's resample code for bicubic, as stored in image-processor configs."""


@dataclass
class ContrastiveOptions:
    """Options of the ``contrastive`` reward model."""

    goal_prompt: str = "{instruction}"
    """Goal text; ``{instruction}`` is replaced by the frame's instruction."""
    baseline_prompt: str = ""
    """Baseline text of the goal-baseline projection (may use ``{instruction}``); needed when
    ``alpha > 0``."""
    alpha: float = 0.0
    """Projection strength in [0, 1]: 0 is the plain cosine similarity to the goal, 1 keeps only the
    baseline -> goal direction of the image embedding."""
    negative_prompt: str = ""
    """Negated goal (may use ``{instruction}``); when set the reward is
    ``cos(image, goal) - cos(image, negative)`` and ``success_probability`` compares the two."""
    normalization: str = "none"
    """``none``, or ``running``: standardise scores with a running mean/std of the raw scores
    (updated by ``update_normalization`` or ``score(..., update=True)``)."""
    batch_size: int = 64
    """Frames (and new prompts) per forward pass of the encoders."""
    device: str = "cpu"
    """Torch device the encoders run on."""


def _only_instruction_placeholder(template: str) -> bool:
    try:
        names = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError:
        return False
    return names <= {"instruction"}


_PLACEHOLDER = "may contain no placeholder other than {instruction}"
CONTRASTIVE_CHECKS: list[Check[ContrastiveOptions]] = [
    Check("goal_prompt", lambda o: bool(o.goal_prompt.strip()), "must not be empty"),
    Check("goal_prompt", lambda o: _only_instruction_placeholder(o.goal_prompt), _PLACEHOLDER),
    Check("baseline_prompt", lambda o: _only_instruction_placeholder(o.baseline_prompt), _PLACEHOLDER),
    Check("negative_prompt", lambda o: _only_instruction_placeholder(o.negative_prompt), _PLACEHOLDER),
    Check("alpha", lambda o: 0.0 <= o.alpha <= 1.0, "must be in [0, 1]"),
    Check(
        "baseline_prompt",
        lambda o: o.alpha == 0 or bool(o.baseline_prompt.strip()),
        "is needed when alpha > 0",
    ),
    Check(
        "negative_prompt",
        lambda o: not (o.negative_prompt.strip() and o.alpha > 0),
        "cannot be combined with the goal-baseline projection (alpha > 0): they are two different rewards",
    ),
    Check("normalization", lambda o: o.normalization in ("none", "running"), "must be 'none' or 'running'"),
    Check("batch_size", lambda o: o.batch_size > 0, "must be positive"),
    Check("device", lambda o: is_torch_device(o.device), "must be a torch device such as 'cpu' or 'cuda:0'"),
]
CONTRASTIVE_OPTIONS = Schema(ContrastiveOptions, CONTRASTIVE_CHECKS)
"""``reward.options`` of ``reward.model: contrastive``, checked when a config is validated."""


def cosine_similarity(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Cosine similarity along the last dimension (inputs need not be unit vectors)."""
    return (F.normalize(a, dim=-1) * F.normalize(b, dim=-1)).sum(-1)


def goal_baseline_reward(
    image_emb: torch.Tensor, goal_emb: torch.Tensor, baseline_emb: torch.Tensor, alpha: float
) -> torch.Tensor:
    """``1 - 0.5 |P (s - g)|^2`` with ``P = alpha d d^T / |d|^2 + (1 - alpha) I`` and ``d = g - b``,
    for the unit-normalised image ``s``, goal ``g`` and baseline ``b`` embeddings (``[..., D]``,
    broadcast). At ``alpha = 0`` this equals the cosine similarity of ``s`` and ``g``."""
    s, g, b = (F.normalize(x, dim=-1) for x in (image_emb, goal_emb, baseline_emb))
    d, v = g - b, s - g
    along = (d * v).sum(-1, keepdim=True) / (d * d).sum(-1, keepdim=True).clamp_min(1e-12)
    projected = alpha * along * d + (1.0 - alpha) * v
    return 1.0 - 0.5 * (projected * projected).sum(-1)


def contrast_probability(
    cos_pos: torch.Tensor, cos_neg: torch.Tensor, logit_scale: torch.Tensor
) -> torch.Tensor:
    """Probability of the positive description in a two-way zero-shot choice: the softmax over the
    logits ``logit_scale * cos (+ bias)``, i.e. ``sigmoid(logit_scale * (cos_pos - cos_neg))``. A
    logit bias (SigLIP) cancels; it is also SigLIP's posterior that the positive holds given that
    exactly one of its independent per-text sigmoids holds."""
    return torch.sigmoid(logit_scale * (cos_pos - cos_neg))


@dataclass(frozen=True)
class ImagePreprocessing:
    """Batched torch version of the checkpoint's image processor."""

    size: int
    """Side of the square input of the vision tower."""
    center_crop: bool
    """Resize the shorter side to ``size`` and crop the centre (CLIP); else resize to ``size`` x
    ``size`` (SigLIP)."""
    mode: str
    """``bilinear`` or ``bicubic`` (from the processor's ``resample``), antialiased."""
    mean: tuple[float, ...]
    """Per-channel mean subtracted from pixels in [0, 1]."""
    std: tuple[float, ...]
    """Per-channel standard deviation the pixels are divided by."""

    @classmethod
    def from_processor(cls, processor: Any, size: int) -> ImagePreprocessing:
        normalize = getattr(processor, "do_normalize", True)
        return cls(
            size=size,
            center_crop=bool(getattr(processor, "do_center_crop", False)),
            mode="bicubic" if getattr(processor, "resample", None) == _BICUBIC else "bilinear",
            mean=tuple(processor.image_mean) if normalize else (0.0, 0.0, 0.0),
            std=tuple(processor.image_std) if normalize else (1.0, 1.0, 1.0),
        )

    def __call__(self, frames: torch.Tensor) -> torch.Tensor:
        """uint8 ``[B, H, W, 3]`` -> normalised float32 ``[B, 3, size, size]``."""
        x = frames.movedim(-1, -3).float().div_(255.0)  # [B, 3, H, W] in [0, 1]
        height, width = x.shape[-2:]
        out = (self.size, self.size)
        if self.center_crop:
            # The shorter side becomes ``size``, the longer one is truncated like transformers does.
            short, long = min(height, width), max(height, width)
            long = max(self.size, int(self.size * long / short))
            out = (long, self.size) if width <= height else (self.size, long)
        if out != (height, width):
            x = F.interpolate(x, size=out, mode=self.mode, antialias=True, align_corners=False)
            x = x.clamp_(0.0, 1.0)
        top, left = (out[0] - self.size) // 2, (out[1] - self.size) // 2
        x = x[..., top : top + self.size, left : left + self.size]
        mean = torch.tensor(self.mean, device=x.device).view(3, 1, 1)
        std = torch.tensor(self.std, device=x.device).view(3, 1, 1)
        return (x - mean) / std


def _unit_embedding(output: Any) -> torch.Tensor:
    """Unit-normalised float32 embedding from ``get_*_features``, which return a tensor
    (transformers 4) or an output whose ``pooler_output`` is the projected embedding (5)."""
    embedding = output if isinstance(output, torch.Tensor) else output.pooler_output
    return F.normalize(embedding.float(), dim=-1)


class ContrastiveRewardModel(RewardModel):
    """Frame reward from a CLIP/SigLIP dual encoder; see ``ContrastiveOptions`` for the variants."""

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer: PreTrainedTokenizerBase,
        processor: Any,
        options: ContrastiveOptions,
    ) -> None:
        super().__init__()
        self.options = options
        self.model = model.to(options.device).eval().requires_grad_(False)
        self.tokenizer = tokenizer
        self.tokenizer.padding_side = "right"  # absolute position embeddings: text starts at 0
        self.preprocess = ImagePreprocessing.from_processor(processor, model.config.vision_config.image_size)
        # SigLIP was trained on texts padded to the full length without an attention mask.
        self._pad_to_max_length = model.config.model_type == "siglip"
        self._max_text_length = model.config.text_config.max_position_embeddings
        self._text_cache: dict[str, torch.Tensor] = {}
        self.score_stats = RunningMeanStd((), epsilon=_NORM_EPS, clip=math.inf).to(options.device)
        """Running mean and variance of the raw scores (``normalization: running``)."""

    @classmethod
    def from_directory(cls, path: str | Path, options: ContrastiveOptions) -> ContrastiveRewardModel:
        """Model (float32), tokenizer and image processor from the local directory ``path``."""
        directory = Path(path) if str(path) else None
        if directory is None or not directory.is_dir():
            raise FileNotFoundError(
                f"contrastive reward model: {str(path)!r} is not a local model directory "
                "(one written by save_pretrained, with the model, tokenizer and image processor)"
            )
        from transformers import AutoImageProcessor, AutoModel, AutoTokenizer

        model = AutoModel.from_pretrained(directory, local_files_only=True, dtype=torch.float32)
        required = ("get_image_features", "get_text_features", "logit_scale")
        if not all(hasattr(model, name) for name in required):
            raise ConfigError(
                f"{directory}: {type(model).__name__} is not a CLIP/SigLIP-style dual encoder "
                "(needs get_image_features, get_text_features and logit_scale)"
            )
        tokenizer = AutoTokenizer.from_pretrained(directory, local_files_only=True)
        processor = AutoImageProcessor.from_pretrained(directory, local_files_only=True)
        return cls(model, tokenizer, processor, options)

    def train(self, mode: bool = True) -> ContrastiveRewardModel:
        super().train(mode)
        self.model.eval()  # a frozen scorer: never in training mode
        return self

    def image_embeddings(self, frames: torch.Tensor) -> torch.Tensor:
        """Unit-normalised float32 ``[B, D]`` image embeddings, ``batch_size`` frames at a time."""
        chunks = []
        with torch.inference_mode():
            for chunk in frames.split(self.options.batch_size):
                pixels = self.preprocess(chunk.to(self.options.device))
                chunks.append(_unit_embedding(self.model.get_image_features(pixel_values=pixels)))
        return torch.cat(chunks)

    def text_embeddings(self, prompts: Sequence[str]) -> torch.Tensor:
        """Unit-normalised float32 ``[N, D]`` text embeddings; each distinct prompt is encoded once."""
        missing = [p for p in dict.fromkeys(prompts) if p not in self._text_cache]
        with torch.inference_mode():
            for start in range(0, len(missing), self.options.batch_size):
                chunk = missing[start : start + self.options.batch_size]
                tokens = self.tokenizer(
                    chunk,
                    padding="max_length" if self._pad_to_max_length else True,
                    max_length=self._max_text_length,
                    truncation=True,
                    return_tensors="pt",
                ).to(self.options.device)
                inputs = {"input_ids": tokens["input_ids"]}
                if not self._pad_to_max_length:
                    inputs["attention_mask"] = tokens["attention_mask"]
                embeddings = _unit_embedding(self.model.get_text_features(**inputs))
                self._text_cache.update(zip(chunk, embeddings, strict=True))
        return torch.stack([self._text_cache[p] for p in prompts]).to(self.options.device)

    def _prompts(self, template: str, instructions: Sequence[str]) -> list[str]:
        return [template.format(instruction=instruction) for instruction in instructions]

    def raw_score(self, frames: torch.Tensor, instructions: Sequence[str]) -> torch.Tensor:
        """float32 ``[B]`` reward before the running normalisation, on the model's device."""
        self.check_inputs(frames, instructions)
        options = self.options
        image = self.image_embeddings(frames)
        goal = self.text_embeddings(self._prompts(options.goal_prompt, instructions))
        if options.negative_prompt.strip():
            negative = self.text_embeddings(self._prompts(options.negative_prompt, instructions))
            return cosine_similarity(image, goal) - cosine_similarity(image, negative)
        if options.baseline_prompt.strip():
            baseline = self.text_embeddings(self._prompts(options.baseline_prompt, instructions))
            return goal_baseline_reward(image, goal, baseline, options.alpha)
        return cosine_similarity(image, goal)

    def score(self, frames: torch.Tensor, instructions: Sequence[str], update: bool = False) -> torch.Tensor:
        """float32 ``[B]`` reward on the frames' device. With ``normalization="running"`` it is
        standardised with the statistics from before this call; ``update=True`` then folds this
        batch's raw scores into them, so a frame's score never depends on the batch it is in."""
        raw = self.raw_score(frames, instructions)
        result = self.normalize(raw) if self.options.normalization == "running" else raw
        if update:
            self.update_normalization(raw)
        return result.float().to(frames.device)

    def score_during_training(self, frames: torch.Tensor, instructions: Sequence[str]) -> torch.Tensor:
        return self.score(frames, instructions, update=True)

    def success_probability(self, frames: torch.Tensor, instructions: Sequence[str]) -> torch.Tensor:
        """With ``negative_prompt``: the two-way zero-shot probability of the goal over the negated
        goal (``contrast_probability``). Without it: SigLIP's own image-text probability
        ``sigmoid(logit_scale * cos + logit_bias)``; CLIP defines probabilities only as a softmax over
        several texts, so it raises ``NotImplementedError``."""
        bias = getattr(self.model, "logit_bias", None)
        negative_prompt = self.options.negative_prompt.strip()
        if not negative_prompt and bias is None:
            raise NotImplementedError(
                f"{type(self.model).__name__} gives probabilities only over several texts: "
                "set the contrastive option negative_prompt to get a success probability"
            )
        self.check_inputs(frames, instructions)
        image = self.image_embeddings(frames)
        goal = self.text_embeddings(self._prompts(self.options.goal_prompt, instructions))
        with torch.inference_mode():
            scale = self.model.logit_scale.float().exp()
            cos_goal = cosine_similarity(image, goal)
            if negative_prompt:
                negative = self.text_embeddings(self._prompts(self.options.negative_prompt, instructions))
                probability = contrast_probability(cos_goal, cosine_similarity(image, negative), scale)
            else:
                probability = torch.sigmoid(scale * cos_goal + bias.float())
        return probability.float().to(frames.device)

    def update_normalization(self, scores: torch.Tensor) -> None:
        """Fold raw scores into the running mean/variance (``RunningMeanStd``)."""
        self.score_stats.update(scores)

    def normalize(self, raw: torch.Tensor) -> torch.Tensor:
        """``(raw - mean) / sqrt(var + eps)``; unchanged until two scores have been seen."""
        if self.score_stats.count.item() < 2:
            return raw
        return self.score_stats(raw.double()).float()


def build_contrastive(path: str, options: dict[str, Any]) -> ContrastiveRewardModel:
    """The ``contrastive`` reward model from the local CLIP/SigLIP directory ``path``."""
    settings = CONTRASTIVE_OPTIONS.validate(options, REWARD_OPTIONS_KEY)
    return ContrastiveRewardModel.from_directory(path, settings)
