"""Read and write JSONL records while keeping every untouched record's original bytes.

A record remembers the exact bytes it was read as (line ending included). It is parsed lazily
with orjson; a record a command edits is re-parsed with the standard library first, because
orjson turns 30-digit integers into floats and refuses lone surrogates, and is then written
compactly the way the agents themselves write JSON (``JSON.stringify`` / serde).

orjson is imported only once a run has read a few megabytes: importing it loads
``dataclasses``, ``inspect``, ``uuid`` and ``json`` (93 M instructions, a quarter of a prompt's
re-measure, which reads some tens of kilobytes). Before that, ``loads`` reads with the standard
library what it reads exactly as orjson would, and hands orjson the rest (``read_as_orjson``).
"""

from __future__ import annotations

import array
import bisect
import contextlib
import io
import itertools
import json
import os
import stat
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence

from lookout_cli.core.dataclass import fields, is_dataclass
from lookout_cli.core.errors import LookoutError, PipeClosed

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from typing import IO, Any

DEFAULT_MAX_RECORD_BYTES = 256 * 1024 * 1024
COPY_BLOCK = 8 << 20  # lines left as they were, read back together up to this many bytes
_UNPARSED = object()


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        # 1e400 is JSON, but a double cannot hold it: written back it would become Infinity,
        # which is not. Treat the line as one lookout cannot read (it passes through as it is).
        raise ValueError(f"the number {text[:20]} is too large for a double")
    return value


# orjson reads JSON nested up to 1,024 levels; the standard library's parser and writer count
# those levels against the interpreter's recursion limit (1,000), so give them room.
DEEPEST = 1024


@contextlib.contextmanager
def _room_for_nesting() -> Iterator[None]:
    limit = sys.getrecursionlimit()
    if limit < 4 * DEEPEST:
        sys.setrecursionlimit(4 * DEEPEST)
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)


def _loads(data: bytes | str) -> Any:
    return json.loads(data, parse_constant=_reject_constant, parse_float=_finite_float)


# The standard library parses 100-200 MB/s, orjson 3-5 times that: its import pays once a run
# has read about this much.
STANDARD_READS = 4 << 20
_standard_left = STANDARD_READS
_orjson: Any = None


def fast_json(size: int = 0) -> Any:
    """orjson, when a run has read ``size`` more bytes of JSON and that makes it pay (or it is
    imported already); else None."""
    global _orjson, _standard_left
    if _orjson is None:
        _standard_left -= size
        if _standard_left >= 0 and "orjson" not in sys.modules:
            return None
        import orjson

        _orjson = orjson
    return _orjson


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """``orjson.loads``: the same value, or the same ``ValueError``, without importing orjson
    until it pays (``read_as_orjson``)."""
    fast = fast_json(len(data))
    if fast is None:
        value = read_as_orjson(data)
        if value is not ORJSON:
            return value
        fast = fast_json(STANDARD_READS + 1)
    return fast.loads(data)


ORJSON = object()  # what ``read_as_orjson`` leaves to orjson


def read_as_orjson(data: bytes | bytearray | memoryview | str) -> Any:
    """What orjson reads ``data`` as, read by the standard library where it reads the same:
    UTF-8, no lone surrogate (orjson refuses one), no NaN, no number past a double, an
    integer past 64 bits a float as orjson makes it; else ``ORJSON``."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    # (an integer hook for every number costs: only where 19 digits may make one past 64 bits)
    decoder = _AS_ORJSON_LONG if _LONG_NUMBER in raw.translate(_DIGITS_AS_ZERO) else _AS_ORJSON
    try:
        value = decoder.decode(raw.decode("utf-8"))
    except (ValueError, RecursionError):  # (UnicodeDecodeError too) orjson says what it is
        return ORJSON
    if (b"\\ud" in raw or b"\\uD" in raw) and _holds_surrogate(value):
        return ORJSON  # (a pair is one character either way; the text "\\ud800" is no escape)
    return value


def _holds_surrogate(value: Any) -> bool:
    """Whether a string in ``value`` (a key too) holds a lone surrogate, which orjson refuses."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    return True
        elif isinstance(item, dict):
            stack += item
            stack += item.values()
        elif isinstance(item, list):
            stack += item
    return False


def _orjson_int(text: str) -> int | float:
    value = int(text)
    return value if -(1 << 63) <= value < 1 << 64 else float(text)


