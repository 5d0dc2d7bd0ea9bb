"""The preprocessing of a pi0 imported from a LeRobot ``pi0`` folder: LeRobot 0.4's, step by step.

From a raw observation (uint8 ``rgb_<camera>`` [N, H, W, 3], ``proprio``, ``instruction``) to the inputs
of transformers' PI0, as LeRobot's preprocessor and ``PI0Policy`` compute them:

* images (every camera of the folder but its ``empty_camera_<i>`` slots, which LeRobot masks out):
  ``x / 255`` channels first (LeRobot's env conversion), the folder's VISUAL normalisation,
  then, unless already at ``image_resolution``, a bilinear resize that keeps the aspect ratio
  (``align_corners=False``, no antialiasing, each side ``int(side / ratio)``), clamped to [-1, 1],
  and padding to the resolution, centred, with the value -1; then ``2 x - 1``. The padding is applied
  to images still in [0, 1], so padded pixels reach the model as -3, not -1: that is LeRobot's
  behaviour and it is reproduced here;
* the instruction: ``"\\n"`` appended unless present (pi0), or, for pi0.5, the prompt
  ``"Task: <instruction>, State: <bins>;\\nAction: "`` (the instruction stripped, ``_`` and newlines
  made spaces; the normalised state zero-padded to ``max_state_dim`` and each value given as its bin
  0..255 of 256 equal bins over [-1, 1], as ``np.digitize``); tokenised by the folder's tokenizer with
  its own special tokens (PaliGemma's ``<bos>``), truncated and right-padded to
  ``tokenizer_max_length``; preceded by one placeholder token per image patch of each camera
  (transformers' PI0 / PI05 put the image features there);
* state: the folder's STATE normalisation, zero-padded to ``max_state_dim``;
* actions out: the first ``action_dim`` of ``max_action_dim`` values, with the inverse ACTION
  normalisation (and the forward one for demonstrated actions in the loss).

Between the environment and these steps sit the user's maps (``maps``, ``vla_rl.policies.env_maps``):
the camera map picks the env camera each checkpoint camera reads, the state map builds the
checkpoint's state from the env's before normalisation, and the action map builds the env's action
from the checkpoint's after unnormalisation.

An openpi PyTorch export (``vla_rl.policies.openpi_folder``, ``convention == "openpi"``) differs in
three places, each openpi's own maths:

* images: uint8 frames not already 224 x 224 are resized by PIL (bilinear, with its antialiasing on
  shrinking) keeping the aspect ratio and pasted centred on black, as openpi's ``ResizeImages``
  does, then ``x / 255 * 2 - 1``; no image statistics;
* the prompt: the instruction stripped, ``_`` and newlines made spaces; pi0 tokenises it with
  ``<bos>`` and then ``"\n"`` on its own; pi0.5 tokenises ``"Task: <instruction>, State: <bins>;\nAction: "``
  where the bins are of the normalised state at the robot's width (openpi discretises before padding),
  computed in float64 as openpi's numpy transforms do; truncated and right-padded with id 0;
* normalisation: openpi's (``lerobot_folder.normalize``);

and, where the export was trained on actions relative to the state (``delta_action_mask``), the raw
state is added to the unnormalised actions' marked dimensions (and subtracted from demonstrated
actions before normalisation), as openpi's ``AbsoluteActions`` / ``DeltaActions`` do.

The settings are read from the folder once at import (``LeRobotPreprocessing.from_folder``) and saved
with the policy, so a checkpoint written after RL preprocesses the same way without the folder.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from transformers import PreTrainedTokenizerBase

from vla_rl.config.structured import ConfigError
from vla_rl.envs.base import Observation
from vla_rl.policies.env_maps import CAMERA_MAP_KEY, STATE_MAP_KEY, CheckpointInterface, EnvMaps, env_cameras
from vla_rl.policies.flow.pi_prompts import PROMPT_END, openpi_pixel_values, openpi_prompt_ids, pi05_prompts
from vla_rl.policies.image_resize import resize_with_pad
from vla_rl.policies.lerobot_folder import PREPROCESSOR_FILE, Feature, LeRobotFolder, normalize

IMAGE_PREFIX = "observation.images."
EMPTY_CAMERA_PREFIX = IMAGE_PREFIX + "empty_camera_"
"""LeRobot's ``empty_cameras`` slots: no observation fills them; LeRobot feeds them as images whose
tokens are masked out of attention and of the position count, which is the same as leaving them out."""
TOKENIZER_STEP = "tokenizer_processor"
"""The preprocessor step that tokenises the prompt (its config has ``max_length``)."""
RENAME_STEP = "rename_observations_processor"
"""The preprocessor step that renames raw observation keys to the policy's (``rename_map``)."""
STATE_KEY = "observation.state"
ACTION_KEY = "action"


