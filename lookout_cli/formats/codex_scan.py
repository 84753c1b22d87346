"""Reading a Codex rollout's lines in order into what its view is built from (``Scanner``), the
way Codex rebuilds the history on resume (research/formats.md §2.6): every ``response_item`` in
order, except that a ``compacted`` record replaces everything before it with its
``replacement_history`` (or, for a local compaction without one, with the setup Codex injects
again, the most recent real user messages and its summary ``message``).

A long rollout compacts every few megabytes, and its view reads of the lines before its last
``compacted`` record only what they add up to: the usages (by column: ``Usages``), the
compactions, the session, the model, the setup and user messages a local compaction carries
forward, the images' UI events. ``Settling`` reads those lines into that as the load parses
them, with no record kept a line (``Adapter.settling``); the view goes on from it
(``Adapter._scan``).
"""

from __future__ import annotations

import array
import re
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from lookout_cli.core.dataclass import dataclass
from lookout_cli.core.hashing import sha256
from lookout_cli.core.jsonl import (
    FIELDS_BYTES,
    Line,
    Record,
    last_line_holding,
    valid_utf8,
    value_reader,
)
from lookout_cli.formats import as_str, interned
from lookout_cli.formats.codex_items import (
    LOOKOUT_SETUP,
    REAL_USER,
    SETUP_MESSAGE,
    Entry,
    Scan,
    get_path,
    image_key,
    message_texts,
    payload_facts,
)
from lookout_cli.formats.usages import Usages
from lookout_cli.formats.view import Compaction, Usage
from lookout_cli.tokens.tokenizer import estimate

USAGE_KEYS = ("input_tokens", "cached_input_tokens", "cache_write_input_tokens", "output_tokens", "total_tokens")
COMPACT_USER_MESSAGE_MAX_TOKENS = 20_000  # codex compact.rs: recent user messages kept by a local compaction
_ISO_RE = re.compile(r"\A\d{4}-\d\d-\d\dT")
LONGEST_COMPACTED = 2 << 20  # a compacted line longer than this is not where the view is shown from
_EVENTS = frozenset({"token_count", "thread_rolled_back", "user_message"})  # the events the scan reads


def valid_ts(value: Any) -> str | None:
    return value if isinstance(value, str) and _ISO_RE.match(value) else None


def as_int(value: Any) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    return 0


def node_of(obj: dict) -> tuple:
    """What a lean transcript keeps of a rollout line: (type, timestamp, what the scan reads of
    the payload, None when the payload is not an object)."""
    kind, payload = interned(as_str(obj.get("type"))), obj.get("payload")
    ts = valid_ts(obj.get("timestamp"))
    if not isinstance(payload, dict):
        return kind, ts, None
    if kind == "response_item":
        return kind, ts, payload_facts(payload)
    if kind == "compacted":
        history = payload.get("replacement_history")
        if not isinstance(history, list):
            return kind, ts, (None,)
        return kind, ts, ([(i, payload_facts(item)) for i, item in enumerate(history) if isinstance(item, dict)],)
    if kind == "session_meta":
        base = payload.get("base_instructions")
        if isinstance(base, dict) and isinstance(base.get("text"), str) and base["text"]:
            setup = ("payload", "base_instructions", "text")
        elif isinstance(base, str) and base:
            setup = ("payload", "base_instructions")
        elif isinstance(payload.get("instructions"), str) and payload["instructions"]:
            setup = ("payload", "instructions")
        else:
            setup = None
        return kind, ts, (payload.get("id") or payload.get("session_id"), payload.get("cwd"), setup)
    if kind == "turn_context":
        return kind, ts, (payload.get("model"), payload.get("cwd"))
    if kind == "event_msg":
        etype = interned(as_str(payload.get("type")))
        if etype == "token_count":
            info = payload.get("info")
            return kind, ts, (etype, _token_count(info) if isinstance(info, dict) else None)
        if etype == "thread_rolled_back":
            return kind, ts, (etype, payload.get("num_turns"))
        if etype == "user_message":
            images = payload.get("images")
            urls = [image_key(u) for u in images if isinstance(u, str) and u] if isinstance(images, list) else []
            return kind, ts, (etype, urls)
        return kind, ts, (etype, None)
    return kind, ts, ()


