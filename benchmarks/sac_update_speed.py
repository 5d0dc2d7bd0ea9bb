"""Seconds per ``SAC.update`` call on the CPU, for plain SAC and for RLPD, on random state batches.

Both learners read 30 state features and act in 4 dimensions with [256, 256] actor and critics, on
minibatches of 256 random transitions (the times depend on the sizes, not on the values):

* ``sac``: ``SACConfig()``, 2 critics, one critic step a call (utd 1);
* ``rlpd``: ``SACConfig.rlpd()``, 10 LayerNorm critics, 20 critic steps a call (utd 20).

Every call also makes the actor and temperature step. Each variant makes one untimed call, then
``--repeats`` timed ones; the table gives the median seconds per call (and per critic step) with
torch on ``--threads`` threads, in ``benchmarks/results/sac_update_speed.json`` and ``.md``.

    python -m benchmarks.sac_update_speed [--repeats 5] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import gymnasium as gym
import numpy as np
import torch

from benchmarks.common import RESULTS_DIR, add_results_name, machine_line, median_rate
from vla_rl.algorithms.sac import SAC, build_sac_networks
from vla_rl.algorithms.sac_config import SACConfig
from vla_rl.data.replay_buffer import TransitionBatch
from vla_rl.policies.layers import VectorObsEncoder

FEATURE_DIM = 30
ACTION_DIM = 4
HIDDEN_SIZES = [256, 256]
BATCH_SIZE = 256
OBS_KEY = "state"
VARIANTS = {"sac": SACConfig, "rlpd": SACConfig.rlpd}
"""Each variant's config maker."""


def random_batch(generator: torch.Generator) -> TransitionBatch:
    """``BATCH_SIZE`` random transitions of ``FEATURE_DIM`` state features (a tenth terminated)."""
    size = BATCH_SIZE

    def obs() -> dict[str, torch.Tensor]:
        return {OBS_KEY: torch.randn(size, FEATURE_DIM, generator=generator)}

    no_flags = torch.zeros(size, dtype=torch.bool)
    return TransitionBatch(
        obs=obs(),
        action=torch.rand(size, ACTION_DIM, generator=generator) * 2 - 1,
        reward=torch.randn(size, generator=generator),
        next_obs=obs(),
        terminated=torch.rand(size, generator=generator) < 0.1,
        truncated=no_flags,
        intervention=no_flags,
    )


def build_sac(cfg: SACConfig) -> SAC:
    """SAC on a vector encoder of ``OBS_KEY`` (no normalisation), networks seeded with 0."""
    space = gym.spaces.Dict({OBS_KEY: gym.spaces.Box(-np.inf, np.inf, (FEATURE_DIM,), np.float32)})
    encoder = VectorObsEncoder([OBS_KEY], space, normalize=False)

    def encode(obs: dict[str, torch.Tensor]) -> torch.Tensor:
        return encoder.encode(obs, [OBS_KEY])

    torch.manual_seed(0)
    actor, critic = build_sac_networks(FEATURE_DIM, ACTION_DIM, cfg, HIDDEN_SIZES)
    return SAC(actor, critic, encode, cfg, torch.Generator().manual_seed(0))


def time_updates(cfg: SACConfig, repeats: int) -> list[float]:
    """Seconds of each of ``repeats`` timed ``update`` calls (after one untimed call), all on the same
    ``cfg.utd_ratio`` random minibatches."""
    sac = build_sac(cfg)
    generator = torch.Generator().manual_seed(1)
    batches = [random_batch(generator) for _ in range(cfg.utd_ratio)]
    sac.update(batches)

    def run_once() -> int:
        sac.update(batches)
        return 1

    _, rates = median_rate(run_once, repeats)
    return [1.0 / rate for rate in rates]


def summarise(name: str, cfg: SACConfig, seconds: list[float]) -> dict:
    """One row of the table: the variant's settings and its median seconds per call and per step."""
    median = float(np.median(seconds))
    return {
        "variant": name,
        "num_critics": cfg.num_critics,
        "layer_norm": cfg.layer_norm,
        "utd_ratio": cfg.utd_ratio,
        "s_per_update": round(median, 4),
        "s_per_critic_step": round(median / cfg.utd_ratio, 5),
        "s_all": [round(s, 4) for s in seconds],
    }


def markdown(rows: list[dict], machine: str, threads: int, load: float) -> str:
    lines = [
        "# `SAC.update` on the CPU: seconds per call",
        "",
        f"Machine: {machine}; torch on {threads} threads; 1-minute load average {load:.2f} at the start. "
        "Made by `python -m benchmarks.sac_update_speed`.",
        "",
        f"State features {FEATURE_DIM}, action {ACTION_DIM}, hidden {HIDDEN_SIZES}, batch {BATCH_SIZE}; "
        "median over the timed calls (each call also makes one actor and temperature step).",
        "",
        "| variant | critics | LayerNorm | critic steps a call | s / call | s / critic step "
        "| all calls (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| `{row['variant']}` | {row['num_critics']} | {'yes' if row['layer_norm'] else 'no'} | "
            f"{row['utd_ratio']} | {row['s_per_update']:.3f} | {row['s_per_critic_step']:.4f} | "
            f"{', '.join(f'{s:.3f}' for s in row['s_all'])} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed update calls per variant")
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    add_results_name(parser, "sac_update_speed")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    machine = machine_line()
    load = os.getloadavg()[0]
    print(f"machine: {machine}; load average {load:.2f}", flush=True)
    rows = []
    for name in args.variants:
        cfg = VARIANTS[name]()
        row = summarise(name, cfg, time_updates(cfg, args.repeats))
        rows.append(row)
        per_step = row["s_per_critic_step"]
        print(f"{name:5s} {row['s_per_update']:.3f} s/update  {per_step:.4f} s/critic step", flush=True)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stem = RESULTS_DIR / args.results_name
    stem.with_suffix(".json").write_text(
        json.dumps(
            {"machine": machine, "threads": args.threads, "load_average": load, "results": rows}, indent=1
        )
    )
    stem.with_suffix(".md").write_text(markdown(rows, machine, args.threads, load))
    print(f"results: {stem.with_suffix('.json')} and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
