"""The block token-count cache: exact counts, content keys, concurrency, failure tolerance."""

from __future__ import annotations

import hashlib
import multiprocessing as mp
import sqlite3
import subprocess
import sys

import pytest

from lookout_cli.tokens import tokenizer as tokens
from lookout_cli.tokens.cache import CachedCounter, TokenCache, Workers, _encoding_tag, block_key

TEXTS = [
    "def main():\n    return 0\n",
    "Ünïcödé prose — with dashes and 漢字 in it.",
    "a" * 5000,
    "mentions <|endoftext|> literally",
    '{"items": [1, 2, 3], "ok": true}',
]


def test_counts_match_the_tokenizer_and_persist(tmp_path):
    path = tmp_path / "t.sqlite3"
    with TokenCache("o200k_base", path) as cache:
        got = [cache.count(t, tokens.count) for t in TEXTS]
        assert cache.misses == len(TEXTS) and cache.hits == 0
    assert got == [tokens.count(t) for t in TEXTS]
    with TokenCache("o200k_base", path) as again:  # a new process would see the same rows
        assert [again.get(t) for t in TEXTS] == got
        assert again.hits == len(TEXTS)


def test_a_changed_text_or_another_encoding_is_a_miss(tmp_path):
    path = tmp_path / "t.sqlite3"
    with TokenCache("o200k_base", path) as cache:
        cache.count(TEXTS[0], tokens.count)
    with TokenCache("o200k_base", path) as cache:
        assert cache.get(TEXTS[0] + " ") is None
    with TokenCache("cl100k_base", path) as other:
        assert other.get(TEXTS[0]) is None
    assert block_key("o200k_base", "x") != block_key("cl100k_base", "x")


