"""The per-prompt counting path (tokens/lite.py): encode_ordinary's counts without tiktoken's core.

Compared text by text with tiktoken on every text of the real transcripts, the repository's
own sources and hand-picked edge cases, in both shipped encodings; a measure of a grown file
never loads tiktoken for a prompt's worth of new text, and gives the counts a cold run gives.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from conftest import REPO, SHARED_TRANSCRIPTS, real_transcripts, run_lookout

from lookout_cli.tokens import lite
from lookout_cli.tokens import tokenizer as tokens

EDGES = [
    "Hello, world!", "don't it's WE'LL they'Re ſ's 'S K", "<|endoftext|> and <|fim_prefix|>x<|endofprompt|>",
    "lone surrogate \ud800 inside", "\ud83d", "数字 日本語 한국어 עברית русский 👩‍💻🚀✨ naïve e\u0301",
    "   \n\n\r\n\t\t  x  \n   ", "0123456789 3.14159 1e-10 0xdeadbeef", "=" * 40 + "-" * 33, "a" * 300,
    "x" * 5000, "aGVsbG8gd29ybGQ" * 20, "//usr/local/bin/../lib\\\\path", "\u2028\u2029\x00\x7f",
]


def _texts() -> list[str]:
    out = list(EDGES)
    for path in sorted(SHARED_TRANSCRIPTS.rglob("*.jsonl")):
        for line in path.read_bytes().splitlines():
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            stack = [obj]
            while stack:  # every string in the line: texts, ids, commands, base64
                v = stack.pop()
                if isinstance(v, str):
                    out.append(v)
                elif isinstance(v, dict):
                    stack += v.values()
                elif isinstance(v, list):
                    stack += v
    for path in sorted((REPO / "lookout_cli" / "tokens").glob("*.py")):
        out.append(path.read_text())
    return list(dict.fromkeys(out))  # each text once


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ranks")
    made = {}
    for name in ("o200k_base", "cl100k_base"):
        ranks_path = folder / f"ranks-{name}.marshal"
        lite.ensure_table(ranks_path, tokens.read_ranks(name))
        made[name] = lite.lite_counter(tokens._spec(name).pat_str, ranks_path)
    return made


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_counts_equal_encode_ordinary(tables, name, monkeypatch):
    monkeypatch.setattr(lite, "MERGES_MAX", 1 << 30)  # (every text with one counter: the guard is tested below)
    counter, enc = tables[name], tokens.get_encoding(name)
    texts = _texts()
    assert len(texts) > 2500
    counted = [(t, counter(t)) for t in texts]
    assert sum(n is None for _, n in counted) <= len(texts) // 100  # long unknown pieces: left to tiktoken
    wrong = [(t[:60], n, len(enc.encode_ordinary(t))) for t, n in counted if n is not None
             and n != len(enc.encode_ordinary(t))]
    assert wrong == []


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_an_ascii_text_is_split_by_re_as_the_regex_package_splits_it(name):
    """``ascii_splitter`` (the pattern spelled for Python's ``re``) gives the ``regex``
    package's pieces of every ASCII text of the corpus, of every pair of ASCII characters and
    of runs that mix letters, digits, spaces, contractions and the separators Python's ``re``
    counts as white space and Unicode does not (\\x1c-\\x1f)."""
    import itertools

    import regex

    pattern = tokens._spec(name).pat_str
    ours, theirs = lite.ascii_splitter(pattern), regex.compile(pattern).findall
    chars = [chr(c) for c in range(128)]
    texts = [t for t in _texts() if t.isascii()]
    texts += ["".join(pair) for pair in itertools.product(chars, repeat=2)]
    texts += ["".join(run) for run in itertools.product(["a", "B", "7", " ", "\n", "\r", "\x1c", "'s", "'LL", "/", "_", "\t"],
                                                         repeat=3)]
    assert len(texts) > 16_000
    assert [t for t in texts if ours(t) != theirs(t)] == []


def test_a_pattern_it_cannot_spell_for_re_is_split_by_the_regex_package():
    assert lite.ascii_splitter(r"\p{Greek}+|\s") is None  # a class it does not know
    assert lite.ascii_splitter(r"[^\S\n]") is None  # \S inside a class
    assert lite.ascii_splitter(r"[\p{Lt}]") is None  # a class with nothing of ASCII in it


def test_a_damaged_table_is_not_used(tmp_path):
    ranks_path = tmp_path / "ranks-x.marshal"
    lite.ensure_table(ranks_path, {b"a": 0, b"b": 1, b"ab": 2})
    table = Path(lite.table_path(ranks_path))
    assert lite.Table.open(table).rank(b"ab") == 2
    data = bytearray(table.read_bytes())
    data[-1] ^= 1
    table.write_bytes(bytes(data))
    assert lite.Table.open(table) is None
    table.write_bytes(b"LKBPE")
    assert lite.Table.open(table) is None


class _Sums:
    """zlib as lite.py sees it, counting the sums of a table (``Table.open``)."""

    def __init__(self):
        import zlib

        self.zlib, self.made = zlib, 0

    def crc32(self, data, *start):
        self.made += len(data) > 64  # a table's body, not a token
        return self.zlib.crc32(data, *start)


def test_a_table_found_whole_is_not_summed_again_until_its_file_changes(tmp_path, monkeypatch):
    ranks_path = tmp_path / "ranks-x.marshal"
    ranks = {bytes([n]): n for n in range(256)}
    lite.ensure_table(ranks_path, ranks)
    table = Path(lite.table_path(ranks_path))
    note = table.with_name(table.name + ".whole")
    sums = _Sums()
    monkeypatch.setattr(lite, "zlib", sums)
    # just written: summed on every open, and not noted (two writes in one tick keep the times)
    assert lite.Table.open(table).rank(b"a") == 97 and lite.Table.open(table) is not None
    assert sums.made == 2 and not note.exists()
    monkeypatch.setattr(lite, "RACY_NS", -(1 << 62))  # as a second later
    assert lite.Table.open(table) is not None and note.exists() and sums.made == 3
    assert lite.Table.open(table).rank(b"b") == 98 and sums.made == 3  # noted: not summed
    # replaced by a damaged copy (another inode, as any writer that replaces it): summed, refused
    data = bytearray(table.read_bytes())
    data[-1] ^= 1
    (tmp_path / "copy").write_bytes(bytes(data))
    os.replace(tmp_path / "copy", table)
    assert lite.Table.open(table) is None and sums.made == 4
    assert lite.Table.open(table) is None and sums.made == 5  # a damaged table is never noted


def test_a_damaged_table_is_written_anew_by_the_run_that_loads_the_tokenizer(tmp_path):
    ranks_path = tmp_path / "ranks-x.marshal"
    ranks = {b"a": 0, b"b": 1, b"ab": 2}
    lite.ensure_table(ranks_path, ranks)
    table = Path(lite.table_path(ranks_path))
    data = bytearray(table.read_bytes())
    data[-1] ^= 1
    table.write_bytes(bytes(data))
    assert lite.Table.open(table) is None
    lite.ensure_table(ranks_path, ranks)  # (it returned at once while any file was there)
    assert lite.Table.open(table).rank(b"ab") == 2
    before = table.stat()
    lite.ensure_table(ranks_path, ranks)  # a whole table is left as it is
    assert (table.stat().st_ino, table.stat().st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_merge_takes_the_lowest_rank_leftmost_first():
    ranks = {b"a": 0, b"b": 1, b"c": 2, b"ab": 5, b"bc": 3, b"abc": 9}
    assert lite.merged_length(b"abc", ranks.get) == 1  # bc (3) first, then a + bc = abc
    ranks = {b"a": 0, b"b": 1, b"c": 2, b"ab": 5, b"bc": 3, b"abc": 9, b"bca": 4}
    assert lite.merged_length(b"abca", ranks.get) == 2  # bc, then bca (4) before abc (9): a + bca
    ranks = {b"a": 0, b"b": 1, b"ab": 3, b"ba": 3, b"aba": 7}
    assert lite.merged_length(b"aba", ranks.get) == 1  # ab and ba tie: ab (leftmost), then aba
    del ranks[b"aba"]
    assert lite.merged_length(b"abab", ranks.get) == 2  # ab, ab
    assert lite.merged_length(b"xy", ranks.get) == 2


def _modules_after(args: list[str], stdin: bytes | None = None) -> tuple[list[str], bytes]:
    """The tokenizers' and the block cache's modules a real run of ``lookout ARGS`` loaded
    (tiktoken, regex, sqlite3), and what it wrote to stdout."""
    code = ("import atexit, runpy, sys; sys.argv = ['lookout', *sys.argv[1:]]\n"
            "atexit.register(lambda: print(sorted(m for m in sys.modules if m.split('.')[0] in ('tiktoken', 'regex', 'sqlite3')),"
            " file=sys.stderr))\n"  # (an exit handler: lookout leaves the process once they have run)
            "runpy.run_module('lookout_cli', run_name='__main__')")
    r = subprocess.run([sys.executable, "-c", code, *args], input=stdin, capture_output=True, cwd=REPO, check=False)
    assert r.returncode == 0, r.stderr.decode()
    return ast.literal_eval(r.stderr.decode().strip().splitlines()[-1]), r.stdout


def test_a_grown_file_is_measured_without_loading_tiktoken(tmp_path, monkeypatch):
    """A prompt's worth appended: counted by the lite path (tiktoken never imported, nor regex's
    pattern compiler: the pattern's compiled code is kept, nor sqlite3: the block cache is not
    opened for so few texts), the same figures as a cold run over the grown file."""
    monkeypatch.setenv("LOOKOUT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("LOOKOUT_DATA_DIR", str(tmp_path / "data"))
    src = min(SHARED_TRANSCRIPTS.glob("claude-code/ccviewer-*.jsonl")).read_bytes().splitlines(keepends=True)
    f = tmp_path / "s.jsonl"
    f.write_bytes(b"".join(src[:-6]))
    assert run_lookout("measure", "-q", "--no-discover", str(f)).returncode == 0  # cold: no table yet, writes it
    assert len(list((tmp_path / "cache").glob("*-table-*"))) == 1
    with open(f, "ab") as fh:
        fh.write(b"".join(src[-6:]))
    modules, out = _modules_after(["measure", "--json", "--no-discover", str(f)])
    assert modules == ["regex._regex"]
    grown = json.loads(out)
    monkeypatch.setenv("LOOKOUT_CACHE_DIR", str(tmp_path / "cold"))
    cold = json.loads(run_lookout("measure", "--json", "--no-discover", "--no-cache", str(f)).stdout)
    assert [p["tokens"] for p in grown["parts"]] == [p["tokens"] for p in cold["parts"]]


def _words(n: int, seed: int) -> str:
    import random

    rng = random.Random(seed)
    vocabulary = [f"{rng.choice(['re', 'un', 'pre', ''])}{w}{rng.choice(['s', 'ing', 'ed', ''])}" for w in
                  ("count", "token", "split", "merge", "line", "file", "view", "cache", "table", "piece", "parse")]
    return " ".join(rng.choice(vocabulary) + rng.choice(["", ",", ".", " 42", "\n", "()"]) for _ in range(n))


def _random_words(n: int, seed: int) -> str:
    """Words of random letters: few pieces repeat, as in base64 or an unknown script."""
    import random

    rng = random.Random(seed)
    return " ".join("".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(3, 11))) for _ in range(n))


def _session(chars: int, words=_words) -> bytes:
    """A Claude Code session of prompts and answers holding about ``chars`` characters of text."""
    lines, parent, n = [], None, 0
    while sum(map(len, lines)) < chars:
        n += 1
        uid = f"00000000-0000-4000-8000-{n:012d}"
        role = "user" if n % 2 else "assistant"
        message = {"role": role, "content": [{"type": "text", "text": words(400, n)}]}
        if role == "assistant":
            message.update(id=f"msg_{n}", model="claude-sonnet-4-5", usage={"input_tokens": 10 * n, "output_tokens": 50})
        lines.append(json.dumps({"parentUuid": parent, "isSidechain": False, "type": role, "message": message,
                                 "uuid": uid, "timestamp": f"2026-01-01T00:{n // 60 % 60:02d}:{n % 60:02d}Z"}) + "\n")
        parent = uid
    return "".join(lines).encode()


@pytest.fixture
def cold_cache(tmp_path, monkeypatch, rank_tables):
    """A cache folder holding the rank tables (as the bench keeps them between cold runs)."""
    cache = tmp_path / "cache"
    cache.mkdir()
    for table in rank_tables:
        os.link(table, cache / table.name)
    monkeypatch.setenv("LOOKOUT_CACHE_DIR", str(cache))
    monkeypatch.setenv("LOOKOUT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("HOME", str(tmp_path))
    return cache


def _cold_runs(args: list[str], cache, stdin: bytes | None = None) -> Iterator[tuple[list[str], bytes]]:
    """Two cold runs of ``lookout ARGS``, one at a time: before each, all but the install's files
    goes from the cache folder (block counts, replay state) and the data folder goes (line memo,
    snapshots), as the bench's cold runs do. The first finds no lite table, counts with
    tiktoken and writes one; the second finds it."""
    for table in cache.glob("*-table-*"):
        table.unlink()
    for _ in range(2):
        for path in cache.iterdir():
            if not path.name.startswith(("ranks-", "pattern-", "models-")):
                shutil.rmtree(path) if path.is_dir() else path.unlink()
        shutil.rmtree(os.environ["LOOKOUT_DATA_DIR"], ignore_errors=True)
        yield _modules_after(args, stdin)


@pytest.mark.parametrize("path", real_transcripts(), ids=lambda p: p.name[:40])
def test_a_cold_measure_of_a_real_transcript_counts_from_the_table_what_tiktoken_counts(cold_cache, path):
    """A cold run whose view holds a few hundred kilobytes of text counts them from the table
    (``tokenizer.count_left``) once one is there: no tiktoken imported, and every part of the
    meter as the run before it counted it with tiktoken (which wrote the table)."""
    (first, counted), (again, lite_counted) = _cold_runs(["measure", "--json", "--no-discover", str(path)], cold_cache)
    parts = [(p["key"], p["tokens"]) for p in json.loads(counted)["parts"]]
    assert [(p["key"], p["tokens"]) for p in json.loads(lite_counted)["parts"]] == parts
    assert ("tiktoken" in first) == any(tokens for _, tokens in parts)  # (one transcript holds no text)
    assert not any(m.startswith("tiktoken") for m in again)


def test_a_cold_compact_counts_its_view_and_note_from_the_table_as_tiktoken_does(cold_cache, tmp_path):
    """compact --force counts its view and then its note (cut to its budget) with the lite path
    too: the same report (tokens before and after, each stage's figures) as with tiktoken."""
    source = min(SHARED_TRANSCRIPTS.glob("codex/rollout-*.jsonl"))  # (one compact --force summarizes)
    report = tmp_path / "report.json"
    reports = []
    for modules, _ in _cold_runs(["compact", "--force", "-q", "--report", str(report), str(source)], cold_cache):
        reports.append(modules)
        r = json.loads(report.read_text())
        reports.append((r["changed"], r["tokens"], [(s["stage"], s["detail"]) for s in r["stages"]]))
    first, counted, again, lite_counted = reports
    assert "tiktoken" in first and not any(m.startswith("tiktoken") for m in again)
    assert counted[0] and lite_counted == counted


def test_a_cold_run_with_more_to_count_than_the_lite_path_takes_loads_the_tokenizer(cold_cache):
    """A view past ``lite.COLD_CHARS`` is counted by tiktoken, table or not: the lite path would
    take longer than the tokenizer's load."""
    runs = list(_cold_runs(["measure", "--json", "--no-discover"], cold_cache, _session(lite.COLD_CHARS * 3 // 2)))
    assert ["tiktoken" in modules for modules, _ in runs] == [True, True]
    assert json.loads(runs[0][1])["parts"] == json.loads(runs[1][1])["parts"]


def test_a_cold_run_whose_pieces_seldom_repeat_gives_way_to_the_tokenizer(cold_cache):
    """A view within ``lite.COLD_CHARS`` whose pieces seldom repeat (random words: five to seven
    times a real view's cost a character in Python) is handed to tiktoken once ``MERGES_MAX``
    pieces were merged: it loads, and counts what the first run (no table yet) counted."""
    session = _session(lite.COLD_CHARS // 2, words=_random_words)
    runs = list(_cold_runs(["measure", "--json", "--no-discover"], cold_cache, session))
    assert ["tiktoken" in modules for modules, _ in runs] == [True, True]
    assert json.loads(runs[0][1])["parts"] == json.loads(runs[1][1])["parts"]


def test_the_lite_counter_stops_after_its_merges_and_counts_as_tiktoken_until_then(tables):
    """``LiteCounter`` merges at most ``MERGES_MAX`` new pieces; past them it says None (the full
    tokenizer's work), and every count it gave before is tiktoken's."""
    shared, enc = tables["o200k_base"], tokens.get_encoding("o200k_base")
    counter = lite.LiteCounter(shared.split, shared.table, shared.pat_str)  # (its own merges)
    given = []
    for seed in range(200):
        text = _random_words(300, 1000 + seed)
        n = counter(text)
        if n is None:
            break
        given.append(n == len(enc.encode_ordinary(text)))
    assert given and all(given) and counter.merges >= lite.MERGES_MAX and counter(_random_words(5, 7)) is None
