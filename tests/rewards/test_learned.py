"""The learned success/progress model: outputs, batching, persistence and input errors."""

from __future__ import annotations

import pytest
import torch
from reward_fixtures import IMAGE_PX, make_learned_model, random_frames

from vla_rl.config import ConfigError
from vla_rl.rewards import RewardModelError, build_reward_model
from vla_rl.rewards.learned import word_ids

INSTRUCTIONS = ["push the cube onto the target", "move the gripper to the target", "lift the cube"]


def instructions(batch: int) -> list[str]:
    return [INSTRUCTIONS[i % len(INSTRUCTIONS)] for i in range(batch)]


@pytest.mark.parametrize("views", [1, 2])
def test_outputs_have_shape_range_and_do_not_depend_on_the_batch(views: int) -> None:
    cameras = ("front", "wrist")[:views]
    model = make_learned_model(cameras)
    frames = random_frames(5, views)
    batch = model.score(frames, instructions(5))
    assert batch.shape == (5,) and batch.dtype == torch.float32
    assert bool(((batch >= 0) & (batch <= 1)).all())
    one_by_one = torch.cat([model.score(frames[i : i + 1], instructions(5)[i : i + 1]) for i in range(5)])
    torch.testing.assert_close(batch, one_by_one, atol=1e-6, rtol=0)
    assert batch.std() > 1e-3, "frames should not all score the same"


def test_mean_score_is_the_mean_of_the_two_heads() -> None:
    model = make_learned_model()
    frames = random_frames(4)
    success, progress = model.heads_out(frames, instructions(4))
    torch.testing.assert_close(model.score(frames, instructions(4)), 0.5 * (success + progress))
    torch.testing.assert_close(model.success_probability(frames, instructions(4)), success)
    torch.testing.assert_close(model.progress(frames, instructions(4)), progress)


def test_the_instruction_changes_the_score() -> None:
    model = make_learned_model()
    frames = random_frames(1).expand(2, -1, -1, -1)
    scores = model.score(frames, ["push the cube onto the target", "lift the cube"])
    assert scores[0] != scores[1]


def test_words_hash_the_same_in_every_process() -> None:
    # crc32 of "push" is 0x5F3A1664 = 1597642340; 1597642340 % 512 = 100.
    assert word_ids("Push", 512) == [100]


def test_save_and_load_through_the_registry(tmp_path) -> None:
    model = make_learned_model(("front", "wrist"))
    model.save_pretrained(tmp_path / "rm")
    loaded = build_reward_model("learned", str(tmp_path / "rm"), {"score": "progress"})
    frames = random_frames(3, views=2)
    torch.testing.assert_close(loaded.score(frames, instructions(3)), model.progress(frames, instructions(3)))
    assert loaded.num_views == 2 and loaded.image_size == IMAGE_PX


def test_bad_inputs_are_clear_errors(tmp_path) -> None:
    model = make_learned_model()
    with pytest.raises(RewardModelError, match="built for 48x48 frames, got 64x64"):
        model.score(torch.zeros(2, 64, 64, 3, dtype=torch.uint8), instructions(2))
    with pytest.raises(RewardModelError, match="instruction 1 is empty"):
        model.score(random_frames(2), ["lift the cube", "  "])
    with pytest.raises(RewardModelError, match="uint8"):
        model.score(random_frames(2).float(), instructions(2))
    with pytest.raises(RewardModelError, match=r"\[B, H, W, 3\]"):
        model.score(random_frames(2)[..., :1], instructions(2))
    with pytest.raises(RewardModelError, match="2 frames but 1 instructions"):
        model.score(random_frames(2), instructions(1))
    with pytest.raises(FileNotFoundError, match="reward-train"):
        build_reward_model("learned", str(tmp_path / "missing"))
    model.save_pretrained(tmp_path / "rm")
    with pytest.raises(ConfigError, match="score"):
        build_reward_model("learned", str(tmp_path / "rm"), {"score": "value"})
    with pytest.raises(ConfigError, match="unknown config key"):
        build_reward_model("learned", str(tmp_path / "rm"), {"temperature": 1.0})
    with pytest.raises(ValueError, match="unknown reward model 'clip'"):
        build_reward_model("clip", "")


def test_a_pretrained_clip_tower_fine_tunes_and_reloads_from_the_saved_folder(tmp_path) -> None:
    from benchmarks.tiny_reward_models import build_tiny_contrastive
    from vla_rl.rewards.learned import LearnedRewardConfig, LearnedRewardModel

    clip = build_tiny_contrastive(tmp_path / "clip", "clip", image_size=32, patch_size=8)
    config = LearnedRewardConfig(image_size=IMAGE_PX, backbone="pretrained", backbone_path=str(clip))
    model = LearnedRewardModel(config)
    frames = random_frames(4)
    success_logit, _ = model(frames, instructions(4))
    success_logit.sum().backward()
    tower_grads = [p.grad for p in model.encoder.model.vision_model.parameters() if p.grad is not None]
    assert tower_grads and any(bool(g.abs().sum() > 0) for g in tower_grads), "the tower is fine-tuned"
    with torch.no_grad():
        model.heads[-1].weight.mul_(100.0)
    model.save_pretrained(tmp_path / "rm")
    (clip / "model.safetensors").unlink()  # the saved reward model must not need the original folder
    loaded = build_reward_model("learned", str(tmp_path / "rm"))
    torch.testing.assert_close(
        loaded.score(frames, instructions(4)), model.eval().score(frames, instructions(4))
    )

    frozen = LearnedRewardModel(
        LearnedRewardConfig(
            backbone="pretrained", backbone_path=str(tmp_path / "rm/backbone"), freeze_backbone=True
        )
    )
    frozen(frames, instructions(4))[0].sum().backward()
    assert all(p.grad is None for p in frozen.encoder.model.parameters())