def dumps(obj: Any) -> bytes:
    """Compact JSON of ``obj`` (a dataclass as the object of its fields), to be read back
    (``loads``), not compared: orjson's when it is loaded, else the standard library's, which
    writes some floats otherwise. TypeError for what JSON cannot hold, as orjson (and for NaN,
    which orjson writes as null)."""
    fast = fast_json()
    if fast is not None:
        return fast.dumps(obj)
    try:
        text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_fields_of)
        return text.encode("utf-8")
    except (ValueError, UnicodeEncodeError) as exc:  # NaN; a lone surrogate, which orjson refuses
        raise TypeError(str(exc)) from None


def _fields_of(obj: Any) -> dict:
    if isinstance(obj, type) or not is_dataclass(obj):
        raise TypeError(f"Type is not JSON serializable: {type(obj).__name__}")
    return {f.name: getattr(obj, f.name) for f in fields(obj)}


def loads_to_read(data: bytes | str) -> Any:
    """JSON to read, never to write back: orjson (an integer past 64 bits becomes a float), else
    the standard library for what orjson refuses (NaN, a lone surrogate); ValueError when
    neither reads it."""
    try:
        return loads(data)
    except ValueError:
        return json.loads(data)


# orjson is 3-5x faster than the standard library both ways and reads and writes the same,
# except: it reads an integer past 64 bits as a float, and writes a float under 1e-4 or from
# 1e16 up in its own notation (0.000025, 1e-7; the standard library 2.5e-05, 1e-07). Where
# the text may hold either (19 digits in a row; an exponent or 0.0000 in the output, strings
# included) the standard library does it, so an edited line is the same bytes either way. The
# digits are found by mapping them all to 0 (bytes.translate and `in` run at memory speed; a
# regular expression took longer than the standard library's parse).
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_LONG_NUMBER = b"0" * 19
_AS_ORJSON = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)
_AS_ORJSON_LONG = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float, parse_int=_orjson_int)


def _own_notation(data: bytes) -> bool:
    zeros = data.translate(_DIGITS_AS_ZERO)
    return b"0e-0" in zeros or b"0e+0" in zeros or b"0.0000" in data


def loads_exact(data: bytes | str) -> Any:
    """Parse JSON exactly: big integers stay integers, lone surrogates survive; numbers too
    large for a double and the non-JSON NaN/Infinity are refused (ValueError). Nesting as deep
    as orjson reads is fine."""
    # orjson once a run has loaded it (``fast_json``); before, the standard library's reading is
    # the exact one, and ``loads`` would only read it that way a second time
    fast = fast_json(len(data)) if isinstance(data, bytes) else None
    if fast is not None and _LONG_NUMBER not in data.translate(_DIGITS_AS_ZERO):
        try:
            return fast.loads(data)
        except ValueError:
            pass  # a lone surrogate, or not JSON: the standard library says which
    with _room_for_nesting():
        return _loads(data)


def dumps_compact(obj: Any) -> bytes:
    """Serialise like the agents do: no spaces, non-ASCII unescaped. A lone surrogate (only
    possible inside a string) is written as its ``\\udXXX`` escape, never as invalid UTF-8."""
    data = _by_orjson(obj)
    return data if data is not None else _by_json(obj).encode("utf-8", "backslashreplace")


def dumps_text(obj: Any) -> str:
    """``json.dumps(obj, ensure_ascii=False, separators=(",", ":"))``, the text a view counts
    for a value: made by orjson where it writes the same."""
    data = _by_orjson(obj)
    return data.decode() if data is not None else _by_json(obj)


def _by_orjson(obj: Any) -> bytes | None:
    """orjson's bytes for ``obj`` when they are the standard library's compact text (and orjson
    is loaded), else None."""
    fast = fast_json()
    if fast is None:
        return None
    try:
        data = fast.dumps(obj)
    except TypeError:  # orjson.JSONEncodeError: a lone surrogate, a big integer, deep nesting
        return None
    return None if _own_notation(data) else data


def _by_json(obj: Any) -> str:
    with _room_for_nesting():
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


