"""A block token-count cache on disk, keyed by content hash (research/performance.md §4).

Counting is 84% of a cold ``measure``. A transcript that was rewritten (``compact -i``,
cleared content, a forked session) is mostly the same blocks as before, so their counts
are looked up instead of tokenized again. The store is stdlib sqlite3 in
``paths.cache_dir()/tokens.sqlite3``: a ``WITHOUT ROWID`` table of a 16-byte key
(sha256 of the encoding's pinned rank hash, a NUL and the UTF-8 text) and the count; WAL mode
and a busy timeout make it safe when git hooks run at the same time; new counts are written
in one transaction when the run ends. A small table is preloaded into a dict (about 10 ms
for 200k rows), a large one is asked key by key.

The key names the encoding by the sha256 of its rank file, so a count can never be served
for another encoding; the text is hashed whole, so a changed block is always a miss. Only
exact (tokenizer) counts are stored: the estimate is cheaper than a lookup.

If the cache cannot be opened or written (read-only home, a corrupted file), counting goes
on without it: a cache never makes a run fail.

``Workers`` spread the distinct texts of a cold pass over worker processes (``--jobs``):
tiktoken holds the GIL for short texts and runs slower on threads other than the one that
first used it (§2.5), so processes, forked once after the encoding is loaded and fed batch
after batch while the view is built.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterable

from lookout_cli.core import hashing, paths
from lookout_cli.core.errors import LookoutError
from lookout_cli.tokens.tokenizer import memo_key

FILENAME = "tokens.sqlite3"
PRELOAD_LIMIT = 200_000
PENDING_MAX = 16_384  # new counts held before they are written (each a 16-byte key and a number)
BUSY_TIMEOUT_MS = 10_000
LOOKUP_CHARS = 256  # shorter texts: see ``TokenCache.get``
SCHEMA = "CREATE TABLE IF NOT EXISTS counts (key BLOB PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID"


def _encoding_tag(encoding: str) -> bytes:
    from lookout_cli.tokens.tokenizer import ENCODINGS

    spec = ENCODINGS.get(encoding)
    return (spec.sha256 if spec else encoding).encode() + b"\0"


def block_key(encoding: str, text: str) -> bytes:
    """The cache key of ``text`` counted in ``encoding``: 16 bytes of sha256."""
    return _key(_encoding_tag(encoding), text)


def _key(tag: bytes, text: str) -> bytes:
    """``block_key`` from the encoding's tag (``hashing``'s sha256: a prompt's few keys load no
    OpenSSL; the text is not joined to the tag, which would copy it)."""
    return hashing.sha256(tag, text.encode("utf-8", "surrogatepass")).digest()[:16]


class TokenCache:
    """Counts by content hash, in sqlite; ``get``/``put`` then ``flush`` (or use as a context manager)."""

    def __init__(self, encoding: str, path: str | os.PathLike | None = None,
                 preload_limit: int = PRELOAD_LIMIT) -> None:
        self.encoding = encoding
        # (a name as text: pathlib is more to import on a prompt's path)
        self.path = os.fspath(path) if path is not None else os.path.join(paths.cache_folder(), FILENAME)
        self._tag = _encoding_tag(encoding)
        self._known: dict[bytes, int] | None = None  # the table read whole, when small
        self._pending: dict[bytes, int] = {}
        self._spilled = False  # counts written since the table was read are only in it
        self.hits = 0
        self.misses = 0
        self.error: str | None = None
        self._db: sqlite3.Connection | None = None
        try:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
            db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute(SCHEMA)
            self._db = db
            rows = db.execute("SELECT count(*) FROM counts").fetchone()[0]
            if rows <= preload_limit:
                self._known = dict(db.execute("SELECT key, n FROM counts"))
        except (sqlite3.Error, OSError) as exc:
            self._fail(exc)

    def _fail(self, exc: Exception) -> None:
        self.error = f"token cache {self.path}: {exc}"
        if self._db is not None:
            try:
                self._db.close()
            except sqlite3.Error:
                pass
        self._db = None
        if self._known is None:
            self._known = {}

    def key(self, text: str) -> bytes:
        return _key(self._tag, text)

    def get(self, text: str, key: bytes | None = None, spilled: bool = True) -> int | None:
        """``text``'s count, if known; with ``spilled`` False, not looked for among the counts
        this run wrote (in the table, not read back) once the table was read whole."""
        key = key or self.key(text)
        n = self._pending.get(key)
        if n is None and self._known is not None:
            n = self._known.get(key)
        if n is None and (self._known is None or (self._spilled and spilled)) and self._db is not None:
            try:
                row = self._db.execute("SELECT n FROM counts WHERE key = ?", (key,)).fetchone()
            except sqlite3.Error as exc:
                self._fail(exc)
                row = None
            n = row[0] if row else None
        if n is None:
            self.misses += 1
        else:
            self.hits += 1
        return n

    def put(self, text: str, n: int, key: bytes | None = None) -> None:
        self._pending[key or self.key(text)] = int(n)
        if len(self._pending) >= PENDING_MAX:
            self.flush()

    def add(self, counts: dict[bytes, int]) -> None:
        """Counts made elsewhere, by their keys."""
        self._pending.update(counts)
        if len(self._pending) >= PENDING_MAX:
            self.flush()

    def count(self, text: str, counter: Callable[[str], int]) -> int:
        """``text``'s count from the cache, else ``counter(text)`` (remembered)."""
        key = self.key(text)
        # a short text is counted again rather than looked for among this run's own counts:
        # a lookup in the table costs more than tokenizing a few hundred characters
        n = self.get(text, key, len(text) >= LOOKUP_CHARS)
        if n is None:
            n = counter(text)
            self.put(text, n, key)
        return n

    def flush(self) -> int:
        """Write the new counts in one transaction (and let go of them: a cold run over a long
        session makes hundreds of thousands); returns how many were written."""
        if not self._pending or self._db is None:
            return 0
        items = list(self._pending.items())
        try:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany("INSERT OR IGNORE INTO counts (key, n) VALUES (?, ?)", items)
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            try:
                self._db.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            self._fail(exc)
            return 0
        self._spilled = True
        self._pending = {}
        return len(items)

    def close(self) -> None:
        self.flush()
        if self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self) -> TokenCache:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class CachedCounter:
    """A ``TokenCounter`` that asks the disk cache before tokenizing.

    Same interface as ``lookout_cli.tokens.tokenizer.TokenCounter`` (``count``, ``count_many``,
    ``encoding``, ``exact``, ``label``, ``hits``, ``misses``) for an exact counter (estimates
    are cheaper than a lookup: ``counter_for`` does not wrap them). The encoding loads only at
    the first miss, so a fully cached run never loads a tokenizer. ``count_later`` counts many
    texts at once, in ``jobs`` processes when that pays.
    """

    def __init__(self, counter, cache: TokenCache | None = None) -> None:
        self.inner = counter
        self.encoding = counter.encoding
        self.exact = counter.exact
        self.cache = cache
        # Without the disk cache, counts are remembered here; with it, the cache's own tables
        # are the memo. Keys, not texts: a lean measure lets the texts go once counted.
        self._memo: dict[object, int] = {}
        self._memo_hits = 0
        self._tokenized = 0  # texts tokenized in this process
        self._workers: Workers | None = None  # ``count_later``'s processes, kept for the run

    @property
    def hits(self) -> int:
        return self._memo_hits + (self.cache.hits if self.cache else 0)

    @property
    def misses(self) -> int:
        return self.cache.misses if self.cache else self._tokenized

    @property
    def label(self) -> str:
        return self.inner.label

    def _tokenize(self, text: str) -> int:
        self._tokenized += 1
        return self.inner.count_fresh(text)

    def count(self, text: str) -> int:
        if not text:
            return 0
        if self.cache is not None:
            return self.cache.count(text, self._tokenize)
        key = memo_key(text)
        n = self._memo.get(key)  # also what ``count_later`` counted in other processes
        if n is not None:
            self._memo_hits += 1
            return n
        n = self._memo[key] = self._tokenize(text)
        return n

    def count_many(self, texts: Iterable[str]) -> list[int]:
        return [self.count(t) for t in texts]

    def count_later(self, texts: list[str], jobs: int = 1) -> Callable[[], list[int]]:
        """``count_many`` with the distinct texts not yet known counted in ``jobs`` processes;
        it returns while they count: call what it returns to wait for the counts (the caller
        goes on reading meanwhile)."""
        cache = self.cache
        keys = [(cache.key(t) if cache is not None else memo_key(t)) if t else None for t in texts]
        todo: dict[object, str] = {}
        for t, key in zip(texts, keys):
            if key is None or key in todo:
                continue
            known = cache.get(t, key, len(t) >= LOOKUP_CHARS) if cache is not None else self._memo.get(key)
            if known is None:
                todo[key] = t
        fresh = list(todo.values())
        if self._workers is None:
            self._workers = Workers(self.encoding, jobs)
        counting = self._workers.submit(fresh)

        def wait() -> list[int]:
            for key, t, n in zip(todo, fresh, counting()):
                if cache is not None:
                    cache.put(t, n, key)
                else:
                    self._memo[key] = n
            if cache is not None:
                return [0 if key is None else cache.get(t, key) for t, key in zip(texts, keys)]
            return [0 if key is None else self._memo[key] for key in keys]

        return wait

    def adopt(self, ahead) -> bool:
        """Take the counts of ``ahead`` (count_ahead.Ahead, started before this counter was
        made) when they are this counter's: the same encoding, keyed as this counter keys them
        (``learn``); and count later in its workers, if it has some and none run here yet."""
        if ahead.encoding != self.encoding or ahead.cached != (self.cache is not None):
            return False
        if ahead.workers is not None:
            if self._workers is not None:
                return False
            self._workers = ahead.workers
        return True

    def learn(self, counts: dict) -> None:
        """Counts made elsewhere (count_ahead), keyed as this counter keys them: by the block
        cache's keys, else by ``tokens.tokenizer.memo_key``."""
        if self.cache is None:
            self._memo.update(counts)
        else:
            self.cache.add(counts)

    def close(self) -> None:
        if self._workers is not None:
            self._workers.close()
        if self.cache is not None:
            self.cache.close()


