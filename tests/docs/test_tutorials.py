"""Every command of the tutorials (``docs/tutorials/*.md``) runs here at a tiny size, so the docs cannot rot.

The convention: each ```` ```bash ```` block of a tutorial holds commands a reader types, one per line
(a line ending in ``\\`` continues on the next; ``#`` starts a comment). Output a reader should expect
goes in ```` ```text ```` blocks, which are not run. Each command must have an entry in ``PLANS``,
keyed by its page and its text, saying how it runs here:

* ``Run(tiny=..., expect=...)``: run as written, in a fresh folder per page and in page order, with
  the ``tiny`` overrides appended (Hydra: the last value of a key wins) or ``substitute`` applied to the
  text; the command must exit 0 and print ``expect``. ``vla-rl`` commands run in this process through
  ``vla_rl.cli.main``; other commands (``python -m ...``, ``unshare ...``) in a shell whose ``python``
  and ``vla-rl`` are this environment's.
* ``Validate(reason)``: the command needs something a unit test does not have (a robot, a cluster, a
  server that runs until stopped); its config is composed and validated, which is what fails first
  when a key or value in it goes stale.
* ``NotRun(reason)``: the command is not the toolkit's (``make ros``, ``ray start``, ``roscore``) or is
  covered by another command of the page; the reason says which.

A new or changed command without an entry fails ``test_every_tutorial_command_has_a_plan``.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TUTORIALS = ROOT / "docs" / "tutorials"
README = ROOT / "README.md"
VENV_BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Run:
    tiny: tuple[str, ...] = ()
    expect: str = ""
    substitute: tuple[tuple[str, str], ...] = ()
    needs: str | None = None
    """``roscore`` or ``namespace``: skipped with the reason when this machine lacks it."""
    own_process: bool = False
    """Run ``vla-rl`` as its own process: a Ray driver inside pytest's process, whose output pytest
    captures, waited forever for its env workers."""


@dataclass(frozen=True)
class Validate:
    reason: str


@dataclass(frozen=True)
class NotRun:
    reason: str


QUIET = ("logger.progress_bar=false", "logger.tensorboard=false", "logger.wandb_mode=disabled")
TRAIN_TINY = (
    "env.num_envs=4",
    "env.num_threads=1",
    "algorithm.num_steps=8",
    "algorithm.num_minibatches=2",
    "total_env_steps=64",
    "eval.num_episodes=2",
    "eval.video=false",
    *QUIET,
)
GYM_TINY = (
    "env.num_envs=2",
    "algorithm.num_steps=8",
    "algorithm.num_minibatches=2",
    "total_env_steps=32",
    "eval.num_episodes=2",
    "eval.video=false",
    *QUIET,
)
COLLECT_TINY = ("num_episodes=2", "env.num_envs=2")
SFT_TINY = (
    "steps=4",
    "batch_size=4",
    "checkpoint_interval=2",
    "env.num_envs=2",
    "eval.num_episodes=2",
    "eval.interval=0",
    *QUIET,
)
RL_TINY = (
    "iterations=1",
    "env.num_envs=4",
    "env.num_threads=1",
    "algorithm.num_decisions=2",
    "algorithm.num_minibatches=2",
    "eval.num_episodes=2",
    "eval.ood_splits=[]",
    "checkpoint_interval=1",
    "torch_num_threads=1",
    *QUIET,
)
RAY_TINY = (*TRAIN_TINY, "env.num_envs=8")
RAY_RANKS_TINY = (*RAY_TINY, "distributed.trainer_cpus=0")
"""Two env workers take this 2-core machine's two CPUs; ranks that also asked one each would be a
ConfigError before the run starts (the tutorial says so)."""
ASYNC_TINY = (*(o for o in RAY_TINY if not o.startswith("total_env_steps=")), "total_env_steps=256")
"""Four updates, each on one of the two rollout workers' rollouts."""
TRAINED = "evaluation ("
COVERED_BY_REHEARSAL = "the rehearsal above starts these three processes itself and runs in this test"

