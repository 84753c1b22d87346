"""Incremental re-measure state: append, unchanged, rewrite, truncate, partial lines."""

from __future__ import annotations

import os
from pathlib import Path

from lookout_cli.meter import state as ms

LINES = [b'{"n": %d, "text": "line number %d"}\n' % (i, i) for i in range(200)]


def _write(path, lines):
    path.write_bytes(b"".join(lines))


def _measure(path, key="k"):
    """A tiny incremental consumer: running totals of lines and bytes."""
    plan = ms.plan(path, key)
    totals = dict(plan.state.totals) if plan.state else {"lines": 0, "bytes": 0}
    if plan.kind != ms.UNCHANGED:
        lines, end = ms.read_lines(path, plan.start)
        totals["lines"] += len(lines)
        totals["bytes"] += sum(map(len, lines))
        ms.commit(path, key, end, totals)
    return plan, totals


def test_new_then_unchanged_then_append(tmp_path):
    f = tmp_path / "t.jsonl"
    _write(f, LINES[:100])
    plan, totals = _measure(f)
    assert plan.kind == ms.NEW and totals == {"lines": 100, "bytes": len(b"".join(LINES[:100]))}
    plan, totals = _measure(f)
    assert plan.kind == ms.UNCHANGED and totals["lines"] == 100
    with open(f, "ab") as fh:
        fh.writelines(LINES[100:])
    plan, totals = _measure(f)
    assert plan.kind == ms.APPEND and plan.start == len(b"".join(LINES[:100]))
    assert totals == {"lines": 200, "bytes": len(b"".join(LINES))}


def test_a_partial_last_line_waits_for_its_newline(tmp_path):
    f = tmp_path / "t.jsonl"
    _write(f, LINES[:10] + [LINES[10][:7]])
    _, totals = _measure(f)
    assert totals["lines"] == 10
    with open(f, "ab") as fh:
        fh.write(LINES[10][7:])
    plan, totals = _measure(f)
    assert plan.kind == ms.APPEND and totals["lines"] == 11
    assert totals["bytes"] == f.stat().st_size


def test_rewrite_in_place_is_detected(tmp_path):
    f = tmp_path / "t.jsonl"
    _write(f, LINES[:50])
    _measure(f)
    ino = f.stat().st_ino
    data = bytearray(f.read_bytes())
    data[-5] = ord("X")  # same size, same inode, last bytes changed
    with open(f, "r+b") as fh:
        fh.write(bytes(data))
    assert f.stat().st_ino == ino
    assert ms.plan(f, "k").kind == ms.REWRITE
    data = bytearray(f.read_bytes())
    data[3] = ord("Y")  # only the head changed
    with open(f, "r+b") as fh:
        fh.write(bytes(data))
    _measure(f)  # re-measure
    data[3] = ord("Z")
    with open(f, "r+b") as fh:
        fh.write(bytes(data))
    assert ms.plan(f, "k").kind == ms.REWRITE


def test_atomic_replace_is_a_rewrite(tmp_path):
    f = tmp_path / "t.jsonl"
    _write(f, LINES[:50])
    _measure(f)
    other = tmp_path / "new.jsonl"
    _write(other, LINES[:50] + LINES[60:70])  # what compact -i does: a new file renamed over
    os.replace(other, f)
    plan, totals = _measure(f)
    assert plan.kind == ms.REWRITE and totals["lines"] == 60


def test_truncate_is_detected_and_remeasured(tmp_path):
    f = tmp_path / "t.jsonl"
    _write(f, LINES[:50])
    _measure(f)
    with open(f, "r+b") as fh:
        fh.truncate(len(b"".join(LINES[:20])))
    plan, totals = _measure(f)
    assert plan.kind == ms.TRUNCATE and totals["lines"] == 20


def test_keys_are_separate_and_a_broken_state_is_ignored(tmp_path):
    f = tmp_path / "t.jsonl"
    _write(f, LINES[:5])
    _measure(f, "a")
    assert ms.plan(f, "a").kind == ms.UNCHANGED
    assert ms.plan(f, "b").kind == ms.NEW
    Path(ms.state_path(f, "a")).write_text("{not json")
    assert ms.plan(f, "a").kind == ms.NEW


def test_state_lives_in_the_cache_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("LOOKOUT_CACHE_DIR", str(tmp_path / "cache"))
    f = tmp_path / "t.jsonl"
    _write(f, LINES[:5])
    _measure(f)
    assert Path(ms.state_path(f, "k")).parent == tmp_path / "cache" / "state"
    assert os.path.exists(ms.state_path(f, "k"))
