"""Render a :class:`lookout_cli.meter.analysis.Meter`: the readable report and the JSON report.

The readable report is what ``lookout measure`` prints on standard error (or, with
``--report-only``, on standard output): a bar that is amber or red on a terminal, then the
parts, the provider's count, the cache and cost, compactions and what could be reclaimed.
Every figure says whether it is *exact* (a provider count recorded in the transcript),
*estimated* (our tokenizer), *inferred* or read from a *file*.

JSON report schema (``--json``, ``--report FILE``), version ``lookout.measure/1``. Token
figures are integers; shares and percentages are floats (shares 0–1, percents 0–100); a
figure that cannot be known is ``null``. Each object with figures has a ``basis``:
``exact``, ``estimated``, ``exact+estimated``, ``inferred`` or ``file``; ``used`` may also be
``unknown`` (``--usage-only`` when no provider count describes the context: 0 tokens).

\b
  schema            "lookout.measure/1"
  command           "measure"
  source            input path, or null for standard input
  format            transcript format (claude-code, codex, openai, anthropic, gemini-cli)
  model             {name, known, source: transcript|flag|config|default, encoding (null with
                     --usage-only), counting: tokenizer|estimate|usage, image_provider}
  budget            {window, window_source: transcript|model, budget, budget_source,
                     reserve, summary_point, summary_point_percent, summary_point_source,
                     compaction_due_at, compaction_due_percent, due: bool}
  used              {tokens, percent, basis, provider: int|null (last prompt + output),
                     pending: tokens added since the last response, note: str|null}
  meter             {state: hidden|normal|amber|red, amber_percent, red_percent,
                     hidden_below_percent}
  parts             [{group: setup|conversation, key, label, tokens, share, items, basis,
                      source: str|null, children: [part...] (tool results by tool)}]
  total             {tokens: sum of parts, basis}
  largest_part      part summary {key, label, tokens, share} or null
  two_largest       [part summary...] (up to two)
  largest_tool_results  [{tool, call_id, tokens, share, line, target: str|null}] (up to five)
  last_response     {input, cache_write, cache_read, prompt, output, model, timestamp, line,
                     estimate: int|null, in_context: bool, basis: "exact"} or null
  calibration       {ratio: float|null (provider / estimate), provider, estimate,
                     note: why there is no ratio, or null; basis}
  cache             {requests, read_share: float|null, input, cache_write, cache_write_1h,
                     cache_read, output, total, basis: "exact"}
  cost              {usd: float|null, input, cache_write, cache_read, output, priced,
                     unpriced, models: [str], basis: "API prices"}
  warm_cache        {tier: 5m|1h, tier_source: recorded|model, last_response_at,
                     expires_at, now, seconds_left, expired: bool} or null
  compactions       [{line, timestamp, trigger, before, after, after_basis}]
  duplicate_reads   [{path, reads, tokens, reclaimable, calls: [call id...],
                      ranges: [str...] ("" = the whole file)}]
  reclaimable       {tokens, items: [{kind: tool_result|image|duplicate_read, tokens, line,
                     tool, call_id, target, why}]}
  series            [{n, line, timestamp, prompt, output, context, in_context,
                      compaction_before}] (one per recorded response)
  fail_at           {percent, failed: bool} or null
  notes             [str]
"""

from __future__ import annotations

from lookout_cli.meter.analysis import Meter, Part

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from typing import Any

SCHEMA = "lookout.measure/1"
# The schema block of this docstring, for the command's epilog (and so its man page).
SCHEMA_TEXT = "\n\b\nJSON report (--json, --report FILE), schema " + SCHEMA + ":\n" + __doc__.split("\b\n", 1)[1]
BAR_WIDTH = 40
STATE_COLOURS = {"hidden": "bright_black", "normal": "green", "amber": "yellow", "red": "red"}


# --- JSON ---------------------------------------------------------------------------------------

def _part_dict(part: Part, total: int) -> dict[str, Any]:
    return {
        "group": part.group,
        "key": part.key,
        "label": part.label,
        "tokens": part.tokens,
        "share": _share(part.tokens, total),
        "items": part.items,
        "basis": part.basis,
        "source": part.source,
        "children": [_part_dict(c, total) for c in part.children],
    }


