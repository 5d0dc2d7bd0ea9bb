"""Every command of the tutorials (``docs/tutorials/*.md``) runs here at a tiny size, so the docs cannot rot.

The convention: each ```` ```bash ```` block of a tutorial holds commands a reader types, one per line
(a line ending in ``\\`` continues on the next; ``#`` starts a comment). Output a reader should expect
goes in ```` ```text ```` blocks, which are not run. Each command must have an entry in ``PLANS``,
keyed by its page and its text (``tutorial_plans.py``), saying how it runs here:

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
from pathlib import Path

import pytest
from tutorial_plans import PLANS, NotRun, Validate

ROOT = Path(__file__).resolve().parents[2]
TUTORIALS = ROOT / "docs" / "tutorials"
README = ROOT / "README.md"
VENV_BIN = Path(sys.executable).parent


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
