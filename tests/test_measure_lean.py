"""``measure`` reads a transcript lean (``Run.load(lean=True)`` with ``item_counts.CountingSink``):
records keep offsets instead of bytes, each Claude Code line keeps a small node, and items are
counted as they are built and then cut down. The figures must be exactly those of the whole
view, on every real transcript and fixture, and the transcript must pass through unchanged from
a file, a pipe and a file that standard input reads from the middle of."""

from __future__ import annotations

import datetime as dt
import functools
import io
import json
import os
import subprocess
import sys
import threading

import orjson
import pytest
from claude_code_helpers import add_turns, compacted_session
from conftest import REPO, SHARED_TRANSCRIPTS, lookout_exe, run_lookout
from test_measure import ALL_INPUTS

from lookout_cli.core import jsonl
from lookout_cli.core.errors import LookoutError
from lookout_cli.core.jsonl import (
    LeanRecord,
    Lines,
    Record,
    RecordWriter,
    lean_index,
    read_indexed_lines,
    read_line_blocks,
)
from lookout_cli.core.saved import MARKER
from lookout_cli.formats.view import IMAGE, TOOL_CALL
from lookout_cli.measure import make_counter, measure_input
from lookout_cli.meter.analysis import Settings, measure
from lookout_cli.meter.reclaim import ARGUMENT_KEYS
from lookout_cli.meter.report import to_dict
from lookout_cli.options import Run

sys.path.insert(0, str(REPO))  # bench/ is a top-level folder of the repository, not installed
from bench.generate import generate  # noqa: E402

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def figures(path, lean: bool, jobs: int = 1, estimate: bool = False):
    """The report's figures: as measure works them out (lean), or from the whole view."""
    settings = Settings(now=NOW, estimate=estimate, discover_rules=False)
    run = Run("measure", file=str(path), isolated=True)
    if lean:
        meter, transcript = measure_input(run, settings, jobs, cache=False)
        view = transcript.view()
    else:
        transcript = run.load(lean=False)
        view = transcript.view()
        meter = measure(view, settings, counter=make_counter(view.model, settings, cache=False))
    return to_dict(meter, str(path), None), transcript, view


FORMATS = ["claude-code", "codex", "openai", "anthropic"]


@pytest.fixture(scope="module")
def session_of(tmp_path_factory):
    """A generated session of about 0.6 MB in a format, made once."""
    made = {}

    def make(fmt: str):
        if fmt not in made:
            made[fmt] = tmp_path_factory.mktemp("bench") / f"{fmt}.jsonl"
            generate(made[fmt], fmt, 0.6)
        return made[fmt]

    return make


@pytest.fixture(scope="module")
def generated(session_of):
    return session_of("claude-code")


