"""What the token VLA families share: prompt encoding, action-bin logits, value head, losses.

A subclass only decides how action tokens are produced from the prompt:

* ``_decode(prompt, temperature, deterministic)``: sample/greedy-pick every action bin;
* ``_teacher_forced(prompt, bins)``: bin logits at every action position in one forward pass.

Everything else (``sample``, ``evaluate``, ``sft_loss``) lives here; saving and loading in ``vla_io``.
"""

from __future__ import annotations

from abc import abstractmethod
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import Cache, PaliGemmaForConditionalGeneration, PreTrainedTokenizerBase

from vla_rl.envs.base import Observation
from vla_rl.policies.activation_checkpointing import checkpoint_transformer_layers
from vla_rl.policies.chunk_policy import (
    LOG_PROB_LEVELS,
    ChunkEvaluation,
    ChunkPolicy,
    ChunkStep,
    SampleInfo,
    SFTOutput,
    state_vector,
)
from vla_rl.policies.lora import apply_lora
from vla_rl.policies.normalizer import RunningMeanStd
from vla_rl.policies.vla.action_tokenizer import ActionTokenizer
from vla_rl.policies.vla.auxiliary import AuxiliaryStateHead, auxiliary_target, capture_layer_output
from vla_rl.policies.vla.backbone import (
    Backbone,
    build_tiny_backbone,
    freeze_vision,
    load_local_backbone,
    unwrap,
)
from vla_rl.policies.vla.config import PALIGEMMA_LORA_TARGETS, TokenVLAConfig
from vla_rl.policies.vla.prompt import Prompt, positions_from_mask, preprocess_images, tokenize_instructions
from vla_rl.policies.vla.sampling import (
    entropy_from_log_probs,
    mask_to_action_bins,
    pad_steps,
    reduce_token_values,
    scaled_log_probs,
)
from vla_rl.policies.vla.vla_io import load_token_vla, save_token_vla


