"""How far a ``benchmarks.hil_pick_place`` learner's imitation of its takeovers goes with more updates,
measured after the session.

A session's learner makes one update per transition while the actor runs in real time, so its actor
has as many updates as the session had control periods. This trains an actor on the cloning term
alone (the squared error of its mean action against the stored takeover residuals, the learner's
``bc_loss_type=mse``; no Q, no entropy, no anchor), with Adam at the learner's actor learning rate,
starting either from the learner's last checkpoint (``saved``: the same learner given more updates)
or from a new actor of the same shape (``fresh``: what the takeovers alone teach). It records, at
the start and after each stated number of updates:

* the share of the takeovers' variance the mean explains, on the takeovers it is fitted on (the
  first ``1 - held_out_share`` of them in the order the learner kept them) and on the rest, held out
  (the session's later episodes);
* the mean residual's success in the simulator, on the benchmark's evaluation episodes.

With ``--labels expert`` the rows are instead every transition of the learner's online replay, each
labelled with the scripted expert's residual at its observation (the expert's action minus the
start's, ``residual_label``): labels on the states where the policy drove too, which a person gives
only by taking over. On the takeover rows these labels differ from the stored ones by the
controller's round trip (the stored action is the executed command); the report gives how much of
the stored takeovers' variance they explain.

The saved actor was trained online on every takeover, so its held-out figure at the start is not
held out; a fresh actor's is. The critics and the encoder stay as saved (the actor reads the
encoder's features, as in SAC's actor step). Nothing is written back to the run.

    python -m benchmarks.hil_refit runs/bench/hil_pick_place_i/with_expert/learner \\
        --updates 4000 16000 64000 --results-name hil_pick_place_i_refit
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path
from typing import Any

import torch

from benchmarks.common import RESULTS_DIR, machine_line, write_report
from benchmarks.hil_evaluation import EVAL_SEED, evaluate_networks, saved_transitions
from vla_rl.algorithms.ppo import explained_variance
from vla_rl.policies.sac_networks import SquashedGaussianActor

LABELS = ("takeovers", "expert")
"""The rows fitted: the kept takeovers with their stored residuals, or every online transition with
the scripted expert's residual."""
STARTS = ("saved", "fresh")
"""Where the refit's actor starts: the learner's last checkpoint, or a new actor."""
BATCH_SIZE = 256
"""Rows per update (the sessions' SAC batch)."""
HELD_OUT_SHARE = 0.2
"""The last share of each run's rows, in the order kept, held out of the fit."""


def kept_takeovers(run_dir: Path) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """The observations and stored residuals [M, A] of the takeover transitions in the learner's last
    checkpoint (its intervention replay), in the order they were kept."""
    from vla_rl.training.off_policy.trainer import INTERVENTIONS_FILENAME

    batch = saved_transitions(run_dir, INTERVENTIONS_FILENAME, in_order=True)
    if batch is None:
        raise FileNotFoundError(f"{run_dir}: the learner kept no takeovers (a session without the expert?)")
    return batch.obs, batch.action


def expert_labelled(run_dir: Path) -> tuple[dict[str, torch.Tensor], torch.Tensor, dict[str, float]]:
    """The observations of every transition in the learner's online replay, in the order kept, their
    scripted expert's residuals [M, A], and how those agree with the stored takeover residuals (the
    explained variance of the stored ones by the expert's, and the median absolute difference)."""
    from omegaconf import OmegaConf
    from vla_rl.sims.tasks.scripted import scripted_action

    from vla_rl.training.off_policy.frozen_policy_config import BASE_ACTION_KEY
    from vla_rl.training.off_policy.frozen_policy_env import residual_label
    from vla_rl.training.off_policy.trainer import REPLAY_FILENAME

    cfg = OmegaConf.load(run_dir / "config.yaml")
    batch = saved_transitions(run_dir, REPLAY_FILENAME, in_order=True)
    if batch is None:
        raise FileNotFoundError(f"{run_dir}: the learner saved no online transitions")
    expert = scripted_action(cfg.env.task, batch.obs)
    labels = residual_label(batch.obs[BASE_ACTION_KEY], expert, cfg.frozen_policy.residual_scale)
    rows = batch.intervention.bool()
    agreement = {
        "takeover_rows": int(rows.sum()),
        "explained_variance_of_stored": explained_variance(
            labels[rows].flatten(), batch.action[rows].flatten()
        ),
        "median_abs_difference": float((labels[rows] - batch.action[rows]).abs().median()),
    }
    return batch.obs, labels, agreement