@pytest.mark.parametrize("path", ALL_INPUTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_lean_figures_are_those_of_the_whole_view(path):
    whole, _, _ = figures(path, lean=False)
    lean, _, _ = figures(path, lean=True)
    assert lean == whole


@pytest.mark.parametrize("fmt", FORMATS)
def test_lean_figures_on_a_generated_session_exact_estimated_and_parallel(fmt, session_of):
    path = session_of(fmt)
    whole, _, _ = figures(path, lean=False)
    assert figures(path, lean=True)[0] == whole
    assert figures(path, lean=True, jobs=2)[0] == whole
    assert figures(path, lean=True, estimate=True)[0] == figures(path, lean=False, estimate=True)[0]


@pytest.mark.parametrize("run_chars", [1, 10 ** 12], ids=["each-at-once", "all-at-the-end"])
def test_counts_made_a_batch_at_a_time_are_those_of_the_whole_view(run_chars, generated, monkeypatch):
    """Exact counts wait for a batch's worth of text (``RUN_CHARS``): whether each item is
    counted as it comes or all of them once the view is built, every figure is the whole
    view's, on a generated session and on every real Claude Code transcript."""
    import lookout_cli.meter.item_counts as ic

    monkeypatch.setattr(ic, "RUN_CHARS", run_chars)
    for path in [generated, *(p for p in ALL_INPUTS if "claude" in str(p))]:
        assert figures(path, lean=True)[0] == figures(path, lean=False)[0], path


def test_each_claude_code_line_is_read_and_parsed_once(generated, monkeypatch):
    """A measure builds and counts a line's items as it reads the line: the model-visible
    lines are not read from the file or parsed a second time for the view."""
    from lookout_cli.core import jsonl

    lines = generated.read_bytes().splitlines(keepends=True)
    reads, parses = [], []
    pread, loads = os.pread, orjson.loads  # (this process has imported orjson: jsonl reads with it)
    monkeypatch.setattr(jsonl.os, "pread", lambda fd, n, at: reads.append(at) or pread(fd, n, at))
    monkeypatch.setattr(orjson, "loads", lambda data: parses.append(data) or loads(data))
    _, transcript, view = figures(generated, lean=True)
    visible = {id(i.record) for i in view.items}
    assert len(visible) >= 20  # model-visible lines (the rest: subagents' lines, metadata)
    assert len(reads) <= 3  # the leaf's session id and working folder (and a slash command's line)
    known = set(lines)
    of_lines = [data for data in parses if isinstance(data, bytes) and data in known]
    assert len(of_lines) <= len(lines) + len(reads) and set(of_lines) == set(lines)


def test_compact_parses_each_line_once_to_see_the_conversation(tmp_path, monkeypatch):
    """compact builds a line's items as it reads the line, as measure does: the view it
    compacts parses no line a second time. What is parsed again is bounded: the newest lines
    read back for the envelope of the lines it writes, and the lines it keeps after the
    summary (copied, and read by the view after the compaction)."""
    from click.testing import CliRunner

    from lookout_cli.cli import cli
    from lookout_cli.formats.claude_code import ENVELOPE_LOOKBACK

    session = tmp_path / "session.jsonl"
    generate(session, "claude-code", 2, shape="real")
    lines = set(session.read_bytes().splitlines())  # (a line is parsed with its line end, or in a block without)
    assert len(lines) > 3 * ENVELOPE_LOOKBACK
    parses = []
    loads = orjson.loads
    monkeypatch.setattr(orjson, "loads", lambda data: parses.append(data) or loads(data))
    out = tmp_path / "compacted.jsonl"
    result = CliRunner().invoke(cli, ["compact", "-q", "--force", "-o", str(out), str(session)])
    assert result.exit_code == 0, result.output
    of_lines = [data for data in (d.removesuffix(b"\n") for d in parses if isinstance(d, bytes)) if data in lines]
    assert set(of_lines) == lines
    written = out.read_bytes().splitlines(keepends=True)
    summary = next(n for n, line in enumerate(written) if b'"isCompactSummary"' in line)
    assert len(of_lines) - len(lines) <= ENVELOPE_LOOKBACK + 2 * (len(written) - summary)


def test_a_compacted_session_counts_only_what_follows_its_last_boundary(generated, tmp_path, monkeypatch):
    """Items are built as lines are read only from the session's last compaction on: the lines
    before it, which the view does not show, are not counted (a long session's earlier
    segments would be tokenized for nothing). Compacted by the installed lookout, which keeps
    the lines before its boundary as Claude Code does; the figures are those of the whole
    view."""
    from lookout_cli.tokens import tokenizer

    done = subprocess.run([*lookout_exe(), "compact", "-q", "--force", "--isolated"], input=generated.read_bytes(),
                          capture_output=True, cwd=tmp_path,
                          env={**os.environ, "LOOKOUT_CACHE_DIR": str(tmp_path / "c"), "XDG_DATA_HOME": str(tmp_path / "d")})
    assert done.returncode == 0, done.stderr
    path = tmp_path / "compacted.jsonl"
    path.write_bytes(done.stdout)
    kinds = [json.loads(line).get("subtype") for line in done.stdout.splitlines()]
    assert kinds.index("compact_boundary") > len(kinds) / 2  # most lines come before it

    counted = []
    exact_length = tokenizer.exact_length

    def recording(name=tokenizer.DEFAULT_ENCODING):
        length = exact_length(name)
        return lambda text: counted.append(len(text)) or length(text)

    monkeypatch.setattr(tokenizer, "exact_length", recording)
    whole, _, _ = figures(path, lean=False)
    in_view = sum(counted)
    counted.clear()
    lean, _, _ = figures(path, lean=True)
    assert lean == whole
    assert 0 < sum(counted) <= in_view


def test_a_long_codex_rollout_keeps_no_record_of_the_lines_before_its_last_compaction(tmp_path):
    """A real-shaped rollout compacts where Codex does (every couple of megabytes): a lean load
    reads the lines before its last compaction into what they give the view, with no record
    made for each (a 500 MB rollout has 600,000 lines), and the figures are those of the whole
    view."""
    path = tmp_path / "rollout.jsonl"
    generate(path, "codex", 5, shape="real")
    lines = path.read_bytes().splitlines()
    last = max(n for n, line in enumerate(lines) if b'"type":"compacted"' in line)
    assert last > len(lines) / 2
    whole, _, _ = figures(path, lean=False)
    lean, transcript, _ = figures(path, lean=True)
    assert lean == whole
    assert transcript.settled.at == last and transcript.lines.head == last
    # made: the lines a reader of the format looked at first, the compactions, what the last carries
    assert sum(1 for record in transcript.made() if record.lineno <= last) < last / 10


@pytest.fixture(scope="module")
def long_rollout(tmp_path_factory):
    """A real-shaped Codex rollout of 40 MB (more than a long read's ``FIELDS_BYTES``), made once."""
    path = tmp_path_factory.mktemp("codex") / "rollout.jsonl"
    generate(path, "codex", 40, shape="real")
    return path


@pytest.mark.parametrize("flags", [["--estimate"], []], ids=["estimate", "exact"])
def test_the_installed_lookout_measures_a_long_codex_rollout_as_from_a_pipe(tmp_path, flags, long_rollout):
    """The installed ``lookout``, on a rollout that compacted where Codex does: read from the
    file (the lines before the last compaction settled, a long read decoding them by msgspec)
    it reports every figure it reports when the same bytes come through a pipe (every line
    read), and writes the rollout through unchanged."""
    path = long_rollout
    env = {**os.environ, "LOOKOUT_CACHE_DIR": str(tmp_path / "cache")}
    args = ["measure", "--json", "--no-discover", "--no-cache", "--now", "2026-01-01T00:00:00Z", *flags]
    from_file = run_lookout(*args, "-o", str(tmp_path / "out.jsonl"), str(path), env=env)
    from_pipe = run_lookout(*args, "-o", os.devnull, input=path.read_bytes(), env=env)
    assert from_file.returncode == 0 == from_pipe.returncode, from_file.stderr + from_pipe.stderr
    got, want = json.loads(from_file.stdout), json.loads(from_pipe.stdout)
    assert got.pop("source") == str(path) and want.pop("source") is None
    assert got == want and len(got["compactions"]) > 10
    assert (tmp_path / "out.jsonl").read_bytes() == path.read_bytes()


def test_a_view_whose_model_counts_otherwise_reads_its_lines_again(tmp_path):
    """Items counted as read use the encoding of the model known then (none: the default); a
    transcript whose model counts in another encoding has its lines read again, not its counts
    taken: the figures are those of the whole view."""
    source = SHARED_TRANSCRIPTS / "claude-code" / "ccviewer-fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
    lines = []
    for line in source.read_bytes().splitlines():
        obj = json.loads(line)
        if obj.get("type") == "assistant" and isinstance(obj.get("message"), dict):
            obj["message"]["model"] = "gpt-4-0613"  # cl100k, not the default o200k
        lines.append(json.dumps(obj))
    path = tmp_path / "gpt4.jsonl"
    path.write_text("\n".join(lines) + "\n")
    whole, _, _ = figures(path, lean=False)
    lean, _, view = figures(path, lean=True)
    assert lean == whole and lean["model"]["encoding"] == "cl100k_base"
    assert view.items and all(i.tokens is not None for i in view.items)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_lean_transcript_keeps_no_line_and_no_long_text(fmt, session_of):
    path = session_of(fmt)
    _, transcript, view = figures(path, lean=True)
    assert transcript.adapter.name == fmt
    records = transcript.records
    assert records and all(isinstance(r, LeanRecord) for r in records)
    # nothing holds a line's bytes or its parsed value once the view is built
    assert not any(r._held is not None for r in records)
    assert not any(isinstance(r._obj, (dict, list)) for r in records)
    assert not any(r.node is not None for r in records)  # nor its node once the view is counted
    long = [i for i in view.items if i.kind not in (IMAGE, TOOL_CALL) and len(i.text) > len(MARKER)]
    assert not long  # a placeholder (or a text quoting its marker) keeps only its marker
    # a call keeps, as JSON, only the arguments the meter reads (paths, ranges, commands)
    kept = [json.loads(i.text) for i in view.items if i.kind == TOOL_CALL and i.text.startswith("{")]
    assert kept and all(set(args) <= ARGUMENT_KEYS for args in kept)
    assert any(args for args in kept)
    assert all(i.image.data is None for i in view.items if i.kind == IMAGE and i.image)
    assert sum(i.tokens for i in view.items if i.tokens) > 50_000  # counted before they were cut


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_compaction_keeps_parsed_only_the_lines_it_changed(fmt, session_of, tmp_path):
    """compact (and every command) reads lean too: once it has summarized, cleared and written
    its new lines, no line it left as it was is held parsed (the memory of a 100 MB compaction
    went from 682 to about 200 MB with this)."""
    from lookout_cli.compaction.engine import Options, compact_transcript
    from lookout_cli.core.saved import SavedStore

    transcript = Run("compact", file=str(session_of(fmt)), isolated=True).load()
    result = compact_transcript(transcript, Options(force=True, budget="20k"), SavedStore(tmp_path / "saved"))
    assert result.changed and any(r.edited for r in transcript.records)
    lean = [r for r in transcript.records if isinstance(r, LeanRecord)]
    assert len(lean) > len(transcript.records) // 2
    assert [r.lineno for r in lean if not r.edited and isinstance(r._obj, (dict, list))] == []


def test_a_compacted_session_compacted_again_views_the_lines_before_its_boundary_as_they_were(tmp_path,
                                                                                            monkeypatch):
    """A cold load keeps what the lines before the last compaction give instead of their nodes
    (``Adapter.settling``), and once compact has written its boundary, the view it measures
    again is built from the lines after the boundary that was live (``Transcript.settled``):
    the same usages, compactions and items as a view built from every line."""
    from lookout_cli.compaction.engine import Options, compact_transcript
    from lookout_cli.core.saved import SavedStore
    from lookout_cli.formats import claude_code

    path = tmp_path / "session.jsonl"
    compacted_session(path, 2)
    add_turns(path, 3)  # (the generator's last segment may hold a single turn: none to split on)
    built = []
    real = claude_code.build_chain
    monkeypatch.setattr(claude_code, "build_chain", lambda records, settled=None: built.append(
        settled and settled.at) or real(records, settled))
    transcript = Run("compact", file=str(path), isolated=True).load()
    assert compact_transcript(transcript, Options(force=True), SavedStore(tmp_path / "saved")).changed
    last = max(n for n, r in enumerate(transcript.original) if b'"subtype":"compact_boundary"' in r.raw)
    assert built[0] == built[-1] == last, built  # from the last boundary, before and after compact's
    assert all(r.node is None for r in transcript.original[:last])
    view = transcript.view()
    transcript.settled = None
    transcript.invalidate()
    whole = transcript.view()

    def usages(v):
        return [(u.record.lineno, u.input, u.cache_write, u.cache_read, u.output, u.model, u.timestamp)
                for u in v.usages]

    assert built[-1] is None  # (the whole view)
    assert usages(view) == usages(whole) and len(whole.usages) > 100
    assert [(c.record.lineno, c.before, c.after) for c in view.compactions] == \
        [(c.record.lineno, c.before, c.after) for c in whole.compactions]
    assert [(i.kind, i.text, i.record.lineno) for i in view.items] == \
        [(i.kind, i.text, i.record.lineno) for i in whole.items]


def _lines_of(handle, head: int) -> Lines:
    """The lines of ``handle``, those before ``head`` left unmade (as a load leaves a compacted
    session's older segments)."""
    index = lean_index(handle)
    read = [LeanRecord(n, index, raw) for n, raw in read_indexed_lines(handle, index)]
    return Lines(index, head, read[head:])


def test_lines_left_unmade_read_as_the_records_of_every_line(tmp_path):
    """``Lines`` gives a line's record when it is asked for, the same one each time, and reads
    as the list of every line's records: by position from either end, by slice, in order."""
    path = tmp_path / "t.jsonl"
    rows = [json.dumps({"n": n}).encode() + b"\n" for n in range(40)]
    path.write_bytes(b"".join(rows))
    with open(path, "rb") as handle:
        lines = _lines_of(handle, 25)
        assert len(lines) == 40 and list(lines.made()) == lines.tail
        assert lines[3].data == {"n": 3} and lines[3] is lines[3] and lines[-40] is lines[0]
        assert lines[-1].data == {"n": 39} and lines[-15] is lines.tail[0]
        with pytest.raises(IndexError):
            lines[-41]
        with pytest.raises(IndexError):
            lines[40]
        assert [r.raw for r in lines] == rows and [r.lineno for r in lines] == list(range(1, 41))
        assert [r.data["n"] for r in lines[20:30]] == list(range(20, 30)) and lines[30:] == lines.tail[5:]
        assert [r.data["n"] for r in lines[::7]] == list(range(0, 40, 7)) and lines[30:10] == []
        assert sorted(r.lineno for r in lines.made()) == list(range(1, 41))  # every one made once asked for
        copy, shared = lines.copy(apart=True), lines.copy()  # (what came in, as a transcript keeps it: shared)
        copy[2] = Record.new({"n": "two"})
        shared[1] = Record.new({"n": "one"})
        assert lines[2].data == {"n": 2} and copy[2].data == {"n": "two"} and copy[3] is lines[3]
        assert lines[1].data == {"n": 1} and shared[1].data == {"n": "one"} and shared[2] is lines[2]


@pytest.mark.parametrize("block", [7, 64, 1 << 20])
def test_lines_read_a_block_at_a_time_are_the_lines_read_one_by_one(tmp_path, block):
    """``read_line_blocks`` gives the lines up to an offset, blocks smaller and larger than a
    line: the lines ``read_indexed_lines`` gives (with their line ends, a CR kept), numbered
    alike, their places the same in the index; reading on from the index after them gives the
    rest. A line over the bound is refused as one by one; a file shorter than the offset
    (changed since it was looked at) ends the blocks at its last whole line."""
    rows = [b'{"n": 1}\n', b"\n", b'{"long": "' + b"x" * 150 + b'"}\r\n', b"null\n", b'{"n": 4}\n', b'{"n": 5}\n']
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(rows))
    end = sum(map(len, rows[:5]))  # where the last line starts
    with open(path, "rb") as handle:
        whole = lean_index(handle)
        one_by_one = list(read_indexed_lines(handle, whole))
    with open(path, "rb") as handle:
        index = lean_index(handle)
        blocks = list(read_line_blocks(handle, index, end, block=block))
        given = [(n, line) for first, lines in blocks for n, line in enumerate(lines, first)]
        assert given == one_by_one[:5]
        assert list(index.starts) == list(whole.starts[:6]) and handle.tell() == end
        assert list(read_indexed_lines(handle, index)) == one_by_one[5:]
        assert list(index.starts) == list(whole.starts)
    with open(path, "rb") as handle, pytest.raises(LookoutError, match="line 3 is longer than 100 bytes"):
        list(read_line_blocks(handle, lean_index(handle), end, max_record_bytes=100, block=block))
    short = tmp_path / "short.jsonl"
    short.write_bytes(path.read_bytes()[:sum(map(len, rows[:2])) + 20])  # as it is now: it ends inside line 3
    with open(short, "rb") as handle:
        index = lean_index(handle)
        given = [line for _, lines in read_line_blocks(handle, index, end, block=block) for line in lines]
        assert given == [rows[0], b"\n"] and list(index.starts) == list(whole.starts[:3])
        line_3 = short.read_bytes()[index.starts[-1]:]
        assert list(read_indexed_lines(handle, index)) == [(3, line_3)]  # read on from the index


