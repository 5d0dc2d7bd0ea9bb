"""HG-DAgger on ``pick_place``: deploy, let the scripted expert take over where the policy drifts,
record, fine-tune on the takeovers, repeat; success per round.

Round 0 is a weak start: ``vla-rl collect`` records a few scripted demonstrations (state only:
proprioception and the task state) and ``vla-rl sft`` trains a small flow policy on them for few
steps. Each later round:

1. deploys the latest policy through the deployment loop on the simulated robot (this process, no
   transport; ``--ros``: the ROS 1 rehearsal, ``roscore`` + ``vla-rl sim-robot`` + ``vla-rl deploy``)
   with ``intervention.kind=expert``: the scripted expert takes over for ``takeover_steps`` steps
   whenever the policy's commands drift from its own, every command passes the safety layer (limits
   the expert's own speed passes, ``SAFETY``) and every step is recorded with its intervention flag
   into one dataset that grows round by round (the aggregate); an episode ends on the simulator's
   success flag or, with ``--classifier``, when a ``vla-rl reward-train`` success classifier fires
   (``EpisodeEnd``);
2. ``vla-rl sft data.intervention_only=true data.demonstrations=<the demonstrations>`` trains on
   HG-DAgger's aggregate: every frame of the original demonstrations plus the takeover frames of all
   rounds so far (not the frames the policy drove), starting from the previous round's policy
   (``policy.init_from``);
3. evaluates the new policy by deploying it without interventions on fixed seeds (the same seeds
   every round, none of them a deployment's).

A control runs beside the rounds: the same number of SFT steps from the same start on the
demonstrations alone (round k's control continues round k-1's), evaluated on the same seeds, so that
a gain is not just the extra training of an under-trained start.

Writes ``benchmarks/results/<--results-name>.json`` and ``.md`` (a row per round: success, the
control's, episodes, intervention steps, frames trained on, wall-clock); the default name,
``hg_dagger_run``, leaves ``hg_dagger.md`` (the declaration and the write-up) alone. ``--quick`` is a toy run
(tiny budgets, one evaluation episode per policy) that checks the pipeline in well under a minute;
its numbers mean nothing.

    python -m benchmarks.hg_dagger [--rounds 2] [--ros] [--control-eval last] [--classifier DIR]
                                   [--seed 0] [--quick]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks.common import NAMESPACE_FLAG, RESULTS_DIR, machine_line, rerun_in_private_namespace
from benchmarks.hg_dagger_deploy import deploy_locally, deploy_over_ros
from benchmarks.hg_dagger_report import classifier_columns, percent, table

TASK_ENV = ("env=pick_place", "env.cameras=[]")
SFT_POLICY = (
    "sft/policy=flow_mlp",
    "policy.kwargs.vector_obs_dims={proprio:24,privileged:26}",
    "policy.kwargs.hidden_sizes=[256,256]",
)
"""A state policy: 24 proprioception values and pick_place's 26-value task state (which cube, which
pad: the deployment's ``task_state``), so no instruction or camera is needed."""
SAFETY = (
    "safety.max_ee_speed_m_s=0.6",
    "safety.max_joint_speed_rad_s=3.0",
    "safety.max_gripper_speed_m_s=2.0",
)
"""The default limits (0.25 m/s at the TCP) halve the expert's 0.5 m/s and it then fails most
episodes within pick_place's 120 steps; with these it solves them all through the loop."""
EVAL_SEED = 50_000
DEPLOY_SEED = 10_000
"""Round r of run seed n deploys from seed ``DEPLOY_SEED + 100,000 n + 1000 r`` on; evaluations
always from ``EVAL_SEED``."""


@dataclass(frozen=True)
class EpisodeEnd:
    """What ends a deployed round's episodes: the simulator's flag (``classifier`` None), or a
    ``vla-rl reward-train`` success classifier (the simulator's flag kept beside it). Evaluations
    always end on the simulator's flag."""

    classifier: Path | None = None
    threshold: float = 0.8
    consecutive_steps: int = 12
    instruction: str = "put the cube on the pad"
    max_steps: int = 120
    """pick_place's time limit: with a classifier nothing else ends an episode."""

    def overrides(self) -> list[str]:
        if self.classifier is None:
            return []
        return [
            "success.kind=classifier",
            f"success.classifier_path={self.classifier.resolve()}",
            f"success.threshold={self.threshold}",
            f"success.consecutive_steps={self.consecutive_steps}",
            f"success.instruction={self.instruction}",
            f"max_steps={self.max_steps}",
        ]


