"""The contrastive (CLIP/SigLIP) reward model, on tiny random checkpoints saved to disk."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from benchmarks.tiny_reward_models import build_tiny_contrastive
from vla_rl.config.load import ConfigError
from vla_rl.rewards import RewardModelError, build_reward_model
from vla_rl.rewards.contrastive import (
    ContrastiveRewardModel,
    contrast_probability,
    cosine_similarity,
    goal_baseline_reward,
)

INSTRUCTIONS = ["pick up the red cube", "push the cube onto the target", "place it on the green pad"]
POSITIVE = "the red cube is on the pad"
NEGATIVE = "the red cube is not on the pad"
FAMILIES = ["clip", "siglip"]


@pytest.fixture(scope="module", params=FAMILIES)
def model_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp(request.param)
    return build_tiny_contrastive(
        directory, family=request.param, image_size=32, instructions=[*INSTRUCTIONS, POSITIVE, NEGATIVE]
    )


def load(directory: Path, **options: object) -> ContrastiveRewardModel:
    model = build_reward_model("contrastive", str(directory), options)
    assert isinstance(model, ContrastiveRewardModel)
    return model


def frames(batch: int, height: int = 40, width: int = 48, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (batch, height, width, 3), dtype=torch.uint8, generator=generator)


def instructions(batch: int) -> list[str]:
    return [INSTRUCTIONS[i % len(INSTRUCTIONS)] for i in range(batch)]


def direct_embeddings(
    model: ContrastiveRewardModel, images: torch.Tensor, texts: list[str]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Image and text embeddings straight from the transformers model, one text at a time."""
    inner = model.model
    with torch.no_grad():
        image = inner.get_image_features(pixel_values=model.preprocess(images)).pooler_output
        text = []
        for prompt in texts:
            pad = "max_length" if inner.config.model_type == "siglip" else False
            ids = model.tokenizer([prompt], padding=pad, max_length=32, return_tensors="pt")["input_ids"]
            text.append(inner.get_text_features(input_ids=ids).pooler_output[0])
    return F.normalize(image, dim=-1), F.normalize(torch.stack(text), dim=-1)


# -- pure functions ---------------------------------------------------------------------------


def test_goal_baseline_projection_by_hand() -> None:
    # g = (1, 0), b = (0, 1), s = (0.6, 0.8): d = g - b = (1, -1), |d|^2 = 2, v = s - g = (-0.4, 0.8),
    # d.v = -0.4 - 0.8 = -1.2, so the projection of v on d is d * (-1.2 / 2) = (-0.6, 0.6).
    # alpha 1:   P v = (-0.6, 0.6),                             |P v|^2 = 0.72, reward 1 - 0.36 = 0.64
    # alpha 0:   P v = v = (-0.4, 0.8),                          |P v|^2 = 0.80, reward 0.60 = s.g
    # alpha 0.5: P v = 0.5 (-0.6, 0.6) + 0.5 (-0.4, 0.8) = (-0.5, 0.7), |P v|^2 = 0.74, reward 0.63
    g, b, s = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0]), torch.tensor([0.6, 0.8])
    for alpha, expected in ((1.0, 0.64), (0.0, 0.60), (0.5, 0.63)):
        assert goal_baseline_reward(s, g, b, alpha).item() == pytest.approx(expected, abs=1e-6)
    # Inputs are normalised first: scaling any of them changes nothing.
    assert goal_baseline_reward(3 * s, 2 * g, 5 * b, 1.0).item() == pytest.approx(0.64, abs=1e-6)


def test_goal_baseline_at_alpha_zero_is_cosine_similarity() -> None:
    generator = torch.Generator().manual_seed(1)
    s, g, b = (torch.randn(5, 16, generator=generator) for _ in range(3))
    torch.testing.assert_close(goal_baseline_reward(s, g, b, 0.0), cosine_similarity(s, g), atol=1e-6, rtol=0)


