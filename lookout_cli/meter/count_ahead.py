"""Count the end of a large transcript while it is being read (``measure --jobs N``).

With ``--jobs`` the worker processes count the texts the view hands them, but the view comes
after the whole file is read and its chain worked out: on a 100 MB session a quarter of the
run passed on one core before a worker had anything to count. So when the input is a large
regular file in a format that can say which texts a line holds on its own
(``Adapter.counted_texts``), the workers are started before the read and given the file's
last quarter: each reads the lines that start in its span, counts their texts and sends
back the counts under the keys the counter keeps counts by (the block cache's, else
``tokens.tokenizer.memo_key``), which ``CachedCounter.learn`` takes in; the view's batches then leave
those texts out. The end of the file, not its start: the lines the chain
shows are the last ones (after the last compaction), and the view reaches them last, when
their counts are in. A compacted session's lines before its last boundary are not counted
ahead (``Adapter.shown_from``); a shown part under a quarter of MIN_BYTES is counted by one
forked process (``core.forked``: from the lite table when its texts are a few hundred
kilobytes, else with the encoding loaded there), so that this one, busy reading the lines
before it, loads none; unless those lines are read in two processes (``options.Run._settle``):
this one then reads less of them and counts the end while it waits for the other (``Idle``),
not a third process sharing the two cores. A text counted ahead that the view does not show
costs only its time; the counts are keyed by content, so a file that changes meanwhile gives
no wrong count.
"""

from __future__ import annotations

import io
import os
import stat
import sys
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from lookout_cli.core import forked
from lookout_cli.tokens import cache as token_cache
from lookout_cli.tokens.tokenizer import count, count_left, memo_key

MIN_BYTES = 16 << 20  # smaller inputs: the workers are forked at the view's first batch as before
SHARE = 4  # the last 1/SHARE of the file is counted ahead
SNIFF_BYTES = 1 << 18  # read from the start to tell the format
MAX_LINE = 64 << 20  # a line running past its span further than this is left to the view

_ADAPTER: Any = None  # the format's adapter in the workers: set before the fork


def line_block(fd: int, lo: int, hi: int) -> bytes:
    """The lines of the file open as ``fd`` that start at an offset in [lo, hi), whole: the
    last one is read past ``hi`` to its end, or left out if that is more than MAX_LINE on."""
    data = os.pread(fd, hi - lo, lo)
    if lo > 0 and os.pread(fd, 1, lo - 1) != b"\n":  # a line running into the span: not ours
        cut = data.find(b"\n")
        data = b"" if cut < 0 else data[cut + 1:]
    if not data or data.endswith(b"\n"):
        return data
    parts, at = [data], hi
    while at - hi < MAX_LINE:
        more = os.pread(fd, min(1 << 16, MAX_LINE - (at - hi)), at)
        cut = more.find(b"\n")
        if cut >= 0 or not more:
            parts.append(more if cut < 0 else more[:cut + 1])
            return b"".join(parts)
        parts.append(more)
        at += len(more)
    return data.rpartition(b"\n")[0]  # the long line is left out


def span_texts(span: tuple[int, int, int, str | None]) -> Iterator[tuple[object, str]]:
    """(key, text) of each distinct text of the lines starting in the span; the key is the
    block cache's for the encoding named last, else ``tokens.tokenizer.memo_key``."""
    fd, lo, hi, cached = span
    key_of = (lambda text: token_cache.block_key(cached, text)) if cached else memo_key
    seen: set[object] = set()
    for line in io.BytesIO(line_block(fd, lo, hi)).readlines():  # (line ends found by memchr)
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        for text in _ADAPTER.counted_texts(obj):
            if text:
                key = key_of(text)
                if key not in seen:
                    seen.add(key)
                    yield key, text


def count_span(span: tuple[int, int, int, str | None]) -> list[tuple[object, int]]:
    """In a pool's worker: (key, count) of each distinct text of the span (``span_texts``),
    counted as they are read by the count function set before the fork."""
    length = token_cache._LENGTH
    return [(key, length(text)) for key, text in span_texts(span)]


def start(file: str | None, format_name: str | None, encoding: str, jobs: int, cached: bool,
          split_from: int = 0) -> Ahead | None:
    """``Ahead.begin`` on FILE (None: standard input)."""
    try:
        fd = os.open(file, os.O_RDONLY) if file is not None else sys.stdin.fileno()
    except (OSError, AttributeError, ValueError):
        return None
    try:
        return Ahead.begin(fd, format_name, encoding, jobs, cached, split_from)
    finally:
        if file is not None:  # the workers were forked with their own copy of it
            os.close(fd)


