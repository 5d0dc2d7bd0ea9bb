"""Token VLA inference speed: actions/s of the autoregressive and parallel families, and the
autoregressive decoder with and without its key/value cache.

A chunk of ``chunk_len x action_dim`` tokens gives ``chunk_len`` actions, so
``actions/s = batch * chunk_len / seconds per sample() call`` (images, prompt encoding and
decoding included). The model is a randomly initialised PaliGemma (speed does not depend on
the weights); the defaults put 64 image tokens in the prompt so that recomputing the sequence
for every token (no cache) has a real cost to compare against.

    python -m benchmarks.vla_inference [--hidden 128] [--layers 2] [--image-px 64] [--patch 8]
"""

from __future__ import annotations

import argparse

import torch

from benchmarks.common import machine_line, median_rate
from vla_rl.policies.registry import build_chunk_policy

INSTRUCTIONS = ("put the red cube on the blue pad", "pick up the cube", "move the gripper to the target")


def make_obs(batch: int, image_px: int) -> dict:
    generator = torch.Generator().manual_seed(0)
    return {
        "rgb_front": torch.randint(
            0, 256, (batch, image_px, image_px, 3), dtype=torch.uint8, generator=generator
        ),
        "instruction": [INSTRUCTIONS[index % len(INSTRUCTIONS)] for index in range(batch)],
    }


def actions_per_s(policy, obs: dict, repeats: int) -> float:
    batch = len(obs["instruction"])

    def run_once() -> int:
        policy.sample(obs, temperature=1.0)
        return batch * policy.chunk_len

    run_once()  # warm-up
    rate, _ = median_rate(run_once, repeats)
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hidden", type=int, default=128, help="Gemma hidden size")
    parser.add_argument("--layers", type=int, default=2, help="Gemma layers")
    parser.add_argument("--image-px", type=int, default=64, help="image side (px)")
    parser.add_argument("--patch", type=int, default=8, help="SigLIP patch side (px)")
    parser.add_argument("--chunk-len", type=int, default=4)
    parser.add_argument("--action-dim", type=int, default=4)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    backbone = {
        "hidden_size": args.hidden,
        "num_layers": args.layers,
        "num_heads": max(1, args.hidden // 32),
        "head_dim": 32,
        "intermediate_size": 4 * args.hidden,
        "image_size": args.image_px,
        "patch_size": args.patch,
    }
    common = {"chunk_len": args.chunk_len, "action_dim": args.action_dim, "backbone": backbone}
    variants = {
        "token_vla (KV cache)": build_chunk_policy("token_vla", use_kv_cache=True, **common),
        "token_vla (no cache)": build_chunk_policy("token_vla", use_kv_cache=False, **common),
        "chunk_vla (1 pass)": build_chunk_policy("chunk_vla", **common),
    }
    tokens = args.chunk_len * args.action_dim
    image_tokens = (args.image_px // args.patch) ** 2
    print(machine_line(), f"threads {args.threads}")
    print(
        f"PaliGemma hidden {args.hidden}, {args.layers} layers, {image_tokens} image tokens; "
        f"chunk {args.chunk_len} x {args.action_dim} = {tokens} action tokens"
    )
    print(f"{'policy':<24}" + "".join(f"{f'batch {b} actions/s':>22}" for b in args.batches))
    rates: dict[str, dict[int, float]] = {}
    with torch.inference_mode():
        for name, policy in variants.items():
            policy.eval()
            rates[name] = {
                b: actions_per_s(policy, make_obs(b, args.image_px), args.repeats) for b in args.batches
            }
            print(f"{name:<24}" + "".join(f"{rates[name][b]:>22.1f}" for b in args.batches))
    for batch in args.batches:
        speedup = rates["token_vla (KV cache)"][batch] / rates["token_vla (no cache)"][batch]
        print(f"KV cache speed-up at batch {batch}: {speedup:.2f}x")


if __name__ == "__main__":
    main()
