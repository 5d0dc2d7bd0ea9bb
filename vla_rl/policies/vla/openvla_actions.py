"""OpenVLA's action tokens <-> actions: its bins, its token order, its un-normalisation.

OpenVLA cuts [-1, 1] at ``n_bins`` evenly spaced edges (so ``n_bins - 1`` bins and centres) and
writes a normalised value ``a`` as the token ``V - digitize(a)``, where ``V`` is the tokenizer's
vocabulary size and ``digitize`` counts the edges at or below ``a`` (1 .. n_bins). The action tokens
are therefore the last ``n_bins`` ids ``V - n_bins .. V - 1``, in *reverse* order of value: id
``V - 1`` is the lowest bin. Decoding maps token ``t`` to centre ``clip(V - t - 1, 0, n_bins - 2)``,
so the two lowest ids (``V - n_bins`` and ``V - n_bins + 1``) both decode to the top centre. The
normalised action is un-normalised per dimension as ``0.5 (a + 1) (q99 - q01) + q01`` where the
statistics' mask is set and left as ``a`` elsewhere (e.g. a gripper stored in [-1, 1] already).

Here a *bin* is the position of a token among the action ids, ``k = t - (V - n_bins)`` in
``[0, n_bins)``: the policy's categorical distribution is over these ``n_bins`` ids.
"""

from __future__ import annotations

import torch

from vla_rl.policies.openvla_folder import ActionStats


class OpenVLAActionCodec:
    """Bins (positions among the action ids) <-> normalised and un-normalised actions."""

    def __init__(self, token_vocab_size: int, n_bins: int, stats: ActionStats) -> None:
        if n_bins < 2 or n_bins > token_vocab_size:
            raise ValueError(f"n_bins={n_bins} must lie in [2, {token_vocab_size}]")
        self.token_vocab_size = int(token_vocab_size)
        self.n_bins = int(n_bins)
        edges = torch.linspace(-1.0, 1.0, self.n_bins, dtype=torch.float64)
        self.edges = edges
        """float64 [n_bins]: the bin edges over [-1, 1]."""
        self.centres = (edges[:-1] + edges[1:]) / 2.0
        """float64 [n_bins - 1]: the values tokens decode to."""
        self.q01 = torch.as_tensor(stats.q01, dtype=torch.float64)
        self.q99 = torch.as_tensor(stats.q99, dtype=torch.float64)
        self.mask = torch.as_tensor(stats.mask, dtype=torch.bool)

    @property
    def action_dim(self) -> int:
        return int(self.q01.shape[0])

    @property
    def first_token_id(self) -> int:
        """The lowest action token id (bin 0); bins are ids ``[first_token_id, token_vocab_size)``."""
        return self.token_vocab_size - self.n_bins

    def bins_to_normalised(self, bins: torch.Tensor) -> torch.Tensor:
        """int bins [...] -> float64 normalised values [...] (the bin's token's centre)."""
        digitized = self.n_bins - bins.long()  # = V - token
        index = (digitized - 1).clamp(0, self.n_bins - 2)
        return self.centres.to(bins.device)[index]

    def unnormalise(self, normalised: torch.Tensor) -> torch.Tensor:
        """float [..., A] in [-1, 1] -> float64 actions [..., A] in the dataset's units."""
        device = normalised.device
        q01, q99 = self.q01.to(device), self.q99.to(device)
        scaled = 0.5 * (normalised.double() + 1.0) * (q99 - q01) + q01
        return torch.where(self.mask.to(device), scaled, normalised.double())

    def normalise(self, actions: torch.Tensor) -> torch.Tensor:
        """The inverse of ``unnormalise`` (float64), clipped to [-1, 1] as OpenVLA's training data is."""
        device = actions.device
        q01, q99 = self.q01.to(device), self.q99.to(device)
        scaled = 2.0 * (actions.double() - q01) / (q99 - q01).clamp(min=1e-8) - 1.0
        return torch.where(self.mask.to(device), scaled, actions.double()).clamp(-1.0, 1.0)

    def bins_to_actions(self, bins: torch.Tensor) -> torch.Tensor:
        """int bins [..., A] -> float32 actions [..., A] in the dataset's units."""
        self._check_dim(bins)
        return self.unnormalise(self.bins_to_normalised(bins)).float()

    def actions_to_bins(self, actions: torch.Tensor) -> torch.Tensor:
        """float actions [..., A] (dataset units) -> int64 bins [..., A], as OpenVLA tokenises its
        training actions (``V - digitize(a)``, then as a position among the action ids)."""
        self._check_dim(actions)
        normalised = self.normalise(actions)
        digitized = torch.bucketize(normalised, self.edges.to(actions.device), right=True)
        return self.n_bins - digitized

    def bins_to_token_ids(self, bins: torch.Tensor) -> torch.Tensor:
        return bins.long() + self.first_token_id

    def _check_dim(self, values: torch.Tensor) -> None:
        if values.shape[-1] != self.action_dim:
            raise ValueError(f"expected last dim {self.action_dim}, got shape {tuple(values.shape)}")
