"""Incremental re-measure state, one small JSON file per transcript (research/performance.md §4).

Agents append to their transcripts; a git hook or status line measures the same file again
and again. The state remembers, for one transcript path and one kind of figures (``key``:
say the encoding and the schema of the totals):

- the file's identity (device, inode),
- the offset just past its last complete line (a line still being written is left for later),
- a guard: a hash (BLAKE2b) of the 64 bytes before that offset, and of the first 4 KiB of the file,
- the running totals the caller keeps (any JSON value).

``plan()`` compares that with the file as it is now:

- ``new``: no state (or another key or version): read the whole file;
- ``unchanged``: same identity, size equal to the offset, guards match: nothing to read;
- ``append``: same identity, grown, guards match: read only from the offset;
- ``rewrite``: another inode (an atomic replace such as ``compact -i``) or a guard that
  no longer matches (rewritten in place): read the whole file;
- ``truncate``: the file is now shorter than the offset: read the whole file.

``commit()`` stores the new offset and totals atomically (temp file, rename), so concurrent
runs never see half a state; the last writer wins, and either state is valid for its file.
The state lives in ``paths.cache_folder()/state/``, named by a hash of the file's real path: a
line of JSON for the state, then one for the totals, which are parsed only for the plans that
use them (a meter's totals hold a point per response: parsing them took longer than telling
that the file grew).
"""

from __future__ import annotations

import os

from lookout_cli.core import paths
from lookout_cli.core.dataclass import dataclass
from lookout_cli.core.file_guard import digest, guards
from lookout_cli.core.fsutil import atomic_write
from lookout_cli.core.jsonl import dumps, loads

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from typing import Any

VERSION = 3  # 3: the totals on a line of their own (2: BLAKE2b guards and names; 1: sha256)

NEW, UNCHANGED, APPEND, REWRITE, TRUNCATE = "new", "unchanged", "append", "rewrite", "truncate"


@dataclass
class State:
    """What the last run of a command knew of a file: its identity, its measured size and guard hashes."""

    path: str
    key: str
    dev: int
    inode: int
    offset: int
    guard: str
    head: str
    totals: Any = None
    version: int = VERSION


@dataclass
class Plan:
    """How to read a file again given its state: from where, and what still holds."""

    kind: str  # new | unchanged | append | rewrite | truncate
    start: int  # where to start reading (0 unless append/unchanged)
    state: State | None  # the previous state when it still holds (append, unchanged)
    why: str = ""

    @property
    def full(self) -> bool:
        return self.kind in (NEW, REWRITE, TRUNCATE)


def state_dir() -> str:
    return os.path.join(paths.cache_folder(), "state")


def state_path(path: str | os.PathLike, key: str) -> str:
    real = os.path.realpath(os.fspath(path))
    name = digest(f"{real}\0{key}".encode("utf-8", "surrogatepass"))[:32]
    return os.path.join(state_dir(), f"{name}.json")


def last_complete(fh, start: int, end: int) -> int:
    """The offset just past the last newline in [start, end), or ``start`` if there is none."""
    pos = end
    block = 1 << 16
    while pos > start:
        lo = max(start, pos - block)
        fh.seek(lo)
        chunk = fh.read(pos - lo)
        i = chunk.rfind(b"\n")
        if i >= 0:
            return lo + i + 1
        pos = lo
    return start


def _load(path: str | os.PathLike, key: str) -> tuple[State, str, bytes] | None:
    """The stored state without its totals (its first line: a measure's totals, the series
    of every response among them, run to hundreds of kilobytes), where it is kept, and that
    line."""
    where = state_path(path, key)
    try:
        with open(where, "rb") as handle:
            head = handle.readline()
        state = State(**loads(head))
    except (OSError, ValueError, TypeError):
        return None
    if state.version != VERSION or state.key != key:
        return None
    return state, where, head


def _with_totals(state: State, where: str, head: bytes) -> State | None:
    """``state`` with its totals, read now, when the file still holds it (else None)."""
    try:
        with open(where, "rb") as handle:
            data = handle.read()
        if not data.startswith(head):  # replaced since (another run)
            return None
        state.totals = loads(memoryview(data)[len(head):])
    except (OSError, ValueError):  # gone, or torn
        return None
    return state


def plan(path: str | os.PathLike, key: str, totals_for: tuple[str, ...] = (UNCHANGED, APPEND)) -> Plan:
    """What must be read of ``path`` given its stored state; the state's totals are read only
    for the kinds of plan in ``totals_for`` (else left None)."""
    loaded = _load(path, key)
    if loaded is None:
        return Plan(NEW, 0, None, "no state")
    try:
        with open(path, "rb") as fh:
            found = plan_for(loaded[0], fh)
    except OSError as exc:
        return Plan(NEW, 0, None, str(exc))
    if found.state is not None and found.kind in totals_for and _with_totals(*loaded) is None:
        return Plan(NEW, 0, None, "damaged state")
    return found


def plan_for(state: State, fh) -> Plan:
    """What must be read of the open file ``fh`` given the ``state`` stored for its path."""
    st = os.fstat(fh.fileno())
    if (st.st_dev, st.st_ino) != (state.dev, state.inode):
        return Plan(REWRITE, 0, None, "another file at this path")
    if st.st_size < state.offset:
        return Plan(TRUNCATE, 0, None, f"shorter than the measured {state.offset} bytes")
    guard, head = guards(fh.fileno(), state.offset)
    if guard != state.guard or head != state.head:
        return Plan(REWRITE, 0, None, "rewritten in place")
    if st.st_size == state.offset:
        return Plan(UNCHANGED, state.offset, state, "unchanged")
    return Plan(APPEND, state.offset, state, f"{st.st_size - state.offset} bytes appended")


def read_lines(path: str | os.PathLike, start: int) -> tuple[list[bytes], int]:
    """The complete lines from ``start`` on, and the offset just past the last one."""
    with open(path, "rb") as fh:
        end = fh.seek(0, os.SEEK_END)
        stop = last_complete(fh, start, end)
        fh.seek(start)
        data = fh.read(stop - start)
    return data.splitlines(keepends=True), stop


def state_of(fh, path: str | os.PathLike, key: str, offset: int, totals: Any = None) -> State:
    """The state of the open file ``fh`` (found at ``path``) measured up to ``offset``."""
    st = os.fstat(fh.fileno())
    guard, head = guards(fh.fileno(), offset)
    return State(path=os.path.realpath(os.fspath(path)), key=key, dev=st.st_dev, inode=st.st_ino,
                 offset=offset, guard=guard, head=head, totals=totals)


def commit(path: str | os.PathLike, key: str, offset: int, totals: Any) -> State | None:
    """Store the state of ``path`` measured up to ``offset`` (a line boundary). Best effort:
    a cache folder that cannot be written only means the next run reads the whole file."""
    try:
        with open(path, "rb") as fh:
            state = state_of(fh, path, key, offset, totals)
        # dataclasses in ``totals`` too; a torn state reads as none: the file is measured again
        head = {**state.__dict__, "totals": None}
        atomic_write(state_path(path, key), dumps(head) + b"\n" + dumps(totals), cache=True)
        return state
    except (OSError, TypeError, ValueError):
        return None
