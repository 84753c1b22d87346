"""The ``lookout`` command group and ``main()``, which maps outcomes to exit codes."""

from __future__ import annotations

import gc
import importlib
import importlib.util
import sys

import click

from lookout_cli import __version__
from lookout_cli.core.errors import ExitCode, debugging, outcome

# command name -> module in lookout_cli.commands; imported only when used or listed
COMMANDS = {
    "measure": "measure",
    "mentions": "mentions",
    "compact": "compact",
    "clear-images": "clear_images",
    "memory": "memory",
    "prepare-idle": "prepare_idle",
    "restore": "restore",
    "report": "report",
    "hook": "hook",
    "statusline": "statusline",
}

# What ``lookout --help`` lists, without importing every command (that alone took ~0.1 s).
# The first line of each command's docstring; a test keeps the two the same.
SUMMARIES = {
    "measure": "Report what fills the model's context; pass the transcript through unchanged.",
    "mentions": "Attach what the user @-mentions: files, ranges, folders, git, chats.",
    "compact": "Make room in the context: prune, clamp, summarize, shorten, and truncate as a last resort.",
    "clear-images": "Clear the oldest images the agent has seen once a request carries too many image bytes.",
    "memory": "Keep memories between chats, as Markdown, per scope.",
    "prepare-idle": "Before a quiet chat's prompt cache runs out, summarize it while reading it is still cheap.",
    "restore": "Put cleared tool output, images and dropped turns back from the saved files.",
    "report": "Usage, cost and context health of every session: by session, day, project or model.",
    "hook": "Answer a running agent's hook event: memory, compaction, notes and meter warnings.",
    "statusline": "Print the context meter in one line from a status-line JSON or a transcript.",
}

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class LazyGroup(click.Group):
    """Imports a command's module only when that command is run (or asked for its help)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name, module in COMMANDS.items()
                if importlib.util.find_spec(f"lookout_cli.commands.{module}") is not None]

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(n) for n in names)
        with formatter.section("Commands"):
            formatter.write_dl([(n, click.utils.make_default_short_help(SUMMARIES[n], limit)) for n in names])

    def resolve_command(self, ctx: click.Context, args: list[str]):
        """click suggests among the commands it holds, and this group imports none of them."""
        name = args[0] if args else ""
        if name in COMMANDS or name.startswith("-") or ctx.resilient_parsing:
            return super().resolve_command(ctx, args)
        from difflib import get_close_matches

        near = get_close_matches(name, COMMANDS, n=1)
        ctx.fail(f"No such command {name!r}." + (f" Did you mean {near[0]!r}?" if near else ""))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        try:
            module = _import_holding_ctrl_c(f"lookout_cli.commands.{COMMANDS[name]}")
        except ModuleNotFoundError:
            return None
        return getattr(module, COMMANDS[name])


def _import_holding_ctrl_c(name: str):
    """Import a command's module with Ctrl-C held back and delivered right after: a
    KeyboardInterrupt raised while a C extension initialises can crash the process (orjson
    3.13: SIGSEGV). Only here, where the extensions first load: ``lookout --help`` loads none."""
    import signal

    if not hasattr(signal, "pthread_sigmask"):  # Windows: no signal masks
        return importlib.import_module(name)
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        return importlib.import_module(name)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


@click.group(cls=LazyGroup, context_settings=CONTEXT_SETTINGS, epilog="""\b
Examples:
  lookout measure --report-only session.jsonl
  lookout mentions < chat.jsonl | lookout clear-images | lookout compact > next.jsonl
  lookout restore next.jsonl > original.jsonl

Exit status: 0 success, 1 a check you asked for failed (--fail-at, --check),
2 an error, 130 interrupted, 141 standard output closed.
""")
@click.version_option(__version__, "-V", "--version", prog_name="lookout")
def cli() -> None:
    """Manage an AI coding agent's context window from its JSONL transcript.

    Every command reads a transcript (FILE, or standard input) in the format it came in
    (Claude Code, Codex, OpenAI or Anthropic messages, Gemini CLI), writes the transformed
    transcript to standard output, and reports on standard error.
    """


def main(argv: list[str] | None = None) -> None:
    """Run the CLI with lookout's exit codes (click's own get Ctrl-C and closed pipes wrong)."""
    args = sys.argv[1:] if argv is None else argv
    # A command builds a small object or two per line of its transcript and keeps them to the
    # end, with next to no cycles: Python's default (a collection every 700 new objects, the
    # oldest generation walked as it grows) spent 5-10% of a re-measure walking them.
    gc.set_threshold(100_000, 20, 100)
    try:
        result = cli.main(args=args, prog_name="lookout", standalone_mode=False)
    except click.exceptions.Abort:
        sys.exit(outcome(KeyboardInterrupt()))
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.UsageError as exc:
        exc.show()
        sys.exit(ExitCode.ERROR)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except (Exception, KeyboardInterrupt) as exc:
        sys.exit(outcome(exc, debugging(args)))
    sys.exit(result if isinstance(result, int) else ExitCode.OK)
