"""Build tiny openpi pi0 / pi0.5 PyTorch exports with openpi's own code and record its outputs as fixtures.

Runs with a python that has openpi's dependencies (JAX, flax, sentencepiece, ... as openpi pins them,
plus the ``torch`` 2.7.1 and ``transformers`` 4.53.2 of ``.venv-lerobot``; see docs/guide/lerobot_pi0.md,
"openpi PyTorch exports", for the throw-away venv this was run with)::

    python tests/lerobot/make_openpi_fixtures.py --openpi OPENPI_CHECKOUT --out tests/fixtures/openpi

Nothing of openpi is copied into this repository: ``OPENPI_CHECKOUT/src`` and its
``packages/openpi-client/src`` go on ``sys.path`` at run time, and openpi's ``transformers_replace`` files
are applied to a temporary copy of the installed ``transformers`` (``make_pi_fixtures.patched_transformers``).

For each of pi0 and pi0.5 it writes ``OUT/<type>/``:

* ``policy/``: what openpi's ``examples/convert_jax_model_to_pytorch.py`` writes: ``model.safetensors``
  (a ``PI0Pytorch`` saved with ``safetensors.torch.save_model``), ``config.json`` (action_dim,
  action_horizon, paligemma_variant, action_expert_variant, precision) and
  ``assets/<asset_id>/norm_stats.json`` written by openpi's ``normalize.save`` from made-up statistics;
* ``tokenizer/``: the tokenizer a user would give as ``policy.tokenizer_dir``: the Hugging Face (fast)
  conversion of a small sentencepiece model trained here on the test's words. openpi's
  ``PaligemmaTokenizer`` reads the same sentencepiece model: it asks ``openpi.shared.download`` for
  ``gs://big_vision/paligemma_tokenizer.model``, which returns a file already in its cache without
  downloading; the script sets ``OPENPI_DATA_HOME`` to a temporary cache holding the model at that path;
* ``full_size_shapes.json``: the names and shapes of the weights ``model.safetensors`` holds for
  openpi's full-size model of that type (``gemma_2b`` + ``gemma_300m``, SigLIP So400m; built on PyTorch's
  meta device before any size is reduced: no memory, no weights), so the loader's reading of a real
  export's sizes is checked too;
* ``reference.npz``: a raw LIBERO-style batch (uint8 HWC frames of a base and a wrist camera, 8 state
  values, instructions), the initial noise, the actions of openpi's ``Policy.infer`` (the transforms
  ``policy_config.create_trained_policy`` composes for a LIBERO config: ``LiberoInputs``, ``Normalize``,
  the model transforms of ``ModelTransformFactory``: ``ResizeImages(224, 224)``, ``TokenizePrompt``,
  ``PadStatesAndActions``; then ``sample_actions``, ``Unnormalize``, ``LiberoOutputs``), the prompt
  tokens and normalised state those transforms give, and the flow-matching loss of ``PI0Pytorch.forward``
  on an action batch with fixed noise and time (per entry, [batch, horizon, action_dim]); and both again
  with openpi's delta actions (``DeltaActions`` / ``AbsoluteActions`` with the mask of its LIBERO
  configs' ``extra_delta_transform``), as ``delta_*``.

Sizes: openpi's ``PaliGemmaWithExpertModel`` fixes PaliGemma's vocabulary (257152) and SigLIP So400m; the
script gives it smaller configs as LeRobot's fixture script does (a vocabulary of the tokenizer's size, a
2-layer SigLIP of width 32 with 32-pixel patches on openpi's 224 x 224 images, Gemmas of width 32 and 16
named by two extra variants of ``openpi.models.gemma.get_config``). openpi's code paths are otherwise
unchanged. Weights are openpi's initialisation with a fixed seed, with the norm scales and biases (zero
at initialisation) drawn at random so that every parameter matters.

One departure: ``PI0Pytorch.forward`` preprocesses with ``train=True``, which draws random crops,
rotations and colour jitter; the loss here is recorded with that preprocessing called with
``train=False`` (the same resize and masks, no augmentation), so it is reproducible.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_pi_fixtures import patched_transformers, randomise_zero_initialised  # noqa: E402

SEED = 84
BATCH = 2
HORIZON = 10
MODEL_ACTION_DIM = 32
"""openpi's default ``action_dim`` (the padded width of states and actions)."""
STATE_DIM = 8
ACTION_DIM = 7
"""LIBERO's widths (``LiberoOutputs`` keeps the first 7 actions)."""
BASE_HW = (200, 280)
"""Base camera frames (height, width): larger than 224 and not square (PIL shrinks, then pads)."""
WRIST_HW = (96, 128)
"""Wrist camera frames: smaller than 224 (PIL enlarges, then pads)."""
DELTA_MASK = (True,) * 6 + (False,)
"""openpi's ``make_bool_mask(6, -1)``: the first 6 actions relative to the state, the gripper absolute
(its LIBERO configs' ``extra_delta_transform``)."""
ASSET_ID = "tiny/libero_like"
"""Nested like openpi's own asset ids (``physical-intelligence/libero``)."""
INSTRUCTIONS = ["pick up the red_cube ", "put the green block on the blue plate\nand open the gripper"]
"""Raw prompts: openpi strips them and turns ``_`` and newlines into spaces."""
VARIANTS = {
    "tiny_vlm": {"width": 32, "depth": 2, "mlp_dim": 64, "num_heads": 8, "num_kv_heads": 1, "head_dim": 8},
    "tiny_expert": {"width": 16, "depth": 2, "mlp_dim": 32, "num_heads": 8, "num_kv_heads": 1, "head_dim": 8},
}
"""Extra Gemma variants for ``openpi.models.gemma.get_config`` (both share depth, heads and head_dim)."""
VISION_SIZES = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "patch_size": 32}
SPM_VOCAB = 400
CORPUS_WORDS = "Task State Action pick up the red cube put green block on blue plate and open gripper"