def _token_count(info: dict) -> tuple[bytes, tuple | None]:
    """A token_count event's totals as a digest (Codex writes the same event twice in a row:
    the second is recognized by it) and the figures a usage is made of (None without a
    ``last_token_usage``). Two small tuples instead of three dicts of figures per turn."""
    total, last = info.get("total_token_usage"), info.get("last_token_usage")
    try:
        same = orjson.dumps([total, last], option=orjson.OPT_SORT_KEYS)
    except TypeError:  # a figure beyond 64 bits
        same = repr([total, last]).encode()
    figures = (*map(last.get, USAGE_KEYS), info.get("model_context_window")) if isinstance(last, dict) else None
    return _digest(same), figures


def _digest(same: bytes) -> bytes:
    return sha256(same).digest()[:16]


def roll_back(entries: list, turns: int) -> list:
    """The history without its newest ``turns`` user turns (a turn starts at a real user message)."""
    if turns <= 0:
        return entries
    starts = [i for i, e in enumerate(entries) if e.facts[REAL_USER]]
    if not starts:
        return entries
    cut = starts[-turns] if turns <= len(starts) else starts[0]
    return entries[:cut]


def weighed(entry: Entry) -> tuple[str, int]:
    """A user message's texts, joined as Codex joins them, and what they cost (``estimate``)."""
    text = "\n".join(message_texts(entry.read()))
    if entry.payload is None:  # (read from its line; a compaction's summary is made up: no line to let go of)
        entry.record.release()
    return text, estimate(text)


def rebuild_local(entries: list, record: Record | Line, ts: str | None, message: Any,
                  weigh: Callable[[Entry], tuple[str, int]] = weighed) -> list:
    """History after a compaction without ``replacement_history`` (codex compact.rs): the setup
    Codex injects again, the most recent real user messages (about 20k tokens, newest kept;
    ``weigh``: a message's text and cost), then the summary (the record's ``message``) as a
    user message."""
    setup = [e.carried() for e in entries if e.facts[SETUP_MESSAGE] and not e.facts[LOOKOUT_SETUP]]
    users = []
    budget = COMPACT_USER_MESSAGE_MAX_TOKENS
    for e in reversed(entries):
        if not e.facts[REAL_USER]:
            continue
        if budget <= 0:
            break
        text, cost = weigh(e)
        users.append(e.carried(text[: budget * 3] if cost > budget else None))
        budget -= cost
    users.reverse()
    payload = {"type": "message", "role": "user",
               "content": [{"type": "input_text", "text": message if isinstance(message, str) else ""}]}
    summary = Entry(record, ("payload", "message"), payload_facts(payload), ts, payload)
    return setup + users + [summary]


@dataclass(slots=True)
class SettlePoint:
    """A scan's state once it has read a compaction (``Scanner.settle_point``): the history
    that compaction left, how many usages and compactions came up to it, and the rest."""

    record: Record  # the compaction's
    entries: list
    usages: int
    compactions: int
    base_has_history: bool
    session_id: str | None
    cwd: str | None
    model: str | None
    meta_setup: tuple | None
    last_timestamp: str | None
    event_images: dict
    last_key: bytes | tuple | None
    last_total: int | None