def test_contrast_probability_is_two_way_softmax() -> None:
    cos_pos, cos_neg, scale = torch.tensor([0.3, 0.1]), torch.tensor([0.1, 0.3]), torch.tensor(10.0)
    expected = torch.softmax(scale * torch.stack([cos_pos, cos_neg], dim=-1), dim=-1)[:, 0]
    torch.testing.assert_close(contrast_probability(cos_pos, cos_neg, scale), expected)


# -- the model --------------------------------------------------------------------------------


def test_scores_are_float32_per_frame_and_batch_invariant(model_dir: Path) -> None:
    model = load(model_dir, batch_size=4)
    batch, texts = frames(6), instructions(6)
    scores = model.score(batch, texts)
    assert scores.shape == (6,) and scores.dtype == torch.float32
    assert torch.isfinite(scores).all()
    one_by_one = torch.cat([model.score(batch[i : i + 1], texts[i : i + 1]) for i in range(6)])
    torch.testing.assert_close(scores, one_by_one, atol=1e-5, rtol=0)


@pytest.mark.parametrize(("height", "width"), [(32, 32), (64, 48), (48, 80), (20, 30)])
def test_preprocessing_matches_the_checkpoint_image_processor(
    model_dir: Path, height: int, width: int
) -> None:
    from transformers import AutoImageProcessor

    model = load(model_dir)
    processor = AutoImageProcessor.from_pretrained(model_dir, local_files_only=True)
    # Smooth images: PIL's and torch's bicubic kernels differ at sharp edges, not on smooth content.
    coarse = torch.rand(2, 3, 4, 4, generator=torch.Generator().manual_seed(2))
    smooth = F.interpolate(coarse, (height, width), mode="bilinear", align_corners=False)
    images = (smooth * 255).round().to(torch.uint8).permute(0, 2, 3, 1).contiguous()
    expected = processor(images=list(images.numpy()), return_tensors="pt")["pixel_values"]
    # The processor resizes in uint8 (PIL) and rounds: allow 1.5 grey levels (a level is 1 / 255 / std),
    # and half a level on average.
    level = 1 / 255 / min(processor.image_std)
    ours = model.preprocess(images)
    torch.testing.assert_close(ours, expected, atol=1.5 * level, rtol=0)
    assert (ours - expected).abs().mean() < 0.5 * level


def test_alpha_zero_is_plain_cosine_similarity(model_dir: Path) -> None:
    model = load(model_dir, baseline_prompt="a robot arm on a table", alpha=0.0)
    batch, texts = frames(4), instructions(4)
    image, text = direct_embeddings(model, batch, texts)
    torch.testing.assert_close(model.score(batch, texts), (image * text).sum(-1), atol=1e-5, rtol=0)


def test_goal_prompt_template_and_alpha_one(model_dir: Path) -> None:
    baseline = "a robot arm on a table"
    model = load(model_dir, goal_prompt="goal: {instruction}", baseline_prompt=baseline, alpha=1.0)
    batch, texts = frames(3), instructions(3)
    goals = [f"goal: {text}" for text in texts]
    image, text = direct_embeddings(model, batch, [*goals, baseline])
    expected = goal_baseline_reward(image, text[:3], text[3], 1.0)
    torch.testing.assert_close(model.score(batch, texts), expected, atol=1e-5, rtol=0)


def test_positive_negative_contrast_and_success_probability(model_dir: Path) -> None:
    model = load(model_dir, goal_prompt=POSITIVE, negative_prompt=NEGATIVE)
    batch, texts = frames(5), instructions(5)
    image, text = direct_embeddings(model, batch, [POSITIVE, NEGATIVE])
    cos_pos, cos_neg = image @ text[0], image @ text[1]
    torch.testing.assert_close(model.score(batch, texts), cos_pos - cos_neg, atol=1e-5, rtol=0)
    probability = model.success_probability(batch, texts)
    assert probability.shape == (5,) and probability.dtype == torch.float32
    assert ((probability >= 0) & (probability <= 1)).all()
    expected = torch.sigmoid(model.model.logit_scale.exp() * (cos_pos - cos_neg)).detach()
    torch.testing.assert_close(probability, expected, atol=1e-5, rtol=0)