def counter_for(model: str | None, exact: bool = True, cache: bool = True, jobs: int = 1):
    """The token counter for ``model``: its encoding through the block-count cache (so what
    one command counted the next need not), unless ``cache`` is off; wrapped also when ``jobs``
    > 1, to keep what ``count_later`` counts in other processes."""
    from lookout_cli.tokens.tokenizer import TokenCounter

    counter = TokenCounter.for_model(model, exact=exact)
    if not counter.exact or (not cache and jobs <= 1):
        return counter
    return CachedCounter(counter, TokenCache(counter.encoding) if cache else None)


# --- processes for cold passes ------------------------------------------------------------

_LENGTH = None  # the workers' count function: set before the fork, so every worker (and a replacement) has it
MIN_PARALLEL_CHARS = 2_000_000  # below this a fork costs more than it saves
KILL_WAIT = 2.0  # seconds the workers' pool gets to stop once they are killed


def _leave_interrupts_to_the_parent() -> None:
    """In a worker: Ctrl-C reaches the whole process group, and a worker it stopped mid-task
    could leave the pool's queues locked (the parent then waited forever to stop it); the
    parent is interrupted, terminates the workers and exits 130."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _count_texts(texts: list[str]) -> list[int]:
    length = _LENGTH
    return [length(t) for t in texts]


class Workers:
    """Processes that count texts exactly, forked once after the encoding is loaded (so they
    share it) and then fed batch after batch (``measure --jobs``: the view goes on being built
    while they count). Only the texts go to them and the counts come back."""

    def __init__(self, encoding: str, jobs: int) -> None:
        self.encoding = encoding
        self.jobs = jobs
        self.pool = None

    def start(self) -> bool:
        """Load the encoding and fork the processes now (False where there is no fork)."""
        global _LENGTH
        from lookout_cli.tokens.tokenizer import exact_length

        if self.pool is None and self.jobs > 1:
            ctx = _fork_context()
            if ctx is not None:
                _LENGTH = exact_length(self.encoding)
                self.pool = ctx.Pool(self.jobs, initializer=_leave_interrupts_to_the_parent)
        return self.pool is not None

    def submit(self, texts: list[str]) -> Callable[[], list[int]]:
        """Start counting ``texts``; call what it returns for the counts. The first batch worth
        a fork starts the processes; until then (and where there is no fork) this process counts."""
        if not texts:  # (all known: no encoding loaded for none)
            return list
        total = sum(len(t) for t in texts)
        if self.pool is None and not (total >= MIN_PARALLEL_CHARS and len(texts) >= 2 and self.start()):
            from lookout_cli.tokens.tokenizer import count, count_left

            count_left(total, self.encoding)
            counts = [count(t, self.encoding) for t in texts]
            return lambda: counts
        # slices of about equal characters, two per worker so a huge block does not stall one
        pieces, bounds, start, acc = self.jobs * 2, [], 0, 0
        step = total / pieces or 1
        for i, t in enumerate(texts):
            acc += len(t)
            if acc >= step * (len(bounds) + 1):
                bounds.append((start, i + 1))
                start = i + 1
        if start < len(texts):
            bounds.append((start, len(texts)))
        pending = self.pool.map_async(_count_texts, [texts[a:b] for a, b in bounds], chunksize=1)

        def wait() -> list[int]:
            try:
                counts = [n for part in pending.get() for n in part]
            except BaseException:
                self.close(kill=True)
                raise
            if len(counts) != len(texts):
                raise LookoutError("counting in worker processes failed; try --jobs 1")
            return counts

        return wait

    def close(self, kill: bool = False) -> None:
        """Let the processes finish (``kill``: stop them now, on Ctrl-C or a failure)."""
        if self.pool is None:
            return
        pool, self.pool = self.pool, None
        if not kill:
            pool.close()
            pool.join()
            return
        # ``Pool.terminate`` stops the workers, then waits for the thread that sends them
        # batches: one caught sending a batch larger than the pipe holds to a worker that is
        # gone waits forever (seen under load on Ctrl-C). It gets a moment; the run ends anyway.
        import threading

        stopping = threading.Thread(target=pool.terminate, daemon=True)
        stopping.start()
        stopping.join(KILL_WAIT)


def _fork_context():
    """multiprocessing's fork context, or None where there is no fork."""
    import multiprocessing as mp

    try:
        return mp.get_context("fork")
    except ValueError:
        return None
