"""The one place that knows about terminals: colour and the messages on standard error."""

from __future__ import annotations

import os
import re
import sys

_ANSI = re.compile(r"\033\[[0-?]*[ -/]*[@-~]")  # click._compat._ansi_re


def echo(text: str, color: bool = False, nl: bool = True) -> None:
    """``text`` on standard error, as ``click.echo(text, err=True, color=color)`` writes it (colour
    codes taken out unless ``color``), without loading click: a quiet measure of a grown file
    runs without it."""
    stream = sys.stderr
    if stream is None:
        return
    if not color and "\x1b" in text:
        text = _ANSI.sub("", text)
    stream.write(text + "\n" if nl else text)
    stream.flush()


def wants_color(choice: str = "auto", stream=None) -> bool:
    """Colour only on a terminal, never with a non-empty NO_COLOR or TERM=dumb (unless forced)."""
    if choice == "always":
        return True
    if choice == "never" or os.environ.get("NO_COLOR"):
        return False
    stream = stream or sys.stderr
    return bool(getattr(stream, "isatty", lambda: False)()) and os.environ.get("TERM") != "dumb"


class Reporter:
    """Human messages on standard error. ``quiet`` keeps only errors."""

    def __init__(self, quiet: bool = False, verbose: bool = False, color: str = "auto") -> None:
        self.quiet = quiet
        self.verbose = verbose
        self.color = wants_color(color)

    def style(self, text: str, **styles) -> str:
        if not self.color:
            return text
        import click  # only on a terminal (or --color always)

        return click.style(text, **styles)

    def say(self, text: str = "") -> None:
        if not self.quiet:
            echo(text, self.color)

    def warn(self, text: str) -> None:
        if not self.quiet:
            echo(self.style("lookout: warning: ", fg="yellow") + text, self.color)

    def debug(self, text: str) -> None:
        if self.verbose and not self.quiet:
            echo(f"lookout: {text}")
