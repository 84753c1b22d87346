"""Exit codes and the exceptions that carry them (SPEC §1)."""

from __future__ import annotations

import enum
import os
import sys

from lookout_cli.core.term import echo


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


class Failure(Exception):
    """An outcome that ends a run with its exit code and says so on standard error (``show``).
    Not click's: a quiet measure of a grown file runs without click (meter.replay)."""

    exit_code = ExitCode.ERROR

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def format_message(self) -> str:
        return self.message

    def show(self, file=None) -> None:
        echo(f"lookout: error: {masked(self.message)}")


class LookoutError(Failure):
    """A runtime error: one line on standard error, exit 2, with any secret in it masked."""


class CheckFailed(Failure):
    """A check the user asked for failed (``--fail-at``, ``--check``): exit 1."""

    exit_code = ExitCode.CHECK_FAILED

    def show(self, file=None) -> None:
        if self.message:
            echo(f"lookout: {self.message}")


class PipeClosed(Failure):
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


def outcome(exc: BaseException, verbose: bool = False) -> int:
    """Say on standard error how ``exc`` ended a run, in one line (a traceback too when
    ``verbose``, for the unexpected), and give the run's exit status (SPEC §1)."""
    if isinstance(exc, KeyboardInterrupt):
        echo("lookout: interrupted")
        return ExitCode.INTERRUPTED
    if isinstance(exc, Failure) or hasattr(exc, "show") and hasattr(exc, "exit_code"):  # click's say themselves too
        exc.show()
        return exc.exit_code
    if isinstance(exc, BrokenPipeError):
        PipeClosed().show()
        return ExitCode.BROKEN_PIPE
    if isinstance(exc, MemoryError):
        echo("lookout: error: out of memory (is a record unreasonably large?)")
        return ExitCode.ERROR
    if verbose:  # imported only here: traceback costs every run 2 ms
        import traceback

        traceback.print_exception(exc)
    if isinstance(exc, OSError):
        name = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        echo(masked(f"lookout: error: {name}{exc.strerror or exc}"))
    else:  # an unexpected failure still gets one line and exit 2
        echo(masked(f"lookout: error: internal error: {type(exc).__name__}: {exc} (run with -v for details)"))
    return ExitCode.ERROR


def debugging(args: list[str]) -> bool:
    """Whether a failure shows its traceback: -v, --verbose or LOOKOUT_DEBUG."""
    debug = os.environ.get("LOOKOUT_DEBUG", "").strip().lower() in ("1", "true", "yes", "on")  # not "0"
    return "-v" in args or "--verbose" in args or debug
