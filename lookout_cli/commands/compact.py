"""``lookout compact``: make room in the context, in stages, with nothing lost."""

from __future__ import annotations

import click

from lookout_cli.compaction.plan import STAGES
from lookout_cli.core import progress
from lookout_cli.core.errors import LookoutError
from lookout_cli.flags import filter_options
from lookout_cli.options import Run

EPILOG = """\b
Examples:
  lookout compact session.jsonl > next.jsonl            # only when compaction is due
  lookout compact --force -i session.jsonl              # now, like /compact
  lookout compact --force --instructions "keep the migration plan" < chat.jsonl > next.jsonl
  lookout compact --dry-run --force --max-tokens 50k session.jsonl > /dev/null
  lookout compact --force --summarizer command:'llm -m gpt-4o-mini' -i session.jsonl
  lookout compact --force --summarizer anthropic --summary-model claude-haiku-4-5 -i s.jsonl
  lookout mentions < chat.jsonl | lookout clear-images | lookout compact | lookout measure > next.jsonl

\b
Stages, in order (--stage runs the ones named, now):
  prune      clear tool output the agent has read, oldest first, keeping the newest
             40,000 tokens of output and the last two turns; only if it frees 20,000
             tokens, and while the cache is warm only when that repays rewriting it;
             output in turns the summary will replace anyway stays as it is
  clamp      a tool output over max_tool_output_chars (50,000), or over its share of
             the budget (a step's calls share a third), keeps its beginning and end
  summarize  older turns become one note (goal, the user's messages word for word,
             progress, decisions, files, commands, errors, next steps); the last
             tail_turns (2) turns within preserve_recent_tokens (8,000) stay as they are;
             one long turn (a request, then many tool calls) splits inside on a step
             boundary: the request word for word, a note of the steps since, the last
             steps within preserve_recent_tokens with their output
  shorten    still over 85%: clear read output in the kept turns, then shorten unread
             output, largest first, keeping its beginning and end
  truncate   the last resort (--on-failure truncate): drop the oldest whole turns,
             or the oldest steps of one long turn (pairs together), until it fits

\b
An automatic run starts at the threshold and lands at the target (target_percent,
40% of the budget: Claude Code and Codex resume from their summaries at 10-25% of the
window, Cline aims at 0.7 of its trigger): clearing that would stop above the target
summarizes instead, so the next compaction is far away. When even the summary, the
request and the last step do not fit the budget, compact writes nothing over it: it
exits 2 with "context window exceeded by N tokens" (the input passes through unchanged).

\b
Summarizers: embedded (default; built from the transcript, no network), command:'CMD'
(prompt on standard input, note on standard output), openai and anthropic (an
OpenAI-compatible or Anthropic endpoint: --summary-url, --summary-model, the key in
$OPENAI_API_KEY / $ANTHROPIC_API_KEY or --summary-key-env). A model gets a prompt that fits
its window, in parts that each update the summary so far when the conversation is larger, and
is asked once more for errors and tool-output facts its note left out. An empty, failed,
cut-off or longer-than-the-original summary is refused: the transcript passes through
unchanged and compact exits 2 (or drops the oldest turns with --on-failure truncate). A note
holding orders to the agent (prompt injection carried over from the transcript) is flagged.

\b
Reads the whole transcript (the split needs every turn). When the turns a summary replaces
hold over 4 M characters, they are not tokenized: their tokens are estimated from 2 M
characters sampled evenly across them (within about 1%; the figures then say "about");
--tokenize-all counts them all. Cleared output, removed lines and the full pre-summary
conversation are saved first; placeholders name the files, and `lookout restore` puts
cleared output back. A second run with the same settings changes nothing. Config keys:
compaction.auto, compaction.threshold_percent, compaction.target_percent (40),
compaction.prune, compaction.tail_turns,
compaction.preserve_recent_tokens, compaction.reserved, compaction.model,
compaction.summarizer, compaction.base_url, compaction.api_key_env, compaction.timeout,
compaction.summary_context_window (the summary model's window, when the models file lacks it),
compaction.on_failure, compaction.summary_tokens (20,000), compaction.prune_protect_tokens
(40,000), compaction.prune_minimum_tokens (20,000), compaction.tokenize_all,
compaction.jobs (1), max_tool_output_chars.

\b
Exit status: 0 compacted or nothing to do; 1 --check and something would change; 2 an
error, including a refused summary or a result that would leave a call without its result.
"""