def frozen_start_digest(run_dir: Path) -> str:
    """A digest of the weights of the learner's frozen start: residuals stored against the same start
    may be pooled, as each is the takeover's action minus that start's."""
    from omegaconf import OmegaConf

    from vla_rl.training.checkpoint import resolve_checkpoint_dir

    start = resolve_checkpoint_dir(OmegaConf.load(run_dir / "config.yaml").frozen_policy.checkpoint)
    digest = hashlib.sha256()
    for path in sorted((start / "policy").rglob("*.safetensors")):
        digest.update(path.read_bytes())
    return digest.hexdigest()


Split = tuple[torch.Tensor, torch.Tensor]
"""Features [M, F] and residual labels [M, A] of some rows."""


def labelled_split(
    run_dirs: list[Path],
    labels: str,
    encode: Any,  # noqa: ANN401 - SACPolicy.encode
    held_out_share: float,
) -> tuple[Split, Split, list[dict[str, float]]]:
    """The fitted and the held-out rows (``labels``: one of ``LABELS``), pooled over ``run_dirs``,
    each run's split by :func:`split_rows`; with ``expert`` labels, also each run's agreement with
    its stored takeovers (:func:`expert_labelled`)."""
    fitted, held_out, agreements = [], [], []
    for run_dir in run_dirs:
        if labels == "expert":
            obs, stored, agreement = expert_labelled(run_dir)
            agreements.append(agreement)
        else:
            obs, stored = kept_takeovers(run_dir)
        with torch.no_grad():
            features = encode(obs)
        fit, held = split_rows(len(stored), held_out_share)
        fitted.append((features[fit], stored[fit]))
        held_out.append((features[held], stored[held]))
    return (
        (torch.cat([f for f, _ in fitted]), torch.cat([s for _, s in fitted])),
        (torch.cat([f for f, _ in held_out]), torch.cat([s for _, s in held_out])),
        agreements,
    )


def split_rows(rows: int, held_out_share: float) -> tuple[slice, slice]:
    """The fitted rows (the first ones) and the held-out rows (the last ``held_out_share``, at least
    one when there are two rows or more)."""
    held = min(rows - 1, max(1, round(rows * held_out_share))) if rows > 1 else 0
    return slice(0, rows - held), slice(rows - held, rows)


def refit(
    actor: torch.nn.Module, features: torch.Tensor, stored: torch.Tensor, updates: int,
    optimizer: torch.optim.Optimizer, generator: torch.Generator,
) -> float:  # fmt: skip
    """``updates`` Adam steps of ``actor`` on the squared error of its mean action against ``stored``,
    each on ``BATCH_SIZE`` rows drawn uniformly with replacement; the last step's loss (nan for none)."""
    loss = torch.tensor(float("nan"))
    for _ in range(updates):
        rows = torch.randint(len(stored), (BATCH_SIZE,), generator=generator)
        loss = (actor.deterministic(features[rows]) - stored[rows]).square().mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return float(loss.detach())


def fresh_actor(actor: SquashedGaussianActor, activation: str, seed: int) -> SquashedGaussianActor:
    """A new actor of ``actor``'s shape, initialised as a learner's is, from ``seed``."""
    linears = [m for m in actor.net.modules() if isinstance(m, torch.nn.Linear)]
    hidden_sizes = [layer.out_features for layer in linears[:-1]]
    torch.manual_seed(seed)
    width = linears[0].in_features
    return SquashedGaussianActor(
        width, actor.action_dim, hidden_sizes, activation, actor.log_std_min, actor.log_std_max
    )


@torch.no_grad()
def explained(actor: torch.nn.Module, features: torch.Tensor, stored: torch.Tensor) -> float:
    """The share of the variance of ``stored`` (all dimensions pooled) that the actor's mean explains."""
    return explained_variance(actor.deterministic(features).flatten(), stored.flatten())


