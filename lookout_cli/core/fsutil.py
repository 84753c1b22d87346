"""Atomic file writes: a temp file in the same folder, fsync, rename.

Writes that may come by the thousand (one saved output per cleared tool result) can defer
their fsync: :func:`atomic_write` with ``durable=False`` renames the file into place at once
and leaves it pending; :func:`sync_pending` makes everything pending durable in one go (one
``sync`` for a large batch instead of two fsyncs a file). Every atomic replace syncs what is
pending *before* its own file, so a transcript never reaches the disk ahead of the saved
outputs it names; so does an exit. Log lines (:func:`append_line`) are batched the same way.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import stat
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

MARSHAL_TAG = "py" + "".join(map(str, sys.version_info[:2]))  # in a kept file's name: marshal's format may change
_pending: dict[str, None] = {}  # files written but not yet fsynced, in order
_appends: dict[Path, list[bytes]] = {}  # lines to append to logs such as the store's manifest
APPEND_BATCH = 512
SYNC_ALL_FROM = 32  # from this many files one sync() of every filesystem is the cheaper way


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike, mode: int | None = None, durable: bool = True,
                  cache: bool = False) -> Iterator[IO[bytes]]:
    """Yield a binary file that replaces ``path`` only when the block ends without error.

    ``durable=False`` defers the fsync to :func:`sync_pending`; ``cache`` never syncs (a file
    the next run checks and can rebuild: after a crash it is the old one, the new one or torn).
    A link is followed (the file it names is replaced; the link stays). A device or a pipe
    (``-o /dev/null``, ``-o /dev/stdout``, a FIFO) is written to as it is: there is no file to
    replace, and a rename over it would put a regular file in its place."""
    path = Path(os.path.realpath(path)) if os.path.islink(path) else Path(path)
    durable = durable and not cache
    if durable:
        sync_pending()
    try:
        special = not stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        special = False
    if special:
        with open(path, "wb") as handle:
            yield handle
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = new_temp_file(path.parent, f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        elif path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        _fsync_dir(path.parent)
    elif not cache:
        sync_later(path)


def new_temp_file(folder: str | os.PathLike, prefix: str) -> tuple[int, str]:
    """A new, empty file ``PREFIX RANDOM.tmp`` in ``folder`` (mode 0600), open for writing:
    what ``tempfile.mkstemp`` makes, without importing tempfile (shutil, random, bz2 and lzma:
    6 ms of a hook's run that writes a line memo)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = os.path.join(folder, f"{prefix}{os.urandom(6).hex()}.tmp")
        try:
            return os.open(tmp, flags, 0o600), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name in {folder}")


def sync_later(path: str | os.PathLike) -> None:
    """``path`` was written without an fsync: :func:`sync_pending` makes it durable."""
    _pending[os.fspath(path)] = None


def write_new(path: str, data: bytes) -> None:
    """Write a file named by its content (the saved-output store) unless it exists: through a
    temporary name in its folder, private (0600), synced later (:func:`sync_pending`). No link
    or device to care for, no random name to draw: ``atomic_write`` at a fraction of the cost
    when a compaction saves thousands of outputs."""
    if os.path.exists(path):
        return
    folder, name = os.path.split(path)
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.tmp")  # one writer per process
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    try:
        fd = os.open(tmp, flags, 0o600)
    except FileNotFoundError:
        os.makedirs(folder, exist_ok=True)
        fd = os.open(tmp, flags, 0o600)
    try:
        with open(fd, "wb") as handle:
            handle.write(data)
        _take_name(tmp, path)  # checked above: a writer since then wrote the same bytes
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def keep_new(tmp: str, path: str) -> None:
    """Give a temporary file written on ``path``'s filesystem the name ``path`` (synced later),
    or drop it when ``path`` exists: a file named by its content holds those bytes already."""
    if os.path.exists(path):
        os.unlink(tmp)
        return
    _take_name(tmp, path)


def _take_name(tmp: str, path: str) -> None:
    try:
        os.replace(tmp, path)
    except FileNotFoundError:  # its folder is new
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.replace(tmp, path)
    sync_later(path)


def atomic_write(path: str | os.PathLike, data: bytes, durable: bool = True, cache: bool = False) -> None:
    with atomic_writer(path, durable=durable, cache=cache) as handle:
        handle.write(data)


@contextlib.contextmanager
def sealed_writer(path: str | os.PathLike) -> Iterator[Callable[[Any], None]]:
    """Write a cache file of ``marshal`` values headed by the sha256 of the rest (replaced
    atomically, never synced): yields ``put``, which appends a value after its length; the hash
    is written when the block ends. Read back with ``sealed_values``. A bytearray or memoryview
    is written as the bytes ``marshal`` would make of it, without a copy (a table of megabytes)."""
    import hashlib
    import marshal

    digest = hashlib.sha256()
    with atomic_writer(path, cache=True) as handle:
        handle.write(bytes(32))

        def put(value: Any) -> None:
            if isinstance(value, (bytearray, memoryview)):
                data = memoryview(value).cast("B")
                head = b"s" + len(data).to_bytes(4, "little")  # marshal's bytes: a type and a length
                parts = ((len(head) + len(data)).to_bytes(8, "little"), head, data)
            else:
                data = marshal.dumps(value)
                parts = (len(data).to_bytes(8, "little"), data)  # not joined: a value may be megabytes
            for part in parts:
                digest.update(part)
                handle.write(part)

        yield put
        handle.seek(0)
        handle.write(digest.digest())


def sealed_values(path: str | os.PathLike) -> Iterator[Any] | None:
    """The values ``sealed_writer`` wrote, one at a time as they are asked for (the file is read
    and checked first); None when it is missing, torn or damaged."""
    payload = _read_sealed(path)
    return None if payload is None else _values(payload)


def kept_value(path: str | os.PathLike, build: Callable[[], Any], valid: Callable[[Any], bool]) -> Any:
    """``build()``, kept in ``path`` (a cache file, ``sealed_writer``) and read back from there
    while ``valid`` accepts what it holds: a missing, damaged or unwritable copy only costs the
    time of building it again."""
    with contextlib.suppress(ValueError, EOFError, TypeError):
        value = next(sealed_values(path) or iter(()), None)
        if value is not None and valid(value):
            return value
    value = build()
    with contextlib.suppress(OSError), sealed_writer(path) as put:  # a torn copy fails its hash next time
        put(value)
    return value


def _values(payload: memoryview) -> Iterator[Any]:
    import marshal

    at = 0
    while at + 8 <= len(payload):
        size = int.from_bytes(payload[at:at + 8], "little")
        yield marshal.loads(payload[at + 8:at + 8 + size])
        at += 8 + size


def _read_sealed(path: str | os.PathLike) -> memoryview | None:
    """What follows the hash of a file ``sealed_writer`` wrote, or None when it is missing,
    torn or damaged (its hash does not match): data that ``marshal`` may then read safely."""
    import hashlib

    try:
        blob = Path(path).read_bytes()
    except OSError:
        return None
    payload = memoryview(blob)[32:]  # not a copy
    return payload if len(blob) >= 32 and hashlib.sha256(payload).digest() == blob[:32] else None


def append_line(path: str | os.PathLike, line: bytes) -> None:
    """Append ``line`` to a log file, batched: the lines go in one write under an exclusive
    lock (so concurrent writers never interleave) at the next sync or every APPEND_BATCH."""
    lines = _appends.setdefault(Path(path), [])
    lines.append(line)
    if len(lines) >= APPEND_BATCH:
        _write_appends()


def _write_appends() -> None:
    batches = list(_appends.items())
    _appends.clear()
    for path, lines in batches:
        data = b"".join(lines)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            while data:
                data = data[os.write(fd, data):]
        finally:
            os.close(fd)


@atexit.register
def _at_exit() -> None:
    with contextlib.suppress(OSError):  # a log line lost on a full disk must not fail the exit
        sync_pending()


def sync_pending() -> None:
    """Make every file written with ``durable=False`` durable, with the folders naming them,
    after writing the batched log lines."""
    _write_appends()
    if not _pending:
        return
    paths = list(_pending)
    _pending.clear()
    if len(paths) >= SYNC_ALL_FROM:
        os.sync()
        return
    for path in [*paths, *dict.fromkeys(os.path.dirname(p) for p in paths)]:
        _fsync_dir(path)


def _fsync_dir(folder: str | os.PathLike) -> None:
    """fsync a folder (or a file) by path; best effort."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
