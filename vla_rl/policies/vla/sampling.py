"""Categorical sampling over action bins and log-probability bookkeeping for token policies."""

from __future__ import annotations

import torch


def mask_to_action_bins(vocab_logits: torch.Tensor, first_action_token_id: int) -> torch.Tensor:
    """Full-vocabulary logits with every non-action token set to -inf (probability exactly 0)."""
    masked = torch.full_like(vocab_logits, float("-inf"))
    masked[..., first_action_token_id:] = vocab_logits[..., first_action_token_id:]
    return masked


def scaled_log_probs(bin_logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """log softmax(logits / temperature) over the last dim (the action bins)."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    return torch.log_softmax(bin_logits.float() / temperature, dim=-1)


def choose_bins(
    bin_logits: torch.Tensor, temperature: float, deterministic: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pick a bin per row of ``bin_logits [..., B]``: (bins [...], their log-prob under the
    temperature-scaled distribution). Greedy (argmax) when ``deterministic``."""
    log_probs = scaled_log_probs(bin_logits, temperature)
    if deterministic:
        bins = log_probs.argmax(dim=-1)
    else:
        flat = log_probs.reshape(-1, log_probs.shape[-1]).exp()
        bins = torch.multinomial(flat, 1).reshape(log_probs.shape[:-1])
    return bins, log_probs.gather(-1, bins.unsqueeze(-1)).squeeze(-1)


def entropy_from_log_probs(log_probs: torch.Tensor) -> torch.Tensor:
    """Entropy of each categorical distribution ``[..., B]`` -> ``[...]``."""
    return -(log_probs.exp() * log_probs).sum(dim=-1)


def reduce_token_values(per_token: torch.Tensor, level: str) -> torch.Tensor:
    """``[N, chunk_len, action_dim]`` per-token values -> the requested granularity.

    ``token``: unchanged; ``action``: sum over action dims ``[N, chunk_len]``; ``chunk``: sum over
    everything ``[N]`` (log-probabilities of a factorised distribution add up).
    """
    reducers = {
        "token": lambda values: values,
        "action": lambda values: values.sum(dim=-1),
        "chunk": lambda values: values.sum(dim=(-1, -2)),
    }
    if level not in reducers:
        raise ValueError(f"unknown log-prob level {level!r}; allowed: {sorted(reducers)}")
    return reducers[level](per_token)


def pad_steps(per_step: torch.Tensor, chunk_len: int, repeat_last: bool = False) -> torch.Tensor:
    """``[N, S, A]`` values of a chunk's first ``S`` actions -> ``[N, chunk_len, A]``: the missing
    steps are zeros, or copies of step ``S - 1`` with ``repeat_last``."""
    missing = chunk_len - per_step.shape[1]
    if missing == 0:
        return per_step
    if repeat_last:
        filler = per_step[:, -1:].expand(-1, missing, -1)
    else:
        filler = per_step.new_zeros(per_step.shape[0], missing, per_step.shape[2])
    return torch.cat([per_step, filler], dim=1)