def _summary(part: Part, total: int) -> dict[str, Any]:
    return {"key": part.key, "label": part.label, "tokens": part.tokens, "share": _share(part.tokens, total)}


def _share(tokens: int, total: int) -> float:
    return round(tokens / total, 6) if total else 0.0


def _pct(value: int, of: int) -> float:
    return round(100 * value / of, 3) if of else 0.0


def to_dict(meter: Meter, source: str | None = None, fail_at: float | None = None) -> dict[str, Any]:
    """The JSON report (schema in this module's docstring)."""
    b, u = meter.budget, meter.used
    last = meter.last
    largest = meter.largest(2)
    return {
        "schema": SCHEMA,
        "command": "measure",
        "source": source,
        "format": meter.format,
        "model": {
            "name": meter.model,
            "known": meter.model_known,
            "source": meter.model_source,
            "encoding": meter.encoding,
            "counting": meter.counting,
            "image_provider": meter.image_provider,
        },
        "budget": {
            "window": b.window,
            "window_source": b.window_source,
            "budget": b.budget,
            "budget_source": b.budget_source,
            "reserve": b.reserve,
            "summary_point": b.summary_point,
            "summary_point_percent": _pct(b.summary_point, b.budget),
            "summary_point_source": b.summary_point_source,
            "compaction_due_at": b.due_at,
            "compaction_due_percent": _pct(b.due_at, b.budget),
            "due": b.due,
        },
        "used": {
            "tokens": u.tokens,
            "percent": round(meter.percent, 3),
            "basis": u.basis,
            "provider": u.provider,
            "pending": u.pending,
            "note": u.note,
        },
        "meter": {
            "state": meter.state,
            "amber_percent": meter.amber,
            "red_percent": meter.red,
            "hidden_below_percent": meter.hidden,
        },
        "parts": [_part_dict(p, meter.total) for p in meter.parts],
        "total": {"tokens": meter.total, "basis": meter.total_basis},
        "largest_part": _summary(largest[0], meter.total) if largest else None,
        "two_largest": [_summary(p, meter.total) for p in largest],
        "largest_tool_results": [
            {"tool": r.tool, "call_id": r.call_id, "tokens": r.tokens, "share": _share(r.tokens, meter.total),
             "line": r.line, "target": r.target}
            for r in meter.largest_results
        ],
        "last_response": None if last is None else {
            "input": last.input,
            "cache_write": last.cache_write,
            "cache_read": last.cache_read,
            "prompt": last.prompt,
            "output": last.output,
            "model": last.model,
            "timestamp": last.timestamp,
            "line": last.line,
            "estimate": last.estimate,
            "in_context": last.in_context,
            "basis": last.basis,
        },
        "calibration": {
            "ratio": None if meter.calibration is None else round(meter.calibration, 6),
            "provider": last.prompt if last else None,
            "estimate": last.estimate if last else None,
            "note": meter.calibration_note,
            "basis": "exact/estimated",
        },
        "cache": {
            "requests": meter.cache.requests,
            "read_share": None if meter.cache.read_share is None else round(meter.cache.read_share, 6),
            "input": meter.cache.input,
            "cache_write": meter.cache.cache_write,
            "cache_write_1h": meter.cache.cache_write_1h,
            "cache_read": meter.cache.cache_read,
            "output": meter.cache.output,
            "total": meter.cache.total,
            "basis": "exact",
        },
        "cost": {
            "usd": None if meter.cost.usd is None else round(meter.cost.usd, 10),
            "input": round(meter.cost.input, 10),
            "cache_write": round(meter.cost.cache_write, 10),
            "cache_read": round(meter.cost.cache_read, 10),
            "output": round(meter.cost.output, 10),
            "priced": meter.cost.priced,
            "unpriced": meter.cost.unpriced,
            "models": list(meter.cost.models),
            "basis": "API prices",
        },
        "warm_cache": None if meter.warm is None else {
            "tier": meter.warm.tier,
            "tier_source": meter.warm.tier_source,
            "last_response_at": meter.warm.last_response_at,
            "expires_at": meter.warm.expires_at,
            "now": meter.warm.now,
            "seconds_left": meter.warm.seconds_left,
            "expired": meter.warm.expired,
        },
        "compactions": [
            {"line": c.line, "timestamp": c.timestamp, "trigger": c.trigger, "before": c.before,
             "after": c.after, "after_basis": c.after_basis}
            for c in meter.compactions
        ],
        "duplicate_reads": [
            {"path": d.path, "reads": d.reads, "tokens": d.tokens, "reclaimable": d.reclaimable,
             "calls": list(d.calls), "ranges": list(d.ranges)}
            for d in meter.duplicates
        ],
        "reclaimable": {
            "tokens": meter.reclaimable_total,
            "items": [
                {"kind": r.kind, "tokens": r.tokens, "line": r.line, "tool": r.tool, "call_id": r.call_id,
                 "target": r.target, "why": r.why}
                for r in meter.reclaimable
            ],
        },
        "series": list(meter.series),
        "fail_at": None if fail_at is None else {"percent": fail_at, "failed": meter.percent >= fail_at},
        "notes": list(meter.notes),
    }


