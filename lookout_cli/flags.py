"""The flags every command takes, as click options: ``-q``, ``-v``, ``--color`` and
``--isolated`` (``common_options``), and the filter contract's (``filter_options``), which
hand the command a ``Run`` (``lookout_cli.options``).

A command looks like this::

    @click.command()
    @filter_options(side_effects=True)
    def restore(run: Run) -> None:
        transcript = run.load()
        ...  # edit records through transcript.adapter
        run.finish(transcript, {"restored": n})
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click

from lookout_cli.core.errors import Failure
from lookout_cli.core.jsonl import DEFAULT_MAX_RECORD_BYTES
from lookout_cli.formats import ADAPTERS
from lookout_cli.options import Run


class SizeParam(click.ParamType):
    """A byte size such as 256M, 10MB or 1048576."""

    name = "size"
    UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        text = str(value).strip().upper().removesuffix("IB").removesuffix("B")
        unit = text[-1:] if text[-1:] in "KMG" else ""
        try:
            return int(float(text[: len(text) - len(unit)]) * self.UNITS[unit])
        except ValueError:
            self.fail(f"{value!r} is not a size like 256M", param, ctx)


SIZE = SizeParam()


class Failed(click.ClickException):
    """A ``Failure`` as click shows it: a command run by click alone (standalone, as click's test
    runner runs one) says the same line and exits with the same status as ``lookout``."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure
        self.exit_code = failure.exit_code

    def show(self, file=None) -> None:
        self.failure.show()


def common_options(f: Callable) -> Callable:
    """-q, -v, --color and --isolated: for every command, filters or not."""

    @functools.wraps(f)
    def command(*args: Any, **kwargs: Any) -> Any:
        try:
            return f(*args, **kwargs)
        except Failure as exc:
            raise Failed(exc) from None

    for decorator in reversed(
        [
            click.option("-q", "--quiet", is_flag=True, help="Print nothing on standard error but errors."),
            click.option("-v", "--verbose", is_flag=True, help="Say more; show tracebacks on errors."),
            click.option(
                "--color",
                type=click.Choice(["auto", "always", "never"]),
                default="auto",
                show_default=True,
                help="Colour on standard error (auto: only on a terminal and without NO_COLOR).",
            ),
            click.option("--isolated", is_flag=True, help="Ignore config files and LOOKOUT_* settings."),
        ]
    ):
        command = decorator(command)
    return command


def filter_options(side_effects: bool = False) -> Callable:
    """Add the filter contract's options to a command and pass it a ``Run`` as ``run``."""

    def decorate(f: Callable) -> Callable:
        @functools.wraps(f)
        def wrapper(**kwargs: Any) -> Any:
            run = Run.from_flags(click.get_current_context().info_name or f.__name__, kwargs, side_effects)
            return f(run, **kwargs)

        options = [
            click.argument("file", required=False, type=click.Path(dir_okay=False, allow_dash=True)),
            click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True),
                         help="Write the transcript to this file (atomically) instead of standard output."),
            click.option("-i", "--in-place", is_flag=True, help="Replace FILE atomically with the result."),
            click.option("--format", "format_name", type=click.Choice(list(ADAPTERS)),
                         help="The transcript's format (default: detected from its first records)."),
            click.option("--report", "report_path", type=click.Path(dir_okay=False, allow_dash=True),
                         help="Also write the report as JSON to this file ('-' for standard error)."),
            click.option("--strict", is_flag=True, help="Fail on lines that are not JSON instead of passing them."),
            click.option("--max-record-bytes", type=SIZE, default=DEFAULT_MAX_RECORD_BYTES,
                         show_default="256M", help="Refuse a line longer than this."),
            click.option("--from-hook", is_flag=True,
                         help="Read an agent hook event (JSON with transcript_path) on standard input."),
        ]
        if side_effects:
            options += [
                click.option("--dry-run", is_flag=True,
                             help="Write no files and pass the transcript through; report what would change."),
                click.option("--check", is_flag=True, help="Like --dry-run, and exit 1 if anything would change."),
                click.option("--save-dir", type=click.Path(file_okay=False),
                             help="Where cleared content is saved [env: LOOKOUT_SAVE_DIR]."),
            ]
        for option in reversed(options):
            wrapper = option(wrapper)
        return common_options(wrapper)

    return decorate