class Record:
    """One line of a transcript: its original bytes and, on demand, its parsed value."""

    __slots__ = ("lineno", "raw", "_obj", "edited", "error", "node")

    def __init__(self, lineno: int, raw: bytes | None, obj: Any = _UNPARSED) -> None:
        self.lineno = lineno  # 1-based line number in the input; 0 for records lookout adds
        self.raw = raw
        self._obj = obj
        self.edited = raw is None
        self.error: str | None = None
        self.node: Any = None  # what an adapter keeps of the line when its value is let go

    @property
    def size(self) -> int:
        """Bytes the line took in the input (0 for records lookout adds)."""
        return len(self.raw or b"")

    def release(self, keep_value: bool = False) -> None:
        """Let go of what can be read again (only a ``LeanRecord`` can)."""

    def stored(self) -> tuple[int, int, int] | None:
        """Where the line's bytes are when only its file holds them (a released ``LeanRecord``)."""
        return None

    @classmethod
    def new(cls, obj: Any) -> Record:
        """A record lookout writes itself."""
        return cls(0, None, obj)

    def copy(self) -> Record:
        """A copy that can be edited without touching this record."""
        if not self.edited:
            return Record(self.lineno, self.raw)
        import copy

        clone = Record(self.lineno, self.raw, copy.deepcopy(self.obj))
        clone.edited = True
        return clone

    @property
    def body(self) -> bytes:
        """The line without its line ending."""
        raw = self.raw or b""
        if raw.endswith(b"\r\n"):
            return raw[:-2]
        if raw.endswith(b"\n"):
            return raw[:-1]
        return raw

    @property
    def blank(self) -> bool:
        raw = self.raw
        return not raw or raw.isspace()  # stops at the first other byte: no copy of the line

    @property
    def obj(self) -> Any:
        """The parsed value, or None when the line is blank or not JSON (see ``error``)."""
        if self._obj is _UNPARSED:
            self._obj = None
            raw = self.raw  # once: a lean record reads it from its file
            if raw and not raw.isspace():
                try:  # the line ending is JSON whitespace: parse the line as read, uncopied
                    self._obj = loads(raw)
                except ValueError:
                    try:  # what orjson refuses: lone surrogates, and what is not JSON at all
                        self._obj = _loads(self.body)  # nested deeper than ~1,000 levels: not read
                    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
                        self.error = str(exc).splitlines()[0][:200]
        return self._obj

    @property
    def data(self) -> dict | None:
        """The parsed value when it is a JSON object, else None."""
        obj = self.obj
        return obj if isinstance(obj, dict) else None

    def edit(self) -> Any:
        """Return a mutable, exactly parsed copy of this record and mark it changed."""
        if not self.edited:
            self._obj = loads_exact(self.body)
            self.edited = True
        return self._obj

    def replace(self, obj: Any) -> None:
        """Replace the whole value of this record."""
        self._obj = obj
        self.edited = True

    @property
    def line_ending(self) -> bytes:
        return b"\r\n" if (self.raw or b"").endswith(b"\r\n") else b"\n"

    def to_bytes(self) -> bytes:
        if not self.edited:
            return self.raw or b""
        return dumps_compact(self._obj) + self.line_ending


class LineIndex:
    """Where each line of a seekable input starts: one array for the file, not two numbers per
    record (``LeanRecord``). Unsigned, as the arrays a cold load fills a line at a time are where
    they hold no -1 (``claude_settled``): CPython checks a number put into a signed array with its
    argument parser, into an unsigned one directly, in half the time."""

    def __init__(self, fd: int, start: int = 0, starts: array.array | None = None) -> None:
        self.fd = fd
        self.starts = starts if starts is not None else array.array("Q", [start])

    def add(self, size: int) -> None:
        self.starts.append(self.starts[-1] + size)

    def span(self, lineno: int) -> tuple[int, int]:
        """(offset, size) of line ``lineno`` (1-based)."""
        start = self.starts[lineno - 1]
        return start, self.starts[lineno] - start


_HELD, _HOLD = Record.raw.__get__, Record.raw.__set__  # the slot, under LeanRecord's ``raw``


class LeanRecord(Record):
    """A record that keeps where its line is in a seekable file instead of its bytes: the
    bytes and the parsed value are read again when asked for, after ``release()`` (an edited
    record keeps its value). A command that must see the whole transcript but keeps little of
    it (``measure``; ``compact``, which parses again only the lines it shows or changes) keeps
    its memory flat in the input's size with these (SPEC §1: offsets and small summaries)."""

    __slots__ = ("_index", "_at")

    def __init__(self, lineno: int, index: LineIndex, raw: bytes | None) -> None:
        # not Record.__init__: ``raw`` is read from the file here, never assigned
        self.lineno, self._obj, self.edited, self.error, self.node = lineno, _UNPARSED, False, None, None
        self._index = index
        _HOLD(self, raw)
        self._at = lineno  # the line in the file (``lineno`` is renumbered when lines are added)

    @property
    def _held(self) -> bytes | None:
        """The line's bytes until ``release()``: kept in ``Record``'s own slot for them (one
        slot less a line)."""
        return _HELD(self)

    @property
    def raw(self) -> bytes:  # type: ignore[override]
        held = _HELD(self)
        if held is not None:
            return held
        offset, size = self._index.span(self._at)
        data = os.pread(self._index.fd, size, offset)
        if len(data) != size:
            raise LookoutError(f"line {self._at} changed while it was read (the input was rewritten)")
        return data

    @property
    def size(self) -> int:
        return self._index.span(self._at)[1]

    def span(self) -> tuple[int, int]:
        """(offset, size) of the line in its file."""
        return self._index.span(self._at)

    def stored(self) -> tuple[int, int, int] | None:
        """(file descriptor, offset, size) of the line, once its bytes are let go."""
        if _HELD(self) is not None:
            return None
        return self._index.fd, *self._index.span(self._at)

    def release(self, keep_value: bool = False) -> None:
        """Let go of the bytes and (unless ``keep_value``) the parsed value."""
        _HOLD(self, None)
        if not (self.edited or keep_value):
            self._obj = _UNPARSED

    def copy(self) -> Record:
        """An unedited line stays where it is in the file: the copy reads it from there too."""
        if self.edited:
            return super().copy()
        clone = LeanRecord(self._at, self._index, None)
        clone.lineno, clone.node = self.lineno, self.node
        return clone


