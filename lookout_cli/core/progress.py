"""A progress line on standard error for long runs: the stage a command is in and how far.

It shows only on a terminal, never with -q or under --from-hook (``start``), and only once the
run has taken ``DELAY`` seconds, so a fast run prints nothing. It is redrawn at most every
``INTERVAL`` seconds, only from ``update`` (no thread: the token counters fork worker processes),
and erased when its stage ends (the stage around it, if any, is shown again), so a report, a
warning or an error line starts on a clean line. Where it does not show, ``update`` is one
global lookup::

    progress.start(show=not quiet)
    with progress.stage("reading", total=size, unit="bytes", at=handle.tell):
        for line in handle:
            progress.update()  # how far: ``at()``, or the number passed

click's progressbar was not used: it draws from the first item (no delay), knows one label
and a total, not stages, and leaves its last bar on the screen instead of erasing it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator

DELAY = 0.75  # seconds a run goes before it shows progress
INTERVAL = 0.2  # seconds between redraws at most


class _Line:
    """The line on a terminal: what it says, and how many characters to blank."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.shows_from = self.due = time.monotonic() + DELAY
        self.drawn = 0
        try:
            columns = os.get_terminal_size(stream.fileno()).columns
        except (AttributeError, OSError, ValueError):
            columns = 0
        self.columns = (columns or 80) - 1  # a line that wraps cannot be erased with \r
        self.label, self.total, self.unit, self.at, self.done = "", None, "", None, None

    def text(self) -> str:
        done, total, unit = self.done, self.total, self.unit
        if done is None:
            return f"lookout: {self.label}..."
        if unit == "bytes":
            shown = f"{done / 1e6:,.1f}" + (f" of {total / 1e6:,.1f}" if total else "") + " MB"
        else:
            shown = f"{done:,}" + (f" of {total:,}" if total else "") + f" {unit}"
        if total:
            shown += f" ({min(100, 100 * done // total)}%)"
        return f"lookout: {self.label}: {shown}"

    def draw(self, now: float) -> None:
        self.due = now + INTERVAL
        if self.at is not None:
            self.done = self.at()
        text = self.text()[: self.columns]
        self.write("\r" + text.ljust(self.drawn))
        self.drawn = len(text)

    def erase(self) -> None:
        if self.drawn:
            self.write("\r" + " " * self.drawn + "\r")
            self.drawn = 0

    def write(self, text: str) -> None:
        global _line
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # standard error closed or gone: no progress, no error
            _line = None


_line: _Line | None = None  # the run's progress line, when it may show


def start(show: bool = True) -> None:
    """Let this run show progress if ``show`` (not -q, not --from-hook) and standard error is
    a terminal (not TERM=dumb, where a line cannot be redrawn). The delay counts from the first
    call; later ones change nothing."""
    global _line
    stream = sys.stderr
    if _line is not None and _line.stream is stream:
        return
    shows = show and stream is not None and os.environ.get("TERM") != "dumb"
    try:
        shows = shows and stream.isatty()
    except (AttributeError, OSError, ValueError):
        shows = False
    _line = _Line(stream) if shows else None


@contextlib.contextmanager
def stage(label: str, total: int | None = None, unit: str = "", at: Callable[[], int] | None = None
          ) -> Iterator[None]:
    """Show ``label`` while the block runs: with ``update(done)``, how far of ``total`` ``unit``
    ("bytes" shows MB); with ``at``, ``update()`` asks it how far. The line is erased when the
    block ends (an error too) and the stage around it, if any, goes on."""
    line = _line
    if line is None:
        yield
        return
    outer = line.label, line.total, line.unit, line.at, line.done
    line.label, line.total, line.unit, line.at, line.done = label, total, unit, at, (0 if unit else None)
    try:
        now = time.monotonic()
        if now >= line.shows_from:
            if unit:
                line.due = now + INTERVAL  # drawn by ``update`` if it lasts: no flash of a quick one
            else:
                line.draw(now)  # a stage that updates nothing is named as it starts
        yield
    finally:
        line.label, line.total, line.unit, line.at, line.done = outer
        now = time.monotonic()
        if line.label and now >= line.shows_from:
            line.draw(now)  # the stage around it again
        else:
            line.erase()


def update(done: int | None = None) -> None:
    """Say how far the current stage is (``done``, else its ``at``); redrawn when it is time."""
    line = _line
    if line is None or not line.label:  # not shown, or between stages
        return
    if done is not None:
        line.done = done
    now = time.monotonic()
    if now >= line.due:
        line.draw(now)


def erase() -> None:
    """Blank the line before something else is written to standard error (``update`` draws it
    again)."""
    if _line is not None:
        _line.erase()
