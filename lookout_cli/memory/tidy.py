"""Learning from chats: ``#`` notes and "remember that …" from user prompts, and ``tidy``, which
keeps a scope's list lasting facts rather than task status.

Both are deterministic rules over the text (no model is called), so a run can be reviewed with
``--dry-run`` and repeated with the same result.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Callable

from lookout_cli.core import secrets
from lookout_cli.core.dataclass import dataclass, field, replace
from lookout_cli.core.errors import LookoutError
from lookout_cli.core.times import parse_time
from lookout_cli.memory.store import (
    MAX_LIST_BYTES,
    MAX_MEMORIES,
    NOTE_MAX,
    TIDY_NEAR,
    TIDY_TARGET,
    Memory,
    Scope,
    Transaction,
    check_note,
    file_lock,
    format_time,
    normalize_note,
    secret_error,
)

# --- words ------------------------------------------------------------------------------------
STOPWORDS = frozenset(
    """a an the and or but if then else of to in on at by for with from into onto as is are was were be been
    being it its this that these those there here we our us you your i me my he she they them their his her
    do does did done not no so too very can could should would will shall may might must have has had
    than also just only about over under up down out off all any each some such more most other same own
    what which who whom when where why how""".split()
)
_WORD_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+#\-]*[A-Za-z0-9+#]|[A-Za-z0-9]")


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD_RE.findall(text)]


def stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix) and not word[-len(suffix) - 1].isdigit():
            return word[: -len(suffix)]
    return word


def content_words(text: str) -> set[str]:
    return {stem(w) for w in words(text) if w not in STOPWORDS and len(w) > 1}


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def sentences(text: str) -> list[str]:
    parts = re.split(r"(?<=[.!?;])\s+(?=[A-Z0-9\"'(`])|\s*\n+\s*|(?<=[.!?])\s*$", text.strip())
    return [p.strip() for p in parts if p and p.strip()]


# --- what a sentence is about -------------------------------------------------------------------
STATUS_RE = re.compile(
    r"""(?ix)
    ^\s*(?:todo|to-do|to\ do|fixme|wip|next(?:\ steps?)?|remaining)\b
    | \[\ \]|\[x\]
    | \b(?:in\ progress|currently\ (?:working|fixing|investigating|running|debugging)|working\ on
        |is\ blocked|are\ blocked|blocked\ (?:on|by)|waiting\ (?:for|on)|pending|left\ to\ do
        |still\ (?:need|needs|have\ to|has\ to|owe|owes|owed|to\ do|failing|broken|open)
        |(?:need|needs)\ to\ (?:run|re-?run|check|fix|finish|verify|test|update|add|write|review|merge|deploy|land)
        |(?:have|has)\ to\ (?:run|re-?run|check|fix|finish|verify|test)
        |not\ yet\ (?:run|done|checked|tested|merged|landed|fixed)|yet\ to\ (?:run|be|land)
        |(?:is|are|was|were)\ (?:done|finished|complete|completed|merged|landed|fixed)\b
        |has\ been\ (?:done|fixed|merged|landed)|have\ been\ (?:done|fixed|merged|landed)
        |next\ step|follow[-\ ]up|will\ (?:run|rerun|check|fix|look)|going\ to\ (?:run|check|fix)
        |tomorrow|later\ today|this\ afternoon|tonight)\b
    """
)
DECISION_RE = re.compile(
    r"""(?ix)\b(?:decided|decision|chose|chosen|we\ (?:use|prefer|standardi[sz]e|agreed|picked|keep|avoid)
    |always|never|must|convention|policy|prefer|preferred|instead\ of|rather\ than|because|rule)\b"""
)
MEASURED_RE = re.compile(
    r"""(?ix)
    \b\d+(?:[.,]\d+)?\s?(?:ms|µs|us|ns|s|sec|secs|seconds?|mins?|minutes?|h|hrs?|hours?|days?|%|x|×
        |[kmgt]i?b|bytes?|tokens?|k|m|req/s|rps|qps|fps|ops/s|lines?|loc|files?|mb/s|gb/s)\b
    | \bp(?:50|90|95|99)\b\s*(?:=|:|of|is|was)?\s*\d
    | \d+(?:\.\d+)?%
    """
)
_MONTHS = "jan feb mar apr may jun jul aug sep oct nov dec".split()
DATE_RES = (
    re.compile(r"\b(20\d\d)-(\d{1,2})-(\d{1,2})\b"),
    re.compile(r"\b(\d{1,2})\s+(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?,?\s+(20\d\d)\b", re.I),
    re.compile(r"\b(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(20\d\d)\b", re.I),
)
SUPERSEDE_RES = (
    re.compile(r"(?i)\b(?:moved\ (?:off|away\ from)|switched\ (?:away\ )?from|migrated\ (?:off|away\ from|from)"
               r"|no\ longer\ (?:use|uses|using|need|needs|run|runs)|stopped\ using|dropped|replaced|removed"
               r"|got\ rid\ of|instead\ of|not\ anymore|deprecated)\s+(?:the\s+|our\s+|using\s+)?([A-Za-z0-9][\w.+\-]*)",
               re.X),
    re.compile(r"(?i)\b(?:the\s+)?([A-Za-z0-9][\w.+\-]*)(?:\s+(?:note|memory|setup|config|one))?\s+(?:is|are)\s+"
               r"(?:out\ of\ date|outdated|obsolete|deprecated|gone|no\ longer\ used|not\ used\ anymore)", re.X),
)


def dates_in(text: str) -> list[dt.date]:
    found = []
    for i, pattern in enumerate(DATE_RES):
        for m in pattern.finditer(text):
            try:
                if i == 0:
                    found.append(dt.date(int(m.group(1)), int(m.group(2)), int(m.group(3))))
                elif i == 1:
                    found.append(dt.date(int(m.group(3)), _MONTHS.index(m.group(2).lower()[:3]) + 1, int(m.group(1))))
                else:
                    found.append(dt.date(int(m.group(3)), _MONTHS.index(m.group(1).lower()[:3]) + 1, int(m.group(2))))
            except ValueError:
                continue
    return found


def lasting(sentence: str) -> bool:
    return bool(DECISION_RE.search(sentence) or MEASURED_RE.search(sentence))


def stale_reason(sentence: str, today: dt.date) -> str | None:
    """Why a sentence is not worth keeping (task status, a to-do, a date that has passed), or None."""
    if lasting(sentence):
        return None
    found = dates_in(sentence)
    if found and any(d >= today for d in found):
        return None  # a run still owed today or later stays
    if STATUS_RE.search(sentence):
        return "task status or a to-do"
    if found and all(d < today for d in found):
        return "its dates have passed"
    return None


# --- tidy ---------------------------------------------------------------------------------------
@dataclass
class TidyPlan:
    forgotten: int = 0
    merged: int = 0
    rewritten: int = 0


def plan_tidy(txn: Transaction, today: dt.datetime, include_mine: bool = False) -> TidyPlan:
    """Tidy the scope ``txn`` holds (the transaction writes it, or in a dry run only reports)."""
    plan = TidyPlan()
    day = today.date()
    label = txn.scope.label

    def mine(m: Memory) -> bool:
        return m.author == "you" and not include_mine

    def forget(mem_id: str, reason: str) -> None:
        txn.forget(mem_id, by="lookout", reason=reason, quiet=True)
        txn.log.append(f"forget {label}: {mem_id} ({reason})")
        plan.forgotten += 1

    # 1. task status, to-dos and passed dates: forget, or rewrite keeping the lasting part
    for mem in sorted(txn.memories.values(), key=lambda m: m.sort_key):
        if mine(mem):
            continue
        parts = sentences(mem.note) or [mem.note]
        reasons = [stale_reason(s, day) for s in parts]
        if all(reasons):
            forget(mem.id, reasons[0] or "stale")
            continue
        if any(reasons):
            kept = " ".join(s for s, r in zip(parts, reasons, strict=True) if not r)
            if len(kept) >= 3:
                new = replace(mem, note=normalize_note(kept), extra=dict(mem.extra), edited_by="lookout")
                txn.replace_memory(mem.id, new, by="lookout", reason="rewritten without task status by tidy")
                txn.log.append(f"rewrite {label}: {mem.id} (kept: {new.note[:60]})")
                plan.rewritten += 1

    # 2. what a newer memory contradicts
    ordered = sorted(txn.memories.values(), key=lambda m: m.sort_key)
    for i, newer in enumerate(ordered):
        if newer.id not in txn.memories:
            continue
        terms = {m.group(1).lower().rstrip(".,") for p in SUPERSEDE_RES for m in p.finditer(newer.note)}
        terms = {t for t in terms if t not in STOPWORDS and len(t) > 1}
        if not terms:
            continue
        for older in ordered[:i]:
            if older.id not in txn.memories or mine(older) and newer.author != "you":
                continue
            if mine(older):
                continue
            older_words = set(words(older.note))
            hit = terms & older_words
            if not hit:
                continue
            if any(p.search(older.note) for p in SUPERSEDE_RES):
                continue  # the older one already says it moved away
            forget(older.id, f"contradicted by the newer {newer.id} ({', '.join(sorted(hit))})")

    # 2b. the same statement with a new value ("CI takes 12 minutes" → "… 8 minutes")
    ordered = sorted(txn.memories.values(), key=lambda m: m.sort_key)
    for i, newer in enumerate(ordered):
        for older in ordered[:i]:
            if older.id not in txn.memories or newer.id not in txn.memories or mine(older):
                continue
            if _new_value_of(older.note, newer.note):
                forget(older.id, f"a newer value is in {newer.id}")

    # 3. memories about one subject that say the same thing
    _merge_pass(txn, plan, 0.7, mine)
    # 4. near the limit: merge closer matches first, down to about TIDY_TARGET
    usage = txn.usage()
    if usage.memories >= MAX_MEMORIES - TIDY_NEAR or usage.list_bytes >= MAX_LIST_BYTES * 0.9:
        for threshold in (0.6, 0.5, 0.4):
            if len(txn.memories) <= TIDY_TARGET:
                break
            _merge_pass(txn, plan, threshold, mine, stop_at=TIDY_TARGET)
        if len(txn.memories) > TIDY_TARGET:
            txn.notices.append(
                f"{label} still holds {len(txn.memories)} memories: the rest are about different subjects; "
                "forget some yourself (tidy never lumps different subjects together)"
            )
    return plan


def _new_value_of(old: str, new: str) -> bool:
    """Two notes that are the same sentence with one number (or one copula value) changed."""
    a, b = words(old), words(new)
    if len(a) != len(b) or len(a) < 3 or a == b:
        return False
    diff = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
    if len(diff) != 1:
        return False
    i = diff[0]
    if re.fullmatch(r"v?\d+(?:\.\d+)*", a[i]) and re.fullmatch(r"v?\d+(?:\.\d+)*", b[i]):
        return True
    return i > 0 and a[i - 1] in ("is", "are", "=") and len(content_words(old) & content_words(new)) >= 2


def names(text: str) -> set[str]:
    """Tokens that name a particular thing: with a digit, in capitals, or capitalized inside a
    sentence (``q3``, ``VPN``, ``Postgres``). Two memories that each name something the other
    does not are about different subjects."""
    out = set()
    for sentence in sentences(text) or [text]:
        for i, token in enumerate(_WORD_RE.findall(sentence)):
            if any(c.isdigit() for c in token) or (token.isupper() and len(token) > 1) or \
                    (i > 0 and token[:1].isupper()) or any(c.isupper() for c in token[1:]):
                out.add(stem(token.lower()))
    return out


def _merge_pass(txn: Transaction, plan: TidyPlan, threshold: float, mine: Callable[[Memory], bool],
                stop_at: int | None = None) -> None:
    label = txn.scope.label
    pairs = []
    mems = [m for m in txn.memories.values() if not mine(m)]
    cw = {m.id: content_words(m.note) for m in mems}
    nm = {m.id: names(m.note) for m in mems}
    for i, a in enumerate(mems):
        for b in mems[i + 1:]:
            common = cw[a.id] & cw[b.id]
            if len(common) < 2:
                continue  # one subject needs at least two words in common
            na, nb = nm[a.id], nm[b.id]
            if not (na <= nb or nb <= na):
                continue  # each names something the other does not: different subjects
            score = jaccard(cw[a.id], cw[b.id])
            subset = cw[a.id] <= cw[b.id] or cw[b.id] <= cw[a.id]
            if score >= threshold or (subset and min(len(cw[a.id]), len(cw[b.id])) >= 3 and threshold >= 0.7):
                pairs.append((1.0 if subset else score, a.id, b.id))
    pairs.sort(key=lambda t: (-t[0], t[1], t[2]))
    for _score, a_id, b_id in pairs:
        if stop_at is not None and len(txn.memories) <= stop_at:
            return
        if a_id not in txn.memories or b_id not in txn.memories:
            continue
        a, b = txn.memories[a_id], txn.memories[b_id]
        newer, older = (a, b) if a.sort_key >= b.sort_key else (b, a)
        merged = _merged(newer, older)
        if merged is None:
            continue
        txn.replace_memory(newer.id, merged, by="lookout", reason=f"merged with {older.id} by tidy")
        txn.forget(older.id, by="lookout", reason=f"merged into {newer.id} by tidy", quiet=True)
        txn.log.append(f"merge {label}: {older.id} into {newer.id}")
        plan.merged += 1


def _merged(newer: Memory, older: Memory) -> Memory | None:
    new_words, old_words = content_words(newer.note), content_words(older.note)
    if old_words <= new_words:
        note = newer.note  # the newer one says it all, word for word
    elif new_words <= old_words:
        note = older.note
    else:
        note = newer.note
        extra = [s for s in sentences(older.note) if not content_words(s) <= new_words]
        joined = normalize_note(note + " " + " ".join(extra))
        if len(joined) <= NOTE_MAX:
            note = joined
    details = newer.details.strip()
    if older.details.strip() and older.details.strip() not in details:
        details = (details + "\n\n" + older.details.strip()).strip()
    if note == newer.note and content_words(older.note) - content_words(note):
        details = (details + "\n\nEarlier: " + older.note).strip()
    created = min((parse_time(newer.created), parse_time(older.created)), key=lambda d: d or dt.datetime.max.replace(tzinfo=dt.timezone.utc))
    return replace(
        newer, note=note, details=details, extra=dict(newer.extra), edited_by="lookout",
        created=format_time(created) if created else newer.created,
        updated=max(newer.updated, older.updated, key=lambda t: parse_time(t) or dt.datetime.min.replace(tzinfo=dt.timezone.utc)),
    )


# --- learning from prompts ----------------------------------------------------------------------
NOTE_RE = re.compile(r"^#(!?)(?:\s+|(?<=!))(?!#)(\S[\s\S]*)$")
REMEMBER_RE = re.compile(
    r"""(?ix)
    (?:^|[,;:]\s*|\b(?:and|also|but|so|please|pls|btw|ok|okay|oh|now)\s+)
    (?:please\s+)?(?:always\s+)?
    (?:remember|keep\ in\ mind|don't\ forget|do\ not\ forget|note\ for\ (?:the\ )?future|for\ future\ reference)
    (?:\s+(?:that|this))?\s*[:,\u2014\u2013-]?\s+
    (?P<what>\S.*)$
    """
)
_NOT_A_FACT = re.compile(r"(?i)^(?:when|how|what|why|if|whether|where|who|which|the\ time|to\ (?!always|never))\b", re.X)


def remembered_in(prompt: str) -> list[str]:
    """What a prompt asks to remember ("remember that …"), one note per request."""
    out = []
    for line in prompt.splitlines():
        for sentence in re.split(r"(?<=[.!?])\s+(?=[A-Z\"'`(])", line.strip()):
            sentence = sentence.strip()
            if not sentence or sentence.endswith("?"):
                continue
            m = REMEMBER_RE.search(sentence)
            if not m:
                continue
            what = m.group("what").strip()
            if _NOT_A_FACT.match(what):
                continue
            what = re.sub(r"(?i)^to\s+(?=always|never)", "", what)
            what = what[:1].upper() + what[1:]
            if len(what) >= 3:
                out.append(normalize_note(what))
    return out


def _looks_like_document(text: str) -> bool:
    lines = text.split("\n")
    if any(not line.strip() for line in lines):
        return True
    return any(re.match(r"^\s*(?:#|[-*+]\s|\d+[.)]\s|```|\|)", line) for line in lines[1:])


def notes_in(prompt: str) -> list[tuple[str, str, str]]:
    """``(where, author, note)`` for each thing a prompt asks to keep: ``#`` notes for the project
    (word for word), ``#!`` for Everywhere, and "remember that …" (learned)."""
    text = prompt.strip()
    m = NOTE_RE.match(text)
    if m and not text.startswith("##"):
        if _looks_like_document(text):
            return []  # a pasted Markdown document that starts with a heading, not a note
        return [("everywhere" if m.group(1) else "here", "you", m.group(2))]
    return [("here", "learned", what) for what in remembered_in(text)]


@dataclass
class LearnResult:
    saved: int = 0
    skipped: int = 0
    lines: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def prompt_key(session: str | None, timestamp: str | None, text: str, occurrence: int = 0) -> str:
    """Which prompt this is: its chat, time and text, and how many identical prompts came
    before it (formats without timestamps repeat a text only by typing it again)."""
    raw = f"{session or ''}\x00{timestamp or ''}\x00{text}\x00{occurrence}"
    # surrogatepass: a prompt may hold a lone surrogate (JSON allows "\ud800")
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:24]