PLANS: dict[tuple[str, str], Run | Validate | NotRun] = {
    # Train PPO on a task
    ("train_ppo.md", "vla-rl train run_dir=runs/reach"): Run(TRAIN_TINY, TRAINED),
    (
        "train_ppo.md",
        "vla-rl eval --checkpoint runs/reach eval.num_episodes=128 eval.split=ood_position",
    ): Run(("eval.num_episodes=2", "eval.video=false"), "split ood_position"),
    (
        "train_ppo.md",
        "vla-rl train env=push run_dir=runs/push total_env_steps=20_000_000 max_minutes=30",
    ): Run(TRAIN_TINY, TRAINED),
    ("train_ppo.md", "vla-rl train --resume runs/push total_env_steps=30_000_000"): Run(
        ("total_env_steps=128",), "trained 4 iterations"
    ),
    (
        "train_ppo.md",
        "vla-rl train env=reach_pixels policy=cnn algorithm=ppo_pixels total_env_steps=614_400 "
        "run_dir=runs/reach_pixels",
    ): Run((*TRAIN_TINY, "env.num_envs=2", "total_env_steps=32"), TRAINED),
    # Bring a Gymnasium env
    ("gymnasium.md", "vla-rl train env.backend=gymnasium env.task=Reacher-v5 run_dir=runs/reacher"): Run(
        GYM_TINY, TRAINED
    ),
    ("gymnasium.md", "vla-rl train env.backend=gymnasium env.task=Pusher-v5 run_dir=runs/pusher"): Run(
        GYM_TINY, TRAINED
    ),
    ("gymnasium.md", "vla-rl eval --checkpoint runs/reacher eval.num_episodes=32"): Run(
        ("eval.num_episodes=2", "eval.video=false"), TRAINED
    ),
    # Demonstrations and SFT
    (
        "sft_vla.md",
        "vla-rl collect env=pick_place num_episodes=200 noise_std=0.2 output_dir=datasets/pick_place",
    ): Run(COLLECT_TINY, "wrote 2 episodes"),
    (
        "sft_vla.md",
        "vla-rl sft sft/policy=pi0 data.path=datasets/pick_place data.action_key=expert_action "
        "data.boundary_repeats=8 env=pick_place env.cameras=[front] steps=16000 run_dir=runs/sft_pi0 "
        "policy.kwargs.proprio_dim=32 +policy.kwargs.state_keys=[proprio,objects] "
        "+policy.kwargs.proprio_fields=[arm_qpos,gripper_opening_m,tcp_pos,tcp_rot6]",
    ): Run(SFT_TINY, "trained 4 steps"),
    # RL fine-tuning with a recipe (from the SFT starts committed under benchmarks/starts/)
    (
        "rl_finetune.md",
        "vla-rl train recipe=pi0_flow_noise_ppo policy.init_from=benchmarks/starts/pi0_200_start5 "
        "run_dir=runs/rl_flow_noise",
    ): Run(RL_TINY, "before RL"),
    (
        "rl_finetune.md",
        "vla-rl train recipe=pi0_flow_sde_ppo policy.init_from=benchmarks/starts/pi0_200_start5 "
        "run_dir=runs/rl_flow_sde",
    ): Run(RL_TINY, "before RL"),
    (
        "rl_finetune.md",
        "vla-rl train recipe=token_vla_ppo policy.init_from=benchmarks/starts/token_vla_400_start6 "
        "run_dir=runs/rl_token_ppo",
    ): Run(RL_TINY, "before RL"),
    (
        "rl_finetune.md",
        "vla-rl train recipe=token_vla_grpo policy.init_from=benchmarks/starts/token_vla_400_start6 "
        "run_dir=runs/rl_token_grpo",
    ): Run((*RL_TINY, "algorithm.group_size=2"), "before RL"),
    # Learn a reward model
    (
        "reward_model.md",
        "vla-rl collect env=push env.cameras=[front] video.lossless=true num_episodes=100 "
        "output_dir=datasets/push_demos",
    ): Run(COLLECT_TINY, "wrote 2 episodes"),
    (
        "reward_model.md",
        "vla-rl collect env=push env.cameras=[front] video.lossless=true keep_failures=true noise_std=3.0 "
        "num_episodes=100 output_dir=datasets/push_failures",
    ): Run(COLLECT_TINY, "wrote 2 episodes"),
    (
        "reward_model.md",
        "vla-rl collect env=push env.cameras=[front] video.lossless=true keep_failures=true noise_std=1.0 "
        "num_episodes=20 seed=1 output_dir=datasets/push_heldout",
    ): Run(COLLECT_TINY, "wrote 2 episodes"),
    (
        "reward_model.md",
        "vla-rl reward-train task=push datasets=[datasets/push_demos,datasets/push_failures] "
        "eval_datasets=[datasets/push_heldout] model.cameras=[front] output_dir=runs/reward_models/push",
    ): Run(("steps=2", "batch_size=8", "torch_num_threads=1"), "held-out (2 episodes"),
    (
        "reward_model.md",
        "vla-rl train env=push reward=learned reward.path=runs/reward_models/push env.cameras=[front] "
        "reward.cameras=[front] run_dir=runs/push_learned_reward",
    ): Run(TRAIN_TINY, TRAINED),
    # Scale out on Ray
    (
        "ray.md",
        "vla-rl train env=push distributed.runtime=ray distributed.env_workers=2 env.pipeline_stages=2 "
        "run_dir=runs/push_ray",
    ): Run(RAY_TINY, TRAINED, own_process=True),
    (
        "ray.md",
        "vla-rl train env=push distributed.runtime=ray distributed.env_workers=2 distributed.trainer_ranks=2 "
        "run_dir=runs/push_ranks",
    ): Run(RAY_RANKS_TINY, TRAINED, own_process=True),
    (
        "ray.md",
        "vla-rl train env=push distributed.runtime=ray distributed.rollout_workers=2 "
        "distributed.max_staleness=1 run_dir=runs/push_async",
    ): Run(ASYNC_TINY, TRAINED, own_process=True),
    ("ray.md", "ray start --head --port=6379"): NotRun(
        "Ray's own command: it leaves a cluster daemon running on the machine"
    ),
    ("ray.md", "ray start --address=<head-node-ip>:6379"): NotRun("Ray's own command, on another node"),
    (
        "ray.md",
        "vla-rl train env=push env.num_envs=1024 env.pipeline_stages=2 distributed.runtime=ray "
        "distributed.ray_address=auto distributed.env_workers=16 distributed.trainer_ranks=4 "
        "distributed.rendezvous_host=auto",
    ): Validate("needs a running Ray cluster (ray_address=auto); the two commands above run on a local Ray"),
    # Deploy over ROS 1 and ROS 2
    ("deploy_ros.md", "vla-rl train run_dir=runs/reach"): Run(TRAIN_TINY, TRAINED),
    ("deploy_ros.md", "make ros"): NotRun("installs system packages with apt-get; `make test` runs it"),
    (
        "deploy_ros.md",
        "python -m vla_rl.real_world.rehearsal --work-dir runs/rehearsal checkpoint=runs/reach episodes=20",
    ): Run(substitute=(("episodes=20", "episodes=2"),), expect='"episodes": 2', needs="roscore"),
    ("deploy_ros.md", "roscore"): NotRun(COVERED_BY_REHEARSAL),
    ("deploy_ros.md", "vla-rl sim-robot checkpoint=runs/reach"): NotRun(COVERED_BY_REHEARSAL),
    ("deploy_ros.md", "vla-rl deploy checkpoint=runs/reach episodes=20"): NotRun(COVERED_BY_REHEARSAL),
    (
        "deploy_ros.md",
        "unshare -n sh -c 'ip link set lo up && python -m vla_rl.real_world.rehearsal --work-dir "
        "runs/rehearsal2 robot.transport=ros2 checkpoint=runs/reach episodes=20'",
    ): Run(substitute=(("episodes=20", "episodes=2"),), expect='"episodes": 2', needs="namespace"),
    ("deploy_ros.md", "vla-rl deploy checkpoint=runs/reach robot.simulated=false max_steps=200"): Validate(
        "drives a real arm"
    ),
    (
        "deploy_ros.md",
        "vla-rl policy-server checkpoint=runs/reach policy.host=0.0.0.0 policy.token=SECRET",
    ): Validate("serves until stopped; tests/real_world/test_policy_server.py runs the server"),
    (
        "deploy_ros.md",
        "vla-rl deploy checkpoint=runs/reach policy.mode=remote policy.host=THAT_HOST policy.token=SECRET "
        "action_queue.enabled=true",
    ): Validate("needs the policy server on another machine and a robot"),
}


