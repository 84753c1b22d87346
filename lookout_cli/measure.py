"""What ``lookout measure`` does once its flags are read (``commands/measure.py`` declares them
for click). Without click too: a quiet measure whose file changed since the same invocation
was recorded runs again with the flags click read then (``meter.replay``), and loading click
was a tenth of such a run."""

from __future__ import annotations

import datetime as dt
import gc
import sys

from lookout_cli.core import progress
from lookout_cli.core.errors import CheckFailed, LookoutError, debugging, outcome
from lookout_cli.core.term import echo, wants_color
from lookout_cli.core.times import parse_time
from lookout_cli.core.units import setting_number
from lookout_cli.formats import Transcript
from lookout_cli.meter import replay
from lookout_cli.meter import snapshot as meter_snapshot
from lookout_cli.meter.analysis import PRESETS, Meter, Settings, measure_usage
from lookout_cli.meter.analysis import measure as measure_view
from lookout_cli.meter.cost import last_timed
from lookout_cli.meter.report import render, to_dict
from lookout_cli.options import APART_BYTES, Run, report_json, usage_error, write_stdout


def measure_again(flags: dict) -> int:
    """A quiet measure run again with the flags click read for the same invocation before
    (``replay``), without click; its exit status."""
    try:  # (the collector's threshold as cli.main sets it: __main__ set it first)
        run_measure(Run.from_flags("measure", flags), **flags)
    except (Exception, KeyboardInterrupt) as exc:
        return outcome(exc, debugging(sys.argv[1:]))
    return 0


def run_measure(run: Run, model_name, budget, estimate, report_only, json_out, fail_at, plot_path, system_file,
                tools_file, rules_file, skills_file, no_discover, preset, now_text, jobs, no_cache, usage_only) -> None:
    """``lookout measure`` (its --help) with the flags click read, the filter contract's in ``run``."""
    if report_only and json_out:
        raise usage_error("--report-only and --json cannot be used together")
    # a terminal gets the report, not the transcript's JSON lines (with -q, nothing: the status says it)
    report_only = report_only or (run.to_terminal and not json_out and not run.reporter.quiet)
    if plot_path:
        from lookout_cli.meter.plot import image_format

        image_format(plot_path)  # a wrong extension stops the run before anything is measured
    now = None
    if now_text:
        now = parse_time(now_text)
        if now is None:
            raise usage_error(f"--now: {now_text!r} is not an ISO time like 2025-09-03T01:10:00Z")
    settings = settings_for(run, model_name, budget, estimate, system_file, tools_file, rules_file,
                            skills_file, no_discover, preset, now)
    # the JSON report (a point a response: a long session's takes longer to build than the rest
    # of the meter) only where it goes; the series (those points) only for it and the plot
    reported = bool(json_out or report_only or run.report_path)
    if usage_only:
        if estimate or plot_path:
            raise usage_error(f"--usage-only counts nothing: {'--estimate' if estimate else '--plot'} "
                              "needs a full measure")
        meter, transcript = measure_usage_input(run, settings, reported)
    else:
        cache = not no_cache and run.flag("measure.cache", default=True)
        meter, transcript = measure_input(run, settings, run.number("measure.jobs", jobs, 1, int, minimum=1), cache,
                                          reported or bool(plot_path))
    report = to_dict(meter, run.source, fail_at) if reported else None
    if plot_path:
        from lookout_cli.meter.plot import draw

        try:
            draw(meter, plot_path)
        except OSError as exc:
            raise LookoutError(f"--plot: {plot_path}: {exc.strerror or exc}") from None

    def finish(report: dict | None = None) -> None:
        if transcript is None:
            run.pass_through(report)  # measured before and unchanged since: nothing was parsed
        else:
            run.finish(transcript, report, changes=0)  # measure changes nothing: no line to look at

    sent = (json_out or report_only) and (run.output not in (None, "-") or run.in_place)
    if sent:
        finish(report)  # the transcript still goes where -o / -i send it, the report where --report does
    if json_out:
        write_stdout(report_json(report))
        if not sent:
            run.write_report(report)
    elif report_only:
        style = None
        if wants_color(run.flags.get("color", "auto"), sys.stdout):
            import click  # (colour on a terminal)

            style = click.style
        write_stdout(render(meter, style, run.source, fail_at).encode())
        if not sent:
            run.write_report(report)
    else:
        finish(report)
        if not run.reporter.quiet:
            echo(render(meter, run.reporter.style, run.source, fail_at), run.reporter.color, nl=False)
    failed = fail_at is not None and meter.percent >= fail_at
    message = f"measure: context at {meter.percent:.1f}% of the budget is at or over --fail-at {fail_at:g}%" \
        if failed else None
    if (run.reporter.quiet and not (json_out or report_only or plot_path or run.report_path or run.in_place)
            and run.output in (None, "-") and run.hook_event is None and not run.to_terminal):
        # nothing went out but the transcript (and the line below): the same run can be replayed
        replay.remember(CheckFailed.exit_code if failed else 0, message and f"lookout: {message}", run.flags)
    if failed:
        raise CheckFailed(message)


def measure_input(run: Run, settings: Settings, jobs: int = 1, cache: bool = True,
                  points: bool = True) -> tuple[Meter, Transcript | None]:
    """The meter of ``run``'s transcript, and the transcript read (None when the figures of a
    FILE measured before and unchanged since are reused). With ``cache``, a FILE's figures and
    lines are remembered for the next run (meter_snapshot, line_memo). ``points``: the meter's
    series too (``analysis.measure``)."""
    run.start_progress()
    remembered = cache and run.source is not None
    meter = meter_snapshot.load(run.file, settings, run.format_name, points) if remembered else None
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
                                  encoding_for_model(settings.model), jobs, cache, APART_BYTES)
    sink = CountingSink(lambda model: make_counter(settings.model or model, settings, jobs, cache), jobs, ahead)
    frozen = False
    try:
        # offsets and small summaries, not every parsed line; the items counted as they are read
        early = EarlyItems(sink, lambda model: count_key(settings.model or model, settings))
        transcript = run.load(memo=memo, early=early, jobs=jobs)
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
        meter = measure_view(view, settings, counter=counter, points=points)
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


def measure_usage_input(run: Run, settings: Settings, points: bool = True) -> tuple[Meter, Transcript]:
    """``--usage-only``: the meter of the provider's recorded counts, from the lines that
    record them (``Adapter.usage_needles``); the rest of the transcript is passed, not parsed.
    ``points``: the meter's series too."""
    from lookout_cli.formats.view import View  # not on the path that reuses an unchanged file's figures

    transcript, kept = run.load_usage()
    transcript.original = transcript.lines  # nothing changes
    adapter = transcript.adapter
    view = adapter.usage_view(kept) if adapter is not None else View(format="unknown")
    return measure_usage(view, settings, points=points), transcript


def make_counter(model: str | None, settings: Settings, jobs: int = 1, cache: bool = True):
    """The token counter for ``model`` (lookout_cli.tokens.cache.counter_for). A run with only a
    prompt's worth of new text to count (``tokenizer.counting_few``: the lines measured before
    come with their counts from the line memo) counts it without the block cache: the lite
    table counts faster than a lookup, and opening the cache (sqlite) was 5% of such a run at
    10 MB."""
    from lookout_cli.tokens import tokenizer

    if tokenizer.counting_few() and jobs <= 1:
        return tokenizer.TokenCounter.for_model(model, exact=not settings.estimate)
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