def test_a_long_session_read_a_block_at_a_time_views_as_every_line_does(tmp_path, monkeypatch):
    """The lines before a session's last compaction are read in blocks; blocks of a few lines,
    with the odd lines among them (blank, null, not JSON) and a line longer than a block, give
    the view every line gives, and the odd lines are records, warned about, in their places."""
    from test_format_claude_code import (
        _boundary,
        _line,
        _own_figures,
        _same_view_as_every_line,
        _t,
    )

    from lookout_cli import options

    monkeypatch.setattr(options, "read_line_blocks", functools.partial(jsonl.read_line_blocks, block=300))
    older = [_line("u0", None, "user", "first", ts=_t(0))]
    for n in range(1, 60):
        older += [_line(f"a{n}", json.loads(older[-1])["uuid"], "assistant", f"answer {n}" * (40 if n == 50 else 1),
                        f"m{n}", ts=_t(n)), _line(f"u{n}", f"a{n}", "user", f"prompt {n}", ts=_t(n))]
    odd = [b"\n", b"null\n", b"{not json\n"]
    lines = older[:70] + odd + older[70:] + [_boundary("b1", "u59", _t(70)),
                                             _line("s1", "b1", "user", "summary", ts=_t(71), isCompactSummary=True)]
    data = b"".join(line if line in odd else _own_figures((n, line)) for n, line in enumerate(lines))
    assert max(map(len, data.splitlines())) > 300
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    run = Run("measure", file=str(path), isolated=True, quiet=True)
    lean = run.load()
    assert run._bad_lines == 2
    chain = _same_view_as_every_line(lean, data.replace(b"null\n", b"\n").replace(b"{not json\n", b"\n"))
    assert chain.settled is not None and chain.settled.at == len(lines) - 2
    assert {70, 71, 72} <= {r.lineno - 1 for r in lean.lines.made()}
    assert [r.raw for r in lean.records] == data.splitlines(keepends=True)


