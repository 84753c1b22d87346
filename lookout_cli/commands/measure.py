"""``lookout measure``: the context meter. Passes the transcript through and reports what fills
the model's context, what the provider counted, what it cost and what could be reclaimed."""

from __future__ import annotations

import click

from lookout_cli.flags import filter_options
from lookout_cli.measure import run_measure
from lookout_cli.meter.analysis import PRESETS
from lookout_cli.meter.report import SCHEMA_TEXT
from lookout_cli.options import Run


class Percent(click.ParamType):
    """A percentage such as 80 or 80%."""

    name = "pct"

    def convert(self, value, param, ctx):
        if isinstance(value, (int, float)):
            return float(value)
        text = str(value).strip().removesuffix("%")
        try:
            number = float(text)
        except ValueError:
            self.fail(f"{value!r} is not a percentage like 80 or 80%", param, ctx)
        if not 0 <= number <= 1000:
            self.fail(f"{value!r} is out of range (0-1000)", param, ctx)
        return number


PERCENT = Percent()

EPILOG = """\b
Examples:
  lookout measure --report-only ~/.claude/projects/-w-app/SESSION.jsonl
  lookout mentions < chat.jsonl | lookout compact | lookout measure > next.jsonl
  lookout measure --json session.jsonl | jq '.used.percent'
  lookout measure --fail-at 85 -q session.jsonl > /dev/null   # in a git hook or CI
  lookout measure --plot context.png --report report.json < rollout.jsonl > /dev/null

\b
Reads the whole transcript (the view of the model-visible context needs every record) but
keeps only where each line is and a small summary of it, so memory grows with the number of
lines, not their size (input from a pipe is kept in a temporary file meanwhile); the
transcript passes through byte for byte. The report goes to standard error, or to standard
output with --report-only (text) or --json, and as JSON to --report FILE.

\b
Counts of text blocks are kept in a cache keyed by content (tokens.sqlite3 in the cache
folder, $LOOKOUT_CACHE_DIR or $XDG_CACHE_HOME/lookout), so measuring a grown or rewritten
transcript again tokenizes only new blocks. Of a Claude Code FILE, what each line gave is kept
as well (state/*.lines): when the file only grew, the lines measured before are not read
again; when it was rewritten, lines with the same bytes are not parsed again. A FILE measured
before and unchanged since (same inode, size, time and guard hashes; same settings and setup
files) is not parsed at all: its figures are reused and only the warm-cache time is worked
out anew; a quiet run (-q, the transcript to standard output, no report) made again the same
way (arguments, folder, environment, config files) is replayed: the file copied out, the same
status, without loading the rest of lookout; once the file changed, it is measured
again without loading the command line. --no-cache turns all of this off. --jobs N
reads and counts a cold pass in N processes: what the model sees (the last quarter of a large
file, a compacted session's last segment) is counted while the file is read, and a long
session's lines before its last compaction are read half in another process.
--usage-only parses only the lines that record usage (a fast cost and context check: the
provider's counts, no parts; usages are taken in file order, not along the conversation's
branches; other lines are not checked for JSON but with --strict).

\b
Every figure is marked exact (a provider count recorded in the transcript: the last response's
input, cache write and cache read, and the cache totals), estimated (counted with the model's
tiktoken encoding, or the fast estimate with --estimate), inferred (setup the transcript does
not record, worked out from the first prompt recorded since the last compaction, else from
the session's first) or read from a file (--system, --tools, --rules, --skills, or CLAUDE.md /
AGENTS.md found in the transcript's working folder).

\b
The meter is hidden under 10%, amber from meter.amber (75%) and red from meter.red (the
model's summary point); --preset localpilot makes them 65% and 85%. Compaction is due at
compaction.threshold_percent when set, or when the room left falls to the reserve.

\b
Exit status: 0 measured; 1 the context is at or over --fail-at (the transcript is still
written first); 2 an error.
"""


@click.command(epilog=EPILOG + SCHEMA_TEXT)
@filter_options(side_effects=False)
@click.option("--model", "model_name", metavar="NAME", help="Measure for this model (default: the transcript's own).")
@click.option("--budget", metavar="SIZE", help="The context budget: tokens (200k, 1.5M) or a share of the window (80%).")
@click.option("--estimate", is_flag=True, help="Fast estimate instead of the tokenizer (no encoding loaded).")
@click.option("--report-only", is_flag=True, help="Print the readable report on standard output instead of the transcript.")
@click.option("--json", "json_out", is_flag=True, help="Print the JSON report on standard output instead of the transcript.")
@click.option("--fail-at", type=PERCENT, metavar="PCT", help="Exit 1 when the context is at or over PCT percent of the budget.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, writable=True), metavar="FILE.png",
              help="Draw the context over the session into a PNG (or WebP) image.")
@click.option("--system", "system_file", type=click.Path(dir_okay=False), metavar="FILE",
              help="The system prompt, when the transcript does not record it.")
@click.option("--tools", "tools_file", type=click.Path(dir_okay=False), metavar="FILE",
              help="The tool definitions (JSON or text), when the transcript does not record them.")
@click.option("--rules", "rules_file", type=click.Path(dir_okay=False), metavar="FILE",
              help="The rules file (CLAUDE.md, AGENTS.md...), instead of looking in the transcript's folder.")
@click.option("--skills", "skills_file", type=click.Path(dir_okay=False), metavar="FILE",
              help="The skills listing, when the transcript does not record it.")
@click.option("--no-discover", is_flag=True, help="Do not look for CLAUDE.md / AGENTS.md in the transcript's folder.")
@click.option("--preset", type=click.Choice(sorted(PRESETS)), help="Meter thresholds: lookout (75%/summary point) or localpilot (65%/85%).")
@click.option("--now", "now_text", metavar="ISO", help="The time to measure the warm cache against (default: now).")
@click.option("--jobs", "-j", type=click.IntRange(min=1), metavar="N",
              help="Read and count in N processes (pays on cold runs over large inputs) "
                   "[config: measure.jobs; default: 1].")
@click.option("--no-cache", is_flag=True,
              help="Do not use the token-count cache in the cache folder (counts are then all tokenized).")
@click.option("--usage-only", is_flag=True,
              help="Only the provider's recorded counts: read just the lines that record usage (context used, "
                   "cache, cost; no parts).")
def measure(run: Run, **flags) -> None:
    """Report what fills the model's context; pass the transcript through unchanged.

    Shows the tokens used of the budget and the meter's state, where the chat will be summarized
    and where compaction is due; each part of the context (setup and conversation) with its
    tokens and share; the last response's prompt as the provider counted it beside our estimate;
    cache use, totals and cost at API prices, how long the cache stays warm; compactions so far,
    duplicate file reads and the largest items that could be reclaimed.
    """
    run_measure(run, **flags)  # (by name, as a run again without click passes them: lookout_cli.measure)
