"""Shared by the export tests: the LeRobot pi0 / pi0.5 fixtures imported, and a few updates on them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from vla_rl.policies.flow.pi0 import Pi0Policy
from vla_rl.policies.flow.pi05 import Pi05Policy
from vla_rl.policies.lora import LoraSettings

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "lerobot"
FAMILIES = {"pi0": Pi0Policy, "pi05": Pi05Policy}
"""LeRobot policy type -> the family that imports it."""
LORA = LoraSettings(rank=4, alpha=8.0)
LEARNING_RATE = 1e-2
"""Large for these tiny models, so that a few updates move the actions well past the tolerance."""


def import_fixture(policy_type: str) -> Pi0Policy:
    """The fixture folder through ``from_pretrained`` (the path of ``policy.init_from``)."""
    fixture = FIXTURES / policy_type
    return FAMILIES[policy_type].from_pretrained(
        str(fixture / "policy"), tokenizer_dir=str(fixture / "tokenizer")
    )


def load_reference(policy_type: str) -> dict[str, np.ndarray]:
    with np.load(FIXTURES / policy_type / "reference.npz") as arrays:
        return dict(arrays)


def raw_observation(reference: dict[str, np.ndarray]) -> dict[str, object]:
    """The reference's raw batch in our observation layout (uint8 HWC frames, state, instructions)."""
    return {
        "rgb_front": reference["rgb_front"],
        "rgb_wrist": reference["rgb_wrist"],
        "proprio": torch.as_tensor(reference["state"]),
        "instruction": [str(text) for text in reference["instructions"]],
    }


def actions(policy: Pi0Policy, reference: dict[str, np.ndarray]) -> torch.Tensor:
    """The denoised chunk for the reference's observation and initial noise, in the robot's units."""
    return policy.eval().predict_action_chunk(raw_observation(reference), torch.as_tensor(reference["noise"]))


def fine_tune(policy: Pi0Policy, reference: dict[str, np.ndarray], lora: bool, updates: int = 2) -> None:
    """``fine_tune_on`` the reference's own observation batch."""
    fine_tune_on(policy, raw_observation(reference), reference, lora, updates)


