"""The context meter's analysis: what fills a transcript's model-visible context, what the
provider counted, what it cost, and what could be reclaimed.

Pure functions over a ``View`` (no I/O except reading setup files the caller names), so other
commands reuse them: ``compact`` and ``prepare-idle`` call :func:`item_tokens`,
:func:`last_response`, :func:`context_used`, :func:`warm_cache` and :func:`reclaimable`.
:func:`measure` puts everything together into one :class:`Meter`; ``meter.report`` renders it.

Every figure carries a *basis*: ``exact`` (a provider count recorded in the transcript),
``estimated`` (our tokenizer or the fast estimate), ``inferred`` (setup worked out from the
first recorded prompt), or a sum of two (``exact+estimated``).
"""

from __future__ import annotations

import array
import bisect
import datetime as dt
import operator
import os
from collections.abc import Callable, Iterator, Sequence

from lookout_cli.core import progress
from lookout_cli.core.dataclass import dataclass, field, replace
from lookout_cli.formats.kinds import IMAGE, NOTICE, SETUP, SUMMARY, TEXT, THINKING, TOOL_CALL, TOOL_RESULT
from lookout_cli.formats.usages import column, prompt_of, split_usages
from lookout_cli.images.costs import image_item_tokens, image_provider
from lookout_cli.meter.cost import CacheTotals, Cost, WarmCache, cache_totals, total_cost, warm_cache
from lookout_cli.meter.reclaim import DuplicateRead, Reclaimable, call_target, duplicate_reads, reclaimable, tool_name

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:  # pragma: no cover - the meter reads views but builds none: not imported to run
    from typing import Any

    from lookout_cli.formats.view import Item, Usage, View

EXACT = "exact"
ESTIMATED = "estimated"
INFERRED = "inferred"
FROM_FILE = "file"

SETUP_LABELS = {
    "system": "System prompt",
    "tools": "Tool definitions",
    "rules": "Rules",
    "environment": "Environment",
    "memory": "Memory",
    "skills": "Skills",
}
CONVERSATION_LABELS = {
    "messages": "Messages",
    "replies": "Agent replies",
    "thinking": "Thinking",
    "tool_results": "Tool results",
    "summaries": "Summaries",
    "images": "Images",
    "notices": "Notices",
}
RULES_FILES = ("CLAUDE.md", "AGENTS.md")
TOP_TOOL_RESULTS = 5
DEFAULT_AMBER = 75.0
HIDDEN_BELOW = 10.0
PRESETS = {"lookout": (75.0, None), "localpilot": (65.0, 85.0)}


# --- token counts per item ---------------------------------------------------------------------

def _priced(index: int, item: Item, priced_before: int) -> bool:
    """Whether ``item_tokens`` prices item ``index``'s text rather than counting it: one of the
    first ``priced_before``, but the setup (an image is never counted, nor an item counted as the
    view was built)."""
    return index < priced_before and item.kind != SETUP


def uncounted(view: View, priced_before: int = 0) -> list[Item]:
    """The items ``item_tokens`` counts with its counter: texts not counted as the view was built
    (nor priced, ``priced_items``)."""
    return [item for index, item in enumerate(view.items)
            if item.tokens is None and item.kind != IMAGE and not _priced(index, item, priced_before)]


def priced_items(view: View, priced_before: int) -> list[Item]:
    """The items ``item_tokens`` prices rather than counts."""
    return [item for index, item in enumerate(view.items[:priced_before])
            if item.tokens is None and item.kind != IMAGE and _priced(index, item, priced_before)]


def item_tokens(view: View, counter, provider: str | None = None, priced_before: int = 0,
                price: Callable[[str], int] | None = None) -> list[int]:
    """Tokens of every item of ``view`` (in order). Texts are counted with ``counter`` (a
    ``TokenCounter``, which counts each distinct text once); images by the provider's formula;
    the texts of the first ``priced_before`` items but the setup by ``price`` (``compact``'s
    estimate of the turns its summary replaces, ``tokens.sample``)."""
    provider = provider or image_provider(view.model, view.format)
    encoding = getattr(counter, "encoding", None)
    if getattr(counter, "exact", False) and encoding is not None:
        from lookout_cli.tokens.tokenizer import count_left

        count_left(sum(len(item.text) for item in uncounted(view, priced_before)), encoding)
    out = []
    with progress.stage("counting tokens", len(view.items), "items"):
        for index, item in enumerate(view.items):
            progress.update(index)
            if item.kind == IMAGE:
                out.append(image_item_tokens(item, provider))
            elif item.tokens is not None:
                out.append(item.tokens)  # counted as the view was built (item_counts)
            elif _priced(index, item, priced_before):
                out.append(price(item.text))
            else:
                out.append(counter.count(item.text))
    return out


