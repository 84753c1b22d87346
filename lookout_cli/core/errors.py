"""Exit codes and the exceptions that carry them (SPEC §1)."""

from __future__ import annotations

import enum
import os
import sys

import click


class ExitCode(enum.IntEnum):
    OK = 0
    CHECK_FAILED = 1
    ERROR = 2
    INTERRUPTED = 130
    BROKEN_PIPE = 141


def masked(text: str) -> str:
    """``text`` with whatever the secret gate finds in it masked: an error message may quote a
    transcript, a variable or what a command printed."""
    from lookout_cli.core.secrets import redact  # only on an error

    return redact(text)[0]


def quoted(value: object, longest: int = 12) -> str:
    """``value`` as an error message may quote it (a setting's value): whole only when short and
    the secret gate finds nothing in it, else masked (``ghp_…Ae17``), as the gate may miss a
    bare key."""
    from lookout_cli.core.secrets import first, mask

    if isinstance(value, (int, float)):  # read as a number (2.5, -1): no secret
        return repr(value)
    text = str(value)
    return repr(mask(text) if len(text) > longest or first(text) else text)


class LookoutError(click.ClickException):
    """A runtime error: one line on standard error, exit 2, with any secret in it masked."""

    exit_code = ExitCode.ERROR

    def show(self, file=None) -> None:
        click.echo(f"lookout: error: {masked(self.format_message())}", err=True)


class CheckFailed(click.ClickException):
    """A check the user asked for failed (``--fail-at``, ``--check``): exit 1."""

    exit_code = ExitCode.CHECK_FAILED

    def show(self, file=None) -> None:
        if self.message:
            click.echo(f"lookout: {self.message}", err=True)


class PipeClosed(click.ClickException):
    """The reader of standard output went away (``| head``): exit 141 silently."""

    exit_code = ExitCode.BROKEN_PIPE

    def __init__(self) -> None:
        super().__init__("")

    def show(self, file=None) -> None:
        # Point stdout at /dev/null so the interpreter's final flush cannot fail again.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except OSError:
            pass