# --- the readable report ------------------------------------------------------------------------

def fmt(n: int | None) -> str:
    return "?" if n is None else f"{n:,}"


def percent(value: float) -> str:
    return f"{value:.1f}%"


def duration(seconds: int) -> str:
    seconds = abs(int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, s = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m {s:02d}s"
    hours, m = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h {m:02d}m"
    return f"{hours // 24} days"


def money(usd: float) -> str:
    if usd < 0.01:
        return f"${usd:.6f}"
    return f"${usd:,.4f}" if usd < 1 else f"${usd:,.2f}"


def bar(meter: Meter, style, width: int = BAR_WIDTH) -> str:
    """``[#####-----|--]``: used of the budget, with ``|`` at the summary point."""
    budget = meter.budget.budget or 1
    filled = min(width, round(width * meter.used.tokens / budget))
    mark = min(width - 1, max(0, round(width * meter.budget.summary_point / budget)))
    cells = ["█" if n < filled else "░" for n in range(width)]
    used_part = "".join(cells[:filled])
    rest = cells[filled:]
    if mark >= filled:
        rest[mark - filled] = "│"
    colour = STATE_COLOURS.get(meter.state, None)
    return "[" + style(used_part, fg=colour) + "".join(rest) + "]"


class _Lines:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, text: str = "") -> None:
        self.lines.append(text)

    def row(self, label: str, tokens: int, total: int, tail: str = "", indent: int = 2) -> None:
        name = " " * indent + label
        share = f"{100 * tokens / total:5.1f}%" if total else "    -"
        self.lines.append(f"{name:<44}{tokens:>10,} {share}" + (f"  {tail}" if tail else ""))


def _basis_tag(part: Part) -> str:
    if part.basis == "inferred":
        return "inferred"
    if part.basis == "file":
        return f"from {part.source}"
    return ""


def _parts(out: _Lines, meter: Meter) -> None:
    """What fills the context: setup and conversation parts, and the largest tool results."""
    largest = meter.largest(2)
    if largest:
        names = ", ".join(f"{p.label} {100 * p.tokens / meter.total:.0f}%" for p in largest)
        out.add(f"What fills it: {names}")
    total = meter.total
    setup_total = sum(p.tokens for p in meter.setup_parts)
    conv_total = sum(p.tokens for p in meter.conversation_parts)
    out.add(f"Parts (estimated with {meter.counting_label}; setup marked inferred or from a file):")
    out.row("Setup", setup_total, total, indent=0)
    for part in meter.setup_parts:
        if part.tokens or part.items:
            out.row(part.label, part.tokens, total, _basis_tag(part))
    if not any(p.tokens for p in meter.setup_parts):
        out.add("  (not recorded; pass --system/--tools/--rules/--skills to count it)")
    out.row("Conversation", conv_total, total, indent=0)
    for part in meter.conversation_parts:
        if not (part.tokens or part.items):
            continue
        if part.key == "thinking":
            out.row(part.label + " (carried in agent replies)", part.tokens, total, f"{part.items} item{'s' if part.items != 1 else ''}", indent=4)
            continue
        out.row(part.label, part.tokens, total, f"{part.items} item{'s' if part.items != 1 else ''}")
        for child in part.children:
            out.row(child.label, child.tokens, total, f"{child.items}×", indent=4)
    out.row(f"Total ({meter.total_basis})", total, total, indent=0)
    if meter.used.tokens != total:
        out.add(f"  (Used, {fmt(meter.used.tokens)}, is {_used_basis(meter)}; the parts are lookout's count of the prompt)")
    if meter.largest_results:
        out.add("  Largest tool results:")
        for n, r in enumerate(meter.largest_results, 1):
            target = f"  {r.target}" if r.target else ""
            out.add(f"    {n}. {r.tool} {r.call_id or '(no id)'}  {fmt(r.tokens)} tokens, line {r.line}{target}")


