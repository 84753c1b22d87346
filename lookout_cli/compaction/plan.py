"""What each stage of ``compact`` would do, worked out from a view without changing anything.

Every function here is pure: it takes the view's items, their token counts (``tokens[i]`` is
item ``i``'s count) and the settings, and returns a plan that names items. ``compaction.engine`` carries
the plans out through the saved-output store and the format's adapter.

The stages (SPEC §4 "compact"; seeds 000, 001, 003; research/compaction.md):

1. **prune**: clear tool output the agent has already read (an assistant item follows it),
   oldest first, protecting the most recent ``protect_tokens`` (40,000) of tool output and the
   last ``protect_turns`` (2) user turns; not at all when it would free under ``prune_minimum``
   (20,000); and, while the provider's cache is warm and the chat is below its summary point,
   only when the tokens it frees repay rewriting the cache soon enough.
2. **clamp**: a tool result over ``max_tool_output_chars`` characters, or over its share of the
   budget (the calls of one step share a third of it), keeps its beginning and end.
3. **summarize**: the turns before ``keep_from`` become one note. The split lands on a user
   prompt, keeps the last ``tail_turns`` turns within ``preserve_recent_tokens`` (always the
   latest), and never puts output the agent has not read yet into the summary. When the latest
   turn alone is the whole conversation or far over that budget (one long autonomous turn),
   the split lands inside it on a step boundary (``inside_turn``): the request stays word for
   word, the note covers the steps since it, the most recent steps stay.
4. **shorten**: still over the goal with the summary in place: clear output the kept steps
   already read, then shorten unread output, largest first, keeping its beginning and end.
5. **truncate**: drop the oldest turns, whole turns at a time, keeping the latest.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lookout_cli.core.dataclass import dataclass, field
from lookout_cli.formats.clearing import is_cleared
from lookout_cli.formats.view import (
    ASSISTANT_ROLES,
    IMAGE,
    SETUP,
    SUMMARY,
    TEXT,
    THINKING,
    TOOL_CALL,
    TOOL_RESULT,
    Item,
)

STAGES = ("prune", "clamp", "summarize", "shorten", "truncate")
DEFAULT_STAGES = ("prune", "clamp", "summarize", "shorten")

PROTECTED_TOOLS = {"skill", "activate_skill", "ask_user", "askuserquestion", "todowrite", "update_plan",
                   "enter_plan_mode", "exit_plan_mode", "exitplanmode"}
CONVERSATION = (TEXT, THINKING, TOOL_CALL, TOOL_RESULT, IMAGE)  # what a summary or truncation replaces
PLACEHOLDER_TOKENS = 70  # what a placeholder costs, about (compactor prices each real one)
MIN_SHORTENED_CHARS = 2_000  # an unread output keeps at least this much (head + tail)


@dataclass
class Settings:
    """The numbers the plans need (SPEC §4 compact; Hull's and LocalPilot's names)."""

    budget: int = 200_000  # tokens the context may hold
    fit_at: int = 170_000  # the goal: below the point where compaction is due
    shorten_at: int = 170_000  # "still over 85%": shorten above this
    summary_point: int = 170_000
    target: int = 80_000  # where a compaction aims to land (compaction.target_percent of the budget)
    prune: bool = True
    protect_tokens: int = 40_000
    protect_turns: int = 2
    prune_minimum: int = 20_000
    max_tool_output_chars: int = 50_000
    step_share: int | None = None  # tokens the calls of one step share (a third of the budget)
    tail_turns: int = 2
    preserve_recent_tokens: int = 8_000
    summary_tokens: int = 20_000  # the most a note may take
    payback_requests: int = 50  # a clear must repay the cache rewrite within this many requests


def tool_key(name: str | None) -> str:
    return (name or "").lower().rsplit("__", 1)[-1]


def last_assistant(items: Sequence[Item]) -> int:
    """Index of the last item the agent wrote (-1 when none)."""
    for i in range(len(items) - 1, -1, -1):
        if items[i].role in ASSISTANT_ROLES and items[i].kind in (TEXT, THINKING, TOOL_CALL):
            return i
    return -1


def read_results(items: Sequence[Item]) -> set[int]:
    """Indexes of tool results the agent has read: an item it wrote comes later."""
    last = last_assistant(items)
    return {i for i, item in enumerate(items) if item.kind == TOOL_RESULT and i < last}


def unread_results(items: Sequence[Item]) -> list[int]:
    last = last_assistant(items)
    return [i for i, item in enumerate(items) if item.kind == TOOL_RESULT and i > last]


def prompts(items: Sequence[Item]) -> list[int]:
    return [i for i, item in enumerate(items) if item.prompt]


def message_start(items: Sequence[Item], i: int) -> int:
    """Index of the first item of item ``i``'s message (in its line): a prompt's images come
    before its text, and a compaction keeps or drops whole messages."""
    while i > 0 and items[i - 1].message == items[i].message and items[i - 1].record is items[i].record:
        i -= 1
    return i


def setup_end(items: Sequence[Item]) -> int:
    """Index of the first item after the leading setup."""
    for i, item in enumerate(items):
        if item.kind != SETUP:
            return i
    return len(items)


def about_placeholder(_index: int) -> int:
    return PLACEHOLDER_TOKENS


def clearable(item: Item) -> bool:
    return (item.kind == TOOL_RESULT and not item.opaque and not is_cleared(item) and bool(item.text)
            and tool_key(item.tool) not in PROTECTED_TOOLS)


# --- 1. prune ------------------------------------------------------------------------------------

@dataclass
class PrunePlan:
    items: list[int] = field(default_factory=list)  # oldest first
    freed: int = 0  # tokens, after placeholders
    candidates_freed: int = 0  # what clearing every candidate would free (even when skipped)
    candidates: list[int] = field(default_factory=list)  # every item that would free tokens
    skipped: str | None = None  # why nothing is cleared
    first: int | None = None  # index of the first item cleared (where the cache is rewritten)


def plan_prune(items: Sequence[Item], tokens: Sequence[int], s: Settings,
               cost: Callable[[int], int] = about_placeholder) -> PrunePlan:
    """``cost(i)``: the tokens the placeholder that clears item ``i`` costs; only what frees
    tokens is cleared."""
    plan = PrunePlan()
    if not s.prune:
        plan.skipped = "pruning is off (compaction.prune = false)"
        return plan
    starts = prompts(items)
    protected_from = starts[-s.protect_turns] if len(starts) >= s.protect_turns else (starts[0] if starts else 0)
    if s.protect_turns <= 0:
        protected_from = len(items)
    read = read_results(items)
    seen = 0
    gains: dict[int, int] = {}
    for i in range(len(items) - 1, -1, -1):
        item = items[i]
        if item.kind != TOOL_RESULT:
            continue
        newer = seen  # tool output after this one
        seen += tokens[i]
        if newer < s.protect_tokens or i >= protected_from:  # any part of it within the newest
            continue
        if i in read and clearable(item):
            gains[i] = tokens[i] - cost(i)
    chosen = sorted(i for i, gain in gains.items() if gain > 0)
    freed = sum(gains[i] for i in chosen)
    plan.candidates_freed, plan.candidates = freed, chosen
    if not chosen:
        plan.skipped = ("no read tool output outside the most recent "
                        f"{s.protect_tokens:,} tokens of output and the last {s.protect_turns} turns"
                        + (" is larger than the placeholder that would replace it" if gains else ""))
        return plan
    if freed < s.prune_minimum:
        plan.skipped = (f"it would free only {freed:,} tokens (under the {s.prune_minimum:,}-token minimum)")
        return plan
    plan.items, plan.freed, plan.first = chosen, freed, chosen[0]
    return plan


@dataclass
class CacheCost:
    """What the provider charges relative to uncached input (research/compaction.md, API row)."""

    warm: bool  # the prefix is still cached now
    write: float = 1.25  # a cache write costs this many input tokens (1.25 for 5 min, 2 for 1 h)
    read: float = 0.1  # a cache read


def worth_rewrite(plan: PrunePlan, tokens: Sequence[int], cache: CacheCost | None, s: Settings) -> tuple[bool, str]:
    """Whether clearing now repays rewriting the cache from the first cleared item on: the next
    request writes that suffix instead of reading it, and every later request reads ``freed``
    fewer tokens. A cold cache (or none) is rewritten anyway, so clearing is free."""
    if cache is None or not cache.warm or plan.first is None:
        return True, "the cache is cold" if cache is not None else "no prompt cache recorded"
    suffix = sum(tokens[plan.first:]) - plan.freed
    extra = suffix * (cache.write - cache.read)
    per_request = plan.freed * cache.read
    if per_request <= 0:
        return False, "it frees nothing"
    payback = extra / per_request
    if payback <= s.payback_requests:
        return True, f"it repays the cache rewrite in {payback:.0f} requests"
    return False, (f"the cache is warm and rewriting {suffix:,} tokens of it would take {payback:.0f} "
                   f"requests to repay (over {s.payback_requests})")


# --- 2. clamp ------------------------------------------------------------------------------------

@dataclass
class ClampStep:
    index: int
    head: int  # characters kept at the beginning
    tail: int  # characters kept at the end
    reason: str


def steps(items: Sequence[Item]) -> dict[int, list[int]]:
    """Tool results grouped by the agent message that called them (one step)."""
    call_message = {item.call_id: item.message for item in items if item.kind == TOOL_CALL and item.call_id}
    groups: dict[int, list[int]] = {}
    for i, item in enumerate(items):
        if item.kind == TOOL_RESULT:
            key = call_message.get(item.call_id, -1 - i)
            groups.setdefault(key, []).append(i)
    return groups


def plan_clamp(items: Sequence[Item], tokens: Sequence[int], s: Settings) -> list[ClampStep]:
    out = []
    for group in steps(items).values():
        share = s.step_share // len(group) if s.step_share else None
        for i in group:
            item = items[i]
            if not clearable(item):
                continue
            limit = s.max_tool_output_chars if s.max_tool_output_chars and s.max_tool_output_chars > 0 else None
            reason = f"over max_tool_output_chars ({s.max_tool_output_chars:,})" if limit else ""
            if share and tokens[i] > share:
                by_share = max(MIN_SHORTENED_CHARS, int(len(item.text) * share / max(tokens[i], 1)))
                if limit is None or by_share < limit:
                    limit = by_share
                    reason = (f"over its share of the budget ({share:,} tokens: the {len(group)} call(s) "
                              "of its step share a third)")
            if limit is None or len(item.text) <= limit:
                continue
            out.append(ClampStep(i, limit // 2, limit - limit // 2, reason))
    return sorted(out, key=lambda c: c.index)


# --- 3. summarize --------------------------------------------------------------------------------

@dataclass
class Split:
    keep_from: int | None  # index of the prompt the kept tail starts at (None: nothing to do)
    head: list[int] = field(default_factory=list)  # what the note replaces (no setup)
    previous: list[int] = field(default_factory=list)  # earlier summaries among them
    tail_turns: int = 0
    tail_tokens: int = 0
    head_tokens: int = 0
    setup_tokens: int = 0
    reason: str | None = None  # why there is nothing to summarize
    request: list[int] = field(default_factory=list)  # a split inside a turn: the request's items, kept
    # word for word before ``keep_from`` (the first item of the first step kept)


def plan_split(items: Sequence[Item], tokens: Sequence[int], s: Settings) -> Split:
    starts = prompts(items)
    if not starts:
        return Split(None, reason="there is no user turn to split on")
    keep = starts[-1]
    taken = 1
    for p in reversed(starts[:-1]):
        if taken >= max(1, s.tail_turns) or sum(tokens[p:]) > s.preserve_recent_tokens:
            break
        keep = p
        taken += 1
    keep = before_unread(items, starts, keep)
    split = split_at(items, tokens, keep)
    if keep == starts[-1] and (split.keep_from is None or split.tail_tokens > 2 * s.preserve_recent_tokens):
        # the recent steps: within preserve_recent_tokens and a quarter of the conversation (as
        # opencode's default), so that what stays is well under half of it
        conversation = sum(t for item, t in zip(items, tokens) if item.kind != SETUP)
        inside = inside_turn(items, tokens, keep, min(s.preserve_recent_tokens, conversation // 4),
                             s.preserve_recent_tokens)
        if inside is not None:
            return inside
    return split


def request_end(items: Sequence[Item], prompt: int) -> int:
    """The index after the request that starts at ``prompt``: its message and the user-side
    items that follow it (attachments, an expanded command) up to the agent's first reply."""
    end = prompt + 1
    while end < len(items) and items[end].role not in ASSISTANT_ROLES and items[end].kind != TOOL_RESULT \
            and not items[end].prompt:
        end += 1
    return end