class Line(int):
    """A line known by its number only, the int it is: what an older segment's response points
    at instead of its record (``Lines`` makes none for it; a ``Usage`` reads its ``lineno``).
    An int, not an object holding one: a 500 MB session has a hundred thousand (2.4 MB less)."""

    __slots__ = ()

    @property
    def lineno(self) -> int:
        return int(self)


class Lines(Sequence):
    """The records of a lean load, in order, of which the first ``head`` lines (those an adapter
    read into a summary instead of nodes: a compacted session's older segments) are made only
    when one of them is asked for, from ``spans``: a long session's measure keeps no object for
    each of them (SPEC §1: offsets and small summaries). A record once made is the one given
    each time after. A record can take a line's place, and records can be added at the end;
    ``every`` makes every record, in a list, for the commands that move lines. Records read
    whole (no ``spans``) are all in ``tail``."""

    __slots__ = ("_made", "head", "spans", "tail")

    def __init__(self, spans: LineIndex | None, head: int = 0, tail: list[Record] | None = None) -> None:
        self.spans = spans
        self.head = head
        self.tail = tail if tail is not None else []  # the records of the lines from ``head`` on
        self._made: dict[int, Record] = {}  # lines before ``head`` asked for, or read before it was known

    def __len__(self) -> int:
        return self.head + len(self.tail)

    def __getitem__(self, at):
        if type(at) is slice:
            start, stop, step = at.indices(len(self))
            if step == 1 and start >= self.head:
                return self.tail[start - self.head:max(start, stop) - self.head]
            return [self[n] for n in range(start, stop, step)]
        head = self.head
        if at >= head:
            return self.tail[at - head]
        if at < 0:
            at += len(self)
            if at >= head:
                return self.tail[at - head]
            if at < 0:
                raise IndexError("line out of range")
        made = self._made.get(at)
        if made is None:
            made = self._made[at] = LeanRecord(at + 1, self.spans, None)
        return made

    def __iter__(self) -> Iterator[Record]:
        for n in range(self.head):
            yield self[n]
        yield from self.tail

    def __setitem__(self, at: int, record: Record) -> None:
        """``record`` in the place of line ``at`` (a line's place stays: nothing moves)."""
        if at >= self.head:
            self.tail[at - self.head] = record
        elif at >= 0:
            self._made = {**self._made, at: record}  # a copy: ``copy``s share what is made
        else:
            raise IndexError("line out of range")

    def append(self, record: Record) -> None:
        self.tail.append(record)

    def extend(self, records: Iterable[Record]) -> None:
        self.tail.extend(records)

    def every(self) -> list[Record]:
        """Every record, in order: the lines before ``head`` are made now. The list is the one
        kept (``tail``): a change to it is a change to these lines."""
        if self.head:
            self.tail[:0] = [self[n] for n in range(self.head)]
            self.head, self._made = 0, {}  # (a copy sharing what was made keeps it)
        return self.tail

    def copy(self, apart: bool = False) -> Lines:
        """The same lines, to change apart from these: a record made later in either is the
        other's too (they stay the same lines), unless ``apart``."""
        copy = Lines(self.spans, self.head, list(self.tail))
        copy._made = dict(self._made) if apart else self._made
        return copy

    def number(self) -> None:
        """Number the records by their places (one a command added has none)."""
        for at, record in self._made.items():
            record.lineno = at + 1
        for lineno, record in enumerate(self.tail, self.head + 1):
            record.lineno = lineno

    def hold(self, record: Record | None = None, count: int = 1) -> None:
        """The line after the last read (none after it is read yet) is one before ``head``: left
        unmade, or ``record``; or the next ``count`` lines, left unmade."""
        if record is not None:
            self._made[self.head] = record
        self.head += count

    def fold(self, end: int) -> bool:
        """Whether every line read so far starts before offset ``end``: they are then before
        ``head`` (and the lines read next may be too: ``hold``, or only counted)."""
        tail = self.tail
        if tail and tail[-1].span()[0] >= end:
            return False
        for record in tail:
            self.hold(record)
        tail.clear()
        return True

    def made(self) -> Iterator[Record]:
        """The records made so far (the others hold nothing but their place)."""
        yield from self._made.values()
        yield from self.tail

    def unmade_runs(self) -> Iterator[tuple[int, int] | Record]:
        """The lines in order as (first, end) positions of the lines before ``head`` left unmade,
        each a run of them, and the records of the others."""
        at = 0
        for pos in sorted(self._made):
            if pos > at:
                yield at, pos
            yield self._made[pos]
            at = pos + 1
        if self.head > at:
            yield at, self.head
        yield from self.tail


