"""Exact counts of a few texts without building tiktoken's core: what a per-prompt run needs,
and a cold run that has a few hundred kilobytes to count.

A hook or status line measures a session after every prompt; the texts it has not counted
before are the last exchange's, a few kilobytes. Loading the tokenizer for them (tiktoken
builds its Rust core from the 200k-entry rank table: 0.2-0.5 s here) cost more than the rest
of the run. This module counts them with the same rank table and split pattern, the way
tiktoken's core does, in Python:

- the text is split by the encoding's pattern (the ``regex`` module, which tiktoken itself
  depends on and its educational implementation splits with; see ``splitter``), an ASCII
  text by the same pattern spelled for Python's ``re`` (``ascii_splitter``: three times as fast);
- a piece that is a token is one; any other is merged byte pair by byte pair, the pair of
  lowest rank first (the leftmost of equal ones), as tiktoken's ``byte_pair_merge``;
- a text with a lone surrogate is first mended as ``encode_ordinary`` mends it.

The ranks are read from a table on disk (``mmap``), not loaded: an open-addressing hash table
of the tokens (crc32), written next to the kept rank tables by the first run that wanted it
and found none or found it damaged (that run loads the full tokenizer), headed by the crc32 of
the rest. The sum is checked when the table is opened, until a check finds it whole: a note
beside it then names the file as it was (``_whole``), and a run that finds the file so skips
the 4 MB sum (5% of a prompt's run). The counts are
``encode_ordinary``'s (tests/test_tokens_lite.py compares them on every text of the shared
transcripts and on hand-picked edge cases); ``tokenizer.count`` uses this path only for the
characters a run allows it (``LITE_CHARS`` for a prompt's worth, ``COLD_CHARS`` for a cold run's
view), only once the table exists, and only while the pieces it merges in Python are few
(``MERGES_MAX``).
"""

from __future__ import annotations

import array
import contextlib
import functools
import itertools
import mmap
import operator
import os
import struct
import sys
import time
import zlib
from collections.abc import Callable

from lookout_cli.core.file_guard import digest
from lookout_cli.core.fsutil import MARSHAL_TAG, atomic_writer, kept_value

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from typing import Any

MAGIC = b"LKBPE\x02" + sys.byteorder[:1].encode() + b"\x00"  # the numbers are the machine's own
HEAD = struct.Struct("<8sIII4x")  # magic, crc32 of what follows (zlib's: no OpenSSL to load), tokens, slots
LITE_CHARS = 64_000  # beyond this many characters in a process (about 0.1 s of them), the full tokenizer pays
# A cold run that knows all it has left to count (``tokenizer.count_left``) counts up to this many
# characters here: building tiktoken's core (650 M instructions, 0.17-0.29 s) costs what 300,000
# characters of a real session's view do here (2,000-2,100 a character, 270 ns; 1,100-1,500 in
# tiktoken once built: the two break even at 750,000-1,000,000 on the views of the 100 and 500 MB
# sessions). Views of few repeated pieces cost five to seven times as much a character here
# (random words, base64): ``MERGES_MAX`` hands them to tiktoken.
COLD_CHARS = 600_000
# Pieces merged in Python (``merged_length``: a piece that is no token and was not seen before)
# before the lite path gives way to the full tokenizer: the views of the 100 and 500 MB sessions
# merge 1,944 and 2,485 (266,000 and 411,000 characters); 600,000 characters of random words or
# base64 merge 61,000-71,000, a second's work here, and pass this bound within 0.1 s
MERGES_MAX = 8_000
# ASCII characters split by ``regex`` before ``ascii_splitter``'s pattern is compiled (1 ms, what
# splitting 5,000 characters with it saves): a prompt's few kilobytes do not pay for it
ASCII_CHARS = 8_000
KNOWN_MAX = 100_000  # pieces remembered
LONG_PIECE = 256  # a piece this long that is no token: merging it in Python is quadratic
RACY_NS = 1_000_000_000  # a table changed this recently is summed again, not noted (``_whole``)


def table_path(ranks_path: str) -> str:
    """Next to the kept rank table (whose name pins the encoding, its hash and the format)."""
    return os.path.splitext(ranks_path)[0] + "-table-2.bin"