def step_starts(items: Sequence[Item], start: int) -> list[int]:
    """Indexes from ``start`` on where a step begins and a cut may land: the first of a run of
    the agent's items, with every call made before it answered before it (never between a call
    and its result, never inside a group of parallel calls). Unread output follows the agent's
    last item, so a cut here never passes it."""
    open_calls: set[str] = set()
    found = []
    for i in range(start, len(items)):
        item = items[i]
        if item.role in ASSISTANT_ROLES and item.kind in (TEXT, THINKING, TOOL_CALL) \
                and items[i - 1].role not in ASSISTANT_ROLES and not open_calls and i > start:
            found.append(i)
        if item.kind == TOOL_CALL and item.call_id:
            open_calls.add(item.call_id)
        elif item.kind == TOOL_RESULT and item.call_id:
            open_calls.discard(item.call_id)
    return found


def inside_turn(items: Sequence[Item], tokens: Sequence[int], prompt: int, recent: int,
                fits: int | None = None) -> Split | None:
    """The split inside the turn that starts at ``prompt``: its request kept word for word, the
    earliest step boundary whose steps fit ``recent`` tokens kept (at least the last step), and
    everything else but the setup summarized. None when no step can go, or when the turn's
    steps fit ``fits`` tokens (default ``recent``) as they are."""
    re_ = request_end(items, prompt)
    if sum(tokens[re_:]) <= (recent if fits is None else fits):  # its steps fit as they are
        return None
    cuts = [c for c in step_starts(items, re_) if any(items[i].kind in CONVERSATION and tokens[i] > 0
                                                       for i in range(re_, c))]
    if not cuts:
        return None
    c, tail = cuts[-1], sum(tokens[cuts[-1]:])
    for cut in reversed(cuts[:-1]):  # back from the last step while the steps fit
        tail += sum(tokens[cut:c])
        if tail > recent:
            break
        c = cut
    return inside_at(items, tokens, prompt, c)


