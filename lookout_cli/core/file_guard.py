"""The guard hashes that tell whether a file still holds the bytes measured before: a short
BLAKE2b of the bytes just before a line boundary and of the file's head. Kept apart from the
incremental state so that replaying an unchanged measure (:mod:`lookout_cli.meter.replay`) needs no
more than the standard library's os."""

from __future__ import annotations

import os

try:  # Python's own BLAKE2: hashlib would load OpenSSL, a tenth of a re-measure that reads nothing
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - a Python without it
    from hashlib import blake2b

GUARD_BYTES = 64
HEAD_BYTES = 4096


def digest(data: bytes) -> str:
    """A short hex digest of ``data`` for names and guards (not the saved store's sha256)."""
    return blake2b(data, digest_size=20).hexdigest()


def guards(fd: int, offset: int) -> tuple[str, str]:
    """(guard of the bytes before ``offset``, guard of the file's head up to ``offset``) of the
    open file descriptor ``fd``, read without moving its position."""
    start = max(0, offset - GUARD_BYTES)
    return digest(os.pread(fd, offset - start, start)), digest(os.pread(fd, min(HEAD_BYTES, offset), 0))


def stamp(path: str) -> list:
    """``[path, size, modification time]`` of a file, ``[path, None, None]`` when there is none:
    what tells a setup or config file changed."""
    try:
        st = os.stat(path)
    except OSError:
        return [path, None, None]
    return [path, st.st_size, st.st_mtime_ns]