def lean_index(handle: IO[bytes], spool: IO[bytes] | None = None) -> LineIndex:
    """The index of the lines ``read_indexed_lines`` will read from where ``handle`` stands."""
    return LineIndex((spool or handle).fileno(), 0 if spool is not None else handle.tell())


def read_indexed_lines(handle: IO[bytes], index: LineIndex, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
                       spool: IO[bytes] | None = None) -> Iterator[tuple[int, bytes]]:
    """``read_lines`` of ``handle``, each line's place added to ``index`` (and its bytes copied
    to ``spool``) before it is given: a ``LeanRecord`` of it can be made then, or later."""
    for lineno, raw in read_lines(handle, max_record_bytes, len(index.starts) - 1):
        if spool is not None:
            spool.write(raw)
        index.add(len(raw))
        yield lineno, raw
    if spool is not None:
        spool.flush()  # the records read their lines back with pread


def read_line_blocks(handle: IO[bytes], index: LineIndex, end: int,
                     max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
                     block: int = 1 << 20) -> Iterator[tuple[int, list[bytes]]]:
    """The lines of the file ``handle`` from where ``index`` ends up to offset ``end`` (where a
    line starts), a block of them at a time: (the first one's number, their bytes with the line
    end, as ``read_indexed_lines`` gives them). Their places are added to ``index`` before a
    block is given; a line over the bound raises (``read_lines``). For lines read in bulk: a
    block is cut into lines in one call (``readlines``, which finds each line end with memchr:
    a third of the time ``bytes.split`` takes, byte by byte), not a generator's step a line.
    ``handle`` is left where the index ends, so that ``read_indexed_lines`` reads on from there
    (what is past the last whole line before ``end``, when the file changed, is read again then)."""
    starts = index.starts
    at, size = starts[-1], block
    while at < end:
        want = min(size, end - at)
        handle.seek(at)
        data = handle.read(want)
        lines = io.BytesIO(data).readlines()
        rest = lines.pop() if lines and lines[-1][-1:] != b"\n" else b""  # read again with the next block
        if not lines:  # no line end in the block: a line longer than it
            if len(rest) > max_record_bytes + 2:  # too long whatever ends it
                raise _too_long(len(starts), max_record_bytes)
            if len(data) < want or want == end - at:
                break  # (the file is not what it was: ``read_indexed_lines`` reads on)
            size *= 2
            continue
        at += len(data) - len(rest)
        first = len(starts)
        if max(map(len, lines)) > max_record_bytes:  # maybe over, its line ending aside
            for lineno, line in enumerate(lines, first):
                _check_length(lineno, line, max_record_bytes)
        ends = itertools.accumulate(map(len, lines), initial=starts[-1])  # (where each line ends)
        next(ends)
        starts.extend(ends)
        yield first, lines
    handle.seek(starts[-1])


def next_line_start(fd: int, at: int, end: int) -> int | None:
    """Where the first line starting at or after offset ``at`` of the file open as ``fd``
    starts, if before ``end``."""
    while at < end:
        data = os.pread(fd, min(1 << 16, end - at), at)
        if not data:
            return None
        cut = data.find(b"\n")
        if cut >= 0:
            return at + cut + 1 if at + cut + 1 < end else None
        at += len(data)
    return None


class PositionalReader:
    """The file open as ``fd`` read at an offset of its own (``os.pread``), for
    ``read_line_blocks`` in a forked process: the file's own offset is shared with the parent."""

    def __init__(self, fd: int) -> None:
        self.fd, self.at = fd, 0

    def seek(self, at: int) -> None:
        self.at = at

    def read(self, size: int) -> bytes:
        data = os.pread(self.fd, size, self.at)
        self.at += len(data)
        return data


