"""What a lean ``measure`` learned of each line of a transcript file, kept for the next run.

Hooks and status lines measure the same session file again and again: after the agent
appended a turn, after ``compact -i`` rewrote it (the lines it left alone keep their bytes).
For one file path the memo keeps, for each line, where it starts, a digest of its bytes and
the adapter's node; for each model-visible line, the items it gave, counted and cut down
(``item_counts.shrink``), with the encoding they were counted in. The next run over the path:

- when the file only grew (same device and inode, and the guard hashes of ``meter.state``
  match, as for the incremental state), takes the lines measured before as they were, without
  reading them, and reads on from where they end;
- otherwise (rewritten, truncated, replaced) reads every line and looks its digest up: a known
  line is not parsed again.

A known model-visible line gives its items again without being parsed or counted; what an
item takes from the lines around it is worked out anew by the adapter (its message and turn
numbers, a result's tool name). A line whose items depend on the next line is not kept.

A session compacts again and again, and what the lines before its last compaction give the
view does not change as it grows: the memo keeps that too (``Adapter.settled``: for Claude
Code, the older segments' usages and compactions), and a run that resumes the file leaves
those lines' nodes unread and hands the adapter the value instead (``settled``); when the
adapter finds it does not hold (``unsettle``), it reads those lines from the file. Such a line
may have neither node nor digest in the memo (a cold load kept what it gives, not the line:
``Adapter.settling``).

One file per path in the state folder, made of sections (``fsutil.section_writer``: ``marshal``
values headed by their length and seal). A run that resumed the file appends a section with only what
it added: the new lines (where they start, their digests and nodes), the settled value when
it moved to a later compaction (its parts one after the other, ended by None), and the items
built anew, by line (a prompt's run writes kilobytes, not the whole memo again). Any other run, or one
that finds MAX_SECTIONS sections or more appended than the first holds, writes the file anew
as one section, replaced atomically. Sections must follow one another (each starts at the
line the one before ends at, with the same key and counting); reading stops at the first
that does not, or that is torn or damaged. Only adapters that keep their items in it
(``Adapter.remembers_items``) use it.

A run reads the file in place (mapped when large: ``fsutil.sealed_sections``): the tables are
views of its bytes, and each part of the settled value is loaded when first read, a table as
a view too (``_Values``): a prompt's run over a long session reads what the older segments add
up to, not the ids and times of their tens of thousands of responses.
"""

from __future__ import annotations

import array
import itertools
import marshal
import os
from collections.abc import Callable, Iterator

from lookout_cli import __version__
from lookout_cli.core import hashing
from lookout_cli.core.dataclass import replace
from lookout_cli.core.fsutil import (
    Sections,
    raw_values,
    sealed_sections,
    section_writer,
)
from lookout_cli.core.jsonl import LeanRecord, LineIndex, Lines
from lookout_cli.formats.view import pack
from lookout_cli.meter import state as measure_state
from lookout_cli.tokens import tokenizer

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from typing import IO, Any

VERSION = 14  # the file's layout, what a kept node and a packed item look like (14: the older ids' marks)
DIGEST_BYTES = 16
CHUNK = 1024  # nodes or lines of items per marshal value (what is packed at once: memory while writing)
FEW_BYTES = 256 << 10  # appended since the last run: counted without loading the tokenizer (tokens/lite.py)
MAX_SECTIONS = 64  # from this many, the memo is written anew as one (what a resumed run reads stays few values)
_END = marshal.dumps(None)  # ends the nodes and the items of a section
_NO_DIGEST = bytes(DIGEST_BYTES)


def digest(raw: bytes) -> bytes:
    return hashing.sha256(raw).digest()[:DIGEST_BYTES]


def memo_path(path: str | os.PathLike, key: str) -> str:
    return os.path.splitext(measure_state.state_path(path, key))[0] + ".lines"


def _bytes_in(raw: memoryview) -> memoryview | None:
    """The bytes of a ``bytes`` value where ``marshal`` wrote them (its type, a 4-byte length,
    then them), not copied: a long session's tables are megabytes. None: another value."""
    if raw and raw[0] & 0x7F == ord("s") and int.from_bytes(raw[1:5], "little") == len(raw) - 5:
        return raw[5:]
    return None


def _table(raw: memoryview) -> memoryview:
    found = _bytes_in(raw)
    if found is None:
        raise ValueError("not a table")
    return found


class _Values:
    """The values of a settled value (``Adapter.settled``), each loaded when first read (a
    prompt's run leaves the older responses' ids and times unread), a ``bytes`` one as a view
    of the memo's (its columns: not copied)."""

    __slots__ = ("_loaded", "_raw")

    def __init__(self, raw: list[memoryview]) -> None:
        self._raw = raw
        self._loaded: dict[int, Any] = {}

    def __getitem__(self, at: int) -> Any:
        if at not in self._loaded:
            found = _bytes_in(self._raw[at])
            self._loaded[at] = found if found is not None else marshal.loads(self._raw[at])
        return self._loaded[at]

    def __len__(self) -> int:
        return len(self._raw)