def shell_commands(markdown: str) -> list[str]:
    """The commands of the ```` ```bash ```` blocks, continuation lines joined, comments dropped."""
    commands: list[str] = []
    for block in re.findall(r"^```bash\n(.*?)^```", markdown, flags=re.M | re.S):
        pending = ""
        for line in block.splitlines():
            line = line.split(" #")[0].rstrip() if not line.lstrip().startswith("#") else ""
            if line.endswith("\\"):
                pending += line[:-1].strip() + " "
                continue
            command = " ".join((pending + line.strip()).split())
            pending = ""
            if command:
                commands.append(command)
    return commands


def tutorial_commands() -> dict[str, list[str]]:
    return {page.name: shell_commands(page.read_text()) for page in sorted(TUTORIALS.glob("*.md"))}


def test_shell_commands_joins_continuations_and_drops_comments() -> None:
    text = "x\n```bash\n# a comment\nvla-rl train a=1 \\\n    b=2   # note\n\nmake ros\n```\n"
    text += "```text\nout\n```\n"
    assert shell_commands(text) == ["vla-rl train a=1 b=2", "make ros"]


def test_every_tutorial_command_has_a_plan() -> None:
    found = {(page, command) for page, commands in tutorial_commands().items() for command in commands}
    assert found, "no ```bash blocks found in docs/tutorials"
    assert sorted(found - PLANS.keys()) == [], "tutorial commands without an entry in PLANS"
    assert sorted(PLANS.keys() - found) == [], "entries in PLANS for commands no tutorial has"


