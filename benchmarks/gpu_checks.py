"""Every check that needs an NVIDIA GPU, in one run: ``make bench-gpu``.

Each check is one command in its own process, run in the order of ``CHECKS`` (most wanted first)
under a wall-clock cap. A check that fails or outlives its cap is recorded and the next one starts,
so one broken check does not cost the others. With ``--budget-s`` a check starts only while its cap
still fits in what is left of the budget; the ones left out are named in the summary, to be run
by a later call with ``--only``. The output folder gets one log per check, ``summary.md`` (each
check's exit status and seconds) and ``gpu_checks.tar.gz``: the logs, the summary and every results
file the checks wrote, two files to bring back from a machine that is only lent.

    python -m benchmarks.gpu_checks                                   # every check, no budget
    python -m benchmarks.gpu_checks --budget-s 540 --out runs/gpu     # what fits in nine minutes
    python -m benchmarks.gpu_checks --only pi0_update --budget-s 300  # one check
    python -m benchmarks.gpu_checks --suite libero --budget-s 540     # LIBERO's checks (its own kit)

``--suite libero`` runs ``LIBERO_CHECKS`` instead, in an environment with LIBERO's stack
(``.venv-libero`` here, ``benchmarks.gpu_kit_libero``'s kit on a GPU machine): the LIBERO-Object
start of ``benchmarks.libero_sft_rl`` under the full protocol, LIBERO's env-steps/s over up to 16
worker processes, and RL from that start for what time is left.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.libero_sft_rl import ENV as LIBERO_ENV

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS = "benchmarks/results"


@dataclass(frozen=True)
class Check:
    """One command run by the interpreter, e.g. ``("-m", "benchmarks.warp_ppo", ...)``."""

    name: str  # file-safe: names the log and ``--only``
    argv: tuple[str, ...]  # after the interpreter; ``{out}`` becomes the output folder
    cap_s: int  # wall clock after which the check's process group is killed
    results: tuple[str, ...] = ()  # files (from the repository root) the check writes
    required: bool = False  # if it does not pass, no later check starts


@dataclass(frozen=True)
class Outcome:
    name: str
    status: str  # "passed", "failed (rc N)", "killed at its cap", "not started: <why>"
    seconds: float


# Versions and the device, and the imports every check needs, before anything long starts; without
# them no later check starts.
PREFLIGHT = """
import platform, torch, warp, mujoco, mujoco_warp, transformers, peft
from transformers import PI0ForConditionalGeneration
print("python", platform.python_version(), "torch", torch.__version__, "cuda", torch.version.cuda)
print("warp", warp.__version__, "mujoco", mujoco.__version__, "transformers", transformers.__version__)
print("peft", peft.__version__)
print("device", torch.cuda.get_device_name() if torch.cuda.is_available() else "none")
raise SystemExit(0 if torch.cuda.is_available() else "no CUDA device")
"""

CUDA_TESTS = (
    "tests/sims/test_mujoco_warp.py",
    "tests/sims/test_mujoco_warp_device.py",
    "tests/sims/test_device_resets.py",
    "tests/sims/test_device_reset_distributions.py",
    "tests/sims/test_task_torch.py",
    "tests/robots/test_torch_controllers.py",
)
WARP_4096 = ("--backend", "mujoco_warp", "--device", "cuda", "--num-envs", "4096")

CHECKS = (
    Check("preflight", ("-c", PREFLIGHT), 60, required=True),
    Check("cuda_tests", ("-m", "pytest", "-q", "-p", "no:cacheprovider", *CUDA_TESTS, "-k", "cuda"), 150),
    Check(
        "rollout_ratio",
        ("-m", "benchmarks.rollout_ratio", *WARP_4096, "--tasks", "reach", "push")
        + ("--compute", "device", "host", "--repeats", "3", "--collections", "2"),
        150,
    ),
    Check(
        "warp_ppo",
        ("-m", "benchmarks.warp_ppo", "--tasks", "reach", "push", "--num-envs", "4096", "--device", "cuda")
        + ("--max-minutes", "1.0", "--work-dir", "{out}/warp_ppo"),
        180,
        (f"{RESULTS}/warp_ppo_cuda.json",),
    ),
    Check(
        "pi0_update",
        ("-m", "benchmarks.pi0_gpu_update", "--device", "cuda", "--batches", "32", "64")
        + ("--modes", "lora", "full"),
        240,
        (f"{RESULTS}/pi0_gpu_update.json",),
    ),
    Check(
        "chunk_rl_speed",
        ("-m", "benchmarks.chunk_rl_speed", "--device", "cuda", "--num-envs", "256", "--updates", "4")
        + ("--max-minutes", "2.0", "--work-dir", "{out}/chunk_rl_speed"),
        150,
        (f"{RESULTS}/chunk_rl_speed_cuda.json",),
    ),
    Check(
        "backend_speed",
        ("-m", "benchmarks.backend_speed", "--task", "push", "--num-envs", "256", "1024", "4096")
        + ("--threads", str(os.cpu_count()), "--warp-device", "cuda", "--no-camera")
        + ("--results", f"{RESULTS}/backend_speed_cuda.json"),
        120,
        (f"{RESULTS}/backend_speed_cuda.json",),
    ),
    Check(
        "pi0_update_autocast",
        ("-m", "benchmarks.pi0_gpu_update", "--device", "cuda", "--batches", "32", "--modes", "lora", "full")
        + ("--precisions", "autocast", "--results", f"{RESULTS}/pi0_gpu_update_autocast.json"),
        180,
        (f"{RESULTS}/pi0_gpu_update_autocast.json",),
    ),
)

# LIBERO's checks: the versions, and one LIBERO-Object world built and rendered, before anything long.
LIBERO_PREFLIGHT = """
import platform, torch, mujoco, robosuite, transformers
from vla_rl.envs.config import EnvConfig
from vla_rl.envs.registry import make_env
print("python", platform.python_version(), "torch", torch.__version__, "cuda", torch.version.cuda)
print("mujoco", mujoco.__version__, "robosuite", robosuite.__version__)
print("transformers", transformers.__version__)
cfg = EnvConfig(backend="libero", task="libero_object/2", num_envs=1, cameras=["agentview"], image_size=64)
env = make_env(cfg)
frame = env.reset(seed=0)[0]["rgb_agentview"].float()
env.close()
print("frame", tuple(frame.shape), "mean", round(frame.mean().item(), 1), "std", round(frame.std().item(), 1))
print("device", torch.cuda.get_device_name() if torch.cuda.is_available() else "none")
raise SystemExit(0 if torch.cuda.is_available() else "no CUDA device")
"""
LIBERO_START = "benchmarks/starts/pi0_libero_object_start"
"""The tiny pi0 SFT'd on ``libero_object/2+3`` by ``benchmarks.libero_sft_rl --start-only``."""
LIBERO_WORKERS = "16"