class _Part:
    """One section of the memo read: its header, tables (their bytes in the file's), the settled
    value if it has one (not loaded), and its values past them (nodes, then items, each a list
    of chunks ended by None), loaded only when asked for."""

    def __init__(self, header: dict, starts: memoryview, digests: memoryview, rest: Iterator[memoryview]) -> None:
        self.header, self.starts, self.digests, self.rest = header, starts, digests, rest
        self.settled = list(iter(rest.__next__, _END)) if header.get("settled") is not None else None
        self.nodes: list | None = None
        self._past_nodes = False  # ``rest`` is at the items

    def _list(self, load: bool = True) -> list:
        out: list = []
        for raw in self.rest:
            if raw == _END:
                return out
            if load:
                out += marshal.loads(raw)
        raise ValueError("a list of chunks not ended")

    def read_nodes(self) -> list:
        if self.nodes is None:
            self.nodes, self._past_nodes = self._list(), True
        return self.nodes

    def nodes_from(self, at: int) -> list:
        """The nodes of its lines from line ``at`` on (the chunks wholly before it not loaded)."""
        first, end = self.header["first"], self.header["end"]
        out: list = []
        for start, raw in zip(range(first, end, CHUNK), self.rest):  # as ``LineMemo.save`` cuts them
            if min(start + CHUNK, end) > at:
                out += marshal.loads(raw)[max(0, at - start):]
        self._past_nodes = True
        if next(self.rest, None) != _END:
            raise ValueError("a list of chunks not ended")
        return out

    def items(self) -> list:
        """(line, packed items) pairs, past the nodes (not loaded when not read yet)."""
        if not self._past_nodes:
            self._list(load=False)
            self._past_nodes = True
        return self._list()


