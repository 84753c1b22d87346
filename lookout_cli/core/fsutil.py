"""Atomic file writes: a temp file in the same folder, fsync, rename.

Writes that may come by the thousand (one saved output per cleared tool result) can defer
their fsync: :func:`atomic_write` with ``durable=False`` renames the file into place at once
and leaves it pending; :func:`sync_pending` makes everything pending durable in one go (one
``sync`` for a large batch instead of two fsyncs a file). Every atomic replace syncs what is
pending *before* its own file, so a transcript never reaches the disk ahead of the saved
outputs it names; so does an exit. Log lines (:func:`append_line`) are batched the same way.

A kill (SIGKILL) skips every clean-up and leaves a temp file behind; the next write into that
folder removes such files once they are old (:func:`sweep_stale_temps`). A write that fails
says which file it could not write (a full disk's error names none, or the temp file).
"""

from __future__ import annotations

import array
import atexit
import contextlib
import os
import re
import stat
import sys
import time
import zlib
from collections.abc import Callable, Iterator

from lookout_cli.core import lock
from lookout_cli.core.dataclass import dataclass

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from typing import IO, Any

MARSHAL_TAG = "py" + "".join(map(str, sys.version_info[:2]))  # in a kept file's name: marshal's format may change
_pending: dict[str, None] = {}  # files written but not yet fsynced, in order
_appends: dict[str, list[bytes]] = {}  # lines to append to logs such as the store's manifest
APPEND_BATCH = 512
SYNC_ALL_FROM = 32  # from this many files one sync() of every filesystem is the cheaper way
STALE_TEMP_AGE = 3600  # seconds untouched before a temp file is taken for a killed run's
_OWN_TEMP = re.compile(r"\.(?:.+\.|part-)[0-9a-f]{12}\.tmp")  # new_temp_file's names
_swept: set[str] = set()  # folders swept by this process
_BINARY = getattr(os, "O_BINARY", 0)  # without it Windows opens in text mode: LF written as CRLF


@contextlib.contextmanager
def _naming(path: str | os.PathLike) -> Iterator[None]:
    """An OSError while writing ``path`` says "cannot write PATH: why" (ENOSPC or EFBIG alone
    name no file); its errno, and so its class, stay."""
    try:
        yield
    except OSError as exc:
        why = exc.strerror or str(exc)
        if why.startswith("cannot write "):
            raise
        raise OSError(exc.errno, f"cannot write {os.path.abspath(path)}: {why}") from exc


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike, mode: int | None = None, durable: bool = True,
                  cache: bool = False) -> Iterator[IO[bytes]]:
    """Yield a binary file that replaces ``path`` only when the block ends without error.

    ``durable=False`` defers the fsync to :func:`sync_pending`; ``cache`` never syncs (a file
    the next run checks and can rebuild: after a crash it is the old one, the new one or torn).
    A link is followed (the file it names is replaced; the link stays). A device or a pipe
    (``-o /dev/null``, ``-o /dev/stdout``, a FIFO) is written to as it is: there is no file to
    replace, and a rename over it would put a regular file in its place."""
    path = os.path.realpath(path) if os.path.islink(path) else os.fspath(path)
    folder, name = os.path.split(path)
    folder = folder or os.curdir
    durable = durable and not cache
    if durable:
        sync_pending()
    with _naming(path):
        try:
            now = os.stat(path)
        except FileNotFoundError:
            now = None
        if now is not None and not stat.S_ISREG(now.st_mode):
            with open(path, "wb") as handle:
                yield handle
            return
        os.makedirs(folder, exist_ok=True)
        # a cache file is rewritten on every hook run: its folder (thousands of memos) is swept
        # only when the file is new or has not been written for a while
        sweep = not cache or now is None or time.time() - now.st_mtime > STALE_TEMP_AGE
        fd, tmp = new_temp_file(folder, f".{name}.", sweep)
        try:
            with os.fdopen(fd, "wb") as handle:
                yield handle
                handle.flush()
                if durable:
                    os.fsync(handle.fileno())
            if mode is not None:
                os.chmod(tmp, mode)
            elif now is not None:
                os.chmod(tmp, now.st_mode & 0o7777)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    if durable:
        _fsync_dir(folder)
    elif not cache:
        sync_later(path)


def new_temp_file(folder: str | os.PathLike, prefix: str, sweep: bool = True) -> tuple[int, str]:
    """A new, empty file ``PREFIX RANDOM.tmp`` in ``folder`` (mode 0600), open for writing:
    what ``tempfile.mkstemp`` makes, without importing tempfile (shutil, random, bz2 and lzma:
    6 ms of a hook's run that writes a line memo). ``sweep``: first remove what killed runs
    left in ``folder`` (:func:`sweep_stale_temps`)."""
    if sweep:
        sweep_stale_temps(folder)
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | _BINARY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = os.path.join(folder, f"{prefix}{os.urandom(6).hex()}.tmp")
        try:
            return os.open(tmp, flags, 0o600), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name in {folder}")