LIBERO_CHECKS = (
    Check("libero_preflight", ("-c", LIBERO_PREFLIGHT), 90, required=True),
    Check(
        "libero_protocol",
        ("-m", "benchmarks.libero_protocol", LIBERO_START, "--family", "pi0", "--suites", "libero_object/2+3")
        + ("--episodes-per-task", "50", "--worlds-per-task", "10", "--workers", "10")
        + ("--image-size", "64", "--device", "cuda", "--out", f"{RESULTS}/libero_protocol_cuda.md"),
        210,
        (f"{RESULTS}/libero_protocol_cuda.md", f"{RESULTS}/libero_protocol_cuda.json"),
    ),
    Check(
        "libero_speed",
        ("-m", "benchmarks.libero_speed", "--suite", "libero_object", "--worlds", "16")
        + ("--workers", "1", "4", LIBERO_WORKERS, "--steps", "10", "--image-size", "128")
        + ("--results", f"{RESULTS}/libero_speed_cuda.json"),
        180,
        (f"{RESULTS}/libero_speed_cuda.json",),
    ),
    Check(
        "libero_rl",
        ("-m", "vla_rl.cli", "train", "recipe=pi0_flow_sde_ppo", *LIBERO_ENV, "env.num_envs=16")
        + (f"env.options.workers={LIBERO_WORKERS}", "algorithm.progress_shaping=0.0", "device=cuda")
        + (f"policy.init_from={LIBERO_START}", "iterations=1000", "max_minutes=2.5")
        + ("eval.num_episodes=10", "eval.num_envs=10", "eval.interval=1000000")
        + ("logger.wandb_mode=disabled", "run_dir={out}/libero_rl"),
        180,
    ),
)
SUITES = {"main": CHECKS, "libero": LIBERO_CHECKS}