@dataclass(frozen=True)
class Budget:
    demonstrations: int = 200
    """Scripted demonstrations of the weak start."""
    start_steps: int = 8000
    """SFT steps of the weak start (200 demonstrations, 8,000 steps: 10 % through the deployment loop
    on the evaluation seeds, measured 2026-12-06; 20 and 3,000: 0 %; 100 and 8,000: 4 %)."""
    round_steps: int = 2000
    """SFT steps of each round (from the previous round's weights) and of each control step."""
    intervention_repeats: int = 4
    """Times each takeover frame is drawn per epoch against the demonstrations' frames."""
    deploy_episodes: int = 20
    """Episodes deployed (and recorded) per round."""
    eval_episodes: int = 50
    """Episodes per evaluation (no interventions)."""
    drift_threshold: float = 0.5
    drift_window: int = 5
    takeover_steps: int = 20
    batch_size: int = 64


QUICK = Budget(
    demonstrations=1,
    start_steps=5,
    round_steps=5,
    deploy_episodes=1,
    eval_episodes=1,
    batch_size=16,
)


def vla_rl(*args: str) -> None:
    """``vla-rl <args>`` in this process (the CLI's code path); exits on failure."""
    from vla_rl.cli import main

    code = main(list(args))
    if code != 0:
        raise SystemExit(f"vla-rl {' '.join(args)} failed with exit code {code}")


def weak_start(work: Path, budget: Budget) -> Path:
    demos, run = demonstrations_dir(work), work / "round_0"
    vla_rl(
        "collect",
        *TASK_ENV,
        "env.num_envs=1",
        f"num_episodes={budget.demonstrations}",
        f"output_dir={demos}",
        "seed=0",
    )
    sft(run, demos, budget.start_steps, budget, [])
    return run


def demonstrations_dir(work: Path) -> Path:
    return work / "demonstrations"


def sft(run: Path, data: Path, steps: int, budget: Budget, extra: list[str]) -> None:
    vla_rl(
        "sft",
        *TASK_ENV,
        *SFT_POLICY,
        f"data.path={data}",
        f"steps={steps}",
        f"batch_size={budget.batch_size}",
        f"checkpoint_interval={steps}",
        "optim.warmup_steps=0",
        "eval.num_episodes=0",
        "logger.tensorboard=false",
        "logger.progress_bar=false",
        "logger.wandb_mode=disabled",
        f"run_dir={run}",
        *extra,
    )


def deploy_overrides(budget: Budget, episodes: int, seed: int, expert: bool) -> list[str]:
    overrides = [f"episodes={episodes}", f"seed={seed}", *SAFETY]
    if expert:
        overrides += [
            "intervention.kind=expert",
            f"intervention.drift_threshold={budget.drift_threshold}",
            f"intervention.drift_window={budget.drift_window}",
            f"intervention.takeover_steps={budget.takeover_steps}",
        ]
    return overrides


def evaluate(run: Path, budget: Budget) -> float:
    summary = deploy_locally(run, deploy_overrides(budget, budget.eval_episodes, EVAL_SEED, False), None)
    return float(summary["success_rate"])


def intervention_steps(summary: dict[str, Any]) -> int:
    return int(sum(episode["interventions"] for episode in summary["per_episode"]))


@dataclass(frozen=True)
class Rounds:
    """How the rounds after the weak start run."""

    count: int = 2
    ros: bool = False
    """Deploy over ROS 1 (``roscore`` + ``vla-rl sim-robot`` + ``vla-rl deploy``), else in process."""
    control_eval_last: bool = False
    """The control trains every round but is evaluated after the last one only (else every round)."""
    episode_end: EpisodeEnd = EpisodeEnd()
    seed: int = 0
    """The rounds' seed: their deployments' episode seeds (``DEPLOY_SEED``), the expert's takeover
    draws and the SFT of the rounds and the control. The weak start is the same for every seed."""

    def deploy_seed(self, index: int) -> int:
        return DEPLOY_SEED + 100_000 * self.seed + 1000 * index