def sweep_stale_temps(folder: str | os.PathLike) -> None:
    """Remove the temp files killed runs left in ``folder``, once per folder and process, best
    effort: only names lookout makes (``_OWN_TEMP``), only regular files (a link is neither
    followed nor removed), only when untouched for STALE_TEMP_AGE. Age, not the pid some names
    carry: a writer's file changes as it is written, while a pid may be reused, or be another
    machine's in a shared memory sync folder (whose clock may also be a little off)."""
    key = os.path.abspath(folder)
    if key in _swept:
        return
    _swept.add(key)
    old = time.time() - STALE_TEMP_AGE
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            if entry.name[:1] != "." or not _OWN_TEMP.fullmatch(entry.name):
                continue
            with contextlib.suppress(OSError):
                if entry.is_file(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_mtime < old:
                    os.unlink(entry.path)


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
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _BINARY
    with _naming(path):
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
    with _naming(path):
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
    """Write a cache file of ``marshal`` values headed by the seal of the rest (``Seal``;
    replaced atomically, never synced): yields ``put``, which appends a value after its length;
    the seal is written when the block ends. Read back with ``sealed_values``. A bytearray or
    memoryview is written as the bytes ``marshal`` would make of it, without a copy (a table of
    megabytes)."""
    digest = Seal()
    with atomic_writer(path, cache=True) as handle:
        handle.write(bytes(Seal.SIZE))

        def put(value: Any) -> None:
            for part in _frames(value):
                digest.update(part)
                handle.write(part)

        yield put
        handle.seek(0)
        handle.write(digest.digest())


def _frames(value: Any) -> tuple:
    """The bytes of one value in a sealed file: its length, then what ``marshal`` makes of it. A
    bytearray, memoryview or array is framed as marshal's bytes without a copy (a table of megabytes)."""
    if isinstance(value, (bytearray, memoryview, array.array)):
        data = memoryview(value).cast("B")
        head = b"s" + len(data).to_bytes(4, "little")  # marshal's bytes: a type and a length
        return (len(head) + len(data)).to_bytes(8, "little"), head, data
    import marshal

    data = marshal.dumps(value)
    return len(data).to_bytes(8, "little"), data  # not joined: a value may be megabytes


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
    with contextlib.suppress(OSError), sealed_writer(path) as put:  # a torn copy fails its seal next time
        put(value)
    return value


def _values(payload: memoryview) -> Iterator[Any]:
    import marshal

    for value in raw_values(payload):
        yield marshal.loads(value)


def raw_values(payload: memoryview) -> Iterator[memoryview]:
    """The ``marshal`` bytes of each value in ``payload`` (a section's, or what follows a sealed
    file's seal), not loaded: a reader may pass over values it does not need."""
    at = 0
    while at + 8 <= len(payload):
        size = int.from_bytes(payload[at:at + 8], "little")
        yield payload[at + 8:at + 8 + size]
        at += 8 + size


@dataclass(frozen=True, slots=True)
class Sections:
    """An appendable sealed file as read (``sealed_sections``): the payload of each whole
    section, oldest first; where the last of them ends; the file's size and identity then."""

    payloads: list[memoryview]
    end: int
    size: int
    identity: tuple[int, int]


class Seal:
    """What tells a torn or damaged cache file (a run killed while writing, a bad disk): the
    CRC-32 of what is written, fed as ``hashlib``'s objects are. The files are lookout's own,
    in the user's cache folder: there is no adversary a cryptographic hash would stop, and
    sha256 took OpenSSL's load and most of a megabyte's hashing from every prompt's measure."""

    SIZE = 4
    __slots__ = ("crc",)

    def __init__(self, data: bytes | memoryview = b"") -> None:
        self.crc = zlib.crc32(data)

    def update(self, data: bytes | memoryview) -> None:
        self.crc = zlib.crc32(data, self.crc)

    def digest(self) -> bytes:
        return self.crc.to_bytes(self.SIZE, "little")


_SECTION_HEAD = 8 + Seal.SIZE  # the payload's length and its seal


MAP_BYTES = 1 << 20  # a file of sections this large is mapped, not read (``sealed_sections``)


def sealed_sections(path: str | os.PathLike) -> Sections | None:
    """The sections ``section_writer`` wrote to ``path``, up to the first one that is torn or
    damaged (its seal does not match, or its head is still blank: a run stopped while
    appending); None when the file is missing. Each payload holds values ``raw_values`` reads.

    A large file is mapped: reading a long session's line memo (15 MB at 500 MB) into fresh
    pages (a few microseconds each on a virtual machine) took longer than summing it; a mapping
    shares the page cache's. A mapped file that shrank would fault past its new end:
    ``section_writer`` never shrinks one (a file is replaced whole, or appended to)."""
    try:
        with open(path, "rb") as handle:
            st = os.fstat(handle.fileno())
            blob: Any = None
            if st.st_size >= MAP_BYTES:
                import mmap

                with contextlib.suppress(OSError, ValueError):  # (a file system that maps no file: read)
                    blob = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
            if blob is None:
                blob = handle.read()
    except OSError:
        return None
    data = memoryview(blob)
    payloads: list[memoryview] = []
    at = 0
    while at + _SECTION_HEAD <= len(data):
        size = int.from_bytes(data[at:at + 8], "little")
        payload = data[at + _SECTION_HEAD:at + _SECTION_HEAD + size]
        if not size or len(payload) != size or Seal(payload).digest() != data[at + 8:at + _SECTION_HEAD]:
            break
        payloads.append(payload)
        at += _SECTION_HEAD + size
    return Sections(payloads, at, len(data), (st.st_dev, st.st_ino))


@contextlib.contextmanager
def section_writer(path: str | os.PathLike, after: Sections | None = None) -> Iterator[Callable[[Any], None]]:
    """Write one section of ``marshal`` values (a cache file, never synced), yielding ``put`` as
    ``sealed_writer`` does: a new file holding only that section, replaced atomically; or, with
    ``after`` (the sections a run read), the section appended to the file: a few bytes for a few
    values instead of the whole file again. The append is made under the file's lock and only
    when the file is still the one read, ending where its last whole section ended: else
    nothing is written (a concurrent run wrote its own, as valid, which the next run reads). A
    run stopped while appending leaves a torn last section, which readers pass over (and the
    next run that writes replaces the file): the file never shrinks under a reader's mapping."""
    if after is None:
        with atomic_writer(path, cache=True) as handle:
            section = _Section(handle)
            yield section.put
            section.close()
        return
    try:
        fd = os.open(path, os.O_RDWR | _BINARY)  # not O_APPEND: the head is written last, in place
    except FileNotFoundError:
        yield lambda value: None
        return
    with _naming(path), open(fd, "r+b") as handle:
        lock.lock(fd)
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != after.identity or st.st_size != after.size or after.end != after.size:
            yield lambda value: None
            return
        handle.seek(after.end)
        section = _Section(handle)
        yield section.put
        section.close()
        handle.flush()


class _Section:
    """One section written to ``handle`` from where it stands: a blank head, the values as
    they are put, then (``close``) the head: the payload's length and seal."""

    def __init__(self, handle: IO[bytes]) -> None:
        self.handle = handle
        self.start = handle.tell()
        self.digest = Seal()
        self.size = 0
        handle.write(bytes(_SECTION_HEAD))

    def put(self, value: Any) -> None:
        for part in _frames(value):
            self.digest.update(part)
            self.handle.write(part)
            self.size += len(part)

    def close(self) -> None:
        self.handle.seek(self.start)
        self.handle.write(self.size.to_bytes(8, "little") + self.digest.digest())
        self.handle.seek(0, os.SEEK_END)


def _read_sealed(path: str | os.PathLike) -> memoryview | None:
    """What follows the seal of a file ``sealed_writer`` wrote, or None when it is missing,
    torn or damaged (its seal does not match): data that ``marshal`` may then read safely."""
    try:
        with open(path, "rb") as handle:
            blob = handle.read()
    except OSError:
        return None
    payload = memoryview(blob)[Seal.SIZE:]  # not a copy
    return payload if len(blob) >= Seal.SIZE and Seal(payload).digest() == blob[:Seal.SIZE] else None


def append_line(path: str | os.PathLike, line: bytes) -> None:
    """Append ``line`` to a log file, batched: the lines go in one write under an exclusive
    lock (so concurrent writers never interleave) at the next sync or every APPEND_BATCH. The
    log is private (0600; made so when lookout next writes to it): it names transcripts."""
    lines = _appends.setdefault(os.path.normpath(path), [])  # (one batch a file, however it is named)
    lines.append(line)
    if len(lines) >= APPEND_BATCH:
        _write_appends()


def _write_appends() -> None:
    batches = list(_appends.items())
    _appends.clear()
    for path, lines in batches:
        data = b"".join(lines)
        with _naming(path):
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _BINARY, 0o600)
            try:
                mode = os.fstat(fd).st_mode
                if mode & 0o077 and hasattr(os, "fchmod"):  # made before logs were private (not on Windows)
                    with contextlib.suppress(OSError):  # (not ours to change: still written)
                        os.fchmod(fd, mode & 0o700)
                lock.lock(fd)
                while data:
                    data = data[os.write(fd, data):]
                lock.unlock(fd)
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
    if len(paths) >= SYNC_ALL_FROM and hasattr(os, "sync"):  # Windows has no sync()
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