def test_lines_left_unmade_are_written_as_the_bytes_they_are(tmp_path, monkeypatch):
    """The writer copies the lines ``Lines`` left unmade as their bytes, a block at a time,
    between the records made among them (changed, put in a line's place, or only read): the
    bytes of every record written one after the other."""
    monkeypatch.setattr(jsonl, "COPY_BLOCK", 1000)  # many blocks, some of a single line longer than one
    path = tmp_path / "t.jsonl"
    rows = [json.dumps({"n": n, "pad": "x" * (n % 7) * 300}).encode() + b"\n" for n in range(500)]
    path.write_bytes(b"".join(rows))
    with open(path, "rb") as handle:
        lines = _lines_of(handle, 400)
        lines[3].edit()["n"] = "three"
        assert lines[250].data["n"] == 250
        lines[7] = Record.new({"n": "seven"})
        lines[450].edit()["n"] = "four fifty"
        lines.append(Record.new({"n": "added"}))
        first, every = RecordWriter(io.BytesIO()), RecordWriter(io.BytesIO())
        first.write_all(lines)
        made = sorted(r.lineno for r in lines.made() if r.lineno and r.lineno <= 400)
        every.write_all(list(lines))
    expected = list(rows)
    for n, value in ((3, "three"), (450, "four fifty")):
        expected[n] = json.dumps({"n": value, "pad": "x" * (n % 7) * 300}, separators=(",", ":")).encode() + b"\n"
    expected[7] = b'{"n":"seven"}\n'
    assert made == [4, 251]  # (what the writer left unmade: the line put in a place has no number)
    assert first.stream.getvalue() == every.stream.getvalue() == b"".join(expected) + b'{"n":"added"}\n'
    assert first.written == every.written == 501