def fine_tune_on(
    policy: Pi0Policy, obs: dict[str, object], reference: dict[str, np.ndarray], lora: bool, updates: int = 2
) -> None:
    """``updates`` rounds of one SFT step (flow-matching loss on the reference's action batch for
    ``obs``) and one policy-gradient step (Flow-SDE: the sampled chain's log-probability times a fixed
    advantage), with Adam on what trains (with ``lora``: adapters added first, the base weights frozen)."""
    if lora:
        policy.add_lora(LORA)
    policy.set_exploration(exploration="flow_sde")
    parameters = [p for p in policy.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(parameters, lr=LEARNING_RATE)
    batch, chunk = reference["loss_actions"].shape[:2]
    advantage = torch.tensor([1.0, -1.0])
    torch.manual_seed(0)
    for _ in range(updates):
        policy.train()
        loss = policy.sft_loss(
            obs, torch.as_tensor(reference["loss_actions"]), torch.ones(batch, chunk, dtype=torch.bool)
        ).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            step = policy.sample(obs, temperature=1.0)
        evaluation = policy.evaluate(obs, step.sample_info, temperature=1.0)
        optimizer.zero_grad()
        (-(evaluation.log_prob * advantage).mean()).backward()
        optimizer.step()
    policy.eval()


REACH_STATE_DIM = 24
"""``reach``'s proprioception width."""
REACH_ACTION_DIM = 4
"""``reach``'s action width (``ee_delta_pos``)."""
REACH_IMAGE_PX = 32
"""The run's rendered camera side: the fixtures' ``image_resolution``, so no resize is needed."""


def reach_folder(policy_type: str, out: Path) -> Path:
    """The fixture folder with its features and statistics cut to ``reach`` (state 24, action 4,
    32 x 32 cameras): the weights stay, as the state and actions are padded to 32 in the model. The
    state statistics are the fixture's 8 tiled three times, the action's its first 4."""
    import json
    import shutil

    from safetensors.numpy import save_file

    shutil.copytree(FIXTURES / policy_type / "policy", out)

    def cut(features: dict) -> None:
        for key, feature in features.items():
            if key.startswith("observation.images.") and "empty_camera" not in key:
                feature["shape"] = [3, REACH_IMAGE_PX, REACH_IMAGE_PX]
        if "observation.state" in features:
            features["observation.state"]["shape"] = [REACH_STATE_DIM]
        if "action" in features:
            features["action"]["shape"] = [REACH_ACTION_DIM]

    config = json.loads((out / "config.json").read_text())
    cut(config["input_features"])
    cut(config["output_features"])
    (out / "config.json").write_text(json.dumps(config, indent=4))
    for name in ("policy_preprocessor.json", "policy_postprocessor.json"):
        pipeline = json.loads((out / name).read_text())
        for step in pipeline["steps"]:
            if "features" in step.get("config", {}):
                cut(step["config"]["features"])
            if step.get("state_file"):
                from safetensors.numpy import load_file

                stats = load_file(str(out / step["state_file"]))
                for key in list(stats):
                    if key.endswith(".count"):
                        continue
                    if key.startswith("observation.state."):
                        stats[key] = np.tile(stats[key], REACH_STATE_DIM // len(stats[key]))
                    elif key.startswith("action."):
                        stats[key] = np.ascontiguousarray(stats[key][:REACH_ACTION_DIM])
                save_file(stats, str(out / step["state_file"]))
        (out / name).write_text(json.dumps(pipeline, indent=2))
    return out


def tiny_rl_run(run_dir: Path, folder: Path, policy_type: str, lora: bool) -> list[str]:
    """``vla-rl train`` arguments: one Flow-SDE PPO update of the imported policy on MuJoCo ``reach``
    (2 worlds, 2 decisions, no critic or rate warm-up and a rate of 1e-3, so that the actor's update
    shows in the actions), full fine-tuning
    of the action expert or LoRA on the whole model."""
    arguments = [
        "train",
        "recipe=pi0_flow_sde_ppo",
        f"policy.name={policy_type}",
        f"policy.init_from={folder}",
        f"policy.tokenizer_dir={FIXTURES / policy_type / 'tokenizer'}",
        "env=reach",
        "env.cameras=[front,wrist]",
        f"env.image_size={REACH_IMAGE_PX}",
        "env.num_envs=2",
        "env.num_threads=1",
        "env.max_episode_steps=20",
        "algorithm.num_decisions=2",
        "algorithm.num_minibatches=1",
        "algorithm.critic_warmup_iterations=0",
        "algorithm.actor_lr_warmup_steps=0",
        "algorithm.actor_lr=1e-3",  # the recipe's 5e-6 barely moves a tiny model in one update
        "eval.num_episodes=2",
        "checkpoint_interval=1",
        "torch_num_threads=1",
        "logger.progress_bar=false",
        "logger.tensorboard=false",
        "logger.wandb_mode=disabled",
        "iterations=1",
        f"run_dir={run_dir}",
    ]
    if lora:
        arguments += ["policy.lora={rank: 4, alpha: 8.0}", "policy.freeze=[]"]
    return arguments


def reach_like_batch(seed: int = 0, batch: int = 2) -> dict[str, np.ndarray]:
    """A raw batch in ``reach``'s layout (uint8 32 x 32 front and wrist frames, a 24-dim state, an
    instruction) and an initial noise, as ``tests/lerobot/lerobot_pi_actions.py`` reads them."""
    rng = np.random.default_rng(seed)
    return {
        "rgb_front": rng.integers(0, 256, (batch, REACH_IMAGE_PX, REACH_IMAGE_PX, 3), dtype=np.uint8),
        "rgb_wrist": rng.integers(0, 256, (batch, REACH_IMAGE_PX, REACH_IMAGE_PX, 3), dtype=np.uint8),
        "state": rng.normal(0.0, 0.5, (batch, REACH_STATE_DIM)).astype(np.float32),
        "instructions": np.array(["move the gripper to the target", "reach the red target"][:batch]),
        "noise": rng.normal(0.0, 1.0, (batch, 10, 32)).astype(np.float32),
    }