def run_check(check: Check, python: str, out: Path) -> Outcome:
    """Run ``check`` from the repository root with its output to ``out/<name>.log``."""
    argv = [python, *(arg.replace("{out}", str(out)) for arg in check.argv)]
    start = time.perf_counter()
    with (out / f"{check.name}.log").open("w") as log:
        log.write(" ".join(argv) + "\n\n")
        log.flush()
        process = subprocess.Popen(
            argv, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            rc = process.wait(timeout=check.cap_s)
            status = "passed" if rc == 0 else f"failed (rc {rc})"
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            status = "killed at its cap"
    return Outcome(check.name, status, time.perf_counter() - start)


def run_checks(checks: tuple[Check, ...], python: str, out: Path, budget_s: float | None) -> list[Outcome]:
    """Each check in turn; with ``budget_s``, only those whose cap fits in the budget left, and none
    after a required check that did not pass."""
    out.mkdir(parents=True, exist_ok=True)
    start, outcomes, blocked = time.perf_counter(), [], ""
    for check in checks:
        left_s = None if budget_s is None else budget_s - (time.perf_counter() - start)
        if blocked or (left_s is not None and check.cap_s > left_s):
            outcomes.append(Outcome(check.name, f"not started: {blocked or 'budget'}", 0.0))
            continue
        outcomes.append(outcome := run_check(check, python, out))
        print(f"{outcome.name}: {outcome.status} ({outcome.seconds:.0f} s)", flush=True)
        if check.required and outcome.status != "passed":
            blocked = f"{check.name} did not pass"
    return outcomes


def summary_markdown(outcomes: list[Outcome], budget_s: float | None) -> str:
    budget = "none" if budget_s is None else f"{budget_s:.0f} s"
    lines = [f"# GPU checks (budget {budget})", "", "| check | status | seconds |", "| --- | --- | ---: |"]
    lines += [f"| {o.name} | {o.status} | {o.seconds:.0f} |" for o in outcomes]
    return "\n".join(lines) + "\n"


def pack(
    checks: tuple[Check, ...], outcomes: list[Outcome], out: Path, started: float, root: Path = REPO_ROOT
) -> Path:
    """``out/gpu_checks.tar.gz``: the logs and summary under ``out`` and the results files the checks
    wrote (under their paths from ``root``), each only if written since ``started`` (a ``time.time()``),
    so that an earlier run's files in the same folders stay out."""
    ran = {o.name for o in outcomes if not o.status.startswith("not started")}
    archive = out / "gpu_checks.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(out.rglob("*")):
            if path.suffix in (".log", ".md", ".json") and path.is_file() and path.stat().st_mtime >= started:
                tar.add(path, arcname=f"out/{path.relative_to(out)}")
        for check in checks:
            for result in check.results if check.name in ran else ():
                path = root / result
                if path.is_file() and path.stat().st_mtime >= started:
                    tar.add(path, arcname=result)
    return archive


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/gpu_checks"), help="logs, summary, archive")
    parser.add_argument("--suite", choices=list(SUITES), default="main", help="which list of checks")
    names = [c.name for checks in SUITES.values() for c in checks]
    parser.add_argument("--only", nargs="+", choices=names, help="these checks of the suite alone")
    parser.add_argument("--budget-s", type=float, help="start a check only while its cap fits in this")
    parser.add_argument("--python", default=sys.executable, help="interpreter for the checks")
    args = parser.parse_args()
    if stray := set(args.only or ()) - {c.name for c in SUITES[args.suite]}:
        parser.error(f"--only {' '.join(sorted(stray))}: not in --suite {args.suite}")
    checks = tuple(c for c in SUITES[args.suite] if args.only is None or c.name in args.only)
    started, out = time.time(), args.out.resolve()
    outcomes = run_checks(checks, args.python, out, args.budget_s)
    (out / "summary.md").write_text(summary := summary_markdown(outcomes, args.budget_s))
    print(summary + f"archive: {pack(checks, outcomes, out, started)}")
    if any(o.status.startswith(("failed", "killed")) for o in outcomes):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