def inside_at(items: Sequence[Item], tokens: Sequence[int], prompt: int, cut: int) -> Split:
    """The split inside the turn that starts at ``prompt`` that keeps its request and the steps
    from ``cut`` (one of ``step_starts``) on."""
    rs, re_ = message_start(items, prompt), request_end(items, prompt)
    head = [i for i in range(rs) if items[i].kind != SETUP] + [i for i in range(re_, cut) if items[i].kind != SETUP]
    request = list(range(rs, re_))
    return Split(cut, head, [i for i in head if items[i].kind == SUMMARY], 1,
                 sum(tokens[i] for i in request) + sum(tokens[cut:]), sum(tokens[i] for i in head),
                 sum(tokens[i] for i in range(len(items)) if items[i].kind == SETUP), request=request)


def earliest_keep(items: Sequence[Item], tail_turns: int) -> int | None:
    """The earliest prompt ``plan_split`` can keep from, whatever the tokens: everything before
    its message is summarized whenever a summary is written."""
    starts = prompts(items)
    if not starts:
        return None
    return before_unread(items, starts, starts[-min(len(starts), max(1, tail_turns))])


def before_unread(items: Sequence[Item], starts: Sequence[int], keep: int) -> int:
    """The prompt at ``keep`` (one of ``starts``), or the one before the first output the agent
    has not read when that comes earlier: unread output is never summarized or dropped."""
    unread = unread_results(items)
    if unread and unread[0] < keep:
        earlier = [p for p in starts if p <= unread[0]]
        return earlier[-1] if earlier else starts[0]
    return keep


