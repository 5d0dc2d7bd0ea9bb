"""Residual RL and DSRL on a frozen few-demonstration pi0, beside the on-policy Flow-SDE PPO recipe,
at equal control steps on ``pick_place`` (issue 86, item 4).

The start is the committed pi0 start ``benchmarks/starts/pi0_200_start5`` (SFT on 200 scripted
demonstrations; its making and its success: ``benchmarks/starts/README.md``), the start of the
on-policy pi0 rows of ``benchmarks/results/rl_pick_place.md``. From it, each for ``--env-steps``
control steps (one action of one world; a DSRL transition of a chunk of ``EXECUTE_STEPS`` actions
counts that many):

* ``residual``: ``vla-rl train algorithm=sac frozen_policy=residual``, SAC correcting each action of
  the frozen pi0 (``OFF_POLICY_OVERRIDES``, ``MODE_OVERRIDES``);
* ``dsrl``: ``vla-rl train algorithm=sac frozen_policy=dsrl``, SAC choosing the initial noise of the
  frozen pi0's denoising chain; its ``total_env_steps`` counts chunks, so it is given the control-step
  budget divided by ``EXECUTE_STEPS``;
* ``on_policy``: ``vla-rl train recipe=pi0_flow_sde_ppo policy.init_from=<start>``, the committed
  recipe with its budget in updates set to ``--env-steps`` over its control steps per update.

Every learner executes 2 actions of each pi0 chunk before the next plan, as the recipe does. The
start and the three final policies are then scored by one evaluation in this process
(``evaluate_policy``): the same ``--eval-episodes`` episodes of ``--eval-worlds`` worlds (seed
``EVAL_SEED``), noise-free (the pi0 chain as an ODE, SAC's mean action), on the train split. The
runs' own evaluations are off. Results go to ``benchmarks/results/frozen_policy_rl.json`` and a table
to ``frozen_policy_rl_table.md`` beside it (``frozen_policy_rl.md`` is the hand-written declaration
and write-up). ``--quick`` runs the whole pipeline at toy size; ``--cost`` runs each learner briefly
and reports its seconds per control step from the run's logged timings.

    python -m benchmarks.frozen_policy_rl [--env-steps 204800] [--learners residual dsrl on_policy]
    python -m benchmarks.frozen_policy_rl --cost
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import RESULTS_DIR, machine_line, run_logged
from benchmarks.rl_pick_place import logged_scalars
from benchmarks.rlpd_vs_ppo import train

START = Path(__file__).parent / "starts" / "pi0_200_start5"
"""The frozen start: the committed pi0 SFT start (a policy folder, family ``pi0``)."""
START_FAMILY = "pi0"
ON_POLICY_RECIPE = "pi0_flow_sde_ppo"
LEARNERS = ("residual", "dsrl", "on_policy")
EXECUTE_STEPS = 2
"""Actions of each pi0 chunk executed before the next plan, for every learner and the evaluation:
the on-policy recipe's ``algorithm.execute_steps``."""
EVAL_SEED = 1_000_003
"""The evaluation's episodes: those every run of seed 0 is evaluated on (``EVAL_SEED_OFFSET``)."""
OFF_POLICY_WORLDS = 16
ENV_OVERRIDES = ("env=pick_place", "env.cameras=[front]")
"""``pick_place`` with the camera the frozen pi0 reads (SAC reads the vector keys)."""
OFF_POLICY_OVERRIDES = (
    "algorithm=sac",
    *ENV_OVERRIDES,
    f"env.num_envs={OFF_POLICY_WORLDS}",
    f"algorithm.utd_ratio={OFF_POLICY_WORLDS}",  # one critic step per transition
    # pick_place pays at most 1 per step: at SAC's default 1.0 the entropy bonus outweighs the reward,
    # as benchmarks/results/rlpd_vs_ppo.md found on push (the robot setting of SERL / HIL-SERL).
    "algorithm.init_alpha=0.01",
    f"frozen_policy.checkpoint={START}",
    f"frozen_policy.name={START_FAMILY}",
    f"frozen_policy.execute_steps={EXECUTE_STEPS}",
    "eval.num_episodes=0",
    "eval.interval_env_steps=0",
)
"""SAC through the frozen pi0, as ``configs/off_policy.yaml`` and ``configs/algorithm/sac.yaml`` set it
otherwise (untuned): 16 worlds, one critic step per transition, batches of 256, initial temperature
0.01."""
MODE_OVERRIDES = {
    "residual": ("frozen_policy=residual",),
    # One transition is a chunk of EXECUTE_STEPS steps: discount per chunk as the residual learner's
    # 0.99 per step does over as many steps.
    "dsrl": ("frozen_policy=dsrl", f"algorithm.gamma={0.99**EXECUTE_STEPS:.6f}"),
}
CONTROL_STEPS_PER_TRANSITION = {"residual": 1, "dsrl": EXECUTE_STEPS}
LEARNING_STARTS = 1024
"""Control steps of random actions (random corrections, random noise) before SAC's first update."""
QUICK = {
    "env_steps": 32,
    "learning_starts": 16,
    "eval_episodes": 2,
    "eval_worlds": 2,
    "env": ("env.max_episode_steps=16",),
    "off_policy": (
        "env.num_envs=2",
        "algorithm.utd_ratio=2",
        "replay.batch_size=8",
        "policy.hidden_sizes=[16,16]",
    ),
    "on_policy": (
        "env.num_envs=2",
        "algorithm.num_decisions=4",
        "algorithm.num_minibatches=2",
        "algorithm.num_epochs=1",
        "algorithm.critic_warmup_iterations=0",
    ),
}
"""The toy run: 32 control steps per learner, episodes of 16 steps, 2 evaluation episodes."""
CLI = (sys.executable, "-m", "vla_rl.cli")
QUIET = ("logger.wandb_mode=disabled", "logger.progress_bar=false", "max_minutes=600")


