"""``compact`` as a library: run the stages ``compaction.plan`` works out, with nothing lost.

``compact_transcript(transcript, options, store, summarizer)`` is what ``lookout compact`` and
``prepare-idle`` call. It measures the context as ``lookout measure`` does (``meter.analysis``), decides
whether compaction is due (``budget``), then runs prune, clamp, summarize and shorten (or the
stages asked for, or truncate when a summary fails and that was asked for). Cleared output goes
to the saved-output store first (``clearing``); a compaction goes through the format's adapter,
which records it as that format's own agent does. ``prepare_summary`` writes the note a forced
compaction would write without changing anything (for ``prepare-idle``).

Safety, in order of importance:

- nothing is lost: every cleared output and every removed line is saved, and the placeholders
  and the summary name where;
- a call never loses its result: the validator's orphans before and after are compared, and a
  run that would add one is refused, leaving the transcript as it was;
- a bad summary (empty, an error, cut off, not shorter than what it replaces) is refused and the
  transcript left as it was (or, if asked, the oldest turns are dropped instead);
- the facts that must survive (the user's instructions, files, commands, error strings) are
  checked in the note and the missing ones reported;
- a run that frees little (after/before above 0.8) says so instead of inviting another run;
- a second run with the same settings changes nothing.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Sequence

from lookout_cli.compaction import note as summary_note
from lookout_cli.compaction import plan, summarizers
from lookout_cli.compaction.gauge import Gauge, _inferred, _scale, saved_text
from lookout_cli.core import progress
from lookout_cli.core.dataclass import dataclass, field
from lookout_cli.core.errors import LookoutError
from lookout_cli.core.jsonl import Record
from lookout_cli.core.saved import MARKER, SavedStore
from lookout_cli.formats import Transcript
from lookout_cli.formats.clearing import clamp_item, clear_cost, clear_item
from lookout_cli.formats.view import SETUP, TOOL_RESULT, Item, View
from lookout_cli.tokens import sample as head_sample

NO_PROGRESS_RATIO = 0.8
# A compaction aims this far under the budget (compaction.target_percent): Claude Code and Codex
# resume from their own summaries at 10-25% of the window, Cline's SDK aims at 0.7 of its
# trigger (about 57%); 40% sits between, under half the window, so the next compaction is about
# as far away as the window's first 45%, and a clear that would stop above it summarizes instead.
TARGET_PERCENT = 40.0
PRICED_MARGIN = 2  # an automatic run whose head is priced must be this far over the goal (head_sample)


@dataclass
class Options:
    """What the caller chose (flags and config, already merged)."""

    force: bool = False  # compact now, due or not (/compact)
    stages: tuple[str, ...] | None = None  # only these stages, now (None: the automatic pipeline)
    instructions: str | None = None  # what the summary must keep in full detail
    on_failure: str = "stop"  # "stop" or "truncate" when no usable summary comes back
    auto: bool = True  # compaction.auto: compact when due without being asked
    model: str | None = None  # the chat's model (default: the transcript's)
    budget: str | None = None  # --max-tokens/--budget: "200k", "80%"
    threshold_percent: float | None = None
    target_percent: float = TARGET_PERCENT  # where a compaction aims to land, as a share of the budget
    reserved: int | None = None
    prune: bool = True
    tail_turns: int = 2
    preserve_recent_tokens: int = 8_000
    max_tool_output_chars: int = 50_000
    summary_tokens: int = 20_000
    protect_tokens: int = 40_000
    prune_minimum: int = 20_000
    estimate: bool = False  # count with the fast estimate instead of the tokenizer
    tokenize_all: bool = False  # count what a summary replaces too, however long (else head_sample)
    jobs: int = 1  # processes that count what the block cache does not know
    now: dt.datetime | None = None
    models_config: dict | None = None
    dry_run: bool = False  # plan only: external summarizers are not called

    @property
    def explicit(self) -> bool:
        """Asked to compact now (--force or --stage), due or not."""
        return self.force or self.stages is not None

    @property
    def wanted(self) -> tuple[str, ...]:
        """The stages this run may run."""
        return self.stages or plan.DEFAULT_STAGES


@dataclass
class PreparedSummary:
    """A note written earlier for this transcript (``prepare-idle``, ``--from-summary``)."""

    text: str
    keep_from_line: int | None = None  # the line of the prompt its kept tail starts at
    source: str = "a prepared summary"


@dataclass
class StageReport:
    stage: str
    ran: bool = False
    detail: str = ""
    items: list[dict] = field(default_factory=list)  # what was cleared, clamped, kept…
    freed: int = 0  # tokens, estimated
    saved: list[str] = field(default_factory=list)  # files in the store

    def as_dict(self) -> dict:
        return {"stage": self.stage, "ran": self.ran, "detail": self.detail, "freed": self.freed,
                "items": self.items, "saved": self.saved}


@dataclass
class CompactResult:
    due: bool = False
    reason: str = ""  # why nothing ran, or what happened, in one line
    before: int = 0  # tokens, as ``measure`` counts them
    after: int = 0
    basis: str = "estimated"
    budget: int = 0
    due_at: int = 0
    summary_point: int = 0
    fit_at: int = 0
    target: int = 0  # where this run aimed to land (compaction.target_percent)
    target_percent: float = TARGET_PERCENT
    inside_turn: bool = False  # the summary's split landed inside the current turn
    model: str | None = None
    model_known: bool = True
    stages: list[StageReport] = field(default_factory=list)
    changed: bool = False
    summary: str | None = None
    summarizer: str | None = None
    missing: summary_note.Facts | None = None
    facts: int = 0  # how many must-survive facts were checked
    no_progress: bool = False
    still_over: bool = False
    failure: str | None = None  # a summary that was refused, and why
    counted: int = 0  # distinct texts tokenized
    reused: int = 0  # counts served from memory
    priced: int = 0  # items the summary replaced, priced by a sample rather than counted (head_sample)
    before_sampled: bool = False  # ``before`` holds those prices (no provider count stands for them)

    @property
    def ratio(self) -> float | None:
        return self.after / self.before if self.before else None

    def report(self) -> dict:
        return {
            "command": "compact",
            "due": self.due,
            "changed": self.changed,
            "reason": self.reason,
            "model": self.model,
            "model_known": self.model_known,
            "tokens": {"before": self.before, "after": self.after, "basis": self.basis, "budget": self.budget,
                       "due_at": self.due_at, "summary_point": self.summary_point, "goal": self.fit_at,
                       "target": self.target, "target_percent": self.target_percent,
                       "before_sampled": self.before_sampled},
            "inside_turn": self.inside_turn,
            "ratio": round(self.ratio, 4) if self.ratio is not None else None,
            "no_progress": self.no_progress,
            "still_over": self.still_over,
            "stages": [s.as_dict() for s in self.stages],
            "summary": None if self.summary is None else {
                "summarizer": self.summarizer,
                "text": self.summary,
                "facts_checked": self.facts,
                "missing": self.missing.as_dict() if self.missing else {},
            },
            "failure": self.failure,
            "tokenized": {"distinct_texts": self.counted, "reused": self.reused, "sampled_items": self.priced},
        }


class _Snapshot:
    """The records as they are before a run, to put back when the run is refused. Records are
    edited in place (``Record.edit`` parses a fresh copy the first time), so their state is
    kept, and a deep copy of any record an earlier step already edited."""

    def __init__(self, transcript: Transcript) -> None:
        import copy

        self.records = transcript.lines.copy(apart=True)  # (lines left unmade stay so: made after, they are made anew)
        self.state = [(r, copy.deepcopy(r._obj) if r.edited else r._obj, r.edited, r.lineno)
                      for r in transcript.made()]

    def restore(self, transcript: Transcript) -> None:
        for record, obj, edited, lineno in self.state:
            record._obj, record.edited, record.lineno = obj, edited, lineno
        transcript.records = self.records.copy(apart=True)
        transcript.invalidate()


def _orphan_keys(view: View) -> set[tuple[str, str]]:
    return {(i.kind, i.call_id or "") for i in view.orphans()}


def _describe(item: Item, tokens: int, saved=None) -> dict:
    entry = {"line": item.record.lineno, "kind": item.kind, "tool": item.tool, "call_id": item.call_id,
             "tokens": tokens}
    if saved is not None:
        entry["saved"] = str(saved.path)
    return entry


class Compactor:
    """One compaction of one transcript (see ``compact_transcript``).

    The context is measured the way ``lookout measure`` does it at the start, and again when
    a figure is next needed after a change (a stage's clearing, a summary, a truncation), so
    every decision sees what the next run would measure and a second run changes nothing.
    Clearing edits the current view in place, and each distinct text is tokenized once (the
    counter remembers it), so a large transcript is parsed and tokenized as few times as
    possible."""

    def __init__(self, transcript: Transcript, options: Options, store: SavedStore,
                 summarizer: summarizers.Summarizer | None, prepared: PreparedSummary | None) -> None:
        self.transcript = transcript
        self.options = options
        self.store = store
        self.summarizer = summarizer or summarizers.Embedded()
        self.prepared = prepared
        self.result = CompactResult()
        self.gauge: Gauge | None = None
        self._meter = None
        self.planned_keep: Item | None = None  # where the summary would have started the kept turns
        self.planned_request: list[Item] = []  # and the request it kept before them (a split inside a turn)
        self._view: View | None = None  # the current view, patched in place after clearing
        self._tokens: list[int] | None = None  # its items' tokens
        self.dirty = False  # changed since the last measurement
        self.originals: dict[str, str] = {}  # sha256 of cleared content -> the text (a dry run's)
        self.horizon = 0  # items before this index go into the summary as they are (_summary_horizon)
        self.left_to_summary = 0  # items prune and clamp left to the summary for that reason
        self.priced_before = 0  # items before this index (but the setup) are priced, not counted (_head_to_price)

    # --- measuring --------------------------------------------------------------------------
    @property
    def view(self) -> View:
        if self._view is None:
            self._view = self.transcript.view()
            self._tokens = None
        return self._view

    @property
    def tokens(self) -> list[int]:
        if self._tokens is None:
            self._tokens = self.gauge.tokens(self.view, self.priced_before)
        return self._tokens

    def restructured(self) -> None:
        """The adapter changed the transcript's structure: the view must be built again."""
        self._view = None
        self._tokens = None
        self.dirty = True
        self.horizon = self.priced_before = 0  # they named items of the view before

    def measure(self):
        if any(r.lineno == 0 for r in self.transcript.made()):  # lines a stage added: number them as written
            self.transcript.number()
            self.transcript.invalidate()
        view = self.transcript.view()
        if view is not self._view or self._tokens is None:  # else its tokens were patched as it was
            self._view, self._tokens = view, self.gauge.tokens(view, self.priced_before)
        self._meter = self.gauge.measure(view, self._tokens)
        self.dirty = False
        return self._meter

    @property
    def meter(self):
        """The last measurement, taken again if the transcript changed since."""
        if self.dirty:
            self.measure()
        return self._meter

    @property
    def used(self) -> int:
        return self.meter.used.tokens

    @property
    def scale(self) -> float:
        return _scale(self.meter)

    def replaced(self, index: int, text: str) -> int:
        """Item ``index`` now reads ``text``: patch the view; tokens freed."""
        item = self.view.items[index]
        tokens = self.tokens
        old = tokens[index]
        new = self.gauge.counter.count(text)
        item.text = text
        tokens[index] = new
        self.dirty = True
        return old - new

    def settings(self) -> plan.Settings:
        o, b = self.options, self._meter.budget  # the budget does not change with the context
        fit = max(1, min(b.due_at, b.summary_point) - 1)
        return plan.Settings(
            budget=b.budget, fit_at=fit, summary_point=b.summary_point,
            target=max(1, min(fit, int(b.budget * o.target_percent / 100))),
            shorten_at=min(int(b.budget * 0.85), b.summary_point),
            prune=o.prune, protect_tokens=o.protect_tokens, prune_minimum=o.prune_minimum,
            max_tool_output_chars=o.max_tool_output_chars, step_share=int(b.budget / 3),
            tail_turns=o.tail_turns, preserve_recent_tokens=o.preserve_recent_tokens,
            summary_tokens=o.summary_tokens,
        )

    # --- the run ----------------------------------------------------------------------------
    def run(self) -> CompactResult:
        t, r, o = self.transcript, self.result, self.options
        if t.adapter is None:
            r.reason = "the transcript's format is unknown: nothing to compact"
            return r
        self.gauge = Gauge(o, t.view(), self.store, self.originals)
        self.priced_before = self._head_to_price()
        m = self.measure()
        if self.priced_before and not o.explicit and (
                self._not_due(m) or not self._summary_certain(self.settings(), margin=PRICED_MARGIN)):
            self.priced_before, self._tokens = 0, None  # the figures decide whether to compact: count them
            m = self.measure()
        r.model, r.model_known = self.gauge.model, bool(getattr(self.gauge.model_info, "known", True))
        r.before = r.after = m.used.tokens
        r.basis = m.used.basis
        r.budget, r.due_at, r.summary_point = m.budget.budget, m.budget.due_at, m.budget.summary_point
        r.fit_at = self.settings().fit_at
        r.target, r.target_percent = self.settings().target, o.target_percent
        r.due = m.budget.due
        priced = self.priced_before
        r.priced = self.gauge.priced if priced else 0
        r.before_sampled = bool(priced) and m.used.provider is None
        if not o.explicit:
            why = self._not_due(m)
            if why:
                r.reason = why
                return self._done()
        if not t.adapter.can_write:
            r.reason = f"the {t.adapter.name} format is read-only here: passed through unchanged"
            return self._done()
        orphans = _orphan_keys(self.view)
        sent = sum(self.tokens)  # what the model is sent, item by item
        snapshot = _Snapshot(t)
        try:
            self.horizon = self._summary_horizon(self.settings())
            self._stages()
            written = any(st.ran for st in r.stages if st.stage in ("summarize", "truncate"))
            if (self.left_to_summary or priced) and not written:
                # what was left to (or priced for) a summary not written after all: the run again, in full
                snapshot.restore(t)
                self.restructured()
                m = self.measure()
                r.before, r.basis, r.priced, r.before_sampled = m.used.tokens, m.used.basis, 0, False
                r.stages, self.left_to_summary = [], 0
                self._stages()
            self._fit_window()
            if self.dirty:
                self.measure()
            new = _orphan_keys(t.view()) - orphans
            if new:
                kind, call = sorted(new)[0]
                raise LookoutError(f"compact would leave a {kind.replace('_', ' ')} ({call}) without its "
                                   "partner; nothing was written")
        except BaseException:
            snapshot.restore(t)
            raise
        r.changed = any(st.ran for st in r.stages)
        now = sum(self.tokens)
        if r.changed and now >= sent:  # a compaction never grows the context
            r.reason = (f"nothing to compact: the result would not be smaller ({sent:,} → {now:,} tokens); "
                        "the transcript was left as it was")
            r.changed, r.summary, r.missing = False, None, None
        if not r.changed:
            snapshot.restore(t)
        r.after = self.used if r.changed else r.before
        r.basis = self.meter.used.basis
        settings = self.settings()
        r.still_over = r.after > max(settings.fit_at, settings.shorten_at) and r.changed
        if r.changed and r.before and r.after / r.before > NO_PROGRESS_RATIO and r.after >= settings.fit_at:
            r.no_progress = True
        if not r.reason:
            details = "; ".join(f"{st.stage} {st.detail}" for st in r.stages if st.detail)
            r.reason = "compacted" if r.changed else "nothing to compact" + (f" ({details})" if details else "")
        return self._done()

    def _fit_window(self) -> None:
        """Nothing over the model's window is written: with ``--on-failure truncate`` the oldest
        steps go until it fits; else the run is refused (and the transcript left as it was). A
        smaller ``--max-tokens`` is a goal (over it, the report says so), not the window."""
        figures = self.meter.budget
        budget = figures.budget if self.options.budget is None else max(figures.budget, figures.window)
        if self.used <= budget or not {"summarize", "truncate"} & set(self.options.wanted):
            return  # (a stage run alone promises no fit)
        if self.options.on_failure == "truncate":
            self.truncate(self.settings(), "the context was still over the window")
        over = self.used - budget
        if over > 0:
            raise LookoutError(f"compact: context window exceeded by {over:,} tokens ({self.used:,} of {budget:,} "
                               "even with the summary, the request and the last step); the transcript was left "
                               "as it was")

    def _done(self) -> CompactResult:
        if self.gauge is not None:
            self.result.counted = self.gauge.counter.misses
            self.result.reused = self.gauge.counter.hits
            close = getattr(self.gauge.counter, "close", None)
            if close is not None:
                close()  # the new counts go to the cache in one transaction
        return self.result

    def _not_due(self, m) -> str | None:
        o = self.options
        pct = 100 * m.used.tokens / m.budget.budget if m.budget.budget else 0
        if not o.auto:
            return "automatic compaction is off (compaction.auto = false); use --force to compact now"
        if not getattr(self.gauge.model_info, "known", True) and o.budget is None:
            return (f"the model {self.gauge.model or '(none recorded)'} is not in the models file, so its "
                    "context is not tracked; pass --model, --max-tokens or --force")
        if not m.budget.due:
            return (f"not due: {m.used.tokens:,} of {m.budget.budget:,} tokens ({pct:.0f}%); "
                    f"compaction is due at {m.budget.due_at:,}")
        return None

    def _stages(self) -> None:
        o = self.options
        for stage in (s for s in plan.STAGES if s in o.wanted):
            settings = self.settings()
            if stage == "prune":
                self.prune(settings)
            elif stage == "clamp":
                self.clamp(settings)
            elif stage == "summarize":
                if not o.explicit and self.used <= settings.target:
                    self.result.stages.append(StageReport(
                        "summarize", detail=f"not needed: {self.used:,} tokens, under the target of {settings.target:,}"))
                    continue
                with progress.stage("summarizing"):
                    self.summarize_or_truncate(settings)
            elif stage == "shorten":
                self.shorten(settings)
            elif stage == "truncate":
                self.truncate(settings, "asked for")

    def _summarized_before(self) -> int:
        """The index before which every item goes into a summary written this run: the message
        of the earliest prompt the split can keep from (a prepared summary's, when earlier);
        0 when there is none."""
        items = self.view.items
        keep = plan.earliest_keep(items, self.options.tail_turns)
        hint = self.prepared.keep_from_line if self.prepared is not None else None
        if keep is not None and hint is not None:  # a prepared summary keeps from its own prompt
            at = next((i for i, it in enumerate(items) if it.prompt and it.record.lineno == hint), None)
            keep = keep if at is None else min(keep, at)
        return plan.message_start(items, keep) if keep else 0

    def _head_to_price(self) -> int:
        """The index before which items are priced by a sample rather than counted
        (``tokens.sample``): what a summary this run writes replaces, when its text runs past
        ``tokens.sample.ABOVE_CHARS`` (0: everything is counted). ``run`` counts them after all
        when an automatic run's figures leave the summary in doubt."""
        o = self.options
        if o.tokenize_all or o.estimate or "summarize" not in o.wanted:
            return 0
        if not (o.explicit or o.auto) or not self.transcript.adapter.can_write:
            return 0
        start = self._summarized_before()
        chars = sum(len(i.text) for i in self.gauge.meter.priced_items(self.view, start))
        return start if chars > head_sample.ABOVE_CHARS else 0

    def _summary_certain(self, s: plan.Settings, margin: float = 1.0) -> bool:
        """Whether this run writes a summary: asked for, or automatic with the context still over
        ``margin`` times the goal even if prune and clamp freed every token they could touch."""
        if self.options.explicit:
            return True
        items, tokens = self.view.items, self.tokens
        freeable = set(plan.plan_prune(items, tokens, s, lambda _i: 0).candidates)
        freeable.update(c.index for c in plan.plan_clamp(items, tokens, s))
        free_all = sum(tokens[i] for i in freeable)  # at most: placeholders cost something
        m, scale = self.meter, self.scale
        conversation = self.gauge.meter.conversation_sum(self.view, tokens, 0, len(items))
        lowest = min(m.used.tokens - max(scale, 1) * free_all, min(scale, 1) * (conversation - free_all))
        return lowest >= margin * s.target

    def _summary_horizon(self, s: plan.Settings) -> int:
        """The index before which every item is certain to go into the summary this run writes
        (0 when a summary is not certain). Pruning or clamping those items first would only save
        them, edit their lines and read them back for the note, which then replaces them all;
        they stay as they are (on a summary that is not written after all, ``run`` runs the
        stages again without this)."""
        stages = self.options.wanted
        if "summarize" not in stages or not {"prune", "clamp"} & set(stages):
            return 0
        if self.priced_before:  # certain already (``run``)
            return self.priced_before
        start = self._summarized_before()
        if not start or not self._summary_certain(s):
            return 0
        split = plan.plan_split(self.view.items, self.tokens, s)  # inside the turn: up to its kept steps
        return split.keep_from if split.request and split.keep_from else start

    def clear(self, index: int, what: str, report: StageReport, **extra) -> None:
        """Save item ``index`` and leave a placeholder (``clearing.clear_item``)."""
        item, tokens = self.view.items[index], self.tokens[index]
        original = item.text
        cleared = clear_item(self.store, self.transcript, item, what, tokens=tokens)
        if self.store.dry_run:  # nothing on disk to read it back from
            self.originals[cleared.content.sha256] = original
        report.items.append({**_describe(item, tokens, cleared.content), **extra})
        report.saved.append(str(cleared.content.path))
        report.freed += self.replaced(index, cleared.text)

    def clear_cost(self, what: Callable[[Item], str]) -> Callable[[int], int]:
        """Prices the placeholder that would clear item i, as ``what(item)`` names it (about,
        for an item left to the summary: it is not cleared)."""
        def cost(i: int) -> int:
            if i < self.horizon:
                return plan.PLACEHOLDER_TOKENS
            item = self.view.items[i]
            return clear_cost(self.store, item, what(item), self.gauge.counter.count, self.tokens[i])
        return cost

    def cut(self, index: int, head: int, tail: int, report: StageReport, what: str | None = None,
            **extra) -> bool:
        """Keep item ``index``'s beginning and end, save the middle (``clearing.clamp_item``)."""
        item, tokens = self.view.items[index], self.tokens[index]
        original = item.text
        done = clamp_item(self.store, self.transcript, item, head, tail, **({"what": what} if what else {}))
        if done is None:
            return False
        if self.store.dry_run:  # nothing on disk to read it back from
            self.originals[done.content.sha256] = original
        report.items.append({**_describe(item, tokens, done.content), "kept_chars": head + tail, **extra})
        report.saved.append(str(done.content.path))
        report.freed += self.replaced(index, done.text)
        return True

    # --- 1. prune ---------------------------------------------------------------------------
    def prune(self, s: plan.Settings) -> None:
        report = StageReport("prune")
        self.result.stages.append(report)
        p = plan.plan_prune(self.view.items, self.tokens, s, self.clear_cost(_pruned))
        if p.skipped:
            report.detail = f"skipped: {p.skipped}"
            return
        if not self.options.explicit and self.used < s.summary_point:
            ok, why = plan.worth_rewrite(p, self.tokens, self._cache(), s)
            if not ok:
                report.detail = (f"waiting: {why}; clearing {p.freed:,} tokens waits for the summary "
                                 f"point ({s.summary_point:,})")
                return
        cleared = [i for i in p.items if i >= self.horizon]
        for i in cleared:
            self.clear(i, _pruned(self.view.items[i]), report)
        report.ran = bool(cleared)
        detail = f"cleared {len(cleared)} tool output(s) the agent had read, about {report.freed:,} tokens"
        left = len(p.items) - len(cleared)
        report.detail = _with_left(detail if cleared else "", left, "read tool output(s)")
        self.left_to_summary += left

    def _cache(self) -> plan.CacheCost | None:
        warm = self.meter.warm
        if warm is None:
            return None
        info = self.gauge.model_info
        base = getattr(info, "price_input", None)
        write_price = getattr(info, "price_cache_write_1h" if warm.tier == "1h" else "price_cache_write_5m", None)
        read_price = getattr(info, "price_cache_read", None)
        write = write_price / base if base and write_price else (2.0 if warm.tier == "1h" else 1.25)
        read = read_price / base if base and read_price else 0.1
        return plan.CacheCost(warm=not warm.expired, write=write, read=read)

    # --- 2. clamp ---------------------------------------------------------------------------
    def clamp(self, s: plan.Settings) -> None:
        report = StageReport("clamp")
        self.result.stages.append(report)
        steps = plan.plan_clamp(self.view.items, self.tokens, s)
        left = sum(1 for c in steps if c.index < self.horizon)
        for c in steps:
            if c.index >= self.horizon:
                self.cut(c.index, c.head, c.tail, report, reason=c.reason)
        if report.items:
            report.ran = True
            report.detail = (f"kept the beginning and end of {len(report.items)} long tool output(s), "
                             f"about {report.freed:,} tokens freed")
        elif not left:
            report.detail = f"nothing over {s.max_tool_output_chars:,} characters or its step's share"
        report.detail = _with_left(report.detail, left, "long tool output(s)")
        self.left_to_summary += left

    # --- 3. summarize -----------------------------------------------------------------------
    def summarize_or_truncate(self, s: plan.Settings) -> None:
        try:
            self.summarize(s)
        except summarizers.SummaryFailed as exc:
            self.result.failure = str(exc)
            self.result.stages[-1].detail += f"refused: {exc}"
            if self.options.on_failure == "truncate":
                self.truncate(s, f"the summary failed: {exc}", keep=self.planned_keep, request=self.planned_request)
                return
            raise LookoutError(f"compact: {exc}; the transcript was left as it was") from None

    def summarize(self, s: plan.Settings) -> None:
        report = StageReport("summarize")
        self.result.stages.append(report)
        scale = self.scale  # measures first if an earlier stage changed the context
        items = self.view.items
        tokens = self.tokens
        split = plan.plan_split(items, tokens, s)
        prepared = self.prepared
        if prepared is not None and prepared.keep_from_line is not None:
            hint = next((i for i, it in enumerate(items) if it.prompt and it.record.lineno == prepared.keep_from_line),
                        None)
            if hint is not None and (split.keep_from is None or hint != split.keep_from):
                split = plan.split_at(items, tokens, hint)
            elif hint is None:  # prepared inside the turn: the note covers the steps before its cut
                starts = plan.prompts(items)
                cuts = plan.step_starts(items, starts[-1]) if starts else []
                at = next((c for c in cuts if items[c].record.lineno == prepared.keep_from_line), None)
                if at is not None:
                    split = plan.inside_at(items, tokens, starts[-1], at)
        if split.keep_from is None:
            report.detail = split.reason or "nothing to summarize"
            return
        self.planned_keep = items[split.keep_from]
        self.planned_request = [items[i] for i in split.request]
        head = [items[i] for i in split.head]
        previous = [items[i] for i in split.previous]
        fresh = [it for it in head if it not in previous]
        text_of = self.text_of
        digest = self._digest(fresh, previous, text_of)
        if split.request and not digest.goal:  # the request follows the note: the note still says what it is
            asked = next((items[i] for i in split.request if items[i].role == "user" and items[i].text.strip()), None)
            digest.goal = summary_note.goal_of(asked.text) if asked is not None else ""
        parts = summary_note.transcript_parts(head, text_of, limit=10**9)
        original = self.store.put_parts((p.encode("utf-8", "surrogatepass") for p in parts),
                                        "text", what="the context before a summary")
        digest.original = (f"The whole conversation before this summary is saved in {original.path} "
                           "(plain text); read or search it when you need a detail this summary left out.")
        room = int(s.target / scale) - _inferred(self.meter) - split.setup_tokens - split.tail_tokens
        budget = plan.note_budget(split, s, room)
        request = summarizers.Request(
            items=head, digest=digest, budget=budget, replaced_tokens=split.head_tokens,
            count=self.gauge.counter.count, text_of=text_of, instructions=self.options.instructions,
            previous=[p.text for p in previous], chat_model=self.gauge.model,
        )
        summarizer = self.summarizer
        if prepared is not None:
            summarizer = summarizers.Prepared(prepared.text, prepared.source)
        used = summarizer
        if self.options.dry_run and summarizer.external:
            used = summarizers.Embedded()  # plan with the embedded note; call nobody on a dry run
            report.detail = f"would ask {summarizer.describe()}; "
        raw = used.summarize(request)
        if isinstance(used, summarizers.Embedded) and self.gauge.counter.count(raw) >= split.head_tokens:
            report.detail += (f"nothing worth summarizing: the earlier turns hold only {split.head_tokens:,} "
                              "tokens, no more than a note would take")
            return
        note = summarizers.check(raw, request)
        if not isinstance(used, summarizers.Embedded):
            note = summarizers.check(summary_note.pin(note, digest), request)
        facts = summary_note.must_survive(digest)
        self.result.missing = summary_note.missing(note, facts)
        self.result.facts = len(facts)
        self.result.summary = note
        self.result.summarizer = summarizer.describe()
        note_tokens = self.gauge.counter.count(note)
        post = self.used - round((split.head_tokens - note_tokens) * scale)
        written = self.transcript.adapter.compact(
            self.transcript, note, items[split.keep_from],
            {"trigger": self._trigger(), "pre_tokens": self.used, "post_tokens": max(post, 0),
             "save": self._saver(report), "request": [items[i] for i in split.request]},
        )
        if not written:
            report.detail = "nothing to summarize: this summary is already in place"
            self.result.summary = None
            return
        report.ran = True
        report.freed = split.head_tokens - note_tokens
        turns = sum(1 for it in head if it.prompt)
        cuts = plan.step_starts(items, split.request[-1]) if split.request else []  # the current turn's steps
        steps = sum(1 for c in cuts if c < split.keep_from)
        report.items = [{"summarized_turns": turns, "summarized_tokens": split.head_tokens,
                         "note_tokens": note_tokens, "kept_turns": split.tail_turns,
                         "kept_tokens": split.tail_tokens, "kept_from_line": items[split.keep_from].record.lineno,
                         "updated_earlier_summary": bool(previous), "inside_turn": bool(split.request),
                         "summarized_steps": steps}]
        report.saved.append(str(original.path))
        about = "about " if self.priced_before else ""  # priced by a sample (head_sample)
        if split.request:
            self.result.inside_turn = True
            kept_steps = len(cuts) - steps
            report.detail += (f"{turns} earlier turn(s) and {steps} step(s) of the current one, {about}"
                              f"{split.head_tokens:,} tokens → a {note_tokens:,}-token note ({summarizer.describe()}); "
                              f"kept the request and the last {kept_steps} step(s) word for word "
                              f"({split.tail_tokens:,} tokens)")
        else:
            report.detail += (f"{turns} earlier turn(s), {about}{split.head_tokens:,} tokens → a {note_tokens:,}-token "
                              f"note ({summarizer.describe()}); kept the last {split.tail_turns} turn(s) word for "
                              f"word ({split.tail_tokens:,} tokens)")
        self.restructured()
        self.measure()

    def text_of(self, item: Item) -> str:
        """An item's text as the agent first saw it (cleared output comes back)."""
        if item.kind != TOOL_RESULT or MARKER not in item.text:
            return item.text
        return saved_text(self.store, item, self.originals)

    def _digest(self, fresh: Sequence[Item], previous: Sequence[Item], text_of) -> summary_note.Digest:
        new = summary_note.digest(fresh, text_of, self.options.instructions)
        old: summary_note.Digest | None = None
        for item in previous:
            parsed = summary_note.parse(item.text)
            if parsed is None:
                parsed = summary_note.Digest(earlier=[_strip_marker(item.text)])
            old = parsed if old is None else summary_note.merge(old, parsed)
        return summary_note.merge(old, new) if old is not None else new

    def _saver(self, report: StageReport) -> Callable[[list[Record]], str]:
        def save(records: list[Record]) -> str:
            data = b"".join(r.raw if r.raw is not None else r.to_bytes() for r in records)
            saved = self.store.put(data, "record", lines=len(records))
            report.saved.append(str(saved.path))
            return f"{MARKER}{saved.sha256}"
        return save

    def _trigger(self) -> str:
        return "manual" if self.options.explicit else "auto"

    # --- 4. shorten -------------------------------------------------------------------------
    def shorten(self, s: plan.Settings) -> None:
        report = StageReport("shorten")
        self.result.stages.append(report)
        if self.used <= s.shorten_at:
            report.detail = f"not needed: {self.used:,} tokens, under {s.shorten_at:,}"
            return
        cleared = shortened = 0
        aim = int(s.shorten_at * 0.99)  # a little under, for what the estimate misses
        for _round in range(3):
            excess = int((self.used - aim) / self.scale) + 1
            p = plan.plan_shorten(self.view.items, self.tokens, excess, self.clear_cost(_cleared_to_fit))
            if not p.clear and not p.shorten:
                break
            for i in p.clear:
                self.clear(i, _cleared_to_fit(self.view.items[i]), report, action="cleared")
                cleared += 1
            for c in p.shorten:
                if self.cut(c.index, c.head, c.tail, report,
                            "the middle of this output, which was shortened to fit the context", action="shortened"):
                    shortened += 1
            report.ran = True
            self.measure()  # the next round, if any, starts from what measure counts
            if self.used <= s.shorten_at:
                break
        if report.ran:
            report.detail = (f"cleared {cleared} read output(s) and shortened {shortened} unread one(s) "
                             "in the kept turns")
        else:
            report.detail = "nothing left to shorten: the rest is the latest request, the setup and the summary"

    # --- 5. truncate ------------------------------------------------------------------------
    def truncate(self, s: plan.Settings, why: str, keep: Item | None = None,
                 request: Sequence[Item] = ()) -> None:
        """Drop the oldest turns: those a failed summary would have replaced (``keep``, and the
        ``request`` it kept before it), else as many as the target needs; when the latest turn
        is all there is or too long alone, its oldest steps (``plan.truncate_steps``)."""
        report = StageReport("truncate")
        self.result.stages.append(report)
        scale = self.scale  # measures first if an earlier stage changed the context
        view = self.view
        tokens = self.tokens
        goal = int(s.target / scale)
        kept_request: list[Item] = [i for i in request if i in view.items]
        if keep is not None and keep in view.items:
            p = plan.truncate_at(view.items, tokens, view.items.index(keep)) if not kept_request else None
        else:
            if self.used <= s.fit_at and not self.options.force:  # due past the goal, then down to the target
                report.detail = f"not needed: {self.used:,} tokens fit the goal of {s.fit_at:,}"
                return
            p = plan.plan_truncate(view.items, tokens, goal, fixed=_inferred(self.meter))
            start = plan.message_start(view.items, p.keep_from) if p.keep_from is not None else 0
            if p.keep_from is None or _inferred(self.meter) + sum(tokens[start:]) + sum(
                    t for it, t in zip(view.items, tokens) if it.kind == SETUP) > goal:
                steps = plan.truncate_steps(view.items, tokens, goal, fixed=_inferred(self.meter))
                if steps is not None:
                    p, keep, kept_request = None, view.items[steps[0]], [view.items[i] for i in steps[1]]
        if p is not None:
            if p.keep_from is None:
                report.detail = p.reason or "nothing to drop"
                return
            keep = view.items[p.keep_from]
            dropped = p.dropped_tokens
            turns = p.dropped_turns
        else:
            at = view.items.index(keep)
            first = view.items.index(kept_request[0])
            dropped = sum(t for i, t in enumerate(tokens[:at]) if view.items[i].kind != SETUP) - sum(
                tokens[view.items.index(r)] for r in kept_request)
            turns = sum(1 for it in view.items[:first] if it.prompt)
        written = self.transcript.adapter.compact(
            self.transcript, None, keep,
            {"trigger": self._trigger(), "pre_tokens": self.used,
             "post_tokens": max(0, self.used - round(dropped * scale)), "save": self._saver(report),
             "request": kept_request},
        )
        if not written:
            report.detail = "nothing to drop"
            return
        report.ran = True
        report.freed = dropped
        report.items = [{"dropped_turns": turns, "dropped_tokens": dropped, "kept_from_line": keep.record.lineno,
                         "inside_turn": p is None}]
        inside = " and the oldest steps of the current one, keeping its request" if p is None else ""
        report.detail = f"dropped the {turns} oldest turn(s){inside}, {dropped:,} tokens ({why})"
        self.restructured()
        self.measure()


def _with_left(detail: str, count: int, what: str) -> str:
    """A stage's detail, and the items it left to the summary (``Compactor.horizon``)."""
    if not count:
        return detail
    left = f"left {count:,} {what} as they are: the summary replaces the turns that hold them"
    return f"{detail}; {left}" if detail else left


def _pruned(item: Item) -> str:
    return f"{item.tool or 'tool'} output"


def _cleared_to_fit(item: Item) -> str:
    return f"{item.tool or 'tool'} output (already read; cleared to fit)"


def _strip_marker(text: str) -> str:
    return re.sub(r"\s*lookout-restore:[0-9a-f]{64}(?:\+\d+)?", "", text)


def compact_transcript(transcript: Transcript, options: Options | None = None, store: SavedStore | None = None,
                       summarizer: summarizers.Summarizer | None = None, *,
                       prepared: PreparedSummary | None = None) -> CompactResult:
    """Compact ``transcript`` in place (its records change; nothing is written to disk except
    the saved-output store). Raises ``LookoutError`` when it must refuse (a bad summary, a
    call left without its result) and then leaves the transcript as it was."""
    if store is None:
        from lookout_cli.core.paths import save_dir

        store = SavedStore(save_dir(), dry_run=bool(options and options.dry_run), command="compact",
                           transcript=transcript.source)
    return Compactor(transcript, options or Options(), store, summarizer, prepared).run()


def prepare_summary(transcript: Transcript, options: Options | None = None, store: SavedStore | None = None,
                    summarizer: summarizers.Summarizer | None = None) -> PreparedSummary | None:
    """Write the note ``compact --force`` would write now, without changing the transcript
    (for ``prepare-idle``). None when there is nothing to summarize."""
    options = options or Options()
    forced = Options(**{**options.__dict__, "force": True, "stages": ("summarize",)})
    records = transcript.records
    trial = Transcript([r.copy() for r in records], transcript.adapter, transcript.source)
    if store is None:
        from lookout_cli.core.paths import save_dir

        store = SavedStore(save_dir(), dry_run=options.dry_run, command="prepare-idle", transcript=transcript.source)
    result = Compactor(trial, forced, store, summarizer, None).run()
    if result.summary is None:
        return None
    stage = next((s for s in result.stages if s.stage == "summarize" and s.ran), None)
    line = stage.items[0]["kept_from_line"] if stage and stage.items else None
    return PreparedSummary(result.summary, line, "a summary prepared while the chat was idle")


def summary_of(result: CompactResult) -> str:
    """A one-line account of a run, for standard error."""
    if not result.changed:
        return f"compact: {result.reason}"
    pct = (f" ({100 * result.after / result.budget:.0f}% of {result.budget:,}; target "
           f"{result.target_percent:g}%, {result.target:,})") if result.budget else ""
    about = "about " if result.before_sampled else ""
    return f"compact: {about}{result.before:,} → {result.after:,} tokens{pct}"


def plan_lines(result: CompactResult, dry_run: bool = False, limit: int = 8) -> list[str]:
    """What each stage did (or, on a dry run, would do), for standard error."""
    lines = []
    for st in result.stages:
        verb = st.detail
        if dry_run:
            verb = verb.replace("cleared ", "would clear ", 1).replace("kept the beginning", "would keep the beginning", 1)
        lines.append(f"  {st.stage:<10} {verb}")
        shown = [x for x in st.items if "line" in x][:limit]
        for x in shown:
            what = f"{x.get('tool') or x.get('kind')} {x.get('call_id') or ''}".strip()
            lines.append(f"    line {x['line']}: {what}, {x['tokens']:,} tokens"
                         + (f" → {x['saved']}" if x.get("saved") else ""))
        more = len([x for x in st.items if "line" in x]) - len(shown)
        if more > 0:
            lines.append(f"    … and {more} more (see --report)")
    return lines

