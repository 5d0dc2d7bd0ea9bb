"""The VLM judge on a tiny random PaliGemma saved to disk and loaded through the registry."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForImageTextToText, AutoProcessor

from benchmarks.tiny_judge import build_tiny_judge
from vla_rl.config.load import ConfigError
from vla_rl.rewards import RewardModelError, build_reward_model
from vla_rl.rewards.vlm_judge import (
    DEFAULT_QUESTION,
    VLMJudge,
    last_token_index,
    pairwise_progress_reward,
)

IMAGE_SIZE = 32
INSTRUCTIONS = [
    "pick up the red cube",
    "open",
    "put the red cube on the blue pad and then open the drawer",
    "close the drawer",
    "push the cube",
]


@pytest.fixture(scope="module")
def judge_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    return build_tiny_judge(
        tmp_path_factory.mktemp("judge"), image_size=IMAGE_SIZE, instructions=INSTRUCTIONS
    )


@pytest.fixture(scope="module")
def judge(judge_dir: Path) -> VLMJudge:
    model = build_reward_model("vlm_judge", str(judge_dir), {})
    assert isinstance(model, VLMJudge)
    return model


def frames(batch: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (batch, IMAGE_SIZE, IMAGE_SIZE, 3), dtype=torch.uint8, generator=generator)


def test_success_probability_is_a_probability_per_frame(judge: VLMJudge) -> None:
    probability = judge.success_probability(frames(5), INSTRUCTIONS)
    assert probability.shape == (5,)
    assert probability.dtype == torch.float32
    assert ((probability >= 0) & (probability <= 1)).all()
    assert torch.equal(judge.score(frames(5), INSTRUCTIONS), probability)


def test_yes_and_no_probabilities_sum_to_one(judge: VLMJudge) -> None:
    logits = judge.success_logits(frames(5), INSTRUCTIONS)
    p_yes = judge.success_probability(frames(5), INSTRUCTIONS)
    p_no = torch.exp(logits[:, 1]) / torch.exp(logits).sum(-1)
    torch.testing.assert_close(p_yes + p_no, torch.ones(5))
    torch.testing.assert_close(p_yes, torch.sigmoid(logits[:, 0] - logits[:, 1]))


def test_log_odds_score(judge_dir: Path, judge: VLMJudge) -> None:
    log_odds = build_reward_model("vlm_judge", str(judge_dir), {"score": "log_odds"})
    logits = judge.success_logits(frames(3), INSTRUCTIONS[:3])
    torch.testing.assert_close(log_odds.score(frames(3), INSTRUCTIONS[:3]), logits[:, 0] - logits[:, 1])


def test_probability_matches_a_direct_forward_at_the_last_real_token(
    judge_dir: Path, judge: VLMJudge
) -> None:
    processor = AutoProcessor.from_pretrained(judge_dir, local_files_only=True)
    model = AutoModelForImageTextToText.from_pretrained(judge_dir, local_files_only=True).eval()
    batch = frames(5)
    prompts = ["<image>" + DEFAULT_QUESTION.format(instruction=text) for text in INSTRUCTIONS]
    inputs = processor(
        text=prompts,
        images=[[image] for image in batch.numpy()],
        padding=True,
        padding_side="right",
        return_tensors="np",
    )
    inputs = {key: torch.from_numpy(value) for key, value in inputs.items() if key != "labels"}
    lengths = inputs["attention_mask"].sum(-1)
    assert len(set(lengths.tolist())) > 1, "the prompts must need padding"
    with torch.no_grad():
        logits = model(**inputs).logits
    last = lengths - 1
    newline = processor.tokenizer.convert_tokens_to_ids("\n")
    assert (inputs["input_ids"][torch.arange(5), last] == newline).all()
    yes, no = (processor.tokenizer.convert_tokens_to_ids(word) for word in ("yes", "no"))
    answer = logits[torch.arange(5), last][:, [yes, no]]
    expected = torch.exp(answer[:, 0]) / (torch.exp(answer[:, 0]) + torch.exp(answer[:, 1]))
    torch.testing.assert_close(judge.success_probability(batch, INSTRUCTIONS), expected, atol=1e-6, rtol=0)


def test_batch_scores_equal_one_by_one(judge_dir: Path, judge: VLMJudge) -> None:
    batch = frames(5, seed=1)
    together = judge.success_logits(batch, INSTRUCTIONS)
    alone = torch.cat([judge.success_logits(batch[i : i + 1], INSTRUCTIONS[i : i + 1]) for i in range(5)])
    torch.testing.assert_close(together, alone, atol=1e-5, rtol=0)
    chunked = build_reward_model("vlm_judge", str(judge_dir), {"batch_size": 2})
    torch.testing.assert_close(
        chunked.success_probability(batch, INSTRUCTIONS),
        judge.success_probability(batch, INSTRUCTIONS),
        atol=1e-5,
        rtol=0,
    )


def test_last_token_index_for_both_padding_sides() -> None:
    right = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]])
    left = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1], [0, 0, 0, 0, 1]])
    assert last_token_index(right).tolist() == [2, 4, 0]
    assert last_token_index(left).tolist() == [4, 4, 4]


@pytest.mark.parametrize("layout", ["separate", "side_by_side"])
def test_pairwise_progress(judge_dir: Path, layout: str) -> None:
    judge = build_reward_model("vlm_judge", str(judge_dir), {"pair_layout": layout})
    earlier, later = frames(4, seed=2), frames(4, seed=3)
    probability = judge.pairwise_progress(earlier, later, INSTRUCTIONS[:4])
    assert probability.shape == (4,)
    assert probability.dtype == torch.float32
    assert ((probability >= 0) & (probability <= 1)).all()
    images = [[a, b] for a, b in zip(earlier.numpy(), later.numpy(), strict=True)]
    if layout == "side_by_side":
        images = [[torch.cat([earlier[i], later[i]], dim=1).numpy()] for i in range(4)]
    inputs = judge.encode(images, ["question"] * 4)
    image_tokens = (inputs["input_ids"] == judge.processor.image_token_id).sum(-1)
    expected_images = 2 if layout == "separate" else 1
    assert (image_tokens == expected_images * judge.processor.image_seq_length).all()


def test_pairwise_progress_reward() -> None:
    reward = pairwise_progress_reward(torch.tensor([0.0, 0.5, 1.0]))
    torch.testing.assert_close(reward, torch.tensor([-1.0, 0.0, 1.0]))


def test_bad_inputs_raise(judge: VLMJudge) -> None:
    with pytest.raises(RewardModelError, match="empty"):
        judge.success_probability(frames(2), ["pick up the red cube", " "])
    with pytest.raises(RewardModelError, match="uint8"):
        judge.success_probability(frames(2).float(), INSTRUCTIONS[:2])
    with pytest.raises(RewardModelError, match="shape"):
        judge.success_probability(frames(2)[..., :2], INSTRUCTIONS[:2])
    with pytest.raises(RewardModelError, match="2 frames but 3 instructions"):
        judge.score(frames(2), INSTRUCTIONS[:3])
    with pytest.raises(RewardModelError, match="differ"):
        judge.pairwise_progress(frames(2), frames(2)[:, :16], INSTRUCTIONS[:2])


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"yes_answer": "yes please"}, "yes_answer"),
        ({"no_answer": "nope"}, "no_answer"),
        ({"no_answer": "yes"}, "no_answer"),
        ({"question": "Is the task done?"}, "question"),
        ({"progress_question": "Better?"}, "progress_question"),
        ({"score": "margin"}, "score"),
        ({"batch_size": 0}, "batch_size"),
        ({"temperature": 1.0}, "temperature"),
    ],
)
def test_bad_options_raise_config_error_naming_the_key(judge_dir: Path, options: dict, key: str) -> None:
    with pytest.raises(ConfigError, match=f"'reward.options.{key}'"):
        build_reward_model("vlm_judge", str(judge_dir), options)


def test_multi_token_answer_message(judge_dir: Path) -> None:
    with pytest.raises(ConfigError, match="must be a single token.*it is 2"):
        build_reward_model("vlm_judge", str(judge_dir), {"yes_answer": "yes please"})


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="local model directory"):
        build_reward_model("vlm_judge", str(tmp_path / "absent"), {})
