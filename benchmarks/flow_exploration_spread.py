"""How far a flow policy's exploration moves the actions it executes, per exploration setting.

Flow-SDE keeps the denoising marginals of the model, so the executed actions it samples spread as
wide as the model's own action distribution (which the noise-free ODE from random initial noise, the
"greedy" evaluation, samples too), whatever its per-step noise; Flow-Noise adds its noise on top of
the Euler steps. This measures the difference on a real checkpoint: observations from
greedy episodes on ``pick_place``, each repeated ``--samples`` times, and for every setting

* ``spread``: the standard deviation of the executed actions (the first ``execute_steps`` steps of
  the chunk, env units) across the samples of one observation, averaged over observations and
  action dimensions;
* ``mean shift``: the root mean square distance between the mean of those actions and the mean of
  as many noise-free (ODE, "greedy") chains from fresh initial noise, which sample the model's own
  action distribution;
* ``log-prob``: the median log-probability of a sampled chain (how sharply the ratio responds).

    python -m benchmarks.flow_exploration_spread --init runs/bench/sft_pp12k/pi0_200
"""

from __future__ import annotations

import argparse
import statistics

import torch

from benchmarks.common import machine_line
from vla_rl.envs import make_env
from vla_rl.training.checkpoint import resolve_policy_dir
from vla_rl.training.chunk_rl.config_load import compose_rl_config
from vla_rl.training.chunk_rl.trainer import load_rl_policy

DEFAULT_INIT = "runs/bench/sft_pp12k/pi0_200"


def fixed_noise(std: float, profile: str = "flat") -> dict[str, object]:
    """Flow-Noise with a fresh noise head, which sits at its bounds' geometric mean: bounds around
    ``std`` fix it there; ``profile`` is its ``noise_std_profile``."""
    bounds = [std * 0.997, std * 1.003]
    return {
        "exploration": "flow_noise",
        "sde_one_step": False,
        "noise_std_bounds": bounds,
        "noise_std_profile": profile,
    }


SETTINGS: dict[str, dict[str, object]] = {
    "flow_sde a=0.3, all steps": {"exploration": "flow_sde", "noise_level": 0.3, "sde_one_step": False},
    "flow_sde a=0.5, all steps": {"exploration": "flow_sde", "noise_level": 0.5, "sde_one_step": False},
    "flow_sde a=0.7, all steps": {"exploration": "flow_sde", "noise_level": 0.7, "sde_one_step": False},
    "flow_sde a=0.5, one step": {"exploration": "flow_sde", "noise_level": 0.5, "sde_one_step": True},
    "flow_sde a=1.0, one step": {"exploration": "flow_sde", "noise_level": 1.0, "sde_one_step": True},
    "flow_noise std 0.113": fixed_noise(0.113),
    "flow_noise std 0.16": fixed_noise(0.16),
    "flow_noise std 0.113, sde profile": fixed_noise(0.113, "sde"),
    "flow_noise std 0.16, sde profile": fixed_noise(0.16, "sde"),
    "flow_noise std 0.2, sde profile": fixed_noise(0.2, "sde"),
}
"""Setting name -> ``policy.exploration`` keys (``noisy_chunk_steps`` is the recipe's)."""


def repeat_rows(obs: dict, times: int) -> dict:
    """Every observation row repeated ``times`` times in place (row i -> rows i*times ... )."""
    out = {}
    for key, value in obs.items():
        if isinstance(value, torch.Tensor):
            out[key] = value.repeat_interleave(times, dim=0)
        elif isinstance(value, list):
            out[key] = [item for item in value for _ in range(times)]
        else:
            out[key] = value
    return out


def greedy_observations(policy, env, execute_steps: int, decisions: list[int], seed: int) -> list[dict]:
    """The observations of ``env``'s worlds at the given decision indices of greedy episodes."""
    obs, _ = env.reset(seed=seed)
    kept = []
    for decision in range(max(decisions) + 1):
        if decision in decisions:
            kept.append({k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in obs.items()})
        with torch.no_grad():
            chunk = policy.sample(obs, deterministic=True).actions
        for step in range(execute_steps):
            obs = env.step(chunk[:, step]).obs
    return kept


def executed_samples(policy, obs: dict, samples: int, execute_steps: int, deterministic: bool):
    """[N, samples, execute_steps, action_dim] executed actions and [N * samples] log-probabilities."""
    with torch.no_grad():
        step = policy.sample(repeat_rows(obs, samples), deterministic=deterministic)
    actions = step.actions[:, :execute_steps]
    return actions.reshape(-1, samples, *actions.shape[1:]), step.log_prob


def spread_of(
    policy, observations: list[dict], ode: list[torch.Tensor], samples: int, execute_steps: int
) -> dict[str, float]:
    spreads, shifts, log_probs = [], [], []
    for obs, ode_actions in zip(observations, ode, strict=True):
        actions, log_prob = executed_samples(policy, obs, samples, execute_steps, deterministic=False)
        spreads.append(actions.std(dim=1).mean().item())
        shifts.append((actions.mean(dim=1) - ode_actions.mean(dim=1)).square().mean().sqrt().item())
        log_probs.extend(log_prob.tolist())
    return {
        "spread": statistics.fmean(spreads),
        "shift": statistics.fmean(shifts),
        "log_prob": statistics.median(log_probs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--init", default=DEFAULT_INIT, help="the pi0 SFT run or policy folder")
    parser.add_argument("--worlds", type=int, default=16)
    parser.add_argument("--samples", type=int, default=32, help="chains sampled per observation")
    parser.add_argument("--decisions", type=int, nargs="+", default=[0, 10, 20, 30, 40])
    parser.add_argument("--seed", type=int, default=123)
    args = parser.parse_args()
    cfg = compose_rl_config(
        ["recipe=pi0_flow_sde_ppo", f"policy.init_from={args.init}", f"env.num_envs={args.worlds}"]
    )
    torch.set_num_threads(cfg.torch_num_threads)
    torch.manual_seed(args.seed)
    execute = cfg.algorithm.execute_steps
    policy = load_rl_policy(cfg, resolve_policy_dir(args.init))
    env = make_env(cfg.env)
    observations = greedy_observations(policy, env, execute, args.decisions, args.seed)
    env.close()
    print(machine_line(), f"torch threads {cfg.torch_num_threads}")
    print(
        f"{args.init}: {len(observations)} x {args.worlds} observations from greedy episodes (decisions "
        f"{args.decisions}), {args.samples} chains each, {policy.num_steps} denoising steps, the first "
        f"{execute} chunk steps sampled and measured (env units)"
    )
    ode = [executed_samples(policy, obs, args.samples, execute, True)[0] for obs in observations]
    ode_spread = statistics.fmean(actions.std(dim=1).mean().item() for actions in ode)
    print(f"{'setting':<34} {'spread':>8} {'mean shift':>11} {'log-prob':>9}")
    print(f"{'ODE (greedy)':<34} {ode_spread:>8.3f} {0.0:>11.3f} {'':>9}")
    for name, settings in SETTINGS.items():
        policy.noise_head = None  # a fresh head (at its bounds' geometric mean) for each setting
        policy.set_exploration(**settings, noisy_chunk_steps=execute)
        result = spread_of(policy, observations, ode, args.samples, execute)
        print(f"{name:<34} {result['spread']:>8.3f} {result['shift']:>11.3f} {result['log_prob']:>9.1f}")


if __name__ == "__main__":
    main()
