"""Build tiny LeRobot pi0 / pi0.5 policies with LeRobot's own code and record their outputs as fixtures.

Runs with the LeRobot reference venv's python (``.venv-lerobot``)::

    python tests/lerobot/make_pi_fixtures.py --openpi OPENPI_CHECKOUT --out tests/fixtures/lerobot

LeRobot 0.4's pi0 and pi0.5 run only on a ``transformers`` carrying openpi's modified Gemma, PaliGemma
and SigLIP files. This script copies the venv's installed ``transformers`` package to a temporary
directory, applies the files of ``OPENPI_CHECKOUT/src/openpi/models_pytorch/transformers_replace`` over
that copy and puts it first on ``sys.path`` before anything imports ``transformers``; the venv itself is
left untouched and nothing of openpi is written to the output.

For each policy type it writes ``OUT/<type>/``:

* ``policy/``: the folder LeRobot's ``save_pretrained`` writes (``config.json``, ``model.safetensors``)
  plus its pre/post-processor pipelines (``policy_preprocessor.json``, ``policy_postprocessor.json`` and
  their normaliser statistics), exactly the files of a user's checkpoint;
* ``tokenizer/``: a small local word-level tokenizer standing in for the PaliGemma tokenizer that
  LeRobot's processor names (``google/paligemma-3b-pt-224``, never downloaded here);
* ``full_size_shapes.json``: the weight names and shapes of LeRobot's full-size model of that type
  (default config, built on PyTorch's meta device: no memory, no weights), so the loader's reading of
  a real checkpoint's sizes is checked too;
* ``reference.npz``: a raw observation batch (uint8 HWC images, state, instructions), the initial noise,
  the action chunk of LeRobot's ``predict_action_chunk`` through its own pre- and post-processor, and the
  flow-matching loss of ``forward`` on an action batch with fixed noise and time, plus intermediate
  values (prompt tokens, normalised state) that help to locate a difference.

The model is LeRobot's ``PI0Policy`` / ``PI05Policy`` at reduced width: LeRobot chooses its Gemma sizes
from a variant name (``get_gemma_config``) and builds transformers' PaliGemma and Gemma from configs it
fills in; the script gives those functions smaller sizes (2 layers, widths 32 / 16, a vocabulary of the
tokenizer's size, a 2-layer SigLIP on 32 x 32 images). LeRobot's code paths are otherwise unchanged.
Weights are LeRobot's initialisation with a fixed seed, with the norm scales and biases (zero at
initialisation) drawn at random so that every parameter matters.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

SEED = 84
BATCH = 2
CAMERAS = ("front", "wrist")
RAW_IMAGE_HW = (40, 56)
"""Raw camera frames (height, width): not square, so LeRobot's resize-with-pad pads them."""
IMAGE_SIDE = 32
"""The policies' ``image_resolution`` (and the SigLIP tower's ``image_size``)."""
PATCH = 8
EMPTY_CAMERAS = {"pi0": 1, "pi05": 0}
"""LeRobot's ``empty_cameras``: camera slots no observation fills (fed as masked-out images)."""
STATE_DIM = 8
ACTION_DIM = 7
CHUNK = 10
INSTRUCTIONS = ["pick up the red cube", "put the green block on the blue plate and open the gripper"]
SPECIAL_TOKENS = ["<pad>", "<eos>", "<bos>", "<unk>"]
"""At PaliGemma's ids (pad 0, eos 1, bos 2, unk 3)."""
PROMPT_WORDS = ("Task", "State", "Action", ":", ",", ";", "\n")
"""Words of pi0.5's prompt template (``Task: ..., State: ...;\\nAction: ``)."""
HUB_TOKENIZER = "google/paligemma-3b-pt-224"
"""The tokenizer LeRobot's pi0 / pi0.5 processors name; here answered by the local tokenizer."""
VLM_SIZES = {"width": 32, "depth": 2, "mlp_dim": 64, "num_heads": 8, "num_kv_heads": 1, "head_dim": 8}
EXPERT_SIZES = {"width": 16, "depth": 2, "mlp_dim": 32, "num_heads": 8, "num_kv_heads": 1, "head_dim": 8}
"""LeRobot's joint attention hard-codes 8 query heads; both models share depth, heads and head_dim."""
VISION_SIZES = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "image_size": IMAGE_SIDE,
    "patch_size": PATCH,
}
"""The SigLIP tower (its 16 attention heads are the PaliGemma default LeRobot keeps)."""


