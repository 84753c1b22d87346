"""Exclusive locks between processes on an open file: ``flock`` on POSIX, ``msvcrt.locking``
on Windows, the operating system's own locks on either.

Such a lock dies with its process, however it ends: a killed run leaves its lock file behind,
unlocked, never a stale lock to clear by hand. Both modules are built in (nothing to import
from disk on a hook's path). The lock belongs to the open file: two opens of one path conflict,
in one process as in two.
"""

from __future__ import annotations

import errno
import os
import time

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

# Windows locks are mandatory (a locked byte cannot be read by anyone else): lock one byte far
# past what a log ever holds, as SQLite does, so that readers of a locked log are not refused.
_WINDOWS_BYTE = 1 << 30
_HELD = (errno.EACCES, errno.EAGAIN, errno.EDEADLK)  # another process holds it


def try_lock(fd: int) -> bool:
    """Take the exclusive lock on the open file ``fd``: False when another holder has it."""
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        else:
            _windows(fd, "LK_NBLCK")
    except OSError as exc:
        if exc.errno in _HELD:
            return False
        raise
    return True


def lock(fd: int, timeout: float | None = None) -> bool:
    """Wait for the exclusive lock on ``fd``, at most ``timeout`` seconds (None: as long as it
    takes); False when the time ran out."""
    if timeout is None and fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return True
    deadline = None if timeout is None else time.monotonic() + timeout
    delay = 0.002
    while not try_lock(fd):
        if deadline is not None and time.monotonic() > deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.05)
    return True


def unlock(fd: int) -> None:
    """Release the lock taken on ``fd`` (closing the file releases it too)."""
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_UN)
    else:
        _windows(fd, "LK_UNLCK")


def _windows(fd: int, mode: str) -> None:
    import msvcrt  # only Windows has it: imported here so the rest of this module imports anywhere

    where = os.lseek(fd, 0, os.SEEK_CUR)
    os.lseek(fd, _WINDOWS_BYTE, os.SEEK_SET)  # msvcrt.locking locks from the file position
    try:
        msvcrt.locking(fd, getattr(msvcrt, mode), 1)
    finally:
        os.lseek(fd, where, os.SEEK_SET)
