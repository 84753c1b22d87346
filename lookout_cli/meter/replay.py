"""Replaying a quiet ``measure`` of an unchanged file without loading the rest of lookout
(research/performance.md §4, B8).

Hooks run ``lookout measure --fail-at 85 -q session.jsonl`` after every turn or commit, most
often when nothing was written since. Such a run reuses the figures it found before
(:mod:`lookout_cli.meter.snapshot`), yet loading click, the meter and what they import took
nine tenths of it. So a measure whose only output was the transcript on standard output (and
at most the line of a failed ``--fail-at``) is remembered by its invocation, and when the same
invocation finds the file as it was measured, the file is copied to standard output, that line
printed and that status returned, with nothing imported but this module, file_guard, core.paths
and the standard library's os, sys, errno, marshal and _blake2.

The same invocation: the same arguments, working folder, environment (every variable:
``LOOKOUT_*``, ``XDG_*`` and what click reads alike), terminals on the standard streams, config
files (the user's, and ``.lookout.toml`` in the working folder and each folder above it, by
size and time), lookout's version (and this file's time: a reinstall) and Python. The same
file: what the snapshot checks (device, inode, size, modification time, guard hashes) and its
setup files (``--system``…, CLAUDE.md, AGENTS.md) unchanged. The same invocation over a file
that changed (the agent appended a turn) runs the measure again with the flags click read for
it then (``recorded_flags``), without loading click (a tenth of such a run). Anything else
runs lookout as usual, which records the invocation anew.

One small file per arguments and folder, in the cache folder's ``state/``, written with marshal
(reading it back loads no JSON parser) and replaced atomically.
"""

from __future__ import annotations

import errno
import marshal
import os
import sys

from lookout_cli import __version__
from lookout_cli.core.file_guard import digest, guards, stamp
from lookout_cli.core.paths import cache_folder, user_config_file

SCHEMA = 1
CLOSED_STDOUT = "standard output is closed"
PROJECT_CONFIG = ".lookout.toml"  # config.PROJECT_FILE: config is more to import

_invocation: tuple[str, str] | None = None  # (entry file, fingerprint) of this run, when it may be recorded
_measured: tuple | None = None  # (file, offset, mtime_ns, setup stamps) this run's figures describe
_flags: dict | None = None  # what click read for this invocation when it was recorded


def config_stamps(cwd: str) -> list[list]:
    """The config files a run in ``cwd`` may read (config.Config), present or not."""
    stamps = [stamp(user_config_file())]
    folder = os.path.realpath(cwd)
    while True:
        stamps.append(stamp(os.path.join(folder, PROJECT_CONFIG)))
        parent = os.path.dirname(folder)
        if parent == folder:
            return stamps
        folder = parent


def _text_digest(value: object) -> str:
    return digest(repr(value).encode("utf-8", "surrogatepass"))


def replay(args: list[str]) -> int | None:
    """Replay ``lookout`` run with ``args`` when a run the same found the same file, and give
    its exit status; else None (lookout runs, and this invocation may be recorded)."""
    if args[:1] != ["measure"]:
        return None
    try:
        return _replay(args)
    except KeyboardInterrupt:
        _say("lookout: interrupted")
        return 130


def _replay(args: list[str]) -> int | None:
    global _invocation, _flags
    try:
        cwd = os.getcwd()
        where = os.path.join(cache_folder(), "state", f"replay-{_text_digest((sys.executable, args, cwd))[:32]}.bin")
        # this file's time too: a reinstall of the same version is other code
        key = _text_digest((SCHEMA, __version__, sys.executable, stamp(__file__), args, cwd,
                            sorted(os.environ.items()), [os.isatty(fd) for fd in (0, 1, 2)], config_stamps(cwd)))
    except (OSError, ValueError):  # no working folder, say: run as usual
        return None
    _invocation = (where, key)
    try:
        with open(where, "rb") as handle:
            entry = marshal.load(handle)
        if entry["key"] != key:
            return None
        _flags = entry.get("flags")
        identity, hashes, status, message = entry["stat"], entry["guards"], entry["status"], entry["message"]
        setup = [(s[0], s) for s in entry["setup"]]
        fd = os.open(entry["file"], os.O_RDONLY)
    except (OSError, EOFError, ValueError, TypeError, KeyError, IndexError):
        return None  # none yet, another invocation's or damaged: run as usual
    try:
        st = os.fstat(fd)
        if ((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) != identity or guards(fd, st.st_size) != hashes
                or any(stamp(path) != was for path, was in setup)):
            return None
        return _copy_out(fd, message, status)
    finally:
        os.close(fd)


def recorded_flags() -> dict | None:
    """What click read for this invocation when it was recorded (after ``replay`` found its
    file changed since: a measure can run again with them, without click); else None."""
    return _flags


def _say(line: str) -> None:
    try:
        os.write(2, (line + "\n").encode("utf-8", "surrogateescape"))
    except OSError:
        pass


def _copy_out(fd: int, message: str | None, status: int) -> int:
    """The file ``fd`` to standard output (as ``measure`` passes it through), then ``message``."""
    out = 1  # the descriptor, whatever sys.stdout became (None when it is closed)
    offset = 0
    try:
        try:
            while sent := os.sendfile(out, fd, offset, 1 << 30):
                offset += sent
        except BrokenPipeError:
            raise
        except (AttributeError, OSError):  # no sendfile, or an output it cannot write to (opened to
            # append, say): copy through memory
            while block := os.pread(fd, 1 << 20, offset):
                view = memoryview(block)
                while view:
                    view = view[os.write(out, view):]
                offset += len(block)
    except BrokenPipeError:  # the reader went away (| head): 141, silently, as lookout does
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, out)
        return 141
    except OSError as exc:
        _say(f"lookout: error: {CLOSED_STDOUT if exc.errno == errno.EBADF else exc.strerror or exc}")
        return 2
    if message:
        _say(message)
    return status


def seen(path: str, offset: int, mtime_ns: int, setup: list[list]) -> None:
    """Note that this run's figures describe the first ``offset`` bytes of ``path`` as modified
    at ``mtime_ns``, with these setup files (``file_guard.stamp``) as they were."""
    global _measured
    _measured = (path, offset, mtime_ns, [list(s) for s in setup])


def remember(status: int, message: str | None, flags: dict | None = None) -> None:
    """Record this run, which wrote only the transcript to standard output, ``message`` to
    standard error and ends with ``status``, to be replayed (when ``seen`` was told what its
    figures describe), and ``flags``, what click read, to run it again without click once the
    file has changed (``recorded_flags``). Best effort: a cache that cannot be written only
    costs speed."""
    if _invocation is None or _measured is None:
        return
    where, key = _invocation
    path, offset, mtime_ns, setup = _measured
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            st = os.fstat(fd)
            if (st.st_size, st.st_mtime_ns) != (offset, mtime_ns):
                return  # written since it was measured
            entry = {"schema": SCHEMA, "key": key, "file": os.path.abspath(path), "guards": guards(fd, offset),
                     "stat": (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns), "setup": setup,
                     "status": int(status), "message": message, "flags": flags}
        finally:
            os.close(fd)
        from lookout_cli.core.fsutil import atomic_write

        try:
            data = marshal.dumps(entry)
        except ValueError:  # a flag marshal cannot hold: replayed, never run again without click
            data = marshal.dumps({**entry, "flags": None})
        atomic_write(where, data, cache=True)
    except (OSError, ValueError):
        pass