def patched_transformers(openpi: Path, workdir: Path) -> Path:
    """A copy of the installed ``transformers`` with openpi's replacement files applied; returns the
    directory to put first on ``sys.path``."""
    replace = openpi / "src" / "openpi" / "models_pytorch" / "transformers_replace"
    if not replace.is_dir():
        raise SystemExit(f"--openpi {openpi}: no src/openpi/models_pytorch/transformers_replace there")
    spec = importlib.util.find_spec("transformers")
    if spec is None or spec.origin is None:
        raise SystemExit("transformers is not installed in this python")
    installed = Path(spec.origin).parent
    target = workdir / "transformers"
    shutil.copytree(installed, target, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(replace, target, dirs_exist_ok=True)
    return workdir


def build_tokenizer(directory: Path, instructions: list[str] | None = None) -> Any:
    """A word-level tokenizer over ``instructions`` (default ``INSTRUCTIONS``), pi0.5's prompt words and
    the 256 state bins, that prepends ``<bos>`` as PaliGemma's does; saved to ``directory``."""
    from tokenizers import Tokenizer, pre_tokenizers, processors
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    texts = INSTRUCTIONS if instructions is None else instructions
    words = sorted({w for text in texts for w in text.split()} | set(PROMPT_WORDS))
    vocab = {token: index for index, token in enumerate(SPECIAL_TOKENS)}
    for word in [*words, *map(str, range(256))]:
        vocab.setdefault(word, len(vocab))
    backend = Tokenizer(WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.normalizer = None
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split("\n", behavior="isolated"),
            pre_tokenizers.Split(" ", behavior="removed"),
            pre_tokenizers.Punctuation(),
        ]
    )
    backend.post_processor = processors.TemplateProcessing(
        single="<bos> $A", pair="<bos> $A $B", special_tokens=[("<bos>", vocab["<bos>"])]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>", unk_token="<unk>"
    )
    tokenizer.save_pretrained(directory)
    return tokenizer


def lerobot_modules(policy_type: str) -> tuple[Any, Any, Any]:
    """LeRobot's modeling module, config class and policy class of ``policy_type``."""
    if policy_type == "pi0":
        from lerobot.policies.pi0 import modeling_pi0 as modeling
        from lerobot.policies.pi0.configuration_pi0 import PI0Config as Config
        from lerobot.policies.pi0.modeling_pi0 import PI0Policy as Policy
    else:
        from lerobot.policies.pi05 import modeling_pi05 as modeling
        from lerobot.policies.pi05.configuration_pi05 import PI05Config as Config
        from lerobot.policies.pi05.modeling_pi05 import PI05Policy as Policy
    return modeling, Config, Policy


def full_size_shapes(policy_type: str) -> dict[str, list[int]]:
    """Weight name (as LeRobot saves it) -> shape of LeRobot's default-size model, built on the meta
    device (before ``shrink_lerobot`` touches the module)."""
    import torch

    modeling, config_class, _ = lerobot_modules(policy_type)
    inputs, outputs = features()
    config = config_class(input_features=inputs, output_features=outputs, device="cpu", push_to_hub=False)
    with torch.device("meta"):
        core = (modeling.PI0Pytorch if policy_type == "pi0" else modeling.PI05Pytorch)(config)
    return {f"model.{name}": list(tensor.shape) for name, tensor in core.state_dict().items()}


def shrink_lerobot(modeling: Any, vocab_size: int, image_side: int = IMAGE_SIDE) -> None:
    """Give LeRobot's model construction in ``modeling`` (its pi0 or pi05 module) the reduced sizes
    (SigLIP on ``image_side`` x ``image_side`` images)."""
    from transformers import GemmaForCausalLM, PaliGemmaForConditionalGeneration, SiglipVisionConfig

    def gemma_config(variant: str) -> Any:
        sizes = {"gemma_2b": VLM_SIZES, "gemma_300m": EXPERT_SIZES}[variant]
        return modeling.GemmaConfig(**sizes)

    def paligemma(config: Any) -> Any:
        config.text_config.vocab_size = vocab_size
        config._vocab_size = vocab_size
        config.image_token_index = vocab_size
        vision = config.vision_config.to_dict()
        vision.update(VISION_SIZES, image_size=image_side, projection_dim=config.text_config.hidden_size)
        config.vision_config = SiglipVisionConfig(**vision)
        return PaliGemmaForConditionalGeneration(config=config)

    def gemma(config: Any) -> Any:
        config.vocab_size = vocab_size
        return GemmaForCausalLM(config=config)

    modeling.get_gemma_config = gemma_config
    modeling.PaliGemmaForConditionalGeneration = paligemma
    modeling.GemmaForCausalLM = gemma