def write_table(path: str, ranks: dict[bytes, int]) -> None:
    """The table of ``ranks`` (contiguous ranks 0..n-1, as both shipped encodings have):
    slots of rank + 1 (0: empty), the offsets of each rank's bytes, the bytes."""
    n = len(ranks)
    size = 1 << max(4, (2 * n - 1).bit_length())  # at most half full
    mask = size - 1
    by_rank: list[bytes] = [b""] * n
    for token, rank in ranks.items():
        by_rank[rank] = token
    slots = array.array("I", bytes(4 * size))  # arrays, not lists of ints: written while a run's lines are held
    for rank, h in enumerate(map(zlib.crc32, by_rank), 1):
        h &= mask
        while slots[h]:
            h = (h + 1) & mask
        slots[h] = rank
    offsets = array.array("I", itertools.accumulate(map(len, by_rank), initial=0))
    body = b"".join([slots.tobytes(), offsets.tobytes(), *by_rank])
    head = HEAD.pack(MAGIC, zlib.crc32(body), n, size)
    with atomic_writer(path) as fh:  # (synced: once an install, and a note may vouch for it later)
        fh.write(head + body)


class Table:
    """A table written by ``write_table``, mapped read-only; None from ``open`` when missing,
    torn or damaged (the caller loads the full tokenizer instead)."""

    def __init__(self, mapped: mmap.mmap, n: int, size: int) -> None:
        self._map = mapped
        at = HEAD.size
        self.slots = memoryview(mapped)[at:at + 4 * size].cast("I")
        at += 4 * size
        self.offsets = memoryview(mapped)[at:at + 4 * (n + 1)].cast("I")
        self.blob = at + 4 * (n + 1)
        self.mask = size - 1

    @classmethod
    def open(cls, path: str | os.PathLike) -> Table | None:
        try:
            with open(path, "rb") as fh:
                mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
                st = os.fstat(fh.fileno())
        except (OSError, ValueError):
            return None
        if len(mapped) < HEAD.size:
            return None
        magic, check, n, size = HEAD.unpack_from(mapped)
        if (magic != MAGIC or size & (size - 1) or len(mapped) < HEAD.size + 4 * (size + n + 1)
                or not _whole(os.fspath(path), st, mapped, check)):
            return None
        return cls(mapped, n, size)

    def rank(self, token: bytes, _crc=zlib.crc32) -> int | None:
        slots, offsets, data, blob, mask = self.slots, self.offsets, self._map, self.blob, self.mask
        h = _crc(token) & mask
        size = len(token)
        while True:
            r = slots[h]
            if not r:
                return None
            r -= 1
            start = offsets[r]
            if offsets[r + 1] - start == size and data[blob + start:blob + start + size] == token:
                return r
            h = (h + 1) & mask


def merged_length(piece: bytes, rank: Callable[[bytes], int | None]) -> int:
    """How many tokens tiktoken's byte-pair merge makes of ``piece`` (not itself a token):
    the adjacent pair of lowest rank is merged first (the leftmost of equal ones), and only
    the ranks next to a merge are looked up again, as in tiktoken's ``_byte_pair_merge``."""
    never = 1 << 62
    starts = list(range(len(piece) + 1))
    pairs = [never if r is None else r for r in [rank(piece[i:i + 2]) for i in range(len(piece) - 1)]]
    pairs += (never, never)  # aligned with starts
    while True:
        best = min(pairs)
        if best == never:
            break
        i = pairs.index(best)
        del starts[i + 1], pairs[i + 1]
        # (the pairs on either side of the merge, looked up here: no nested call for each)
        r = rank(piece[starts[i]:starts[i + 2]]) if i + 2 < len(starts) else None
        pairs[i] = never if r is None else r
        if i:
            r = rank(piece[starts[i - 1]:starts[i + 1]])
            pairs[i - 1] = never if r is None else r
    return len(starts) - 1


