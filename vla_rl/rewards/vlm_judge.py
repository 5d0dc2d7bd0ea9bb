"""A generative vision-language model used as a judge: one forward pass, two answer logits.

The judge asks an image-text-to-text model a yes/no question about a frame ("Is the task '...'
done?") and reads the next-token logits at the answer position, without generating text. Only
the logits of the two answer tokens are compared, so ``P(yes) = exp(l_yes) / (exp(l_yes) +
exp(l_no))`` and ``P(yes) + P(no) = 1`` whatever mass the model puts on other tokens.

Any model that ``AutoModelForImageTextToText`` and ``AutoProcessor`` load from a local directory
works: PaliGemma (plain prompt, the processor adds ``<bos>`` after the image tokens and ``"\\n"``
at the end), SmolVLM/Idefics3 and Qwen-VL (the processor's chat template builds the prompt and
places the image tokens).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from vla_rl.config.structured import Check, ConfigError, Schema
from vla_rl.rewards.base import RewardModel, RewardModelError
from vla_rl.rewards.config import REWARD_OPTIONS_KEY, is_torch_device

INSTRUCTION_FIELD = "{instruction}"
DEFAULT_QUESTION = "Is the task '{instruction}' done? Answer yes or no."
DEFAULT_PROGRESS_QUESTION = (
    "Is the second image closer to completing the task '{instruction}' than the first? Answer yes or no."
)
SCORES = ("success", "log_odds")
PAIR_LAYOUTS = ("separate", "side_by_side")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class VLMJudgeOptions:
    """Options of the ``vlm_judge`` entry of the reward-model registry."""

    question: str = DEFAULT_QUESTION
    """Success question; ``{instruction}`` is replaced by the frame's instruction."""
    progress_question: str = DEFAULT_PROGRESS_QUESTION
    """Question of ``pairwise_progress`` about the (earlier, later) pair; needs ``{instruction}``."""
    yes_answer: str = "yes"
    """Answer text meaning "yes", tokenized exactly as written (add a leading space for tokenizers
    whose answer follows a space, e.g. after ``Assistant:``); must be a single token."""
    no_answer: str = "no"
    """Answer text meaning "no"; a single token, different from ``yes_answer``."""
    score: str = "success"
    """What ``score`` returns: ``success`` (P(yes), in [0, 1]) or ``log_odds`` (``l_yes - l_no``)."""
    pair_layout: str = "separate"
    """How ``pairwise_progress`` shows the two frames: ``separate`` (two images in one prompt)
    or ``side_by_side`` (one image, earlier left and later right) for models that take one image."""
    batch_size: int = 16
    """Frames per forward pass; larger batches are scored in chunks of this size."""
    device: str = "cpu"
    """Torch device the model runs on."""
    dtype: str = "float32"
    """Weights dtype: ``float32``, ``bfloat16`` or ``float16``; the answer logits are compared in
    float32."""


VLM_JUDGE_CHECKS = (
    Check("question", lambda o: INSTRUCTION_FIELD in o.question, f"must contain {INSTRUCTION_FIELD}"),
    Check(
        "progress_question",
        lambda o: INSTRUCTION_FIELD in o.progress_question,
        f"must contain {INSTRUCTION_FIELD}",
    ),
    Check("no_answer", lambda o: o.no_answer != o.yes_answer, "must differ from yes_answer"),
    Check("score", lambda o: o.score in SCORES, f"must be one of {list(SCORES)}"),
    Check("pair_layout", lambda o: o.pair_layout in PAIR_LAYOUTS, f"must be one of {list(PAIR_LAYOUTS)}"),
    Check("batch_size", lambda o: o.batch_size > 0, "must be positive"),
    Check("dtype", lambda o: o.dtype in DTYPES, f"must be one of {list(DTYPES)}"),
    Check("device", lambda o: is_torch_device(o.device), "must be a torch device such as 'cpu' or 'cuda:0'"),
)
VLM_JUDGE_OPTIONS = Schema(VLMJudgeOptions, VLM_JUDGE_CHECKS)
"""``reward.options`` of ``reward.model: vlm_judge``, checked when a config is validated."""


def last_token_index(attention_mask: torch.Tensor) -> torch.Tensor:
    """long ``[B]``: index of each row's last real token (mask 1), for left or right padding."""
    length = attention_mask.shape[-1]
    return length - 1 - attention_mask.flip(-1).long().argmax(-1)


