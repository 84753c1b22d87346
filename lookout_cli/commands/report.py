"""``lookout report``: usage, cost and context health of every session at once, by session,
day, project or model, over the agents' own folders or the files and folders given."""

from __future__ import annotations

import sys

import click

from lookout_cli.config import Config
from lookout_cli.core import progress
from lookout_cli.core.errors import LookoutError
from lookout_cli.core.term import Reporter, wants_color
from lookout_cli.core.units import setting_number
from lookout_cli.flags import common_options
from lookout_cli.options import report_json, write_stdout

EPILOG = """\b
Examples:
  lookout report                                  # every session in ~/.claude and ~/.codex
  lookout report --by day --since 2026-05-01
  lookout report --by project --json | jq '.rows[] | {project, cost_usd}'
  lookout report --csv ~/archive/transcripts > usage.csv
  lookout report --jobs 4 /srv/transcripts/team-a

\b
PATH is a transcript or a folder (every *.jsonl under it, at any depth); without one, the
agents' own folders: Claude Code's projects in each folder of $CLAUDE_CONFIG_DIR, else in
~/.config/claude and ~/.claude, and Codex's sessions in each of $CODEX_HOME, else in ~/.codex
(each variable a comma-separated list, as ccusage reads them). A Claude Code subagent's file (SESSION/subagents/*.jsonl) counts
in its session.

\b
Usage follows the providers' accounting, as ccusage counts it: a Claude Code response counts
once (its message id and request id), with its last line's usage, whichever files hold it,
subagents' requests included; a Codex request is its token_count event, its input less the
cached part. Cost is at API prices (the models file). Only the lines that record usage,
compactions and tool results are read, and only usage and compaction lines are parsed: a
cheap pass, run again only over what changed (each file's row is kept in the cache folder;
an unchanged file costs a stat; --no-cache reads them all). --jobs N reads in N processes.

\b
Context health, per session's main conversation: the peak context (a request's input, cache
read and cache write as a share of the model's budget, and when), compactions, the time the
context spent amber (from meter.amber, 75%) or red (from meter.red, the model's summary point;
a request's level holds until the next one, at most 15 minutes), and the reclaimable tokens,
estimated from the size of the tool results since the last compaction but the newest three
(about 4 bytes a token, at most the last prompt): lookout measure gives the exact figure for
one session. By day a session's health goes to the day of its last activity, by model to the
model that served most of its requests.

\b
A file in another format, unreadable or empty, and a usage line that is not JSON, are listed
as skipped with the reason; they never stop the report. The report goes to standard output:
a table, --json (schema lookout.report/1) or --csv.

\b
--json gives {"schema": "lookout.report/1", "by", "since", "until", "project", "files",
"rows", "totals", "skipped"}: each row (and the totals, whose --by field is null) has
sessions, requests, input, cache_write, cache_read, output, total_tokens, cost_usd (null when
no request's model has prices), unpriced_requests, cache_read_share, peak_percent,
peak_tokens, peak_at, peak_session, compactions, amber_seconds, red_seconds,
reclaimable_tokens, first_activity and last_activity; by session also project, format,
models and files. Each skipped entry is {"path", "line" (null: the whole file), "reason"}.

\b
Exit status: 0 reported (files skipped included); 2 an error (a PATH that does not exist,
a bad option).
"""


@click.command(epilog=EPILOG)
@click.argument("paths", nargs=-1, type=click.Path(), metavar="[PATH]...")
@click.option("--by", type=click.Choice(["session", "day", "project", "model"]), default="session",
              show_default=True, help="One line per session, day (local time), project or model.")
@click.option("--since", metavar="DATE", help="Only requests from this day (2026-05-01 or 20260501) or ISO time.")
@click.option("--until", metavar="DATE", help="Only requests up to this day (included) or ISO time.")
@click.option("--project", "project", metavar="TEXT", help="Only sessions whose project folder holds TEXT.")
@click.option("--json", "json_out", is_flag=True, help="Print the report as JSON (schema lookout.report/1).")
@click.option("--csv", "csv_out", is_flag=True, help="Print the report as CSV, the totals last.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), metavar="N",
              help="Read the files in N processes [config: report.jobs; default: 1].")
@click.option("--no-cache", is_flag=True, help="Read every file again (do not use or keep the rows of the last run).")
@common_options
def report(paths, by, since, until, project, json_out, csv_out, jobs, no_cache, quiet, verbose, color,
           isolated) -> None:
    """Usage, cost and context health of every session: by session, day, project or model.

    Reads Claude Code sessions and Codex rollouts (PATH, else the agents' own folders) and
    shows, per line: sessions, requests, input, cache write, cache read and output tokens,
    cost at API prices, the share of prompt tokens read from cache, the peak context and
    when, compactions, the time the context spent amber and red, the reclaimable tokens
    (estimated) and the last activity; then the totals and any file skipped, with why.
    """
    from lookout_cli.fleet.aggregate import aggregate
    from lookout_cli.fleet.index import agent_folders, rows
    from lookout_cli.settings import as_number

    if json_out and csv_out:
        raise click.UsageError("--json and --csv cannot be used together")
    reporter = Reporter(quiet=quiet, verbose=verbose, color=color)
    config = Config(isolated=isolated)
    for warning in config.warnings:
        reporter.warn(warning)
    amber, red = (setting_number(config.setting(key, None), key) for key in ("meter.amber", "meter.red"))
    try:
        jobs = as_number(config.setting("report.jobs", jobs, 1), int, 1)
    except ValueError as exc:
        raise LookoutError(f"report.jobs: {exc}") from None
    roots = list(paths) or agent_folders()
    if not paths and not roots:
        reporter.warn("no agent folders found (~/.claude/projects, ~/.codex/sessions): nothing to report")
    progress.start(show=not quiet)
    try:
        with progress.stage("reading transcripts", unit="files"):
            found, read = rows(roots, amber, red, jobs, cache=not no_cache, progress=_counter())
    except FileNotFoundError as exc:
        raise LookoutError(f"{exc.filename}: no such file or folder") from None
    try:
        result = aggregate(found, by, since, until, project)
    except ValueError as exc:  # "since: ..." or "until: ..."
        raise click.UsageError(f"--{exc}") from None
    if json_out:
        write_stdout(report_json(result))
    elif csv_out:
        from lookout_cli.fleet.render import to_csv

        write_stdout(to_csv(result).encode())
    else:
        from lookout_cli.fleet.render import table

        colour = wants_color(color, sys.stdout)
        write_stdout(table(result, (lambda t, **kw: click.style(t, **kw)) if colour else None).encode())
    reporter.say(f"report: {len(found)} file(s), {read} read, {len(found) - read} unchanged since the last run; "
                 f"{len(result['skipped'])} skipped")


def _counter():
    """Tells the progress line how many files were read so far."""
    done = 0

    def one(_: int) -> None:
        nonlocal done
        done += 1
        progress.update(done)

    return one