@dataclass
class LeRobotPreprocessing:
    """What a LeRobot folder's processors and config say about preprocessing (saved with the policy)."""

    policy_type: str = "pi0"
    """The folder's LeRobot policy type."""
    source: str = ""
    """The folder it was read from (for messages; the settings below do not need it)."""
    input_features: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Observation key -> ``{"type", "shape"}`` as in the folder's config.json."""
    output_features: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Output key (``action``) -> ``{"type", "shape"}``."""
    normalization_mapping: dict[str, str] = field(default_factory=dict)
    """Feature type -> LeRobot normalisation mode (``MEAN_STD``, ``QUANTILES``, ...)."""
    stats: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Feature key -> statistic name -> values (nested lists)."""
    eps: float = 1e-8
    """The normaliser's epsilon."""
    maps: EnvMaps = field(default_factory=EnvMaps)
    """How the environment's actions, state and cameras meet the checkpoint's (``policy.action_map``,
    ``policy.state_map``, ``policy.camera_map``); none by default (the widths and names must agree)."""
    image_resolution: list[int] = field(default_factory=lambda: [224, 224])
    """(height, width) the images are resized and padded to."""
    tokenizer_max_length: int = 48
    """Prompt tokens after truncation and padding: the preprocessor's tokenizer step's ``max_length``
    (what LeRobot runs), else config.json's ``tokenizer_max_length``."""
    max_state_dim: int = 32
    """The state is zero-padded to this width (pi0's state token, pi0.5's prompt)."""
    rename_map: dict[str, str] = field(default_factory=dict)
    """The preprocessor's first step: raw observation key -> the policy's key."""
    convention: str = "lerobot"
    """Whose preprocessing: ``lerobot``, or ``openpi`` for an openpi PyTorch export."""
    delta_action_mask: list[bool] | None = None
    """An openpi export trained on actions relative to the state (openpi's ``DeltaActions`` /
    ``AbsoluteActions``: its LIBERO pi0 configs' ``extra_delta_transform``, ALOHA's
    ``use_delta_joint_actions``): True for each leading checkpoint action dimension that is the model's
    output plus the raw state's dimension of the same index (``policy.openpi_delta_action_mask``).
    None: absolute actions."""
    folder_files: dict[str, Any] = field(default_factory=dict)
    """The folder's config.json and processor pipelines (an openpi export's: its config.json and the
    ``assets/<asset_id>/norm_stats.json`` used; path in the folder -> its JSON), as read at import;
    ``vla-rl export --format lerobot`` / ``openpi`` writes them back (``lerobot_pi0_export``,
    ``openpi_export``). Empty for a checkpoint saved before they were kept."""

    def __post_init__(self) -> None:
        if isinstance(self.maps, dict):
            self.maps = EnvMaps(**self.maps)

    @classmethod
    def from_folder(cls, folder: LeRobotFolder) -> LeRobotPreprocessing:
        default_length = folder.config.get("tokenizer_max_length", 48)

        def features(raw: dict[str, Feature]) -> dict[str, dict[str, Any]]:
            return {key: {"type": f.type, "shape": list(f.shape)} for key, f in raw.items()}

        return cls(
            policy_type=folder.policy_type,
            source=str(folder.path),
            input_features=features(folder.input_features),
            output_features=features(folder.output_features),
            normalization_mapping=dict(folder.normalization_mapping),
            stats={k: {n: np.asarray(v).tolist() for n, v in s.items()} for k, s in folder.stats.items()},
            eps=folder.eps,
            image_resolution=[int(v) for v in folder.config.get("image_resolution", [224, 224])],
            tokenizer_max_length=int(
                preprocessor_setting(folder, TOKENIZER_STEP, "max_length", default_length)
            ),
            rename_map=dict(preprocessor_setting(folder, RENAME_STEP, "rename_map", {})),
            max_state_dim=int(folder.config.get("max_state_dim", 32)),
            convention=folder.convention,
        )

    @cached_property
    def folder(self) -> LeRobotFolder:
        """The settings as a ``LeRobotFolder`` for ``lerobot_folder.normalize``."""

        def features(raw: dict[str, dict[str, Any]]) -> dict[str, Feature]:
            return {key: Feature(type=v["type"], shape=tuple(v["shape"])) for key, v in raw.items()}

        return LeRobotFolder(
            path=Path(self.source),
            policy_type=self.policy_type,
            config={},
            input_features=features(self.input_features),
            output_features=features(self.output_features),
            normalization_mapping=dict(self.normalization_mapping),
            stats={
                k: {n: np.asarray(v, dtype=np.float64) for n, v in s.items()} for k, s in self.stats.items()
            },
            eps=self.eps,
            convention=self.convention,
        )

    @property
    def origin(self) -> str:
        """Where the policy was imported from, for messages: ``LeRobot`` or ``openpi``."""
        return "openpi" if self.convention == "openpi" else "LeRobot"

    @property
    def image_keys(self) -> list[str]:
        """The cameras the model reads, in the folder's order (its empty-camera slots left out)."""
        return [
            k
            for k, f in self.input_features.items()
            if f["type"] == "VISUAL" and not k.startswith(EMPTY_CAMERA_PREFIX)
        ]

    @property
    def cameras(self) -> list[str]:
        """Camera names in the model's order: ``observation.images.<name>`` -> ``obs["rgb_<name>"]``,
        where ``<name>`` is the key before the preprocessor's renaming (``rename_map``), as the raw
        observation LeRobot receives names it."""
        raw_key = {policy_key: raw for raw, policy_key in self.rename_map.items()}
        return [raw_key.get(key, key).removeprefix(IMAGE_PREFIX) for key in self.image_keys]

    @property
    def action_dim(self) -> int:
        return int(self.output_features[ACTION_KEY]["shape"][0])

    @property
    def state_dim(self) -> int:
        feature = self.input_features.get(STATE_KEY)
        return int(feature["shape"][0]) if feature else 0

    @property
    def checkpoint(self) -> CheckpointInterface:
        """The folder's action width, state width and cameras (what the maps refer to)."""
        return CheckpointInterface(self.action_dim, self.state_dim, self.cameras)

    @property
    def env_cameras(self) -> list[str | None]:
        """Per camera of ``cameras``, the env camera it reads through ``maps`` (None: left out)."""
        return env_cameras(self.maps, self.checkpoint)

    @property
    def env_action_dim(self) -> int:
        """Width of the actions the env receives: the action map's, else the folder's."""
        return self.maps.action_map.width(self.action_dim)

    def model_action_mask(self, max_action_dim: int) -> torch.Tensor:
        """bool [max_action_dim]: the model's action dimensions that reach the env (the folder's
        ``action_dim`` first ones, or those the action map takes)."""
        mask = torch.zeros(max_action_dim, dtype=torch.bool)
        if self.maps.action_map.index is None:
            mask[: self.action_dim] = True
        else:
            mask[[i for i in self.maps.action_map.index if i is not None]] = True
        return mask


