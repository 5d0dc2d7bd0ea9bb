"""SmolVLA (LeRobot's flow-matching VLA on a SmolVLM backbone) as a ChunkPolicy.

The network is ``smolvla_model`` (our code on transformers' SmolVLM and Llama layers), loaded from a
LeRobot ``smolvla`` folder (``smolvla_io``) and fed as LeRobot's pipeline feeds it
(``smolvla_inputs``; normalisation by ``vla_rl.policies.lerobot_folder``). Around it, as for pi0: the
prefix's keys and values computed once per observation batch and reused by every denoising step, a
stochastic denoising chain with a log-probability (``vla_rl.policies.flow.exploration``), and a value
head on the VLM's final feature of the state token, which sees the whole prefix and no action.

``predict_chunk(obs, noise)`` is LeRobot's ``predict_action_chunk``: the Euler ODE from the given
noise, actions cut to the robot's width and unnormalised.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from vla_rl.config.structured import ConfigError
from vla_rl.envs.base import Observation
from vla_rl.policies.chunk_policy import ChunkEvaluation, ChunkStep, SampleInfo, SFTOutput
from vla_rl.policies.flow.chain_policy import FlowChainPolicy
from vla_rl.policies.flow.chunk_padding import fill_padded_steps, pad_last_dim
from vla_rl.policies.flow.exploration import (
    ChainSample,
    chain_transitions,
    sample_chain,
    stored_step_mask,
)
from vla_rl.policies.flow.smolvla_config import (
    SMOLVLA_LORA_TARGETS,
    SMOLVLA_TRAINED_WITH_LORA,
    SmolVLAPolicyConfig,
)
from vla_rl.policies.flow.smolvla_inputs import ACTION_KEY, build_inputs
from vla_rl.policies.flow.smolvla_io import (
    LoadedSmolVLA,
    load_smolvla,
    read_adapters,
    read_head,
    read_policy_config,
    save_smolvla,
)
from vla_rl.policies.flow.smolvla_layers import PrefixKV
from vla_rl.policies.flow.smolvla_model import denoising_times
from vla_rl.policies.lerobot_folder import normalize
from vla_rl.policies.lora import LoraSettings, apply_lora, load_adapter_state_dict

PREFIX_KEYS = "smolvla_prefix_keys"
"""float [N, layers, P, kv_heads, head_dim] in ``sample_info``: the prefix's keys per row."""
PREFIX_VALUES = "smolvla_prefix_values"
PREFIX_VALID = "smolvla_prefix_valid"
"""bool [N, P]: real prefix tokens (zero: padding, also where rows of several batches were joined)."""
PREFIX_FEATURE = "smolvla_prefix_feature"
"""float [N, width]: the state token's final VLM feature (the value head's input)."""
TIME_BETA = (1.5, 1.0)
"""SmolVLA's training times: ``0.001 + 0.999 * Beta(1.5, 1)`` (more weight near the noise)."""