# The meter's records hold plain figures, compared and shown as their JSON (meter_report.to_dict):
# no generated __eq__ and __repr__, two of the three functions a dataclass compiles as its
# module loads (a measure that reuses its figures takes 0.1 s, a fifth of it importing these).
# Their __init__ stays compiled: a measure builds thousands of parts, results and responses.
_record = dataclass(slots=True, eq=False, repr=False)


# --- parts --------------------------------------------------------------------------------------

@_record
class Part:
    """One row of what fills the context: a setup source or a kind of conversation content."""

    group: str  # "setup" | "conversation"
    key: str
    label: str
    tokens: int = 0
    items: int = 0
    basis: str = ESTIMATED
    source: str | None = None  # where an unrecorded setup part came from
    children: list[Part] = field(default_factory=list)  # tool results by tool


@_record
class ToolResult:
    """A tool result in the context, with the call that asked for it (the largest are listed)."""

    tool: str
    call_id: str | None
    tokens: int
    line: int
    target: str | None = None  # the path or command the call named


def conversation_key(item: Item) -> str | None:
    """Which conversation part an item belongs to (None for setup)."""
    if item.kind == SETUP:
        return None
    if item.kind == TOOL_RESULT:
        return "tool_results"
    if item.kind == IMAGE:
        return "images"
    if item.kind == SUMMARY:
        return "summaries"
    if item.kind == NOTICE:
        return "notices"
    if item.kind == THINKING:
        return "thinking"
    if item.kind == TOOL_CALL or item.role == "assistant":
        return "replies"
    return "messages"


def setup_key(item: Item) -> str | None:
    if item.kind == SETUP:
        return item.setup if item.setup in SETUP_LABELS else "system"
    if item.role in ("system", "developer") and item.kind == TEXT:
        return "system"
    return None


@_record
class SetupSource:
    """Setup the transcript does not record: from a flag's file or a discovered rules file."""

    key: str
    path: str
    text: str
    how: str  # "--system", "discovered"…


def read_setup_files(files: dict[str, str | None]) -> list[SetupSource]:
    """Read the ``--system/--tools/--rules/--skills`` files (key -> path)."""
    from lookout_cli.core.errors import LookoutError

    found = []
    for key, path in files.items():
        if not path:
            continue
        try:
            text = _read_text(path)
        except OSError as exc:
            raise LookoutError(f"--{key}: {path}: {exc.strerror or exc}") from None
        found.append(SetupSource(key, str(path), text, f"--{key}"))
    return found


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as handle:  # (as Path.read_text reads it)
        return handle.read()


def discover_rules(cwd: str | None) -> list[SetupSource]:
    """CLAUDE.md and AGENTS.md in the transcript's working folder, when that folder exists here."""
    if not cwd or not os.path.isdir(cwd):
        return []
    found = []
    for name in RULES_FILES:
        path = os.path.join(cwd, name)
        if os.path.isfile(path):
            try:
                text = _read_text(path)
            except OSError:
                continue
            found.append(SetupSource("rules", path, text, "discovered"))
    return found


# --- responses and provider counts --------------------------------------------------------------

@_record
class Response:
    """Where one recorded usage sits in the view: the items before it were its prompt."""

    usage: Usage
    start: int  # index in view.items of the response's first item (= items in its prompt)
    end: int  # index just past the response's own (assistant) items


def first_line(view: View) -> int:
    """The first input line of the current context: the one the conversation (not the setup)
    comes from, or the last compaction's when later (a Codex compaction carries user messages
    from lines before it; the responses between were of the context it replaced), or that
    compaction's when the context holds no conversation (a rollback took it all); 0 when
    unknown."""
    lines = [i.record.lineno for i in view.items if i.record.lineno > 0 and i.kind != SETUP]
    compacted = max((c.record.lineno for c in view.compactions), default=0)
    return max(min(lines, default=0), compacted)


