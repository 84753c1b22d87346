"""What the lines before a Claude Code session's last compaction give the view (``Settled``).

A long session is many segments, and the view reads of the ones before its last boundary only
what they add up to: the older segments' usages (with the ids they are counted by), their
compactions, and the time of the newest leaf they offer. That value comes from two places:

- a view built from every line (``settled``), which the line memo keeps (``settled_plain``,
  ``settled_from``) for the next measure of the grown file, and ``compact`` for the views it
  builds after writing;
- a cold load of a file (``Settling``), which reads the lines before the last boundary into
  columns as it parses them (a parent's position and a byte of flags a line, each uuid's
  line, the responses' figures) instead of keeping a node a line: no tuples to build, and
  what it keeps of a line is let go once the value is made. Arrays, not an object a number,
  wherever a long session has one a line or a response (``_Uuids``, ``_Figures``).

``claude_chain.build_chain`` takes the value only when it is the chain every line gives (else
the caller reads those lines' nodes after all).
"""

from __future__ import annotations

import array
import bisect
import itertools
import operator
import sys
from collections.abc import Callable, Sequence

from lookout_cli.core.jsonl import FIELDS_BYTES, Record, valid_utf8, value_reader
from lookout_cli.core.times import parse_time
from lookout_cli.formats.claude_chain import (
    CHAIN_TYPES,
    CONVERSATION_TYPES,
    MOVED_FIELD,
    MOVED_KIND,
    Chain,
    Settled,
    is_boundary,
    preserved_segment,
    uuid_key,
)
from lookout_cli.formats.claude_items import compaction_of, response_figures
from lookout_cli.formats.usages import Keys, Usages
from lookout_cli.formats.view import Compaction, View

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from typing import Any


def settled(chain: Chain, view: View) -> Settled | None:
    """What the lines before the chain's last boundary give ``view`` (built from the chain):
    the usages and compactions it counted before that boundary (``chain.settle``)."""
    if chain.settle is None:
        return None
    at, keys, latest = chain.settle
    usages = view.usages if type(view.usages) is Usages else Usages(view.usages)
    try:
        older = usages.first(len(keys))
    except OverflowError:  # a count past 64 bits: no value (the lines keep their nodes)
        return None
    return Settled(at, older, keys, view.compactions[:-1], latest)  # the last: the boundary's own


def settled_plain(found: Settled) -> tuple:
    """``found`` as values ``marshal`` keeps (the line memo's, one after the other: no one of
    them holds a long session's every response), ``settled_from`` reverses it: the usages by
    column (``Usages``), their lines and figures in arrays, what they add up to by model, and
    the ids they are counted by with their marks (``Keys``)."""
    usages = found.usages
    keys = found.keys if type(found.keys) is Keys else Keys(found.keys)
    compactions = tuple((c.record.lineno - 1, c.before, c.after, c.timestamp, c.trigger) for c in found.compactions)
    return (found.at, keys.all_marks(), tuple(keys), usages.lines, usages.numbers, tuple(usages.models),
            tuple(usages.stamps), compactions, found.latest, usages.older_totals(), usages.older_in_order())


def settled_from(kept: Sequence, records: Sequence[Record]) -> Settled:
    """The value ``settled_plain`` gave, from ``kept``, its values by position (the line memo
    loads each when it is read: the ids and times only when asked for)."""
    at, marks, lines, numbers, models, compactions, latest, totals, in_order = \
        (kept[n] for n in (0, 1, 3, 4, 5, 7, 8, 9, 10))
    # (marshal gives an array's bytes: read in place, as the memo gives them)
    lines = memoryview(lines).cast("q")
    usages = Usages.older_of(lines, memoryview(numbers).cast("q"), list(models), lambda: kept[6], totals, in_order)
    keys = Keys(lambda: kept[2], memoryview(marks).cast("I"), len(lines))
    return Settled(at, usages, keys, [Compaction(records[pos], *rest) for pos, *rest in compactions], latest)


_SIDE, _BOUNDARY, _ABOVE = 1, 2, 4  # a line's flags: a sidechain line, a main compaction, a conversation line below
_BY_VALUE = frozenset({"system", MOVED_KIND})  # types ``Settling.reader`` reads whole