def randomise_zero_initialised(policy: Any, generator: Any) -> None:
    """Draw the norm scales and biases (zeros at initialisation) so that every parameter matters."""
    import torch

    with torch.no_grad():
        for name, parameter in policy.named_parameters():
            if "norm" in name or name.endswith(".bias"):
                parameter.add_(0.1 * torch.randn(parameter.shape, generator=generator))


def dataset_stats(rng: np.random.Generator) -> dict[str, dict[str, np.ndarray]]:
    """Statistics in the shape a LeRobot dataset's ``meta/stats`` gives them."""

    def vector(dim: int, scale: float) -> dict[str, np.ndarray]:
        mean = rng.normal(0.0, scale, dim)
        std = rng.uniform(0.5, 2.0, dim) * scale
        return {
            "mean": mean,
            "std": std,
            "min": mean - 3 * std,
            "max": mean + 3 * std,
            "q01": mean - 2.3 * std,
            "q10": mean - 1.3 * std,
            "q50": mean,
            "q90": mean + 1.3 * std,
            "q99": mean + 2.3 * std,
            "count": np.array([1000]),
        }

    stats = {"observation.state": vector(STATE_DIM, 0.5), "action": vector(ACTION_DIM, 0.3)}
    for camera in CAMERAS:
        stats[f"observation.images.{camera}"] = {
            "mean": rng.uniform(0.3, 0.6, (3, 1, 1)),
            "std": rng.uniform(0.1, 0.3, (3, 1, 1)),
            "min": np.zeros((3, 1, 1)),
            "max": np.ones((3, 1, 1)),
            "count": np.array([1000]),
        }
    return {key: {name: np.asarray(v, dtype=np.float32) for name, v in s.items()} for key, s in stats.items()}


def features() -> tuple[dict[str, Any], dict[str, Any]]:
    from lerobot.configs.types import FeatureType, PolicyFeature

    inputs = {
        f"observation.images.{camera}": PolicyFeature(type=FeatureType.VISUAL, shape=(3, *RAW_IMAGE_HW))
        for camera in CAMERAS
    }
    inputs["observation.state"] = PolicyFeature(type=FeatureType.STATE, shape=(STATE_DIM,))
    outputs = {"action": PolicyFeature(type=FeatureType.ACTION, shape=(ACTION_DIM,))}
    return inputs, outputs


def build_and_save(policy_type: str, folder: Path, tokenizer: Any, stats: dict[str, Any]) -> None:
    """LeRobot's policy and processors of ``policy_type``, saved to ``folder`` as LeRobot saves them."""
    import torch
    from lerobot.policies.factory import make_pre_post_processors
    from lerobot.processor import tokenizer_processor

    modeling, Config, Policy = lerobot_modules(policy_type)
    shrink_lerobot(modeling, len(tokenizer))
    inputs, outputs = features()
    config = Config(
        input_features=inputs,
        output_features=outputs,
        chunk_size=CHUNK,
        n_action_steps=CHUNK,
        image_resolution=(IMAGE_SIDE, IMAGE_SIDE),
        empty_cameras=EMPTY_CAMERAS[policy_type],
        device="cpu",
        push_to_hub=False,
    )
    generator = torch.Generator().manual_seed(SEED)
    torch.manual_seed(SEED)
    policy = Policy(config)
    randomise_zero_initialised(policy, generator)

    class LocalTokenizer:
        """Answers LeRobot's processor's request for the hub tokenizer with the local one."""

        @staticmethod
        def from_pretrained(name: str, *args: Any, **kwargs: Any) -> Any:
            if name != HUB_TOKENIZER:
                raise ValueError(f"unexpected tokenizer {name!r}")
            return tokenizer

    tokenizer_processor.AutoTokenizer = LocalTokenizer
    torch_stats = {k: {n: torch.as_tensor(v) for n, v in s.items()} for k, s in stats.items()}
    preprocessor, postprocessor = make_pre_post_processors(config, dataset_stats=torch_stats)
    policy.save_pretrained(folder)
    preprocessor.save_pretrained(folder)
    postprocessor.save_pretrained(folder)


def raw_observation(rng: np.random.Generator) -> dict[str, Any]:
    """A raw batch as an env gives it: uint8 HWC frames, float32 state, instruction strings."""
    frames = {c: rng.integers(0, 256, (BATCH, *RAW_IMAGE_HW, 3), dtype=np.uint8) for c in CAMERAS}
    state = rng.normal(0.0, 0.8, (BATCH, STATE_DIM)).astype(np.float32)
    return {"pixels": frames, "agent_pos": state, "task": list(INSTRUCTIONS[:BATCH])}