# ----- the runs -----------------------------------------------------------------------------------------


def off_policy_command(mode: str, env_steps: int, args: argparse.Namespace) -> list[str]:
    """``vla-rl train`` of the ``mode`` learner for ``env_steps`` control steps (budget, warm-up and
    replay in its transitions)."""
    per = CONTROL_STEPS_PER_TRANSITION[mode]
    transitions = env_steps // per
    command = [*CLI, "train", *OFF_POLICY_OVERRIDES, *MODE_OVERRIDES[mode], *QUIET, *threads(args)]
    command += [f"total_env_steps={transitions}", f"replay.capacity={max(transitions, 1)}"]
    command += [f"replay.learning_starts={args.learning_starts // per}", f"seed={args.seed}"]
    return [*command, *args.env_overrides, *args.off_policy_overrides]


def on_policy_overrides(args: argparse.Namespace) -> list[str]:
    return [
        f"recipe={ON_POLICY_RECIPE}",
        f"policy.init_from={START}",
        "eval.num_episodes=0",
        f"seed={args.seed}",
        *QUIET,
        *threads(args),
        *args.env_overrides,
        *args.on_policy_overrides,
    ]


def on_policy_steps_per_update(overrides: list[str]) -> int:
    """Control steps of one update of the recipe: worlds x decisions x actions executed per decision."""
    from vla_rl.training.jobs import job_config

    cfg = job_config("rl", overrides)
    return cfg.env.num_envs * cfg.algorithm.num_decisions * cfg.algorithm.execute_steps