def splitter(pat_str: str, folder: str) -> Callable[[str], list[str]]:
    """``regex.compile(pat_str).findall``, without importing the ``regex`` package when it can:
    its pattern compiler is Python (``_regex_core``), and importing it and compiling the pattern
    took 12-15 ms, a tenth of a prompt's re-measure. regex pickles a pattern as the arguments
    of its C core's ``compile`` (the compiled code, not the text): those arguments are kept in
    ``folder`` (sealed, named by the pattern and by the core's and compiler's files, so another
    regex compiles anew) and handed to the core, loaded on its own. The first run compiles the
    pattern with the package and keeps them; anything unexpected compiles it that way too."""
    split = _kept_split(pat_str, folder)
    if split is None:
        import regex

        split = regex.compile(pat_str).findall
    return split


# What the pattern's Unicode classes hold of ASCII. ``\s`` is Unicode's White_Space, as
# tiktoken's regex and the ``regex`` package read it: Python's ``re`` adds \x1c-\x1f to it.
_ASCII_CLASSES = {"L": "A-Za-z", "N": "0-9", "Lu": "A-Z", "Ll": "a-z", "Lt": "", "Lm": "", "Lo": "", "M": ""}
_ASCII_SPACE = "\\t-\\r "


def ascii_splitter(pat_str: str) -> Callable[[str], list[str]] | None:
    """The pattern's ``findall`` for ASCII texts with Python's own ``re`` (its classes spelled
    as what they hold of ASCII): three times as fast as the ``regex`` package on the Unicode
    classes, and the same pieces (tests/test_tokens_lite.py splits every ASCII text of the
    shared transcripts and every pair of ASCII characters both ways). None for a pattern it
    cannot spell so."""
    import re

    out, i, in_class = [], 0, False
    try:
        while i < len(pat_str):
            c = pat_str[i]
            if c == "\\":
                escaped = pat_str[i + 1]
                if escaped == "p":
                    end = pat_str.index("}", i)
                    held = _ASCII_CLASSES[pat_str[i + 3:end]]
                    out.append(held if in_class else f"[{held}]" if held else "(?!)")
                    i = end + 1
                    continue
                if escaped in "sS":
                    if in_class and escaped == "S":
                        return None
                    out.append(_ASCII_SPACE if in_class else f"[{'^' if escaped == 'S' else ''}{_ASCII_SPACE}]")
                else:
                    out.append(pat_str[i:i + 2])
                i += 2
                continue
            if c == "[" and not in_class:
                in_class = True
            elif c == "]" and in_class:
                in_class = False
            out.append(c)
            i += 1
        return re.compile("".join(out), re.ASCII).findall
    except (KeyError, ValueError, IndexError, re.error):
        return None


def _kept_split(pat_str: str, folder: str) -> Callable[[str], list[str]] | None:
    found = _core()
    if found is None:
        return None
    core, stamp = found
    name = digest(f"{pat_str}\0{stamp}".encode("utf-8", "surrogatepass"))[:16]
    try:
        args = kept_value(os.path.join(folder, f"pattern-{name}-{MARSHAL_TAG}.marshal"), lambda: _compiled_args(pat_str),
                          lambda kept: type(kept) is tuple and kept[:1] == (pat_str,))
        return core.compile(*args).findall
    except Exception:  # noqa: BLE001 - another regex, or its core refused the arguments: compiled anew
        return None


def _compiled_args(pat_str: str) -> tuple:
    import regex

    return tuple(regex.compile(pat_str)._pickled_data)  # what its pickle hands to the core


def _core() -> tuple[Any, str] | None:
    """regex's C core (``regex._regex``), loaded without its package when it is not loaded yet,
    and what names the installed regex (its core's and compiler's sizes and times)."""
    import importlib.machinery
    import importlib.util

    try:
        spec = importlib.util.find_spec("regex")  # found, not imported
        for folder in (spec.submodule_search_locations or ()) if spec is not None else ():
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                path = os.path.join(folder, "_regex" + suffix)
                if not os.path.isfile(path):
                    continue
                stamp = [path] + [(st.st_size, st.st_mtime_ns) for st in map(os.stat, (path, os.path.join(
                    folder, "_regex_core.py")))]
                core = sys.modules.get("regex._regex")
                if core is None:
                    core_spec = importlib.util.spec_from_file_location("regex._regex", path)
                    core = importlib.util.module_from_spec(core_spec)
                    core_spec.loader.exec_module(core)
                    sys.modules["regex._regex"] = core  # the package, imported later, takes it
                return core, repr(stamp)
    except (ImportError, OSError, ValueError, AttributeError):
        pass
    return None