class Scanner:
    """``Adapter._scan``'s reading of a rollout's lines, one at a time and in order (``read``):
    what the view is built from (``scan``) and where the reading stands. Without ``items``,
    only usages, compactions and the model (no history entry is kept)."""

    def __init__(self, items: bool = True) -> None:
        self.scan = Scan(entries=[], usages=[], compactions=[], event_images={})
        self.items = items
        self.last_key = None  # the last token_count's digest: Codex writes the same one twice in a row
        self.last_total: int | None = None  # the tokens the last usage counted: a compaction's before
        self.pending: Compaction | None = None  # the compaction whose after is the next usage's prompt

    def read(self, record: Record | Line, node: tuple) -> None:
        kind, ts, facts = node
        scan = self.scan
        if ts:
            scan.last_timestamp = ts
        if facts is None:  # the payload is not an object
            return
        if kind == "response_item":
            if self.items:
                self.add_entry(record, ("payload",), facts, ts)
        elif kind == "compacted":
            history = facts[0]
            if self.items:
                if history is not None:
                    scan.entries = []
                    for i, item in history:
                        self.add_entry(record, ("payload", "replacement_history", i), item, ts)
                else:
                    scan.entries = self.rebuild(record, ts)
                scan.base_has_history = history is not None
            scan.base, scan.rolled_back = record, False
            self.pending = Compaction(record, before=self.last_total, timestamp=ts)
            scan.compactions.append(self.pending)
            if self.items:
                scan.settle = self.settle_point(record)
        elif kind == "session_meta":
            sid, cwd, setup = facts
            if scan.session_id is None:
                scan.session_id = sid if isinstance(sid, str) else None
                scan.cwd = cwd if isinstance(cwd, str) else None
            if scan.meta_setup is None and setup is not None:
                scan.meta_setup = (record, setup, ts)
        elif kind == "turn_context":
            model, cwd = facts
            if isinstance(model, str) and model:
                scan.model = model
            if scan.cwd is None and isinstance(cwd, str):
                scan.cwd = cwd
        elif kind == "event_msg":
            etype, value = facts
            if etype == "token_count":
                if value is not None:
                    self.token_count(record, *value, ts)
            elif etype == "thread_rolled_back":  # /undo-style rollback: drop the newest user turns
                scan.entries = roll_back(scan.entries, as_int(value))
                scan.rolled_back = True
            elif etype == "user_message":
                for url in value:
                    scan.event_images.setdefault(url, []).append(record)

    def token_count(self, record: Record | Line, key: bytes, figures: tuple | None, ts: str | None) -> None:
        """A token_count event's usage (``_token_count``'s key and figures)."""
        if self.repeats(key):  # Codex emits the same totals twice in a row
            return
        self.last_key = key
        if figures is not None:
            self.counted(record, *map(as_int, figures), ts)

    def counted(self, record: Record | Line, inp: int, cached: int, written: int, out: int, total: int, window: int,
                ts: str | None) -> None:
        """A token count's figures, whole numbers (input, cached input, cache write, output, the
        total, the context window)."""
        if not (inp or cached or written or out):
            return
        inp = max(inp - cached - written, 0)  # Codex's input_tokens include the cached part
        if self.pending is not None:
            self.pending.after = inp + written + cached
            self.pending = None
        self.last_total = total or (inp + written + cached + out)
        # (reasoning_output_tokens are part of output_tokens)
        self.keep_usage(record, inp, written, cached, out, ts, window or None)

    def repeats(self, key: bytes) -> bool:
        """Whether a token_count event's key is the one before's."""
        return key == self.last_key

    def keep_usage(self, record: Record | Line, inp: int, written: int, cached: int, out: int, ts: str | None,
                   window: int | None) -> None:
        self.scan.usages.append(Usage(record, input=inp, cache_write=written, cache_read=cached, output=out,
                                      model=self.scan.model, timestamp=ts, context_window=window))

    def add_entry(self, record: Record | Line, path: tuple, facts: tuple, ts: str | None) -> None:
        self.scan.entries.append(Entry(record, path, facts, ts))

    def rebuild(self, record: Record, ts: str | None) -> list:
        message = record.data["payload"].get("message")
        record.release()
        return rebuild_local(self.scan.entries, record, ts, message)

    def settle_point(self, record: Record) -> SettlePoint | None:
        """Where this scan stands once it has read ``record``, a compaction: what a scan that
        goes on from the line after starts from (``settled_value``)."""
        scan = self.scan
        return SettlePoint(record, list(scan.entries), len(scan.usages), len(scan.compactions), scan.base_has_history,
                           scan.session_id, scan.cwd, scan.model, scan.meta_setup, scan.last_timestamp,
                           {url: list(events) for url, events in scan.event_images.items()},
                           self.last_key, self.last_total)

    def going_on(self) -> Scanner:
        """A scanner that reads on from here, this one left as it is (a view is built again
        after each edit: each goes on from the same lines read)."""
        scan = self.scan
        more = Scanner(self.items)
        more.scan = Scan(entries=list(scan.entries), base=scan.base, base_has_history=scan.base_has_history,
                         session_id=scan.session_id, cwd=scan.cwd, model=scan.model, meta_setup=scan.meta_setup,
                         usages=_going_on(scan.usages), compactions=list(scan.compactions),
                         last_timestamp=scan.last_timestamp,
                         event_images={url: list(events) for url, events in scan.event_images.items()})
        more.last_key, more.last_total = self.last_key, self.last_total
        return more  # (no compaction pending: the line read next is one)