class Ledger:
    """Which prompts were learned from already, so a second run saves nothing."""

    def __init__(self, root) -> None:
        self.path = root / "learned.txt"

    def keys(self) -> set[str]:
        try:
            return set(self.path.read_text(encoding="utf-8").split())
        except FileNotFoundError:
            return set()

    def add(self, keys: list[str]) -> None:
        if not keys:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with file_lock(self.path.parent / ".learned.lock"):
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write("".join(k + "\n" for k in keys))
                handle.flush()


def prompts_of(view) -> list:
    """The first text part of each real user prompt (not attachments, tool results or notices,
    nor the note lookout left where it cleared or shrank an image before the user's text)."""
    from lookout_cli.formats.clearing import is_cleared
    from lookout_cli.formats.view import TEXT

    prompt_messages = {i.message for i in view.items if i.prompt}
    seen: set[int] = set()
    out = []
    for item in view.items:
        if item.message in prompt_messages and item.message not in seen and item.kind == TEXT and item.role == "user":
            if is_cleared(item):
                continue
            seen.add(item.message)
            if item.text.lstrip().startswith("<lookout-"):
                continue
            out.append(item)
    return out


def learn_from_prompts(view, scope_for: Callable[[str], Scope], source: str | None,
                       dry_run: bool = False) -> LearnResult:
    from lookout_cli.memory.project import memory_root

    result = LearnResult()
    ledger = Ledger(memory_root())
    done = ledger.keys()
    wanted: dict[str, list[tuple[str, Memory, str]]] = {}  # scope kind -> (key, memory, where)
    scopes: dict[str, Scope] = {}
    finished_keys: list[str] = []
    seen: dict[tuple, int] = {}
    for item in prompts_of(view):
        ident = (item.timestamp, item.text)
        occurrence = seen.get(ident, 0)
        seen[ident] = occurrence + 1
        key = prompt_key(view.session_id or source, item.timestamp, item.text, occurrence)
        if key in done:
            continue
        found = notes_in(item.text)
        if not found:
            continue
        where = f"{source}#L{item.record.lineno}" if source and item.record.lineno else source
        ok = True
        for kind, author, note in found:
            try:
                note = check_note(note)
            except LookoutError as exc:
                result.warnings.append(f"line {item.record.lineno}: not saved: {exc}")
                continue
            finding = secrets.first(note)
            if finding is not None:
                result.warnings.append(f"line {item.record.lineno}: not saved: {secret_error(finding, 'the note')}")
                continue
            mem = Memory(id="", note=note, author=author, source=where, learned_from=key)
            wanted.setdefault(kind, []).append((key, mem, str(item.record.lineno)))
        if ok:
            finished_keys.append(key)
    full_keys: set[str] = set()
    for kind, items in wanted.items():
        try:
            scope = scopes.get(kind) or scope_for(kind)
        except LookoutError as exc:
            result.warnings.append(f"not saved: {exc}")
            full_keys.update(k for k, _, _ in items)
            continue
        if kind != "everywhere":
            auto_tidy(scope, result, dry_run)  # make room first when the scope is crowded
        with scope.transaction(dry_run=dry_run, actor="learn") as txn:
            for key, mem, lineno in items:
                existing = txn.find_note(mem.note)
                if existing is not None:
                    result.skipped += 1
                    continue
                try:
                    txn.add(mem)
                except LookoutError as exc:
                    result.warnings.append(f"line {lineno}: not saved: {exc}")
                    full_keys.add(key)  # try again once there is room
                    continue
                result.saved += 1
                how = "note" if mem.author == "you" else "learned"
                result.lines.append(f"save {scope.label}: {mem.id} ({how}, line {lineno})")
    if not dry_run:
        ledger.add([k for k in finished_keys if k not in full_keys])
    return result


TIDY_EVERY = dt.timedelta(hours=6)


def crowded(scope: Scope) -> bool:
    usage = scope.usage()
    return usage.memories >= MAX_MEMORIES - TIDY_NEAR or usage.list_bytes >= MAX_LIST_BYTES * 0.9


def auto_tidy(scope: Scope, result: LearnResult, dry_run: bool) -> None:
    """Learning also tidies a crowded project or agent memory, at most every 6 hours (never
    Everywhere, never a memory you wrote)."""
    from lookout_cli.memory.store import now

    if not scope.exists() or not crowded(scope):
        return
    stamp_path = scope.path / ".tidied"
    try:
        last = parse_time(stamp_path.read_text(encoding="utf-8"))
    except OSError:
        last = None
    current = now()
    if last is not None and current - last < TIDY_EVERY:
        return
    with scope.transaction(dry_run=dry_run, actor="tidy") as txn:
        plan_tidy(txn, today=current, include_mine=False)
    result.lines += [f"tidy: {line}" for line in txn.log]
    if not dry_run:
        from lookout_cli.core.fsutil import atomic_write

        atomic_write(stamp_path, format_time(current).encode())
