"""Atomic file writes: a temp file in the same folder, fsync, rename.

Writes that may come by the thousand (one saved output per cleared tool result) can defer
their fsync: :func:`atomic_write` with ``durable=False`` renames the file into place at once
and leaves it pending; :func:`sync_pending` makes everything pending durable in one go (one
``sync`` for a large batch instead of two fsyncs a file). Every atomic replace syncs what is
pending *before* its own file, so a transcript never reaches the disk ahead of the saved
outputs it names; so does an exit.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

_pending: dict[Path, None] = {}  # files written but not yet fsynced, in order
SYNC_ALL_FROM = 32  # from this many files one sync() of every filesystem is the cheaper way


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike, mode: int | None = None, durable: bool = True) -> Iterator[IO[bytes]]:
    """Yield a binary file that replaces ``path`` only when the block ends without error."""
    path = Path(path)
    if durable:
        sync_pending()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
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
    else:
        _pending[path] = None


def atomic_write(path: str | os.PathLike, data: bytes, durable: bool = True) -> None:
    with atomic_writer(path, durable=durable) as handle:
        handle.write(data)


@atexit.register
def sync_pending() -> None:
    """Make every file written with ``durable=False`` durable, with the folders naming them."""
    if not _pending:
        return
    paths = list(_pending)
    _pending.clear()
    if len(paths) >= SYNC_ALL_FROM:
        os.sync()
        return
    for path in [*paths, *dict.fromkeys(p.parent for p in paths)]:
        _fsync_dir(path)


def _fsync_dir(folder: Path) -> None:
    """fsync a folder (or a file) by path; best effort."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