def settled_value(scan: Scan) -> tuple | None:
    """``Adapter.settled``'s value of a scan: where it stood once it had read its last compaction
    (``Scanner.settle_point``), as values ``marshal`` keeps (the line memo's, one after the
    other), which ``going_on_from`` reverses: the line of that compaction, the usages before it
    by column (those from the last that records the context window on one by one, as
    ``_Columns.usages`` keeps them), what they add up to, the compactions up to it, then the
    history it left and the rest of the scan's state. None when there is none, or a count is
    past 64 bits (the lines keep their nodes)."""
    point = scan.settle
    if point is None:
        return None
    count = point.usages
    usages = scan.usages if type(scan.usages) is Usages else Usages(list(scan.usages))
    older = len(usages.lines)
    split = next((n for n in range(count - 1, older - 1, -1) if usages[n].context_window), count)
    try:
        kept = usages.first(split)
    except OverflowError:
        return None
    recent = tuple((u.record.lineno, u.input, u.cache_write, u.cache_read, u.output, u.cache_write_1h, u.model,
                    u.timestamp, u.context_window) for u in usages[split:count])
    meta = point.meta_setup
    rest = (tuple((e.record.lineno - 1, e.path, e.facts, e.ts, e.payload, e.rebuilt, e.truncated) for e in point.entries),
            point.base_has_history, point.session_id, point.cwd, point.model,
            None if meta is None else (meta[0].lineno - 1, *meta[1:]), point.last_timestamp,
            {url: tuple(r.lineno - 1 for r in events) for url, events in point.event_images.items()},
            None if point.last_key is None else _key_digest(point.last_key), point.last_total)
    compactions = scan.compactions[:point.compactions]
    return (point.record.lineno - 1, kept.lines, kept.numbers, tuple(kept.models), tuple(kept.stamps),
            kept.older_totals(), kept.older_in_order(), recent,
            tuple((c.record.lineno - 1, c.before, c.after, c.timestamp, c.trigger) for c in compactions), rest)


def going_on_from(kept: Sequence, records: Sequence[Record]) -> tuple[int, Scanner] | None:
    """The scanner ``settled_value`` stood for, from ``kept`` (its values by position: the
    line memo loads each when it is read, the usages' times only when asked for), and the
    position of the line it goes on from (the one after the compaction); None when ``records``
    has no compaction where it says."""
    at = kept[0]
    node = records[at].node if 0 < at < len(records) else None
    if node is None or node[0] != "compacted" or node[2] is None:
        return None
    history, has_history, sid, cwd, model, meta, stamp, images, key, total = kept[9]
    usages = Usages.older_of(memoryview(kept[1]).cast("q"), memoryview(kept[2]).cast("q"), list(kept[3]),
                             lambda: kept[4], kept[5], kept[6])
    usages.recent = [Usage(Line(line), *figures) for line, *figures in kept[7]]
    scanner = Scanner()
    scan = scanner.scan
    scan.entries = [Entry(records[pos], *rest) for pos, *rest in history]
    scan.usages = usages
    scan.compactions = [Compaction(records[pos], *rest) for pos, *rest in kept[8]]
    scan.base, scan.base_has_history = records[at], has_history
    scan.session_id, scan.cwd, scan.model, scan.last_timestamp = sid, cwd, model, stamp
    scan.meta_setup = None if meta is None else (records[meta[0]], *meta[1:])
    scan.event_images = {url: [records[pos] for pos in events] for url, events in images.items()}
    scanner.last_key, scanner.last_total = key, total
    if scan.compactions[-1].after is None:  # (no usage after it yet: the next one's prompt is its after)
        scanner.pending = scan.compactions[-1]
    scan.settle = scanner.settle_point(records[at])
    return at + 1, scanner


def _going_on(usages: Usages) -> Usages:
    """The same usages, to add to apart (the columns shared)."""
    more = usages.older_only()
    more.recent = list(usages.recent)
    return more


def _is_compacted(line: bytes) -> bool:
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return type(obj) is dict and obj.get("type") == "compacted" and isinstance(obj.get("payload"), dict)


def shown_from(fd: int, start: int, end: int) -> int:
    """``Adapter.shown_from`` for Codex: where the rollout's last ``compacted`` line starts
    (0: none), found from the file's end."""
    return last_line_holding(fd, b'"type":"compacted"', start, end, _is_compacted, longest=LONGEST_COMPACTED) or 0


