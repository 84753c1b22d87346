"""The real agents resume what ``compact`` wrote, and other readers of their files agree.

Claude Code and Codex (the pinned npm packages, ``tests/agent_runs.py``) resume a transcript
compacted inside one long turn against a loopback fake model: the run succeeds with no warning,
the request it sends is at most 40% of the one it sends for the original and starts the
conversation with the summary, the request is there once, word for word, and the unread last
result byte for byte. ccusage counts the same usage before and after a compaction.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from agent_runs import ccusage_bin, codex_events, run_claude, run_codex
from compact_turns import claude_turn
from conftest import REPO, SHARED_TRANSCRIPTS
from test_compact_cli import lookout

from lookout_cli.formats.claude_code import SUMMARY_PREFIX
from lookout_cli.formats.codex_items import SUMMARY_PREFIX as CODEX_SUMMARY

CODEX_REAL = SHARED_TRANSCRIPTS / "codex" / "rollout-2025-11-17T15-30-28-019a93b9-f380-7600-98ff-940e6b99603c.jsonl"


def _force(src, dst, *args: str) -> None:
    code, out, err = lookout("compact", "--force", "-q", *args, str(src))
    assert code == 0, err
    dst.write_bytes(out)


def _size(body: dict) -> int:
    return len(json.dumps(body.get("messages") or body.get("input"), separators=(",", ":")))


def test_claude_code_resumes_a_long_turn_compacted_inside(tmp_path):
    session = claude_turn(tmp_path / "s.jsonl", 60_000)
    small = tmp_path / "c.jsonl"
    _force(session, small)
    lines = [json.loads(x) for x in session.read_text().splitlines()]
    request = lines[0]["message"]["content"]
    unread = lines[-1]["message"]["content"][-1]

    before = run_claude(tmp_path / "a", session=session)
    after = run_claude(tmp_path / "b", session=small)
    for run in (before, after):
        assert run.returncode == 0, run.stderr[-2000:]
    assert after.stderr.strip() == "", after.stderr  # no warning about the file
    assert _size(after.last_request_body()) <= 0.4 * _size(before.last_request_body())
    assert after.first_text().startswith(SUMMARY_PREFIX)
    texts = after.request_texts()
    assert sum(request in t for t in texts) == 1  # the request, word for word, once
    body = after.last_request_body()
    results = [b for m in body["messages"] if isinstance(m.get("content"), list) for b in m["content"]
               if isinstance(b, dict) and b.get("type") == "tool_result"]
    assert results[-1]["tool_use_id"] == unread["tool_use_id"] and results[-1]["content"] == unread["content"]
    calls = {b["id"] for m in body["messages"] if isinstance(m.get("content"), list) for b in m["content"]
             if isinstance(b, dict) and b.get("type") == "tool_use"}
    assert calls == {r["tool_use_id"] for r in results}  # pairs intact


def test_codex_resumes_the_real_rollout_compacted_inside_its_turn(tmp_path):
    before, after = _codex_resumes(CODEX_REAL, tmp_path)
    assert _size(after.last_request_body()) <= 0.4 * _size(before.last_request_body())
    items = after.last_request_body()["input"]
    texts = after.request_texts()
    summary = next(n for n, t in enumerate(texts) if t.startswith(CODEX_SUMMARY))
    request = next(n for n, t in enumerate(texts) if t.startswith("finish up the users work"))
    assert summary < request  # the conversation starts with the summary, then the request
    assert sum(t.startswith("finish up the users work") for t in texts) == 1
    # the developer instructions are not doubled: as many as for the original
    def developer(body):
        return sum(1 for i in body["input"] if isinstance(i, dict) and i.get("role") == "developer")
    assert developer(after.last_request_body()) == developer(before.last_request_body())
    assert _calls_paired(items)


def _codex_resumes(rollout, tmp_path):
    """The real Codex resumed on ``rollout`` as it is and as ``compact --force`` left it: each
    run ends with no error (the two runs, to compare their requests)."""
    small = tmp_path / "c.jsonl"
    _force(rollout, small)
    runs = run_codex(tmp_path / "a", session=rollout), run_codex(tmp_path / "b", session=small)
    for run in runs:
        assert run.returncode == 0, run.stderr[-2000:]
        assert not [e for e in codex_events(run) if e.get("type") in ("error", "turn.failed")]
    return runs


def _calls_paired(items: list) -> bool:
    """Whether every function call of a Codex request has its output, and no output lacks its call."""
    calls = {i["call_id"] for i in items if i.get("type") == "function_call"}
    return calls == {i["call_id"] for i in items if i.get("type") == "function_call_output"}


def test_codex_resumes_a_long_rollout_compacted_again(tmp_path):
    """A real-shaped rollout that Codex compacted before, compacted again from its file (the
    lines before its compaction read into what they give, ``codex_scan.Settling``): Codex resumes
    it with no error, from lookout's summary, in a fifth of the request, every call with its
    output."""
    sys.path.insert(0, str(REPO))  # bench/ is a top-level folder of the repository, not installed
    from bench.generate import generate

    rollout = tmp_path / "r.jsonl"
    generate(rollout, "codex", 3, shape="real")
    assert rollout.read_bytes().count(b'"type":"compacted"') >= 1
    before, after = _codex_resumes(rollout, tmp_path)
    assert _size(after.last_request_body()) <= 0.25 * _size(before.last_request_body())
    assert after.request_texts()[0].startswith(CODEX_SUMMARY)
    assert _calls_paired(after.last_request_body()["input"])


def _ccusage(tmp_path, session) -> dict:
    home = tmp_path / "ccu"
    folder = home / "projects" / "p"
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.jsonl"):
        old.unlink()
    (folder / "s.jsonl").write_bytes(session.read_bytes())
    r = subprocess.run([str(ccusage_bin()), "daily", "--json", "--offline"], capture_output=True, timeout=120,
                       env={**os.environ, "CLAUDE_CONFIG_DIR": str(home)}, check=False)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    return json.loads(r.stdout)["totals"]


def test_ccusage_counts_the_same_usage_after_a_compaction(tmp_path):
    session = claude_turn(tmp_path / "s.jsonl", 40_000, cache_writes=True)
    small = tmp_path / "c.jsonl"
    _force(session, small)
    before, after = _ccusage(tmp_path, session), _ccusage(tmp_path, small)
    assert before["cacheCreationTokens"] > 0 and before == after
    # and lookout report (the moved responses' usage stays in their stubs)
    keys = ("requests", "input", "cache_write", "cache_read", "output", "cost_usd", "peak_tokens")
    totals = []
    for path in (session, small):
        code, out, err = lookout("report", "--json", "--no-cache", str(path))
        assert code == 0, err
        totals.append({k: json.loads(out)["totals"][k] for k in keys})
    assert totals[0]["requests"] > 10 and totals[0] == totals[1]


def _view(reader, session, out) -> str:
    """What a viewer makes of a session: its JSON (claude-code-log) or HTML pages."""
    exe = {"claude_code_log": "claude-code-log", "claude_code_transcripts": "claude-code-transcripts"}[reader]
    args = ["convert", str(session), "-o", f"{out}.json"] if reader == "claude_code_log" else \
        ["json", str(session), "-o", str(out)]
    bindir = os.path.dirname(sys.executable)
    r = subprocess.run([os.path.join(bindir, exe), *args], capture_output=True, timeout=120,
                       env={**os.environ, "HOME": str(out.parent)}, check=False)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    if reader == "claude_code_log":
        return out.with_suffix(".json").read_text()
    return "".join(p.read_text() for p in sorted(out.glob("*.html")))


def test_claude_code_resumes_a_turn_compacted_twice(tmp_path):
    """Compacted, then compacted again keeping less: the kept lines move after the newest
    summary (the first summary is left behind, childless and older than them), each once; the
    usage stays where it was; restore undoes both compactions byte for byte."""
    session = claude_turn(tmp_path / "s.jsonl", 40_000, cache_writes=True)
    once, twice = tmp_path / "c1.jsonl", tmp_path / "c2.jsonl"
    _force(session, once)
    _force(once, twice, "--preserve-recent-tokens", "2000")
    assert twice.read_bytes().count(b'"compact_boundary"') == 2
    assert _ccusage(tmp_path, twice) == _ccusage(tmp_path, session)
    code, back, err = lookout("restore", "-", data=twice.read_bytes())
    assert code == 0 and back == session.read_bytes(), err
    run = run_claude(tmp_path / "r", session=twice)
    assert run.returncode == 0 and run.stderr.strip() == "", run.stderr[-2000:]
    assert run.first_text().startswith(SUMMARY_PREFIX)
    texts = run.request_texts()
    assert sum(t.startswith(SUMMARY_PREFIX) for t in texts) == 1  # the newest summary only
    request = json.loads(session.read_text().splitlines()[0])["message"]["content"]
    assert sum(request in t for t in texts) == 1
    body = run.last_request_body()
    calls = [b["id"] for m in body["messages"] if isinstance(m.get("content"), list) for b in m["content"]
             if isinstance(b, dict) and b.get("type") == "tool_use"]
    assert calls and len(calls) == len(set(calls))  # each kept call once
    last = json.loads(twice.read_text().splitlines()[-1])["message"]["content"][-1]["tool_use_id"]
    assert calls[-1] == last


@pytest.mark.parametrize("reader", ["claude_code_log", "claude_code_transcripts"])
def test_viewers_show_each_kept_message_once(reader, tmp_path):
    pytest.importorskip(reader)
    session = claude_turn(tmp_path / "s.jsonl", 40_000)  # compacted inside its turn (20,000 is not)
    small = tmp_path / "c.jsonl"
    _force(session, small)
    before, after = _view(reader, session, tmp_path / "a"), _view(reader, small, tmp_path / "b")
    lines = [json.loads(x) for x in small.read_text().splitlines()]
    start = next(n for n, x in enumerate(lines) if x.get("isCompactSummary"))
    kept = [b["id"] for x in lines[start:] if isinstance((x.get("message") or {}).get("content"), list)
            for b in x["message"]["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]
    assert len(kept) >= 3
    # every kept call (and its result) is shown as often as in the original: once, not again
    assert [after.count(i) for i in kept] == [before.count(i) for i in kept]
    assert all(after.count(i) for i in kept)
