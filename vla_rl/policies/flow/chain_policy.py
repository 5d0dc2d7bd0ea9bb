"""The base of the flow policy families (``flow_mlp``, ``pi0``, ``pi05``, ``smolvla``): a denoising
chain that explores as ``vla_rl.policies.flow.exploration`` says, deterministic denoising from given
noise (what DSRL acts through), and the chunk-level ``ChunkStep`` / ``ChunkEvaluation`` of a chain."""

from __future__ import annotations

from abc import abstractmethod

import torch

from vla_rl.envs.base import Observation
from vla_rl.policies.chunk_policy import ChunkEvaluation, ChunkPolicy, ChunkStep
from vla_rl.policies.flow.exploration import (
    ChainSample,
    ExplorationConfig,
    NoiseHead,
    build_exploration,
    chain_log_prob_and_entropy,
)


class FlowChainPolicy(ChunkPolicy):
    """What the flow policies (``flow_mlp``, ``pi0``) share: a denoising chain that explores as their
    ``cfg`` (an ``ExplorationConfig``) says, with a noise head from ``noise_head_sizes[0]`` features
    to ``noise_head_sizes[1]`` stds where it learns them, and chunk-level log-probabilities."""

    log_prob_levels = ("chunk",)
    cfg: ExplorationConfig
    noise_head_sizes: tuple[int, int]
    """(features, stds) of the noise head, set before the first ``set_exploration``."""

    def __init__(self) -> None:
        super().__init__()
        self.noise_head: NoiseHead | None = None

    @property
    @abstractmethod
    def num_steps(self) -> int:
        """Denoising steps K of the chain."""

    @property
    def noise_shape(self) -> tuple[int, int]:
        """(chunk_len, width) of one sample's initial noise x_0: ``action_dim`` wide, or the model's
        padded action width in the families that pad (pi0, SmolVLA)."""
        return (self.chunk_len, self.action_dim)

    def _sample(
        self,
        obs: Observation,
        temperature: float,
        deterministic: bool,
        level: str,
        with_value: bool,
        noise: torch.Tensor | None = None,
    ) -> ChunkStep:
        """``sample`` of a family, starting its chain from ``noise`` [N, *noise_shape] where given
        (else from a standard normal draw)."""
        raise NotImplementedError(f"{type(self).__name__} implements no _sample")

    def denoise(self, obs: Observation, noise: torch.Tensor) -> torch.Tensor:
        """The action chunk [N, chunk_len, action_dim] (env units) that the deterministic chain (the
        K Euler steps, no exploration noise) makes from the initial ``noise`` [N, *noise_shape]:
        ``sample(obs, deterministic=True)`` with its noise given instead of drawn. DSRL acts through
        this map (``vla_rl.training.off_policy.frozen_policy_env``)."""
        if tuple(noise.shape[1:]) != self.noise_shape:
            width = ", ".join(map(str, self.noise_shape))
            raise ValueError(f"noise must be [N, {width}], got {list(noise.shape)}")
        with torch.no_grad():
            return self._sample(obs, 1.0, True, "chunk", False, noise).actions

    def set_exploration(self, **settings: object) -> None:
        """Change how the chain explores (``exploration``, ``noise_level``, ``sde_one_step``,
        ``noise_std_bounds``, ``noise_mean``, ``noisy_chunk_steps``, ``chain_log_prob``), e.g. for
        RL from an SFT checkpoint; adds a noise head where the std is learned (``flow_noise``) and
        none is there yet, and moves an existing one to the new bounds."""
        if settings:
            self.cfg = type(self.cfg).from_dict({**self.cfg.to_dict(), **settings})  # type: ignore[attr-defined]
        self.exploration = build_exploration(self.cfg, self.num_steps)
        if self.exploration.needs_learned_std and self.noise_head is None:
            device = next(self.parameters()).device
            self.noise_head = NoiseHead(*self.noise_head_sizes, *self.cfg.noise_std_bounds).to(device)
        elif self.noise_head is not None:
            self.noise_head.set_bounds(*self.cfg.noise_std_bounds)

    def chain_step(
        self,
        sampled: ChainSample,
        actions: torch.Tensor,
        value: torch.Tensor | None,
        dim_mask: torch.Tensor | None = None,
    ) -> ChunkStep:
        """The ``ChunkStep`` of a sampled chain ending in ``actions``: its log-probability over the
        entries ``dim_mask`` keeps, and the chain and its stochastic steps for ``evaluate``."""
        parts = (sampled.states, sampled.means, sampled.stds, sampled.step_mask)
        log_prob, _ = chain_log_prob_and_entropy(*parts, dim_mask, self.cfg.chain_log_prob)
        return ChunkStep(actions, log_prob, value, {"chain": sampled.states, "step_mask": sampled.step_mask})

    def chain_evaluation(
        self,
        states: torch.Tensor,
        means: torch.Tensor,
        stds: torch.Tensor,
        step_mask: torch.Tensor,
        value: torch.Tensor | None,
        dim_mask: torch.Tensor | None = None,
    ) -> ChunkEvaluation:
        """The ``ChunkEvaluation`` of stored chains from their recomputed transitions."""
        log_prob, entropy = chain_log_prob_and_entropy(
            states, means, stds, step_mask, dim_mask, self.cfg.chain_log_prob
        )
        return ChunkEvaluation(log_prob, entropy, value)