def train_sentencepiece(directory: Path) -> Path:
    """A small BPE sentencepiece model with PaliGemma's special ids (pad 0, eos 1, bos 2, unk 3),
    byte fallback, split digits and no dummy prefix; returns the model file."""
    import sentencepiece

    rng = np.random.default_rng(SEED)
    lines = [CORPUS_WORDS, *INSTRUCTIONS]
    for _ in range(300):
        numbers = " ".join(str(v) for v in rng.integers(0, 256, STATE_DIM))
        words = " ".join(rng.choice(CORPUS_WORDS.split(), 5))
        lines.append(f"Task: {words}, State: {numbers};\nAction: ")
    corpus = directory / "corpus.txt"
    corpus.write_text("\n".join(lines) + "\n")
    prefix = directory / "spm"
    sentencepiece.SentencePieceTrainer.train(
        input=str(corpus),
        model_prefix=str(prefix),
        vocab_size=SPM_VOCAB,
        model_type="bpe",
        character_coverage=1.0,
        byte_fallback=True,
        split_digits=True,
        add_dummy_prefix=False,
        remove_extra_whitespaces=False,
        normalization_rule_name="identity",
        pad_id=0,
        eos_id=1,
        bos_id=2,
        unk_id=3,
        minloglevel=2,
    )
    return prefix.with_suffix(".model")


def save_hf_tokenizer(spm_model: Path, directory: Path) -> None:
    """The Hugging Face fast conversion of the sentencepiece model (what PaliGemma's hub tokenizer is)."""
    from transformers import GemmaTokenizerFast

    tokenizer = GemmaTokenizerFast(vocab_file=str(spm_model))
    tokenizer.save_pretrained(directory)
    (directory / "tokenizer.model").unlink(missing_ok=True)  # tokenizer.json is the tokenizer


def saved_names(model: Any) -> dict[str, list[int]]:
    """Name -> shape of the tensors ``safetensors.torch.save_model`` writes for ``model``: of weights
    tied together it keeps the first name in sorted order (read from parameter identity, so that it
    works on the meta device too)."""
    state = model.state_dict(keep_vars=True)
    groups: dict[int, list[str]] = {}
    for name, tensor in state.items():
        groups.setdefault(id(tensor), []).append(name)
    return {sorted(names)[0]: list(state[names[0]].shape) for names in groups.values()}


def full_size_shapes(policy_type: str) -> dict[str, list[int]]:
    """``saved_names`` of openpi's default-size ``PI0Pytorch`` of ``policy_type``, on the meta device."""
    import torch
    from openpi.models import pi0_config
    from openpi.models_pytorch import pi0_pytorch

    config = pi0_config.Pi0Config(pi05=policy_type == "pi05", dtype="float32", pytorch_compile_mode=None)
    with torch.device("meta"):
        model = pi0_pytorch.PI0Pytorch(config)
    return saved_names(model)


