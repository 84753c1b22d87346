"""``core.forked.Forked``: a function run in a forked child, its value back through a pipe;
a child that fails gives None (the caller does the work itself), one cancelled is gone."""

from __future__ import annotations

import os
import time

import pytest

from lookout_cli.core import forked


def _pid_and(value):
    return os.getpid(), value


def _fails():
    raise ValueError("a line the child does not read")


def _waits(seconds: float) -> str:
    time.sleep(seconds)
    return "late"


def test_the_value_comes_back_from_another_process():
    child = forked.Forked(_pid_and, {"big": "x" * (1 << 20)})  # more than a pipe holds
    pid, value = child.result()
    assert pid != os.getpid() and value == {"big": "x" * (1 << 20)}


def test_a_child_that_fails_gives_none_and_get_raises():
    assert forked.Forked(_fails).result() is None
    with pytest.raises(forked.ChildFailed):
        forked.Forked(_fails).get()


def test_ready_once_the_child_is_done():
    child = forked.Forked(_waits, 0.3)
    assert not child.ready()
    deadline = time.monotonic() + 10
    while not child.ready() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert child.ready() and child.get() == "late"


def test_a_cancelled_child_is_stopped_and_reaped():
    child = forked.Forked(_waits, 60)
    pid = child.pid
    started = time.monotonic()
    child.cancel()
    assert time.monotonic() - started < 5
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reaped: no zombie left
    child.cancel()  # twice is harmless