def read_records(stream: IO[bytes], max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
                 lineno: int = 0, chunk: int = 1 << 20) -> Iterator[Record]:
    """Yield records from a binary stream, never holding more than one bounded line (and a
    chunk) in memory, numbered from ``lineno`` + 1 (``read_lines``)."""
    for n, raw in read_lines(stream, max_record_bytes, lineno, chunk):
        yield Record(n, raw)


def read_lines(stream: IO[bytes], max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
               lineno: int = 0, chunk: int = 1 << 20) -> Iterator[tuple[int, bytes]]:
    """(number, bytes) of each line of a binary stream, numbered from ``lineno`` + 1; a line
    over the bound raises.

    Lines are cut out of chunks with ``bytes.find`` (memchr), not ``readline``, which scans a
    byte at a time: half the time of reading a file. ``read1`` takes what a pipe has, so a
    line is passed on as soon as it is complete."""
    read = getattr(stream, "read1", stream.read)
    head: list[bytes] = []  # the part read so far of a line that runs past the chunk
    held = 0
    while buf := read(chunk):
        start = 0
        while (end := buf.find(b"\n", start) + 1) > 0:
            if head:
                head.append(buf[start:end])
                raw, head, held = b"".join(head), [], 0
            else:
                raw = buf[start:end]
            start = end
            lineno += 1
            if len(raw) > max_record_bytes:  # maybe over, its line ending aside
                _check_length(lineno, raw, max_record_bytes)
            yield lineno, raw
        if start < len(buf):
            head.append(buf[start:] if start else buf)
            held += len(buf) - start
            if held > max_record_bytes + 2:  # too long whatever ends it: stop before reading more
                raise _too_long(lineno + 1, max_record_bytes)
    if head:
        raw = b"".join(head)
        _check_length(lineno + 1, raw, max_record_bytes)
        yield lineno + 1, raw


# lines to read before a settling reader decodes them for a few fields (msgspec, whose load
# costs what orjson parses in that much less time: ``claude_fields``, ``codex_fields``)
FIELDS_BYTES = 32 << 20


def value_reader(add: Callable[[dict | None], None]) -> Callable[[bytes], bool]:
    """A function of a line's bytes for an ``Adapter.settling`` reader: they are parsed by
    orjson and handed to ``add`` (the value when a JSON object, else None); False when they are
    no JSON value (or a null), of which the caller keeps a record."""
    import orjson  # (a cold read: ``loads`` would not pay for it yet)

    loads, decode_error = orjson.loads, orjson.JSONDecodeError

    def by_value(raw: bytes) -> bool:
        try:
            value = loads(raw)
        except decode_error:
            return False
        if value is None:
            return False
        add(value if type(value) is dict else None)
        return True

    return by_value


def valid_utf8(raw: bytes) -> bool:
    """Whether ``raw`` is UTF-8 (what a decoder that passes over a text does not check)."""
    try:
        raw.decode()
    except UnicodeDecodeError:
        return False
    return True


def last_line_holding(fd: int, needle: bytes, start: int, end: int, wanted: Callable[[bytes], bool],
                      block: int = 1 << 20, longest: int = 1 << 16) -> int | None:
    """Where the last line of ``fd``'s bytes [start, end) that holds ``needle`` and is
    ``wanted`` (given its bytes) starts, else None. The bytes are searched backwards, a block
    at a time, with ``bytes.rfind``: a file without the needle costs a read of it and no Python
    work a line. A line over ``longest`` bytes around the needle is not the one wanted (the
    lines looked for are short; a long one holds the needle in its content)."""
    hi = end
    while hi > start:
        lo = max(start, hi - block)
        # a needle across the block's end is found too (a needle holds no line end: never one
        # across the start of a line passed over)
        data = os.pread(fd, min(end, hi + len(needle) - 1) - lo, lo)
        floor, cut = lo, len(data)
        while (at := data.rfind(needle, 0, cut)) >= 0:
            begin, line = _line_around(fd, lo + at, start, end, longest)
            if line is not None and wanted(line):
                return begin
            if begin is None:  # a long line: its start is not looked for; the search goes on before the needle
                cut = at
                continue
            floor, cut = min(floor, begin), begin - lo
            if cut <= 0:
                break
        hi = floor
    return None