def record_reference(policy_type: str, folder: Path, tokenizer: Any, rng: np.random.Generator) -> dict:
    """Load ``folder`` back with LeRobot (as its evaluation does) and run it on a raw batch."""
    import torch
    from lerobot.configs.policies import PreTrainedConfig
    from lerobot.envs.utils import preprocess_observation
    from lerobot.policies.factory import get_policy_class, make_pre_post_processors

    config = PreTrainedConfig.from_pretrained(folder, local_files_only=True)
    policy = get_policy_class(policy_type).from_pretrained(folder, config=config, local_files_only=True)
    policy.eval()
    overrides = {"tokenizer_processor": {"tokenizer": tokenizer}}
    preprocessor, postprocessor = make_pre_post_processors(
        config, pretrained_path=str(folder), preprocessor_overrides=overrides
    )

    raw = raw_observation(rng)
    noise = torch.randn(
        BATCH, CHUNK, config.max_action_dim, generator=torch.Generator().manual_seed(SEED + 1)
    )

    batch = preprocess_observation({"pixels": raw["pixels"], "agent_pos": raw["agent_pos"]})
    batch["task"] = list(raw["task"])
    processed = preprocessor(batch)
    with torch.no_grad():
        model_actions = policy.predict_action_chunk(processed, noise=noise.clone())
    actions = postprocessor(model_actions)

    loss_actions = rng.normal(0.0, 0.3, (BATCH, CHUNK, ACTION_DIM)).astype(np.float32)
    loss_noise = torch.randn(
        BATCH, CHUNK, config.max_action_dim, generator=torch.Generator().manual_seed(SEED + 2)
    )
    loss_time = torch.tensor([0.3, 0.85], dtype=torch.float32)
    policy.model.sample_noise = lambda shape, device: loss_noise.clone()
    policy.model.sample_time = lambda batch_size, device: loss_time.clone()
    train_batch = preprocess_observation({"pixels": raw["pixels"], "agent_pos": raw["agent_pos"]})
    train_batch["task"] = list(raw["task"])
    train_batch["action"] = torch.as_tensor(loss_actions)
    train_processed = preprocessor(train_batch)
    with torch.no_grad():
        loss, loss_dict = policy.forward(train_processed)

    arrays = {
        "instructions": np.array(raw["task"]),
        "state": raw["agent_pos"],
        "noise": noise.numpy(),
        "actions": actions.numpy(),
        "model_actions": model_actions.numpy(),
        "lang_tokens": processed["observation.language.tokens"].numpy(),
        "lang_mask": processed["observation.language.attention_mask"].numpy(),
        "normalized_state": processed["observation.state"].numpy(),
        "loss_actions": loss_actions,
        "loss_noise": loss_noise.numpy(),
        "loss_time": loss_time.numpy(),
        "loss": np.array(float(loss)),
        "loss_per_dim": np.array(loss_dict["loss_per_dim"], dtype=np.float32),
        "normalized_loss_actions": train_processed["action"].numpy(),
    }
    for camera, frames in raw["pixels"].items():
        arrays[f"rgb_{camera}"] = frames
    return arrays


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--openpi", type=Path, required=True, help="an openpi checkout (its src/ tree)")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parents[1] / "fixtures" / "lerobot"
    )
    parser.add_argument("--types", nargs="+", default=["pi0", "pi05"], choices=["pi0", "pi05"])
    args = parser.parse_args()
    if "transformers" in sys.modules:
        raise SystemExit("transformers was imported before openpi's files could be applied")

    with tempfile.TemporaryDirectory(prefix="openpi_transformers_") as workdir:
        sys.path.insert(0, str(patched_transformers(args.openpi.resolve(), Path(workdir))))
        import torch

        torch.set_num_threads(1)
        for policy_type in args.types:
            out = args.out / policy_type
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir(parents=True)
            shapes = full_size_shapes(policy_type)
            lines = [f"{json.dumps(name)}: {json.dumps(shape)}" for name, shape in sorted(shapes.items())]
            (out / "full_size_shapes.json").write_text("{\n" + ",\n".join(lines) + "\n}\n")
            tokenizer = build_tokenizer(out / "tokenizer")
            rng = np.random.default_rng(SEED)
            build_and_save(policy_type, out / "policy", tokenizer, dataset_stats(rng))
            arrays = record_reference(policy_type, out / "policy", tokenizer, rng)
            np.savez_compressed(out / "reference.npz", **arrays)
            summary = {k: list(v.shape) for k, v in arrays.items()}
            print(policy_type, json.dumps(summary), "loss", float(arrays["loss"]))


if __name__ == "__main__":
    main()
