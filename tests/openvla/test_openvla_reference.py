"""vla-rl against OpenVLA's OWN code: a tiny folder built by ``make_openvla_folder.py`` with OpenVLA's
classes (in OpenVLA's environment), loaded here through ``policy.name=openvla``; its greedy action
must equal OpenVLA's ``predict_action`` on the same image and instruction.

Needs, and skips with the reason otherwise:

* ``OPENVLA_DIR``: a checkout of https://github.com/openvla/openvla (its ``prismatic/extern/hf``);
* ``OPENVLA_PYTHON``: a Python where that code runs as published (``transformers`` 4.40.1,
  ``tokenizers`` 0.19.1, ``timm`` 0.9.x, torch, torchvision): it builds the folder and the reference;
* optionally ``OPENVLA_LLAMA_TOKENIZER``: Llama 2's SentencePiece ``tokenizer.model`` (OpenVLA's
  environment then needs ``sentencepiece``): the folder gets Llama 2's own tokenizer, saved by
  ``transformers`` 4.40 and read here by 5.x, instead of a word-level one with its id layout;
* ``timm`` 0.9.x importable by *this* process (the folder's modelling code imports it when vla-rl
  loads it), e.g. via ``PYTHONPATH``; the project's environments do not install it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from vla_rl.policies.env_maps import EnvMaps
from vla_rl.policies.vla.openvla import EMPTY_TOKEN_ID, OpenVLAPolicy

SCRIPT = Path(__file__).with_name("make_openvla_folder.py")
PREDICT = Path(__file__).with_name("openvla_predict.py")
KEYS = ("bridge_orig", "libero_spatial")


def _requirements() -> tuple[Path, str]:
    openvla, python = os.environ.get("OPENVLA_DIR"), os.environ.get("OPENVLA_PYTHON")
    if not openvla or not python:
        pytest.skip("set OPENVLA_DIR (an openvla checkout) and OPENVLA_PYTHON (a Python that runs its code)")
    try:
        import timm
    except ImportError:
        pytest.skip("the folder's modelling code needs timm 0.9.x importable here (e.g. through PYTHONPATH)")
    if not timm.__version__.startswith("0.9."):
        pytest.skip(f"OpenVLA's modelling code refuses timm {timm.__version__} (it wants 0.9.x)")
    return Path(openvla), python


def run_reference(script: Path, *arguments: str, home: Path) -> None:
    """``script`` in OpenVLA's environment (``OPENVLA_PYTHON``), offline."""
    _, python = _requirements()
    env = {**os.environ, "HF_HOME": str(home), "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
    command = [python, str(script), *arguments]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        raise AssertionError(f"{script.name} failed:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}")


@pytest.fixture(scope="module")
def reference_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    openvla, _ = _requirements()
    root = tmp_path_factory.mktemp("openvla_reference")
    out = root / "tiny_openvla"
    llama = os.environ.get("OPENVLA_LLAMA_TOKENIZER")
    tokenizer = ["--llama-tokenizer", llama] if llama else []
    run_reference(SCRIPT, "--openvla", str(openvla), "--out", str(out), *tokenizer, home=root / "hf")
    return out


@pytest.mark.filterwarnings("ignore:`past_key_values` is deprecated:FutureWarning")  # OpenVLA's 4.40-era call
@pytest.mark.parametrize("key", KEYS)
def test_greedy_action_equals_predict_action(reference_folder: Path, key: str) -> None:
    reference = np.load(reference_folder / "reference.npz")
    policy = OpenVLAPolicy.from_pretrained(reference_folder, unnorm_key=key, trust_remote_code=True)
    policy.set_env_maps(EnvMaps(camera_map={"primary": "front"}))
    obs = {"instruction": [str(reference["instruction"])], "rgb_front": reference["image"][None]}

    ids = policy.prompt_ids(obs["instruction"])[0]
    assert ids == [
        *reference["input_ids"][0].tolist(),
        EMPTY_TOKEN_ID,
    ]  # the processor's ids + the empty token
    pixels = policy.pixel_values(obs)
    pixel_error = float(np.abs(pixels.numpy() - reference["pixel_values"]).max())
    logits, _ = policy.forward_tokens(torch.tensor([ids]), pixels)
    logit_error = float(np.abs(logits[0, -1].detach().numpy() - reference["last_logits"]).max())
    step = policy.sample(obs, deterministic=True)
    actions = step.actions[0, 0].double().numpy()
    action_error = float(np.abs(actions - reference[f"actions_{key}"]).max())
    tokens = step.sample_info["action_tokens"][0, 0].tolist()
    print(
        f"{key} ({type(policy.tokenizer).__name__}, {len(ids)} prompt ids): pixels {pixel_error:.3g}, "
        f"logits {logit_error:.3g}, actions {action_error:.3g}, tokens {tokens}",
        file=sys.stderr,
    )
    assert pixel_error <= 1e-6
    assert logit_error <= 1e-4
    assert action_error <= 1e-6  # the same tokens; float32 here, float64 in the reference


@pytest.mark.filterwarnings("ignore:`past_key_values` is deprecated:FutureWarning")
def test_a_folder_saved_here_runs_in_openvla(reference_folder: Path, tmp_path: Path) -> None:
    """Changed weights saved by vla-rl: OpenVLA's ``predict_action`` on the saved folder gives vla-rl's
    greedy action (and not the original one)."""
    reference = np.load(reference_folder / "reference.npz")
    policy = OpenVLAPolicy.from_pretrained(reference_folder, unnorm_key="bridge_orig", trust_remote_code=True)
    policy.set_env_maps(EnvMaps(camera_map={"primary": "front"}))
    torch.manual_seed(0)
    with torch.no_grad():
        head = policy.model.language_model.get_output_embeddings().weight
        head[31744:32000] += torch.randn_like(head[31744:32000])
    obs = {"instruction": [str(reference["instruction"])], "rgb_front": reference["image"][None]}
    ours = policy.sample(obs, deterministic=True).actions[0, 0].double().numpy()
    policy.save_pretrained(tmp_path / "saved")
    np.savez(tmp_path / "inputs.npz", image=reference["image"], instruction=reference["instruction"])
    run_reference(
        PREDICT,
        "--folder", str(tmp_path / "saved"),
        "--inputs", str(tmp_path / "inputs.npz"),
        "--unnorm-key", "bridge_orig",
        "--out", str(tmp_path / "out.npz"),
        home=tmp_path / "hf",
    )  # fmt: skip
    theirs = np.load(tmp_path / "out.npz")["actions"]
    error = float(np.abs(ours - theirs).max())
    print(f"saved here, run there: actions {error:.3g}", file=sys.stderr)
    assert float(np.abs(theirs - reference["actions_bridge_orig"]).max()) > 1e-3  # the change shows
    assert error <= 1e-6