def answer_probability(answer_logits: torch.Tensor) -> torch.Tensor:
    """P(yes) from ``[..., 2]`` (yes, no) logits: the softmax over the two answers only."""
    return torch.softmax(answer_logits.float(), dim=-1)[..., 0]


def pairwise_progress_reward(p_later_better: torch.Tensor) -> torch.Tensor:
    """Dense per-step reward ``2 * p - 1`` in [-1, 1] from pairwise judgements along an episode.

    ``p_later_better[t]`` is ``pairwise_progress(frame_t, frame_t+1)``: the probability that step
    ``t`` moved closer to completing the task. The reward is positive when the judge thinks the
    step made progress, negative when it undid some, and 0 when it cannot tell (p = 0.5).
    """
    return 2.0 * p_later_better.float() - 1.0


class VLMJudge(RewardModel):
    """Success probability and pairwise progress read off a VLM's yes/no answer logits."""

    def __init__(self, model: torch.nn.Module, processor: Any, options: VLMJudgeOptions) -> None:
        super().__init__()
        self.options = options
        self.processor = processor
        self.model = model.eval().requires_grad_(False)
        tokenizer = processor.tokenizer
        self.answer_ids = (
            single_token_id(tokenizer, options.yes_answer, f"{REWARD_OPTIONS_KEY}.yes_answer"),
            single_token_id(tokenizer, options.no_answer, f"{REWARD_OPTIONS_KEY}.no_answer"),
        )
        if self.answer_ids[0] == self.answer_ids[1]:
            raise ConfigError("config key 'no_answer': tokenizes to the same token as yes_answer")
        self.uses_chat_template = getattr(processor, "chat_template", None) is not None
        self.image_token = getattr(processor, "image_token", None) or "<image>"
        self.keeps_logits = "logits_to_keep" in inspect.signature(model.forward).parameters

    def score(self, frames: torch.Tensor, instructions: Sequence[str]) -> torch.Tensor:
        logits = self.success_logits(frames, instructions)
        if self.options.score == "log_odds":
            return (logits[:, 0] - logits[:, 1]).to(frames.device)
        return answer_probability(logits).to(frames.device)

    def success_probability(self, frames: torch.Tensor, instructions: Sequence[str]) -> torch.Tensor:
        return answer_probability(self.success_logits(frames, instructions)).to(frames.device)

    def pairwise_progress(
        self, earlier: torch.Tensor, later: torch.Tensor, instructions: Sequence[str]
    ) -> torch.Tensor:
        """P(yes) to ``progress_question`` about (``earlier``, ``later``).

        With ``pair_layout="separate"`` (default) the prompt holds two images, earlier first;
        PaliGemma's processor and model in transformers 5 take several ``<image>`` placeholders
        per prompt (each expanded to its image tokens, all in the bidirectional prefix). With
        ``side_by_side`` the frames are joined along the width into one ``[H, 2W, 3]`` image,
        earlier on the left, which the image processor then resizes to its input size.
        """
        self.check_inputs(earlier, instructions)
        self.check_inputs(later, instructions)
        if earlier.shape != later.shape:
            raise RewardModelError(f"earlier {tuple(earlier.shape)} and later {tuple(later.shape)} differ")
        first, second = _to_numpy(earlier), _to_numpy(later)
        if self.options.pair_layout == "side_by_side":
            images = [[np.concatenate([a, b], axis=1)] for a, b in zip(first, second, strict=True)]
        else:
            images = [[a, b] for a, b in zip(first, second, strict=True)]
        prompts = [_fill(self.options.progress_question, text) for text in instructions]
        return answer_probability(self.answer_logits(images, prompts)).to(earlier.device)

    def success_logits(self, frames: torch.Tensor, instructions: Sequence[str]) -> torch.Tensor:
        """float32 ``[B, 2]``: the (yes, no) logits of ``question`` for each frame."""
        self.check_inputs(frames, instructions)
        images = [[image] for image in _to_numpy(frames)]
        prompts = [_fill(self.options.question, text) for text in instructions]
        return self.answer_logits(images, prompts)

    def answer_logits(self, images: Sequence[Sequence[np.ndarray]], questions: Sequence[str]) -> torch.Tensor:
        """float32 ``[B, 2]`` (yes, no) logits: ``questions[i]`` about the uint8 HWC ``images[i]``."""
        step = self.options.batch_size
        chunks = [
            self._forward(images[start : start + step], questions[start : start + step])
            for start in range(0, len(questions), step)
        ]
        return torch.cat(chunks).clone()

    @torch.inference_mode()
    def _forward(self, images: Sequence[Sequence[np.ndarray]], questions: Sequence[str]) -> torch.Tensor:
        inputs = self.encode(images, questions)
        last = last_token_index(inputs["attention_mask"])
        if self.keeps_logits:
            # Only the answer position is projected onto the vocabulary.
            logits = self.model(**inputs, logits_to_keep=last[:, None]).logits[:, 0]
        else:
            logits = self.model(**inputs).logits[torch.arange(last.shape[0]), last]
        return logits[:, list(self.answer_ids)].float().cpu()

    def encode(self, images: Sequence[Sequence[np.ndarray]], questions: Sequence[str]) -> dict[str, Any]:
        """Processor inputs on the model's device, padded on the right.

        Right padding keeps every real token at the position it has when the prompt is alone
        (some models number positions from the first token whatever the mask, PaliGemma
        among them), so a frame gets the same score alone or in a batch; the answer is read at
        ``last_token_index`` of the attention mask, which holds for either padding side.
        """
        from transformers import BatchFeature

        texts = [self._prompt(len(row), question) for row, question in zip(images, questions, strict=True)]
        extra = {}
        bos = self.processor.tokenizer.bos_token
        if self.uses_chat_template and bos and all(text.startswith(bos) for text in texts):
            extra["add_special_tokens"] = False  # the template already wrote <bos>
        batch = self.processor(
            text=texts,
            images=[list(row) for row in images],
            padding=True,
            padding_side="right",
            return_tensors="np",  # "pt" makes PaliGemma's processor build its labels from tensors
            **extra,
        )
        arrays = {
            key: value for key, value in batch.items() if key != "labels" and isinstance(value, np.ndarray)
        }
        # Floating-point inputs (the pixels) take the weights' dtype; token ids keep theirs.
        return BatchFeature(arrays, tensor_type="pt").to(device=self.model.device, dtype=self.model.dtype)

    def _prompt(self, num_images: int, question: str) -> str:
        if not self.uses_chat_template:
            return self.image_token * num_images + question
        content = [{"type": "image"} for _ in range(num_images)] + [{"type": "text", "text": question}]
        messages = [{"role": "user", "content": content}]
        return self.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