def shrink_openpi(vocab_size: int) -> None:
    """Give openpi's ``get_config`` the tiny variants and its ``PaliGemmaWithExpertModel`` small
    PaliGemma / Gemma configs (vocabulary, SigLIP)."""
    import openpi.models.gemma as gemma
    import openpi.models_pytorch.gemma_pytorch as gemma_pytorch
    from transformers import GemmaForCausalLM, PaliGemmaForConditionalGeneration, SiglipVisionConfig

    get_config = gemma.get_config

    def tiny_get_config(variant: str) -> Any:
        if variant in VARIANTS:
            return gemma.Config(**VARIANTS[variant])
        return get_config(variant)

    def paligemma(config: Any) -> Any:
        config.text_config.vocab_size = vocab_size
        config._vocab_size = vocab_size
        config.image_token_index = vocab_size
        vision = config.vision_config.to_dict()
        vision.update(VISION_SIZES, projection_dim=config.text_config.hidden_size)
        config.vision_config = SiglipVisionConfig(**vision)
        return PaliGemmaForConditionalGeneration(config=config)

    def gemma_lm(config: Any) -> Any:
        config.vocab_size = vocab_size
        return GemmaForCausalLM(config=config)

    gemma.get_config = tiny_get_config
    gemma_pytorch.PaliGemmaForConditionalGeneration = paligemma
    gemma_pytorch.GemmaForCausalLM = gemma_lm


def made_up_norm_stats(rng: np.random.Generator) -> dict[str, Any]:
    """openpi ``NormStats`` of LIBERO-like state and actions (mean, std, q01, q99)."""
    from openpi.shared.normalize import NormStats

    def stats(dim: int, scale: float) -> NormStats:
        mean = rng.normal(0.0, scale, dim)
        std = rng.uniform(0.5, 2.0, dim) * scale
        return NormStats(mean=mean, std=std, q01=mean - 2.3 * std, q99=mean + 2.3 * std)

    return {"state": stats(STATE_DIM, 0.5), "actions": stats(ACTION_DIM, 0.3)}


def save_export(model: Any, config: Any, folder: Path, norm_stats: dict[str, Any]) -> None:
    """The three parts of an export, written as openpi's conversion script writes them."""
    import safetensors.torch
    from openpi.shared import normalize

    folder.mkdir(parents=True, exist_ok=True)
    safetensors.torch.save_model(model, str(folder / "model.safetensors"))
    normalize.save(folder / "assets" / ASSET_ID, norm_stats)
    config_dict = {
        "action_dim": config.action_dim,
        "action_horizon": config.action_horizon,
        "paligemma_variant": config.paligemma_variant,
        "action_expert_variant": config.action_expert_variant,
        "precision": "float32",
    }
    (folder / "config.json").write_text(json.dumps(config_dict, indent=2))


def raw_batch(rng: np.random.Generator) -> dict[str, Any]:
    return {
        "base": rng.integers(0, 256, (BATCH, *BASE_HW, 3), dtype=np.uint8),
        "wrist": rng.integers(0, 256, (BATCH, *WRIST_HW, 3), dtype=np.uint8),
        "state": rng.normal(0.0, 0.8, (BATCH, STATE_DIM)).astype(np.float32),
        "instructions": list(INSTRUCTIONS[:BATCH]),
    }


def libero_sample(raw: dict[str, Any], i: int) -> dict[str, Any]:
    """Row ``i`` as a LIBERO client sends it to openpi's policy server."""
    return {
        "observation/image": raw["base"][i],
        "observation/wrist_image": raw["wrist"][i],
        "observation/state": raw["state"][i],
        "prompt": raw["instructions"][i],
    }