def _reclaimable(out: _Lines, meter: Meter) -> None:
    """Duplicate reads and the largest items that could be reclaimed."""
    if meter.duplicates:
        out.add("Duplicate reads:")
        for d in meter.duplicates[:10]:
            ranges = "; ".join(r or "whole file" for r in d.ranges)
            out.add(f"  {d.path}: read {d.reads}× ({ranges}), {fmt(d.tokens)} tokens (estimated), "
                    f"{fmt(d.reclaimable)} superseded by a later identical read")
    else:
        out.add("Duplicate reads: none")
    if meter.reclaimable:
        out.add(f"Reclaimable (estimated): {fmt(meter.reclaimable_total)} tokens; largest:")
        for r in meter.reclaimable:
            label = r.tool or r.kind
            target = f" {r.target}" if r.target else ""
            out.add(f"  {fmt(r.tokens):>8}  {r.kind.replace('_', ' ')}: {label}{target} (line {r.line})")
    else:
        out.add("Reclaimable: nothing yet")


def _approximation(meter: Meter) -> str:
    """Said when the tokenizer is not the model's own: only OpenAI publishes its tokenizers."""
    if meter.counting != "tokenizer" or meter.image_provider == "openai":
        return ""
    maker = {"anthropic": "Claude", "gemini": "Gemini"}.get(meter.image_provider, "the model")
    return f" (an approximation: {maker}'s own tokenizer is not public)"


def _used_basis(meter: Meter) -> str:
    u = meter.used
    if u.provider is not None and u.pending:
        return "the provider's count at the last response plus what was added since"
    if u.provider is not None:
        return "the provider's own count"
    return f"{u.basis}, with setup the transcript does not record" if u.basis != "estimated" else "an estimate"