class Ahead:
    """Counts of the input's last quarter, being made by ``workers`` (or, of a compacted
    session's short end, by one forked process: no workers): the counter adopts the workers
    and learns the counts before the view's batches reach the lines they come from."""

    def __init__(self, workers: token_cache.Workers | None, pending, start: int, cached: bool,
                 encoding: str) -> None:
        self.workers = workers
        self.pending = pending  # (``ready()`` and ``get()``: a pool's result, ``forked.Forked`` or ``Idle``)
        self.start = start  # the offset from which lines were counted ahead
        self.cached = cached  # keyed for the block cache (else by memo key)
        self.encoding = encoding

    @classmethod
    def begin(cls, fd: int, format_name: str | None, encoding: str, jobs: int,
              cached: bool = False, split_from: int = 0) -> Ahead | None:
        """Start counting the end of the input open as ``fd`` (None when it is not a large
        regular file in a format that tells its texts, or there is no fork); ``cached``: keyed
        for a counter with the block cache. A compacted session's short end whose lines before
        it, ``split_from`` bytes or more, are read in two processes (``options.Run._settle``) is
        counted in this one while it waits for the other (``Idle``): not by a third process
        sharing the two cores."""
        global _ADAPTER
        from lookout_cli.core.jsonl import Record
        from lookout_cli.formats import Adapter, detect, load_adapter

        try:
            info = os.fstat(fd)
            first = os.lseek(fd, 0, os.SEEK_CUR)
        except OSError:
            return None
        if jobs < 2 or not stat.S_ISREG(info.st_mode) or info.st_size - first < MIN_BYTES:
            return None
        if format_name:
            adapter = load_adapter(format_name)
        else:
            head = os.pread(fd, SNIFF_BYTES, first).split(b"\n")[:-1]
            adapter = detect([Record(n + 1, raw) for n, raw in enumerate(head)])
        if adapter is None or type(adapter).counted_texts is Adapter.counted_texts:
            return None
        # what is shown of a compacted session starts at its last boundary: what comes before
        # is not counted, and when what comes after is small, the view counts it on its own
        try:
            shown = adapter.shown_from(fd, first, info.st_size)
        except OSError:
            shown = 0
        start = max(info.st_size - (info.st_size - first) // SHARE, shown)
        _ADAPTER = adapter
        if info.st_size - start < MIN_BYTES // SHARE:
            # a small end after a long read: one process loads the encoding and counts it while
            # this one reads the lines before it (and loads no encoding of its own)
            if not forked.available():
                return None
            if split_from and shown - first >= split_from:
                span = (os.dup(fd), start, info.st_size, encoding if cached else None)
                return cls(None, Idle(span, encoding), start, cached, encoding)
            span = (fd, start, info.st_size, encoding if cached else None)
            return cls(None, forked.Forked(_count_apart, span, encoding), start, cached, encoding)
        workers = token_cache.Workers(encoding, jobs)
        if not workers.start():
            return None
        step = -(-(info.st_size - start) // (2 * jobs))  # two spans a worker
        spans = [(fd, lo, min(lo + step, info.st_size), encoding if cached else None)
                 for lo in range(start, info.st_size, step)]
        return cls(workers, workers.pool.map_async(count_span, spans, chunksize=1), start, cached, encoding)

    def due(self, records: Iterable[Any]) -> bool:
        """Whether the counts are in, or a batch holds a line from where they were counted."""
        if self.pending.ready():
            return True
        for record in records:
            span = getattr(record, "span", None)
            if span is not None and span()[0] >= self.start:
                return True
        return False

    def counts(self) -> dict[object, int]:
        """The counts made ahead (waiting for them); none when a worker failed."""
        try:
            return {key: n for part in self.pending.get() for key, n in part}
        except Exception:  # the view counts them instead
            return {}

    def idle_bytes(self) -> int:
        """Bytes of lines this process counts while it waits (``Idle``), else 0."""
        return self.pending.size if type(self.pending) is Idle else 0

    def work(self) -> None:
        """This process waits: count what ``Idle`` holds now."""
        if type(self.pending) is Idle:
            self.pending.result()

    def close(self) -> None:
        """Stop the workers (what they count ahead is not needed)."""
        if self.workers is not None:
            self.workers.close(kill=True)
        else:
            self.pending.cancel()


class Idle:
    """A short end counted in this process when it would otherwise wait (``Ahead.work``), or
    when its counts are asked for: ``forked.Forked``'s ``ready``, ``get`` and ``cancel``."""

    def __init__(self, span: tuple[int, int, int, str | None], encoding: str) -> None:
        self.span, self.encoding, self.counts = span, encoding, None
        self.size = span[2] - span[1]

    def ready(self) -> bool:
        return self.counts is not None

    def result(self) -> list[list[tuple[object, int]]]:
        if self.counts is None:
            try:
                self.counts = _count_apart(self.span, self.encoding)
            except Exception:  # noqa: BLE001 - as a failed child: the view counts them itself
                self.counts = []
            finally:
                self.cancel()
        return self.counts

    get = result

    def cancel(self) -> None:
        if self.span[0] >= 0:
            os.close(self.span[0])
            self.span = (-1, *self.span[1:])


def _count_apart(span: tuple[int, int, int, str | None], encoding: str) -> list[list[tuple[object, int]]]:
    """In the forked process of ``Ahead.begin``: the counts of the span's texts (as the pool's
    result: a list of parts). The span is short (under MIN_BYTES // SHARE): its texts are read
    first, so that a few hundred kilobytes of them are counted without loading the encoding
    (``tokenizer.count_left``)."""
    texts = dict(span_texts(span))
    count_left(sum(map(len, texts.values())), encoding)
    return [[(key, count(text, encoding)) for key, text in texts.items()]]
