"""What a person types on the actor's terminal (``console_input.ConsoleLines`` over a real pipe, read by
its background thread): keyboard success labels (``success.kind: keyboard``) and console-confirmed
resets (``reset.kind: person``). The ROS-topic confirmation of a person reset is not covered here."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from typing import TextIO

import pytest
from vla_rl.real_world.console_input import ConsoleLines
from vla_rl.real_world.online_config import ResetSection
from vla_rl.real_world.online_reset import PersonReset
from vla_rl.real_world.online_success import KeyboardSuccess
from vla_rl.real_world.robot import RobotError

READ_TIMEOUT_S = 5.0


@pytest.fixture
def terminal() -> Iterator[tuple[ConsoleLines, TextIO]]:
    """A console reading one end of a pipe, and the other end to type into."""
    read_fd, write_fd = os.pipe()
    typed = os.fdopen(write_fd, "w")
    console = ConsoleLines(os.fdopen(read_fd, "r"))
    yield console, typed
    if not typed.closed:
        typed.close()


def type_line(typed: TextIO, console: ConsoleLines, line: str) -> None:
    """Type ``line`` and wait until the console's thread has queued it."""
    typed.write(line + "\n")
    typed.flush()
    deadline = time.monotonic() + READ_TIMEOUT_S
    while console.lines.empty():
        assert time.monotonic() < deadline, "the console never read the line"
        time.sleep(0.01)


def test_keyboard_labels_end_an_episode_on_s_or_f_and_ignore_anything_else(terminal) -> None:  # noqa: ANN001
    console, typed = terminal
    success = KeyboardSuccess(console)
    assert success.judge(None, 0.05).success is False  # nothing typed: the episode goes on
    type_line(typed, console, "  S ")  # case and spaces do not matter
    judged = success.judge(None, 0.05)
    assert judged.success and judged.ended == ""
    type_line(typed, console, "maybe")
    judged = success.judge(None, 0.05)
    assert not judged.success and judged.ended == ""
    type_line(typed, console, "f")
    judged = success.judge(None, 0.05)
    assert not judged.success and judged.ended == "failure"
    type_line(typed, console, "s")  # typed during the reset: meant for the episode that ended
    success.reset()
    assert success.judge(None, 0.05).success is False


def test_a_person_reset_waits_for_enter_and_times_out_or_fails_when_nobody_can_answer(terminal) -> None:  # noqa: ANN001
    console, typed = terminal
    reset = PersonReset(ResetSection(kind="person", person_timeout_s=0.3), console)
    type_line(typed, console, "s")  # an old label is dropped, not taken as the confirmation
    with pytest.raises(RobotError, match="nobody confirmed"):
        reset.reset(seed=0)
    patient = PersonReset(ResetSection(kind="person", person_timeout_s=READ_TIMEOUT_S), console)
    press_enter = threading.Timer(0.2, lambda: (typed.write("\n"), typed.flush()))
    press_enter.start()  # pressed while the reset waits (what was typed before it is dropped)
    before = time.time()
    assert patient.reset(seed=1) >= before + 0.15  # Enter confirmed it; the time it did is returned
    press_enter.join()
    typed.close()  # the terminal is gone: nobody can confirm any more
    unbounded = PersonReset(ResetSection(kind="person", person_timeout_s=0.0), console)
    with pytest.raises(RobotError, match="terminal closed"):
        unbounded.reset(seed=2)