def test_readme_quick_starts_are_tutorial_commands() -> None:
    """The README's quick starts are copies of tutorial commands, so they run through the tests below."""
    in_tutorials = {command for commands in tutorial_commands().values() for command in commands}
    readme = [c for c in shell_commands(README.read_text()) if not c.startswith("make ")]
    assert readme, "the README has no quick-start commands"
    assert [c for c in readme if c not in in_tutorials] == []


def _unavailable(need: str | None) -> str | None:
    if need is None:
        return None
    sys.path.insert(0, str(ROOT / "tests" / "real_world"))
    from namespaces import private_namespace_unavailable

    if need == "roscore" and shutil.which("roscore") is None:
        return "roscore is not installed (make ros installs ROS 1 from the system's packages)"
    return private_namespace_unavailable()


def _run_vla_rl(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    from vla_rl.cli import main

    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def _run_shell(command: str, work_dir: Path, need: str | None) -> tuple[int, str]:
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}", "WANDB_MODE": "disabled"}
    env.setdefault("OMP_NUM_THREADS", "1")
    if need == "roscore":  # the ROS 1 rehearsal binds every interface: keep it in a private namespace
        command = f"unshare -n sh -c {shlex.quote('ip link set lo up && exec ' + command)}"
    proc = subprocess.run(
        ["bash", "-c", command], cwd=work_dir, env=env, capture_output=True, text=True, timeout=600
    )
    return proc.returncode, proc.stdout + proc.stderr


def _validate(argv: list[str]) -> None:
    """Compose and validate the command's config as the command would, without running it."""
    overrides = [a for a in argv[1:] if not a.startswith("--")]
    if argv[0] == "train":
        from vla_rl.training.jobs import job_config, train_job

        job_config(train_job(overrides, None), overrides)
    elif argv[0] in ("deploy", "policy-server", "sim-robot"):
        from vla_rl.real_world.deploy_config import compose_deploy_config

        compose_deploy_config(overrides)
    elif argv[0] == "sft":
        from vla_rl.training.sft.config_load import compose_sft_config

        compose_sft_config(overrides)
    elif argv[0] == "collect":
        from vla_rl.data.config import compose_collect_config

        compose_collect_config(overrides)
    elif argv[0] == "reward-train":
        from vla_rl.rewards.train_config import compose_reward_train_config

        compose_reward_train_config(overrides)
    elif argv[0] == "export":  # no config: its options parse (the folders are the reader's own)
        from vla_rl.cli import build_parser

        build_parser().parse_args(argv)
    else:
        raise AssertionError(f"no validation for `vla-rl {argv[0]}`")


GUIDE_PAGES = sorted(p for p in (ROOT / "docs").rglob("*.md") if TUTORIALS not in p.parents)


@pytest.mark.parametrize("path", GUIDE_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_other_pages_vla_rl_commands_compose_and_validate(path: Path) -> None:
    """Outside the tutorials, every ``vla-rl`` command of a ```` ```bash ```` block has a config that
    composes and validates (a key renamed or removed fails here); those that need a checkpoint to
    read their config from (``eval``, ``--resume``) are left to the tutorials, which run them."""
    for command in shell_commands(path.read_text()):
        argv = shlex.split(command)
        if argv[0] != "vla-rl" or argv[1] == "eval" or "--resume" in argv:
            continue
        _validate(argv[1:])


@pytest.mark.slow
@pytest.mark.parametrize("page", sorted(p.name for p in TUTORIALS.glob("*.md")))
def test_tutorial_commands_run_at_tiny_sizes(
    page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WANDB_MODE", "disabled")
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "starts").symlink_to(ROOT / "benchmarks" / "starts")
    skipped: list[str] = []
    for command in tutorial_commands()[page]:
        plan = PLANS[(page, command)]
        if isinstance(plan, NotRun):
            continue
        argv = shlex.split(command)
        if isinstance(plan, Validate):
            assert argv[0] == "vla-rl", command
            _validate(argv[1:])
            continue
        reason = _unavailable(plan.needs)
        if reason is not None:
            skipped.append(f"{command}: {reason}")
            continue
        for old, new in plan.substitute:
            command = command.replace(old, new)
        if argv[0] == "vla-rl" and plan.own_process:
            code, output = _run_shell(shlex.join([*shlex.split(command), *plan.tiny]), tmp_path, None)
        elif argv[0] == "vla-rl":
            code, output = _run_vla_rl([*shlex.split(command)[1:], *plan.tiny], capsys)
        else:
            assert not plan.tiny, "tiny overrides apply to vla-rl commands; use substitute"
            code, output = _run_shell(command, tmp_path, plan.needs)
        assert code == 0, f"`{command}` exited {code}:\n{output[-4000:]}"
        assert plan.expect in output, f"`{command}` did not print {plan.expect!r}:\n{output[-4000:]}"
    if skipped:
        pytest.skip("ran the page's other commands; not run here: " + "; ".join(skipped))