class _Positions:
    """Where records and lines sit among a view's items, worked out once so that locating
    every usage of a long session stays linear."""

    def __init__(self, view: View):
        items = view.items
        self.first_line = first_line(view)
        # the first item of each line that records a usage (not of every line: a long session
        # has a hundred thousand)
        wanted = {id(u.record) for u in split_usages(view.usages)[1]}  # (an older one's line is none of them)
        self.by_record: dict[int, int] = {}
        for n, item in enumerate(items):
            key = id(item.record)
            if key in wanted:
                self.by_record.setdefault(key, n)
        lines = [i.record.lineno for i in items]
        # line numbers rise along the items in every format but a rewound chain: bisect then
        self.ordered = all(a <= b for a, b in zip(lines, lines[1:]))
        self.lines = lines
        self.assistant = [n for n, i in enumerate(items) if i.role == "assistant"]
        self.assistant_lines = [lines[n] for n in self.assistant]

    def first_assistant_from(self, items: list[Item], line: int) -> int | None:
        if self.ordered:
            k = bisect.bisect_left(self.assistant_lines, line)
            return self.assistant[k] if k < len(self.assistant) else None
        return next((n for n in self.assistant if items[n].record.lineno >= line), None)

    def first_after(self, items: list[Item], line: int) -> int:
        if self.ordered:
            return bisect.bisect_right(self.lines, line)
        return next((n for n, i in enumerate(items) if i.record.lineno > line), len(items))


def locate(view: View, usage: Usage, positions: _Positions | None = None) -> Response | None:
    """Find the response a usage belongs to among the view's items; None when it lies outside
    the current context (before the last compaction) or no item can be matched."""
    items = view.items
    if not items:
        return None
    at = positions or _Positions(view)
    line = usage.record.lineno
    index = at.by_record.get(id(usage.record))
    if index is None:
        if line <= 0 or line < at.first_line:
            return None
        index = at.first_assistant_from(items, line)
        if index is None:
            # The response itself is not in the view (a request-body list records it on its own
            # line; a trimmed file may lack it): its prompt was everything before the usage.
            start = at.first_after(items, line)
            return Response(usage, start, start)
    message = items[index].message
    start = index
    while start > 0 and items[start - 1].message == message:
        start -= 1
    end = index
    while end < len(items) and (items[end].role == "assistant" or items[end].message == message):
        end += 1
    return Response(usage, start, end)


def responses(view: View, positions: _Positions | None = None) -> list[Response]:
    """Every recorded usage that belongs to the current context, in order."""
    positions = positions or _Positions(view)
    before, by_record = positions.first_line, positions.by_record
    found = []
    for usage in split_usages(view.usages)[1]:  # (the older segments' are before it)
        if usage.record.lineno < before and id(usage.record) not in by_record:
            continue  # before the current context (``locate``'s first test, without the call)
        response = locate(view, usage, positions)
        if response is not None:
            found.append(response)
    return found


def last_usage(view: View) -> Usage | None:
    return view.usages[-1] if view.usages else None


@_record
class LastResponse:
    """The provider's own count for the last response: its prompt's parts and its output."""

    input: int
    cache_write: int
    cache_read: int
    prompt: int
    output: int
    model: str | None
    timestamp: str | None
    line: int
    estimate: int | None  # our estimate of the same prompt (setup + conversation before it)
    in_context: bool  # False when the response predates the current context (compacted)
    basis: str = EXACT


def last_response(view: View, tokens: list[int], setup_tokens: int,
                  positions: _Positions | None = None) -> LastResponse | None:
    usage = last_usage(view)
    if usage is None:
        return None
    response = locate(view, usage, positions)
    estimate = None
    if response is not None:
        estimate = setup_tokens + conversation_sum(view, tokens, 0, response.start)
    return LastResponse(usage.input, usage.cache_write, usage.cache_read, usage.prompt, usage.output,
                        usage.model or view.model, usage.timestamp, usage.record.lineno, estimate,
                        response is not None)


def conversation_sum(view: View, tokens: list[int], start: int, end: int) -> int:
    return sum(t for item, t in zip(view.items[start:end], tokens[start:end]) if item.kind != SETUP)


