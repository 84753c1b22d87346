"""A short run of the benchmark suite (bench/) as a smoke check, not a timing gate.

On a generated ~1 MB transcript: lookout's exact counts equal the reference pass's, with a
cold and a warm token cache and with --jobs 2; the runner prints its ratio table.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from claude_code_helpers import compacted_session
from conftest import REPO, run_lookout

sys.path.insert(0, str(REPO))  # bench/ is a top-level folder of the repository, not installed
from bench.generate import (  # noqa: E402
    CODEX_COMPACT_AT,
    CODEX_WINDOW,
    FORMATS,
    SUMMARY_POINT,
    Corpus,
    generate,
    shape_of,
)
from bench.reference import texts as texts_of  # noqa: E402


@pytest.fixture(scope="module")
def corpus():
    return Corpus()


def _reference(path, mode="measure") -> dict:
    out = subprocess.run([sys.executable, "-m", "bench.reference", mode, str(path)], capture_output=True,
                         check=True, cwd=REPO)
    return json.loads(out.stdout)


def _lookout_text_tokens(path, *extra) -> int:
    r = run_lookout("measure", "--json", "--no-discover", *extra, str(path))
    assert r.returncode == 0, r.stderr.decode()
    report = json.loads(r.stdout)
    return sum(p["tokens"] for p in report["parts"] if p["group"] == "conversation" and p["key"] != "images")


def test_generator_is_seeded_and_sized(tmp_path, corpus):
    a = generate(tmp_path / "a.jsonl", "claude-code", 0.3, corpus=corpus)
    b = generate(tmp_path / "b.jsonl", "claude-code", 0.3, corpus=corpus)
    assert a["sha256"] == b["sha256"] and a["bytes"] >= 300_000
    c = generate(tmp_path / "c.jsonl", "claude-code", 0.3, seed=1, corpus=corpus)
    assert c["sha256"] != a["sha256"]
    lines = (tmp_path / "a.jsonl").read_bytes().splitlines()
    assert all(json.loads(line) for line in lines)
    kinds = {json.loads(line)["type"] for line in lines}
    assert {"user", "assistant", "progress"} <= kinds


def test_the_default_shape_is_the_real_sessions_and_the_first_is_kept(tmp_path, corpus):
    """Real Claude Code lines are about 1 KB at the median and 3 KB at p90 (1.8 KB on average,
    BENCHMARKS.md); a subagent writes sidechain lines into the file. The first shape (5 KB lines,
    no subagents) stays as the second case."""
    generate(tmp_path / "r.jsonl", "claude-code", 1, corpus=corpus, shape="real")
    real = shape_of(tmp_path / "r.jsonl")
    assert 700 <= real["p50"] <= 1400 and 1800 <= real["p90"] <= 3600 and 1200 <= real["mean"] <= 2400
    assert any("sidechain" in k for k in real["byte_shares"]) and "thinking" in real["byte_shares"]
    first = generate(tmp_path / "g.jsonl", "claude-code", 1, corpus=corpus)
    old = shape_of(tmp_path / "g.jsonl")
    # (a megabyte holds few of the first shape's long outputs: its mean moves by a third as
    # the repository, its corpus, changes: 1.8 to 2.6 times the real shape's)
    assert first["shape"] == "generated" and old["mean"] > 1.5 * real["mean"]
    assert not any("sidechain" in k for k in old["byte_shares"])


def test_the_real_shape_compacts_where_claude_code_does(tmp_path, corpus, monkeypatch):
    """A long real session is many segments: when the prompt passes the summary point, Claude
    Code appends a boundary and a summary (formats.md §1.8), and the model sees only what
    follows the last one. The reference counts that much, and lookout's exact count equals
    it; the tail reference follows a compaction among the lines appended."""
    monkeypatch.setenv("LOOKOUT_CACHE_DIR", str(tmp_path / "cache"))
    f = compacted_session(tmp_path / "long.jsonl", 2, corpus=corpus)
    lines = [json.loads(line) for line in f.read_bytes().splitlines()]
    at = [n for n, o in enumerate(lines) if o.get("subtype") == "compact_boundary"]
    assert len(at) >= 2
    for n in at:
        boundary, summary = lines[n], lines[n + 1]
        assert boundary["type"] == "system" and boundary["parentUuid"] is None
        assert boundary["compactMetadata"]["trigger"] == "auto" and boundary["compactMetadata"]["preTokens"] >= SUMMARY_POINT
        main = [o for o in lines[:n] if o["type"] in ("user", "assistant", "system") and not o.get("isSidechain")]
        assert boundary["logicalParentUuid"] == main[-1]["uuid"]
        assert summary["isCompactSummary"] is True and summary["parentUuid"] == boundary["uuid"]
        assert summary["message"]["content"].startswith("This session is being continued")
    ref = _reference(f)
    assert ref["compacted"] is True and ref["lines"] == len(lines)
    shown = sum(1 for o in lines[at[-1] + 1:] for t in texts_of(o) if t)
    assert ref["blocks"] == shown  # the texts after the last boundary, no more
    r = run_lookout("measure", "--json", "--no-discover", str(f))
    report = json.loads(r.stdout)
    assert len(report["compactions"]) == len(at)
    assert _lookout_text_tokens(f) == ref["tokens"]
    # standard input that is a pipe: the reference collects the texts (it cannot look ahead)
    piped = subprocess.run([sys.executable, "-m", "bench.reference", "measure"], input=f.read_bytes(),
                           capture_output=True, check=True, cwd=REPO)
    assert json.loads(piped.stdout)["tokens"] == ref["tokens"]
    data = f.read_bytes()
    cut = sum(len(line) + 1 for line in data.split(b"\n")[:at[-1] - 3])  # before the last compaction
    grow = tmp_path / "grow.jsonl"
    grow.write_bytes(data[:cut])
    assert _reference(grow, "tail")["plan"] == "new"
    with open(grow, "ab") as fh:
        fh.write(data[cut:])
    assert _reference(grow, "tail")["tokens"] == ref["tokens"]


def test_the_real_shapes_codex_rollout_compacts_where_codex_does(tmp_path, corpus, monkeypatch):
    """A long Codex rollout compacts on its own once its context passes 90% of the window
    (formats.md §2.6, inline): a ``compacted`` record holding the summary, a ``turn_context``,
    a ``context_compacted`` event; its context never reaches the window. lookout's report has
    a compaction row for each, and the reference counts what follows the last one, its summary
    included, from a file or a pipe alike."""
    monkeypatch.setenv("LOOKOUT_CACHE_DIR", str(tmp_path / "cache"))
    f = tmp_path / "codex.jsonl"
    generate(f, "codex", 3, corpus=corpus, shape="real")
    lines = [json.loads(line) for line in f.read_bytes().splitlines()]
    at = [n for n, o in enumerate(lines) if o["type"] == "compacted"]
    counts = [(n, o["payload"]["info"]) for n, o in enumerate(lines)
              if o["type"] == "event_msg" and o["payload"]["type"] == "token_count"]
    assert at and all(info["model_context_window"] == CODEX_WINDOW for _, info in counts)
    assert max(info["last_token_usage"]["input_tokens"] for _, info in counts) < CODEX_WINDOW
    for n in at:
        before = [info for m, info in counts if m < n][-1]["last_token_usage"]["input_tokens"]
        assert before >= 0.9 * CODEX_COMPACT_AT  # (the turn after that count passed the point)
        assert lines[n]["payload"]["message"].startswith("Another language model started to solve this problem")
        assert (lines[n + 1]["type"], lines[n + 2]["payload"]["type"]) == ("turn_context", "context_compacted")
    r = run_lookout("measure", "--json", "--no-discover", str(f))
    assert r.returncode == 0, r.stderr.decode()
    assert len(json.loads(r.stdout)["compactions"]) == len(at)
    ref = _reference(f)
    assert ref["compacted"] is True
    assert ref["blocks"] == sum(1 for o in lines[at[-1]:] for t in texts_of(o) if t)
    piped = subprocess.run([sys.executable, "-m", "bench.reference", "measure"], input=f.read_bytes(),
                           capture_output=True, check=True, cwd=REPO)
    assert json.loads(piped.stdout)["tokens"] == ref["tokens"]
    # the first shape's rollouts (``generate``'s default) compact nowhere, as before
    generate(tmp_path / "first.jsonl", "codex", 3, corpus=corpus)
    assert b'"compacted"' not in (tmp_path / "first.jsonl").read_bytes()


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_is_detected_and_measured(tmp_path, corpus, fmt):
    f = tmp_path / f"{fmt}.jsonl"
    generate(f, fmt, 0.2, corpus=corpus)
    r = run_lookout("measure", "--json", "--no-discover", str(f))
    assert r.returncode == 0, r.stderr.decode()
    assert json.loads(r.stdout)["format"] == fmt


def test_exact_counts_equal_the_reference_cold_warm_and_parallel(tmp_path, corpus, monkeypatch):
    monkeypatch.setenv("LOOKOUT_CACHE_DIR", str(tmp_path / "cache"))
    f = tmp_path / "cc.jsonl"
    generate(f, "claude-code", 1, corpus=corpus)
    ref = _reference(f)["tokens"]
    assert ref > 100_000
    assert _lookout_text_tokens(f) == ref  # cold: fills the cache
    assert (tmp_path / "cache" / "tokens.sqlite3").exists()
    assert _lookout_text_tokens(f) == ref  # warm
    assert _lookout_text_tokens(f, "--no-cache", "--jobs", "2") == ref
    assert _lookout_text_tokens(f, "--no-cache") == ref


def test_the_instrument_sees_every_text_lookout_tokenizes(tmp_path, corpus, monkeypatch):
    """B11's "tokenized" share: lookout counts through tiktoken's core, which the instrument
    must see as it saw encode_ordinary, each text once (a cold measure tokenizes each distinct
    text of the session, no more)."""
    monkeypatch.setenv("LOOKOUT_CACHE_DIR", str(tmp_path / "cache"))
    f = tmp_path / "cc.jsonl"
    generate(f, "claude-code", 0.5, corpus=corpus)
    stats = tmp_path / "tokenized.json"
    r = subprocess.run([sys.executable, "-m", "bench.instrument", "measure", "-q", "--no-discover", str(f)],
                       capture_output=True, cwd=REPO, env={**os.environ, "BENCH_TOKENIZED": str(stats)})
    assert r.returncode == 0, r.stderr.decode()
    seen = json.loads(stats.read_text())
    texts = [t for line in f.read_bytes().splitlines() for t in texts_of(json.loads(line)) if t]
    distinct = set(texts)
    assert seen == {"chars": sum(map(len, distinct)), "calls": len(distinct)}


def test_reference_tail_pass_follows_appends(tmp_path, corpus, monkeypatch):
    monkeypatch.setenv("LOOKOUT_CACHE_DIR", str(tmp_path / "cache"))
    whole = tmp_path / "whole.jsonl"
    generate(whole, "claude-code", 0.5, corpus=corpus)
    data = whole.read_bytes()
    cut = data.index(b"\n", len(data) // 2) + 1
    grow = tmp_path / "grow.jsonl"
    grow.write_bytes(data[:cut])
    assert _reference(grow, "tail")["plan"] == "new"
    with open(grow, "ab") as fh:
        fh.write(data[cut:])
    tail = _reference(grow, "tail")
    assert tail["plan"] == "append"
    assert tail["tokens"] == _reference(whole)["tokens"]
    assert _reference(grow, "tail")["plan"] == "unchanged"


def test_runner_prints_the_ratio_table(tmp_path):
    r = subprocess.run([sys.executable, "-m", "bench", "--only", "B1,B4,B14", "--runs", "1",
                        "--out", str(tmp_path / "out"), "--json", str(tmp_path / "rows.json")],
                       capture_output=True, text=True, cwd=REPO, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "| id | scenario | lookout | reference | R |" in r.stdout
    rows = {row["id"]: row for row in json.loads((tmp_path / "rows.json").read_text())["rows"]}
    assert set(rows) == {"B1", "B4", "B14"}
    assert rows["B1"]["lookout"] > 0 and rows["B1"]["reference"] > 0
    cpu, wall = rows["B1"]["extra"]["runs"]["cpu"], rows["B1"]["extra"]["runs"]["wall"]
    assert rows["B1"]["ratio"] == pytest.approx(cpu[0][0] / cpu[1][0])  # R: CPU time, lookout over reference
    assert rows["B1"]["wall_ratio"] == pytest.approx(wall[0][0] / wall[1][0])
    assert "tiktoken" not in rows["B4"]["note"].split("imports:")[1] or "no tiktoken" in rows["B4"]["note"]
    assert rows["B14"]["ok"] is True  # claude-code counts equal the reference


def test_the_ratio_pairs_each_run_with_the_reference_run_next_to_it():
    from bench.run import Ran, timing_of

    # the host slowed down for the second pair: both ran 5x longer there, lookout 2x the reference
    lookout = [Ran(2.0, 1.0, 50, 0), Ran(10.0, 3.0, 60, 0), Ran(3.0, 2.0, 55, 0)]
    reference = [Ran(1.0, 1.0, 40, 0), Ran(5.0, 1.0, 40, 0), Ran(3.0, 2.0, 40, 0)]
    t = timing_of(lookout, reference)
    assert (t.lookout, t.reference, t.rss) == (3.0, 3.0, 60)
    assert t.wall_ratio == 2.0  # the medians' ratio would say 1.0
    assert t.ratio == 1.0  # CPU time: ratios 1, 3, 1
    assert timing_of(lookout, []).ratio is None