def preprocessor_setting(folder: LeRobotFolder, step_name: str, key: str, default: Any) -> Any:
    """``key`` of the config of the folder's preprocessor step ``step_name`` (what LeRobot runs), else
    ``default`` (also for a folder without a preprocessor: an openpi export)."""
    if not (folder.path / PREPROCESSOR_FILE).is_file():
        return default
    pipeline = json.loads((folder.path / PREPROCESSOR_FILE).read_text())
    for step in pipeline.get("steps", []):
        if step.get("registry_name") == step_name and key in step.get("config", {}):
            return step["config"][key]
    return default


def lerobot_pixel_values(obs: Observation, prep: LeRobotPreprocessing, device: torch.device) -> torch.Tensor:
    """float [N, cameras, 3, H, W]: every camera of the folder, preprocessed as LeRobot does."""
    height, width = prep.image_resolution
    per_camera = []
    for key, camera in zip(prep.image_keys, prep.env_cameras, strict=True):
        if camera is None:  # left out by the camera map, as LeRobot masks a camera it is not given
            continue
        obs_key = f"rgb_{camera}"
        if obs_key not in obs:
            available = sorted(k for k in obs if k.startswith("rgb_"))
            raise ConfigError(
                f"config key '{CAMERA_MAP_KEY}': the {prep.origin} policy reads camera {key!r} from "
                f"obs[{obs_key!r}]; the observation has {available}"
            )
        if prep.convention == "openpi":
            per_camera.append(openpi_pixel_values(obs[obs_key], height, width, device))
            continue
        frames = torch.as_tensor(obs[obs_key], device=device)
        images = frames.permute(0, 3, 1, 2).contiguous().to(torch.float32) / 255
        images = normalize(images, key, prep.folder)
        if tuple(images.shape[-2:]) != (height, width):
            # LeRobot clamps the resized image to [-1, 1] and pads it with -1, centred
            images = resize_with_pad(images, height, width, pad_value=-1.0, centred=True).clamp(-1.0, 1.0)
        per_camera.append(images * 2.0 - 1.0)
    return torch.stack(per_camera, dim=1)


