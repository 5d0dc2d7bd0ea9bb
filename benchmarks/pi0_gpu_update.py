"""Full-size pi0 (random weights) in bfloat16 on one GPU: peak memory and seconds per Flow-SDE PPO
update at batch 32 and 64, with LoRA and with full fine-tuning, with the model held in bfloat16 or
with float32 weights under bfloat16 autocast.

The model is transformers' ``PI0Config()`` (PaliGemma 3B with the Gemma 300M action expert, SigLIP
at 224 px, chunks of 50, 10 denoising steps), built on the device with random weights, wrapped by
``Pi0Policy`` and either cast to bfloat16 as ``policy.dtype=bfloat16`` does (precision
``bf16_weights``: the heads, chain log-probabilities and losses in float32) or kept in float32 and run
under autocast as ``policy.autocast=bfloat16`` does (precision ``autocast``: float32 weights, gradients
and Adam state, twice and more the memory). Each update is ``pi0_flow_sde_ppo``'s algorithm with one
epoch of one minibatch: recompute the stored chains' log-probabilities of B decisions, one actor and
critic gradient step. LoRA is ``policy.lora={rank: 16, alpha: 16}`` on pi0's default targets; full
fine-tuning trains every weight (AdamW states in bfloat16 beside the bfloat16 weights).

The batch comes from the real rollout collector driving a synthetic env (random camera images,
state and reward): an update's memory and time depend on the policy and the batch, not on the
physics, and the GPU machine then needs no renderer.

    python -m benchmarks.pi0_gpu_update                      # on a GPU: the four bf16-weight settings
    python -m benchmarks.pi0_gpu_update --precisions autocast --modes lora --batches 32
    python -m benchmarks.pi0_gpu_update --tiny --device cpu --updates 1   # the same code, test size
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
from transformers import PI0Config, PI0ForConditionalGeneration

from benchmarks.common import RESULTS_DIR, machine_line
from vla_rl.algorithms.registry import build_chunk_algorithm
from vla_rl.envs.base import BatchedEnv, StepResult
from vla_rl.policies.flow.pi0 import Pi0Policy
from vla_rl.policies.flow.pi0_config import Pi0PolicyConfig
from vla_rl.policies.lora import LoraSettings
from vla_rl.policies.registry import build_chunk_policy
from vla_rl.policies.vla.text_tokenizer import build_text_tokenizer
from vla_rl.rollout.collector import RolloutCollector
from vla_rl.training.chunk_rl.config_load import compose_rl_config

INSTRUCTIONS = ["pick up the red cube and place it on the green pad"]
PROPRIO_DIM = 8
ACTION_DIM = 7
LORA = LoraSettings(rank=16, alpha=16.0)


class RandomCameraEnv(BatchedEnv):
    """Random uint8 images of one camera, a random state and a random reward per step; episodes of
    ``max_episode_steps`` steps. Only the shapes matter to the update being measured."""

    def __init__(self, num_envs: int, image_size: int, device: torch.device) -> None:
        self.num_envs, self.device, self.image_size = num_envs, device, image_size
        self.observation_space = gym.spaces.Dict(
            {
                "rgb_front": gym.spaces.Box(0, 255, (image_size, image_size, 3), np.uint8),
                "proprio": gym.spaces.Box(-np.inf, np.inf, (PROPRIO_DIM,)),
            }
        )
        self.action_space = gym.spaces.Box(-1.0, 1.0, (ACTION_DIM,))
        self.max_episode_steps, self.control_hz = 200, 10.0
        self.generator = torch.Generator().manual_seed(0)
        self.steps = torch.zeros(num_envs, dtype=torch.long)

    def _obs(self) -> dict:
        size = (self.num_envs, self.image_size, self.image_size, 3)
        return {
            "rgb_front": torch.randint(0, 256, size, dtype=torch.uint8, generator=self.generator),
            "proprio": torch.randn(self.num_envs, PROPRIO_DIM, generator=self.generator),
            "instruction": INSTRUCTIONS * self.num_envs,
        }

    def reset(self, seed=None, env_ids=None):
        self.steps.zero_()
        return self._obs(), {}

    def step(self, action: torch.Tensor) -> StepResult:
        self.steps += 1
        ended = self.steps >= self.max_episode_steps
        self.steps[ended] = 0
        false = torch.zeros(self.num_envs, dtype=torch.bool)
        obs = self._obs()
        return StepResult(
            obs=obs,
            reward=torch.rand(self.num_envs, generator=self.generator),
            terminated=false,
            truncated=ended,
            info={"success": false, "final_obs": obs},
        )


def build_policy(tiny: bool, device: torch.device) -> Pi0Policy:
    """Full-size pi0 with random weights on ``device`` (or the tests' tiny one), fp32 before the cast."""
    cfg = {"exploration": "flow_sde", "noise_level": 0.5, "noisy_chunk_steps": 2}
    if tiny:
        torch.manual_seed(0)
        return build_chunk_policy(
            "pi0",
            chunk_len=4,
            action_dim=ACTION_DIM,
            proprio_dim=PROPRIO_DIM,
            instructions=INSTRUCTIONS,
            **cfg,
        ).to(device)
    tokenizer = build_text_tokenizer(INSTRUCTIONS, num_action_tokens=0)
    config = PI0Config()
    config.vlm_config.image_token_id = tokenizer.convert_tokens_to_ids("<image>")
    torch.manual_seed(0)
    with torch.device(device):
        model = PI0ForConditionalGeneration(config)
    return Pi0Policy(model, tokenizer, Pi0PolicyConfig(action_dim=ACTION_DIM, **cfg)).to(device)


PRECISIONS = ("bf16_weights", "autocast")


def measure(mode: str, batch: int, precision: str, args: argparse.Namespace, device: torch.device) -> dict:
    """Peak memory and seconds per update of one setting, in a fresh policy and optimiser."""
    policy = build_policy(args.tiny, device)
    if mode == "lora":
        policy.add_lora(LORA)
    if precision == "autocast":
        policy.autocast_dtype = torch.bfloat16
    else:
        policy.cast_model(torch.bfloat16)
    policy.eval()
    acfg = compose_rl_config(
        [
            "recipe=pi0_flow_sde_ppo",
            "policy.name=pi0",
            "policy.init_from=unused",
            "algorithm.num_decisions=1",
            "algorithm.num_minibatches=1",
            "algorithm.num_epochs=1",
            "algorithm.critic_warmup_iterations=0",
        ]
    ).algorithm
    algorithm = build_chunk_algorithm(acfg, policy)
    env = RandomCameraEnv(batch, args.image_size, device)
    collector = RolloutCollector(env, policy, gamma=acfg.gamma, execute_steps=acfg.execute_steps)
    obs, _ = env.reset()
    trainable = sum(p.numel() for p in policy.parameters() if p.requires_grad)
    seconds = []
    try:
        for update in range(args.updates + 1):  # the first is a warm-up (allocator, kernels)
            obs, _ = collector.collect(obs, 1)
            if device.type == "cuda":
                torch.cuda.synchronize()
                if update == 1:
                    torch.cuda.reset_peak_memory_stats()
            start = time.perf_counter()
            metrics = algorithm.update(collector.buffer, iteration=update + 1)
            if device.type == "cuda":
                torch.cuda.synchronize()
            if update > 0:
                seconds.append(time.perf_counter() - start)
    except torch.OutOfMemoryError as error:
        return {
            "mode": mode,
            "batch": batch,
            "precision": precision,
            "trainable": trainable,
            "error": f"out of memory: {error}"[:200],
        }
    peak_gib = torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else float("nan")
    return {
        "mode": mode,
        "batch": batch,
        "precision": precision,
        "trainable": trainable,
        "seconds_per_update": statistics.median(seconds),
        "gradient_steps": metrics.get("gradient_steps"),
        "peak_gib": peak_gib,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--batches", type=int, nargs="+", default=[32, 64])
    parser.add_argument("--modes", nargs="+", default=["lora", "full"], choices=["lora", "full"])
    parser.add_argument("--precisions", nargs="+", default=["bf16_weights"], choices=PRECISIONS)
    parser.add_argument("--updates", type=int, default=3, help="timed updates after one warm-up")
    parser.add_argument("--image-size", type=int, default=224, help="rendered camera size (px)")
    parser.add_argument(
        "--tiny", action="store_true", help="the tests' tiny pi0 (checks the code, not a figure)"
    )
    parser.add_argument("--results", default=str(RESULTS_DIR / "pi0_gpu_update.json"))
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: run on a GPU machine (make bench-gpu), or --device cpu --tiny")
    rows = []
    for precision in args.precisions:
        for mode in args.modes:
            for batch in args.batches:
                row = measure(mode, batch, precision, args, device)
                rows.append(row)
                print(json.dumps(row), flush=True)
                if device.type == "cuda":
                    torch.cuda.empty_cache()
    print(machine_line())
    print(f"{'precision':<12} {'mode':<6} {'batch':>5} {'trainable':>14} {'s/update':>9} {'peak GiB':>9}")
    for row in rows:
        setting = f"{row['precision']:<12} {row['mode']:<6} {row['batch']:>5} {row['trainable']:>14,}"
        if "error" in row:
            print(f"{setting} {row['error']}")
        else:
            print(f"{setting} {row['seconds_per_update']:>9.2f} {row['peak_gib']:>9.1f}")
    Path(args.results).write_text(json.dumps({"machine": machine_line(), "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