def cleared_since(view: View, tokens: list[int], positions: _Positions | None = None) -> int:
    """Tokens the provider's last count held that lookout cleared since: output before that
    response whose placeholder names its original size ("about N tokens"). The calibration
    compares the count with the estimate of what the provider saw, not of what is left."""
    from lookout_cli.core.saved import MARKER, original_tokens  # hashlib: not on a reused run's path

    usage = last_usage(view)
    response = locate(view, usage, positions) if usage is not None else None
    if response is None:
        return 0
    extra = 0
    for item, t in zip(view.items[: response.start], tokens):
        if item.kind == TOOL_RESULT and MARKER in item.text:
            named = original_tokens(item.text)
            if named is not None:
                extra += max(0, named - t)
    return extra


def calibration_ratio(provider: int, estimate: int | None) -> float | None:
    from lookout_cli.tokens.tokenizer import calibration

    if estimate is None:
        return None
    return calibration(estimate, provider)


# --- the context used ---------------------------------------------------------------------------

@_record
class Used:
    """Tokens the next request will carry, and what that figure rests on."""

    tokens: int
    basis: str
    provider: int | None  # the last response's prompt + output, when it is current
    pending: int  # tokens added since the last response (estimated, calibrated)
    note: str | None = None


def stale_reason(view: View, response: Response | None) -> str | None:
    """Why the last provider count no longer describes the context, if it does not."""
    # imported once a call: not with the module (a measure that reuses its figures needs none),
    # nor in a helper the loop calls (an import statement costs 1.5 µs; this tests every item)
    from lookout_cli.formats.clearing import is_cleared

    usage = last_usage(view)
    if usage is None:
        return None
    if any(c.record.lineno == 0 or c.record.lineno > usage.record.lineno for c in view.compactions):
        return "The transcript was compacted after the last recorded response"
    if response is not None and any(is_cleared(i) for i in view.items[: response.start]):
        return ("The context holds content lookout cleared, which the provider's last count may "
                "predate")
    return None


def context_used(view: View, tokens: list[int], setup_tokens: int, setup_inferred: int,
                 ratio: float | None, positions: _Positions | None = None) -> Used:
    """Tokens in the context now: the last response's prompt and output as the provider counted
    them, plus what came after (estimated, scaled by the calibration); else the estimate."""
    usage = last_usage(view)
    response = locate(view, usage, positions) if usage is not None else None
    reason = stale_reason(view, response)
    scale = ratio if ratio and 0.25 <= ratio <= 4 else 1.0
    if usage is not None and reason is None:
        pending_raw = conversation_sum(view, tokens, response.end, len(view.items)) if response else 0
        pending = round(pending_raw * scale)
        exact = usage.prompt + usage.output
        return Used(exact + pending, EXACT if pending == 0 else f"{EXACT}+{ESTIMATED}", exact, pending)
    conversation = conversation_sum(view, tokens, 0, len(view.items))
    setup_measured = setup_tokens - setup_inferred
    total = setup_inferred + round((conversation + setup_measured) * scale)
    return Used(total, ESTIMATED, None, 0, reason)


# --- compactions --------------------------------------------------------------------------------

@_record
class CompactionRow:
    """One compaction the transcript records: where, when, why and what it kept."""

    line: int
    timestamp: str | None
    trigger: str | None
    before: int | None
    after: int | None
    after_basis: str | None  # "recorded" or "next response" (its prompt, exact)


def compactions(view: View) -> list[CompactionRow]:
    rows = []
    # the first usage after a compaction, found by halving when the usages run in file order
    # (they nearly always do: a long session compacts hundreds of times over 100k usages)
    lines, ordered = usage_lines(view.usages)
    for c in view.compactions:
        after, basis = c.after, ("recorded" if c.after is not None else None)
        line = c.record.lineno
        if after is None and line > 0:
            at = bisect.bisect_right(lines, line) if ordered else \
                next((n for n, later in enumerate(lines) if later > line), len(lines))
            if at < len(lines):
                after, basis = prompt_of(view.usages, at), "next response"
        rows.append(CompactionRow(line, c.timestamp, c.trigger, c.before, after, basis))
    return rows


# --- everything together ------------------------------------------------------------------------