def test_a_lean_record_renumbered_still_reads_its_own_line(tmp_path):
    """compact numbers the lines anew when it adds one; a lean record must still read its own."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"n":1}\n{"n":2}\n{"n":3}\n')
    with open(path, "rb") as handle:
        records = _lines_of(handle, 0).tail
        for record in records:
            record.release()
        for record in records:
            record.lineno += 1  # a line was added before them
        assert [r.raw for r in records] == [b'{"n":1}\n', b'{"n":2}\n', b'{"n":3}\n']
        assert [r.data["n"] for r in records] == [1, 2, 3] and [r.span()[0] for r in records] == [0, 8, 16]


def test_a_copy_of_a_lean_record_reads_the_same_line_and_is_edited_apart(tmp_path):
    """prepare-idle compacts a copy of the transcript to write its note; the copy of a line not
    yet edited reads the file too (no bytes held), and editing either leaves the other alone."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"n":1}\n{"n":2}\n')
    with open(path, "rb") as handle:
        first, second = _lines_of(handle, 0).tail
        first.release()
        second.edit()["n"] = 20
        one, two = first.copy(), second.copy()
        assert isinstance(one, LeanRecord) and one._held is None and one.raw == b'{"n":1}\n'
        one.edit()["n"] = 10
        two.edit()["n"] = 200
        assert (first.data["n"], one.data["n"]) == (1, 10) and not first.edited
        assert (second.data["n"], two.data["n"]) == (20, 200)


