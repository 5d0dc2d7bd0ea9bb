"""Configuration of the SmolVLA family: the architecture read from a LeRobot ``smolvla`` folder's
``config.json`` and the settings our policy wrapper adds (saved as JSON with an RL checkpoint)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from vla_rl.config.structured import ConfigError
from vla_rl.policies.flow.exploration import ExplorationConfig
from vla_rl.policies.lora import LoraSettings
from vla_rl.policies.pretrained_io import DictConfig

SMOLVLA_LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
"""SmolVLA's default LoRA targets: the attention and MLP projections of the VLM's text layers and of
the action expert, and the vision tower's query, key and value projections."""
SMOLVLA_TRAINED_WITH_LORA = (
    "state_proj.",
    "action_in_proj.",
    "action_out_proj.",
    "action_time_mlp_in.",
    "action_time_mlp_out.",
)
"""Parameters of SmolVLA that train in full beside the adapters: the small projections of the state,
the actions and the time into and out of the model."""

UNSUPPORTED_SETTINGS: dict[str, Any] = {
    "adapt_to_pi_aloha": False,
    "use_delta_joint_actions_aloha": False,
    "add_image_special_tokens": False,
    "prefix_length": -1,
    "rtc_config": None,
}
"""LeRobot SmolVLA settings that vla-rl does not implement, with the value it requires: a folder
with another value is refused (``ConfigError``) rather than run with different maths."""


@dataclass
class SmolVLAArchitecture(DictConfig):
    """The model settings of a SmolVLA, named as in LeRobot's ``config.json`` (``SmolVLAConfig``)."""

    chunk_size: int = 50
    """Actions per chunk (expert tokens)."""
    max_state_dim: int = 32
    """The state is zero-padded to this width before ``state_proj``."""
    max_action_dim: int = 32
    """Actions are zero-padded to this width; the model's output is cut back to the robot's."""
    num_steps: int = 10
    """Euler denoising steps from noise (t = 1) to action (t = 0)."""
    resize_imgs_with_padding: list[int] | None = field(default_factory=lambda: [512, 512])
    """[width, height] each camera image is resized to, keeping its aspect ratio and padding the top
    and left; None feeds images at their own size."""
    tokenizer_max_length: int = 48
    """Instructions (with their appended newline) are truncated to this many tokens."""
    pad_language_to: str = "longest"
    """``longest`` (pad a batch to its longest instruction) or ``max_length``."""
    num_vlm_layers: int = 16
    """The VLM keeps only its first this many text layers (<= 0: all of them)."""
    num_expert_layers: int = -1
    """Layers of the action expert (<= 0: one per kept VLM layer); the VLM layer count must be a
    multiple, and VLM layer i pairs with expert layer i / ratio when i is a multiple of the ratio."""
    self_attn_every_n_layers: int = 2
    """Every n-th layer the expert attends jointly with the prefix (its own keys too); the others
    cross-attend to the prefix's keys and values only (<= 0: none is joint)."""
    expert_width_multiplier: float = 0.75
    """Expert hidden width = this x the VLM's text width."""
    attention_mode: str = "cross_attn"
    """``cross_attn`` (interleaved joint and cross layers) or ``self_attn`` (every layer joint)."""
    min_period: float = 4e-3
    """Shortest period of the sinusoidal time embedding."""
    max_period: float = 4.0
    """Longest period of the sinusoidal time embedding."""
    empty_cameras: int = 0
    """Extra blank (masked) camera slots; vla-rl requires 0 (every camera comes from the env)."""
    vlm_model_name: str = "HuggingFaceTB/SmolVLM2-500M-Video-Instruct"
    """The backbone LeRobot built the VLM from (a hub id or a local folder); vla-rl reads its
    ``config.json`` and tokenizer from a local copy (``smolvla_io.find_vlm_dir``)."""

    @classmethod
    def from_lerobot(cls, config: dict[str, Any]) -> SmolVLAArchitecture:
        """Our fields of a LeRobot ``config.json``; ``ConfigError`` for a setting we do not run."""
        for name, required in UNSUPPORTED_SETTINGS.items():
            if name in config and config[name] != required:
                raise ConfigError(
                    f"config key 'policy.init_from': the SmolVLA folder sets {name}={config[name]!r}; "
                    f"vla-rl runs SmolVLA only with {name}={required!r}"
                )
        if config.get("empty_cameras", 0):
            raise ConfigError(
                "config key 'policy.init_from': the SmolVLA folder asks for empty camera slots "
                f"(empty_cameras={config['empty_cameras']}); vla-rl feeds every camera from the env"
            )
        values = {f.name: config[f.name] for f in fields(cls) if f.name in config}
        if values.get("resize_imgs_with_padding") is not None:
            values["resize_imgs_with_padding"] = list(values["resize_imgs_with_padding"])
        return cls(**values)

    def __post_init__(self) -> None:
        if self.attention_mode not in ("cross_attn", "self_attn"):
            raise ConfigError(f"config key 'attention_mode': unknown {self.attention_mode!r}")
        if self.pad_language_to not in ("longest", "max_length"):
            raise ConfigError(f"config key 'pad_language_to': unknown {self.pad_language_to!r}")


@dataclass
class SmolVLAPolicyConfig(ExplorationConfig, DictConfig):
    """What our wrapper adds around a SmolVLA model (saved as JSON next to its weights)."""

    camera_map: dict[str, str] = field(default_factory=dict)
    """LeRobot image key -> env camera: ``observation.images.top`` reads ``obs["rgb_<camera>"]``;
    keys left out read the camera named by the key's last part (``top``)."""
    state_keys: list[str] = field(default_factory=lambda: ["proprio"])
    """Vector observations concatenated into ``observation.state`` (its width must be the folder's)."""
    action_dim: int | None = None
    """Real action values per step: None or the folder's ``action`` feature width (checked)."""
    num_denoising_steps: int | None = None
    """Euler steps K; None: the folder's ``num_steps``."""
    value_hidden_dim: int = 64
    """Hidden width of the value-head MLP on the VLM's final state-token feature."""
    clip_actions: bool = False
    """Clip env actions to [-1, 1] (vla-rl's own envs); False returns LeRobot's actions unchanged."""
    reuse_frozen_prefix: bool = True
    """While no VLM parameter trains, an RL update encodes each observation's prefix once and every
    epoch reuses its keys and values (``observation_cache``)."""
    lora: LoraSettings | None = None
    """LoRA adapters on the model (``SMOLVLA_LORA_TARGETS`` unless it names targets); its other
    weights are then frozen except ``SMOLVLA_TRAINED_WITH_LORA``. None: no adapters."""

    def __post_init__(self) -> None:
        self.validate_exploration()
        if isinstance(self.lora, dict):
            self.lora = LoraSettings(**self.lora)


@dataclass
class SmolVLABuildSettings(SmolVLAPolicyConfig):
    """The construction values of ``smolvla`` (an SFT config's ``policy.kwargs``, the keywords of
    ``build``): every ``SmolVLAPolicyConfig`` field and where the model comes from."""

    pretrained_dir: str | None = None
    """The LeRobot ``smolvla`` folder to start from (required: there is no fresh SmolVLA)."""
    vlm_dir: str | None = None
    """The backbone's local config and tokenizer; None: the folder's ``vlm/`` or its
    ``vlm_model_name`` when that is a local folder (``smolvla_io.find_vlm_dir``)."""
    chunk_len: int | None = None
    """Actions per chunk, checked against the folder's ``chunk_size``; None takes the folder's."""