def _line_around(fd: int, at: int, start: int, end: int, longest: int) -> tuple[int | None, bytes | None]:
    """(where it starts, its bytes without the line end) of the line holding byte ``at``;
    (None, None) when it runs further than ``longest`` bytes to either side."""
    lo = max(start, at - longest)
    data = os.pread(fd, min(end, at + longest) - lo, lo)
    first = data.rfind(b"\n", 0, at - lo) + 1
    if first == 0 and lo > start:
        return None, None
    last = data.find(b"\n", at - lo)
    if last < 0:
        if lo + len(data) < end:
            return None, None
        last = len(data)
    return lo + first, data[first:last]


def lines_holding(stream: IO[bytes], needles: tuple[bytes, ...], head: bytes = b"", spool: IO[bytes] | None = None,
                  max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES, chunk: int = 1 << 20) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes) of each line holding one of ``needles``, in ``head`` and then the
    rest of ``stream`` (what it reads is copied to ``spool``). A chunk's lines are cut in C
    (``io.BytesIO`` over the chunk) and each is looked at with ``in``: a line without a needle
    costs a step of Python and is let go at once, which is what lets ``measure --usage-only``
    run near the speed of reading the file. (Finding each needle in the whole chunk instead
    costs more: most lines of a real session hold one, and each hit then takes Python work to
    find its line and number.) A line over the bound raises as in ``read_records``."""
    read = getattr(stream, "read1", stream.read)

    def blocks() -> Iterator[bytes]:
        if head:
            yield head
        while data := read(chunk):
            if spool is not None:
                spool.write(data)
            yield data
        yield b""  # the end: a last line without a newline ends here

    lineno = 0
    carry: list[bytes] = []  # the start of a line that runs past its block
    held = 0
    bounded = max_record_bytes < chunk  # else every whole line of a chunk is within the bound
    first, *others = needles
    for data in blocks():
        if data and data.find(b"\n") < 0:  # still inside one line
            carry.append(data)
            held += len(data)
            if held > max_record_bytes + 2:
                raise _too_long(lineno + 1, max_record_bytes)
            continue
        begin = 0
        if carry:  # the line carried over ends here: joined alone, not with the whole block
            begin = data.find(b"\n") + 1
            line = b"".join([*carry, data[:begin]])
            carry, held = [], 0
            lineno += 1
            _check_length(lineno, line, max_record_bytes)
            if any(needle in line for needle in needles):
                yield lineno, line
        if not data:
            return
        lines = io.BytesIO(data)  # shares the chunk's bytes: each line is copied out as it is read
        lines.seek(begin)
        for line in lines:  # the chunk's whole lines, then the start of one that runs past it
            lineno += 1
            if bounded and len(line) > max_record_bytes and line[-1] == 10 \
                    and len(line.rstrip(b"\r\n")) > max_record_bytes:
                raise _too_long(lineno, max_record_bytes)
            if first not in line:
                for needle in others:
                    if needle in line:
                        break
                else:
                    continue
            if line[-1] != 10:  # cut short: carried into the next chunk
                break
            yield lineno, line
        end = data.rfind(b"\n") + 1
        if end < len(data):
            lineno -= 1  # the line cut short was counted
            carry, held = [data[end:]], len(data) - end
            if held > max_record_bytes + 2:
                raise _too_long(lineno + 1, max_record_bytes)


def _check_length(lineno: int, raw: bytes, max_record_bytes: int) -> None:
    """Refuse line ``lineno`` when it is over the bound (its line ending not counted)."""
    ending = 2 if raw.endswith(b"\r\n") else 1 if raw.endswith(b"\n") else 0
    if len(raw) - ending > max_record_bytes:
        raise _too_long(lineno, max_record_bytes)


def _too_long(lineno: int, max_record_bytes: int) -> LookoutError:
    return LookoutError(f"line {lineno} is longer than {max_record_bytes:,} bytes "
                        "(raise --max-record-bytes if the input is a real transcript)")


class NullStream:
    """Standard output that is /dev/null (``lookout measure -q FILE > /dev/null`` in a hook):
    what would be written there is dropped here, without copying it."""

    def write(self, data: bytes) -> int:
        return len(data)

    def flush(self) -> None:
        pass


def is_dev_null(stream: IO[bytes]) -> bool:
    try:
        st = os.fstat(stream.fileno())
        null = os.stat(os.devnull)
    except (AttributeError, OSError, ValueError):
        return False
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == null.st_rdev


class RecordWriter:
    """Write records to a binary stream: original bytes when untouched, compact JSON when edited."""

    def __init__(self, stream: IO[bytes], unbuffered: bool = False) -> None:
        self.stream = stream
        self.unbuffered = unbuffered
        self._needs_newline = False
        self.written = 0

    def write(self, record: Record, original: bool = False) -> None:
        """Write a record; with ``original`` its input bytes even if a command edited it."""
        self._put((record.raw or b"") if original else record.to_bytes(), 1)

    def _put(self, data: bytes, lines: int) -> None:
        if not data:
            return
        try:
            if self._needs_newline:  # the previous line had no final newline
                self.stream.write(b"\n")
            self.stream.write(data)
            if self.unbuffered:
                self.stream.flush()
        except BrokenPipeError:
            raise PipeClosed() from None
        self._needs_newline = not data.endswith(b"\n")
        self.written += lines

    def write_all(self, records: Iterable[Record], original: bool = False) -> None:
        """Write records in order. Untouched lean records that follow each other in their file
        are read back together, a block at a time, not with a read a line (a compacted session
        is mostly lines left as they were); so are the lines ``Lines`` left unmade, without
        making them."""
        run: list[int] | None = None  # [fd, start, end, lines] of such records
        if type(records) is Lines:
            for part in records.unmade_runs():
                if type(part) is not tuple:
                    run = self._write_one(part, original, run)
                    continue
                fd, starts = records.spans.fd, records.spans.starts
                at, end = part
                while at < end:  # a block at a time
                    stop = max(at + 1, bisect.bisect_right(starts, starts[at] + COPY_BLOCK, at + 1, end + 1) - 1)
                    self._put_stored(run)
                    run, at = [fd, starts[at], starts[stop], stop - at], stop
        else:
            for record in records:
                run = self._write_one(record, original, run)
        self._put_stored(run)

    def _write_one(self, record: Record, original: bool, run: list[int] | None) -> list[int] | None:
        """Write ``record``, or add it to ``run``; the run to go on with."""
        place = record.stored() if original or not record.edited else None
        if place is None:
            self._put_stored(run)
            self.write(record, original)
            return None
        fd, offset, size = place
        if run is not None and run[0] == fd and run[2] == offset and run[2] - run[1] < COPY_BLOCK:
            run[2] += size
            run[3] += 1
            return run
        self._put_stored(run)
        return [fd, offset, offset + size, 1]

    def _put_stored(self, run: list[int] | None) -> None:
        if run is None:
            return
        fd, start, end, lines = run
        if isinstance(self.stream, NullStream):  # dropped: not read back either
            self.written += lines
            return
        data = os.pread(fd, end - start, start)
        if len(data) != end - start:
            raise LookoutError("the input changed while it was read (it was rewritten)")
        self._put(data, lines)

    def write_raw(self, data: bytes) -> None:
        """Whole lines as they are (lines appended to the input meanwhile)."""
        if isinstance(self.stream, NullStream) or not data:
            return
        if self._needs_newline:
            self.stream.write(b"\n")
            self._needs_newline = False
        self.stream.write(data)
        self.written += data.count(b"\n")

    def copy_from(self, source: IO[bytes], start: int = 0, end: int | None = None, chunk: int = 1 << 20) -> None:
        """Copy an input file from offset ``start`` to ``end`` (default: its end) byte for byte
        (a transcript nothing changed); from file to file or pipe in the kernel when it can
        (sendfile), else through memory."""
        if isinstance(self.stream, NullStream):
            return
        try:
            self.stream.flush()
            sent = _sendfile(source, self.stream, start, end)
            source.seek(start + sent)
            left = None if end is None else end - start - sent
            while left is None or left > 0:
                block = source.read(chunk if left is None else min(chunk, left))
                if not block:
                    break
                self.stream.write(block)
                if left is not None:
                    left -= len(block)
        except BrokenPipeError:
            raise PipeClosed() from None

    def flush(self) -> None:
        try:
            self.stream.flush()
        except BrokenPipeError:
            raise PipeClosed() from None


def _sendfile(source: IO[bytes], target: IO[bytes], start: int = 0, end: int | None = None) -> int:
    """Bytes of ``source`` from ``start`` (to ``end``) copied to ``target`` by os.sendfile (0
    where it cannot be used)."""
    try:
        src, dst = source.fileno(), target.fileno()
    except (AttributeError, OSError, ValueError):
        return 0
    sent = 0
    while end is None or start + sent < end:
        count = 1 << 30 if end is None else min(1 << 30, end - start - sent)
        try:
            n = os.sendfile(dst, src, start + sent, count)
        except (AttributeError, OSError) as exc:
            if isinstance(exc, BrokenPipeError):
                raise
            return sent  # not supported here: the caller copies the rest
        if n == 0:
            return sent
        sent += n
    return sent
