"""``lookout hook``: answer a running agent's hook events (Claude Code, Codex), and install the
recipes that run it (lookout_cli.agents)."""

from __future__ import annotations

import sys

import click

from lookout_cli.agents.events import AGENTS, CLAUDE

EPILOG = """\b
Install (merges into your settings, keeps a backup, changes nothing when run again):
  lookout hook install --agent claude              # ~/.claude/settings.json
  lookout hook install --agent claude --scope project
  lookout hook install --agent codex               # ~/.codex/hooks.json
  lookout hook install --agent codex --print       # show the result, write nothing

\b
What each event gets:
  SessionStart      the memory lists as context (startup, resume, clear)
  PreCompact        a saved copy of the conversation; Claude Code's summary is told
                    what must survive (instructions word for word, open tasks,
                    files changed, errors)
  SessionStart      after a compaction: what the summary tends to lose, and the
    (compact)       path of the saved conversation to search
  UserPromptSubmit  '# note', '#! note' and 'remember that ...' saved; one line to
                    you when the meter turns amber or red or compaction is due
  Stop              memory learn over the session, at most every 10 minutes

\b
The event is read from standard input as the agent sends it; the answer is
printed in that agent's protocol. Whatever goes wrong becomes one short line for
you (exit 0): a hook never stops its agent. A session that is not running is
better edited in place and resumed: lookout compact -i SESSION, then
claude --resume ID or codex resume ID.
"""


@click.group(invoke_without_command=True, epilog=EPILOG)
@click.option("--agent", type=click.Choice(AGENTS), help="The agent that sends the event (default: told from the event).")
@click.pass_context
def hook(ctx: click.Context, agent: str | None) -> None:
    """Answer a running agent's hook event: memory, compaction, notes and meter warnings.

    Reads one Claude Code or Codex hook event (JSON) on standard input and prints the
    answer in that agent's protocol.
    """
    if ctx.invoked_subcommand is not None:
        return
    from lookout_cli.agents import hooks

    raw = hooks.pending if hooks.pending is not None else (
        b"" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.buffer.read(16 << 20))
    out, err = hooks.respond(raw, agent, _memory_block)
    _emit(out)
    if err:
        _emit(err, err=True)


def _emit(data: bytes, err: bool = False) -> None:
    stream = sys.stderr if err else sys.stdout
    try:
        stream.buffer.write(data)
        stream.flush()
    except (OSError, ValueError, AttributeError):
        pass


def _memory_block(cwd: str | None) -> str | None:
    """The memory lists a chat in ``cwd`` starts with, as ``memory inject`` puts them in."""
    import os

    from lookout_cli.commands.memory import render_memory_block

    from lookout_cli.config import Config
    from lookout_cli.memory.project import everywhere_scope, resolve_project
    from lookout_cli.settings import yes_no

    scopes = []
    if yes_no(Config().get("memory.read_everywhere", True)):
        scopes.append(("Everywhere (your preferences, in every project)", everywhere_scope()))
    folder = cwd if cwd and os.path.isdir(cwd) else None
    scope = resolve_project(folder, create=False).scope
    scopes.append((f"Project {scope.name}", scope))
    return render_memory_block(scopes)[0]


@hook.command(epilog="""\b
Examples:
  lookout hook install --agent claude
  lookout hook install --agent codex --scope project
  lookout hook install --agent claude --print > settings.json
""")
@click.option("--agent", type=click.Choice(AGENTS), required=True, help="Claude Code or Codex.")
@click.option("--scope", type=click.Choice(("user", "project")), default="user", show_default=True,
              help="Your settings, or the project's (.claude/ or .codex/ in the working folder).")
@click.option("--file", "path", type=click.Path(dir_okay=False), help="Merge into this file instead.")
@click.option("--print", "just_print", is_flag=True, help="Print the merged settings; write nothing.")
def install(agent: str, scope: str, path: str | None, just_print: bool) -> None:
    """Merge the recipe that runs lookout into an agent's settings.

    Adds `lookout hook` to SessionStart, UserPromptSubmit, PreCompact and Stop where it is
    not there yet, and (Claude Code) `lookout statusline` as the status line unless you have
    your own; removes earlier lookout recipes that never reached the model; keeps every
    other setting. The file replaced is kept as FILE.lookout-backup.
    """
    import json
    from pathlib import Path

    from lookout_cli.agents.install import install as merge_into
    from lookout_cli.agents.install import settings_path
    from lookout_cli.core.errors import LookoutError

    target = Path(path) if path else settings_path(agent, scope)
    try:
        merged, changes, notes, backup = merge_into(target, agent, dry_run=just_print)
    except (ValueError, TypeError) as exc:  # not JSON, or not settings
        raise LookoutError(f"{target}: {exc}") from None
    if just_print:
        click.echo(json.dumps(merged, indent=2, ensure_ascii=False))
    for change in changes + notes:
        click.echo(f"hook install: {target}: {change}", err=True)
    if not changes:
        click.echo(f"hook install: {target}: already installed", err=True)
    if backup is not None:
        click.echo(f"hook install: the previous file is kept as {backup}", err=True)
    if agent != CLAUDE and changes and not just_print:
        click.echo("hook install: Codex runs only hooks you have trusted: review them once in codex", err=True)