def test_a_key_is_the_same_before_and_after_the_process_hashed_a_megabyte_and_a_few_load_no_openssl():
    """A block's key is the sha256 of its encoding's tag and its text, made by Python's own
    sha256 while a process has hashed under a megabyte (a prompt's keys: OpenSSL not loaded)
    and by OpenSSL's after: the same key either way, so counts cached by one run are found by
    the other."""
    code = (
        "import sys\n"
        "from lookout_cli.tokens.cache import block_key\n"
        "few = [block_key('o200k_base', 'text %d é' % n).hex() for n in range(50)]\n"
        "loaded_after_few = 'hashlib' in sys.modules\n"
        "block_key('o200k_base', 'x' * (2 << 20))\n"
        "print(loaded_after_few, 'hashlib' in sys.modules, *few)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded_after_few, loaded_after_many, *few = done.stdout.split()
    assert (loaded_after_few, loaded_after_many) == ("False", "True")
    tag = _encoding_tag("o200k_base")
    assert few == [hashlib.sha256(tag + ("text %d é" % n).encode()).digest()[:16].hex() for n in range(50)]
    assert few == [block_key("o200k_base", "text %d é" % n).hex() for n in range(50)]


def test_large_tables_are_read_key_by_key(tmp_path):
    path = tmp_path / "t.sqlite3"
    with TokenCache("o200k_base", path) as cache:
        for t in TEXTS:
            cache.count(t, tokens.count)
    with TokenCache("o200k_base", path, preload_limit=1) as cache:
        assert cache._known is None
        assert cache.get(TEXTS[1]) == tokens.count(TEXTS[1])


def test_new_counts_are_written_as_they_pile_up_and_still_found(tmp_path, monkeypatch):
    """A cold run over a long session makes a count per block: they go to the table every
    PENDING_MAX, not all held to the end, and later lookups (same process) find them there."""
    monkeypatch.setattr("lookout_cli.tokens.cache.PENDING_MAX", 4)
    path = tmp_path / "t.sqlite3"
    texts = [f"block {i}" for i in range(10)]
    with TokenCache("o200k_base", path) as cache:
        assert cache._known == {}  # an empty table is read whole
        got = [cache.count(t, tokens.count) for t in texts]
        assert len(cache._pending) == 2 and cache._known == {}  # eight written, none kept here
        assert [cache.get(t) for t in texts] == got
        assert sqlite3.connect(path).execute("SELECT count(*) FROM counts").fetchone()[0] == 8
    assert got == [tokens.count(t) for t in texts]


def _writer(args):
    path, start = args
    with TokenCache("o200k_base", path) as cache:
        for i in range(start, start + 300):
            cache.put(f"text {i}", i)
    return True


def test_concurrent_writers_lose_nothing(tmp_path):
    path = tmp_path / "t.sqlite3"
    TokenCache("o200k_base", path).close()
    with mp.get_context("fork").Pool(4) as pool:
        assert all(pool.map(_writer, [(str(path), k * 200) for k in range(6)]))
    with TokenCache("o200k_base", path) as cache:
        assert all(cache.get(f"text {i}") == i for i in range(0, 1300))
    mode = sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_a_corrupted_cache_file_does_not_stop_counting(tmp_path):
    path = tmp_path / "t.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    with TokenCache("o200k_base", path) as cache:
        assert cache.count(TEXTS[0], tokens.count) == tokens.count(TEXTS[0])
        assert cache.error


def test_cached_counter_counts_like_token_counter(tmp_path):
    counter = CachedCounter(tokens.TokenCounter("o200k_base"), TokenCache("o200k_base", tmp_path / "c.sqlite3"))
    assert counter.count_many(TEXTS) == [tokens.count(t) for t in TEXTS]
    assert counter.count("") == 0
    counter.close()
    warm = CachedCounter(tokens.TokenCounter("o200k_base"), TokenCache("o200k_base", tmp_path / "c.sqlite3"))
    assert warm.count_many(TEXTS) == [tokens.count(t) for t in TEXTS]
    assert warm.cache.misses == 0


@pytest.mark.parametrize("jobs", [1, 2])
def test_counts_in_worker_processes_equal_serial(jobs, monkeypatch):
    import lookout_cli.tokens.cache as tc

    monkeypatch.setattr(tc, "MIN_PARALLEL_CHARS", 0)  # fork even for this small input
    texts = [t * k for k in range(1, 8) for t in TEXTS]
    workers = Workers("o200k_base", jobs)
    assert workers.submit(texts)() == [tokens.count(t) for t in texts]
    assert (workers.pool is not None) == (jobs > 1)  # one job counts here, without a fork
    workers.close()


def test_count_later_counts_in_processes_and_fills_the_cache(tmp_path, monkeypatch):
    import lookout_cli.tokens.cache as tc

    monkeypatch.setattr(tc, "MIN_PARALLEL_CHARS", 0)
    counter = CachedCounter(tokens.TokenCounter("o200k_base"), TokenCache("o200k_base", tmp_path / "c.sqlite3"))
    texts = ["", *TEXTS, *TEXTS]
    assert counter.count_later(texts, jobs=2)() == [0, *[tokens.count(t) for t in TEXTS] * 2]
    counter.close()
    with TokenCache("o200k_base", tmp_path / "c.sqlite3") as cache:
        assert [cache.get(t) for t in TEXTS] == [tokens.count(t) for t in TEXTS]


def test_counts_from_processes_are_not_tokenized_again_without_a_disk_cache(monkeypatch):
    """--no-cache --jobs 2 counted every block in the workers, then once more in the parent."""
    import lookout_cli.tokens.cache as tc

    monkeypatch.setattr(tc, "MIN_PARALLEL_CHARS", 0)
    counter = CachedCounter(tokens.TokenCounter("o200k_base"), None)
    counter.count_later(TEXTS, jobs=2)()
    assert counter.count_many(TEXTS) == [tokens.count(t) for t in TEXTS]
    assert counter.misses == 0  # every count came from the workers
    assert counter.hits == len(TEXTS)


def test_workers_fork_once_and_count_batch_after_batch(monkeypatch):
    """measure --jobs sends the view's texts a batch at a time: the processes are forked at the
    first batch worth it and kept for the rest, and every batch's counts are exact."""
    import lookout_cli.tokens.cache as tc

    monkeypatch.setattr(tc, "MIN_PARALLEL_CHARS", 100)
    workers = tc.Workers("o200k_base", 2)
    small = workers.submit(["hi"])  # not worth a fork: counted here
    assert workers.pool is None and small() == [tokens.count("hi")]
    batches = [[t * k for t in TEXTS] for k in (3, 5, 7)]
    waits = [workers.submit(b) for b in batches]  # all away at once
    pool = workers.pool
    assert pool is not None
    pids = {p.pid for p in pool._pool}
    assert [w() for w in waits] == [[tokens.count(t) for t in b] for b in batches]
    assert workers.pool is pool and {p.pid for p in pool._pool} == pids  # the same processes
    workers.close()
    assert workers.pool is None and all(not p.is_alive() for p in pool._pool)


def test_the_view_sink_keeps_at_most_two_batches_away(monkeypatch):
    """With --jobs the items' texts wait in memory until their batch is counted: no more than
    IN_FLIGHT batches are ever away, and every item gets the count the tokenizer gives."""
    import lookout_cli.meter.item_counts as ic
    import lookout_cli.tokens.cache as tc
    from lookout_cli.core.jsonl import Record
    from lookout_cli.formats.view import TEXT, Item, View

    monkeypatch.setattr(tc, "MIN_PARALLEL_CHARS", 100)
    monkeypatch.setattr(ic, "BATCH_CHARS", 2_000)
    sink = ic.CountingSink(lambda model: CachedCounter(tokens.TokenCounter("o200k_base"), None), jobs=2)
    away = []
    real = sink._flush

    def watch():
        real()
        away.append(len(sink._away))

    monkeypatch.setattr(sink, "_flush", watch)
    view = View(format="test")
    texts = [f"{t} {n}" * (1 + n % 7) for n in range(120) for t in TEXTS[:2]]
    items = [Item("user", TEXT, text, Record(n + 1, b"{}")) for n, text in enumerate(texts)]
    for item in items:
        view.items.append(item)
        sink(view, item)
    counter = sink.finish(view)
    assert max(away) == ic.IN_FLIGHT and len(away) > ic.IN_FLIGHT
    assert [i.tokens for i in items] == [tokens.count(t) for t in texts]
    counter.close()


@pytest.mark.parametrize("cached", [False, True])
def test_counts_learned_are_taken_under_the_counters_own_keys(tmp_path, cached):
    """count_ahead's workers key what they count as the counter does (the block cache's keys,
    else memo keys): a count learned so is the one given, and nothing is tokenized again."""
    cache = TokenCache("o200k_base", tmp_path / "c.sqlite3") if cached else None
    counter = CachedCounter(tokens.TokenCounter("o200k_base"), cache)
    key = (lambda t: block_key("o200k_base", t)) if cached else tokens.memo_key
    counter.learn({key(t): 1000 + n for n, t in enumerate(TEXTS)})  # not their counts: seen if taken
    assert counter.count_later(TEXTS, jobs=2)() == [1000 + n for n in range(len(TEXTS))]
    assert counter.misses == 0
    counter.close()