def measure(
    run_dirs: list[Path], start: str, updates: list[int], episodes: int, worlds: int, lr: float,
    held_out_share: float, seed: int = 0, labels: str = "takeovers",
) -> dict[str, Any]:  # fmt: skip
    """The refit of an actor from ``start`` (one of ``STARTS``; ``saved`` takes one run) on the
    ``labels`` rows (one of ``LABELS``) of ``run_dirs`` (runs on the same frozen start), at 0 and
    each of ``updates`` (cumulative, ascending). ``seed`` draws a fresh actor's weights and the
    minibatches. Torch's global generator (the frozen flow policy's starting noise) is seeded before
    each evaluation, so the number of updates is the only difference between the points."""
    from omegaconf import OmegaConf

    from vla_rl.training.off_policy.networks import load_off_policy_run

    if start == "saved" and len(run_dirs) != 1:
        raise ValueError("a saved actor is one run's: refit it on that run's takeovers alone")
    if len({frozen_start_digest(run_dir) for run_dir in run_dirs}) != 1:
        raise ValueError(f"{[str(r) for r in run_dirs]}: the runs have different frozen starts")
    policy, wrap = load_off_policy_run(run_dirs[0])
    (fit_features, fit_stored), (held_features, held_stored), agreements = labelled_split(
        run_dirs, labels, policy.encode, held_out_share
    )
    if start == "fresh":
        activation = OmegaConf.load(run_dirs[0] / "config.yaml").policy.activation
        policy.actor = fresh_actor(policy.actor, activation, seed)
    actor = policy.actor
    optimizer = torch.optim.Adam(actor.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(seed)
    points, done = [], 0
    for target in [0, *sorted(updates)]:
        actor.train()
        loss = refit(actor, fit_features, fit_stored, target - done, optimizer, generator)
        done = target
        actor.eval()
        torch.manual_seed(EVAL_SEED)
        points.append(
            {
                "updates": target,
                "last_loss": loss,
                "explained_variance_fit": explained(actor, fit_features, fit_stored),
                "explained_variance_held_out": explained(actor, held_features, held_stored),
                "mean_residual": evaluate_networks(policy, wrap, episodes, worlds),
            }
        )
    return {
        "runs": [str(run_dir) for run_dir in run_dirs],
        "start": start,
        "seed": seed,
        "labels": labels,
        "expert_labels_against_stored": agreements,
        "rows": len(fit_stored) + len(held_stored),
        "fit_rows": len(fit_stored),
        "held_out_rows": len(held_stored),
        "points": points,
    }


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        f"Rows ({rows[0]['labels']} labels) of {', '.join(rows[0]['runs'])}: {rows[0]['rows']:,}, "
        f"{rows[0]['fit_rows']:,} fitted, {rows[0]['held_out_rows']:,} held out.",
        "",
        "| actor (seed) | refit updates | explained variance, fitted rows | held-out rows | mean "
        "residual: success on any step | at the last step |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        for point in row["points"]:
            result = point["mean_residual"]
            lines.append(
                f"| {row['start']} ({row['seed']}) | {point['updates']:,} | "
                f"{point['explained_variance_fit']:.2f} | "
                f"{point['explained_variance_held_out']:.2f} | {100 * result['success_once_rate']:.1f} % | "
                f"{100 * result['success_rate']:.1f} % |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "runs",
        type=Path,
        nargs="+",
        help="learner run folders of sessions with the expert (takeovers pooled)",
    )
    parser.add_argument("--updates", type=int, nargs="+", required=True, help="cumulative refit updates")
    parser.add_argument("--starts", nargs="+", choices=STARTS, default=list(STARTS))
    parser.add_argument("--seed", type=int, default=0, help="a fresh actor's weights and the minibatches")
    parser.add_argument("--labels", choices=LABELS, default="takeovers")
    parser.add_argument("--episodes", type=int, default=200, help="evaluation episodes per point")
    parser.add_argument("--worlds", type=int, default=10)
    parser.add_argument("--lr", type=float, default=3e-4, help="Adam's learning rate (SAC's actor_lr)")
    parser.add_argument("--held-out-share", type=float, default=HELD_OUT_SHARE)
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    parser.add_argument("--results-name", default="hil_refit")
    args = parser.parse_args(argv)
    if any(n <= 0 for n in args.updates):
        parser.error("--updates must be positive (0, the checkpoint as saved, is always measured)")
    rows = [
        measure(
            args.runs,
            start,
            args.updates,
            args.episodes,
            args.worlds,
            args.lr,
            args.held_out_share,
            args.seed,
            args.labels,
        )
        for start in args.starts
    ]
    report = {"machine": machine_line(), "episodes": args.episodes, "lr": args.lr, "refits": rows}
    markdown = f"Machine: {report['machine']}.\n\n" + table(rows)
    write_report(args.results_dir, args.results_name, report, markdown)
    print(markdown)


if __name__ == "__main__":
    sys.exit(main())