class LineMemo:
    """The memo of one file path. ``count_key(model)`` says how this run counts a model's
    texts (items counted otherwise before are built again)."""

    def __init__(self, path: str, format_name: str | None, count_key: Callable[[str | None], tuple]) -> None:
        self.path = path
        self.key = f"lines-{VERSION}-{__version__}-{format_name or ''}"
        self.count_key = count_key
        # this run's lines' digests, one after the other, from line ``_first`` on (the lines
        # before it, when the file grew, are known by their place)
        self.digests = bytearray()
        self._first = 0
        self._resumed = False
        self._resumed_as_counted = False  # resumed, and the memo's items are counted as this run counts
        self._old_digests: list[memoryview] = []  # the digests of the lines before ``_first``
        self.sniffed: int | None = None  # the line by which the format was known (0: given)
        # visible lines whose items to keep: (line, first item, end) triples of the view's items,
        # and items taken back from the memo (an array: a tuple and a dict entry per line was
        # a tenth of a long session's measure)
        self._spans = array.array("q")
        self._known: dict[int, list[tuple]] = {}
        self._count: tuple | None = None
        self._items: dict[Any, list[tuple]] | None = None  # line (resumed) or digest -> packed items
        self._nodes: dict[bytes, Any] | None = None  # digest -> kept node, for a rewritten file
        # resumed: what the lines before ``_settled_at`` give the adapter (``Adapter.settled``),
        # their nodes left unread
        self.settled: Any = None
        self._settled_at = 0
        read = sealed_sections(memo_path(self.path, self.key))
        self._parts: list[_Part] = []
        try:
            self._read_headers(read.payloads if read is not None else [])
        except (ValueError, EOFError, TypeError, KeyError, IndexError, StopIteration):
            pass
        self._old = self._parts[-1].header if self._parts else None  # the newest state
        # where this run may append its section: after the sections read, when all of them
        # were whole and follow one another, they are not too many, and the appended ones do
        # not outweigh the first
        self._after: Sections | None = None
        if read is not None and self._parts and len(self._parts) == len(read.payloads) < MAX_SECTIONS \
                and read.end == read.size and 2 * read.payloads[0].nbytes >= read.end:
            self._after = replace(read, payloads=[])  # (the payloads are let go with the parts)

    def _read_headers(self, payloads: list[memoryview]) -> None:
        """The sections that follow one another, up to the first that does not."""
        lines = 0
        base = None
        for payload in payloads:
            rest = raw_values(payload)
            header = marshal.loads(next(rest))
            if type(header) is not dict or header.get("key") != self.key or header["first"] != lines:
                return
            if base is not None and any(header[k] != base[k] for k in ("format", "sniffed", "count")):
                return
            starts, digests = _table(next(rest)), _table(next(rest))
            new = header["end"] - lines
            if new < 0 or len(starts) != 8 * (new + (base is None)) or len(digests) != DIGEST_BYTES * new:
                return
            self._parts.append(_Part(header, starts, digests, rest))
            base = base or header
            lines = header["end"]

    @property
    def known(self) -> bool:
        """Whether this lookout measured the path before (its lines may need no counting)."""
        return self._old is not None

    @property
    def resumed(self) -> bool:
        """Whether the lines measured before were taken from the memo (the file only grew)."""
        return self._resumed

    @property
    def format(self) -> str | None:
        """The format the lines were read as, when it was known from them (or given)."""
        return self._old["format"] if self._old and self._old["sniffed"] is not None else None

    # --- reading ----------------------------------------------------------------------------
    def resume(self, handle: IO[bytes], adapter) -> Lines | None:
        """When ``handle`` (a regular file at its start) is the file measured before, grown or
        unchanged: the records of the lines measured then, with their nodes, and the index to
        read on with (``handle`` is left where those lines end). Else None."""
        old = self._old
        try:
            state = measure_state.State(**old["state"])
            plan = measure_state.plan_for(state, handle)
        except (OSError, TypeError, KeyError):
            return None
        count = old["end"]
        starts = array.array("Q")
        for part in self._parts:
            starts.frombytes(part.starts)
        if plan.kind not in (measure_state.APPEND, measure_state.UNCHANGED) or old["sniffed"] > count \
                or len(starts) != count + 1 or starts[-1] != state.offset:
            return None
        index = LineIndex(handle.fileno(), starts=starts)
        try:
            # what the lines before the newest settled line give, instead of their nodes
            holder = next((part for part in reversed(self._parts) if part.settled is not None), None)
            at = holder.header["settled"] if holder is not None else 0
            if not 0 < at < count:
                at, holder = 0, None
            nodes = list(itertools.chain.from_iterable(part.nodes_from(at) for part in self._parts))
            if len(nodes) != count - at:
                raise ValueError("not a node a line")
            # the lines before ``at`` are made only when asked for (``Lines``)
            records = list(map(LeanRecord, range(at + 1, count + 1), itertools.repeat(index), itertools.repeat(None)))
            revive = adapter.revive
            for record, kept in zip(records, nodes):
                if kept is not None:
                    record.node = revive(kept)
            self.settled = _Values(holder.settled) if holder is not None else None
            self._settled_at = at
            items = {pos: packed for part in self._parts for pos, packed in part.items()}
        except (ValueError, EOFError, TypeError, IndexError, KeyError):  # not what this lookout keeps
            self._old, self._parts, self.settled = None, [], None
            return None
        self._items = items
        self._first, self._resumed = count, True
        self._resumed_as_counted = old["format"] == adapter.name
        self._old_digests = [part.digests for part in self._parts]  # (joined only to write them anew)
        self.sniffed = old["sniffed"]
        self._nodes = {}  # the lines after them are new: not looked up
        handle.seek(state.offset)
        if os.fstat(handle.fileno()).st_size - state.offset <= FEW_BYTES:
            tokenizer.count_few()  # what is left to count is what was appended: a prompt's worth
        return Lines(index, at, records)

    def unsettle(self) -> None:
        """``settled`` does not hold: the adapter reads the lines it stood for from the file,
        and this run's memo says what they give again."""
        self.settled, self._settled_at = None, 0

    def note(self, record: LeanRecord) -> None:
        """Take the digest of a line as it is read (before its bytes are let go)."""
        self.digests += digest(record.raw)

    def note_settled(self, count: int = 1) -> None:
        """A line (or ``count``) before the shown one, of which the adapter keeps what it gives,
        not a node (``Adapter.settling``): nothing to look up by its bytes, so no digest (zeros)."""
        self.digests += _NO_DIGEST * count

    def node(self, adapter) -> Any:
        """The node of the line noted last, when a line with its bytes was measured before."""
        if self._nodes is None:
            self._nodes = {}
            try:
                for part in self._parts:
                    data = bytes(part.digests)
                    keys = (data[n:n + DIGEST_BYTES] for n in range(0, len(data), DIGEST_BYTES))
                    self._nodes.update((key, kept) for key, kept in zip(keys, part.read_nodes()) if kept is not None)
                self._nodes.pop(_NO_DIGEST, None)
            except (ValueError, EOFError, TypeError):
                self._nodes, self._parts = {}, []
        if not self._nodes:
            return None  # (a file measured for the first time)
        kept = self._nodes.pop(bytes(self.digests[-DIGEST_BYTES:]), None)  # let go of it (a repeated line is parsed)
        if kept is None:
            return None
        try:
            return adapter.revive(kept)
        except (TypeError, IndexError, KeyError):
            return None

    def read(self) -> None:
        """Every line is read: let go of the nodes kept for looking lines up."""
        self._nodes = {}

    # --- building the view ------------------------------------------------------------------
    def begin(self, model: str | None) -> None:
        """The view's model is known: items counted as this run counts them can be reused."""
        self._count = self.count_key(model)
        if self._items is None:  # not resumed: the items of lines with the same bytes
            self._items = {}
            try:
                digests = b"".join(part.digests for part in self._parts)
                for part in self._parts:
                    for pos, packed in part.items():
                        self._items[digests[pos * DIGEST_BYTES:(pos + 1) * DIGEST_BYTES]] = packed
                self._items.pop(_NO_DIGEST, None)  # (a line read into a settled value: its bytes unknown)
            except (ValueError, EOFError, TypeError):
                self._items = {}
        self._parts = []  # read: let go of the sections
        if not (self._old and tuple(self._old["count"]) == self._count):
            self._items = {}
            self._resumed_as_counted = False  # the items it holds are counted otherwise: written anew

    def items(self, pos: int) -> list[tuple] | None:
        """The packed items of line ``pos`` (0-based) if a line with its bytes gave them before."""
        if self._resumed:
            return self._items.get(pos)
        digest = self._digest(pos)
        return self._items.get(digest) if digest != _NO_DIGEST else None

    def _digest(self, pos: int) -> bytes:
        at = (pos - self._first) * DIGEST_BYTES
        return bytes(self.digests[at:at + DIGEST_BYTES])

    def keep(self, pos: int, items: list[tuple] | tuple[int, int]) -> None:
        """Line ``pos`` is model-visible and its items depend on no other line: they are
        ``items`` (packed) or the view's items from ``items[0]`` to ``items[1]``."""
        if type(items) is tuple:
            self._spans.extend((pos, *items))
        else:
            self._known[pos] = items

    # --- saving -----------------------------------------------------------------------------
    def save(self, transcript) -> None:
        """Remember the transcript's lines, once its view is built and counted, and let go of
        each line's node as it is written (nothing reads them after the view): the lines and
        items this run added, appended, when it resumed the memo; else all of them, anew. Best
        effort: a memo that cannot be written costs only time."""
        records = transcript.lines
        first = self._first
        if not records or len(self.digests) != (len(records) - first) * DIGEST_BYTES or self._count is None:
            return
        index = records.spans
        complete = len(records)
        if os.pread(index.fd, 1, index.starts[complete] - 1) != b"\n":
            complete -= 1  # the last line may still be being written: read it again next time
        append = self._resumed_as_counted and self._after is not None
        if not append:
            first = 0
        items = transcript.view().items
        plain = transcript.adapter.plain
        spans = self._spans

        def kept() -> Iterator[tuple]:  # (line, packed items) of each kept line, made as written
            for n in range(0, len(spans), 3):
                if spans[n] < complete:  # a line still being written may end otherwise
                    yield spans[n], [pack(i) for i in items[spans[n + 1]:spans[n + 2]]]
            if not append:  # else the memo holds them already
                for pos, known in self._known.items():
                    if pos < complete:
                        yield pos, known

        built = any(spans[n] < complete for n in range(0, len(spans), 3))  # items counted by this run
        if self._resumed_as_counted and complete == self._first and not built:
            return  # nothing new to remember
        lines = kept()
        chunk = list(itertools.islice(lines, CHUNK))
        # an appended section need not say again what an earlier one holds
        settled = transcript.adapter.settled(transcript, self._settled_at if append else 0)
        if settled is not None and not 0 < settled[0] < complete:
            settled = None
        try:
            state = measure_state.state_of(transcript.spool, self.path, self.key, index.starts[complete])
            header = {"key": self.key, "format": transcript.adapter.name, "sniffed": self.sniffed,
                      "state": state.__dict__, "count": self._count, "first": first, "end": complete,
                      "settled": settled[0] if settled is not None else None}
            new = memoryview(self.digests)[:(complete - self._first) * DIGEST_BYTES]
            with section_writer(memo_path(self.path, self.key), self._after if append else None) as put:
                put(header)
                put(memoryview(index.starts)[first + append:complete + 1])  # tables: written as they are
                put(new if first == self._first else b"".join([*self._old_digests, new]))
                if settled is not None:  # its values one by one (what marshal makes of each is written at once)
                    for value in settled[1]:
                        put(value)
                    put(None)
                for at in range(first, complete, CHUNK):
                    stop = min(at + CHUNK, complete)
                    if stop <= records.head:  # lines left unmade have no node: not made for it
                        put([None] * (stop - at))
                        continue
                    chunk_of = records[at:stop]
                    put([plain(r.node) for r in chunk_of])
                    for record in chunk_of:
                        record.node = None
                put(None)
                while chunk:
                    put(chunk)
                    chunk = list(itertools.islice(lines, CHUNK))
                put(None)
        except (OSError, ValueError):
            pass