def render(meter: Meter, style=None, source: str | None = None, fail_at: float | None = None) -> str:
    """The readable report. ``style`` is ``Reporter.style`` (colour on a terminal) or None."""
    style = style or (lambda text, **_: text)
    b, u = meter.budget, meter.used
    out = _Lines()
    title = f"lookout measure: {source or 'standard input'}"
    model = meter.model or "unknown model"
    known = "" if meter.model_known else " (unknown model: defaults)"
    out.add(style(title, bold=True))
    out.add(f"  {model}{known} · {meter.format} · counted with {meter.counting_label}{_approximation(meter)}")
    # "hidden" is what a status line does under that level; beside a drawn bar it reads "low"
    word = "low" if meter.state == "hidden" else meter.state
    state = style(word, fg=STATE_COLOURS.get(meter.state), bold=meter.state in ("amber", "red"))
    out.add("")
    out.add(f"Context {bar(meter, style)} {percent(meter.percent)}  {state}")
    out.add(f"  Used: {fmt(u.tokens)} of {fmt(b.budget)} tokens ({u.basis})")
    if u.provider is not None and u.pending:
        out.add(f"    = {fmt(u.provider)} at the last response (exact: its prompt + output) "
                f"+ {fmt(u.pending)} added since (estimated)")
    elif u.provider is not None:
        out.add("    = the last response's prompt + output, as the provider counted them")
    if u.note:
        out.add(f"  {u.note}." if meter.counting == "usage" else f"  {u.note}, so this is our estimate.")
    window = f"window {fmt(b.window)} ({b.window_source})"
    budget_src = "" if b.budget_source == "window" else f", budget from {b.budget_source}"
    out.add(f"  {window}{budget_src}; reserve {fmt(b.reserve)}")
    out.add(f"  Summarized at {fmt(b.summary_point)} ({percent(_pct(b.summary_point, b.budget))}, "
            f"{b.summary_point_source}); compaction due at {fmt(b.due_at)} "
            f"({percent(_pct(b.due_at, b.budget))})" + (" — due now" if b.due else ""))
    out.add(f"  Meter: low under {meter.hidden:g}% (a status line hides it), amber from {meter.amber:.4g}%, red from {meter.red:.4g}%")
    if fail_at is not None:
        verdict = "FAILS" if meter.percent >= fail_at else "passes"
        out.add(f"  --fail-at {fail_at:g}%: {verdict}")

    out.add("")
    if meter.counting == "usage":
        out.add("Parts: not counted (--usage-only reads only the provider's counts)")
    else:
        _parts(out, meter)

    out.add("")
    last = meter.last
    if last is None:
        out.add("Last response's prompt: not recorded in this transcript")
    else:
        when = f", {last.timestamp}" if last.timestamp else ""
        out.add(f"Last response's prompt (exact, line {last.line}{when}):")
        out.add(f"  Input {fmt(last.input)} · Cache write {fmt(last.cache_write)} · "
                f"Cache read {fmt(last.cache_read)} = {fmt(last.prompt)}; output {fmt(last.output)}")
        if last.estimate is not None:
            ratio = f"{meter.calibration:.3f}" if meter.calibration else f"n/a ({meter.calibration_note})"
            out.add(f"  Our estimate of that prompt: {fmt(last.estimate)} (estimated); "
                    f"calibration provider/estimate = {ratio}")
        elif not last.in_context:
            out.add("  (it is not part of the current context: compacted since, or not found in it)")

    out.add("")
    cache = meter.cache
    if cache.requests:
        share = percent(100 * cache.read_share) if cache.read_share is not None else "n/a"
        out.add(f"Cache (exact, {cache.requests} request{'s' if cache.requests != 1 else ''}): "
                f"{share} of prompt tokens read from cache")
        out.add(f"  Input {fmt(cache.input)} · Cache write {fmt(cache.cache_write)} · "
                f"Cache read {fmt(cache.cache_read)} · Output {fmt(cache.output)} · Total {fmt(cache.total)}")
        if meter.cost.usd is not None:
            c = meter.cost
            extra = f" ({c.unpriced} request(s) of unpriced models left out)" if c.unpriced else ""
            out.add(f"  At API prices: {money(c.usd)} = input {money(c.input)} + cache write "
                    f"{money(c.cache_write)} + cache read {money(c.cache_read)} + output {money(c.output)}{extra}")
        else:
            out.add("  At API prices: unknown (no prices for this model)")
    else:
        out.add("Cache: no usage recorded in this transcript")
    warm = meter.warm
    if warm is not None:
        tier = f"{warm.tier} tier, " + ("as the last cache write recorded" if warm.tier_source == "recorded"
                                         else "the model's default")
        if warm.expired:
            out.add(f"  Warm cache: expired {duration(warm.seconds_left)} ago (last response {warm.last_response_at}; "
                    f"{tier}); the next message sends the whole chat again")
        else:
            out.add(f"  Warm cache: {duration(warm.seconds_left)} left, until {warm.expires_at} ({tier})")

    out.add("")
    if meter.compactions:
        out.add("Compactions:")
        for c in meter.compactions:
            after = f"{fmt(c.after)} ({c.after_basis})" if c.after is not None else "?"
            out.add(f"  line {c.line} {c.trigger or ''} {c.timestamp or ''}: {fmt(c.before)} → {after}".rstrip())
    else:
        out.add("Compactions: none")
    if meter.counting != "usage":  # nothing was read to find them (the note says so)
        _reclaimable(out, meter)
    for note in meter.notes:
        out.add(f"Note: {note}")
    return "\n".join(out.lines) + "\n"
