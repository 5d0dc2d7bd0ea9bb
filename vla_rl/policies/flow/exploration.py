"""How a flow policy's denoising chain explores, and the exact log-probability of what it sampled.

A deterministic Euler ODE has no likelihood, so RL samples a stochastic chain instead: step ``k``
draws ``x_{k+1} ~ N(mean_k, std_k^2)`` and the chain's log-probability is the sum of those Gaussian
log-densities over the stochastic steps (``x_0 ~ N(0, I)`` does not depend on the parameters and is
left out), or with ``chain_log_prob = "mean"`` their average over the stochastic steps. Three ways
to set ``mean_k`` and ``std_k``, registered by name:

* ``euler_maruyama``: the Euler mean and a constant ``noise_level * sqrt(1 / K)``;
* ``flow_sde``: the marginal-preserving SDE of ``vla_rl.policies.flow.sde`` (pi_RL's Flow-SDE);
  with ``sde_one_step`` only one uniformly chosen step per sample is stochastic, the others are ODE
  steps (the two-layer MDP);
* ``flow_noise``: the Euler mean and a standard deviation that a small network on the policy's own
  features sets within ``noise_std_bounds`` (pi_RL's Flow-Noise), learned with the policy. With
  ``noise_std_profile = "sde"`` step k's bounds are scaled by Flow-SDE's ``sigma_t`` at that step over its
  geometric mean across the steps: wide near the noise, narrow near the action, so the noise mostly
  picks where the flow goes rather than jittering the action it ends on. With ``noise_mean = "sde"`` the
  transition mean is Flow-SDE's marginal-preserving one for the learned variance instead of the
  Euler step, so the sampled chain keeps the flow's marginals (to first order in the step, and
  where the learned std varies slowly with the state: the drift has no term for its gradient) and
  the noise does not widen the action distribution the greedy ODE policy samples.

The sampling temperature multiplies every standard deviation. With ``noisy_chunk_steps = n`` only
the first n steps of the action chunk (those executed before re-planning) are sampled; the rest
follow the ODE, so they are fixed by the sampled ones and add nothing to the log-probability: the
likelihood ratio then moves only with actions that reached the environment.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from vla_rl.policies.flow import chain, sde

LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
CHAIN_LOG_PROBS = ("sum", "mean")
"""How a chain's transition log-densities (and entropies) combine per sample."""
STD_PROFILES = ("flat", "sde")
"""``flow_noise``: the same std bounds at every denoising step, or scaled per step as Flow-SDE's."""
NOISE_MEANS = ("euler", "sde")
"""``flow_noise``: the Euler step plus the learned noise (pi_RL's), or Flow-SDE's marginal-preserving mean."""