@_record
class Settings:
    """What a measure depends on besides the transcript: flags, configuration and the time."""

    model: str | None = None  # --model (else the transcript's)
    model_source: str = "flag"  # where ``model`` came from: flag or config
    budget: str | None = None  # --budget 200k|80%
    estimate: bool = False  # --estimate
    setup_files: dict[str, str | None] = field(default_factory=dict)  # --system/--tools/--rules/--skills
    discover_rules: bool = True
    now: dt.datetime | None = None  # --now
    amber: float | None = None  # meter.amber
    red: float | None = None  # meter.red (default: the summary point)
    hidden: float = HIDDEN_BELOW
    models_config: dict | None = None  # config overrides for the models file
    threshold_percent: float | None = None  # compaction.threshold_percent
    reserved: int | None = None  # compaction.reserved


@_record
class BudgetFigures:
    """The model's context window, the budget set against it, the reserve and when compaction is due."""

    window: int
    window_source: str  # "transcript" (recorded by the agent) or "model"
    budget: int
    budget_source: str
    reserve: int
    summary_point: int
    summary_point_source: str
    due_at: int  # tokens at which compaction is due
    due: bool


@_record
class Meter:
    """A finished measure: every figure the report shows, plain values only (JSON-ready)."""

    format: str
    model: str | None
    model_known: bool
    model_source: str
    encoding: str | None  # None when nothing is counted (--usage-only)
    counting: str  # "tokenizer" counts, the fast "estimate", or "usage" (recorded usage only)
    image_provider: str
    budget: BudgetFigures
    used: Used
    percent: float
    state: str  # hidden | normal | amber | red
    amber: float
    red: float
    hidden: float
    parts: list[Part]
    total: int  # the parts' sum (estimated)
    largest_results: list[ToolResult]
    last: LastResponse | None
    calibration: float | None
    calibration_note: str | None
    cache: CacheTotals
    cost: Cost
    warm: WarmCache | None
    compactions: list[CompactionRow]
    duplicates: list[DuplicateRead]
    reclaimable: list[Reclaimable]
    reclaimable_total: int
    series: Series | None  # None: not asked for (a point a response; for --json and the plot only)
    notes: list[str] = field(default_factory=list)

    @property
    def total_basis(self) -> str:
        return "estimated+inferred" if any(p.basis == INFERRED for p in self.parts) else ESTIMATED

    @property
    def counting_label(self) -> str:
        if self.counting == "usage":
            return "the provider's recorded usage only (nothing tokenized)"
        return f"the {self.encoding} tokenizer" if self.counting == "tokenizer" else "the fast estimate (no tokenizer)"

    @property
    def setup_parts(self) -> list[Part]:
        return [p for p in self.parts if p.group == "setup"]

    @property
    def conversation_parts(self) -> list[Part]:
        return [p for p in self.parts if p.group == "conversation"]

    def largest(self, n: int = 2) -> list[Part]:
        return sorted((p for p in self.parts if p.tokens > 0), key=lambda p: -p.tokens)[:n]


def build_parts(view: View, tokens: list[int], sources: list[SetupSource], counter,
                first: Response | None) -> tuple[list[Part], int, list[ToolResult]]:
    """The parts of the context with their tokens. Returns (parts, inferred setup tokens, the
    largest tool results)."""
    calls = view.calls()
    setup = {k: Part("setup", k, v) for k, v in SETUP_LABELS.items()}
    conversation = {k: Part("conversation", k, v) for k, v in CONVERSATION_LABELS.items()}
    by_tool: dict[str, Part] = {}
    results: list[tuple[int, int, int, str]] = []  # (tokens, line, index, tool) of each tool result
    for n, item in enumerate(view.items):
        key = setup_key(item)
        if key is not None:
            part = setup[key]
            part.basis, part.source = ESTIMATED, "recorded"
        else:
            part = conversation[conversation_key(item) or "messages"]
        part.tokens += tokens[n]
        part.items += 1
        if item.kind == TOOL_RESULT:
            name = tool_name(item, calls)
            child = by_tool.setdefault(name, Part("conversation", f"tool:{name}", name))
            child.tokens += tokens[n]
            child.items += 1
            results.append((tokens[n], item.record.lineno, n, name))
    recorded = {k for k, p in setup.items() if p.items}
    for source in sources:
        if source.key in recorded:
            continue  # the transcript records this part; the file would count it twice
        part = setup[source.key]
        part.tokens += counter.count(source.text)
        part.items += 1
        part.basis = FROM_FILE
        part.source = ", ".join(filter(None, [part.source, f"{source.path} ({source.how})"]))
    known_setup = sum(p.tokens for p in setup.values())
    inferred = 0
    missing = [k for k in ("system", "tools") if not setup[k].items]
    if first is not None and missing:
        before = conversation_sum(view, tokens, 0, first.start)
        inferred = max(0, first.usage.prompt - before - known_setup)
    elif missing and view.compactions and view.usages:
        # Compacted since the last response: the setup the agent sends is still there, so infer
        # it from the session's first recorded prompt (its conversation then was one prompt).
        first = Response(view.usages[0], 0, 0)
        inferred = max(0, first.usage.prompt - known_setup)
    parts = [p for p in setup.values()]
    if inferred:
        label = " and ".join(SETUP_LABELS[k] for k in missing).capitalize()
        parts.append(Part("setup", "inferred", label, inferred, 0, INFERRED,
                          f"first recorded prompt (line {first.usage.record.lineno}) minus the estimated conversation before it"))
    tool_part = conversation["tool_results"]
    tool_part.children = sorted(by_tool.values(), key=lambda p: (-p.tokens, p.label))
    parts += list(conversation.values())
    results.sort(key=lambda r: (-r[0], r[1]))
    return parts, inferred, [ToolResult(name, view.items[n].call_id, count, line, call_target(view.items[n], calls))
                             for count, line, n, name in results[:TOP_TOOL_RESULTS]]