@click.command(epilog=EPILOG)
@click.option("--force", is_flag=True, help="Compact now, due or not (what /compact does).")
@click.option("--max-tokens", "--budget", "budget", metavar="SIZE",
              help="The context budget to fit: tokens (50k, 1.5M) or a share of the window (80%) [config: budget].")
@click.option("--model", "model_name", metavar="NAME", help="The chat's model, for its window and summary point "
              "(default: the transcript's) [config: model].")
@click.option("--stage", "stages", multiple=True, type=click.Choice(STAGES),
              help="Run only this stage, now (repeat for several; they run in the usual order).")
@click.option("--instructions", metavar="TEXT", help="What the summary must keep in full detail.")
@click.option("--summarizer", metavar="SPEC",
              help="embedded, command:'CMD', openai or anthropic [config: compaction.summarizer].")
@click.option("--summary-model", metavar="NAME", help="The model that writes the summary [config: compaction.model].")
@click.option("--summary-url", metavar="URL", help="The summarizer's base URL [config: compaction.base_url].")
@click.option("--summary-key-env", metavar="VAR", help="The variable holding its API key [config: compaction.api_key_env].")
@click.option("--summary-timeout", type=click.FloatRange(min=0.1), metavar="SECONDS",
              help="Give up on the summarizer after this long [default: 300; config: compaction.timeout].")
@click.option("--from-summary", "summary_file", type=click.File("r", encoding="utf-8"), metavar="FILE",
              help="Use this note as the summary instead of writing one.")
@click.option("--on-failure", type=click.Choice(["stop", "truncate"]),
              help="When no usable summary comes back: stop (exit 2) or drop the oldest turns [default: stop].")
@click.option("--threshold-percent", type=click.FloatRange(0, 100, min_open=True), metavar="PCT",
              help="Compaction is due at this share of the budget [config: compaction.threshold_percent].")
@click.option("--target-percent", type=click.FloatRange(0, 100, min_open=True), metavar="PCT",
              help="Where a compaction aims to land, as a share of the budget [default: 40; "
              "config: compaction.target_percent].")
@click.option("--reserved", type=click.IntRange(0), metavar="TOKENS",
              help="Tokens kept free for the reply [config: compaction.reserved].")
@click.option("--tail-turns", type=click.IntRange(1), metavar="N",
              help="Recent turns kept word for word [default: 2; config: compaction.tail_turns].")
@click.option("--preserve-recent-tokens", type=click.IntRange(0), metavar="TOKENS",
              help="Token budget for those turns [default: 8000; config: compaction.preserve_recent_tokens].")
@click.option("--max-tool-output-chars", type=click.IntRange(0), metavar="N",
              help="Clamp a tool output longer than this, 0 for no limit [default: 50000; config: max_tool_output_chars].")
@click.option("--prune/--no-prune", "prune", default=None, help="Clear old tool output [config: compaction.prune].")
@click.option("--estimate", is_flag=True, help="Count with the fast estimate instead of the tokenizer.")
@click.option("--tokenize-all", is_flag=True, default=None,
              help="Tokenize all the turns the summary replaces (past 4 M characters, their tokens are otherwise "
              "estimated from a sample of them) [config: compaction.tokenize_all].")
@click.option("--now", "now_text", metavar="ISO", help="The time to judge the cache's warmth against (default: now).")
@click.option("--jobs", "-j", type=click.IntRange(min=1), metavar="N",
              help="Read and count in N processes (pays on a first run over a large transcript) "
              "[config: compaction.jobs; default: 1].")
