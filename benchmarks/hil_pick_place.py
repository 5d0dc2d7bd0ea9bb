"""Human in the loop on ``pick_place``, rehearsed over ROS 1: a weak SFT start, residual SAC learning
on robot actors, the scripted expert taking over, a learned success classifier ending the episodes;
beside it the same session without takeovers (issue 86, item 3).

1. **The weak start** is HG-DAgger's round 0 (``benchmarks.hg_dagger.weak_start``: scripted
   demonstrations, state only, and a short ``vla-rl sft`` of a ``flow_mlp``). It is scored in the
   simulator (``evaluate``: noise-free, re-planning every step, as the actors run it) and must be at
   most 30 % successful.
2. **The success classifier** is ``vla-rl reward-train`` on the front camera, trained on labelled
   episodes: the scripted expert's (successes) and the start's own rollouts (mostly failures), both
   recorded by ``vla-rl collect``'s writer with the simulator's per-step success flag. Its accuracy
   is measured on held-out episodes of both kinds (other seeds), frame by frame and per episode, with
   the fixed instruction the session asks it about.
3. **Two sessions** of ``vla-rl learn-online --rehearsal`` (roscore, the simulated robot node, the
   actor and the learner as separate processes): SAC learns a residual on the frozen start
   (``frozen_policy=residual``), ``success.kind=classifier`` ends the episodes, one session with
   ``intervention.kind=expert`` and one with ``intervention.kind=none``; same episodes, same seeds.
4. **Ground truth**: every episode's simulator flag (``sim_success`` in the actor summaries) beside
   the classifier's judgement, and a final noise-free evaluation of each learner's last policy (its
   frozen start plus its residual) in the simulator on fixed episodes.

Writes ``benchmarks/results/<--results-name>.json`` and ``<--results-name>_table.md`` (the report of
``benchmarks.hil_report``): success per block of episodes, the
first episode at which the trailing 20 episodes reach 80 % by the simulator's flag, the final
evaluations, intervention steps, the classifier's agreement with the simulator. ``--quick`` runs it
all at toy size (its numbers mean nothing). ``hil_pick_place.md`` holds the declaration.

    python -m benchmarks.hil_pick_place [--quick] [--success sim] [--bc-coef B] [--bc-loss-type {mse,nll}]
        [--action-l2-coef C]
        [--classifier-episodes EXPERT START] [--choose-rule] [--residual-scale S] [--target-entropy H]
"""

from __future__ import annotations

import os

if not os.environ.get("DISPLAY"):  # the classifier's camera is rendered headless
    os.environ.setdefault("MUJOCO_GL", "egl")

import argparse
import dataclasses
import json
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks import hg_dagger
from benchmarks.common import (
    NAMESPACE_FLAG,
    RESULTS_DIR,
    machine_line,
    rerun_in_private_namespace,
    write_report,
)
from benchmarks.hil_classifier import (
    INSTRUCTION,
    classifier_accuracy,
    classifier_data,
    rule_on_validation,
    train_classifier,
)
from benchmarks.hil_evaluation import evaluate_learner, evaluate_start
from benchmarks.hil_report import episode_summary, ordered_episodes, pct, table
from vla_rl.algorithms.sac_config import BC_LOSSES

SESSION_SEED = 1_000
"""Episode ``k`` of actor ``i`` starts from seed ``SESSION_SEED + 1000 i + k`` in both sessions."""


