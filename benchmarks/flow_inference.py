"""Flow policies: actions/s of pi0 (tiny config) and flow_mlp, and the cost of one denoising step
with and without pi0's prefix cache.

One "action" is one env step's action: a chunk of ``chunk_len`` actions counts ``chunk_len``.
Sampling is the deterministic Euler ODE (the stochastic chain costs the same network passes).

    python -m benchmarks.flow_inference [--batches 1 64] [--repeats 5] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from benchmarks.common import machine_line, median_rate
from vla_rl.policies.registry import build_chunk_policy

CHUNK_LEN = 4
ACTION_DIM = 4
PROPRIO_DIM = 8
IMAGE_PX = 32
INSTRUCTIONS = ("put the red cube on the blue pad", "pick up the cube")


def make_obs(batch: int) -> dict:
    generator = torch.Generator().manual_seed(0)
    return {
        "rgb_front": torch.randint(
            0, 256, (batch, IMAGE_PX, IMAGE_PX, 3), dtype=torch.uint8, generator=generator
        ),
        "proprio": torch.randn(batch, PROPRIO_DIM, generator=generator),
        "instruction": [INSTRUCTIONS[index % 2] for index in range(batch)],
    }


def median_seconds(run_once: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run_once()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def actions_per_s(policy: torch.nn.Module, batch: int, repeats: int) -> float:
    obs = make_obs(batch)

    def run_once() -> int:
        policy.sample(obs, deterministic=True)
        return batch * CHUNK_LEN

    run_once()
    return median_rate(run_once, repeats)[0]


def denoising_step_seconds(policy: torch.nn.Module, batch: int, repeats: int) -> tuple[float, float]:
    """(one velocity call on the cached prefix, one full forward that re-encodes the prefix)."""
    obs = make_obs(batch)
    inputs = policy.prepare_inputs(obs)
    prefix = policy.encode_prefix(obs)
    x_t = torch.randn(batch, policy.chunk_len, policy.max_action_dim)
    t = torch.full((batch,), 0.5)

    def cached() -> object:
        return policy.velocity(prefix, x_t, t)

    def uncached() -> object:
        return policy.model(
            state=inputs.state,
            noise=x_t,
            timestep=t,
            input_ids=inputs.input_ids,
            pixel_values=inputs.pixel_values,
            pixel_attention_mask=inputs.pixel_attention_mask,
            attention_mask=inputs.attention_mask,
        )

    cached(), uncached()
    return median_seconds(cached, repeats), median_seconds(uncached, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    common = {"chunk_len": CHUNK_LEN, "action_dim": ACTION_DIM, "proprio_dim": PROPRIO_DIM}
    pi0 = build_chunk_policy("pi0", **common, num_inference_steps=10).eval()
    flow_mlp = build_chunk_policy("flow_mlp", **common, num_denoising_steps=10).eval()
    print(machine_line(), f"torch threads {args.threads}")
    parameters = {
        name: sum(p.numel() for p in policy.parameters())
        for name, policy in [("pi0", pi0), ("flow_mlp", flow_mlp)]
    }
    print(
        f"pi0 tiny: {parameters['pi0'] / 1e6:.3f}M parameters, "
        f"flow_mlp: {parameters['flow_mlp'] / 1e6:.3f}M; "
        f"chunk {CHUNK_LEN} x {ACTION_DIM}, 10 denoising steps, {IMAGE_PX}x{IMAGE_PX} camera"
    )
    print(f"{'measurement':<44} {'batch':>6} {'value':>14}")
    with torch.no_grad():
        for name, policy in [("pi0", pi0), ("flow_mlp", flow_mlp)]:
            for batch in args.batches:
                rate = actions_per_s(policy, batch, args.repeats)
                print(f"{name + ' sample, actions/s':<44} {batch:>6} {rate:>14.0f}")
        for batch in args.batches:
            cached, uncached = denoising_step_seconds(pi0, batch, args.repeats)
            print(f"{'pi0 one denoising step, cached prefix (ms)':<44} {batch:>6} {cached * 1e3:>14.2f}")
            print(f"{'pi0 one denoising step, no cache (ms)':<44} {batch:>6} {uncached * 1e3:>14.2f}")


if __name__ == "__main__":
    main()
