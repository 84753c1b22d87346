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

One file per path in the state folder: ``marshal`` data headed by its sha256
(``fsutil.sealed_writer``), replaced atomically, so concurrent runs leave one of their memos
and a torn or damaged one is ignored. Only adapters that keep their items in it
(``Adapter.remembers_items``) use it.
"""

from __future__ import annotations

import array
import hashlib
import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from lookout_cli import __version__
from lookout_cli.core.fsutil import sealed_values, sealed_writer
from lookout_cli.core.jsonl import LeanRecord, LineIndex
from lookout_cli.formats.view import pack
from lookout_cli.meter import state as measure_state
from lookout_cli.tokens import tokenizer

VERSION = 6  # the file's layout, what a kept node and a packed item look like
DIGEST_BYTES = 16
CHUNK = 1024  # nodes or lines of items per marshal value (what is packed at once: memory while writing)
FEW_BYTES = 256 << 10  # appended since the last run: counted without loading the tokenizer (tokens/lite.py)


def digest(raw: bytes) -> bytes:
    return hashlib.sha256(raw).digest()[:DIGEST_BYTES]


def memo_path(path: str | os.PathLike, key: str) -> Path:
    return measure_state.state_path(path, key).with_suffix(".lines")


class LineMemo:
    """The memo of one file path. ``count_key(model)`` says how this run counts a model's
    texts (items counted otherwise before are built again).

    The file is a header (``marshal``), the nodes in chunks, the items in chunks, each list of
    chunks ended by None, all headed by the sha256 of the rest: written and read a chunk at a
    time, so a memo never needs a second copy of every node in memory."""

    def __init__(self, path: str, format_name: str | None, count_key: Callable[[str | None], tuple]) -> None:
        self.path = path
        self.key = f"lines-{VERSION}-{__version__}-{format_name or ''}"
        self.count_key = count_key
        self.digests = bytearray()  # this run's lines' digests, one after the other
        self.sniffed: int | None = None  # the line by which the format was known (0: given)
        # visible lines whose items to keep: (line, first item, end) triples of the view's items,
        # and items taken back from the memo (an array: a tuple and a dict entry per line was
        # a tenth of a long session's measure)
        self._spans = array.array("q")
        self._known: dict[int, list[tuple]] = {}
        self._count: tuple | None = None
        self._items: dict[bytes, list[tuple]] = {}
        self._nodes: dict[bytes, Any] | None = None  # digest -> kept node, for a rewritten file
        self._stream: Iterator[Any] | None = sealed_values(memo_path(self.path, self.key))  # its next values
        self._past_nodes = False  # the nodes of the memo read were read
        old = self._next()
        self._old = old if type(old) is dict and old.get("key") == self.key else None
        if self._old is not None:  # the two per-line tables follow the header
            self._old["starts"], self._old["digests"] = self._next(), self._next()

    def _next(self) -> Any:
        """The next value of the memo read (None at the end of a list of chunks or on damage)."""
        try:
            return next(self._stream, None) if self._stream is not None else None
        except (ValueError, EOFError, TypeError):
            self._stream = None
            return None

    def _chunks(self):
        """The chunks of the next list in the memo read."""
        while (chunk := self._next()) is not None:
            yield chunk

    @property
    def known(self) -> bool:
        """Whether this lookout measured the path before (its lines may need no counting)."""
        return self._old is not None

    @property
    def format(self) -> str | None:
        """The format the lines were read as, when it was known from them (or given)."""
        return self._old["format"] if self._old and self._old["sniffed"] is not None else None

    # --- reading ----------------------------------------------------------------------------
    def resume(self, handle: IO[bytes], adapter) -> tuple[list[LeanRecord], LineIndex] | None:
        """When ``handle`` (a regular file at its start) is the file measured before, grown or
        unchanged: records for the lines measured then, with their nodes, and the index to read
        on with (``handle`` is left where those lines end). Else None."""
        old = self._old
        try:
            state = measure_state.State(**old["state"])
            plan = measure_state.plan_for(state, handle)
        except (OSError, TypeError, KeyError):
            return None
        starts = array.array("q")
        starts.frombytes(old["starts"])
        count = len(starts) - 1
        if plan.kind not in (measure_state.APPEND, measure_state.UNCHANGED) or old["sniffed"] > count \
                or starts[-1] != state.offset:
            return None
        index = LineIndex(handle.fileno(), starts=starts)
        records: list[LeanRecord] = []
        self._past_nodes = True
        try:
            for chunk in self._chunks():
                for kept in chunk:
                    if len(records) < count:
                        record = LeanRecord(len(records) + 1, index, None)
                        record.node = None if kept is None else adapter.revive(kept)
                        records.append(record)
        except (TypeError, IndexError, KeyError):  # not what this lookout keeps
            self._old, self._stream = None, None
            return None
        self._read_items()
        if len(records) != count:
            return None
        self.digests = bytearray(old.pop("digests")[:count * DIGEST_BYTES])
        self.sniffed = old["sniffed"]
        self._nodes = {}  # the lines after them are new: not looked up
        handle.seek(state.offset)
        if os.fstat(handle.fileno()).st_size - state.offset <= FEW_BYTES:
            tokenizer.count_few()  # what is left to count is what was appended: a prompt's worth
        return records, index

    def note(self, record: LeanRecord) -> None:
        """Take the digest of a line as it is read (before its bytes are let go)."""
        self.digests += digest(record.raw)

    def node(self, adapter) -> Any:
        """The node of the line noted last, when a line with its bytes was measured before."""
        if self._nodes is None:
            data = self._old.pop("digests") if self._old else b""
            keys = (data[n:n + DIGEST_BYTES] for n in range(0, len(data), DIGEST_BYTES))
            self._past_nodes = True
            nodes = [kept for chunk in self._chunks() for kept in chunk]  # to the end of the list
            self._nodes = dict(zip(keys, nodes))
            self._read_items()
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
        if not self._past_nodes:
            self._past_nodes = True
            for _ in self._chunks():  # the nodes were not needed: past them to the items
                pass
        self._read_items()
        if not (self._old and tuple(self._old["count"]) == self._count):
            self._items = {}

    def _read_items(self) -> None:
        """Read the items of the memo (after its nodes) and let go of what was read."""
        if self._stream is not None:
            self._items = {key: packed for chunk in self._chunks() for key, packed in chunk}
            self._stream = None

    def items(self, pos: int) -> list[tuple] | None:
        """The packed items of line ``pos`` (0-based) if a line with its bytes gave them before."""
        return self._items.get(self._digest(pos))

    def _digest(self, pos: int) -> bytes:
        return bytes(self.digests[pos * DIGEST_BYTES:(pos + 1) * DIGEST_BYTES])

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
        each line's node as it is written (nothing reads them after the view). Best effort: a
        memo that cannot be written costs only time."""
        records = transcript.records
        if not records or len(self.digests) != len(records) * DIGEST_BYTES or self._count is None:
            return
        index = records[0]._index
        offset, size = records[-1].span()
        complete = len(records)
        if os.pread(index.fd, 1, offset + size - 1) != b"\n":
            complete -= 1  # the last line may still be being written: read it again next time
        items = transcript.view().items
        plain = transcript.adapter.plain
        spans = self._spans

        def kept() -> Iterator[tuple]:  # (digest, packed items) of each kept line, made as written
            for n in range(0, len(spans), 3):
                yield self._digest(spans[n]), [pack(i) for i in items[spans[n + 1]:spans[n + 2]]]
            for pos, known in self._known.items():
                yield self._digest(pos), known

        try:
            state = measure_state.state_of(transcript.spool, self.path, self.key, index.starts[complete])
            header = {"key": self.key, "format": transcript.adapter.name, "sniffed": self.sniffed,
                      "state": state.__dict__, "count": self._count}
            with sealed_writer(memo_path(self.path, self.key)) as put:
                put(header)
                put(memoryview(index.starts)[:complete + 1])  # tables: written as they are
                put(self.digests)
                for at in range(0, len(records), CHUNK):
                    chunk = records[at:at + CHUNK]
                    put([plain(r.node) for r in chunk])
                    for record in chunk:
                        record.node = None
                put(None)
                lines = kept()
                while chunk := list(itertools.islice(lines, CHUNK)):
                    put(chunk)
                put(None)
        except (OSError, ValueError):
            pass