def on_policy_command(env_steps: int, args: argparse.Namespace) -> tuple[list[str], int]:
    """``vla-rl train`` of the recipe for ``env_steps`` control steps (rounded down to whole updates),
    and the control steps it will take."""
    overrides = on_policy_overrides(args)
    per_update = on_policy_steps_per_update(overrides)
    updates = max(env_steps // per_update, 1)
    return [*CLI, "train", *overrides, f"iterations={updates}"], updates * per_update


def threads(args: argparse.Namespace) -> tuple[str, str]:
    return f"torch_num_threads={args.threads}", f"env.num_threads={args.threads}"


def run_learner(name: str, env_steps: int, args: argparse.Namespace) -> dict[str, Any]:
    """Train ``name`` for ``env_steps`` control steps in ``--work-dir/<name>``; its row (without the
    evaluation). A run that its log says finished is reused."""
    run_dir = args.work_dir / name
    if name == "on_policy":
        command, steps = on_policy_command(env_steps, args)
    else:
        command, steps = off_policy_command(name, env_steps, args), env_steps
    log = args.work_dir / f"{name}.log"
    seconds = train([*command, f"run_dir={run_dir}"], log)
    if name != "on_policy":  # what the run took: its transitions, in control steps
        steps = logged_transitions(log) * CONTROL_STEPS_PER_TRANSITION[name]
    return {"run_dir": str(run_dir), "env_steps": steps, "wall_s": seconds, "command": command[len(CLI) :]}


def logged_transitions(log: Path) -> int:
    """The transitions an off-policy run took, from its log's ``trained N updates, M env steps`` line."""
    found = re.search(r"trained \d+ updates, (\d+) env steps", log.read_text())
    if found is None:
        raise SystemExit(f"{log} does not say how many env steps the run took")
    return int(found.group(1))


# ----- the one evaluation -------------------------------------------------------------------------------


def eval_env_config(args: argparse.Namespace) -> Any:
    """``pick_place`` with the front camera, as every learner steps it."""
    from vla_rl.training.jobs import job_config

    return job_config("off_policy", ["algorithm=sac", *ENV_OVERRIDES, *args.env_overrides]).env


def evaluate_policy(
    policy: Any, args: argparse.Namespace, wrap_env: Callable[[Any], Any] | None = None
) -> dict[str, float]:
    """The benchmark's one evaluation: ``--eval-episodes`` episodes of ``--eval-worlds`` worlds on the
    train split, seed ``EVAL_SEED``, noise-free, ``EXECUTE_STEPS`` actions per chunk."""
    from vla_rl.training.evaluate import evaluate

    result = evaluate(
        policy,
        eval_env_config(args),
        args.eval_episodes,
        deterministic=True,
        split="train",
        seed=EVAL_SEED,
        execute_steps=EXECUTE_STEPS,
        num_envs=args.eval_worlds,
        wrap_env=wrap_env,
    )
    return {"success_rate": result.success_rate, "episodes": result.num_episodes}


def load_start() -> Any:
    from vla_rl.policies.registry import load_chunk_policy

    return load_chunk_policy(START_FAMILY, START).eval()


def load_on_policy(run_dir: Path) -> Any:
    """The recipe run's last policy, as its own evaluations load it."""
    from vla_rl.training.checkpoint import resolve_policy_dir
    from vla_rl.training.chunk_rl.config_load import load_rl_config_file
    from vla_rl.training.chunk_rl.trainer import load_rl_policy

    cfg = load_rl_config_file(run_dir / "config.yaml", for_evaluation=True)
    return load_rl_policy(cfg, resolve_policy_dir(run_dir))


def evaluate_learner(name: str, run_dir: Path | None, args: argparse.Namespace) -> dict[str, float]:
    """``evaluate_policy`` of the start (``name`` ``start``) or of a learner's final policy."""
    import torch

    torch.set_num_threads(args.threads)
    if name == "start":
        return evaluate_policy(load_start(), args)
    assert run_dir is not None
    if name == "on_policy":
        return evaluate_policy(load_on_policy(run_dir), args)
    from vla_rl.training.off_policy.networks import load_off_policy_run

    policy, wrap = load_off_policy_run(run_dir)
    return evaluate_policy(policy, args, wrap)


# ----- the table ----------------------------------------------------------------------------------------


def standard_error_points(success: float, episodes: int) -> float:
    """Binomial standard error of a success rate, in points."""
    return 100.0 * math.sqrt(max(success * (1.0 - success), 0.0) / max(episodes, 1))


def summarise(results: dict[str, Any]) -> str:
    """The markdown table of ``results`` (the JSON this benchmark writes)."""
    start = results["start"]
    lines = [
        f"Measured {results['machine']}; start `{results['start_path']}`, {results['env_steps']:,} control "
        f"steps per learner, evaluation: {start['episodes']} episodes of {results['eval_worlds']} worlds, "
        "noise-free, 2 actions per chunk.",
        "",
        "| policy | success | gain (points) | control env steps | wall-clock |",
        "|---|---:|---:|---:|---:|",
        f"| start (frozen pi0) | {100 * start['success_rate']:.1f} % "
        f"(± {standard_error_points(start['success_rate'], start['episodes']):.1f}) | | | |",
    ]
    labels = {
        "residual": "residual RL (SAC)",
        "dsrl": "DSRL (SAC)",
        "on_policy": f"{ON_POLICY_RECIPE} (on-policy)",
    }
    for name, row in results["learners"].items():
        success = row["success_rate"]
        gain = 100 * (success - start["success_rate"])
        error = standard_error_points(success, row["episodes"])
        lines.append(
            f"| {labels.get(name, name)} | {100 * success:.1f} % (± {error:.1f}) | {gain:+.1f} | "
            f"{row['env_steps']:,} | {row['wall_s'] / 60:.1f} min |"
        )
    return "\n".join(lines)


# ----- the cost ------------------------------------------------------------------------------------------


def seconds_per_control_step(name: str, scalars: dict[str, dict[int, float]], steps_per_update: int) -> float:
    """Median over a run's updates (the first left out: it holds the warm-up or the compilation) of the
    seconds of collection and update per control step."""
    if name == "on_policy":
        rollout, update = scalars["perf/rollout_time_s"], scalars["train/update_time_s"]
        steps = scalars["rollout/env_steps"]
        keys = sorted(rollout)[1:]
        return statistics.median((rollout[k] + update[k]) / steps[k] for k in keys)
    rollout, update = scalars["perf/rollout_time_s"], scalars["perf/update_time_s"]
    keys = sorted(rollout)[1:]
    return statistics.median((rollout[k] + update[k]) / steps_per_update for k in keys)


def measure_cost(args: argparse.Namespace) -> dict[str, Any]:
    """Each learner at the benchmark's settings for a short budget (``--cost-env-steps``, at least three
    updates of the on-policy recipe, run without its critic warm-up so that every update measured
    trains the actor too); seconds
    per control step, and the full run's estimate at ``--env-steps``."""
    args.work_dir.mkdir(parents=True, exist_ok=True)
    cost: dict[str, Any] = {"machine": machine_line(), "threads": args.threads, "learners": {}}
    cost["load_average_1min"] = os.getloadavg()[0]
    for name in args.learners:
        run_dir = args.work_dir / f"cost_{name}"
        log = args.work_dir / f"cost_{name}.log"
        if name == "on_policy":
            args.on_policy_overrides = [*args.on_policy_overrides, "algorithm.critic_warmup_iterations=0"]
            per_update = on_policy_steps_per_update(on_policy_overrides(args))
            command, _ = on_policy_command(max(args.cost_env_steps, 3 * per_update), args)
        else:
            command = off_policy_command(name, args.cost_env_steps, args)
            per_update = OFF_POLICY_WORLDS * CONTROL_STEPS_PER_TRANSITION[name]
        wall_s = run_logged([*command, f"run_dir={run_dir}"], log)
        per_step = seconds_per_control_step(name, logged_scalars(run_dir), per_update)
        cost["learners"][name] = {
            "short_run_wall_s": wall_s,
            "control_steps_per_update": per_update,
            "seconds_per_control_step": per_step,
            "full_run_hours": per_step * args.env_steps / 3600.0,
        }
        print(f"{name}: {1000 * per_step:.2f} ms per control step", flush=True)
    return cost


# ----- main ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-steps", type=int, default=204_800, help="control steps per learner")
    parser.add_argument("--learners", nargs="+", default=list(LEARNERS), choices=LEARNERS)
    parser.add_argument("--eval-episodes", type=int, default=512)
    parser.add_argument("--eval-worlds", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0, help="the runs' seed (not the evaluation's)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch and env threads")
    parser.add_argument("--work-dir", type=Path, default=Path("runs/bench/frozen_policy_rl"))
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    parser.add_argument("--results-name", default="frozen_policy_rl")
    parser.add_argument("--quick", action="store_true", help="the whole pipeline at toy size")
    parser.add_argument("--cost", action="store_true", help="measure each learner's seconds per control step")
    parser.add_argument("--cost-env-steps", type=int, default=3072)
    parser.add_argument("--summarise", action="store_true", help="only rewrite the table from the JSON")
    args = parser.parse_args(argv)
    args.learning_starts = LEARNING_STARTS
    args.env_overrides, args.off_policy_overrides, args.on_policy_overrides = [], [], []
    if args.quick:
        args.env_steps, args.learning_starts = QUICK["env_steps"], QUICK["learning_starts"]
        args.eval_episodes, args.eval_worlds = QUICK["eval_episodes"], QUICK["eval_worlds"]
        args.env_overrides = list(QUICK["env"])
        args.off_policy_overrides, args.on_policy_overrides = (
            list(QUICK["off_policy"]),
            list(QUICK["on_policy"]),
        )
        args.results_name = f"{args.results_name}_quick"
    args.results_dir.mkdir(parents=True, exist_ok=True)
    json_path = args.results_dir / f"{args.results_name}.json"
    table_path = args.results_dir / f"{args.results_name}_table.md"
    if args.summarise:
        print(summarise(json.loads(json_path.read_text())))
        return
    if args.cost:
        cost = measure_cost(args)
        (args.results_dir / f"{args.results_name}_cost.json").write_text(json.dumps(cost, indent=2) + "\n")
        return
    args.work_dir.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "machine": machine_line(),
        "start_path": str(START.relative_to(Path(__file__).parents[1])),
        "env_steps": args.env_steps,
        "eval_worlds": args.eval_worlds,
        "eval_seed": EVAL_SEED,
        "seed": args.seed,
        "quick": args.quick,
        "learners": {},
    }
    if json_path.exists():
        results["learners"] = json.loads(json_path.read_text()).get("learners", {})
    results["start"] = evaluate_learner("start", None, args)
    print(f"start: {100 * results['start']['success_rate']:.1f} %", flush=True)
    for name in args.learners:
        row = run_learner(name, args.env_steps, args)
        row.update(evaluate_learner(name, Path(row["run_dir"]), args))
        results["learners"][name] = row
        print(
            f"{name}: {100 * row['success_rate']:.1f} % after {row['env_steps']:,} control steps", flush=True
        )
        json_path.write_text(json.dumps(results, indent=2) + "\n")
    table_path.write_text(summarise(results) + "\n")
    print(summarise(results))


if __name__ == "__main__":
    main()
