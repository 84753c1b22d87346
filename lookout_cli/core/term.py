"""The one place that knows about terminals: colour and the messages on standard error."""

from __future__ import annotations

import os
import sys

import click


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
        return click.style(text, **styles) if self.color else text

    def say(self, text: str = "") -> None:
        if not self.quiet:
            click.echo(text, err=True, color=self.color)

    def warn(self, text: str) -> None:
        if not self.quiet:
            click.echo(self.style("lookout: warning: ", fg="yellow") + text, err=True, color=self.color)

    def debug(self, text: str) -> None:
        if self.verbose and not self.quiet:
            click.echo(f"lookout: {text}", err=True)