@filter_options(side_effects=True)
def compact(run: Run, force, budget, model_name, stages, instructions, summarizer, summary_model, summary_url,
            summary_key_env, summary_timeout, summary_file, on_failure, threshold_percent, target_percent, reserved,
            tail_turns,
            preserve_recent_tokens, max_tool_output_chars, prune, estimate, tokenize_all, now_text, jobs) -> None:
    """Make room in the context: prune, clamp, summarize, shorten, and truncate as a last resort.

    Runs only when compaction is due (the budget's threshold_percent, or the room left falls to
    the reserve) unless --force or --stage says to run now. Each stage is recorded the way the
    transcript's own agent records it: Claude Code gets a compact_boundary and a summary line,
    Codex a compacted record, message lists are rewritten. With --dry-run it prints what each
    stage would clear, save and keep, and writes nothing.
    """
    from lookout_cli.compaction import engine as compactor
    from lookout_cli.compaction import prepared, summarizers
    from lookout_cli.core.times import parse_time

    now = None
    if now_text:
        now = parse_time(now_text)
        if now is None:
            raise click.UsageError(f"--now: {now_text!r} is not an ISO time like 2025-09-03T01:10:00Z")
    options = options_from_run(run, force=force, stages=tuple(stages) or None, instructions=instructions,
                               on_failure=on_failure, model_name=model_name, budget=budget,
                               threshold_percent=threshold_percent, target_percent=target_percent,
                               reserved=reserved, prune=prune,
                               tail_turns=tail_turns, preserve_recent_tokens=preserve_recent_tokens,
                               max_tool_output_chars=max_tool_output_chars, estimate=estimate,
                               tokenize_all=tokenize_all, now=now, jobs=jobs)
    if options.on_failure not in ("stop", "truncate"):
        raise LookoutError(f"compaction.on_failure: {options.on_failure!r} is not stop or truncate")
    try:
        writer = summarizers.make(run.setting("compaction.summarizer", summarizer),
                                  run.setting("compaction.model", summary_model),
                                  run.setting("compaction.base_url", summary_url),
                                  run.setting("compaction.api_key_env", summary_key_env),
                                  run.setting("compaction.timeout", summary_timeout),
                                  run.setting("compaction.summary_context_window", None))
    except summarizers.SummaryFailed as exc:
        raise click.UsageError(str(exc)) from None

    transcript = run.load(jobs=options.jobs)
    ready = None
    if summary_file is not None:
        ready = compactor.PreparedSummary(summary_file.read(), None, f"the note in {summary_file.name}")
    elif transcript.adapter is not None and transcript.lines:
        with progress.stage("building the view"):
            kept = prepared.find(run.store, transcript)
        if kept is not None:
            ready = compactor.PreparedSummary(kept.summary, kept.keep_from,
                                              f"the summary prepared while idle ({kept.created})")

    if transcript.adapter is None or not transcript.lines:
        run.finish(transcript, {"command": "compact", "changed": False, "reason": "nothing to compact"}, changes=0)
        return
    try:
        with progress.stage("compacting"):
            result = compactor.compact_transcript(transcript, options, run.store, writer, prepared=ready)
    except LookoutError:
        run.finish(transcript, {"command": "compact", "changed": False}, changes=0)  # the input, untouched
        raise
    started = ready.source if ready is not None and result.summary is not None and summary_file is None else None
    report = result.report()
    flagged: list[str] = []  # orders to the agent in the note: prompt injection carried over
    if report["summary"] is not None:
        from lookout_cli.compaction.note_facts import suspicious

        flagged = suspicious(result.summary)
        report["summary"]["suspicious"] = flagged
    run.finish(transcript, report, changes=1 if result.changed else 0,
               tell=lambda: _tell(run, result, started, flagged))


