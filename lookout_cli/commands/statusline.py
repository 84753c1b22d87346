"""``lookout statusline``: the context meter in one line, for an agent's status line
(lookout_cli.agents.status; ``lookout`` runs it before loading the rest of the command line)."""

from __future__ import annotations

import click


@click.command(epilog="""\b
Claude Code (settings.json; lookout hook install --agent claude adds it):
  "statusLine": {"type": "command", "command": "lookout statusline", "padding": 0}
\b
Examples:
  lookout statusline < status.json             # the JSON Claude Code sends
  lookout statusline --color never SESSION.jsonl
\b
Shows: the percent of the budget in the meter's colour (hidden under 10%, amber
from meter.amber, red at the summary point), tokens used of the budget, the
summary point (or that compaction is due), how long the prompt cache stays warm,
and the session's cost as the agent reports it. The figures are the provider's
count of the last response, read from the end of the transcript, plus an estimate
of what was added since (what measure reports, within a point); the window and
summary point follow the model and your configuration, as measure's do. Codex has
no status-line command (its status line shows built-in items only); use
lookout statusline ROLLOUT.jsonl from a shell or a terminal multiplexer.
\b
Exit status: 0 (a problem is shown in the line itself: a status line never fails).
""")
@click.argument("file", required=False, type=click.Path(dir_okay=False))
@click.option("--color", type=click.Choice(("auto", "always", "never")), default="auto", show_default=True,
              help="ANSI colours (auto: on unless NO_COLOR is set; the agent draws them).")
def statusline(file: str | None, color: str) -> None:
    """Print the context meter in one line from a status-line JSON or a transcript.

    Reads the session JSON Claude Code passes to its status line on standard input
    (transcript_path, model, cost) or the transcript FILE, and prints one line.
    """
    from lookout_cli.agents.status import main

    main(([file] if file else []) + ["--color", color])