def run_rounds(work: Path, budget: Budget, options: Rounds) -> list[dict[str, Any]]:
    """The weak start and ``options.count`` rounds, one row each (a control row's success is None
    where it was not evaluated)."""
    rounds, episode_end = options.count, options.episode_end
    started = time.perf_counter()
    run = weak_start(work, budget)
    demos, dataset = demonstrations_dir(work), work / "interventions"
    demo_frames = dataset_frames(demos)
    rows = [
        {
            "round": 0,
            "policy": str(run),
            "success_rate": evaluate(run, budget),
            "frames_trained_on": demo_frames,
            "wall_s": time.perf_counter() - started,
        }
    ]
    print(f"round 0 (weak start): success {100 * rows[0]['success_rate']:.1f} %", flush=True)
    control = run
    for index in range(1, rounds + 1):
        started = time.perf_counter()
        overrides = deploy_overrides(budget, budget.deploy_episodes, options.deploy_seed(index), True)
        overrides += [f"intervention.seed={options.seed}", *episode_end.overrides()]
        if options.ros:
            summary = deploy_over_ros(run, overrides, dataset, work / f"rehearsal_{index}")
        else:
            summary = deploy_locally(run, overrides, dataset)
        steps = sum(episode["steps"] for episode in summary["per_episode"])
        previous, run = run, work / f"round_{index}"
        sft(
            run,
            dataset,
            budget.round_steps,
            budget,
            [
                "data.intervention_only=true",
                f"data.intervention_repeats={budget.intervention_repeats}",
                f"data.demonstrations={demos}",
                f"policy.init_from={previous}",
                f"seed={options.seed}",
            ],
        )
        success = evaluate(run, budget)
        wall_s = time.perf_counter() - started
        previous_control, control = control, work / f"control_{index}"
        control_extra = [f"policy.init_from={previous_control}", f"seed={options.seed}"]
        sft(control, demos, budget.round_steps, budget, control_extra)
        frames = aggregate_frames(dataset)
        control_success = None
        if index == rounds or not options.control_eval_last:
            control_success = evaluate(control, budget)
        row = {
            "round": index,
            "policy": str(run),
            "success_rate": success,
            "control_success_rate": control_success,
            "deploy_episodes": len(summary["per_episode"]),
            "deploy_success_rate": summary["success_rate"],
            **classifier_columns(summary),
            "deploy_steps": steps,
            "intervention_steps": intervention_steps(summary),
            "held_steps": int(sum(episode["held_steps"] for episode in summary["per_episode"])),
            "aggregate_intervention_frames": frames,
            "frames_trained_on": demo_frames + frames,
            "wall_s": wall_s,
        }
        rows.append(row)
        print(
            f"round {index}: {row['intervention_steps']} of {steps} deployed steps taken over, success "
            f"{100 * success:.1f} % (demonstrations only, same steps: {percent(control_success)})",
            flush=True,
        )
    return rows


def aggregate_frames(dataset: Path) -> int:
    from vla_rl.data.lerobot_format import open_dataset

    return int(sum(episode.extras["intervention"].sum() for episode in open_dataset(dataset).episodes()))


def dataset_frames(dataset: Path) -> int:
    from vla_rl.data.lerobot_format import open_dataset

    return int(sum(len(episode) for episode in open_dataset(dataset).episodes()))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--quick", action="store_true", help="toy budgets: checks the pipeline, not the method"
    )
    parser.add_argument("--ros", action="store_true", help="deploy each round over ROS 1 (roscore)")
    parser.add_argument(
        "--eval-episodes", type=int, default=None, help="episodes per evaluation (default: Budget's 50)"
    )
    parser.add_argument(
        "--control-eval",
        choices=("every", "last"),
        default="every",
        help="evaluate the control after every round, or after the last one only (it trains every round)",
    )
    parser.add_argument(
        "--classifier",
        type=Path,
        default=None,
        help="a vla-rl reward-train success classifier that ends the deployed episodes (default: the "
        "simulator's flag); evaluations always use the simulator's flag",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="the rounds' seed (Rounds.seed); the weak start stays the same"
    )
    parser.add_argument("--classifier-threshold", type=float, default=EpisodeEnd.threshold)
    parser.add_argument("--classifier-steps", type=int, default=EpisodeEnd.consecutive_steps)
    parser.add_argument("--work-dir", type=Path, default=Path("runs/bench/hg_dagger"))
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    parser.add_argument("--results-name", default="hg_dagger_run")
    parser.add_argument(NAMESPACE_FLAG, action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.ros:
        rerun_in_private_namespace("benchmarks.hg_dagger")
    budget = QUICK if args.quick else Budget()
    if args.eval_episodes is not None:
        budget = dataclasses.replace(budget, eval_episodes=args.eval_episodes)
    shutil.rmtree(args.work_dir, ignore_errors=True)
    args.work_dir.mkdir(parents=True)
    episode_end = EpisodeEnd(args.classifier, args.classifier_threshold, args.classifier_steps)
    options = Rounds(args.rounds, args.ros, args.control_eval == "last", episode_end, args.seed)
    rows = run_rounds(args.work_dir, budget, options)
    deployment = "ROS 1 rehearsal" if args.ros else "local deployment loop"
    report = {
        "machine": machine_line(),
        "quick": args.quick,
        "deployment": deployment,
        "budget": asdict(budget),
        "control_eval": args.control_eval,
        "seed": args.seed,
        "episode_end": {**asdict(episode_end), "classifier": str(args.classifier or "")},
        "rounds": rows,
    }
    args.results_dir.mkdir(parents=True, exist_ok=True)
    (args.results_dir / f"{args.results_name}.json").write_text(json.dumps(report, indent=2) + "\n")
    header = f"# HG-DAgger on pick_place ({deployment}{', quick toy run' if args.quick else ''})\n\n"
    markdown = header + f"Machine: {report['machine']}.\n\n" + table(rows, budget.eval_episodes, EVAL_SEED)
    (args.results_dir / f"{args.results_name}.md").write_text(markdown)
    print(markdown)


if __name__ == "__main__":
    sys.exit(main())
