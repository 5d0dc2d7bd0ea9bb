"""pi0 (flow-matching VLA) as a ChunkPolicy, wrapping transformers' ``PI0ForConditionalGeneration``.

The model is used as transformers provides it: its own prefix embedding, Gemma prefix, action expert,
flow-matching loss and denoising forward. This wrapper adds observation preprocessing, action
normalisation and padding, a prefix cache computed once per observation batch and reused by every
denoising step, a stochastic denoising chain with a log-probability (``vla_rl.policies.flow.chain``),
and a value head on the action expert's hidden feature of the *state token*. That token attends to
the prefix and to itself only (pi0's block mask keeps the action tokens out of it), so its feature is
a function of the observation alone, the same at every denoising step and for every noise draw.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import PI0ForConditionalGeneration, PreTrainedTokenizerBase

from vla_rl.config.structured import ConfigError
from vla_rl.envs.base import Observation
from vla_rl.policies.chunk_policy import (
    ChunkEvaluation,
    ChunkStep,
    SampleInfo,
    SFTOutput,
    proprio_columns,
    state_vector,
)
from vla_rl.policies.env_maps import EnvInterface, EnvMaps, check_against_checkpoint, check_env_fit
from vla_rl.policies.flow import chain, lerobot_preprocessing, pi0_prefix
from vla_rl.policies.flow.chain_policy import FlowChainPolicy
from vla_rl.policies.flow.chunk_padding import fill_padded_steps, pad_last_dim
from vla_rl.policies.flow.exploration import (
    ChainSample,
    chain_transitions,
    sample_chain,
    stored_step_mask,
)
from vla_rl.policies.flow.lerobot_pi0_model import use_lerobot_time_embedding
from vla_rl.policies.flow.normalization import NormStats
from vla_rl.policies.flow.pi0_config import PI0_LORA_TARGETS, PI0_TRAINED_WITH_LORA, Pi0PolicyConfig
from vla_rl.policies.flow.pi0_inputs import (
    Pi0Inputs,
    build_inputs,
    build_state,
    observed_state,
    unreduced_loss,
)
from vla_rl.policies.flow.pi0_io import build_pi0, load_pi0, load_pi0_policy, save_pi0_policy
from vla_rl.policies.flow.pi0_prefix import PrefixCache
from vla_rl.policies.lora import LoraSettings, apply_lora
from vla_rl.policies.vla.auxiliary import (
    AuxiliaryStateHead,
    auxiliary_target,
    capture_layer_output,
    capture_output,
)

CONSTANT_STD = 1e-3
"""State dimensions whose standard deviation in the data is below this are centred, not scaled."""


class Pi0Policy(FlowChainPolicy):
    """Observation -> action chunk with pi0; ``chunk_len`` = the model's ``chunk_size``."""

    registry_name = "pi0"
    model_class: type = PI0ForConditionalGeneration
    """transformers' model class this family wraps (loading a saved policy builds one)."""
    lerobot_type = "pi0"
    """The LeRobot policy type whose folders this family imports."""

    def __init__(
        self, model: PI0ForConditionalGeneration, tokenizer: PreTrainedTokenizerBase, cfg: Pi0PolicyConfig
    ) -> None:
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.cfg = cfg
        self.chunk_len = int(model.config.chunk_size)
        self.max_action_dim = int(model.config.max_action_dim)
        if cfg.action_dim > self.max_action_dim:
            raise ValueError(
                f"action_dim {cfg.action_dim} > the model's max_action_dim {self.max_action_dim}"
            )
        expert_width = int(model.config.dit_config.hidden_size)
        self.value_head = nn.Sequential(
            nn.Linear(expert_width, cfg.value_hidden_dim), nn.SiLU(), nn.Linear(cfg.value_hidden_dim, 1)
        )
        self.aux_head = (
            AuxiliaryStateHead(expert_width, cfg.aux_target_dim, cfg.value_hidden_dim)
            if cfg.aux_target_key is not None
            else None
        )
        self.register_buffer(
            "action_dim_mask", torch.ones(self.max_action_dim, dtype=torch.bool), persistent=False
        )
        self._set_action_layout()
        self.noise_head_sizes = (expert_width, self.max_action_dim)  # expert features -> padded stds
        self.set_exploration()
        self._state_moments: torch.Tensor | None = None
        """Count, sum and sum of squares per state dimension seen by ``update_normalizer``."""
        if cfg.lerobot is not None:
            use_lerobot_time_embedding(model)
        if cfg.lora is not None:
            self.add_lora(cfg.lora)
        if cfg.freeze_vision:
            vlm = model.model.vlm
            for module in (vlm.vision_tower, vlm.multi_modal_projector):
                module.requires_grad_(False)

    def _set_action_layout(self) -> None:
        """``action_dim`` (the env's action width) and ``action_dim_mask`` (the model's action
        dimensions that reach the env: the log-probability's and the SFT loss's)."""
        if self.cfg.lerobot is not None:
            self.action_dim = self.cfg.lerobot.env_action_dim
            mask = self.cfg.lerobot.model_action_mask(self.max_action_dim)
        else:
            self.action_dim = int(self.cfg.action_dim)
            mask = torch.arange(self.max_action_dim) < self.action_dim
        self.action_dim_mask.copy_(mask.to(self.action_dim_mask.device))

    def set_env_maps(self, maps: EnvMaps) -> None:
        """Use ``maps`` (``policy.action_map`` / ``state_map`` / ``camera_map``; each one not set keeps
        the checkpoint's) between the env and a LeRobot import; saved with the policy. A
        ``ConfigError`` for maps that refer to what the checkpoint lacks, or for a policy that was
        not imported (its widths and cameras are the env's already)."""
        if self.cfg.lerobot is None:
            raise ConfigError(
                f"config key '{maps.given()[0]}': maps apply to a policy imported from a LeRobot folder; "
                f"this {self.registry_name} was built or saved here with the env's own widths and cameras"
            )
        combined = maps.over(self.cfg.lerobot.maps)
        check_against_checkpoint(combined, self.cfg.lerobot.checkpoint)
        self.cfg.lerobot.maps = combined
        self._set_action_layout()

    def check_env(self, env: EnvInterface) -> None:
        """A LeRobot import: ``ConfigError`` where the checkpoint's action width, state width or
        cameras do not meet ``env``'s through the maps (``vla_rl.policies.env_maps``)."""
        if self.cfg.lerobot is None:
            return
        state_dim = 0
        if all(key in env.vector_dims for key in self.cfg.state_keys):
            fields = self.cfg.proprio_fields
            state_dim = sum(
                len(proprio_columns(fields))
                if key == "proprio" and fields is not None
                else env.vector_dims[key]
                for key in self.cfg.state_keys
            )
        check_env_fit(self.cfg.lerobot.maps, self.cfg.lerobot.checkpoint, env, state_dim)

    def add_lora(self, settings: LoraSettings) -> None:
        """Inject LoRA adapters into the model in place (``PI0_LORA_TARGETS`` unless ``settings``
        names targets) and freeze its other weights, except the action, state and time projections
        (``PI0_TRAINED_WITH_LORA``); the heads keep training. Saved with the policy."""
        apply_lora(self.model, settings, PI0_LORA_TARGETS, PI0_TRAINED_WITH_LORA)
        self.cfg.lora = settings

    def cast_model(self, dtype: torch.dtype) -> None:
        """The pretrained model's weights (VLM, action expert, adapters) in ``dtype``: bfloat16 halves
        their memory. Its inputs are cast to it and its outputs back to float32, so the heads, the
        denoising chain's log-probabilities and the losses stay in float32."""
        self.model.to(dtype)

    @property
    def num_steps(self) -> int:
        return int(self.cfg.num_denoising_steps or self.model.config.num_inference_steps)

    @property
    def device(self) -> torch.device:
        return self.action_dim_mask.device

    # ----- building and loading -------------------------------------------------------------------------

    @classmethod
    def build(cls, **kwargs: object) -> Pi0Policy:
        """A tiny randomly initialised pi0, or ``pretrained_dir=...`` for local pi0 weights.

        Keywords: ``chunk_len``, ``action_dim``, ``proprio_dim``, ``instructions`` (tokenizer corpus),
        ``pretrained_dir``, any ``Pi0PolicyConfig`` field, any ``tiny_pi0_config`` argument.
        """
        return build_pi0(cls, dict(kwargs))

    @classmethod
    def from_pretrained_pi0(cls, local_dir: str, cfg: Pi0PolicyConfig | None = None) -> Pi0Policy:
        """pi0 weights in transformers' format (LeRobot checkpoints converted) from a local dir."""
        return load_pi0(cls, local_dir, cfg or Pi0PolicyConfig())

    @classmethod
    def from_pretrained(
        cls,
        directory: str,
        tokenizer_dir: str | None = None,
        openpi_asset_id: str | None = None,
        openpi_delta_action_mask: list[bool] | None = None,
    ) -> Pi0Policy:
        """A folder of ``save_pretrained``, a LeRobot ``pi0`` folder or an openpi export
        (``lerobot_pi0_io``; its tokenizer from ``tokenizer_dir`` when the folder has none, an
        export's statistics named by ``openpi_asset_id`` when it has several, its actions relative to
        the state by ``openpi_delta_action_mask``)."""
        return load_pi0_policy(cls, directory, tokenizer_dir, openpi_asset_id, openpi_delta_action_mask)

    def save_pretrained(self, directory: str) -> None:
        save_pi0_policy(self, directory)

    # ----- the model, step by step ----------------------------------------------------------------------

    def prepare_inputs(self, obs: Observation) -> Pi0Inputs:
        return build_inputs(obs, self.cfg, self.model.config, self.tokenizer, self.device)

    def encode_prefix(self, obs: Observation) -> PrefixCache:
        """Run the vision tower and the Gemma prefix once (as ``sample_actions`` does)."""
        inputs = self.prepare_inputs(obs)
        model = self.model.model
        pixel_values = inputs.pixel_values.to(self.model.dtype)
        embeds = model.embed_prefix(inputs.input_ids, pixel_values, inputs.pixel_attention_mask)
        key_values = model.vlm(
            inputs_embeds=embeds,
            attention_mask=inputs.attention_mask,
            position_ids=inputs.attention_mask.cumsum(-1) - 1,
            token_type_ids=torch.zeros_like(embeds[:, :, 0]),
            use_cache=True,
        ).cache
        return PrefixCache(key_values, inputs.attention_mask, key_values.get_seq_length(), inputs.state)

    def velocity(
        self,
        prefix: PrefixCache,
        x_t: torch.Tensor,
        t: float | torch.Tensor,
        state: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One denoising evaluation on the cached prefix.

        ``x_t`` [N, chunk_len, max_action_dim] at time ``t`` (1 = noise, 0 = action). Returns the
        velocity ``v_t`` (same shape) and the expert's last hidden states [N, 1 + chunk_len, H]:
        position 0 is the state token, then one per action of the chunk.
        """
        state = prefix.state if state is None else state
        batch = x_t.shape[0]
        time = t if isinstance(t, torch.Tensor) else torch.full((batch,), float(t), device=x_t.device)
        dtype = self.model.dtype  # the model's inputs in its dtype, its outputs back in float32
        with capture_output(self.model.model.dit) as captured:
            output = self.model(
                **self.state_input(state.to(dtype)),
                noise=x_t.to(dtype),
                timestep=time.float(),
                attention_mask=prefix.attention_mask,
                cache=prefix.key_values,
            )
        grown = prefix.key_values.get_seq_length() - prefix.prefix_length
        if grown > 0:
            prefix.key_values.crop(-grown)
        return output.logits.float(), captured["hidden"].float()

    def state_input(self, state: torch.Tensor) -> dict[str, torch.Tensor]:
        """The state as the model takes it: pi0's state token (pi0.5 overrides: none)."""
        return {"state": state}

    def velocity_and_std(
        self, prefix: PrefixCache, x_t: torch.Tensor, t: float | torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """Velocity, the noise head's std on the action tokens' expert features (``flow_noise``;
        else None) and the state-token feature [N, H]."""
        velocity, hidden = self.velocity(prefix, x_t, t)
        std = None if self.noise_head is None else self.noise_head(hidden[:, 1:])
        return velocity, std, hidden[:, 0]

    def velocity_times(self) -> torch.Tensor:
        """float32 [K + 1]: the times of the chain's velocity evaluations: for a LeRobot import its
        sampling loop's float32-accumulated grid (``chain.accumulated_denoising_times``), else
        ``chain.denoising_times``."""
        if self.cfg.lerobot is not None:
            return chain.accumulated_denoising_times(self.num_steps)
        return chain.denoising_times(self.num_steps)

    def run_chain(
        self, prefix: PrefixCache, noise: torch.Tensor, temperature: float, deterministic: bool
    ) -> tuple[ChainSample, torch.Tensor]:
        """The sampled chain (``vla_rl.policies.flow.exploration``) and the state-token feature [N, H]."""
        times = self.velocity_times().tolist()
        state_feature: list[torch.Tensor] = []

        def velocity_fn(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor | None]:
            velocity, std, feature = self.velocity_and_std(prefix, x, times[k])
            state_feature.append(feature)
            return velocity, std

        sampled = sample_chain(self.exploration, velocity_fn, noise, temperature, deterministic)
        return sampled, state_feature[0]

    def transitions_of_chain(
        self, prefix: PrefixCache, states: torch.Tensor, step_mask: torch.Tensor, temperature: float
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Recompute (with gradients) the transition means and stds of stored chains
        [N, K + 1, chunk, D] and the state-token feature.

        The K states a chain passed through are stored, so the K velocity evaluations do not wait on
        one another: they run as one batch of N * K rows (each row's prefix repeated K times), which
        saves K - 1 passes of per-call overhead on small models and fills a GPU on large ones."""
        batch, steps = states.shape[0], self.num_steps
        times = self.velocity_times()[:-1].to(states.device)
        velocity, std, feature = self.velocity_and_std(
            pi0_prefix.repeat_prefix(prefix, steps), states[:, :steps].flatten(0, 1), times.repeat(batch)
        )
        learned = None if std is None else std.unflatten(0, (batch, steps))
        means, transition_stds = chain_transitions(
            self.exploration, states, velocity.unflatten(0, (batch, steps)), step_mask, temperature, learned
        )
        return means, transition_stds, feature.unflatten(0, (batch, steps))[:, 0]

    def _observation_cache(self, obs: Observation) -> dict[str, torch.Tensor]:
        """The prefix's keys and values per row (``pi0_prefix.prefix_rows``) while no VLM parameter
        trains and ``cfg.reuse_frozen_prefix``; else nothing (the prefix then depends on the step)."""
        vlm_trains = any(p.requires_grad for p in self.model.model.vlm.parameters())
        if vlm_trains or not self.cfg.reuse_frozen_prefix:
            return {}
        with torch.no_grad():
            return pi0_prefix.prefix_rows(self.encode_prefix(obs))

    def update_normalizer(self, obs: Observation) -> None:
        """Fold a batch into the state statistics (``cfg.state_stats``, per-dimension mean and std,
        saved with the checkpoint); SFT calls this on its demonstrations before training, so
        joint angles in radians and positions in metres reach the state projection on one scale.
        Also fits the auxiliary target's statistics when ``aux_target_key`` is set."""
        if self.aux_head is not None:
            self.aux_head.update(auxiliary_target(obs, str(self.cfg.aux_target_key), self.device))
        if not all(key in obs for key in self.cfg.state_keys):
            return
        state = state_vector(obs, self.cfg.state_keys, self.device, self.cfg.proprio_fields).double()
        if self._state_moments is None:
            self._state_moments = torch.zeros(3, state.shape[-1], dtype=torch.float64, device=state.device)
        self._state_moments += torch.stack(
            [torch.ones_like(state[0]) * len(state), state.sum(0), state.square().sum(0)]
        )
        count, total, squares = self._state_moments
        mean = total / count
        std = (squares / count - mean.square()).clamp(min=0.0).sqrt()
        std = torch.where(std < CONSTANT_STD, torch.ones_like(std), std)  # constant dims: centre only
        self.cfg.state_stats = NormStats("mean_std", mean=mean.tolist(), std=std.tolist())

    def value_from_feature(self, state_feature: torch.Tensor) -> torch.Tensor:
        return self.value_head(self.critic_input(state_feature.float())).squeeze(-1)

    def checkpoint_state(self, obs: Observation | None, batch: int) -> torch.Tensor | None:
        """The observation's state in an imported checkpoint's raw units, for actions relative to the
        state (``delta_action_mask``); None when there are none."""
        if self.cfg.lerobot is None or not self.cfg.lerobot.delta_action_mask or obs is None:
            return None
        proprio = observed_state(obs, batch, self.cfg, self.device)
        return lerobot_preprocessing.checkpoint_state(proprio, self.cfg.lerobot)

    def unnormalized_actions(
        self, model_actions: torch.Tensor, obs: Observation | None = None
    ) -> torch.Tensor:
        """Padded model units -> the robot's units [N, chunk, action_dim] (a LeRobot import: its
        postprocessor's unnormalisation; an openpi export with delta actions: plus ``obs``'s state)."""
        if self.cfg.lerobot is not None:
            state = self.checkpoint_state(obs, len(model_actions))
            return lerobot_preprocessing.unnormalized_actions(model_actions, self.cfg.lerobot, state)
        return self.cfg.action_stats.unnormalize(model_actions[..., : self.action_dim].float())

    def to_env_actions(self, model_actions: torch.Tensor, obs: Observation | None = None) -> torch.Tensor:
        """Padded model units -> env units [N, chunk, action_dim], clipped to [-1, 1] (``obs``: the
        observation acted on, needed for actions relative to the state)."""
        return self.unnormalized_actions(model_actions, obs).clamp(-1.0, 1.0)

    def to_model_actions(self, env_actions: torch.Tensor, obs: Observation | None = None) -> torch.Tensor:
        if self.cfg.lerobot is not None:
            state = self.checkpoint_state(obs, len(env_actions))
            return lerobot_preprocessing.normalized_actions(
                env_actions, self.cfg.lerobot, self.max_action_dim, state
            )
        return pad_last_dim(
            self.cfg.action_stats.normalize(env_actions.float()), self.max_action_dim, "policy.action_dim"
        )

    @torch.no_grad()
    def predict_action_chunk(self, obs: Observation, noise: torch.Tensor) -> torch.Tensor:
        """The noise-free denoising chain from ``noise`` [N, chunk, max_action_dim] to actions in the
        robot's units [N, chunk, action_dim], not clipped: for a LeRobot import what LeRobot's
        ``predict_action_chunk`` followed by its postprocessor gives for the same noise (then through
        ``policy.action_map`` when one is set)."""
        prefix = self.encode_prefix(obs)
        sampled, _ = self.run_chain(prefix, noise.to(self.device), 1.0, deterministic=True)
        return self.unnormalized_actions(sampled.states[:, -1], obs)

    # ----- ChunkPolicy ----------------------------------------------------------------------------------

    @property
    def noise_shape(self) -> tuple[int, int]:
        return (self.chunk_len, self.max_action_dim)

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
        whose log-probability is then 0: no step was sampled) from ``noise`` where given."""
        prefix = self.encode_prefix(obs)
        batch = prefix.state.shape[0]
        if noise is None:
            noise = torch.randn(batch, self.chunk_len, self.max_action_dim, device=self.device)
        noise = noise.to(self.device)
        sampled, state_feature = self.run_chain(prefix, noise, temperature, deterministic)
        value = self.value_from_feature(state_feature) if with_value else None
        return self.chain_step(
            sampled, self.to_env_actions(sampled.states[:, -1], obs), value, self.action_dim_mask
        )

    def _evaluate(
        self, obs: Observation, sample_info: SampleInfo, temperature: float, level: str, with_value: bool
    ) -> ChunkEvaluation:
        states = sample_info["chain"].to(self.device)
        step_mask = stored_step_mask(sample_info, states)
        if pi0_prefix.PREFIX_KEYS in sample_info:  # stored by observation_cache
            state = build_state(obs, len(states), self.cfg, self.model.config, self.device)
            prefix = pi0_prefix.prefix_from_rows(sample_info, state)
        else:
            prefix = self.encode_prefix(obs)
        means, stds, state_feature = self.transitions_of_chain(prefix, states, step_mask, temperature)
        value = self.value_from_feature(state_feature) if with_value else None
        return self.chain_evaluation(states, means, stds, step_mask, value, self.action_dim_mask)

    def sft_loss(
        self,
        obs: Observation,
        action_chunk: torch.Tensor,
        chunk_mask: torch.Tensor,
        *,
        noise: torch.Tensor | None = None,
        time: torch.Tensor | None = None,
    ) -> SFTOutput:
        """pi0's flow-matching loss (its Beta time sampling and noise, unless ``noise`` [N, chunk,
        max_action_dim] and ``time`` [N] are given), averaged over real entries: chunk steps inside
        the episode and the first ``action_dim`` of ``max_action_dim`` dims (padded steps hold the
        last real action, see ``chunk_padding``); plus ``aux_coef`` x the auxiliary state error of
        the expert's state-token feature when ``aux_target_key`` is set."""
        inputs = self.prepare_inputs(obs)
        chunk_mask = chunk_mask.to(self.device)
        targets = self.to_model_actions(fill_padded_steps(action_chunk.to(self.device), chunk_mask), obs)
        expert_layers = self.model.model.dit.layers
        with (
            unreduced_loss(self.model.config),
            capture_output(self.model.model.dit) as captured,
            capture_layer_output(expert_layers, self.cfg.aux_layer) as layer_output,
        ):
            dtype = self.model.dtype  # inputs in the model's dtype, the loss in float32
            per_entry = self.model(
                **self.state_input(inputs.state.to(dtype)),
                input_ids=inputs.input_ids,
                pixel_values=inputs.pixel_values.to(dtype),
                pixel_attention_mask=inputs.pixel_attention_mask,
                attention_mask=inputs.attention_mask,
                actions=targets.to(dtype),
                noise=None if noise is None else noise.to(self.device, dtype),
                timestep=None if time is None else time.to(self.device),
            ).loss.float()
        mask = chunk_mask[:, :, None] & self.action_dim_mask[None, None, :]
        weights = mask.to(per_entry.dtype)
        loss = (per_entry * weights).sum() / weights.sum().clamp(min=1.0)
        metrics = {"flow_mse": float(loss.detach())}
        if self.aux_head is not None:
            target = auxiliary_target(obs, str(self.cfg.aux_target_key), self.device)
            feature = (layer_output or captured)["hidden"][:, 0].float()  # the state token
            aux_mse = self.aux_head.loss(feature, target)
            loss = loss + self.cfg.aux_coef * aux_mse
            metrics["aux_mse"] = float(aux_mse.detach())
        return SFTOutput(loss=loss, metrics=metrics)