def split_at(items: Sequence[Item], tokens: Sequence[int], keep: int) -> Split:
    """The split that keeps the turns from the prompt at ``keep`` on (its whole message)."""
    start = message_start(items, keep)
    head = [i for i in range(start) if items[i].kind != SETUP]
    previous = [i for i in head if items[i].kind == SUMMARY]
    split = Split(keep, head, previous, sum(1 for p in prompts(items) if p >= keep), sum(tokens[start:]),
                  sum(tokens[i] for i in head),
                  sum(tokens[i] for i in range(len(items)) if items[i].kind == SETUP))
    fresh = [i for i in head if items[i].kind in CONVERSATION and tokens[i] > 0]
    if not fresh:
        split.keep_from = None
        split.reason = ("nothing to summarize: everything before the kept turns is already summarized"
                        if previous else "nothing to summarize: the kept turns are the whole conversation")
    return split


def note_budget(split: Split, s: Settings, room: int | None = None) -> int:
    """Tokens the note may take: at most ``summary_tokens``, under what it replaces, and within
    the room the goal leaves beside the setup and the kept tail."""
    budget = min(s.summary_tokens, int(split.head_tokens * 0.6))
    if split.request:  # a split inside a turn: a tenth of the steps it replaces (at least 2,000)
        budget = min(budget, max(2_000, split.head_tokens // 10))
    if room is not None and room > 0:
        budget = min(budget, room)
    return max(budget, 0)


# --- 4. shorten ----------------------------------------------------------------------------------

@dataclass
class ShortenPlan:
    clear: list[int] = field(default_factory=list)  # read output in the kept steps, oldest first
    shorten: list[ClampStep] = field(default_factory=list)  # unread output, largest first
    freed: int = 0  # tokens, estimated
    short_by: int = 0  # tokens still over the goal after the plan


def plan_shorten(items: Sequence[Item], tokens: Sequence[int], excess: int,
                 cost: Callable[[int], int] = about_placeholder) -> ShortenPlan:
    """Free ``excess`` tokens (as the items count them) from the output the context still holds
    (``cost`` as for ``plan_prune``)."""
    plan = ShortenPlan()
    if excess <= 0:
        return plan
    read = read_results(items)
    need = excess
    for i in sorted(read):
        if need <= 0:
            break
        gain = tokens[i] - cost(i) if clearable(items[i]) else 0
        if gain > 0:
            plan.clear.append(i)
            plan.freed += gain
            need -= gain
    if need > 0:
        unread = [i for i in unread_results(items) if clearable(items[i])]
        for i in sorted(unread, key=lambda i: -tokens[i]):
            if need <= 0:
                break
            text = items[i].text
            per_char = tokens[i] / max(len(text), 1)
            keep_chars = max(MIN_SHORTENED_CHARS, int(len(text) - (need + PLACEHOLDER_TOKENS) / max(per_char, 1e-6)))
            if keep_chars >= len(text):
                continue
            gain = int((len(text) - keep_chars) * per_char) - PLACEHOLDER_TOKENS
            if gain <= 0:
                continue
            plan.shorten.append(ClampStep(i, keep_chars // 2, keep_chars - keep_chars // 2,
                                          "unread output shortened to fit the context"))
            plan.freed += gain
            need -= gain
    plan.short_by = max(0, need)
    return plan


# --- 5. truncate ---------------------------------------------------------------------------------

@dataclass
class TruncatePlan:
    keep_from: int | None  # the prompt the kept part starts at; None: nothing to drop
    dropped_turns: int = 0
    dropped_tokens: int = 0
    reason: str | None = None


def plan_truncate(items: Sequence[Item], tokens: Sequence[int], goal: int, fixed: int = 0) -> TruncatePlan:
    """Keep the most recent whole turns that fit ``goal`` beside the setup (and ``fixed``
    tokens the view does not hold); always the latest turn and any unread output."""
    starts = prompts(items)
    if not starts:
        return TruncatePlan(None, reason="there is no user turn to keep")
    setup = sum(t for item, t in zip(items, tokens) if item.kind == SETUP)
    latest = before_unread(items, starts, starts[-1])
    keep = latest
    for p in reversed([p for p in starts if p < latest]):
        if fixed + setup + sum(tokens[p:]) > goal:
            break
        keep = p
    return truncate_at(items, tokens, keep)


def truncate_at(items: Sequence[Item], tokens: Sequence[int], keep: int) -> TruncatePlan:
    """Drop what comes before the prompt at ``keep`` (its whole message stays)."""
    before = [i for i in range(message_start(items, keep)) if items[i].kind != SETUP]
    if not any(items[i].kind in CONVERSATION for i in before):
        return TruncatePlan(None, reason="nothing to drop: the kept turns are the whole conversation")
    return TruncatePlan(keep, sum(1 for p in prompts(items) if p < keep), sum(tokens[i] for i in before))


def truncate_steps(items: Sequence[Item], tokens: Sequence[int], goal: int, fixed: int = 0) -> tuple[int, list[int]] | None:
    """Truncation inside the latest turn: its request stays, and the oldest steps go, whole
    steps at a time (pairs and parallel calls together), until the rest fits ``goal`` beside
    the setup and ``fixed``; at least the last step stays. Returns the first kept step's index
    and the request's items, or None when no step can go."""
    starts = prompts(items)
    if not starts:
        return None
    prompt = before_unread(items, starts, starts[-1])
    rs, re_ = message_start(items, prompt), request_end(items, prompt)
    cuts = step_starts(items, re_)
    if re_ < len(items) and items[re_].role in ASSISTANT_ROLES and any(
            items[i].kind in (*CONVERSATION, SUMMARY) for i in range(rs)):
        cuts.insert(0, re_)  # what came before the request (a summary, earlier turns) can go alone
    if not cuts:
        return None
    setup = sum(t for item, t in zip(items, tokens) if item.kind == SETUP)
    request = list(range(rs, re_))
    base = fixed + setup + sum(tokens[i] for i in request)
    tail = sum(tokens[cuts[0]:])
    for c, following in zip(cuts, [*cuts[1:], len(items)]):
        if base + tail <= goal:
            return c, request
        tail -= sum(tokens[c:following])
    return cuts[-1], request