def lerobot_prompt(
    tokenizer: PreTrainedTokenizerBase,
    instructions: list[str],
    prep: LeRobotPreprocessing,
    state: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids [N, tokenizer_max_length], mask [N, tokenizer_max_length]) of the prompts; pi0.5's carry
    ``state`` (normalised and padded, [N, max_state_dim])."""
    if prep.policy_type == "pi05" and state is None:
        raise ValueError("pi0.5's prompt needs the normalised state")
    if prep.convention == "openpi":
        return openpi_prompt_ids(tokenizer, instructions, prep.policy_type, prep.tokenizer_max_length, state)
    if prep.policy_type == "pi05":
        texts = pi05_prompts(instructions, state)
    else:
        texts = [text if text.endswith(PROMPT_END) else text + PROMPT_END for text in instructions]
    tokens = tokenizer(
        texts,
        max_length=prep.tokenizer_max_length,
        truncation=True,
        padding="max_length",
        padding_side="right",
        return_tensors="pt",
    )
    return tokens["input_ids"].long(), tokens["attention_mask"].long()


def normalized_state(
    proprio: torch.Tensor,
    prep: LeRobotPreprocessing,
    *,
    padded: bool = True,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """``dtype`` [N, max_state_dim]: the env's state through the state map, the folder's STATE
    normalisation, zero-padded (unless not ``padded``: [N, state_dim])."""
    state_map = prep.maps.state_map
    if not state_map.given and proprio.shape[-1] != prep.state_dim:
        raise ConfigError(
            f"config key '{STATE_MAP_KEY}': the {prep.origin} policy's state has {prep.state_dim} values, "
            f"the observation gives {proprio.shape[-1]}"
        )
    state_map.check_range(STATE_MAP_KEY, proprio.shape[-1], "the observation's state")
    state = normalize(state_map.apply(proprio.to(dtype)), STATE_KEY, prep.folder)
    return F.pad(state, (0, prep.max_state_dim - state.shape[-1])) if padded else state


def prompt_state(proprio: torch.Tensor, prep: LeRobotPreprocessing) -> torch.Tensor:
    """The normalised state pi0.5's prompt discretises: LeRobot's padded to ``max_state_dim`` in
    float32, openpi's at the robot's width in float64 (its transforms discretise before padding)."""
    if prep.convention == "openpi":
        return normalized_state(proprio, prep, padded=False, dtype=torch.float64)
    return normalized_state(proprio, prep)


def checkpoint_state(proprio: torch.Tensor, prep: LeRobotPreprocessing) -> torch.Tensor:
    """float [N, state_dim]: the env's state through the state map, in the checkpoint's raw units."""
    return prep.maps.state_map.apply(proprio.float())


def delta_offset(
    actions: torch.Tensor, prep: LeRobotPreprocessing, state: torch.Tensor | None
) -> torch.Tensor:
    """What openpi's ``AbsoluteActions`` adds to (``DeltaActions`` subtracts from) robot actions
    [N, ..., action_dim]: the raw state [N, state_dim] on the dimensions ``delta_action_mask`` marks,
    the same for every step of a chunk; zeros without a mask."""
    mask = prep.delta_action_mask
    if not mask:
        return torch.zeros_like(actions)
    if state is None:
        raise ValueError("actions relative to the state (delta_action_mask) need the observation's state")
    width = len(mask)
    marked = torch.as_tensor(mask, dtype=torch.bool, device=actions.device)
    offset = torch.where(marked, state[:, :width].to(actions.device, actions.dtype), 0.0)
    offset = F.pad(offset, (0, actions.shape[-1] - width))
    return offset.view(offset.shape[0], *([1] * (actions.ndim - 2)), offset.shape[-1])


def unnormalized_actions(
    model_actions: torch.Tensor, prep: LeRobotPreprocessing, state: torch.Tensor | None = None
) -> torch.Tensor:
    """Model actions [N, ..., max_action_dim] -> the robot's [..., action_dim] in its units (plus the
    raw ``state`` [N, state_dim] on ``delta_action_mask``'s dimensions), then through the action map:
    the env's [..., env_action_dim]."""
    robot = normalize(model_actions[..., : prep.action_dim].float(), ACTION_KEY, prep.folder, inverse=True)
    robot = robot + delta_offset(robot, prep, state)
    return prep.maps.action_map.apply(robot)


def normalized_actions(
    actions: torch.Tensor, prep: LeRobotPreprocessing, max_action_dim: int, state: torch.Tensor | None = None
) -> torch.Tensor:
    """Env actions [N, ..., env_action_dim] -> the robot's through the action map (the checkpoint's
    dimensions no env dimension takes: 0 in model units, outside ``model_action_mask``), less the raw
    ``state`` on ``delta_action_mask``'s dimensions -> model units, zero-padded to ``max_action_dim``."""
    robot, taken = prep.maps.action_map.scatter(actions.float(), prep.action_dim)
    robot = robot - delta_offset(robot, prep, state)
    model = normalize(robot, ACTION_KEY, prep.folder) * taken.to(robot.device)
    return F.pad(model, (0, max_action_dim - model.shape[-1]))