@dataclass
class ExplorationConfig:
    """How the denoising chain of a flow policy is made stochastic: the exploration settings every
    flow policy config carries (``Pi0PolicyConfig``, ``FlowMLPConfig``), as saved with the policy."""

    noise_level: float = 0.5
    """Scale of the injected noise: ``euler_maruyama``: total injected std; ``flow_sde``: ``a`` in
    ``sigma_t = a sqrt(t / (1 - t))``."""
    exploration: str = "euler_maruyama"
    """How the chain explores: ``euler_maruyama``, ``flow_sde`` or ``flow_noise`` (the module docstring)."""
    sde_one_step: bool = False
    """``flow_sde``: only one randomly chosen denoising step per sample is stochastic."""
    noise_std_bounds: list[float] = field(default_factory=lambda: [0.08, 0.16])
    """``flow_noise``: [min, max] of the standard deviation the noise head learns."""
    noise_std_profile: str = "flat"
    """``flow_noise``: ``flat`` bounds at every denoising step, or ``sde``: step k's bounds times
    ``sigma_{t_k} / geometric mean of sigma`` (``sde_std_profile``)."""
    noise_mean: str = "euler"
    """``flow_noise``: the transition mean, ``euler`` (the ODE step, pi_RL's Flow-Noise) or ``sde``:
    ``sde.sde_mean`` with the learned variance, the Euler step pulled towards the action by
    ``std^2 / (2 t)`` times the noise estimate, as Flow-SDE does for its fixed ``sigma_t``."""
    noisy_chunk_steps: int = 0
    """Sample only the first this many steps of the chunk (axis 1), the others take the ODE step
    and leave the log-probability; 0 samples them all. Set it to the executed steps per chunk."""
    chain_log_prob: str = "sum"
    """``sum``: the chain's exact log-likelihood, the sum of its stochastic transitions'
    log-densities; ``mean``: their average over the sample's stochastic denoising steps, as pi_RL
    scores Flow-Noise chains (its joint log-probability averages them). The ratio is then the
    geometric mean of the per-step ratios: a log-ratio K times smaller for PPO's clip range to act
    on, while the gradient keeps its direction. Entropies combine the same way."""

    def validate_exploration(self) -> None:
        """``ValueError`` naming the first bad exploration setting."""
        if self.exploration not in EXPLORATIONS:
            raise ValueError(
                f"unknown exploration mode {self.exploration!r}; allowed: {sorted(EXPLORATIONS)}"
            )
        if self.noise_level < 0.0:
            raise ValueError(f"noise_level must be >= 0, got {self.noise_level}")
        bounds = self.noise_std_bounds
        if len(bounds) != 2 or not 0.0 < bounds[0] < bounds[1]:
            raise ValueError(f"noise_std_bounds must be [min, max] with 0 < min < max, got {bounds}")
        if self.sde_one_step and self.exploration != "flow_sde":
            raise ValueError("sde_one_step applies to exploration flow_sde only")
        if self.noisy_chunk_steps < 0:
            raise ValueError(f"noisy_chunk_steps must be >= 0, got {self.noisy_chunk_steps}")
        if self.noise_std_profile not in STD_PROFILES:
            raise ValueError(
                f"noise_std_profile must be one of {STD_PROFILES}, got {self.noise_std_profile!r}"
            )
        if self.noise_std_profile != "flat" and self.exploration != "flow_noise":
            raise ValueError("noise_std_profile applies to exploration flow_noise only")
        if self.noise_mean not in NOISE_MEANS:
            raise ValueError(f"noise_mean must be one of {NOISE_MEANS}, got {self.noise_mean!r}")
        if self.noise_mean != "euler" and self.exploration != "flow_noise":
            raise ValueError("noise_mean applies to exploration flow_noise only")
        if self.chain_log_prob not in CHAIN_LOG_PROBS:
            raise ValueError(f"chain_log_prob must be one of {CHAIN_LOG_PROBS}, got {self.chain_log_prob!r}")


class NoiseHead(nn.Module):
    """Features [..., F] -> standard deviations [..., D] in ``[std_min, std_max]`` (bounded in log space)."""

    def __init__(self, feature_dim: int, out_dim: int, std_min: float, std_max: float, hidden_dim: int = 64):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(feature_dim, hidden_dim), nn.SiLU(), nn.Linear(hidden_dim, out_dim)
        )
        nn.init.zeros_(self.net[-1].weight)
        nn.init.zeros_(self.net[-1].bias)  # starts at the geometric mean of the bounds
        self.set_bounds(std_min, std_max)

    def set_bounds(self, std_min: float, std_max: float) -> None:
        """Move the bounds; the network's output keeps its place between them (in log space)."""
        self.log_min, self.log_max = math.log(std_min), math.log(std_max)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        fraction = torch.sigmoid(self.net(features.float()))
        return torch.exp(self.log_min + (self.log_max - self.log_min) * fraction)