def test_success_probability_without_negative_prompt(model_dir: Path) -> None:
    model = load(model_dir)
    batch, texts = frames(3), instructions(3)
    if model.model.config.model_type == "clip":
        with pytest.raises(NotImplementedError, match="negative_prompt"):
            model.success_probability(batch, texts)
        return
    image, text = direct_embeddings(model, batch, texts)
    logits = model.model.logit_scale.exp() * (image * text).sum(-1) + model.model.logit_bias
    torch.testing.assert_close(model.success_probability(batch, texts), torch.sigmoid(logits).detach())


def test_running_normalization_is_batch_independent(model_dir: Path) -> None:
    model = load(model_dir, normalization="running")
    batch, texts = frames(6), instructions(6)
    raw = model.raw_score(batch, texts)
    # Frames met in training update the statistics, after being scored with those from before.
    torch.testing.assert_close(model.score_during_training(batch, texts), raw)
    expected = (raw.double() - raw.double().mean()) / torch.sqrt(raw.double().var(unbiased=False) + 1e-8)
    scores = model.score(batch, texts)
    torch.testing.assert_close(scores, expected.float(), atol=1e-4, rtol=1e-4)
    one_by_one = torch.cat([model.score(batch[i : i + 1], texts[i : i + 1]) for i in range(6)])
    torch.testing.assert_close(scores, one_by_one, atol=1e-4, rtol=1e-4)
    restored = load(model_dir, normalization="running")
    restored.load_state_dict(model.state_dict())  # the statistics are buffers: they save with the module
    assert int(restored.score_stats.count) == 6
    torch.testing.assert_close(restored.score(batch, texts), scores)
    model.update_normalization(raw[:2])  # incremental update matches the statistics of all 8
    everything = torch.cat([raw, raw[:2]]).double()
    assert model.score_stats.mean.item() == pytest.approx(everything.mean().item(), abs=1e-9)
    assert model.score_stats.var.item() == pytest.approx(everything.var(unbiased=False).item())


# -- errors -----------------------------------------------------------------------------------


def test_bad_inputs_raise(model_dir: Path) -> None:
    model = load(model_dir)
    with pytest.raises(RewardModelError, match="instruction 1 is empty"):
        model.score(frames(2), ["push the cube", "  "])
    with pytest.raises(RewardModelError, match="uint8"):
        model.score(frames(2).float(), instructions(2))
    with pytest.raises(RewardModelError, match=r"\[B, H, W, 3\]"):
        model.score(frames(2)[..., :2], instructions(2))
    with pytest.raises(RewardModelError, match=r"\[B, H, W, 3\]"):
        model.score(frames(2)[0], instructions(2))


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"goal_promt": "x"}, "goal_promt"),
        ({"alpha": 1.5, "baseline_prompt": "a robot"}, "alpha"),
        ({"alpha": 0.5}, "baseline_prompt"),
        ({"normalization": "batch"}, "normalization"),
        ({"goal_prompt": "{task}"}, "goal_prompt"),
        ({"negative_prompt": "not done", "baseline_prompt": "a robot", "alpha": 0.5}, "negative_prompt"),
    ],
)
def test_bad_options_raise_config_error(model_dir: Path, options: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError, match=f"'reward.options.{key}'"):
        build_reward_model("contrastive", str(model_dir), options)


def test_missing_directory_raises(tmp_path: Path) -> None:
    missing = tmp_path / "no_such_model"
    with pytest.raises(FileNotFoundError, match="no_such_model"):
        build_reward_model("contrastive", str(missing), {})
    with pytest.raises(FileNotFoundError, match="not a local model directory"):
        build_reward_model("contrastive", "", {})
