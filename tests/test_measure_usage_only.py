"""``lookout measure --usage-only``: the provider's recorded counts from the lines that record
them, the rest passed through unread. Figures equal the full measure's wherever the file's
order is the conversation's; the transcript comes out byte for byte from a file and a pipe;
bounds, --strict and --fail-at hold as in a full measure."""

from __future__ import annotations

import io
import random

import orjson
import pytest
from conftest import DATA, real_transcripts, run_lookout

from lookout_cli.core.jsonl import lines_holding, read_records

NOW = "2026-01-01T00:00:00Z"
# The conversation branches (a rewind, sidechains off the main chain): the full measure follows
# the chain, --usage-only reads usages in file order, so it also counts the abandoned branch's.
BRANCHED = {"claudecodelog-dag_compact_after_rewind.jsonl", "agentsessions-claude-small-schema-coverage.jsonl",
            "compactions.jsonl"}
# every format's fixtures in the repository (real transcripts among them), and ../shared's
TRANSCRIPTS = sorted(DATA.rglob("*.jsonl")) + real_transcripts()
PROVIDER_FIGURES = ("input", "cache_write", "cache_read", "prompt", "output", "model", "timestamp", "line")


def report(*args: str, input: bytes = b"") -> dict:
    done = run_lookout("measure", "--json", "--no-discover", "--now", NOW, *args, input=input)
    assert done.returncode == 0, done.stderr
    return orjson.loads(done.stdout)


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name[:40]}")
def test_transcripts_give_the_full_measures_provider_figures(path):
    full, quick = report(str(path)), report("--usage-only", str(path))
    assert quick["model"]["counting"] == "usage" and quick["parts"] == []
    assert quick["format"] == full["format"]
    if path.name in BRANCHED:
        assert quick["cache"]["requests"] >= full["cache"]["requests"]
        return
    assert quick["cache"] == full["cache"] and quick["cost"] == full["cost"]
    assert quick["warm_cache"] == full["warm_cache"]
    assert quick["model"]["name"] == full["model"]["name"]
    assert len(quick["compactions"]) == len(full["compactions"])
    last, full_last = quick["last_response"], full["last_response"]
    assert (last is None) == (full_last is None)
    if last is not None:
        assert {k: last[k] for k in PROVIDER_FIGURES} == {k: full_last[k] for k in PROVIDER_FIGURES}
    if full["used"]["basis"] == "exact":
        assert quick["used"]["tokens"] == full["used"]["tokens"] and quick["used"]["basis"] == "exact"


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name[:40]}")
def test_the_transcript_passes_through_byte_for_byte(path):
    data = path.read_bytes()
    piped = run_lookout("measure", "-q", "--usage-only", input=data)
    assert piped.returncode == 0 and piped.stdout == data and piped.stderr == b""
    named = run_lookout("measure", "-q", "--usage-only", str(path), input=None)
    assert named.returncode == 0 and named.stdout == data


def test_a_split_response_counts_once_and_sidechains_not_at_all(tmp_path):
    """Claude Code writes a response a content block per line, each with the same usage; a
    subagent's lines are not the chat's context."""
    def line(uuid, parent, mid, usage, **extra):
        return {"type": "assistant", "uuid": uuid, "parentUuid": parent, "sessionId": "s",
                "timestamp": f"2025-01-01T00:00:0{uuid[-1]}Z", **extra,
                "message": {"id": mid, "role": "assistant", "model": "claude-sonnet-4-5-20250929",
                            "content": [{"type": "text", "text": "hi"}], "usage": usage}}

    first = {"input_tokens": 10, "cache_read_input_tokens": 100, "output_tokens": 5}
    later = {"input_tokens": 20, "cache_read_input_tokens": 200, "output_tokens": 7}
    rows = [{"type": "user", "uuid": "u1", "parentUuid": None, "sessionId": "s", "timestamp": "2025-01-01T00:00:00Z",
             "message": {"role": "user", "content": "go"}},
            line("a1", "u1", "msg_1", first), line("a2", "a1", "msg_1", first),
            line("s3", "a2", "msg_side", {"input_tokens": 999, "output_tokens": 999}, isSidechain=True),
            line("a4", "a2", "msg_2", later)]
    data = b"".join(orjson.dumps(r) + b"\n" for r in rows)
    quick = report("--usage-only", input=data)
    assert quick["cache"]["requests"] == 2
    assert quick["cache"]["input"] == 30 and quick["cache"]["output"] == 12
    assert quick["used"] == {**quick["used"], "tokens": 227, "basis": "exact"}  # 20 + 200 + 7
    assert quick["cache"] == report(input=data)["cache"]


