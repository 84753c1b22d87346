"""Which files a report reads, and each file's row kept for the next run.

The rows of the files read last time are kept in one file in the cache folder
(``report/rows.marshal``), each with the identity it was read at (device, inode, size and
modification time in nanoseconds): a file that still has it is not opened again, so an
unchanged file costs the ``stat`` of finding it. A file that changed is read again whole (the
pass reads only its usage lines). Rows missing from the cache are worked out in ``jobs``
worker processes when there are many.
"""

from __future__ import annotations

import marshal
import os
import signal
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

from lookout_cli import __version__
from lookout_cli.core import paths
from lookout_cli.core.fsutil import atomic_write
from lookout_cli.fleet.row import ROW_VERSION

INDEX_VERSION = 2  # 2: requests packed
PER_JOB = 8  # files handed to a worker at a time


def _models_file() -> tuple[int, int]:
    """The shipped models file's size and time (its prices and windows are in the rows)."""
    try:
        st = os.stat(Path(__file__).parent.parent / "data" / "models.toml")
    except OSError:
        return (0, 0)
    return (st.st_size, st.st_mtime_ns)


def agent_folders(environ: dict | None = None) -> list[Path]:
    """The agents' own folders: Claude Code's ``projects`` in each of ``$CLAUDE_CONFIG_DIR``,
    else in ``~/.config/claude`` and ``~/.claude``; Codex's ``sessions`` in each of
    ``$CODEX_HOME``, else in ``~/.codex`` (each variable a comma-separated list, as ccusage
    reads them). Only those that exist."""
    env = os.environ if environ is None else environ
    home = Path(env.get("HOME") or Path.home())

    def listed(name: str) -> list[Path]:
        return [Path(p.strip()).expanduser() for p in env.get(name, "").split(",") if p.strip()]

    claude = listed("CLAUDE_CONFIG_DIR") or [home / ".config" / "claude", home / ".claude"]
    codex = listed("CODEX_HOME") or [home / ".codex"]
    found = []
    for folder in [c / "projects" for c in claude] + [c / "sessions" for c in codex]:
        if folder.is_dir() and folder.resolve() not in [f.resolve() for f in found]:
            found.append(folder)
    return found


def walk(roots: list[str | os.PathLike]) -> Iterator[tuple[str, tuple[int, int, int, int]]]:
    """(path, identity) of every ``*.jsonl`` file under ``roots`` (a root that is a file is
    taken whatever its name), each once. A root that does not exist raises FileNotFoundError."""
    seen: set[tuple[int, int]] = set()
    for root in roots:
        root = os.fspath(root)
        st = os.stat(root)
        if not os.path.isdir(root):
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                yield root, (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
            continue
        stack = [root]
        while stack:
            folder = stack.pop()
            try:
                entries = sorted(os.scandir(folder), key=lambda e: e.name)
            except OSError:
                continue  # a folder that cannot be listed holds nothing to report
            for entry in entries:
                try:
                    if entry.is_dir():
                        stack.append(entry.path)
                    elif entry.name.endswith(".jsonl") and entry.is_file():
                        st = entry.stat()
                        if (st.st_dev, st.st_ino) not in seen:
                            seen.add((st.st_dev, st.st_ino))
                            yield entry.path, (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
                except OSError:
                    continue


class Index:
    """The rows kept from the last run, for one setting of the meter's levels."""

    def __init__(self, amber: float | None, red: float | None, use: bool = True) -> None:
        # a row holds costs and windows: another lookout or models file makes them anew
        self.key = (INDEX_VERSION, ROW_VERSION, __version__, _models_file(), amber, red)
        self.path = paths.cache_dir() / "report" / "rows.marshal"
        self.use = use
        self.rows: dict[str, tuple] = {}
        if use:
            try:
                kept = marshal.loads(self.path.read_bytes())
                if isinstance(kept, dict) and kept.get("key") == self.key:
                    self.rows = kept["rows"]
            except (OSError, ValueError, EOFError, TypeError, KeyError):
                pass  # none yet, or unreadable: every file is read

    def get(self, path: str, identity: tuple) -> dict | None:
        kept = self.rows.get(path)
        return kept[1] if kept is not None and kept[0] == identity else None

    def save(self, found: dict[str, tuple[tuple, dict]]) -> None:
        """Keep the rows of this run's files (and of files other runs read, still there)."""
        if not self.use:
            return
        rows = {p: kept for p, kept in self.rows.items() if p not in found and os.path.exists(p)}
        rows.update((p, (identity, _kept(row))) for p, (identity, row) in found.items())
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path, marshal.dumps({"key": self.key, "rows": rows}), cache=True)
        except OSError:
            pass  # a read-only cache folder: the next run reads the files again


def _kept(row: dict) -> dict:
    """A row as the index keeps it: its requests packed (marshal bytes, unpacked by
    ``aggregate`` only when it needs them one by one) and their keys beside them, so that
    loading the index does not build every request's list."""
    requests = row["requests"]
    if type(requests) is bytes:
        return row  # reused: kept so already
    return row | {"keys": [entry[0] for entry in requests if entry[0] is not None],
                  "requests": marshal.dumps(requests)}


def rows(roots: list[str | os.PathLike], amber: float | None = None, red: float | None = None, jobs: int = 1,
         cache: bool = True, progress: Callable[[int], None] | None = None) -> tuple[list[dict], int]:
    """The row of every transcript under ``roots`` (a reused one with its requests packed:
    ``_kept``), and how many were read (not reused), in
    ``jobs`` processes (one: this one; the pass is cheap, so more pay only on many files and
    idle CPUs)."""
    index = Index(amber, red, cache)
    found: dict[str, tuple[tuple, dict]] = {}
    todo: list[tuple[str, tuple]] = []
    for path, identity in walk(roots):
        row = index.get(path, identity)
        if row is None:
            todo.append((path, identity))
        else:
            found[path] = (identity, row)
    step = partial(_scan_path, amber=amber, red=red)
    for (path, identity), row in zip(todo, _map(step, [p for p, _ in todo], jobs)):
        found[path] = (identity, row)
        if progress is not None:
            progress(1)
    if todo:
        index.save(found)
    return [row for _, row in found.values()], len(todo)


def _scan_path(path: str, amber: float | None, red: float | None) -> dict:
    from lookout_cli.fleet.scan import scan  # not loaded when every row is reused

    return scan(path, amber=amber, red=red)


def _quiet_worker() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it stops the workers


def _map(step: Callable[[str], dict], todo: list[str], jobs: int) -> Iterator[dict]:
    """``step`` over ``todo`` in order, in ``jobs`` processes when that pays."""
    jobs = min(jobs, max(1, len(todo) // PER_JOB))
    if jobs <= 1:
        yield from map(step, todo)
        return
    import multiprocessing

    from lookout_cli.fleet.scan import prepare

    prepare()  # loaded once here, not in every worker: they are forked from this process
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    pool = context.Pool(jobs, initializer=_quiet_worker)
    try:
        yield from pool.imap(step, todo, chunksize=PER_JOB)
        pool.close()
    finally:
        pool.terminate()
        pool.join()