class LiteCounter:
    """``encode_ordinary``'s count for one encoding, from its table."""

    def __init__(self, split: Callable[[str], list[str]], table: Table, pat_str: str) -> None:
        self.split = split
        self.pat_str = pat_str  # (``ascii_splitter``'s, made once ASCII_CHARS were split without it)
        self.split_ascii: Callable[[str], list[str]] | None = None
        self.ascii_chars = 0
        self.table = table
        self._known: dict[str, int] = {}  # piece -> tokens: prose and code repeat their pieces
        self.merges = 0  # pieces merged so far (``MERGES_MAX``)
        # the table's answers: merging asks for the same pairs over and over (a C-level memo)
        self.rank = functools.lru_cache(maxsize=KNOWN_MAX)(table.rank)

    def __call__(self, text: str) -> int | None:
        """The count; None for a text with a long piece to merge, or once ``MERGES_MAX`` pieces
        were merged (the full tokenizer's work)."""
        if text.isascii():  # (a flag of the string: no scan)
            split = self.split_ascii
            if split is None:
                split, self.ascii_chars = self.split, self.ascii_chars + len(text)
                if self.ascii_chars > ASCII_CHARS:
                    split = self.split_ascii = ascii_splitter(self.pat_str) or self.split
            pieces = split(text)
        else:
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate: mended as encode_ordinary mends it
                text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
            pieces = self.split(text)
        known = self._known
        counts = list(map(known.get, pieces))
        if None not in counts:
            return sum(counts)
        rank, new = self.rank, {}
        missing = list(itertools.compress(pieces, map(operator.is_, counts, itertools.repeat(None))))
        for piece in set(missing):  # (each new piece once, however often the text holds it)
            data = piece.encode("utf-8")
            if len(data) == 1 or rank(data) is not None:
                new[piece] = 1
            elif len(data) > LONG_PIECE or self.merges >= MERGES_MAX:
                return None
            else:
                new[piece] = merged_length(data, rank)
                self.merges += 1
        if len(known) < KNOWN_MAX:
            known.update(new)
        return sum(filter(None, counts)) + sum(map(new.__getitem__, missing))


def _whole(path: str, st: os.stat_result, mapped: mmap.mmap, check: int) -> bool:
    """Whether the table's bytes sum to ``check``, its head's crc32: summed until they do, then
    taken from a note beside the table that names the file as it was then (device, inode, size,
    modification and change times), which any write to the file changes. A file changed within
    the last second is summed and not noted: two writes that close together may leave the same
    times (git's racy index), and a note written after the first would vouch for the second."""
    note = path + ".whole"
    identity = b"%d %d %d %d %d %d" % (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, check)
    try:
        with open(note, "rb") as fh:
            if fh.read() == identity:
                return True
    except OSError:
        pass
    if zlib.crc32(memoryview(mapped)[HEAD.size:]) != check:
        return False
    if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > RACY_NS:
        with contextlib.suppress(OSError), atomic_writer(note, cache=True) as fh:
            fh.write(identity)
    return True


def lite_counter(pat_str: str, ranks_path: str) -> LiteCounter | None:
    split = splitter(pat_str, os.path.dirname(ranks_path))  # kept before the table: a run without it keeps it for the next
    table = Table.open(table_path(ranks_path))
    return LiteCounter(split, table, pat_str) if table is not None else None


def ensure_table(ranks_path: str, ranks: dict[bytes, int]) -> None:
    """Write the table, while the full tokenizer loads with the ranks in hand, unless one that
    is whole is there (a damaged one is written anew: else every run after it would load the
    full tokenizer); a failure only leaves the per-prompt path to the full tokenizer."""
    path = table_path(ranks_path)
    if Table.open(path) is not None:
        return
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_table(path, ranks)
    except OSError:
        pass