def _tell(run: Run, result, started: str | None, flagged: list[str]) -> None:
    from lookout_cli.compaction import engine as compactor

    if started:
        run.say(f"compact: started from {started}")
    head = compactor.summary_of(result)
    if run.dry_run and result.changed:
        head = head.replace("compact:", "compact (dry run, nothing written): would go", 1)
    run.say(head)
    if result.changed or run.dry_run:
        for line in compactor.plan_lines(result, run.dry_run):
            run.say(line)
    for line in flagged:
        run.warn(f"the summary gives the agent orders (prompt injection?): {line!r}")
    if result.missing is not None and len(result.missing):
        lost = result.missing.all()
        shown = "; ".join(f"{kind} {text[:60]!r}" for kind, text in lost[:3])
        run.warn(f"the summary lacks {len(lost)} of {result.facts} facts that must survive: {shown}"
                 + (" …" if len(lost) > 3 else "") + " (see --report)")
    if result.no_progress:
        run.warn(f"compaction made little progress ({result.before:,} → {result.after:,} tokens, "
                 f"{100 * (result.ratio or 0):.0f}% left): the kept turns, setup and summary fill the context; "
                 "compacting again would not help; narrow the request, raise --max-tokens or start a new chat")
    elif result.still_over:
        run.warn(f"still over the goal after compacting ({result.after:,} tokens, goal {result.fit_at:,})")
    if result.failure:
        run.warn(f"the summary was refused ({result.failure}); "
                 + ("the oldest turns were dropped instead" if result.changed else "the transcript was left as it was"))


def options_from_run(run: Run, *, force: bool = False, stages=None, instructions=None, on_failure=None,
                     model_name=None, budget=None, threshold_percent=None, target_percent=None, reserved=None,
                     prune=None,
                     tail_turns=None, preserve_recent_tokens=None, max_tool_output_chars=None,
                     estimate: bool = False, tokenize_all=None, now=None, jobs=None):
    """The compaction options from flags (None: not given), the config file and the defaults.
    prepare-idle builds its options here too, so both commands read the same keys."""
    from lookout_cli.compaction import engine as compactor

    threshold = _percent(run, "compaction.threshold_percent", threshold_percent)
    target = _percent(run, "compaction.target_percent", target_percent)
    return compactor.Options(
        force=force,
        stages=stages,
        instructions=instructions,
        on_failure=str(run.setting("compaction.on_failure", on_failure, "stop")),
        auto=run.flag("compaction.auto", default=True),
        model=run.setting("model", model_name),
        budget=run.setting("budget", budget),
        threshold_percent=threshold,
        target_percent=compactor.TARGET_PERCENT if target is None else target,
        reserved=run.setting("compaction.reserved", reserved),
        prune=run.flag("compaction.prune", prune, True),
        tail_turns=run.number("compaction.tail_turns", tail_turns, 2, int),
        preserve_recent_tokens=run.number("compaction.preserve_recent_tokens", preserve_recent_tokens, 8_000, int),
        max_tool_output_chars=run.number("max_tool_output_chars", max_tool_output_chars, 50_000, int),
        summary_tokens=run.number("compaction.summary_tokens", None, 20_000, int),
        protect_tokens=run.number("compaction.prune_protect_tokens", None, 40_000, int),
        prune_minimum=run.number("compaction.prune_minimum_tokens", None, 20_000, int),
        estimate=estimate,
        tokenize_all=run.flag("compaction.tokenize_all", tokenize_all, False),
        jobs=run.number("compaction.jobs", jobs, 1, int, minimum=1),
        now=now,
        models_config=run.setting("models", None, None),
        dry_run=run.dry_run,
    )


def _percent(run: Run, key: str, flag) -> float | None:
    """A percentage setting (flag, else config), None when unset; an error names ``key``."""
    from lookout_cli.core.units import parse_percent

    value = run.setting(key, flag)
    try:
        return None if value is None else parse_percent(value)
    except LookoutError as exc:
        raise LookoutError(f"{key}: {exc}") from None