class Settling:
    """``Adapter.settling`` for Claude Code: the lines before the last compaction, each as it is
    parsed (``add``, in file order: a parsed value, None when not a JSON object), kept as what the chain
    walk reads of them, and ``settled(records)`` once the line of that compaction is read.

    A parent is written before its children, so in file order the parent a line names is the
    newest line read with that uuid (``build_chain``'s nearest before), and whether a
    conversation line is below a line is known once the lines are read: the leaf candidates'
    times are kept only while they are candidates."""

    def __init__(self, follows: bool = False) -> None:
        self.by_uuid = _Uuids()  # the newest line with each uuid
        self.parents = array.array("q")  # each line's parent's position, -1: none
        self.flags = bytearray()
        self.stamps: dict[int, str] = {}  # the times of the main conversation lines nothing is below yet
        self.figures = _Figures()  # the main responses' usages
        self.logical: dict[int, int] = {}  # each main compaction's logical parent's position, -1: none
        self.compactions: dict[int, Compaction] = {}
        self.broken = False  # a line this does not follow (a preserved segment): the chain reads every line
        # ``follows`` other lines (read elsewhere, ``join``): the lines naming a parent (a
        # compaction: a logical parent) not among the lines read here, as (position, uuid,
        # whether a conversation line), which those may hold
        self.missing: list[tuple[int, str, bool]] | None = [] if follows else None
        self.missing_logical: list[tuple[int, str]] | None = [] if follows else None

    def reader(self, size: int) -> Callable[[bytes], bool]:
        """A function that reads the next line's bytes into this reader, in file order (False:
        they are no JSON value, and the caller keeps a record of the line). Each line is parsed
        by orjson (``add``), or with ``size`` bytes of lines to read, at least
        ``FIELDS_BYTES``, decoded by msgspec into the fields read here (``claude_fields``)."""
        by_value = value_reader(self.add)

        if size < FIELDS_BYTES:
            return by_value
        from lookout_cli.formats import claude_fields
        decode, refused = claude_fields.decode, claude_fields.REFUSED
        put, take, parents, flags = self._put, self.figures.take_fields, self.parents, self.flags

        def by_fields(raw: bytes) -> bool:
            try:
                line = decode(raw)
            except refused:
                return by_value(raw)
            kind = line.type
            # a type that is no text (lookout's moved lines have none), a compaction (read
            # whole), a line that is not ASCII and not UTF-8 (which orjson refuses): by value
            if type(kind) is not str or kind in _BY_VALUE or not raw.isascii() and not valid_utf8(raw):
                return by_value(raw)
            uid = line.uuid if kind in CHAIN_TYPES else None
            if type(uid) is not str:
                parents.append(-1)
                flags.append(0)
                return True
            side = line.isSidechain is True
            pos = put(kind, uid, line.parentUuid, side, line.timestamp)
            if not side and kind == "assistant" and line.isApiErrorMessage is not True:
                take(pos, line, raw)
            return True

        return by_fields

    def add(self, obj: dict | None) -> None:
        """The next line's parsed value (None when it is not a JSON object)."""
        kind = obj.get("type") if obj is not None else None  # (``line_type``, spelled out: every line)
        if type(kind) is not str:  # (no type a chain follows; and one that is a list cannot be looked up)
            kind = MOVED_KIND if kind is None and obj is not None and MOVED_FIELD in obj else None
        uid = obj.get("uuid") if kind in CHAIN_TYPES else None
        if type(uid) is not str:  # (names no line: ``uuid_key``)
            self.parents.append(-1)
            self.flags.append(0)
            return
        side = obj.get("isSidechain") is True
        if kind == "system" and not side and is_boundary(obj):
            pos = len(self.flags)
            self._boundary(pos, obj)  # (before the line is kept: its logical parent is not itself)
            self._put(kind, uid, obj.get("parentUuid"), side, obj.get("timestamp"))
            self.flags[pos] |= _BOUNDARY
            return
        pos = self._put(kind, uid, obj.get("parentUuid"), side, obj.get("timestamp"))
        if not side and (kind == "assistant" or kind == MOVED_KIND) and obj.get("isApiErrorMessage") is not True:
            self.figures.take(pos, obj)  # (``figures_of``)

    def _put(self, kind: str, uid: str, parent: Any, side: bool, stamp: Any) -> int:
        """Keep the next line, of ``kind`` with uuid ``uid``, naming ``parent``, and give its
        position: the parent's position (the newest line read with that uuid), the lines up the
        chain from a conversation line marked as having one below it (leaf candidates no more),
        and its time while it is one."""
        flags, parents, by_uuid = self.flags, self.parents, self.by_uuid
        recent = by_uuid.recent
        pos = len(flags)
        above = -1
        if type(parent) is str:
            above = recent.get(parent, -1)
            if above < 0:  # an older line, or none
                above = by_uuid.older(parent)
                if above < 0 and self.missing is not None:
                    self.missing.append((pos, parent, kind in CONVERSATION_TYPES))
        parents.append(above)
        if kind in CONVERSATION_TYPES:
            stamps = self.stamps
            while above >= 0 and not flags[above] & _ABOVE:  # each line is marked once
                flags[above] |= _ABOVE
                stamps.pop(above, None)
                above = parents[above]
            if not side and type(stamp) is str:
                stamps[pos] = stamp
        flags.append(_SIDE if side else 0)
        recent[uid] = pos
        if len(recent) >= by_uuid.WINDOW:
            by_uuid.put_away()
        return pos

    def _boundary(self, pos: int, obj: dict) -> None:
        if preserved_segment(obj) is not None:
            self.broken = True
        logical = obj.get("logicalParentUuid")
        self.logical[pos] = self.by_uuid.get(logical) if type(logical) is str else -1
        if self.logical[pos] < 0 and type(logical) is str and self.missing_logical is not None:
            self.missing_logical.append((pos, logical))
        self.compactions[pos] = compaction_of(None, obj)

    def join(self, later: Settling) -> None:
        """Take in ``later``, the lines after the ones read here read into a reader of their
        own (``Settling(follows=True)``, in another process: ``Run._settle``), as if ``add``
        had read them here: what they gave shifted past these lines, the parents they named
        among these lines found, and the walks up the chain that stopped at such a line gone
        on into these."""
        shift, by_uuid, flags, parents, stamps = len(self.flags), self.by_uuid, self.flags, self.parents, self.stamps
        found = [(pos + shift, above, talk) for pos, parent, talk in later.missing
                 if (above := by_uuid.get(parent)) >= 0]
        self.logical.update((pos + shift, above + shift if above >= 0 else -1) for pos, above in later.logical.items())
        self.logical.update((pos + shift, by_uuid.get(logical)) for pos, logical in later.missing_logical)
        parents.extend(array.array("q", [above + shift if above >= 0 else -1 for above in later.parents]))
        flags += later.flags
        for pos, above, talk in found:
            parents[pos] = above
            if talk or flags[pos] & _ABOVE:  # a walk from it, or through it, stopped at it
                while above >= 0 and not flags[above] & _ABOVE:
                    flags[above] |= _ABOVE
                    stamps.pop(above, None)
                    above = parents[above]
        stamps.update((pos + shift, stamp) for pos, stamp in later.stamps.items())
        self.compactions.update((pos + shift, compaction) for pos, compaction in later.compactions.items())
        self.broken = self.broken or later.broken
        self.figures.join(later.figures, shift)
        by_uuid.join(later.by_uuid, shift)

    def settled(self, records: Sequence[Record]) -> Settled | None:
        """What the lines read give the view, the next record being the compaction they end
        at; None when it is not (or a line read is one this does not follow)."""
        at = len(self.flags)
        node = records[at].node if at < len(records) else None
        if self.broken or self.figures.broken or self.by_uuid.spent or node is None or not is_boundary(node) \
                or node.get("isSidechain") is True or preserved_segment(node) is not None:
            return None
        logical = node.get("logicalParentUuid")  # (a node keeps it as ``uuid_key`` gives it)
        self.by_uuid.put_away()
        start = self.by_uuid.older(logical, counted=False) if logical is not None else -1
        self.by_uuid = _Uuids()  # let go of the uuids: what follows reads positions
        flags, parents = self.flags, self.parents
        # ``build_chain``'s walk, from the last boundary's logical parent back: a byte a line
        # marks the chain (a set or a list of a long session's positions cost more to make
        # than the walk), and each segment is the span after the boundary it starts at
        chain = bytearray(len(flags))
        spans: list[tuple[int, int]] = []  # (a segment's first position, the position after its last)
        boundaries: list[int] = []
        stop = _BOUNDARY | _SIDE
        while True:
            if start < 0:  # the logical parent is missing: an empty older segment
                spans.append((0, 0))
                break
            pos = start
            while pos >= 0 and not flags[pos] & stop:
                chain[pos] = 1
                pos = parents[pos]
            if pos >= 0 and flags[pos] & _SIDE:
                return None  # a subagent's line in the main conversation: not followed here
            spans.append((pos + 1, start + 1))
            if pos < 0:
                break
            boundaries.append(pos)
            start = self.logical[pos]
        spans.reverse()
        boundaries.reverse()
        figures, counted, keys, compactions = self.figures, [], [], []
        for n, (first, after) in enumerate(spans):
            figures.count(chain, first, after, counted, keys)
            if n < len(boundaries):
                compaction = self.compactions[boundaries[n]]
                compaction.record = records[boundaries[n]]
                compactions.append(compaction)
        offered = [stamp for stamp in self.stamps.values() if parse_time(stamp) is not None]
        latest = max(offered, key=parse_time) if offered else None
        usages = figures.usages(counted)
        return Settled(at, usages, keys, compactions, latest) if usages is not None else None