class Settling(Scanner):
    """``Adapter.settling`` for Codex: the lines before the last ``compacted`` one read by a
    ``Scanner`` as they are parsed (``add``), each known by its number (a ``Line``) instead of a
    record, its usages kept by column. Of the history it keeps only what a local compaction
    carries forward (setup messages, and real user messages with their texts: the compaction
    weighs them); ``settled(records)`` gives the scanner the view goes on from, its lines made
    records (``Lines`` makes those few)."""

    def __init__(self) -> None:
        super().__init__()
        self.scan.usages = _Columns()
        self.count = 0  # lines read
        self.at = 0  # (``settled``: the position of the compaction they end at)
        self.value: dict | None = None  # the line being read
        self.texts: dict[tuple, tuple] = {}  # (line, path) -> a kept user message's text, its cost once known

    def reader(self, size: int) -> Callable[[bytes], bool]:
        """A function that reads the next line's bytes into this reader (False: they are no
        JSON value, and the caller keeps a record of the line). Each line is parsed by orjson
        (``add``); with ``size`` bytes of lines to read, at least ``FIELDS_BYTES``, a line that
        gives the view only its time (a tool call, its output, reasoning, most events) is
        decoded by msgspec for that alone (``codex_fields``)."""
        by_value = value_reader(self.add)

        if size < FIELDS_BYTES:
            return by_value
        from lookout_cli.formats import codex_fields

        decode, refused, scan, iso = codex_fields.decode, codex_fields.REFUSED, self.scan, _ISO_RE.match
        repeats, counted, counts = self.repeats, self.counted, codex_fields.Counts

        def by_fields(raw: bytes) -> bool:
            try:
                line = decode(raw)
            except refused:
                return by_value(raw)
            payload = line.payload
            info = None
            if payload is not None:
                info = payload.info
                if info is not None and payload.type == "token_count" and line.type == "event_msg" \
                        and type(info.total_token_usage) is counts and type(last := info.last_token_usage) is counts:
                    pass  # (its figures as decoded: a line in four of a long rollout)
                elif _read_whole(line.type, payload):
                    return by_value(raw)
                else:
                    info = None
            if not raw.isascii() and not valid_utf8(raw):
                return by_value(raw)
            self.count += 1
            ts = line.timestamp
            if type(ts) is str and iso(ts):
                scan.last_timestamp = ts
            else:
                ts = None
            if info is not None:  # (``token_count``: its key the two objects, equal when the objects are)
                key = (info.total_token_usage, last)
                if not repeats(key):
                    self.last_key = key  # (a count not there is unset: 0)
                    counted(self.count, last.input_tokens or 0, last.cached_input_tokens or 0,
                            last.cache_write_input_tokens or 0, last.output_tokens or 0, last.total_tokens or 0,
                            as_int(info.model_context_window), ts)
            return True

        return by_fields

    def add(self, obj: dict | None) -> None:
        """The next line's parsed value (None when it is not a JSON object)."""
        self.count += 1
        if obj is not None:
            self.value = obj
            self.read(Line(self.count), node_of(obj))
            self.value = None

    def settle_point(self, record: Line) -> None:
        return None  # (the scan that goes on from here reads the last compaction: it says where it stands)

    def keep_usage(self, record: int, inp: int, written: int, cached: int, out: int, ts: str | None,
                   window: int | None) -> None:
        self.scan.usages.append(record, self.scan.model, inp, written, cached, out, ts, window)

    def repeats(self, key: bytes | tuple) -> bool:
        # (a key is ``node_of``'s digest, or the two objects msgspec decoded: as digests when
        # one of each meets)
        last = self.last_key
        if type(key) is type(last):
            return key == last
        return last is not None and _key_digest(key) == _key_digest(last)

    def add_entry(self, record: Line, path: tuple, facts: tuple, ts: str | None) -> None:
        if facts[REAL_USER]:
            self.texts[record, path] = ("\n".join(message_texts(get_path(self.value, path))), None)
        elif not facts[SETUP_MESSAGE]:
            return  # (nothing a local compaction carries: dropped by the next compaction)
        self.scan.entries.append(Entry(record, path, facts, ts))

    def rebuild(self, record: Line, ts: str | None) -> list:
        entries = rebuild_local(self.scan.entries, record, ts, self.value["payload"].get("message"), self._weigh)
        self.texts = {(e.record, e.path): self.texts[e.record, e.path]
                      for e in entries if e.facts[REAL_USER] and e.payload is None}
        return entries

    def _weigh(self, entry: Entry) -> tuple[str, int]:
        """``weighed``, of the text kept (and its cost, once worked out: a message a compaction
        carries is weighed again by the next)."""
        if entry.payload is not None:
            return weighed(entry)
        key = (entry.record, entry.path)
        text, cost = self.texts[key]
        if cost is None:
            cost = estimate(text)
            self.texts[key] = (text, cost)
        return text, cost

    def settled(self, records) -> Scanner | None:
        """The scanner the view goes on from, the next record being the compaction these lines
        end at; None when it is not."""
        at = self.count
        node = records[at].node if at < len(records) else None
        scan = self.scan
        if node is None or node[0] != "compacted" or node[2] is None or scan.usages.broken:
            return None

        def made(line):
            return records[line - 1] if type(line) is Line else line

        scan.entries = [Entry(made(e.record), e.path, e.facts, e.ts, e.payload, e.rebuilt, e.truncated)
                        for e in scan.entries]
        for compaction in scan.compactions:
            compaction.record = made(compaction.record)
        scan.base = made(scan.base)
        if scan.meta_setup is not None:
            scan.meta_setup = (made(scan.meta_setup[0]), *scan.meta_setup[1:])
        scan.event_images = {url: [made(line) for line in lines] for url, lines in scan.event_images.items()}
        scan.usages = scan.usages.usages()
        if self.last_key is not None:  # as ``node_of`` gives it, for the lines after
            self.last_key = _key_digest(self.last_key)
        self.texts, self.value, self.pending = {}, None, None
        self.at = at
        return self