@dataclass(frozen=True)
class Settings:
    start: hg_dagger.Budget = dataclasses.field(default_factory=hg_dagger.Budget)
    """The weak start's demonstrations and SFT steps (HG-DAgger's round 0)."""
    start_max_success: float = 0.3
    eval_episodes: int = 50
    """Episodes of the start's and each learner's final evaluation."""
    eval_worlds: int = 10
    expert_episodes: int = 30
    start_rollouts: int = 60
    """Classifier training episodes: the expert's and the start's; held out: a third as many of each."""
    classifier_steps: int = 1000
    classifier_batch: int = 128
    threshold: float = 0.5
    consecutive_steps: int = 2
    """The classifier ends an episode at ``threshold`` on this many periods in a row."""
    choose_rule: bool = False
    """Choose ``threshold`` and ``consecutive_steps`` on validation episodes (as many as held out, other
    seeds) for the best episode accuracy, instead of the two fields' values."""
    actors: int = 1
    episodes: int = 200
    """Episodes per actor in each session (the episode budget)."""
    max_steps: int = 120
    """Control periods per episode (pick_place's time limit)."""
    residual_scale: float = 0.2
    execute_steps: int = 1
    """Frozen actions run before the start plans again (1: every period, as HG-DAgger deploys it)."""
    utd_ratio: int = 1
    batch_size: int = 256
    learning_starts: int = 480
    """Transitions before the first update (at least ``batch_size``): four whole episodes."""
    hidden: int = 256
    init_alpha: float = 0.01
    takeover_probability: float = 1.0
    watch_probability: float = 1.0
    """Chance that the expert watches an episode of the session with it at all (the others are the
    policy's alone)."""
    bc_coef: float = 0.0
    """SAC's behaviour cloning of the takeover steps in the actor's loss (``algorithm.bc_coef``)."""
    bc_loss_type: str = "mse"
    """Its kind (``algorithm.bc_loss_type``): the mean's squared error or the Gaussian's likelihood."""
    action_l2_coef: float = 0.0
    """SAC's penalty on the residual's size in the actor's loss (``algorithm.action_l2_coef``)."""
    target_entropy: float | None = None
    """SAC's entropy target (``algorithm.target_entropy``; None: SAC's default, minus the action
    dimension)."""
    success: str = "classifier"
    """What ends the sessions' episodes and gives their reward: ``classifier`` (the item's setting) or
    ``sim``, the simulator's own flag (a diagnostic: the same learner with a correct reward; no
    classifier is trained)."""
    session_cap_minutes: float = 45.0
    """Wall-clock cap of each session (the learner's ``max_minutes``; a session past it fails)."""


QUICK = Settings(
    start=hg_dagger.QUICK,
    eval_episodes=2,
    eval_worlds=2,
    expert_episodes=2,
    start_rollouts=3,
    classifier_steps=20,
    classifier_batch=32,
    episodes=3,
    max_steps=30,
    learning_starts=16,
    batch_size=16,
    hidden=32,
    session_cap_minutes=5.0,
)


PROBE = dataclasses.replace(
    Settings(),
    start=dataclasses.replace(hg_dagger.Budget(), demonstrations=20, start_steps=800),
    eval_episodes=10,
    expert_episodes=6,
    start_rollouts=12,
    classifier_steps=200,
    episodes=10,
)
"""The cost probe: the full run's sizes per unit (networks, batch, episode length, cameras), a tenth or
less of each count; ``stage_s`` of its report is scaled up stage by stage."""


# ----- the sessions ------------------------------------------------------------------------------------
def learner_overrides(start: Path, s: Settings) -> list[str]:
    return [
        "algorithm=sac",
        *hg_dagger.TASK_ENV,
        "env.num_envs=1",
        "frozen_policy=residual",
        f"frozen_policy.checkpoint={start.resolve()}",
        f"frozen_policy.residual_scale={s.residual_scale}",
        f"frozen_policy.execute_steps={s.execute_steps}",
        f"algorithm.utd_ratio={s.utd_ratio}",
        f"algorithm.init_alpha={s.init_alpha}",
        f"algorithm.bc_coef={s.bc_coef}",
        f"algorithm.bc_loss_type={s.bc_loss_type}",
        f"algorithm.action_l2_coef={s.action_l2_coef}",
        f"algorithm.target_entropy={'null' if s.target_entropy is None else s.target_entropy}",
        f"policy.hidden_sizes=[{s.hidden},{s.hidden}]",
        f"replay.batch_size={s.batch_size}",
        f"replay.learning_starts={s.learning_starts}",
        "total_env_steps=100000000",
        f"max_minutes={s.session_cap_minutes}",
        "checkpoint_interval=100000000",
        "eval.num_episodes=0",
        "seed=0",
        "torch_num_threads=1",
        "logger.tensorboard=false",
        "logger.progress_bar=false",
        "logger.wandb_mode=disabled",
    ]


def session_overrides(
    start: Path, classifier: Path, out: Path, expert: bool, index: int, s: Settings
) -> list[str]:
    learner = "learner.overrides=[" + ",".join(f'"{o}"' for o in learner_overrides(start, s)) + "]"
    b = s.start
    return [
        f"--master-port={11511 + 10 * index}",
        learner,
        f"learner.port={5711 + index}",
        f"actors={s.actors}",
        f"episodes={s.episodes}",
        f"max_steps={s.max_steps}",
        f"seed={SESSION_SEED}",
        *classifier_overrides(classifier, s),
        f"intervention.kind={'expert' if expert else 'none'}",
        f"intervention.drift_threshold={b.drift_threshold}",
        f"intervention.drift_window={b.drift_window}",
        f"intervention.takeover_steps={b.takeover_steps}",
        f"intervention.takeover_probability={s.takeover_probability}",
        f"intervention.watch_probability={s.watch_probability}",
        *hg_dagger.SAFETY,
        "recording.enabled=false",
        f"output_dir={out.resolve()}",
    ]