class _Figures:
    """The main responses' figures (``figures_of``) by column, looked up by the line's position:
    a tuple a response, with an object a number, took twice the room (a long session records
    a hundred thousand responses before its last compaction)."""

    def __init__(self) -> None:
        self.lines = array.array("Q")  # the lines' positions, in file order
        # five a response: input, cache write, cache read, output, 1-hour write (unsigned as
        # ``LineIndex`` says; one of 64 bits is no count ``Usages`` holds: ``usages``)
        self.numbers = array.array("Q")
        self.keys: list[Any] = []
        self.models: list[str | None] = []
        self.stamps: list[str | None] = []
        self.broken = False  # a count past 64 bits: the chain reads every line
        self.seen: set = set()  # the keys of the responses counted (``count``)

    def take(self, pos: int, obj: dict) -> None:
        """``add(pos, response_figures(obj))`` in fewer steps for a response as Claude Code
        writes one (every response of a long session comes here): its five counts checked at
        once by the unsigned array they go to, which refuses what is not a whole number from 0
        to 2**64, and a bool among them by its type; any other response (no message id, a
        count it refuses, a synthetic one) as ``response_figures`` reads it."""
        message = obj.get("message")
        usage = message.get("usage") if type(message) is dict else None
        if type(usage) is not dict:
            return
        get = usage.get
        creation = get("cache_creation")
        counts = (get("input_tokens"), get("cache_creation_input_tokens"), get("cache_read_input_tokens"),
                  get("output_tokens"), creation.get("ephemeral_1h_input_tokens", 0) if type(creation) is dict else 0)
        if not (counts[0] or counts[1] or counts[2] or counts[3]):  # (each 0 or none: no real usage)
            return
        if bool in map(type, counts) or not self._kept(pos, counts, message.get("model"), message.get("id"),
                                                       obj.get("timestamp")):
            figures = response_figures(obj)
            if figures is not None:
                self.add(pos, figures)

    def take_fields(self, pos: int, line: Any, raw: bytes) -> None:
        """``take`` of a response as msgspec decoded it (``Settling.reader``); one that ``take``
        reads by ``response_figures`` is parsed by orjson for it."""
        message = line.message
        usage = message.usage if message is not None else None
        if usage is None:
            return
        creation = usage.cache_creation
        counts = (usage.input_tokens, usage.cache_creation_input_tokens, usage.cache_read_input_tokens,
                  usage.output_tokens, creation.ephemeral_1h_input_tokens if creation is not None else 0)
        if (counts[0] or counts[1] or counts[2] or counts[3]) \
                and not self._kept(pos, counts, message.model, message.id, line.timestamp):
            import orjson

            self.take(pos, orjson.loads(raw))

    def _kept(self, pos: int, counts: tuple, model: Any, key: Any, timestamp: Any) -> bool:
        """Keep the figures of a response as Claude Code writes one (counts that are no bool):
        False (nothing kept) for any other (no message id, a count the array refuses, a
        synthetic one)."""
        numbers = self.numbers
        try:
            if model == "<synthetic>" or type(key) is not str or not key:
                return False
            numbers.extend(counts)
        except (TypeError, OverflowError):
            del numbers[5 * len(self.lines):]  # (what the refused count's extension added)
            return False
        self.lines.append(pos)
        self.keys.append(key)
        self.models.append(sys.intern(model) if type(model) is str else None)
        self.stamps.append(timestamp if type(timestamp) is str else None)
        return True

    def add(self, pos: int, figures: tuple) -> None:
        try:
            self.numbers.extend(figures[1:6])
        except OverflowError:
            self.broken = True  # (what was added is never read)
            return
        self.lines.append(pos)
        self.keys.append(figures[0])
        self.models.append(figures[6])
        self.stamps.append(figures[7])

    def join(self, later: _Figures, shift: int) -> None:
        """Take in the figures of the lines after these (``Settling.join``)."""
        self.lines.extend(array.array("Q", [pos + shift for pos in later.lines]))
        self.numbers.extend(later.numbers)
        self.keys += later.keys
        self.models += later.models
        self.stamps += later.stamps
        self.broken = self.broken or later.broken

    def count(self, chain: bytearray, first: int, after: int, counted: list[int], keys: list) -> None:
        """Count the responses of a segment (the positions from ``first`` to before ``after``
        that ``chain`` marks) as ``claude_items.Responses`` counts a segment's, by column: a
        response split over lines once, in the place of its first line with its last line's
        figures, and not at all when an older segment counted it (``keys``: those counted so
        far, in order; ``counted``: the figures each is counted by)."""
        lines, known = self.lines, self.keys
        lo, hi = bisect.bisect_left(lines, first), bisect.bisect_left(lines, after)
        found = list(itertools.compress(range(lo, hi), _picked(chain, lines[lo:hi])))
        if not found:
            return
        named = _picked(known, found)
        if not all(named):  # a response without an id: its line's
            named = [key or str(lines[n]) for key, n in zip(named, found)]
        last = dict(zip(named, found))  # (in the order each key came first, with the last line's figures)
        seen = self.seen
        new = list(last) if seen.isdisjoint(last) else [key for key in last if key not in seen]
        seen.update(new)
        keys += new
        counted += map(last.__getitem__, new)

    def usages(self, counted: list[int]) -> Usages | None:
        """The responses ``counted`` (``count``), as older usages; None when one of their counts
        is past 63 bits (no number ``Usages`` holds: the chain reads every line). Gathered a
        column at a time (a strided view of each count, read at the positions counted): a
        long session counts tens of thousands of responses, and a slice each took a tenth of
        a second at 500 MB."""
        numbers = memoryview(self.numbers)
        picked = array.array("q", bytes(40 * len(counted)))
        try:
            for column in range(5):
                picked[column::5] = array.array("q", _picked(numbers[column::5], counted))
        except OverflowError:
            return None
        positions = [self.lines[n] + 1 for n in counted]
        return Usages.older_of(array.array("q", positions), picked, _picked(self.models, counted),
                               _picked(self.stamps, counted))