class SmolVLAPolicy(FlowChainPolicy):
    """Observation -> action chunk with SmolVLA; ``chunk_len`` = the folder's ``chunk_size``."""

    registry_name = "smolvla"

    def __init__(self, loaded: LoadedSmolVLA, cfg: SmolVLAPolicyConfig) -> None:
        super().__init__()
        self.loaded = loaded
        self.model = loaded.model
        self.arch = loaded.arch
        self.folder = loaded.folder
        self.tokenizer = loaded.tokenizer
        self.cfg = cfg
        self.chunk_len = int(self.arch.chunk_size)
        action = self.folder.output_features.get(ACTION_KEY)
        if action is None:
            raise ConfigError(
                f"config key 'policy.init_from': {self.folder.path} has no {ACTION_KEY!r} output"
            )
        self.action_dim = int(action.shape[0])
        if cfg.action_dim is not None and cfg.action_dim != self.action_dim:
            raise ConfigError(
                f"config key 'policy.kwargs.action_dim': {cfg.action_dim} != the folder's {ACTION_KEY} width "
                f"{self.action_dim} (its statistics and the robot it was trained on have that many)"
            )
        width = self.model.width
        self.value_head = nn.Sequential(
            nn.Linear(width, cfg.value_hidden_dim), nn.SiLU(), nn.Linear(cfg.value_hidden_dim, 1)
        )
        self.register_buffer(
            "action_dim_mask", torch.arange(self.arch.max_action_dim) < self.action_dim, persistent=False
        )
        self.noise_head_sizes = (self.model.expert_width, self.arch.max_action_dim)
        self.set_exploration()
        if cfg.lora is not None:
            self.add_lora(cfg.lora)

    def add_lora(self, settings: LoraSettings) -> None:
        """Inject LoRA adapters into the model in place (``SMOLVLA_LORA_TARGETS`` unless ``settings``
        names targets) and freeze its other weights, except ``SMOLVLA_TRAINED_WITH_LORA``; the heads
        keep training. Saved with the policy (``smolvla_io``)."""
        apply_lora(self.model, settings, SMOLVLA_LORA_TARGETS, SMOLVLA_TRAINED_WITH_LORA)
        self.cfg.lora = settings

    def cast_model(self, dtype: torch.dtype) -> None:
        """The model's weights (VLM, expert, projections, adapters) in ``dtype``: bfloat16 halves their
        memory. Each part casts its input to its weights' dtype and the velocity and features come
        out in float32, so the heads, the chain's log-probabilities and the losses stay float32."""
        self.model.to(dtype)

    @property
    def num_steps(self) -> int:
        return int(self.cfg.num_denoising_steps or self.arch.num_steps)

    @property
    def device(self) -> torch.device:
        return self.action_dim_mask.device

    # ----- building, loading and saving -----------------------------------------------------------------

    @classmethod
    def build(cls, **kwargs: object) -> SmolVLAPolicy:
        """A SmolVLA from a LeRobot folder: ``pretrained_dir`` (required), ``vlm_dir`` (the backbone's
        local config and tokenizer, see ``smolvla_io``), any ``SmolVLAPolicyConfig`` field."""
        settings = dict(kwargs)
        directory = settings.pop("pretrained_dir", None)
        vlm_dir = settings.pop("vlm_dir", None)
        chunk_len = settings.pop("chunk_len", None)
        if directory is None:
            raise ConfigError(
                "config key 'policy.kwargs.pretrained_dir': smolvla builds from a LeRobot smolvla folder"
            )
        policy = cls.from_lerobot(str(directory), None if vlm_dir is None else str(vlm_dir), **settings)
        if chunk_len is not None and int(chunk_len) != policy.chunk_len:  # type: ignore[call-overload]
            raise ConfigError(
                f"config key 'policy.kwargs.chunk_len': {chunk_len} != the folder's chunk_size "
                f"{policy.chunk_len}"
            )
        return policy

    @classmethod
    def from_lerobot(cls, directory: str, vlm_dir: str | None = None, **settings: object) -> SmolVLAPolicy:
        """A LeRobot ``smolvla`` folder with our wrapper settings (``SmolVLAPolicyConfig`` fields)."""
        return cls(load_smolvla(directory, vlm_dir), SmolVLAPolicyConfig.from_dict(settings))

    @classmethod
    def from_pretrained(cls, directory: str | Path, vlm_dir: str | Path | None = None) -> SmolVLAPolicy:
        """A folder LeRobot or ``save_pretrained`` wrote (our settings and heads where present)."""
        path = Path(directory)
        loaded = load_smolvla(path, vlm_dir)
        policy = cls(loaded, read_policy_config(path) or SmolVLAPolicyConfig())
        if policy.cfg.lora is not None:
            load_adapter_state_dict(policy.model, read_adapters(path))
        value = read_head(path, "value_head")
        if value is not None:
            policy.value_head.load_state_dict(value)
        noise = read_head(path, "noise_head")
        if noise is not None and policy.noise_head is not None:
            policy.noise_head.load_state_dict(noise)
        return policy

    def save_pretrained(self, directory: str | Path) -> None:
        save_smolvla(
            directory, self.loaded, self.cfg, {"value_head": self.value_head, "noise_head": self.noise_head}
        )

    # ----- the model, step by step ----------------------------------------------------------------------

    def encode_prefix(self, obs: Observation) -> PrefixKV:
        """Images, instruction and state through the VLM once (``smolvla_inputs`` preprocessing)."""
        inputs = build_inputs(obs, self.folder, self.arch, self.cfg, self.tokenizer, self.device)
        return self.model.encode_prefix(inputs.images, inputs.tokens, inputs.token_mask, inputs.state)

    def to_env_actions(self, model_actions: torch.Tensor) -> torch.Tensor:
        """Padded model units -> env units [N, chunk, action_dim] (LeRobot's unnormalisation)."""
        actions = normalize(
            model_actions[..., : self.action_dim].float(), ACTION_KEY, self.folder, inverse=True
        )
        return actions.clamp(-1.0, 1.0) if self.cfg.clip_actions else actions

    def to_model_actions(self, env_actions: torch.Tensor) -> torch.Tensor:
        normalized = normalize(env_actions.float(), ACTION_KEY, self.folder)
        return pad_last_dim(normalized, self.arch.max_action_dim, "policy.action_dim")

    @torch.no_grad()
    def predict_chunk(self, obs: Observation, noise: torch.Tensor) -> torch.Tensor:
        """LeRobot's ``predict_action_chunk`` with its postprocessor: env actions [N, chunk, action_dim]
        from ``noise`` [N, chunk, max_action_dim] by the model's ``num_steps`` Euler steps."""
        prefix = self.encode_prefix(obs)
        return self.to_env_actions(self.model.sample(prefix, noise.to(self.device), self.arch.num_steps))

    def flow_losses(
        self, obs: Observation, env_actions: torch.Tensor, noise: torch.Tensor, time: torch.Tensor
    ) -> torch.Tensor:
        """LeRobot's ``forward`` losses per entry [N, chunk, max_action_dim] for env-unit actions."""
        prefix = self.encode_prefix(obs)
        targets = self.to_model_actions(env_actions.to(self.device))
        return self.model.flow_losses(prefix, targets, noise.to(self.device), time.to(self.device))

    def velocity_and_std(
        self, prefix: PrefixKV, x_t: torch.Tensor, t: float | torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Velocity and the noise head's std on the expert's action features (``flow_noise``; else None)."""
        time = t if isinstance(t, torch.Tensor) else torch.full((len(x_t),), float(t), device=x_t.device)
        velocity, hidden = self.model.velocity(prefix, x_t, time.float())
        return velocity, None if self.noise_head is None else self.noise_head(hidden)

    def run_chain(
        self, prefix: PrefixKV, noise: torch.Tensor, temperature: float, deterministic: bool
    ) -> ChainSample:
        times = denoising_times(self.num_steps).tolist()

        def velocity_fn(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor | None]:
            return self.velocity_and_std(prefix, x, times[k])

        return sample_chain(self.exploration, velocity_fn, noise, temperature, deterministic)

    def transitions_of_chain(
        self, prefix: PrefixKV, states: torch.Tensor, step_mask: torch.Tensor, temperature: float
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Recompute (with gradients) the transition means and stds of stored chains [N, K + 1, chunk,
        D]: the K velocity evaluations run as one batch of N * K rows."""
        batch, steps = states.shape[0], self.num_steps
        times = denoising_times(steps)[:-1].to(states.device)
        velocity, std = self.velocity_and_std(
            prefix.repeat_rows(steps), states[:, :steps].flatten(0, 1), times.repeat(batch)
        )
        learned = None if std is None else std.unflatten(0, (batch, steps))
        return chain_transitions(
            self.exploration, states, velocity.unflatten(0, (batch, steps)), step_mask, temperature, learned
        )

    def value_from_feature(self, feature: torch.Tensor) -> torch.Tensor:
        return self.value_head(self.critic_input(feature.float())).squeeze(-1)

    def _observation_cache(self, obs: Observation) -> dict[str, torch.Tensor]:
        """The prefix's keys and values per row while no VLM parameter trains and
        ``cfg.reuse_frozen_prefix``; else nothing (the prefix then depends on the update)."""
        vlm_trains = any(p.requires_grad for p in self.model.vlm.parameters()) or any(
            p.requires_grad for p in self.model.state_proj.parameters()
        )
        if vlm_trains or not self.cfg.reuse_frozen_prefix:
            return {}
        with torch.no_grad():
            prefix = self.encode_prefix(obs)
        return {
            PREFIX_KEYS: torch.stack(prefix.keys, 1),
            PREFIX_VALUES: torch.stack(prefix.values, 1),
            PREFIX_VALID: prefix.valid,
            PREFIX_FEATURE: prefix.last_feature,
        }

    def prefix_of(self, obs: Observation, sample_info: SampleInfo) -> PrefixKV:
        """The stored prefix (``observation_cache``), trimmed to its used columns, or a fresh one."""
        if PREFIX_KEYS not in sample_info:
            return self.encode_prefix(obs)
        valid = sample_info[PREFIX_VALID].to(self.device).bool()
        used = valid.any(0).nonzero()
        length = int(used.max()) + 1 if len(used) else valid.shape[1]
        keys = sample_info[PREFIX_KEYS].to(self.device)[:, :, :length]
        values = sample_info[PREFIX_VALUES].to(self.device)[:, :, :length]
        return PrefixKV(
            list(keys.unbind(1)),
            list(values.unbind(1)),
            valid[:, :length],
            sample_info[PREFIX_FEATURE].to(self.device),
        )

    # ----- ChunkPolicy ----------------------------------------------------------------------------------

    @property
    def noise_shape(self) -> tuple[int, int]:
        return (self.chunk_len, self.arch.max_action_dim)

    def _sample(
        self,
        obs: Observation,
        temperature: float,
        deterministic: bool,
        level: str,
        with_value: bool,
        noise: torch.Tensor | None = None,
    ) -> ChunkStep:
        """A stochastic denoising chain (``cfg.exploration``; the Euler ODE when ``deterministic``,
        whose log-probability is then 0) from ``noise`` where given."""
        prefix = self.encode_prefix(obs)
        batch = prefix.valid.shape[0]
        if noise is None:
            noise = torch.randn(batch, self.chunk_len, self.arch.max_action_dim, device=self.device)
        noise = noise.to(self.device)
        sampled = self.run_chain(prefix, noise, temperature, deterministic)
        value = self.value_from_feature(prefix.last_feature) if with_value else None
        return self.chain_step(
            sampled, self.to_env_actions(sampled.states[:, -1]), value, self.action_dim_mask
        )

    def _evaluate(
        self, obs: Observation, sample_info: SampleInfo, temperature: float, level: str, with_value: bool
    ) -> ChunkEvaluation:
        states = sample_info["chain"].to(self.device)
        step_mask = stored_step_mask(sample_info, states)
        prefix = self.prefix_of(obs, sample_info)
        means, stds = self.transitions_of_chain(prefix, states, step_mask, temperature)
        value = self.value_from_feature(prefix.last_feature) if with_value else None
        return self.chain_evaluation(states, means, stds, step_mask, value, self.action_dim_mask)

    def sft_loss(self, obs: Observation, action_chunk: torch.Tensor, chunk_mask: torch.Tensor) -> SFTOutput:
        """SmolVLA's flow-matching loss (its Beta time sampling, Gaussian noise), averaged over real
        entries: chunk steps inside the episode and the robot's ``action_dim`` of the padded dims."""
        chunk_mask = chunk_mask.to(self.device)
        actions = fill_padded_steps(action_chunk.to(self.device), chunk_mask)
        batch = len(actions)
        noise = torch.randn(batch, self.chunk_len, self.arch.max_action_dim, device=self.device)
        beta = torch.distributions.Beta(*TIME_BETA).sample((batch,)).to(self.device)
        per_entry = self.flow_losses(obs, actions, noise, beta * 0.999 + 0.001)
        weights = (chunk_mask[:, :, None] & self.action_dim_mask[None, None, :]).to(per_entry.dtype)
        loss = (per_entry * weights).sum() / weights.sum().clamp(min=1.0)
        return SFTOutput(loss=loss, metrics={"flow_mse": float(loss.detach())})