def meter_state(percent: float, amber: float, red: float, hidden: float = HIDDEN_BELOW) -> str:
    if percent >= red:
        return "red"
    if percent >= amber:
        return "amber"
    if percent < hidden:
        return "hidden"
    return "normal"


@_record
class Series:
    """One point per recorded response, for the plot and ``--json``: what the provider counted.
    Kept as columns: a long session records tens of thousands of responses, and a dict a point
    cost more to build and to save than the rest of the meter. Iterating gives the points."""

    lines: list[int]
    timestamps: list[str | None]
    prompts: list[int]
    outputs: list[int]
    in_context: list[int]  # the points of the responses in the current context
    compaction_before: list[int]  # the points a compaction comes before (after the previous point)

    def __len__(self) -> int:
        return len(self.lines)

    def __iter__(self) -> Iterator[dict]:
        inside, after = set(self.in_context), set(self.compaction_before)
        for n, (line, timestamp, prompt, output) in enumerate(zip(self.lines, self.timestamps, self.prompts,
                                                                  self.outputs)):
            yield {"n": n, "line": line, "timestamp": timestamp, "prompt": prompt, "output": output,
                   "context": prompt + output, "in_context": n in inside, "compaction_before": n in after}


def series(view: View, found: list[Response]) -> Series:
    older, recent = split_usages(view.usages)
    lines, ordered = usage_lines(view.usages)
    timestamps, prompts, outputs, first = [], [], [], 0
    if older is not None:  # by column
        uncached, write, read, output, _ = older.older_figures()
        timestamps, outputs, first = list(older.stamps), output.copy(), len(older.lines)
        prompts = list(map(operator.add, map(operator.add, uncached, write), read))
    timestamps += [usage.timestamp for usage in recent]
    prompts += [usage.prompt for usage in recent]
    outputs += [usage.output for usage in recent]
    inside = {id(r.usage) for r in found}
    marks = sorted(c.record.lineno for c in view.compactions)
    after: list[int] = []
    # a compaction before a point lies after the previous point's line, up to its own
    if marks and ordered:  # found by halving, a compaction at a time
        after = sorted({bisect.bisect_left(lines, mark) for mark in marks if mark > 0} - {len(lines)})
    elif marks:  # the count of compactions up to a line (bisect_right) grows there
        upto = [bisect.bisect_right(marks, line) for line in (0, *lines)]
        after = [n for n in range(len(lines)) if upto[n + 1] > upto[n]]
    return Series(lines.tolist(), timestamps, prompts, outputs,
                  [n for n, usage in enumerate(recent, first) if id(usage) in inside], after)


def _in_order(lines: list[int]) -> bool:
    return lines == sorted(lines)  # (sorting what is in order is one pass, in C)