def record_reference(policy_type: str, folder: Path, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Load ``folder`` as openpi does and run its LIBERO policy pipeline and its training loss, with
    absolute actions and with openpi's delta actions (``DELTA_MASK``)."""
    import torch
    from openpi.models import pi0_config
    from openpi.shared import normalize

    saved = json.loads((folder / "config.json").read_text())
    config = pi0_config.Pi0Config(
        pi05=policy_type == "pi05",
        action_dim=saved["action_dim"],
        action_horizon=saved["action_horizon"],
        paligemma_variant=saved["paligemma_variant"],
        action_expert_variant=saved["action_expert_variant"],
        dtype="float32",
        pytorch_compile_mode=None,
    )
    model = config.load_pytorch(types.SimpleNamespace(model=config), str(folder / "model.safetensors"))
    model.eval()
    norm_stats = normalize.load(folder / "assets" / ASSET_ID)

    raw = raw_batch(rng)
    generator = torch.Generator().manual_seed(SEED + 1)
    noise = torch.randn(BATCH, config.action_horizon, config.action_dim, generator=generator).numpy()
    loss_actions = rng.normal(0.0, 0.3, (BATCH, config.action_horizon, ACTION_DIM)).astype(np.float32)
    generator = torch.Generator().manual_seed(SEED + 2)
    loss_noise = torch.randn(BATCH, config.action_horizon, config.action_dim, generator=generator)
    loss_time = torch.tensor([0.3, 0.85], dtype=torch.float32)
    loss_inputs = (loss_actions, loss_noise, loss_time)

    absolute = run_openpi(model, config, norm_stats, raw, noise, loss_inputs, delta_mask=None)
    delta = run_openpi(model, config, norm_stats, raw, noise, loss_inputs, delta_mask=DELTA_MASK)
    inputs = absolute["inputs"]
    return {
        "rgb_base": raw["base"],
        "rgb_wrist": raw["wrist"],
        "state": raw["state"],
        "instructions": np.array(raw["instructions"]),
        "noise": noise.astype(np.float32),
        "actions": absolute["actions"],
        "lang_tokens": np.stack([np.asarray(x["tokenized_prompt"]) for x in inputs]).astype(np.int64),
        "lang_mask": np.stack([np.asarray(x["tokenized_prompt_mask"]) for x in inputs]).astype(np.int64),
        "normalized_state": np.stack([np.asarray(x["state"]) for x in inputs]).astype(np.float32),
        "loss_actions": loss_actions,
        "loss_noise": loss_noise.numpy(),
        "loss_time": loss_time.numpy(),
        "loss_per_entry": absolute["per_entry"],
        "loss": np.float32(absolute["per_entry"][..., :ACTION_DIM].mean()),
        "delta_action_mask": np.array(DELTA_MASK),
        "delta_actions": delta["actions"],
        "delta_loss_per_entry": delta["per_entry"],
        "delta_loss": np.float32(delta["per_entry"][..., :ACTION_DIM].mean()),
    }


def run_openpi(
    model: Any,
    config: Any,
    norm_stats: dict[str, Any],
    raw: dict[str, Any],
    noise: np.ndarray,
    loss_inputs: tuple[np.ndarray, Any, Any],
    delta_mask: tuple[bool, ...] | None,
) -> dict[str, Any]:
    """openpi's inference (``Policy.infer`` per row, as its server runs it) and its loss on ``raw``.

    The transforms are those ``policy_config.create_trained_policy`` composes for a LIBERO config
    (``LeRobotLiberoDataConfig``; with ``delta_mask`` its ``extra_delta_transform``: ``DeltaActions``
    after ``LiberoInputs``, ``AbsoluteActions`` before ``LiberoOutputs``) and openpi's
    ``ModelTransformFactory`` for pi0 / pi0.5."""
    import openpi.models_pytorch.preprocessing_pytorch as preprocessing
    import torch
    from openpi import transforms
    from openpi.models import model as model_lib
    from openpi.models import tokenizer as tokenizer_lib
    from openpi.policies import libero_policy
    from openpi.policies import policy as policy_lib

    use_quantiles = config.model_type != model_lib.ModelType.PI0  # as openpi's DataConfigFactory
    model_inputs = [  # ModelTransformFactory for PI0 / PI05
        transforms.InjectDefaultPrompt(None),
        transforms.ResizeImages(224, 224),
        transforms.TokenizePrompt(
            tokenizer_lib.PaligemmaTokenizer(config.max_token_len),
            discrete_state_input=config.discrete_state_input,
        ),
        transforms.PadStatesAndActions(config.action_dim),
    ]
    deltas = [transforms.DeltaActions(delta_mask)] if delta_mask else []
    absolutes = [transforms.AbsoluteActions(delta_mask)] if delta_mask else []
    input_transforms = [
        transforms.InjectDefaultPrompt(None),
        libero_policy.LiberoInputs(model_type=config.model_type),
        *deltas,
        transforms.Normalize(norm_stats, use_quantiles=use_quantiles),
        *model_inputs,
    ]
    output_transforms = [
        transforms.Unnormalize(norm_stats, use_quantiles=use_quantiles),
        *absolutes,
        libero_policy.LiberoOutputs(),
    ]
    policy = policy_lib.Policy(
        model,
        transforms=input_transforms,
        output_transforms=output_transforms,
        is_pytorch=True,
        pytorch_device="cpu",
    )
    actions = np.stack(
        [policy.infer(libero_sample(raw, i), noise=noise[i].copy())["actions"] for i in range(BATCH)]
    )
    compose = transforms.compose(input_transforms)
    inputs = [compose(copy.deepcopy(libero_sample(raw, i))) for i in range(BATCH)]

    loss_actions, loss_noise, loss_time = loss_inputs
    train_items = [
        compose({**copy.deepcopy(libero_sample(raw, i)), "actions": loss_actions[i].copy()})
        for i in range(BATCH)
    ]
    batch = {
        key: (
            {
                k: torch.from_numpy(np.stack([np.asarray(item[key][k]) for item in train_items]))
                for k in train_items[0][key]
            }
            if isinstance(train_items[0][key], dict)
            else torch.from_numpy(np.stack([np.asarray(item[key]) for item in train_items]))
        )
        for key in train_items[0]
    }
    train_actions = batch.pop("actions").to(torch.float32)
    observation = model_lib.Observation.from_dict(batch)
    augmenting = preprocessing.preprocess_observation_pytorch

    def without_augmentation(observation: Any, *, train: bool = False, **kwargs: Any) -> Any:
        return augmenting(observation, train=False, **kwargs)

    preprocessing.preprocess_observation_pytorch = without_augmentation
    try:
        with torch.no_grad():
            per_entry = model(observation, train_actions, noise=loss_noise.clone(), time=loss_time.clone())
    finally:
        preprocessing.preprocess_observation_pytorch = augmenting
    return {
        "actions": actions.astype(np.float32),
        "inputs": inputs,
        "per_entry": per_entry.numpy().astype(np.float32),
    }


def build(policy_type: str, out: Path, spm_model: Path, full_size: dict[str, list[int]]) -> None:
    import torch
    from openpi.models import pi0_config
    from openpi.models_pytorch import pi0_pytorch
    from safetensors import safe_open

    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    lines = [f"  {json.dumps(name)}: {json.dumps(shape)}" for name, shape in sorted(full_size.items())]
    (out / "full_size_shapes.json").write_text("{\n" + ",\n".join(lines) + "\n}\n")
    save_hf_tokenizer(spm_model, out / "tokenizer")
    import sentencepiece

    vocab_size = sentencepiece.SentencePieceProcessor(model_file=str(spm_model)).get_piece_size()
    shrink_openpi(vocab_size)
    config = pi0_config.Pi0Config(
        pi05=policy_type == "pi05",
        action_dim=MODEL_ACTION_DIM,
        action_horizon=HORIZON,
        paligemma_variant="tiny_vlm",
        action_expert_variant="tiny_expert",
        dtype="float32",
        pytorch_compile_mode=None,
    )
    torch.manual_seed(SEED)
    model = pi0_pytorch.PI0Pytorch(config)
    randomise_zero_initialised(model, torch.Generator().manual_seed(SEED))
    rng = np.random.default_rng(SEED)
    save_export(model, config, out / "policy", made_up_norm_stats(rng))
    with safe_open(str(out / "policy" / "model.safetensors"), framework="pt") as handle:
        written = {name: list(handle.get_slice(name).get_shape()) for name in handle.keys()}  # noqa: SIM118
    if written != saved_names(model):  # the rule full_size_shapes relies on, checked on a real save
        raise SystemExit("saved_names does not predict what save_model wrote")
    arrays = record_reference(policy_type, out / "policy", rng)
    np.savez_compressed(out / "reference.npz", **arrays)
    summary = {k: list(v.shape) for k, v in arrays.items()}
    print(policy_type, json.dumps(summary), "loss", float(arrays["loss"]))


def prepare_openpi(openpi: Path, workdir: Path) -> Path:
    """Make openpi's code importable (its ``src/`` and client on ``sys.path``, its transformers files on
    a copy of ``transformers``) and its ``PaligemmaTokenizer`` find the script's SentencePiece model in
    a cache under ``workdir``; returns that model."""
    sys.path.insert(0, str(patched_transformers(openpi, workdir)))
    sys.path.insert(1, str(openpi / "src"))
    sys.path.insert(2, str(openpi / "packages" / "openpi-client" / "src"))
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    cache = workdir / "openpi_cache"
    os.environ["OPENPI_DATA_HOME"] = str(cache)
    spm_model = train_sentencepiece(workdir)
    (cache / "big_vision").mkdir(parents=True)
    shutil.copy(spm_model, cache / "big_vision" / "paligemma_tokenizer.model")
    return spm_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--openpi", type=Path, required=True, help="an openpi checkout (its src/ is used)")
    parser.add_argument("--out", type=Path, required=True, help="fixture directory (tests/fixtures/openpi)")
    parser.add_argument("--types", nargs="+", default=["pi0", "pi05"], choices=["pi0", "pi05"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        spm_model = prepare_openpi(args.openpi.resolve(), Path(workdir))
        full_size = {
            policy_type: full_size_shapes(policy_type) for policy_type in args.types
        }  # before shrinking
        for policy_type in args.types:
            build(policy_type, args.out.resolve() / policy_type, spm_model, full_size[policy_type])


if __name__ == "__main__":
    main()
