"""``lookout measure``: the context meter. Passes the transcript through and reports what fills
the model's context, what the provider counted, what it cost and what could be reclaimed."""

from __future__ import annotations

import datetime as dt
import gc
import sys

import click
import orjson

from lookout_cli.core import progress
from lookout_cli.core.errors import CheckFailed, LookoutError
from lookout_cli.core.term import wants_color
from lookout_cli.core.times import parse_time
from lookout_cli.core.units import setting_number
from lookout_cli.formats import Transcript
from lookout_cli.meter import replay
from lookout_cli.meter import snapshot as meter_snapshot
from lookout_cli.meter.analysis import PRESETS, Meter, Settings, measure_usage
from lookout_cli.meter.analysis import measure as measure_view
from lookout_cli.meter.cost import last_timed
from lookout_cli.meter.report import SCHEMA_TEXT, render, to_dict
from lookout_cli.options import Run, filter_options, write_stdout


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
status, without loading the rest of lookout. --no-cache turns all of this off. --jobs N
counts a cold pass in N processes (they count the last quarter of a large file while it is
read).
--usage-only parses only the lines that record usage (a fast cost and context check: the
provider's counts, no parts; usages are taken in file order, not along the conversation's
branches; other lines are not checked for JSON but with --strict).

\b
Every figure is marked exact (a provider count recorded in the transcript: the last response's
input, cache write and cache read, and the cache totals), estimated (counted with the model's
tiktoken encoding, or the fast estimate with --estimate), inferred (setup the transcript does
not record, worked out from the first recorded prompt) or read from a file (--system, --tools,
--rules, --skills, or CLAUDE.md / AGENTS.md found in the transcript's working folder).

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
              help="Count in N processes (pays on cold runs over large inputs) [config: measure.jobs; default: 1].")
@click.option("--no-cache", is_flag=True,
              help="Do not use the token-count cache in the cache folder (counts are then all tokenized).")
@click.option("--usage-only", is_flag=True,
              help="Only the provider's recorded counts: read just the lines that record usage (context used, "
                   "cache, cost; no parts).")
