"""vla-rl against OpenVLA's OWN code: a tiny folder built by ``make_openvla_folder.py`` with OpenVLA's
classes (in OpenVLA's environment), loaded here through ``policy.name=openvla``; its greedy action
must equal OpenVLA's ``predict_action`` on the same image and instruction.

Needs, and skips with the reason otherwise:

* ``OPENVLA_DIR``: a checkout of https://github.com/openvla/openvla (its ``prismatic/extern/hf``);
* ``OPENVLA_PYTHON``: a Python where that code runs as published (``transformers`` 4.40.1,
  ``tokenizers`` 0.19.1, ``timm`` 0.9.x, torch, torchvision): it builds the folder and the reference;
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


@pytest.fixture(scope="module")
def reference_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    openvla, python = _requirements()
    root = tmp_path_factory.mktemp("openvla_reference")
    env = {**os.environ, "HF_HOME": str(root / "hf"), "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
    out = root / "tiny_openvla"
    result = subprocess.run(
        [python, str(SCRIPT), "--openvla", str(openvla), "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if result.returncode != 0:
        raise AssertionError(
            f"make_openvla_folder.py failed:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
        )
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
    actions = policy.sample(obs, deterministic=True).actions[0, 0].double().numpy()
    action_error = float(np.abs(actions - reference[f"actions_{key}"]).max())
    print(
        f"{key}: pixels {pixel_error:.3g}, logits {logit_error:.3g}, actions {action_error:.3g}",
        file=sys.stderr,
    )
    assert pixel_error <= 1e-6
    assert logit_error <= 1e-4
    assert action_error <= 1e-6  # the same tokens; float32 here, float64 in the reference