def usage_lines(usages: Sequence[Usage]) -> tuple[array.array, bool]:
    """The line of each usage (the older ones' copied from their column), and whether they
    run in file order: the older ones' order is kept with them, the others' is looked at."""
    older, recent = split_usages(usages)
    lines = column(older.lines) if older is not None else array.array("q")
    lines.extend([usage.record.lineno for usage in recent])
    tail = lines[max(0, len(lines) - len(recent) - 1):].tolist()  # (from the last older one on)
    return lines, (older is None or older.older_in_order()) and _in_order(tail)


def measure(view: View, settings: Settings, counter=None, model_info=None, budget_info=None,
            tokens: list[int] | None = None, points: bool = True) -> Meter:
    """Measure a view. ``model_info`` is a ``models.Model`` (looked up from the settings when
    None); ``budget_info`` a ``budget.Budget`` (built from the model and settings when None);
    ``tokens.tokenizer`` the items' tokens when the caller has them (``item_tokens``);
    ``points``: the series (a point a recorded response: a tenth of a prompt's re-measure of
    a long session, for the JSON report and the plot only)."""
    from lookout_cli.tokens import tokenizer as toks

    model_name = settings.model or view.model
    if model_info is None:
        model_info = lookup_model(model_name, settings.models_config)
    if counter is None:
        counter = toks.TokenCounter.for_model(model_name, exact=not settings.estimate)
    provider = image_provider(model_name, view.format)
    if tokens is None:
        tokens = item_tokens(view, counter, provider)
    positions = _Positions(view)  # for every usage located below
    found = responses(view, positions)
    first = found[0] if found else None
    sources = read_setup_files(settings.setup_files)
    recorded_rules = any(setup_key(i) == "rules" for i in view.items)
    if settings.discover_rules and not recorded_rules and not settings.setup_files.get("rules"):
        sources += discover_rules(view.cwd)
    parts, inferred, largest_results = build_parts(view, tokens, sources, counter, first)
    total = sum(p.tokens for p in parts)
    setup_tokens = sum(p.tokens for p in parts if p.group == "setup")
    last = last_response(view, tokens, setup_tokens, positions)
    ratio, why_not = None, None
    if last is None:
        why_not = "the transcript records no provider usage"
    elif not last.estimate:
        why_not = "the last recorded response is not in the current context"
    elif inferred and first is not None and first.usage is view.usages[-1]:
        why_not = "the setup was inferred from this same response, so the two agree by construction"
    else:
        ratio = calibration_ratio(last.prompt, last.estimate + cleared_since(view, tokens, positions))
    used = context_used(view, tokens, setup_tokens, inferred, ratio, positions)
    dups, superseded = duplicate_reads(view, tokens)
    reclaim, reclaim_total = reclaimable(view, tokens, superseded=superseded)
    notes = ["setup the transcript does not record was inferred from the first recorded prompt"] if inferred else []
    return _meter(view, settings, model_info, used, budget_info, notes, encoding=counter.encoding,
                  counting="tokenizer" if counter.exact else "estimate", image_provider=provider, parts=parts,
                  total=total, largest_results=largest_results, last=last, calibration=ratio,
                  calibration_note=why_not, duplicates=dups, reclaimable=reclaim, reclaimable_total=reclaim_total,
                  series=series(view, found) if points else None)


def measure_usage(view: View, settings: Settings, model_info=None, points: bool = True) -> Meter:
    """The meter from the provider's own counts alone (``measure --usage-only``: a view with
    usages and compactions, no items). Nothing is counted, so parts, calibration, duplicate
    reads and reclaimable items stay empty; the context used is the last response's prompt and
    output while no compaction came after it, else unknown. ``points``: as ``measure``'s."""
    model_name = settings.model or view.model
    if model_info is None:
        model_info = lookup_model(model_name, settings.models_config)
    usage = last_usage(view)
    after = [c for c in view.compactions if usage is None or c.record.lineno > usage.record.lineno]
    last = None if usage is None else LastResponse(
        usage.input, usage.cache_write, usage.cache_read, usage.prompt, usage.output, usage.model or view.model,
        usage.timestamp, usage.record.lineno, None, not after)
    if usage is not None and not after:
        exact = usage.prompt + usage.output
        used = Used(exact, EXACT, exact, 0)
    else:
        why = "The transcript was compacted after the last recorded response" if usage is not None and after \
            else "The transcript records no provider usage"
        used = Used(0, "unknown", None, 0, f"{why}: measure without --usage-only to count the context")
    notes = ["usage only: the provider's recorded counts, nothing tokenized (parts, calibration, duplicate "
             "reads and reclaimable items need a full measure)"]
    return _meter(view, settings, model_info, used, None, notes, encoding=None, counting="usage",
                  image_provider=image_provider(model_name, view.format), parts=[], total=0, largest_results=[],
                  last=last, calibration=None, calibration_note="usage only: nothing was counted to compare with",
                  duplicates=[], reclaimable=[], reclaimable_total=0, series=series(view, []) if points else None)