def measure(run: Run, model_name, budget, estimate, report_only, json_out, fail_at, plot_path, system_file,
            tools_file, rules_file, skills_file, no_discover, preset, now_text, jobs, no_cache, usage_only) -> None:
    """Report what fills the model's context; pass the transcript through unchanged.

    Shows the tokens used of the budget and the meter's state, where the chat will be summarized
    and where compaction is due; each part of the context (setup and conversation) with its
    tokens and share; the last response's prompt as the provider counted it beside our estimate;
    cache use, totals and cost at API prices, how long the cache stays warm; compactions so far,
    duplicate file reads and the largest items that could be reclaimed.
    """
    if report_only and json_out:
        raise click.UsageError("--report-only and --json cannot be used together")
    # a terminal gets the report, not the transcript's JSON lines (with -q, nothing: the status says it)
    report_only = report_only or (run.to_terminal and not json_out and not run.reporter.quiet)
    if plot_path:
        from lookout_cli.meter.plot import image_format

        image_format(plot_path)  # a wrong extension stops the run before anything is measured
    now = None
    if now_text:
        now = parse_time(now_text)
        if now is None:
            raise click.UsageError(f"--now: {now_text!r} is not an ISO time like 2025-09-03T01:10:00Z")
    settings = settings_for(run, model_name, budget, estimate, system_file, tools_file, rules_file,
                            skills_file, no_discover, preset, now)
    if usage_only:
        if estimate or plot_path:
            raise click.UsageError(f"--usage-only counts nothing: {'--estimate' if estimate else '--plot'} "
                                   "needs a full measure")
        meter, transcript = measure_usage_input(run, settings)
    else:
        cache = not no_cache and run.flag("measure.cache", default=True)
        meter, transcript = measure_input(run, settings, run.number("measure.jobs", jobs, 1, int, minimum=1), cache)
    # the JSON report (a point a response: a long session's takes longer to build than the rest
    # of the meter) only where it goes
    report = to_dict(meter, run.source, fail_at) if json_out or report_only or run.report_path else None
    if plot_path:
        from lookout_cli.meter.plot import draw

        try:
            draw(meter, plot_path)
        except OSError as exc:
            raise LookoutError(f"--plot: {plot_path}: {exc.strerror or exc}") from None
    params = click.get_current_context().params
    def finish(report: dict | None = None) -> None:
        if transcript is None:
            run.pass_through(report)  # measured before and unchanged since: nothing was parsed
        else:
            run.finish(transcript, report, changes=0)  # measure changes nothing: no line to look at

    if (json_out or report_only) and (run.output not in (None, "-") or run.in_place):
        finish()  # the transcript still goes where -o / -i send it
    if json_out:
        write_stdout(orjson.dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
        run.write_report(report)
    elif report_only:
        colour = wants_color(params.get("color", "auto"), sys.stdout)
        style = (lambda text, **kw: click.style(text, **kw)) if colour else None
        write_stdout(render(meter, style, run.source, fail_at).encode())
        run.write_report(report)
    else:
        finish(report)
        if not run.reporter.quiet:
            click.echo(render(meter, run.reporter.style, run.source, fail_at), err=True, nl=False,
                       color=run.reporter.color)
    failed = fail_at is not None and meter.percent >= fail_at
    message = f"measure: context at {meter.percent:.1f}% of the budget is at or over --fail-at {fail_at:g}%" \
        if failed else None
    if (run.reporter.quiet and not (json_out or report_only or plot_path or run.report_path or run.in_place)
            and run.output in (None, "-") and run.hook_event is None and not run.to_terminal):
        # nothing went out but the transcript (and the line below): the same run can be replayed
        replay.remember(CheckFailed.exit_code if failed else 0, message and f"lookout: {message}")
    if failed:
        raise CheckFailed(message)


def measure_input(run: Run, settings: Settings, jobs: int = 1, cache: bool = True) -> tuple[Meter, Transcript | None]:
    """The meter of ``run``'s transcript, and the transcript read (None when the figures of a
    FILE measured before and unchanged since are reused). With ``cache``, a FILE's figures and
    lines are remembered for the next run (meter_snapshot, line_memo)."""
    run.start_progress()
    remembered = cache and run.source is not None
    meter = meter_snapshot.load(run.file, settings, run.format_name) if remembered else None
    if meter is not None:
        return meter, None
    from lookout_cli.formats.early import EarlyItems  # not needed when the figures are reused
    from lookout_cli.meter.item_counts import CountingSink
    from lookout_cli.meter.line_memo import LineMemo

    memo = LineMemo(run.file, run.format_name, lambda model: count_key(settings.model or model, settings)) \
        if remembered else None
    cold = not settings.estimate and (memo is None or not memo.known)  # its text will be counted
    ahead = None
    if cold and jobs > 1:  # the workers count the input's end while it is read
        from lookout_cli.meter import count_ahead
        from lookout_cli.tokens.tokenizer import encoding_for_model

        ahead = count_ahead.start(run.file if run.source is not None else None, run.format_name,
                                  encoding_for_model(settings.model), jobs, cache)
    sink = CountingSink(lambda model: make_counter(settings.model or model, settings, jobs, cache), jobs, ahead)
    frozen = False
    try:
        # offsets and small summaries, not every parsed line; the items counted as they are read
        early = EarlyItems(sink, lambda model: count_key(settings.model or model, settings))
        transcript = run.load(memo=memo, early=early)
        if memo is not None and memo.resumed:
            # the lines measured before and their items live to the end of the run, in no cycle:
            # the collector passes over them (it walked them again and again: a tenth of a
            # prompt's run over a long session)
            gc.freeze()
            frozen = True
        transcript.original = transcript.lines  # measure changes nothing: no copy to compare with
        transcript.sink = _telling(sink)
        with progress.stage("counting tokens", len(transcript.lines), "lines"):
            view = transcript.view()
            counter = sink.finish(view)
        # the view is built and counted: the lines' nodes are read no more, but by the memo
        # (which lets go of each as it writes it); what the meter builds takes their room
        if remembered and run.clean and transcript.memo is not None:
            transcript.memo.save(transcript)
        for record in transcript.made():
            record.node = None
        meter = measure_view(view, settings, counter=counter)
    finally:
        if sink.ahead is not None:  # the run stopped before the view took what was counted ahead
            sink.ahead.close()
        close = getattr(sink.counter, "close", None)
        if close is not None:
            close()  # writes the new counts to the cache in one transaction
        if frozen:
            gc.unfreeze()
    if remembered and run.clean:
        start, end = transcript.spool_span  # what was read: every line, one after the other
        measured = end - start if transcript.spool is not None else sum(r.size for r in transcript.lines)
        meter_snapshot.save(run.file, settings, run.format_name, meter, measured, view.cwd,
                            last_timed(view.usages))
    return meter, transcript


def _telling(sink):
    """``sink``, saying how far the view is built: the line of the item it counted last."""
    def count(view, item) -> None:
        sink(view, item)
        progress.update(item.record.lineno)

    return count


def measure_usage_input(run: Run, settings: Settings) -> tuple[Meter, Transcript]:
    """``--usage-only``: the meter of the provider's recorded counts, from the lines that
    record them (``Adapter.usage_needles``); the rest of the transcript is passed, not parsed."""
    from lookout_cli.formats.view import View  # not on the path that reuses an unchanged file's figures

    transcript, kept = run.load_usage()
    transcript.original = transcript.lines  # nothing changes
    adapter = transcript.adapter
    view = adapter.usage_view(kept) if adapter is not None else View(format="unknown")
    return measure_usage(view, settings), transcript


def make_counter(model: str | None, settings: Settings, jobs: int = 1, cache: bool = True):
    """The token counter for ``model`` (lookout_cli.tokens.cache.counter_for)."""
    from lookout_cli.tokens.cache import counter_for

    return counter_for(model, exact=not settings.estimate, cache=cache, jobs=jobs)


def count_key(model: str | None, settings: Settings) -> tuple:
    """What the counts ``make_counter`` gives for ``model`` depend on (the line memo's key)."""
    from lookout_cli.tokens.tokenizer import encoding_for_model

    return encoding_for_model(model), not settings.estimate


def settings_for(run: Run, model_name, budget, estimate, system_file, tools_file, rules_file, skills_file,
                 no_discover, preset, now: dt.datetime | None) -> Settings:
    """The meter's settings: flags over LOOKOUT_* variables over the config files."""
    amber, red = PRESETS.get(preset or "", (None, None))
    return Settings(
        model=run.setting("measure.model", model_name) or run.setting("model"),
        model_source="flag" if model_name else "config",
        budget=run.setting("budget", budget),
        estimate=estimate or run.flag("measure.estimate"),
        setup_files={"system": system_file, "tools": tools_file, "rules": rules_file, "skills": skills_file},
        discover_rules=not no_discover,
        now=now,
        amber=setting_number(run.setting("meter.amber", amber), "meter.amber"),
        red=setting_number(run.setting("meter.red", red), "meter.red"),
        models_config=run.setting("models", None, None),
        threshold_percent=setting_number(run.setting("compaction.threshold_percent", None), "compaction.threshold_percent"),
        reserved=setting_number(run.setting("compaction.reserved", None), "compaction.reserved"),
    )
