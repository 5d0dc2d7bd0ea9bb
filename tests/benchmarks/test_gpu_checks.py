"""The GPU checks' runner: one failure or hang does not cost the rest, a budget is kept, and what
comes back is one archive. Every check's command line is parsed by its own benchmark here."""

from __future__ import annotations

import argparse
import runpy
import subprocess
import sys
import tarfile
import time

import pytest

from benchmarks import gpu_checks
from benchmarks.gpu_checks import SUITES, Check

ALL_CHECKS = [check for checks in SUITES.values() for check in checks]


def test_a_failing_check_does_not_stop_the_next_and_a_hanging_one_is_killed_at_its_cap(tmp_path):
    checks = (
        Check("fails", ("-c", "raise SystemExit(3)"), 30),
        Check("hangs", ("-c", "import time; time.sleep(60)"), 1),
        Check("writes", ("-c", "open('{out}/made.json', 'w').write('{}')"), 30),
    )
    outcomes = gpu_checks.run_checks(checks, sys.executable, tmp_path, budget_s=None)
    assert [o.status for o in outcomes] == ["failed (rc 3)", "killed at its cap", "passed"]
    assert outcomes[1].seconds < 10
    assert (tmp_path / "made.json").read_text() == "{}"
    assert (tmp_path / "fails.log").read_text().startswith(f"{sys.executable} -c raise SystemExit(3)")


def test_a_check_starts_only_while_its_cap_fits_in_the_budget_left(tmp_path):
    checks = (Check("a", ("-c", "pass"), 20), Check("b", ("-c", "pass"), 100), Check("c", ("-c", "pass"), 20))
    outcomes = gpu_checks.run_checks(checks, sys.executable, tmp_path, budget_s=60)
    assert [o.status for o in outcomes] == ["passed", "not started: budget", "passed"]
    assert not (tmp_path / "b.log").exists()
    summary = gpu_checks.summary_markdown(outcomes, 60)
    assert "| b | not started: budget | 0 |" in summary and "budget 60 s" in summary


def test_no_check_starts_after_a_required_one_that_did_not_pass(tmp_path):
    checks = (
        Check("optional", ("-c", "raise SystemExit(1)"), 20),
        Check("required", ("-c", "raise SystemExit(2)"), 20, required=True),
        Check("later", ("-c", "pass"), 20),
    )
    outcomes = gpu_checks.run_checks(checks, sys.executable, tmp_path, budget_s=None)
    assert [o.status for o in outcomes] == [
        "failed (rc 1)",
        "failed (rc 2)",
        "not started: required did not pass",
    ]


def test_the_archive_holds_the_logs_and_the_results_written_during_the_run(tmp_path):
    root, out = tmp_path / "repo", tmp_path / "out"
    (root / "results").mkdir(parents=True)
    stale = root / "results" / "stale.json"
    stale.write_text("old")
    out.mkdir()
    (out / "earlier.log").write_text("an earlier run's log in the same folder")
    started = time.time() + 1  # the stale file and the earlier log are older than the run
    checks = (
        Check("fresh", ("-c", f"open({str(root / 'results' / 'fresh.json')!r}, 'w').write('new')"), 30,
              ("results/fresh.json", "results/stale.json")),
        Check("skipped", ("-c", "pass"), 99, ("results/never.json",)),
    )  # fmt: skip
    time.sleep(1.1)
    outcomes = gpu_checks.run_checks(checks, sys.executable, out, budget_s=50)
    (out / "summary.md").write_text(gpu_checks.summary_markdown(outcomes, 50))
    with tarfile.open(gpu_checks.pack(checks, outcomes, out, started, root=root)) as tar:
        names = set(tar.getnames())
        assert tar.extractfile("results/fresh.json").read() == b"new"
    assert names == {"out/fresh.log", "out/summary.md", "results/fresh.json"}


def test_check_names_are_unique_across_the_suites_and_their_test_files_exist() -> None:
    names = [check.name for check in ALL_CHECKS]
    assert len(set(names)) == len(names)  # `--only` names a check of either suite
    assert all((gpu_checks.REPO_ROOT / path).is_file() for path in gpu_checks.CUDA_TESTS)


class Parsed(Exception):
    """Raised in place of running a benchmark once its arguments parsed."""


BENCHMARK_CHECKS = [c for c in ALL_CHECKS if c.argv[0] == "-m" and c.argv[1].startswith("benchmarks.")]


@pytest.mark.parametrize("check", BENCHMARK_CHECKS, ids=[c.name for c in BENCHMARK_CHECKS])
def test_every_benchmark_check_parses_its_own_command_line(check, monkeypatch, tmp_path):
    parse_args = argparse.ArgumentParser.parse_args

    def parse_then_stop(self, *args, **kwargs):
        parse_args(self, *args, **kwargs)  # exits 2 on an unknown option or a bad value
        raise Parsed

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
    argv = [arg.replace("{out}", str(tmp_path)) for arg in check.argv[2:]]
    monkeypatch.setattr(sys, "argv", [check.argv[1], *argv])
    monkeypatch.delitem(sys.modules, check.argv[1], raising=False)  # run afresh, as `python -m` does
    with pytest.raises(Parsed):
        runpy.run_module(check.argv[1], run_name="__main__")


def test_the_preflight_imports_what_the_checks_need_and_refuses_a_machine_without_cuda() -> None:
    preflight = [sys.executable, "-c", gpu_checks.PREFLIGHT]
    done = subprocess.run(preflight, capture_output=True, text=True, check=False)
    assert "transformers 5." in done.stdout and "warp 1." in done.stdout, done.stderr
    assert done.returncode == 1 and "no CUDA device" in done.stderr


def test_the_libero_rl_check_is_a_valid_rl_run_from_the_committed_libero_start() -> None:
    from vla_rl.training.jobs import job_config, train_job

    [check] = [c for c in gpu_checks.LIBERO_CHECKS if c.name == "libero_rl"]
    assert check.argv[:3] == ("-m", "vla_rl.cli", "train")
    overrides = [arg.replace("{out}", "runs/x") for arg in check.argv[3:]]
    cfg = job_config(train_job(overrides, None), overrides)  # a ConfigError names a bad key
    assert (cfg.env.backend, cfg.env.task, cfg.env.num_envs) == ("libero", "libero_object/2+3", 16)
    assert cfg.env.options["workers"] == 16 and cfg.device == "cuda"
    assert (gpu_checks.REPO_ROOT / cfg.policy.init_from / "policy_config.json").is_file()
    protocol = next(c for c in gpu_checks.LIBERO_CHECKS if c.name == "libero_protocol")
    assert gpu_checks.LIBERO_START in protocol.argv


def test_only_refuses_a_check_of_the_other_suite(monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "argv", ["gpu_checks", "--suite", "libero", "--only", "pi0_update"])
    with pytest.raises(SystemExit) as exit_info:
        gpu_checks.main()
    assert exit_info.value.code == 2
    assert "--only pi0_update: not in --suite libero" in capsys.readouterr().err