class TokenVLABase(ChunkPolicy):
    """A ChunkPolicy whose actions are vocabulary tokens of a PaliGemma backbone."""

    log_prob_levels = LOG_PROB_LEVELS

    def __init__(
        self, config: TokenVLAConfig, backbone: Backbone, tokenizer: PreTrainedTokenizerBase
    ) -> None:
        super().__init__()
        self.config = config
        self.chunk_len = config.chunk_len
        self.action_dim = config.action_dim
        self.backbone = backbone
        self.tokenizer = tokenizer
        text_config = self.vlm.config.text_config
        self.hidden_size = int(text_config.hidden_size)
        low = config.action_low if config.action_low is not None else [-1.0] * config.action_dim
        high = config.action_high if config.action_high is not None else [1.0] * config.action_dim
        self.action_tokenizer = ActionTokenizer(text_config.vocab_size, low, high, config.num_bins)
        if self.action_tokenizer.action_dim != config.action_dim:
            raise ValueError(
                f"action statistics have {self.action_tokenizer.action_dim} dims, not {config.action_dim}"
            )
        vision_size = int(self.vlm.config.vision_config.image_size)
        if config.image_size not in (None, vision_size):
            raise ValueError(f"image_size {config.image_size} differs from the vision tower's {vision_size}")
        self.image_size = vision_size
        self.value_head = nn.Sequential(
            nn.Linear(self.hidden_size, config.value_hidden_dim),
            nn.Tanh(),
            nn.Linear(config.value_hidden_dim, 1),
        )
        token_sizes = config.state_token_sizes or [config.proprio_dim]
        self.proprio_projector = (
            nn.ModuleList(nn.Linear(size, self.hidden_size) for size in token_sizes)
            if config.use_proprio
            else None
        )
        self.state_normalizer = (
            RunningMeanStd((config.proprio_dim,)) if config.use_proprio and config.normalize_state else None
        )
        self.aux_head = (
            AuxiliaryStateHead(self.hidden_size, config.aux_target_dim, config.value_hidden_dim)
            if config.aux_target_key is not None
            else None
        )
        self.decoded_steps = config.chunk_len
        """Actions of each chunk that ``sample`` decodes and ``evaluate`` scores (``TokenVLA`` can
        lower it to the actions RL executes); the others repeat the last decoded action and carry
        log-probability and entropy 0."""
        self._build_family_modules()

    @property
    def decoded_tokens(self) -> int:
        return self.decoded_steps * self.action_dim

    def _build_family_modules(self) -> None:
        """Hook for family-specific parameters (saved with the heads, see ``vla_io``)."""

    # ----------------------------------------------------------------- construction

    @classmethod
    def from_backbone(
        cls,
        model: PaliGemmaForConditionalGeneration,
        tokenizer: PreTrainedTokenizerBase,
        config: TokenVLAConfig,
    ) -> TokenVLABase:
        """Wrap a plain PaliGemma: freeze the vision tower and/or add LoRA adapters as configured."""
        if config.freeze_vision:
            freeze_vision(model)
        if config.lora is None:
            return cls(config, model, tokenizer)
        return cls(config, apply_lora(model, config.lora, PALIGEMMA_LORA_TARGETS), tokenizer)

    @classmethod
    def from_pretrained_vlm(cls, local_dir: str | Path, config: TokenVLAConfig) -> TokenVLABase:
        """A pretrained PaliGemma (weights + tokenizer) from a local directory, new heads."""
        model, tokenizer = load_local_backbone(local_dir)
        return cls.from_backbone(model, tokenizer, config)

    @classmethod
    def build(
        cls,
        pretrained_vlm_dir: str | None = None,
        backbone: dict[str, int] | None = None,
        instructions: list[str] | None = None,
        **config_values: Any,
    ) -> TokenVLABase:
        """``pretrained_vlm_dir``: local PaliGemma checkpoint; otherwise a fresh tiny PaliGemma
        (``backbone``: keyword overrides of ``tiny_paligemma_config``) with the offline word
        tokenizer built from ``instructions`` (default: the built-in tasks'). The remaining
        keywords are ``TokenVLAConfig`` fields."""
        config = TokenVLAConfig.from_dict(config_values)
        if pretrained_vlm_dir is not None:
            return cls.from_pretrained_vlm(pretrained_vlm_dir, config)
        model, tokenizer = build_tiny_backbone(
            instructions, num_action_tokens=config.num_bins, **(backbone or {})
        )
        return cls.from_backbone(model, tokenizer, config)

    def set_action_statistics(self, low: torch.Tensor, high: torch.Tensor) -> None:
        """Per-dimension quantiles (e.g. ``ActionTokenizer.from_quantiles`` of the demonstrations)."""
        self.action_tokenizer = ActionTokenizer(
            self.action_tokenizer.vocab_size, low, high, self.config.num_bins
        )
        self.config.action_low = self.action_tokenizer.low.tolist()
        self.config.action_high = self.action_tokenizer.high.tolist()

    def checkpoint_activations(self) -> int:
        """Recompute the backbone's layer activations (language model and vision tower) in an
        update's backward pass instead of keeping them (``policy.activation_checkpointing``, see
        ``vla_rl.policies.activation_checkpointing``); returns the number of layers."""
        return checkpoint_transformer_layers(self.backbone)

    # ----------------------------------------------------------------- backbone access

    @property
    def vlm(self) -> PaliGemmaForConditionalGeneration:
        return unwrap(self.backbone)

    @property
    def device(self) -> torch.device:
        return self.vlm.get_input_embeddings().weight.device

    @property
    def first_action_token_id(self) -> int:
        return self.action_tokenizer.first_action_token_id

    def embed_tokens(self, token_ids: torch.Tensor) -> torch.Tensor:
        return self.vlm.get_input_embeddings()(token_ids)

    def embed_bins(self, bins: torch.Tensor) -> torch.Tensor:
        return self.embed_tokens(bins + self.first_action_token_id)

    def encode_prompt(self, obs: Observation) -> Prompt:
        """Image tokens (+ proprio embedding) + ``<bos> instruction \\n`` for each observation."""
        device = self.device
        instructions = list(obs["instruction"])
        batch = len(instructions)
        pixels = preprocess_images(
            obs,
            self.config.camera_keys,
            self.image_size,
            self.config.image_mean,
            self.config.image_std,
            device,
        ).flatten(0, 1)  # observation-major: the order of the image tokens in the prompt
        image_features = self.vlm.model.get_image_features(pixels.to(self.vlm.dtype)).pooler_output
        pieces = [image_features.reshape(batch, -1, self.hidden_size)]
        if self.proprio_projector is not None:
            proprio = state_vector(obs, self.config.state_keys, device, self.config.proprio_fields)
            if self.state_normalizer is not None:
                proprio = self.state_normalizer(proprio)
            sizes = [layer.in_features for layer in self.proprio_projector]
            groups = torch.split(proprio, sizes, dim=-1)
            pieces.append(
                torch.stack(
                    [layer(group) for layer, group in zip(self.proprio_projector, groups, strict=True)], 1
                )
            )
        prefix_len = sum(piece.shape[1] for piece in pieces)
        ids, text_mask = tokenize_instructions(
            self.tokenizer, instructions, self.config.max_instruction_tokens, device
        )
        text = self.embed_tokens(ids)
        pieces.append(text)
        embeds = torch.cat([piece.to(text.dtype) for piece in pieces], dim=1)
        mask = torch.cat([text_mask.new_ones(batch, prefix_len), text_mask], dim=1)
        return Prompt(embeds=embeds, attention_mask=mask, position_ids=positions_from_mask(mask))

    def run_backbone(
        self,
        embeds: torch.Tensor,
        attention_mask: torch.Tensor,
        position_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None,
        cache: Cache | None = None,
        use_cache: bool = False,
    ) -> tuple[torch.Tensor, Cache | None]:
        """Language model over ``embeds`` (PaliGemma masking: ``token_type_ids`` 0 = bidirectional
        prefix, 1 = causal suffix; ignored once the cache holds the prefix). Returns final hidden
        states [N, L, hidden] and the cache."""
        output = self.vlm.model(
            inputs_embeds=embeds,
            attention_mask=attention_mask,
            position_ids=position_ids,
            token_type_ids=token_type_ids,
            cache=cache,
            use_cache=use_cache,
        )
        return output.last_hidden_state, output.cache

    def vocab_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """The backbone's language-model head (with Gemma's logit soft-capping when configured)."""
        logits = self.vlm.lm_head(hidden)
        cap = getattr(self.vlm.config.get_text_config(), "final_logit_softcapping", None)
        if cap is not None:
            logits = torch.tanh(logits / cap) * cap
        return logits

    def masked_vocab_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Full-vocabulary logits, -inf outside the action bins."""
        return mask_to_action_bins(self.vocab_logits(hidden), self.first_action_token_id)

    def bin_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits of the action bins only ``[..., num_bins]``: softmax over them equals the softmax
        of ``masked_vocab_logits`` restricted to the reserved ids (all other ids have probability 0)."""
        return self.vocab_logits(hidden)[..., self.first_action_token_id :]

    def value_from_hidden(self, hidden: torch.Tensor) -> torch.Tensor:
        """Value head on the hidden state at the position before the first action token -> [N]."""
        return self.value_head(self.critic_input(hidden.float())).squeeze(-1)

    # ----------------------------------------------------------------- family-specific

    @abstractmethod
    def _decode(
        self, prompt: Prompt, temperature: float, deterministic: bool
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """-> (bins int64 [N, T], their log-probs [N, T], hidden before the first action [N, hidden])
        with ``T = decoded_tokens`` (``chunk_len * action_dim`` unless limited) in (step, dim) order."""

    @abstractmethod
    def _teacher_forced(self, prompt: Prompt, bins: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Given bins [N, T]: (bin logits [N, T, num_bins] predicting each of them, hidden before
        the first action [N, hidden])."""

    # ----------------------------------------------------------------- ChunkPolicy

    def _per_token(self, values: torch.Tensor) -> torch.Tensor:
        """[N, decoded tokens] in (step, dim) order -> [N, chunk_len, action_dim], zeros after the
        decoded steps (log-probabilities and entropies of actions that were not drawn)."""
        return pad_steps(values.reshape(values.shape[0], -1, self.action_dim), self.chunk_len)

    def _sample(
        self, obs: Observation, temperature: float, deterministic: bool, level: str, with_value: bool
    ) -> ChunkStep:
        prompt = self.encode_prompt(obs)
        bins, token_log_probs, hidden = self._decode(prompt, temperature, deterministic)
        bins = pad_steps(bins.reshape(bins.shape[0], -1, self.action_dim), self.chunk_len, repeat_last=True)
        return ChunkStep(
            actions=self.action_tokenizer.bins_to_actions(bins),
            log_prob=reduce_token_values(self._per_token(token_log_probs), level),
            value=self.value_from_hidden(hidden) if with_value else None,
            sample_info={"action_tokens": bins + self.first_action_token_id},
        )

    def _evaluate(
        self, obs: Observation, sample_info: SampleInfo, temperature: float, level: str, with_value: bool
    ) -> ChunkEvaluation:
        """Token log-probs and entropies of the masked, temperature-scaled distributions; for the
        autoregressive family the chunk entropy is the sum of per-token entropies along the stored
        sample (a one-sample estimate of the joint entropy)."""
        tokens = sample_info["action_tokens"].to(self.device)
        bins = tokens.reshape(tokens.shape[0], -1)[:, : self.decoded_tokens].long()
        bins = bins - self.first_action_token_id
        logits, hidden = self._teacher_forced(self.encode_prompt(obs), bins)
        log_probs = scaled_log_probs(logits, temperature)
        token_log_probs = log_probs.gather(-1, bins.unsqueeze(-1)).squeeze(-1)
        return ChunkEvaluation(
            log_prob=reduce_token_values(self._per_token(token_log_probs), level),
            entropy=reduce_token_values(self._per_token(entropy_from_log_probs(log_probs)), level),
            value=self.value_from_hidden(hidden) if with_value else None,
        )

    def sft_loss(self, obs: Observation, action_chunk: torch.Tensor, chunk_mask: torch.Tensor) -> SFTOutput:
        """Mean cross-entropy of the demonstrated action tokens (teacher forcing) over valid steps,
        plus ``aux_coef`` x the auxiliary state error when ``aux_target_key`` is set."""
        target = self.action_tokenizer.actions_to_bins(action_chunk.to(self.device))
        batch = target.shape[0]
        prompt = self.encode_prompt(obs)
        with capture_layer_output(
            self.vlm.model.language_model.layers, self.config.aux_layer
        ) as layer_output:
            logits, prompt_hidden = self._teacher_forced(prompt, target.reshape(batch, -1))
        logits = logits.reshape(batch, self.chunk_len, self.action_dim, -1).float()
        cross_entropy = F.cross_entropy(logits.permute(0, 3, 1, 2), target, reduction="none")
        weight = chunk_mask.to(self.device)[..., None].expand_as(target).float()
        count = weight.sum().clamp(min=1.0)
        loss = (cross_entropy * weight).sum() / count
        with torch.no_grad():
            predicted = logits.argmax(dim=-1)
            accuracy = ((predicted == target).float() * weight).sum() / count
            action_error = (
                self.action_tokenizer.bins_to_actions(predicted) - action_chunk.to(self.device)
            ).abs()
            l1 = (action_error * weight).sum() / count
        metrics = {
            "token_accuracy": float(accuracy),
            "action_l1": float(l1),
            "cross_entropy": float(loss.detach()),
        }
        if self.aux_head is not None:
            feature = prompt_hidden if not layer_output else layer_output["hidden"][:, prompt.length - 1]
            aux_mse = self.aux_head.loss(feature, self._aux_target(obs))
            loss = loss + self.config.aux_coef * aux_mse
            metrics["aux_mse"] = float(aux_mse.detach())
        return SFTOutput(loss=loss, metrics=metrics)

    def _aux_target(self, obs: Observation) -> torch.Tensor:
        return auxiliary_target(obs, str(self.config.aux_target_key), self.device)

    # ----------------------------------------------------------------- statistics and persistence

    def update_normalizer(self, obs: Observation) -> None:
        """Fold a batch of observations into the state (and auxiliary target) statistics; SFT calls
        this on its data."""
        if self.aux_head is not None:
            self.aux_head.update(self._aux_target(obs))
        if self.state_normalizer is not None:
            self.state_normalizer.update(
                state_vector(obs, self.config.state_keys, self.device, self.config.proprio_fields)
            )

    def save_pretrained(self, directory: str | Path) -> None:
        save_token_vla(self, directory)

    @classmethod
    def from_pretrained(cls, directory: str | Path) -> TokenVLABase:
        return load_token_vla(cls, directory)