class _Uuids:
    """Each uuid's newest line (its position), a quarter of the room a dict of every line's
    took: the lines read last in a dict by their uuid's text (``recent``), the older ones
    (``put_away``) in chunks of their 16 bytes, in the order the dict held them, beside an
    array of their positions, a chunk each time the dict fills. A line names its parent among
    the lines just before it nearly always; an older one is looked for in the chunks, newest
    first, by a scan of their bytes (``bytes.find``): unsorted, a chunk costs a quarter of
    the time a sorted one did to make, and the lines that name an older one are few. A uuid is
    made its bytes only when it is put away or looked for there: once a line, not twice."""

    WINDOW = 8192  # uuids in the dict
    SEARCHES = 4096  # lines looked for in the chunks before the caller reads every line instead
    SCANNED = 1 << 28  # bytes of chunks scanned for them before it does (a tenth of a second or so)

    def __init__(self) -> None:
        self.recent: dict[str, int] = {}
        self.chunks: list[tuple[bytes, array.array]] = []  # (16 bytes a uuid, big-endian; the positions)
        self.others: dict[Any, int] = {}  # keys that are no 128-bit number (not canonical uuids)
        self.searched = 0
        self.scanned = 0

    @property
    def spent(self) -> bool:
        """Whether lines named older ones more often than this looks for them."""
        return self.searched > self.SEARCHES or self.scanned > self.SCANNED

    def get(self, text: str) -> int:
        found = self.recent.get(text, -1)
        return found if found >= 0 else self.older(text)

    def older(self, uuid: Any, counted: bool = True) -> int:
        """The position of ``uuid`` (its text, or ``uuid_key``'s key) put away, else -1; a
        search ``counted`` towards ``spent``."""
        key = uuid_key(uuid) if type(uuid) is str else uuid
        if type(key) is not int:
            return self.others.get(key, -1)
        self.searched += counted
        if self.spent:
            return -1  # too many lines named older ones: the caller reads every line (``spent``)
        wanted = key.to_bytes(16, "big")
        for numbers, positions in reversed(self.chunks):
            self.scanned += counted * len(numbers)
            at = numbers.find(wanted)
            while at >= 0 and at & 15:  # (found across two uuids' bytes)
                at = numbers.find(wanted, at + 1)
            if at >= 0:
                return positions[at >> 4]
        return -1

    def join(self, later: _Uuids, shift: int) -> None:
        """Take in the uuids of the lines after these (``Settling.join``), the newer."""
        if self.recent:
            self.put_away()
        self.chunks += [(numbers, array.array("Q", [pos + shift for pos in positions]))
                        for numbers, positions in later.chunks]
        self.recent = {uuid: pos + shift for uuid, pos in later.recent.items()}
        self.others.update((key, pos + shift) for key, pos in later.others.items())
        self.searched += later.searched
        self.scanned += later.scanned

    def put_away(self) -> None:
        """Move the dict's uuids to a chunk (the others, not canonical uuids, to ``others``)."""
        texts = list(self.recent)
        positions = array.array("Q", self.recent.values())
        self.recent = {}
        numbers = _numbers(texts)
        if numbers is None:  # a uuid that is not canonical among them: one at a time
            kept, numbers = array.array("Q"), bytearray()
            for text, pos in zip(texts, positions):
                key = uuid_key(text)
                if type(key) is int:
                    numbers += key.to_bytes(16, "big")
                    kept.append(pos)
                else:
                    self.others[key] = pos
            numbers, positions = bytes(numbers), kept
        self.chunks.append((numbers, positions))


def _picked(values: Sequence, at: Sequence[int]) -> list:
    """``[values[n] for n in at]``, looked up in one call (``itemgetter``: a long session's
    responses are tens of thousands, and a call each cost twice the time)."""
    if len(at) < 2:  # (``itemgetter`` of one gives the value, not a tuple of it)
        return [values[n] for n in at]
    return list(operator.itemgetter(*at)(values))


def _numbers(texts: list[str]) -> bytes | None:
    """``uuid_key``'s numbers of ``texts``, 16 big-endian bytes each, worked out for all of
    them at once; None unless every one is a canonical uuid."""
    if not texts or set(map(len, texts)) != {36}:
        return None
    joined = "".join(texts)
    dashes = "-" * len(texts)
    if not joined[8::36] == joined[13::36] == joined[18::36] == joined[23::36] == dashes:
        return None
    digits = joined.replace("-", "")
    try:
        value = bytes.fromhex(digits)
    except ValueError:
        return None
    # (``uuid_key``'s test: fromhex also takes upper case, and passes over white space)
    if len(value) != 16 * len(texts) or any(letter in digits for letter in "ABCDEF"):
        return None
    return value