def single_token_id(tokenizer: Any, text: str, key: str) -> int:
    """Id of ``text`` when the tokenizer encodes it as one known token, else ``ConfigError``."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    if len(ids) != 1:
        tokens = tokenizer.convert_ids_to_tokens(ids)
        raise ConfigError(
            f"config key '{key}': {text!r} must be a single token of the judge's tokenizer, "
            f"it is {len(ids)}: {tokens}"
        )
    if tokenizer.unk_token_id is not None and ids[0] == tokenizer.unk_token_id:
        raise ConfigError(f"config key '{key}': {text!r} is not in the judge's vocabulary")
    return int(ids[0])


def _fill(template: str, instruction: str) -> str:
    return template.replace(INSTRUCTION_FIELD, instruction)


def _to_numpy(frames: torch.Tensor) -> list[np.ndarray]:
    return list(frames.detach().cpu().numpy())


def load_vlm_judge(path: str, options: VLMJudgeOptions) -> VLMJudge:
    """The judge whose model and processor ``save_pretrained`` wrote into the local ``path``."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    processor = AutoProcessor.from_pretrained(path, local_files_only=True)
    model = AutoModelForImageTextToText.from_pretrained(
        path, local_files_only=True, dtype=DTYPES[options.dtype]
    )
    return VLMJudge(model.to(options.device), processor, options)


def build_vlm_judge(path: str, options: dict[str, Any]) -> RewardModel:
    opts = VLM_JUDGE_OPTIONS.validate(options, REWARD_OPTIONS_KEY)
    if not path or not Path(path).is_dir():
        raise FileNotFoundError(f"the vlm_judge reward model needs a local model directory, got {path!r}")
    return load_vlm_judge(path, opts)
