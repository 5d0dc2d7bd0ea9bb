"""Autoregressive token VLA (OpenVLA-style) on a PaliGemma backbone.

The prompt (image tokens, optional state embeddings, ``<bos> instruction \\n``) is followed by
``chunk_len * action_dim`` action tokens, decoded one at a time in (step, dim) order. Every
token is drawn from the softmax over the action bins only (the last ``num_bins`` vocabulary ids;
all other ids are masked out) scaled by the temperature, or greedily when deterministic. The
prompt attends bidirectionally to itself (PaliGemma's prefix); action tokens are causal.

Two decoding paths give the same tokens: with the key/value cache (prompt encoded once, then one
token per forward) or without (the whole sequence recomputed for every token; a reference).
"""

from __future__ import annotations

import torch
from transformers import DynamicCache

from vla_rl.policies.vla.base_vla import TokenVLABase
from vla_rl.policies.vla.prompt import Prompt
from vla_rl.policies.vla.sampling import choose_bins


class TokenVLA(TokenVLABase):
    """Autoregressive decoding of the action tokens; ``config.use_kv_cache`` picks the path."""

    registry_name = "token_vla"

    def limit_decoding(self, steps: int) -> None:
        """Decode (and score) only the first ``steps`` actions of each chunk: the ones a rollout
        executes. Tokens come in (step, dim) order, so those actions keep exactly the distribution
        of a full decode, while each decision runs ``(chunk_len - steps) * action_dim`` fewer
        forwards and each training sequence is that much shorter."""
        if not 1 <= steps <= self.chunk_len:
            raise ValueError(f"steps must lie in [1, chunk_len={self.chunk_len}], got {steps}")
        self.decoded_steps = steps

    def _sequence_with_actions(
        self, prompt: Prompt, bins: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Prompt followed by the given action tokens: (embeds, mask, positions, token types)."""
        embeds, mask, positions = prompt.followed_by(self.embed_bins(bins))
        token_types = torch.cat([torch.zeros_like(prompt.attention_mask), torch.ones_like(bins)], dim=1)
        return embeds, mask, positions, token_types

    def _teacher_forced(self, prompt: Prompt, bins: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        embeds, mask, positions, token_types = self._sequence_with_actions(prompt, bins[:, :-1])
        hidden, _ = self.run_backbone(embeds, mask, positions, token_types)
        before_actions = hidden[:, prompt.length - 1 :]
        return self.bin_logits(before_actions), before_actions[:, 0]

    def _decode(
        self, prompt: Prompt, temperature: float, deterministic: bool
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        decode = self._decode_cached if self.config.use_kv_cache else self._decode_uncached
        return decode(prompt, temperature, deterministic)

    def _decode_cached(
        self, prompt: Prompt, temperature: float, deterministic: bool
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        cache = DynamicCache(config=self.vlm.config.get_text_config())
        hidden, cache = self.run_backbone(
            prompt.embeds,
            prompt.attention_mask,
            prompt.position_ids,
            torch.zeros_like(prompt.attention_mask),
            cache=cache,
            use_cache=True,
        )
        prompt_hidden = hidden[:, -1]
        last = prompt_hidden
        mask = prompt.attention_mask
        position = prompt.next_position[:, None]
        bins, log_probs = [], []
        for step in range(self.decoded_tokens):
            chosen, log_prob = choose_bins(self.bin_logits(last), temperature, deterministic)
            bins.append(chosen)
            log_probs.append(log_prob)
            if step == self.decoded_tokens - 1:
                break
            mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], dim=1)
            hidden, cache = self.run_backbone(
                self.embed_bins(chosen[:, None]), mask, position, None, cache=cache, use_cache=True
            )
            last = hidden[:, -1]
            position = position + 1
        return torch.stack(bins, dim=1), torch.stack(log_probs, dim=1), prompt_hidden

    def _decode_uncached(
        self, prompt: Prompt, temperature: float, deterministic: bool
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        batch = prompt.embeds.shape[0]
        bins = torch.zeros(batch, 0, dtype=torch.long, device=prompt.embeds.device)
        log_probs, prompt_hidden = [], None
        for _ in range(self.decoded_tokens):
            hidden, _ = self.run_backbone(*self._sequence_with_actions(prompt, bins))
            if prompt_hidden is None:
                prompt_hidden = hidden[:, -1]
            chosen, log_prob = choose_bins(self.bin_logits(hidden[:, -1]), temperature, deterministic)
            bins = torch.cat([bins, chosen[:, None]], dim=1)
            log_probs.append(log_prob)
        return bins, torch.stack(log_probs, dim=1), prompt_hidden