def classifier_overrides(classifier: Path, s: Settings) -> list[str]:
    """The success settings of a session: the classifier's (``learn-online --rehearsal`` then sets
    ``success.kind=classifier``), or none, so that the simulator's flag decides."""
    if s.success == "sim":
        return []
    return [
        f"success.classifier_path={classifier.resolve()}",
        f"success.instruction='{INSTRUCTION}'",
        f"success.threshold={s.threshold}",
        f"success.consecutive_steps={s.consecutive_steps}",
    ]


def check_sessions(work: Path, start: Path, s: Settings) -> None:
    """Both sessions' configs, validated as ``learn-online --rehearsal`` will (a ``ConfigError`` names
    the key) before the classifier is made: the classifier's own folder is checked when it runs."""
    from vla_rl.real_world.learn_online import rehearsal_overrides
    from vla_rl.real_world.online_config import compose_learn_online_config, learner_config

    for expert in (True, False):
        given = session_overrides(start, work / "classifier", work / "check", expert, int(expert), s)[1:]
        learner_config(compose_learn_online_config(rehearsal_overrides(given)))


def run_session(work: Path, start: Path, classifier: Path, expert: bool, s: Settings) -> dict[str, Any]:
    name = "with_expert" if expert else "no_interventions"
    out = work / name
    started = time.perf_counter()
    hg_dagger.vla_rl(
        "learn-online", "--rehearsal", *session_overrides(start, classifier, out, expert, int(expert), s)
    )
    wall_s = time.perf_counter() - started
    result = json.loads((out / "learn_online.json").read_text())
    episodes = ordered_episodes(result["actors"])
    evaluated = time.perf_counter()
    final_eval = evaluate_learner(out / "learner", s.eval_episodes, s.eval_worlds)
    return {
        "name": name,
        "wall_s": wall_s,
        "past_cap": wall_s > 60 * s.session_cap_minutes,
        "learner": result["learner"],
        "final_eval": final_eval,
        "final_eval_s": time.perf_counter() - evaluated,
        **episode_summary(episodes),
    }