class ChainExploration(ABC):
    """Transition mean and std of one denoising step, per sample."""

    needs_learned_std = False

    def __init__(self, cfg: ExplorationConfig, num_steps: int) -> None:
        self.cfg = cfg
        self.num_steps = num_steps
        self.times = chain.denoising_times(num_steps)

    def step_mask(self, batch: int, deterministic: bool, device: torch.device | str = "cpu") -> torch.Tensor:
        """bool [N, K]: the stochastic steps of each sample (none when ``deterministic``)."""
        if deterministic:
            return torch.zeros(batch, self.num_steps, dtype=torch.bool, device=device)
        return torch.ones(batch, self.num_steps, dtype=torch.bool, device=device)

    @abstractmethod
    def transition(
        self,
        x: torch.Tensor,
        velocity: torch.Tensor,
        k: int,
        stochastic: torch.Tensor,
        temperature: float,
        learned_std: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(mean, std)`` of ``x_{k+1}`` for ``x`` [N, ...] at step k; ``std`` broadcasts to ``x``
        and is 0 for the samples whose ``stochastic`` [N] entry is False."""

    def step(
        self,
        x: torch.Tensor,
        velocity: torch.Tensor,
        k: int,
        stochastic: torch.Tensor,
        temperature: float,
        learned_std: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``transition``, with the chunk steps past ``noisy_chunk_steps`` (x [N, chunk, ...]) on
        the ODE: Euler mean, std 0. The network's outputs join the chain in float32 (a bf16 model or
        autocast computes them in bf16)."""
        velocity = velocity.float()
        learned_std = None if learned_std is None else learned_std.float()
        mean, std = self.transition(x, velocity, k, stochastic, temperature, learned_std)
        noisy = self.cfg.noisy_chunk_steps
        if noisy <= 0 or noisy >= x.shape[1]:
            return mean, std
        quiet = (torch.arange(x.shape[1], device=x.device) >= noisy).view(1, -1, *(1,) * (x.dim() - 2))
        delta = float(self.times[k] - self.times[k + 1])
        mean = torch.where(quiet, x - delta * velocity, mean)
        return mean, torch.where(quiet, torch.zeros_like(mean), std.expand_as(mean))

    def _zero_where_deterministic(self, std: torch.Tensor, stochastic: torch.Tensor, like: torch.Tensor):
        shape = (len(stochastic),) + (1,) * (like.dim() - 1)
        return std * stochastic.view(shape).to(like.dtype)


class EulerMaruyama(ChainExploration):
    def transition(self, x, velocity, k, stochastic, temperature, learned_std=None):
        std = self.cfg.noise_level * temperature * math.sqrt(1.0 / self.num_steps)
        mean = chain.euler_mean(x, velocity, chain.step_size(self.num_steps))
        return mean, self._zero_where_deterministic(torch.full_like(x[:1], std), stochastic, x)


class FlowSDE(ChainExploration):
    def __init__(self, cfg: ExplorationConfig, num_steps: int) -> None:
        super().__init__(cfg, num_steps)
        self.sigmas = sde.schedule_sigmas(self.times, cfg.noise_level)

    def step_mask(self, batch, deterministic, device="cpu"):
        if deterministic or not self.cfg.sde_one_step:
            return super().step_mask(batch, deterministic, device)
        return sde.stochastic_step_mask(batch, self.num_steps, one_step=True).to(device)

    def transition(self, x, velocity, k, stochastic, temperature, learned_std=None):
        t, delta = float(self.times[k]), float(self.times[k] - self.times[k + 1])
        sde_mean, std = sde.sde_transition(x, velocity, t, delta, self.sigmas[k] * temperature)
        ode_mean = x - delta * velocity
        shape = (len(stochastic),) + (1,) * (x.dim() - 1)
        mean = torch.where(stochastic.view(shape), sde_mean, ode_mean)
        return mean, self._zero_where_deterministic(torch.full_like(x[:1], std), stochastic, x)


def sde_std_profile(times: torch.Tensor) -> list[float]:
    """Flow-SDE's ``sigma_t`` at each of the K steps of ``times`` [K + 1] over their geometric mean
    (the steps are equal, so the transition stds scale alike): the factors multiply to 1."""
    sigmas = sde.schedule_sigmas(times, 1.0)
    log_mean = sum(math.log(s) for s in sigmas) / len(sigmas)
    return [s / math.exp(log_mean) for s in sigmas]


class FlowNoise(ChainExploration):
    needs_learned_std = True

    def __init__(self, cfg: ExplorationConfig, num_steps: int) -> None:
        super().__init__(cfg, num_steps)
        flat = cfg.noise_std_profile == "flat" or num_steps < 2
        self.profile = [1.0] * num_steps if flat else sde_std_profile(self.times)

    def transition(self, x, velocity, k, stochastic, temperature, learned_std=None):
        if learned_std is None:
            raise ValueError("flow_noise needs the noise head's standard deviations")
        std = learned_std * (self.profile[k] * temperature)
        mean = chain.euler_mean(x, velocity, chain.step_size(self.num_steps))
        if self.cfg.noise_mean == "sde":
            t, delta = float(self.times[k]), float(self.times[k] - self.times[k + 1])
            shape = (len(stochastic),) + (1,) * (x.dim() - 1)
            sde_mean = sde.sde_mean(x, velocity, t, delta, std.square())
            mean = torch.where(stochastic.view(shape), sde_mean, mean)
        return mean, self._zero_where_deterministic(std, stochastic, x)


EXPLORATIONS: dict[str, type[ChainExploration]] = {
    "euler_maruyama": EulerMaruyama,
    "flow_sde": FlowSDE,
    "flow_noise": FlowNoise,
}


def build_exploration(cfg: ExplorationConfig, num_steps: int) -> ChainExploration:
    cfg.validate_exploration()
    return EXPLORATIONS[cfg.exploration](cfg, num_steps)


@dataclass
class ChainSample:
    """A sampled chain: states x_0 ... x_K, the transitions' means and stds, the stochastic steps."""

    states: torch.Tensor
    """[N, K + 1, ...]."""
    means: torch.Tensor
    """[N, K, ...]."""
    stds: torch.Tensor
    """[N or 1, K, ...] broadcastable to ``means``."""
    step_mask: torch.Tensor
    """bool [N, K]."""


VelocityFn = Callable[[torch.Tensor, int], tuple[torch.Tensor, torch.Tensor | None]]
"""``(x_k, k) -> (velocity, learned std or None)``: one network evaluation at step k."""


def sample_chain(
    exploration: ChainExploration,
    velocity_fn: VelocityFn,
    noise: torch.Tensor,
    temperature: float,
    deterministic: bool,
) -> ChainSample:
    """Run the K denoising steps from ``noise``, sampling the stochastic ones."""
    step_mask = exploration.step_mask(len(noise), deterministic, noise.device)
    states, means, stds = [noise], [], []
    for k in range(exploration.num_steps):
        velocity, learned_std = velocity_fn(states[-1], k)
        mean, std = exploration.step(states[-1], velocity, k, step_mask[:, k], temperature, learned_std)
        states.append(mean + std * torch.randn_like(mean))
        means.append(mean)
        stds.append(std.expand_as(mean))
    return ChainSample(torch.stack(states, 1), torch.stack(means, 1), torch.stack(stds, 1), step_mask)


def chain_log_prob_and_entropy(
    states: torch.Tensor,
    means: torch.Tensor,
    stds: torch.Tensor,
    step_mask: torch.Tensor,
    dim_mask: torch.Tensor | None = None,
    reduction: str = "sum",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sum over the stochastic steps (and the entries ``dim_mask`` keeps) of the transition
    log-densities of ``states[:, 1:]``, and of the transitions' Gaussian entropies -> ([N], [N]);
    ``reduction="mean"`` divides each sample's sums by its number of stochastic steps."""
    if reduction not in CHAIN_LOG_PROBS:
        raise ValueError(f"reduction must be one of {CHAIN_LOG_PROBS}, got {reduction!r}")
    next_states = states[:, 1:]
    safe_std = torch.where(stds > 0, stds, torch.ones_like(stds))
    z = (next_states - means) / safe_std
    log_density = -0.5 * z.square() - safe_std.log() - LOG_SQRT_2PI
    entropy = (0.5 + LOG_SQRT_2PI + safe_std.log()).expand_as(log_density)
    keep = (stds > 0).expand_as(log_density) & step_mask.view(*step_mask.shape, *(1,) * (means.dim() - 2))
    if dim_mask is not None:
        keep = keep & dim_mask.expand_as(keep)
    weights = keep.to(log_density.dtype)
    log_prob, total_entropy = (log_density * weights).flatten(1).sum(1), (entropy * weights).flatten(1).sum(1)
    if reduction == "mean":
        steps = step_mask.sum(1).clamp(min=1).to(log_prob.dtype)
        return log_prob / steps, total_entropy / steps
    return log_prob, total_entropy


def chain_transitions(
    exploration: ChainExploration,
    states: torch.Tensor,
    velocities: torch.Tensor,
    step_mask: torch.Tensor,
    temperature: float,
    learned_stds: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Means and stds [N, K, ...] of stored chains from the velocities [N, K, ...] the network gives
    at their states (recomputed with gradients for the PPO ratio)."""
    means, stds = [], []
    for k in range(exploration.num_steps):
        learned = None if learned_stds is None else learned_stds[:, k]
        mean, std = exploration.step(states[:, k], velocities[:, k], k, step_mask[:, k], temperature, learned)
        means.append(mean)
        stds.append(std.expand_as(mean))
    return torch.stack(means, 1), torch.stack(stds, 1)


def stored_step_mask(sample_info: dict[str, torch.Tensor], states: torch.Tensor) -> torch.Tensor:
    """The sample's stochastic steps, or all steps for samples stored without a mask."""
    if "step_mask" in sample_info:
        return sample_info["step_mask"].to(states.device)
    return torch.ones(states.shape[0], states.shape[1] - 1, dtype=torch.bool, device=states.device)