def _meter(view: View, settings: Settings, model_info, used: Used, budget_info, notes: list[str], **figures) -> Meter:
    """The figures every measure gives from the context used and the recorded usages: budget,
    meter state, cache totals, cost and the warm cache."""
    model_name = settings.model or view.model
    model_source = settings.model_source if settings.model else ("transcript" if view.model else "default")
    # (an older usage records none: Claude Code's)
    recorded_window = next((u.context_window for u in reversed(split_usages(view.usages)[1]) if u.context_window), None)
    budget = budget_figures(model_info, recorded_window, settings, used.tokens, budget_info)
    pct = 100 * used.tokens / budget.budget if budget.budget else 0.0
    amber = float(settings.amber if settings.amber is not None else DEFAULT_AMBER)
    red = float(settings.red if settings.red is not None else round(100 * budget.summary_point / budget.budget, 3)
                if budget.budget else 100.0)
    now = settings.now or dt.datetime.now(dt.timezone.utc)
    if not getattr(model_info, "known", True):
        notes.insert(0, f"model {model_name or '(none recorded)'} is not in the models file: its window and "
                        "prices are defaults (pass --model or add it to the config)")
    return Meter(
        format=view.format,
        model=model_name,
        model_known=bool(getattr(model_info, "known", True)),
        model_source=model_source,
        budget=budget,
        used=used,
        percent=pct,
        state=meter_state(pct, amber, red, settings.hidden),
        amber=amber,
        red=red,
        hidden=settings.hidden,
        cache=cache_totals(view.usages),
        cost=total_cost(view.usages, _model_cache(settings.models_config, model_name, model_info), model_name),
        warm=warm_cache(view.usages, now, model_ttl(model_info)),
        compactions=compactions(view),
        notes=notes,
        **figures,
    )


# --- models and budgets ---------------------------------------------------------------------------

def lookup_model(name: str | None, overrides: dict | None = None):
    from lookout_cli.tokens.models import lookup

    return lookup(name, overrides)


def _model_cache(overrides: dict | None, chosen: str | None, chosen_model) -> Callable[[str | None], Any]:
    """Look each response's model up once; the measured model answers for its own name."""
    memo: dict[str | None, Any] = {chosen: chosen_model}

    def get(name: str | None):
        if name not in memo:
            memo[name] = lookup_model(name, overrides)
        return memo[name]

    return get


def model_ttl(model) -> int | None:
    ttls = getattr(model, "cache_ttls", ()) or ()
    return min(ttls) if ttls else None


def budget_figures(model, recorded_window: int | None, settings: Settings, used: int, budget=None) -> BudgetFigures:
    """The budget, reserve, summary point and compaction point for ``model``. A window the
    transcript records (Codex's ``model_context_window``) replaces the model file's."""
    from lookout_cli.tokens.budget import Budget

    window, window_source = model.context_window, "model"
    if recorded_window:
        window, window_source = recorded_window, "transcript"
        if model.input_limit is not None:
            model = replace(model, input_limit=recorded_window,
                          context_window=max(model.context_window, recorded_window))
        else:
            model = replace(model, context_window=recorded_window)
    if budget is None:
        budget = Budget.from_settings(model, settings.budget, settings.threshold_percent, settings.reserved)
    if settings.budget is not None:
        source = f"--budget {settings.budget}"
    elif recorded_window:
        source = "window"
    else:
        source = "input limit" if model.input_limit is not None else "window"
    own = model.summary_point is not None and model.summary_point == budget.summary_point
    return BudgetFigures(
        window=window,
        window_source=window_source,
        budget=budget.limit,
        budget_source=source,
        reserve=budget.reserve,
        summary_point=budget.summary_point,
        summary_point_source="the model's own" if own else "85% of the budget",
        due_at=budget.due_at,
        due=budget.due(used),
    )
