"""Console output of a run: warnings and library logs go to <run_dir>/train.log, one bar per phase."""

from __future__ import annotations

import logging
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from toy_env import TOY_OVERRIDES

from vla_rl.config import compose_train_config
from vla_rl.training import loggers
from vla_rl.training.loggers import ConsoleSink
from vla_rl.training.progress import LOG_FILENAME, PROGRESS_ENV, bars_enabled, phase_bar, run_console
from vla_rl.training.runner import Trainer


class _StderrNow(logging.StreamHandler):
    """A handler on whatever ``sys.stderr`` is when it writes (pytest swaps it between test phases)."""

    @property
    def stream(self) -> object:  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, _value: object) -> None:
        pass


@pytest.fixture
def console_handler() -> Iterator[logging.StreamHandler]:
    """What ``vla-rl`` sets up (``logging.basicConfig``): a root handler on stderr at INFO."""
    handler = _StderrNow()
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    yield handler
    root.removeHandler(handler)
    root.setLevel(level)


def test_warnings_and_library_logs_go_to_the_log_file_not_the_console(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], console_handler: logging.StreamHandler
) -> None:
    library = logging.getLogger("some_library")
    loud = logging.getLogger("loud_library")  # prints on its own, as transformers' logger does
    loud.addHandler(logging.StreamHandler(sys.stderr))
    loud.propagate = False
    try:
        with run_console(tmp_path) as log_file:
            warnings.warn("deprecated thing used in the run", DeprecationWarning, stacklevel=1)
            library.warning("library chatter")
            loud.warning("loud library chatter")
            logging.getLogger("vla_rl.training.example").info("our own message")
            library.error("library failure")
    finally:
        loud.handlers.clear()
        loud.propagate = True
    assert log_file == tmp_path / LOG_FILENAME
    logged = log_file.read_text()
    console = capfd.readouterr().err
    for text in ("deprecated thing used in the run", "library chatter", "loud library chatter"):
        assert text in logged
        assert text not in console
    # Our messages and anyone's errors reach both.
    for text in ("our own message", "library failure"):
        assert text in logged and text in console


def test_after_the_run_warnings_and_loggers_are_as_before(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], console_handler: logging.StreamHandler
) -> None:
    with run_console(tmp_path):
        pass
    assert console_handler.filters == []
    log_file = str(tmp_path / LOG_FILENAME)
    assert all(getattr(h, "baseFilename", None) != log_file for h in logging.getLogger().handlers)
    logging.getLogger("some_library").warning("after the run")
    assert "after the run" in capfd.readouterr().err
    assert "after the run" not in (tmp_path / LOG_FILENAME).read_text()


def test_an_inner_run_console_keeps_the_outer_log(tmp_path: Path) -> None:
    with run_console(tmp_path / "outer") as outer:
        with run_console(tmp_path / "inner") as inner:
            warnings.warn("inside the inner one", UserWarning, stacklevel=1)
        warnings.warn("after the inner one", UserWarning, stacklevel=1)
    assert inner == outer
    assert not (tmp_path / "inner").exists()
    assert "inside the inner one" in outer.read_text() and "after the inner one" in outer.read_text()


def test_warnings_while_the_trainer_loads_and_trains_end_in_the_runs_log(
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    console_handler: logging.StreamHandler,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    find_checkpoint = Trainer._find_resume_checkpoint

    def find_checkpoint_with_warning(self: Trainer) -> object:
        warnings.warn("a deprecation met while loading", DeprecationWarning, stacklevel=1)
        return find_checkpoint(self)

    monkeypatch.setattr(Trainer, "_find_resume_checkpoint", find_checkpoint_with_warning)
    trainer = Trainer(compose_train_config([*TOY_OVERRIDES, f"run_dir={tmp_path}", "total_env_steps=80"]))
    update = trainer.algorithm.update

    def update_with_warning(*args: object, **kwargs: object) -> object:
        warnings.warn("an upstream deprecation", FutureWarning, stacklevel=1)
        return update(*args, **kwargs)

    trainer.algorithm.update = update_with_warning  # type: ignore[method-assign]
    try:
        assert trainer.train().iterations == 1
    finally:
        trainer.close()
    logged = (tmp_path / LOG_FILENAME).read_text()
    console = capfd.readouterr().err
    assert "DeprecationWarning: a deprecation met while loading" in logged
    assert "FutureWarning: an upstream deprecation" in logged
    assert "a deprecation met while loading" not in console and "an upstream deprecation" not in console


def test_bars_draw_on_a_terminal_only_unless_forced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    assert not bars_enabled()
    assert phase_bar("training", 10, "step").disable
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert bars_enabled()
    monkeypatch.setenv(PROGRESS_ENV, "0")
    assert not bars_enabled()
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    monkeypatch.setenv(PROGRESS_ENV, "1")
    assert bars_enabled()


def test_a_phase_bar_shows_the_phase_the_rate_and_the_success(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(PROGRESS_ENV, "1")
    bar = phase_bar("evaluation", 4, "episode")
    bar.update(4)
    bar.set_postfix(success="0.75")
    bar.close()
    shown = capfd.readouterr().err
    assert "evaluation" in shown and " 4/4 " in shown and "episode/s" in shown and "success=0.75" in shown


def test_the_training_bar_of_a_chunk_trainer_counts_iterations_and_shows_env_steps_per_s(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(PROGRESS_ENV, "1")
    clock = [100.0]
    monkeypatch.setattr(loggers, "time", SimpleNamespace(perf_counter=lambda: clock[0]))
    sink = ConsoleSink(10, 0, unit="iteration")  # opened at t = 100 s
    clock[0] = 102.0
    sink.log({"rollout/env_steps": 400.0, "rollout/success_rate": 0.25}, 1)  # 400 steps / 2 s
    clock[0] = 104.0
    sink.log({"rollout/env_steps": 800.0, "rollout/success_rate": 0.5}, 2)  # 1200 steps / 4 s
    sink.close()
    shown = capfd.readouterr().err
    assert "sps=200, success=0.25" in shown
    assert "sps=300, success=0.50" in shown
    assert " 2/10 " in shown and "iteration/s" in shown
