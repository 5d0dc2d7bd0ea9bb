"""Parallel-decoding chunk VLA (OpenVLA-OFT-style) on a PaliGemma backbone.

After the prompt come ``chunk_len * action_dim`` *action slots*: copies of one learned "empty
action" embedding (told apart by their rotary positions). One forward pass gives the bin logits
of every action token at its slot. The whole sequence is a single bidirectional block (all
token types 0 in PaliGemma's masking), so slots attend to the prompt and to each other; the
prompt also sees the slots, which carry no sample-dependent information (they are constants), so
the distribution stays a function of the observation alone. Given the prompt, the action tokens
are independent: the chunk log-probability is the sum of the token log-probabilities.
"""

from __future__ import annotations

import torch
from torch import nn

from vla_rl.policies.vla.base_vla import TokenVLABase
from vla_rl.policies.vla.prompt import Prompt
from vla_rl.policies.vla.sampling import choose_bins


class ChunkVLA(TokenVLABase):
    """All action tokens from one forward pass over prompt + empty action slots."""

    registry_name = "chunk_vla"

    def _build_family_modules(self) -> None:
        with torch.no_grad():
            reference = self.embed_tokens(torch.tensor([self.first_action_token_id], device=self.device))
        scale = float(reference.std())
        self.action_slot_embedding = nn.Parameter(torch.randn(self.hidden_size) * scale)

    def _slot_hidden(self, prompt: Prompt) -> tuple[torch.Tensor, torch.Tensor]:
        """(hidden at the action slots [N, T, hidden], hidden at the last prompt position [N, hidden])."""
        batch = prompt.embeds.shape[0]
        count = self.chunk_len * self.action_dim
        slots = self.action_slot_embedding.to(prompt.embeds.dtype).expand(batch, count, -1)
        embeds, mask, positions = prompt.followed_by(slots)
        hidden, _ = self.run_backbone(embeds, mask, positions, torch.zeros_like(mask))
        return hidden[:, prompt.length :], hidden[:, prompt.length - 1]

    def _teacher_forced(self, prompt: Prompt, bins: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        slot_hidden, prompt_hidden = self._slot_hidden(prompt)
        return self.bin_logits(slot_hidden), prompt_hidden

    def _decode(
        self, prompt: Prompt, temperature: float, deterministic: bool
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        slot_hidden, prompt_hidden = self._slot_hidden(prompt)
        bins, log_probs = choose_bins(self.bin_logits(slot_hidden), temperature, deterministic)
        return bins, log_probs, prompt_hidden