def run(work: Path, s: Settings) -> dict[str, Any]:
    """The whole benchmark; ``stage_s`` holds each stage's wall-clock (what a probe extrapolates)."""
    started = time.perf_counter()
    stage_s: dict[str, float] = {}

    def lap(stage: str) -> None:
        stage_s[stage] = time.perf_counter() - started - sum(stage_s.values())

    start = hg_dagger.weak_start(work, s.start)
    lap("start_collect_and_sft")
    check_sessions(work, start, s)
    start_eval = evaluate_start(start, s.eval_episodes, s.eval_worlds, s.execute_steps)
    lap("start_evaluation")
    weak = start_eval["success_once_rate"] <= s.start_max_success
    verdict = "weak enough" if weak else "TOO STRONG"
    print(f"weak start: {pct(start_eval['success_once_rate'])} success ({verdict})")
    classifier, accuracy, rule = work / "classifier", None, None
    if s.success == "classifier":
        sets = classifier_data(work, start, s.expert_episodes, s.start_rollouts, validation=s.choose_rule)
        lap("classifier_data")
        classifier = train_classifier(work, sets, s.classifier_steps, s.classifier_batch)
        lap("classifier_training")
        if s.choose_rule:
            rule = rule_on_validation(classifier, sets["validation"])
            s = dataclasses.replace(
                s, threshold=rule["threshold"], consecutive_steps=rule["consecutive_steps"]
            )
            print(f"episode rule: {s.threshold} on {s.consecutive_steps} periods in a row (validation)")
        accuracy = classifier_accuracy(classifier, sets["held_out"], s.threshold, s.consecutive_steps)
        frame, episode = pct(accuracy["frame_accuracy"]), pct(accuracy["episode_accuracy"])
        print(f"classifier: frame accuracy {frame}, episode accuracy {episode}")
    sessions = []
    for expert in (True, False):
        sessions.append(run_session(work, start, classifier, expert, s))
        lap(sessions[-1]["name"])
    return {
        "settings": asdict(s),
        "start": {"run": str(start), "eval": start_eval, "weak": weak},
        "classifier": accuracy and {"path": str(classifier), "instruction": INSTRUCTION, **accuracy},
        "episode_rule": rule,
        "stage_s": stage_s,
        "sessions": sessions,
        "total_s": time.perf_counter() - started,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="toy sizes: checks the pipeline, not the method")
    parser.add_argument("--probe", action="store_true", help="the cost probe (PROBE): timings to scale up")
    parser.add_argument("--work-dir", type=Path, default=Path("runs/bench/hil_pick_place"))
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    parser.add_argument("--results-name", default="hil_pick_place")
    parser.add_argument(
        "--success",
        choices=("classifier", "sim"),
        default="classifier",
        help="what ends the episodes: the learned classifier (the item), or the simulator's flag",
    )
    parser.add_argument(
        "--classifier-episodes",
        type=int,
        nargs=2,
        metavar=("EXPERT", "START"),
        default=None,
        help="the classifier's training episodes of the expert and of the start (default: Settings')",
    )
    parser.add_argument(
        "--choose-rule",
        action="store_true",
        help="choose the classifier's threshold and periods in a row on validation episodes",
    )
    parser.add_argument("--bc-coef", type=float, default=0.0, help="SAC's behaviour cloning of takeovers")
    parser.add_argument(
        "--bc-loss-type",
        choices=BC_LOSSES,
        default="mse",
        help="the cloning term: mean's error or likelihood",
    )
    parser.add_argument("--action-l2-coef", type=float, default=0.0, help="SAC's penalty on the residual")
    parser.add_argument(
        "--residual-scale", type=float, default=Settings.residual_scale, help="the residual's range"
    )
    parser.add_argument("--target-entropy", type=float, default=None, help="SAC's entropy target")
    parser.add_argument(
        "--watch-probability", type=float, default=1.0, help="chance the expert watches an episode"
    )
    parser.add_argument("--episodes", type=int, default=None, help="episodes per session (the budget)")
    parser.add_argument("--eval-episodes", type=int, default=None, help="final evaluation episodes")
    parser.add_argument("--session-cap-minutes", type=float, default=None, help="each session's cap")
    parser.add_argument(NAMESPACE_FLAG, action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    rerun_in_private_namespace("benchmarks.hil_pick_place")  # ROS traffic stays in a private namespace
    if shutil.which("roscore") is None:
        raise SystemExit("needs roscore (make ros installs ROS 1)")
    settings = QUICK if args.quick else PROBE if args.probe else Settings()
    settings = dataclasses.replace(
        settings,
        success=args.success,
        bc_coef=args.bc_coef,
        bc_loss_type=args.bc_loss_type,
        action_l2_coef=args.action_l2_coef,
        choose_rule=args.choose_rule,
        residual_scale=args.residual_scale,
        target_entropy=args.target_entropy,
        watch_probability=args.watch_probability,
    )
    for field in ("episodes", "eval_episodes", "session_cap_minutes"):
        if getattr(args, field) is not None:
            settings = dataclasses.replace(settings, **{field: getattr(args, field)})
    if args.classifier_episodes is not None:
        expert, rollouts = args.classifier_episodes
        settings = dataclasses.replace(settings, expert_episodes=expert, start_rollouts=rollouts)
    shutil.rmtree(args.work_dir, ignore_errors=True)
    args.work_dir.mkdir(parents=True)
    size = "quick" if args.quick else "probe" if args.probe else "full"
    report = {"machine": machine_line(), "quick": args.quick, "size": size, **run(args.work_dir, settings)}
    success = "" if args.success == "classifier" else ", success from the simulator's flag"
    if args.bc_coef or args.action_l2_coef:
        success += f", bc_coef {args.bc_coef:g}, action_l2_coef {args.action_l2_coef:g}"
    if args.bc_loss_type != "mse":
        success += f", cloning by {args.bc_loss_type}"
    if args.choose_rule:
        success += ", episode rule chosen on validation episodes"
    if args.residual_scale != Settings.residual_scale or args.target_entropy is not None:
        success += f", residual scale {args.residual_scale:g}, target entropy {args.target_entropy}"
    if args.watch_probability != 1.0:
        success += f", the expert watches {args.watch_probability:g} of the episodes"
    if args.episodes is not None:
        success += f", {settings.episodes} episodes per session"
    if args.classifier_episodes is not None:
        success += f", classifier on {settings.expert_episodes} + {settings.start_rollouts} episodes"
    title = f"# HIL on pick_place over ROS 1 ({size} run{success})\n\n"
    markdown = title + f"Machine: {report['machine']}.\n\n" + table(report)
    write_report(args.results_dir, args.results_name, report, markdown)
    print(markdown)


if __name__ == "__main__":
    sys.exit(main())