def test_lean_records_written_back_are_read_a_block_at_a_time(tmp_path, monkeypatch):
    """Untouched lines next to each other in the input are read back together, not one read
    a line: the output is the input with its edited and added lines, byte for byte (line
    endings and a last line without one included)."""
    import io

    from lookout_cli.core import jsonl

    lines = [b'{"n":%d}\n' % n for n in range(1000)] + [b'{"n":"crlf"}\r\n', b'{"n":"end"}']
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(lines))
    out = io.BytesIO()
    with open(path, "rb") as handle:
        records = _lines_of(handle, 0).tail
        for record in records:
            record.release()
        records[500].edit()["n"] = "five hundred"
        records[700:700] = [jsonl.Record.new({"added": True})]
        records.append(jsonl.Record.new({"after": "end"}))
        reads, pread = [], os.pread
        monkeypatch.setattr(jsonl.os, "pread", lambda fd, n, at: reads.append(n) or pread(fd, n, at))
        jsonl.RecordWriter(out).write_all(records)
    assert out.getvalue() == (b"".join(lines[:500]) + b'{"n":"five hundred"}\n' + b"".join(lines[501:700])
                              + b'{"added":true}\n' + b"".join(lines[700:]) + b'\n{"after":"end"}\n')
    assert len(reads) <= 4  # three runs of untouched lines, and the edited line's ending