def _key_digest(key: bytes | tuple) -> bytes:
    """A token_count event's key in ``Settling`` as ``_token_count``'s digest: its two objects
    (``codex_fields.Counts``) encoded as orjson writes them, then digested."""
    if type(key) is bytes:
        return key
    from lookout_cli.formats.codex_fields import encode

    return _digest(b"[" + encode(key[0]) + b"," + encode(key[1]) + b"]")


def _read_whole(kind: object, payload) -> bool:
    """Whether a line (its type, and its payload's fields that ``codex_fields`` decodes) may
    give the view more than its time, before the last compaction: a message but the model's,
    an event the scan reads (a user message only with images), any other line type."""
    inner = payload.type
    if type(inner) is not str:
        return True
    if kind == "response_item":
        return inner == "message" and payload.role != "assistant"
    if kind == "event_msg":
        return inner in _EVENTS and (inner != "user_message" or bool(payload.images))
    return True


class _Columns:
    """``Settling``'s usages, by column (a hundred thousand in a long rollout); at the end
    (``usages``), those from the last that records the model's context window on are made
    ``Usage``s (the meter reads the window of the newest usage that records one: Codex records
    it in each, so that is the last)."""

    def __init__(self) -> None:
        self.lines = array.array("q")
        self.numbers = array.array("q")
        self.models: list[str | None] = []
        self.stamps: list[str | None] = []
        self.windowed = (-1, None)  # (the position of the last that records a window, the window)
        self.broken = False  # a count past 64 bits: the view reads every line (its usages hold any number)

    def append(self, line: int, model: str | None, inp: int, written: int, cached: int, out: int, ts: str | None,
               window: int | None) -> None:
        try:
            self.numbers.extend((inp, written, cached, out, 0))
        except OverflowError:
            self.broken = True  # (what the refused count's extension added is never read)
            return
        if window:
            self.windowed = (len(self.models), window)
        self.lines.append(line)
        self.models.append(model)
        self.stamps.append(ts)

    def usages(self) -> Usages:
        at, window = self.windowed
        lines, numbers, models, stamps = self.lines, self.numbers, self.models, self.stamps
        if at < 0:
            return Usages.older_of(lines, numbers, models, stamps)
        recent = [Usage(Line(lines[n]), *numbers[5 * n:5 * n + 5], models[n], stamps[n], window if n == at else None)
                  for n in range(at, len(models))]
        usages = Usages.older_of(lines[:at], numbers[:5 * at], models[:at], stamps[:at])
        usages.recent = recent
        return usages