def test_fail_at_strict_and_the_line_bound_hold():
    data = (DATA / "measure" / "claude-small.jsonl").read_bytes()
    used = report("--usage-only", input=data)["used"]
    assert used["basis"] == "exact" and used["tokens"] > 0
    budget = str(used["tokens"] * 2)  # the context is then exactly 50% of it
    at = run_lookout("measure", "-q", "--usage-only", "--budget", budget, "--fail-at", "50", input=data)
    assert at.returncode == 1 and at.stdout == data  # written, then failed
    under = run_lookout("measure", "-q", "--usage-only", "--budget", budget, "--fail-at", "50.1", input=data)
    assert under.returncode == 0
    broken = data + b"not json\n"
    assert run_lookout("measure", "-q", "--usage-only", input=broken).stdout == broken
    strict = run_lookout("measure", "-q", "--usage-only", "--strict", input=broken)
    assert strict.returncode == 2 and b"not JSON" in strict.stderr
    assert report("--usage-only", "--strict", input=data)["used"] == used  # every line read: the same figures
    longest = max(len(line) for line in data.splitlines())
    bound = run_lookout("measure", "-q", "--usage-only", "--max-record-bytes", str(longest - 1), input=data)
    assert bound.returncode == 2 and b"longer than" in bound.stderr
    both = run_lookout("measure", "--usage-only", "--estimate", input=data)
    assert both.returncode == 2 and b"--usage-only" in both.stderr


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_formats_without_needles_read_every_line(fmt):
    """A message list has no cheap mark on its usage lines: every line is read, and the
    figures are the full measure's."""
    path = DATA / fmt / "lines.jsonl"
    full, quick = report(str(path)), report("--usage-only", str(path))
    assert quick["format"] == fmt and quick["cache"]["requests"] == 2
    assert quick["cache"] == full["cache"] and quick["cost"] == full["cost"]
    piped = run_lookout("measure", "-q", "--usage-only", input=path.read_bytes())
    assert piped.stdout == path.read_bytes()


@pytest.mark.parametrize("name", ["claude-code-session.jsonl", "codex-rollout.jsonl"])
def test_a_format_given_reads_nothing_to_tell_it_and_finds_the_same(name):
    """With --format the lines are not sniffed first: the same figures, from a file and a pipe."""
    path = DATA.parent.parent / "examples" / name
    told = "claude-code" if name.startswith("claude") else "codex"
    sniffed = report("--usage-only", str(path))
    assert report("--usage-only", "--format", told, str(path)) == sniffed
    piped = report("--usage-only", "--format", told, input=path.read_bytes())
    assert {**piped, "source": sniffed["source"]} == sniffed


@pytest.mark.parametrize("chunk", [7, 64, 1000, 1 << 20])
def test_lines_holding_finds_what_reading_every_line_finds(chunk):
    needles = (b'"usage"', b'"compact_boundary"')
    r = random.Random(chunk)
    for _ in range(60):
        lines = []
        for _ in range(r.randint(0, 40)):
            body = "x" * r.randint(0, 3000)
            k = r.random()
            if k < 0.3:
                body += '"usage"' + "y" * r.randint(0, 50)
            elif k < 0.35:
                body = '"usage"' + body + '"usage"'  # twice on one line: still one line
            elif k < 0.4:
                body += '"compact_boundary"'
            lines.append(body + ("\r\n" if r.random() < 0.1 else "\n"))
        data = "".join(lines).encode()
        if data and r.random() < 0.3:
            data = data.rstrip(b"\n")  # the last line without its newline
        cut = r.randint(0, min(len(data), 5000))
        want = [(rec.lineno, rec.raw) for rec in read_records(io.BytesIO(data)) if any(n in rec.raw for n in needles)]
        copy = io.BytesIO()
        got = list(lines_holding(io.BytesIO(data[cut:]), needles, data[:cut], copy, chunk=chunk))
        assert got == want
        assert copy.getvalue() == data[cut:]  # what was read, copied


@pytest.mark.parametrize("chunk", [64, 100, 1 << 20])
def test_a_line_over_the_bound_is_refused_wherever_the_chunks_cut_it(chunk):
    """A bound at least a chunk long: a line begun in one chunk and ended in the next is
    measured whole (it was let through when both parts were under the bound); a bound under
    a chunk: each whole line of the chunk is measured, its line ending not counted."""
    from lookout_cli.core.errors import LookoutError

    for size in (101, 150, 260):
        line = b'{"usage":"' + b"x" * (size - 12) + b'"}'
        data = b'{"a":1}\n' * 5 + line + b"\r\n" + b'{"b":2}\n'
        assert len(line) == size
        for bound, refused in ((size - 1, True), (size, False)):
            def scan():
                return list(lines_holding(io.BytesIO(data), (b'"usage"',), max_record_bytes=bound, chunk=chunk))
            if refused:
                with pytest.raises(LookoutError, match="line 6 is longer"):
                    scan()
                with pytest.raises(LookoutError, match="line 6 is longer"):
                    list(read_records(io.BytesIO(data), bound))
            else:
                assert scan() == [(6, line + b"\r\n")]


def test_every_way_of_reading_gives_the_same_figures(monkeypatch):
    """--strict reads every line (the chain's nodes); with no room for a copy of a pipe the
    lines are held in memory (no nodes at all): the usages are the needle scan's either way."""
    from click.testing import CliRunner

    from lookout_cli import options
    from lookout_cli.cli import cli

    data = (DATA / "measure" / "claude-small.jsonl").read_bytes()
    scanned = report("--usage-only", input=data)
    assert report("--usage-only", "--strict", input=data)["cache"] == scanned["cache"]
    monkeypatch.setattr(options.Run, "_seekable_input", lambda self: (None, None))
    done = CliRunner().invoke(cli, ["measure", "--usage-only", "--json", "--now", NOW], input=data)
    held = orjson.loads(done.stdout)
    assert held["cache"] == scanned["cache"] and held["used"] == scanned["used"]