def test_the_transcript_passes_through_from_a_file_a_pipe_and_the_middle_of_a_file(generated, tmp_path):
    data = generated.read_bytes()
    args = ["measure", "-q", "--no-cache"]
    assert run_lookout(*args, str(generated)).stdout == data
    assert run_lookout(*args, input=data).stdout == data  # a pipe: read through a temporary file
    start = data.index(b"\n", len(data) // 2) + 1
    with open(generated, "rb") as stdin:
        stdin.seek(start)  # standard input is the file, read from where it stands
        done = subprocess.run([*lookout_exe(), *args], stdin=stdin, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == data[start:]
    out = tmp_path / "out.jsonl"
    assert run_lookout(*args, "-o", str(out), input=data).returncode == 0
    assert out.read_bytes() == data


def test_lines_appended_while_measuring_are_not_written_back(generated, tmp_path):
    """An agent appends to its session while a hook measures it: the transcript written is
    what was read, not the file as it stands when the copy is made."""
    session = tmp_path / "session.jsonl"
    data = generated.read_bytes()
    session.write_bytes(data)
    out = tmp_path / "out.jsonl"
    run = Run("measure", file=str(session), output=str(out), isolated=True)
    transcript = run.load(lean=True)
    with open(session, "ab") as grow:
        grow.write(b'{"type":"progress","uuid":"late"}\n')
    run.finish(transcript)
    assert out.read_bytes() == data


def test_a_fifo_or_process_substitution_given_as_file_is_kept_in_a_temporary_file(generated, tmp_path):
    """``lookout measure <(zcat session.jsonl.gz)``: the FILE is a pipe, which cannot be read
    again by offset."""
    data = generated.read_bytes()
    fifo = tmp_path / "session.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_bytes, args=(data,))
    writer.start()
    done = run_lookout("measure", "-q", "--no-cache", str(fifo))
    writer.join(timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == data
    shell = subprocess.run(["bash", "-c", f'{" ".join(lookout_exe())} measure -q --no-cache <(cat "{generated}")'],
                           capture_output=True, timeout=120)
    assert shell.returncode == 0, shell.stderr
    assert shell.stdout == data
