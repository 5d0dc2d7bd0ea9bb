"""An OpenVLA folder as a token VLA policy (``policy.name=openvla``): one action of ``A`` tokens.

The model is the folder's own (``trust_remote_code``: its ``modeling_prismatic.py`` runs, local files
only) and everything the policy computes goes through that model's ``forward(input_ids,
attention_mask, pixel_values)``: the image patches are inserted after ``<bos>`` by the model, the
vocabulary logits come out. The prompt is OpenVLA's, ``In: What action should the robot take to
{instruction}?\\nOut:`` with the instruction lower-cased as its training data was, tokenised by the
folder's tokenizer (``<bos>`` first) and followed by the empty token (id 29871, Llama-2's ``▁``) that
the reference appends before the actions. Then ``A`` action tokens are decoded one at a time.

Like the other token families, each token is drawn from the softmax over the action ids only (the
``n_bins`` ids below the tokenizer's vocabulary size; ``OpenVLAActionCodec``) scaled by the
temperature, greedily when deterministic: the reference's greedy ``predict_action`` takes the argmax
over the whole vocabulary, which is the same token whenever that argmax is an action id (a trained
OpenVLA's always is). Log-probabilities of a stored sample come from one teacher-forced forward.
The value head reads the last hidden state at the last prompt position.

Every decoding step recomputes the whole sequence (no key/value cache: the reference's cached path is
written for batch size 1); rows whose prompts differ in length run as separate forwards.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from torch import nn
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from vla_rl.config.structured import ConfigError
from vla_rl.envs.base import Observation
from vla_rl.policies.chunk_policy import ChunkEvaluation, ChunkPolicy, ChunkStep, SampleInfo, SFTOutput
from vla_rl.policies.env_maps import CheckpointInterface, EnvInterface, EnvMaps, check_env_fit, env_cameras
from vla_rl.policies.openvla_folder import (
    TRUST_KEY,
    OpenVLAFolder,
    action_stats,
    read_openvla_folder,
    resolve_unnorm_key,
)
from vla_rl.policies.pretrained_io import save_weights
from vla_rl.policies.vla.openvla_actions import OpenVLAActionCodec
from vla_rl.policies.vla.openvla_images import PrismaticImageSettings, preprocess_images
from vla_rl.policies.vla.openvla_model import load_remote_model
from vla_rl.policies.vla.sampling import choose_bins, entropy_from_log_probs, scaled_log_probs

EMPTY_TOKEN_ID = 29871
"""The token OpenVLA puts between ``Out:`` and the action tokens (Llama-2's ``▁``)."""
PROMPT_TEMPLATE = "In: What action should the robot take to {instruction}?\nOut:"
CAMERA = "primary"
"""The one camera of an OpenVLA checkpoint (``policy.camera_map={primary: <env camera>}``)."""
SETTINGS_FILE = "vla_rl_openvla.json"
"""What vla-rl adds to a saved folder: the un-normalisation key, the env maps."""
HEADS_FILE = "vla_rl_heads.safetensors"
"""The value head of a saved folder."""
VALUE_HIDDEN_DIM = 64


def openvla_prompt(instruction: str) -> str:
    return PROMPT_TEMPLATE.format(instruction=instruction.lower())


class OpenVLAPolicy(ChunkPolicy):
    """A token VLA whose model, tokenizer and action statistics are an OpenVLA folder's."""

    registry_name = "openvla"
    log_prob_levels = ("token", "action", "chunk")

    def __init__(
        self,
        folder: OpenVLAFolder,
        model: nn.Module,
        tokenizer: PreTrainedTokenizerBase,
        unnorm_key: str,
        maps: EnvMaps | None = None,
    ) -> None:
        super().__init__()
        self.folder = folder
        self.model = model
        self.tokenizer = tokenizer
        self.unnorm_key = unnorm_key
        self.codec = OpenVLAActionCodec(
            folder.token_vocab_size, folder.n_action_bins, action_stats(folder, unnorm_key)
        )
        self.image_settings = PrismaticImageSettings.read(folder.path)
        self.chunk_len = 1
        self.maps = maps or EnvMaps()
        self.action_dim = self.maps.action_map.width(self.codec.action_dim)
        hidden = int(folder.config["text_config"]["hidden_size"])
        self.value_head = nn.Sequential(
            nn.Linear(hidden, VALUE_HIDDEN_DIM), nn.Tanh(), nn.Linear(VALUE_HIDDEN_DIM, 1)
        )

    # ----------------------------------------------------------------- loading and saving

    @classmethod
    def build(cls, **kwargs: object) -> ChunkPolicy:
        raise ConfigError(
            "config key 'policy.init_from': openvla policies are loaded from an OpenVLA folder, not built"
        )

    @classmethod
    def from_pretrained(
        cls, directory: str | Path, unnorm_key: str | None = None, trust_remote_code: bool = False
    ) -> OpenVLAPolicy:
        """An OpenVLA folder (or one this class saved): ``unnorm_key`` picks the action statistics
        (None: the saved choice, else the folder's only key); ``trust_remote_code`` must be True to
        run the folder's modelling code."""
        folder = read_openvla_folder(directory)
        saved = _read_settings(folder.path)
        key = resolve_unnorm_key(folder, unnorm_key if unnorm_key is not None else saved.get("unnorm_key"))
        if not trust_remote_code:
            raise ConfigError(
                f"config key '{TRUST_KEY}': {folder.path} brings its own modelling code "
                f"({folder.model_class_ref.split('.')[0]}.py); set {TRUST_KEY}=true to run it (local "
                "files only)"
            )
        model = load_remote_model(folder)
        tokenizer = AutoTokenizer.from_pretrained(
            str(folder.path), local_files_only=True, trust_remote_code=True
        )
        policy = cls(folder, model, tokenizer, key, EnvMaps(**saved.get("maps", {})))
        heads = folder.path / HEADS_FILE
        if heads.is_file():
            policy.value_head.load_state_dict(
                {k.removeprefix("value_head."): v for k, v in load_file(str(heads)).items()}
            )
        return policy

    def save_pretrained(self, directory: str | Path) -> None:
        """The folder again (its code, tokenizer, processor settings) with this model's weights, the
        value head and the settings chosen here; loadable by ``from_pretrained`` and, without the
        vla-rl files, by the folder's own code."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        for source in self.folder.path.iterdir():
            weights = source.suffix in (".safetensors", ".bin") or source.name.endswith(".index.json")
            if source.is_file() and not weights and source.name not in (SETTINGS_FILE, HEADS_FILE):
                shutil.copy2(source, directory / source.name)
        self.model.save_pretrained(directory)
        (directory / "config.json").write_text(json.dumps(self.folder.config, indent=2))
        settings = {"unnorm_key": self.unnorm_key, "maps": asdict(self.maps)}
        (directory / SETTINGS_FILE).write_text(json.dumps(settings, indent=2))
        save_weights(
            {f"value_head.{k}": v for k, v in self.value_head.state_dict().items()}, directory / HEADS_FILE
        )

    # ----------------------------------------------------------------- the env

    def set_env_maps(self, maps: EnvMaps) -> None:
        self.maps = maps.over(self.maps)
        self.action_dim = self.maps.action_map.width(self.codec.action_dim)

    def check_env(self, env: EnvInterface) -> None:
        checkpoint = CheckpointInterface(action_dim=self.codec.action_dim, state_dim=0, cameras=[CAMERA])
        check_env_fit(self.maps, checkpoint, env, state_dim=0)

    def cast_model(self, dtype: torch.dtype) -> None:
        """The folder's model in ``dtype`` (``policy.dtype=bfloat16`` halves its memory); the value
        head, the log-probabilities and the losses stay float32."""
        self.model.to(dtype)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    # ----------------------------------------------------------------- prompt and forward

    def prompt_ids(self, instructions: list[str]) -> list[list[int]]:
        """Token ids per instruction: ``<bos>`` + OpenVLA's prompt + the empty token."""
        rows = []
        for instruction in instructions:
            ids = list(self.tokenizer(openvla_prompt(instruction))["input_ids"])
            if ids[-1] != EMPTY_TOKEN_ID:
                ids.append(EMPTY_TOKEN_ID)
            rows.append(ids)
        return rows

    def pixel_values(self, obs: Observation) -> torch.Tensor:
        camera = env_cameras(self.maps, CheckpointInterface(self.codec.action_dim, 0, [CAMERA]))[0]
        key = f"rgb_{camera}"
        if key not in obs:
            raise ConfigError(
                f"config key 'policy.camera_map': the observation has no {key!r} "
                f"(cameras: {sorted(k for k in obs if k.startswith('rgb_'))}); map {CAMERA} to one of them"
            )
        return preprocess_images(obs[key], self.image_settings)

    def forward_tokens(self, ids: torch.Tensor, pixels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The model on token rows of one length [n, L] and their images: (vocabulary logits
        [n, L, V] of the text positions, last hidden states [n, L, hidden] there)."""
        output = self.model(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            pixel_values=pixels.to(self.device, self.model.dtype),
            output_hidden_states=True,
            return_dict=True,
        )
        length = ids.shape[1]
        return output.logits[:, -length:], output.hidden_states[-1][:, -length:]

    def bin_logits(self, logits: torch.Tensor) -> torch.Tensor:
        first = self.codec.first_token_id
        return logits[..., first : first + self.codec.n_bins]

    def _groups(self, obs: Observation) -> list[tuple[list[int], torch.Tensor, torch.Tensor]]:
        """(row indices, prompt ids [n, L], pixels [n, C, S, S]) per prompt length."""
        rows = self.prompt_ids(list(obs["instruction"]))
        pixels = self.pixel_values(obs)
        by_length: dict[int, list[int]] = {}
        for index, row in enumerate(rows):
            by_length.setdefault(len(row), []).append(index)
        return [
            (
                indices,
                torch.tensor([rows[i] for i in indices], dtype=torch.long, device=self.device),
                pixels[indices],
            )
            for indices in by_length.values()
        ]

    # ----------------------------------------------------------------- ChunkPolicy

    def _taken(self) -> torch.Tensor:
        """bool [A]: checkpoint action dimensions the env takes (all without an action map)."""
        return self.maps.action_map.scatter(torch.zeros(1, self.action_dim), self.codec.action_dim)[1]

    def _reduce(self, per_token: torch.Tensor, level: str) -> torch.Tensor:
        """[N, A] per-token values (dimensions the env does not take zeroed) at ``level``."""
        per_token = per_token * self._taken().to(per_token.device)
        if level == "token":
            return per_token[:, None]
        if level == "action":
            return per_token.sum(-1, keepdim=True)
        return per_token.sum(-1)

    def _sample(
        self, obs: Observation, temperature: float, deterministic: bool, level: str, with_value: bool
    ) -> ChunkStep:
        batch = len(obs["instruction"])
        dims = self.codec.action_dim
        bins = torch.zeros(batch, dims, dtype=torch.long, device=self.device)
        log_probs = torch.zeros(batch, dims, device=self.device)
        values = torch.zeros(batch, device=self.device)
        for indices, ids, pixels in self._groups(obs):
            for step in range(dims):
                logits, hidden = self.forward_tokens(ids, pixels)
                if step == 0 and with_value:
                    values[indices] = self.value_head(hidden[:, -1].float()).squeeze(-1)
                chosen, log_prob = choose_bins(self.bin_logits(logits[:, -1]), temperature, deterministic)
                bins[indices, step] = chosen
                log_probs[indices, step] = log_prob
                ids = torch.cat([ids, self.codec.bins_to_token_ids(chosen)[:, None]], dim=1)
        actions = self.maps.action_map.apply(self.codec.bins_to_actions(bins))
        return ChunkStep(
            actions=actions[:, None],
            log_prob=self._reduce(log_probs, level),
            value=values if with_value else None,
            sample_info={"action_tokens": self.codec.bins_to_token_ids(bins)[:, None]},
        )

    def _teacher_forced(self, obs: Observation, bins: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Bin logits [N, A, n_bins] predicting each of ``bins`` [N, A] and the hidden state at the
        last prompt position [N, hidden], from one forward per prompt length."""
        dims = self.codec.action_dim
        logits_out: list[torch.Tensor | None] = [None] * bins.shape[0]
        hidden_out: list[torch.Tensor | None] = [None] * bins.shape[0]
        for indices, ids, pixels in self._groups(obs):
            tokens = self.codec.bins_to_token_ids(bins[indices, :-1])
            logits, hidden = self.forward_tokens(torch.cat([ids, tokens], dim=1), pixels)
            for row, index in enumerate(indices):
                logits_out[index] = self.bin_logits(logits[row, -dims:])
                hidden_out[index] = hidden[row, -dims]
        return torch.stack(logits_out), torch.stack(hidden_out)  # type: ignore[arg-type]

    def _evaluate(
        self, obs: Observation, sample_info: SampleInfo, temperature: float, level: str, with_value: bool
    ) -> ChunkEvaluation:
        tokens = sample_info["action_tokens"].to(self.device).reshape(-1, self.codec.action_dim)
        bins = tokens.long() - self.codec.first_token_id
        logits, hidden = self._teacher_forced(obs, bins)
        log_probs = scaled_log_probs(logits, temperature)
        token_log_probs = log_probs.gather(-1, bins.unsqueeze(-1)).squeeze(-1)
        return ChunkEvaluation(
            log_prob=self._reduce(token_log_probs, level),
            entropy=self._reduce(entropy_from_log_probs(log_probs), level),
            value=self.value_head(self.critic_input(hidden.float())).squeeze(-1) if with_value else None,
        )

    def sft_loss(self, obs: Observation, action_chunk: torch.Tensor, chunk_mask: torch.Tensor) -> SFTOutput:
        """Cross-entropy of the demonstrated action's tokens (OpenVLA's tokenisation of the action in
        the dataset's units; env dimensions reach the checkpoint's through ``policy.action_map``)."""
        actions, taken = self.maps.action_map.scatter(
            action_chunk[:, 0].to(self.device), self.codec.action_dim
        )
        target = self.codec.actions_to_bins(actions)
        logits, _ = self._teacher_forced(obs, target)
        cross_entropy = F.cross_entropy(logits.float().permute(0, 2, 1), target, reduction="none")
        weight = chunk_mask[:, 0].to(self.device).float()[:, None] * taken.float()
        loss = (cross_entropy * weight).sum() / weight.sum().clamp(min=1.0)
        return SFTOutput(loss=loss, metrics={"cross_entropy": float(loss.detach())})


def _read_settings(path: Path) -> dict[str, Any]:
    settings = path / SETTINGS_FILE
    return json.loads(settings.read_text()) if settings.is_file() else {}
