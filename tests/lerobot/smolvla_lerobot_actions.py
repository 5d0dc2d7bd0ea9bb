"""LeRobot's actions for a SmolVLA folder: run with LeRobot 0.4's python (.venv-lerobot), offline.

Usage: ``smolvla_lerobot_actions.py POLICY_DIR INPUTS_NPZ OUT_NPZ``. Loads the folder with LeRobot's
``SmolVLAPolicy.from_pretrained`` and its saved pre/post-processors, as LeRobot's own tools load a
policy, and writes (key ``actions``) ``predict_action_chunk``'s unnormalised action chunk for the raw
observation batch and noise in INPUTS_NPZ (as ``smolvla_reference.py`` writes them).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
from lerobot.envs.utils import preprocess_observation
from lerobot.policies.smolvla.modeling_smolvla import SmolVLAPolicy
from lerobot.processor import PolicyProcessorPipeline
from lerobot.processor.converters import policy_action_to_transition, transition_to_policy_action


def main(policy_dir: Path, inputs: Path, out: Path) -> None:
    arrays = dict(np.load(inputs))
    policy = SmolVLAPolicy.from_pretrained(policy_dir)
    policy.eval()
    preprocessor = PolicyProcessorPipeline.from_pretrained(
        policy_dir, config_filename="policy_preprocessor.json"
    )
    postprocessor = PolicyProcessorPipeline.from_pretrained(
        policy_dir,
        config_filename="policy_postprocessor.json",
        to_transition=policy_action_to_transition,
        to_output=transition_to_policy_action,
    )
    images = {key.removeprefix("image_"): value for key, value in arrays.items() if key.startswith("image_")}
    observation = preprocess_observation({"pixels": images, "agent_pos": arrays["state"]})
    batch = preprocessor({**observation, "task": [str(text) for text in arrays["instructions"]]})
    with torch.no_grad():
        chunk = policy.predict_action_chunk(batch, noise=torch.from_numpy(arrays["noise"]))
    np.savez(out, actions=postprocessor(chunk).numpy())


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))
