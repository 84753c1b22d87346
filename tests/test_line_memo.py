"""The line memo (``line_memo``): measuring a FILE again after it grew, was rewritten, truncated
or replaced reuses what the last run learned of each line, and gives exactly the figures of a
measure from scratch. Lines measured before are not parsed again; what an item takes from
other lines (message, turn, a result's tool name, a slash command's kind) is worked out anew."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import shutil
import sys
from collections.abc import Iterator

import orjson
import pytest
from conftest import DATA, REPO, run_lookout
from test_measure import ALL_INPUTS

from lookout_cli.core import fsutil, paths
from lookout_cli.core.dataclass import replace
from lookout_cli.core.fsutil import sealed_sections
from lookout_cli.formats import SNIFF_RECORDS
from lookout_cli.measure import measure_input
from lookout_cli.meter import line_memo
from lookout_cli.meter.analysis import Settings
from lookout_cli.meter.report import to_dict
from lookout_cli.options import Run

sys.path.insert(0, str(REPO))  # bench/ is a top-level folder of the repository, not installed
from bench.generate import generate  # noqa: E402

NOW = "2026-01-01T00:00:00Z"


def measured(path, cache: bool = True, points: bool = True, **settings):
    """measure's meter for FILE ``path``, in this process, and the transcript it read
    (``points``: the series too, which ``-q`` leaves out)."""
    settings = Settings(now=dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc), discover_rules=False, **settings)
    return measure_input(Run("measure", file=str(path), isolated=True), settings, cache=cache, points=points)


def report(path, cache: bool = True, **settings) -> dict:
    return to_dict(measured(path, cache, **settings)[0], str(path), None)


def fresh(path, **settings) -> dict:
    """The report of ``path`` from every line's node: no line memo, and no value standing for
    the lines before a compaction (``Adapter.settling`` offers none)."""
    from lookout_cli.formats import claude_code, codex

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(claude_code.Adapter, "settling", lambda self: None)
        patch.setattr(codex.Adapter, "settling", lambda self: None)
        return report(path, cache=False, **settings)


class Parses:
    """Counts the lines parsed (orjson.loads on a line's bytes) while it is on."""

    def __init__(self, monkeypatch):
        self.count = 0
        real = orjson.loads

        def loads(data):
            self.count += isinstance(data, bytes)  # a line; texts read out of one are str
            return real(data)

        monkeypatch.setattr(orjson, "loads", loads)  # (this process has imported orjson: jsonl reads with it)


def memo_files() -> list:
    return sorted((paths.cache_dir() / "state").glob("*.lines"))


def lines_of(path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    """A generated session of at least 2 * SNIFF_RECORDS lines. Its text is the repository's
    own, so its line sizes move with every commit: 0.6 MB once held only 68 lines."""
    path = tmp_path_factory.mktemp("memo") / "session.jsonl"
    size = 0.6
    generate(path, "claude-code", size)
    while len(lines_of(path)) < 2 * SNIFF_RECORDS:
        size *= 2
        generate(path, "claude-code", size)
    return path


@pytest.fixture
def grown(tmp_path, session):
    """A copy of the generated session cut at 60% of its lines, and the rest. The part measured
    first holds SNIFF_RECORDS lines at least: the format is then told from lines as they are
    read, which a memo needs to be resumed (a shorter file is sniffed at its end and read whole
    again when it grows)."""
    lines = lines_of(session)
    cut = max(len(lines) * 6 // 10, SNIFF_RECORDS)
    path = tmp_path / "grown.jsonl"
    path.write_bytes(b"".join(lines[:cut]))
    return path, b"".join(lines[cut:])


def test_a_grown_file_reads_only_its_new_lines_and_measures_as_from_scratch(grown, monkeypatch):
    path, rest = grown
    first = report(path)
    assert first == fresh(path) and len(memo_files()) == 1
    new = rest.splitlines(keepends=True)[:40]
    with open(path, "ab") as fh:
        fh.write(b"".join(new))
    parses = Parses(monkeypatch)
    again = report(path)
    # each new line once for its node, a model-visible one once more for its items, and the
    # leaf again for its session and folder; none of the lines measured before
    assert parses.count <= 2 * len(new) + 2
    monkeypatch.undo()
    assert again == fresh(path)
    assert again != first


def test_the_rest_appended_in_steps_measures_as_from_scratch(grown):
    path, rest = grown
    report(path)
    lines = rest.splitlines(keepends=True)
    step = max(1, len(lines) // 3)
    for at in range(0, len(lines), step):
        with open(path, "ab") as fh:
            fh.write(b"".join(lines[at:at + step]))
        assert report(path) == fresh(path)


def test_a_prompts_run_appends_to_the_memo_only_what_it_added(grown, monkeypatch):
    """A run that resumed the memo appends the lines it read and the items it built to it: the
    memo is not written anew on every prompt. Past MAX_SECTIONS sections it is, as one."""
    path, rest = grown
    report(path)
    (memo,) = memo_files()
    before = memo.stat()
    lines = rest.splitlines(keepends=True)
    with open(path, "ab") as fh:
        fh.write(b"".join(lines[:4]))
    assert report(path) == fresh(path)
    after = memo.stat()
    assert (after.st_ino, len(sealed_sections(memo).payloads)) == (before.st_ino, 2)
    assert 0 < after.st_size - before.st_size < before.st_size // 2  # four lines' worth, not the memo again
    monkeypatch.setattr(line_memo, "MAX_SECTIONS", 3)
    sections = []
    for line in lines[4:8]:
        with open(path, "ab") as fh:
            fh.write(line)
        report(path)
        sections.append(len(sealed_sections(memo).payloads))
    assert sections == [3, 1, 2, 3]  # appended to 3, then written anew
    os.utime(path, ns=(1, 1))  # the snapshot no longer holds (another time): the memo does
    kept = memo.read_bytes()
    parses = Parses(monkeypatch)
    again = report(path)
    assert parses.count <= 2  # nothing new: only the leaf is read again, and nothing written
    monkeypatch.undo()
    assert again == fresh(path) and memo.read_bytes() == kept


def test_a_rewritten_file_parses_only_what_changed(tmp_path, monkeypatch):
    # the generated session is made of the repository's own text, so how many lines and results
    # it holds moves with the sources: a session long enough that reading every line again
    # would pass the bound below, whatever the commit
    path = tmp_path / "rewritten.jsonl"
    size = 0.5
    generate(path, "claude-code", size)
    while len(lines_of(path)) < 400:
        size *= 2
        generate(path, "claude-code", size)
    report(path)
    lines = lines_of(path)
    changed = 0
    for n, line in enumerate(lines):  # shorten the tool results, as a compaction would
        obj = json.loads(line)
        content = obj.get("message", {}).get("content") if isinstance(obj.get("message"), dict) else None
        if isinstance(content, list) and content and content[0].get("type") == "tool_result" \
                and changed < len(lines) // 8:
            content[0]["content"] = "[cleared]"
            lines[n] = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
            changed += 1
    assert changed >= 3 and 2 * changed + 50 + 2 < len(lines) // 2  # (the bound below: half the lines)
    replaced = path.with_suffix(".new")
    replaced.write_bytes(b"".join(lines))
    os.replace(replaced, path)  # another inode at the path, as compact -i leaves it
    parses = Parses(monkeypatch)
    again = report(path)
    assert parses.count <= 2 * changed + 50 + 2  # the changed lines, the format's sniff, the leaf
    monkeypatch.undo()
    assert again == fresh(path)


def test_a_truncated_or_replaced_file_measures_as_from_scratch(grown, session):
    path, rest = grown
    with open(path, "ab") as fh:
        fh.write(rest)
    report(path)
    lines = lines_of(path)
    path.write_bytes(b"".join(lines[: len(lines) // 2]))  # same inode, shorter
    assert report(path) == fresh(path)
    other = path.with_suffix(".other")
    other.write_bytes(b"".join(lines[: len(lines) // 3]) + b"".join(lines[len(lines) // 2:]))
    os.replace(other, path)  # a middle cut: the chain's lines reorder, parents go missing
    assert report(path) == fresh(path)


def test_items_counted_another_way_are_counted_again(grown):
    path, rest = grown
    report(path, estimate=True)
    with open(path, "ab") as fh:
        fh.write(rest[: len(rest) // 2].rpartition(b"\n")[0] + b"\n")
    assert report(path) == fresh(path)  # exact now: the estimated items are not reused
    assert report(path, model="gpt-4") == fresh(path, model="gpt-4")  # another encoding


def test_a_run_stopped_while_appending_to_the_memo_leaves_it_readable(grown):
    """A run stopped (killed, interrupted, the disk full) while it appends its section leaves
    the section's head blank and its values half written: later runs read the sections before
    it, measure as from scratch, and write the memo anew. (A blank head read as an empty
    section once failed every later measure of the file.)"""
    path, rest = grown
    report(path)
    (memo,) = memo_files()
    lines = rest.splitlines(keepends=True)
    with open(path, "ab") as fh:
        fh.write(b"".join(lines[:10]))
    with open(memo, "ab") as fh:
        fh.write(bytes(12) + (100).to_bytes(8, "little") + b"values not yet sealed")  # as a stopped run leaves it
    assert report(path) == fresh(path)
    assert b"not yet sealed" not in memo.read_bytes()  # written anew
    size = memo.stat().st_size
    with open(path, "ab") as fh:
        fh.write(b"".join(lines[10:20]))

    def stopped(self, value):
        raise KeyboardInterrupt

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fsutil._Section, "put", stopped)
        with pytest.raises(KeyboardInterrupt):
            report(path)
    assert memo.stat().st_size >= size  # never shrunk (a reader may have it mapped)
    with open(path, "ab") as fh:
        fh.write(b"".join(lines[20:]))
    assert report(path) == fresh(path)


def test_a_damaged_memo_is_ignored(grown):
    path, rest = grown
    report(path)
    (memo,) = memo_files()
    data = bytearray(memo.read_bytes())
    data[len(data) // 2] ^= 0xFF
    memo.write_bytes(bytes(data))
    lines = rest.splitlines(keepends=True)
    with open(path, "ab") as fh:
        fh.write(b"".join(lines[:10]))
    assert report(path) == fresh(path)
    memo.write_bytes(memo.read_bytes()[:100])  # torn
    with open(path, "ab") as fh:
        fh.write(b"".join(lines[10:]))
    assert report(path) == fresh(path)


@pytest.fixture(scope="module")
def compacting(tmp_path_factory):
    """A session in the real shape, which compacts where Claude Code does: three compactions
    at least, the third 200 lines before the end at least, and the line of each."""
    path = tmp_path_factory.mktemp("compacting") / "session.jsonl"
    size = 5.0
    while True:
        generate(path, "claude-code", size, shape="real")
        lines = lines_of(path)
        boundaries = [n for n, line in enumerate(lines) if b'"subtype":"compact_boundary"' in line
                      and b'"isSidechain":false' in line and line.startswith(b'{"parentUuid":null')]
        if len(boundaries) >= 3 and len(lines) > boundaries[2] + 200:
            return path, boundaries
        size *= 1.5


def grown_in_steps(lines: list[bytes], compactions: list[int], path) -> Iterator[tuple[int, int]]:
    """``path`` written with ``lines`` up to a little after the first of their ``compactions``
    and measured as from scratch, then grown across the next two in steps: after each, the
    lines it had and the lines it has."""
    first, second, third = compactions[:3]
    cuts = [first + 60, first + 200, second + 30, second + 120, third + 5, len(lines)]
    path.write_bytes(b"".join(lines[:cuts[0]]))
    assert report(path) == fresh(path)
    for before, cut in itertools.pairwise(cuts):
        with open(path, "ab") as fh:
            fh.write(b"".join(lines[before:cut]))
        yield before, cut


class Revived:
    """Counts the nodes a run takes back from the memo."""

    def __init__(self, monkeypatch):
        from lookout_cli.formats import claude_code

        self.count = 0
        real = claude_code.revive

        def revive(kept):
            self.count += 1
            return real(kept)

        monkeypatch.setattr(claude_code, "revive", revive)


def test_a_compacted_session_resumed_reads_no_node_from_before_its_last_compaction(compacting, tmp_path):
    """A run that resumes a grown session takes what the lines before the last compaction it
    found give from the memo, not their nodes: across a new compaction, from a section
    appended before it, and after the memo was written anew for another count. Each run
    measures as from scratch."""
    source, boundaries = compacting
    lines = lines_of(source)
    path = tmp_path / "grown.jsonl"
    settled = boundaries[0]
    for before, cut in grown_in_steps(lines, boundaries, path):
        with pytest.MonkeyPatch.context() as patch:  # (the folders the tests are given stay patched)
            revived = Revived(patch)
            again = report(path)
        assert revived.count <= before - settled  # the lines read before, from the last compaction then
        assert again == fresh(path)
        settled = max(b for b in boundaries if b < cut)
    assert report(path, model="gpt-4") == fresh(path, model="gpt-4")  # counted otherwise: written anew
    with open(path, "ab") as fh:
        fh.write(lines[-1])  # (a repeated line: grown all the same)
    assert report(path) == fresh(path)


def test_a_prompts_run_reads_no_id_or_time_of_the_responses_before_the_last_compaction(compacting, tmp_path,
                                                                                        monkeypatch):
    """What a prompt's run over a long compacted session needs of its older responses is what
    they add up to, their lines and figures: it loads no id a response (a new response is
    looked up by its id's CRC among the marks kept with them) and no time; a run after a new
    compaction, which keeps them anew, loads both. Each measures as from scratch."""
    source, boundaries = compacting
    lines = lines_of(source)
    path = tmp_path / "grown.jsonl"
    path.write_bytes(b"".join(lines[:boundaries[2] - 40]))
    report(path)
    values = line_memo._Values.__getitem__
    loaded: list[int] = []
    monkeypatch.setattr(line_memo._Values, "__getitem__", lambda self, at: loaded.append(at) or values(self, at))
    with open(path, "ab") as fh:  # a prompt's exchange, before the next compaction
        fh.write(b"".join(lines[boundaries[2] - 40:boundaries[2] - 10]))
    meter, _ = measured(path, points=False)  # as ``-q``
    assert to_dict(replace(meter, series=()), str(path), None) == {**fresh(path), "series": []}
    assert loaded and 1 in loaded and not {2, 6} & set(loaded)  # the marks; neither the ids nor the times
    loaded.clear()
    with open(path, "ab") as fh:  # across the third compaction: what the lines before it give is kept anew
        fh.write(b"".join(lines[boundaries[2] - 10:boundaries[2] + 30]))
    assert report(path) == fresh(path)
    assert {2, 6} <= set(loaded)


def test_a_memo_mapped_gives_what_a_memo_read_gives(compacting, tmp_path, monkeypatch):
    """A memo of ``MAP_BYTES`` or more is mapped, and its tables and the older usages' columns
    read as views of its bytes (a long session's; here every memo, the bound lowered): each
    run across compactions, with the series that reads every column and time, measures as
    from scratch."""
    monkeypatch.setattr(fsutil, "MAP_BYTES", 1)
    source, boundaries = compacting
    lines = lines_of(source)
    path = tmp_path / "grown.jsonl"
    cuts = [boundaries[1] + 20, boundaries[2] - 30, boundaries[2] + 30, len(lines)]
    path.write_bytes(b"".join(lines[:cuts[0]]))
    assert report(path) == fresh(path)
    for before, cut in itertools.pairwise(cuts):
        with open(path, "ab") as fh:
            fh.write(b"".join(lines[before:cut]))
        assert report(path) == fresh(path)
    assert type(sealed_sections(memo_files()[0]).payloads[0].obj).__name__ == "mmap"


def test_older_ids_are_looked_up_by_their_marks_and_told_apart_by_the_ids():
    """``Keys``: an id whose CRC-32 is among no mark is not one of them, and the ids are not
    loaded for it; a mark that matches is checked against the ids (two ids may share a CRC)."""
    import array

    from lookout_cli.formats.usages import Keys, mark

    loads = []
    ids = ["msg_a", "msg_b", 7]  # (a number: a uuid as the chain keys it, for a line that names no message)

    def load():
        loads.append(1)
        return ids

    marks = array.array("I", sorted([mark("msg_a"), mark("msg_b"), mark("msg_c")]))  # msg_c's: as a collision's
    keys = Keys(load, marks, len(ids))
    assert "msg_z" not in keys and not loads
    assert "msg_c" not in keys and loads == [1]
    assert "msg_a" in keys and 7 in keys and 8 not in keys and loads == [1]
    joined = Keys.joined(keys, ["msg_d"])
    assert len(joined) == 4 and list(joined) == [*ids, "msg_d"] and "msg_d" in joined and "msg_e" not in joined
    assert list(joined.all_marks()) == sorted([*marks, mark("msg_d")])
    assert list(Keys(ids).all_marks()) == sorted([mark("msg_a"), mark("msg_b")]) and 7 in Keys(ids)


def test_what_older_usages_add_up_to_is_kept_and_added_to():
    """A run whose settled value moves to a later compaction adds the usages between to what
    the older ones added up to (kept with them), not every column again: the same totals by
    model, in the same order, as of all of them at once (negative writes, no model, a 1-hour
    write in one part only)."""
    import random

    from lookout_cli.formats.usages import _merged, totals_by_model

    rng = random.Random(29)
    for _ in range(300):
        parts = []
        for models in (("a", "b", None), ("a", "c", None)):
            n = rng.randint(0, 20)
            parts.append(([[rng.randint(-3, 50) for _ in range(n)] for _ in range(4)] + [[rng.choice((0, 0, 7))
                          for _ in range(n)]], [rng.choice(models) for _ in range(n)]))
        (first, m1), (second, m2) = parts
        whole = totals_by_model([x + y for x, y in zip(first, second)], m1 + m2)
        merged = _merged(totals_by_model(first, m1), totals_by_model(second, m2))
        assert merged == whole and list(merged) == list(whole)


def test_the_lines_a_resumed_run_left_unread_are_all_read_when_asked_for(compacting, tmp_path):
    """A cold run keeps no node for the lines before the last compaction (what they give
    stands for them), nor does a run that resumes the file read them; when the chain needs
    them after all (``unsettle``), each is read from the file: the node a load of every line
    gives it."""
    from lookout_cli.formats import Transcript, claude_code, load_adapter

    source, boundaries = compacting
    lines = lines_of(source)
    path = tmp_path / "grown.jsonl"
    path.write_bytes(b"".join(lines[:boundaries[2] + 30]))
    report(path)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(claude_code.Adapter, "settling", lambda self: None)
        expected = [r.node for r in Run("measure", file=str(path), isolated=True).load().records]
    adapter = load_adapter("claude-code")
    memo = line_memo.LineMemo(str(path), None, lambda model: ("o200k_base", True))
    with open(path, "rb") as handle:
        records = memo.resume(handle, adapter)
        at = boundaries[2]
        assert memo.settled is not None and memo.settled[0] == at
        assert records.head == at and len(list(records.made())) == len(records) - at  # none made before it
        assert all(r.node is None for r in records[:at]) and records[at].node is not None
        memo.unsettle()
        assert memo.settled is None
        transcript = Transcript(records, adapter, str(path))
        transcript.memo = memo
        chain = adapter.chain(transcript)
    assert chain.settled is None and len(chain.boundaries) == 3
    assert [adapter.plain(r.node) for r in records] == [adapter.plain(n) for n in expected]


def _last_message(lines: list[bytes], *kinds: str) -> str:
    """The uuid of the last main-chain line of one of these types."""
    objs = (orjson.loads(line) for line in reversed(lines))
    return next(obj["uuid"] for obj in objs if obj.get("type") in kinds and not obj.get("isSidechain"))


def _grown_by(path, lines: list[bytes], *new: dict) -> dict:
    """``path`` as ``lines``, measured, then grown by the lines ``new``: its report, as from
    scratch, resumed from the memo and cold."""
    path.write_bytes(b"".join(lines))
    report(path)
    with open(path, "ab") as fh:
        fh.write(b"".join(orjson.dumps(obj) + b"\n" for obj in new))
    again = report(path)
    assert again == fresh(path) == report(path, cache=False)
    return again


def _prompt(parent: str, timestamp: str) -> dict:
    return {**orjson.loads(claude_line(99, "user", "Go on from here.", None, timestamp=timestamp)), "parentUuid": parent}


def test_a_line_that_follows_one_from_before_the_last_compaction_reads_them_all(compacting, tmp_path):
    """A rewind to before the last compaction, lines newer than the leaf the memo knows of only
    in their time, and a compaction of a line from before it: the lines the memo stood for
    make another chain, read again."""
    source, boundaries = compacting
    lines = lines_of(source)[:boundaries[1] + 40]
    path = tmp_path / "grown.jsonl"
    assert len(fresh_of(path, lines)["compactions"]) == 2
    before_both = _last_message(lines[:boundaries[0]], "assistant")
    assert _grown_by(path, lines, _prompt(before_both, "2030-01-01T00:00:00Z"))["compactions"] == []
    # after the leaf, but older than the line before the compaction: that line is the newest
    # leaf, and the conversation the one before the compaction again
    leaf = _last_message(lines, "user", "assistant")
    assert len(_grown_by(path, lines, _prompt(leaf, "2001-01-01T00:00:00Z"))["compactions"]) == 1
    # a compaction whose conversation went on from a line before the last one
    between = _last_message(lines[:boundaries[1]], "assistant")
    boundary = {"parentUuid": None, "logicalParentUuid": between, "isSidechain": False, "type": "system",
                "subtype": "compact_boundary", "content": "Conversation compacted", "sessionId": "S",
                "timestamp": "2030-01-01T00:00:00Z", "uuid": "u-boundary", "compactMetadata": {"trigger": "manual"}}
    summary = {**_prompt("u-boundary", "2030-01-01T00:00:01Z"), "isCompactSummary": True, "uuid": "u-summary"}
    again = _grown_by(path, lines, boundary, summary)
    assert [c["line"] for c in again["compactions"]] == [boundaries[0] + 1, len(lines) + 1]


def fresh_of(path, lines: list[bytes]) -> dict:
    path.write_bytes(b"".join(lines))
    return fresh(path)


@pytest.mark.parametrize("lean", [False, True], ids=["as-sized", "dicts-and-mapped"])
@pytest.mark.parametrize("path", [p for p in ALL_INPUTS if (b'"compact_boundary"' in p.read_bytes()
                                                            or p.parent.name == "codex")
                                  and len(lines_of(p)) > SNIFF_RECORDS], ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_compacted_input_grown_line_by_line_measures_as_from_scratch(path, tmp_path, monkeypatch, lean):
    """Each line appended, the run resumes the memo and measures as from scratch; ``lean``:
    with the chain kept in dicts and the memo mapped, as a long session's are, on real
    transcripts too (their sizes alone would take neither path). Every Codex rollout too
    (replacement histories, a local compaction, images their UI events copy, a rollback,
    other agents' messages: the real and the hand-made ones)."""
    if lean:
        from lookout_cli.formats import claude_chain

        monkeypatch.setattr(claude_chain, "SPARSE_FROM", 0)
        monkeypatch.setattr(fsutil, "MAP_BYTES", 1)
    lines = lines_of(path)
    copy = tmp_path / path.name
    copy.write_bytes(b"".join(lines[:SNIFF_RECORDS]))
    report(copy)
    for line in lines[SNIFF_RECORDS:]:
        with open(copy, "ab") as fh:
            fh.write(line)
        assert report(copy) == fresh(copy)


def part_items(figures: dict) -> dict[str, int]:
    return {part["key"]: part["items"] for part in figures["parts"]}


def claude_line(n: int, kind: str, content, parent: int | None, **extra) -> bytes:
    obj = {"parentUuid": f"u{parent}" if parent else None, "isSidechain": False, "type": kind, "uuid": f"u{n}",
           "sessionId": "S", "cwd": "/w/app", "timestamp": f"2026-01-01T00:00:{n:02d}Z", **extra}
    if kind == "assistant":
        obj["message"] = {"id": f"msg{n}", "model": "claude-sonnet-4-5", "role": "assistant", "content": content,
                          "usage": {"input_tokens": 10 * n, "output_tokens": 5}}
    else:
        obj["message"] = {"role": "user", "content": content}
    return (json.dumps(obj) + "\n").encode()


def test_a_response_kept_across_a_compaction_is_counted_once_when_resumed(tmp_path):
    """The ids of the responses before a compaction, which the memo keeps with their usages
    (``Settled.keys``), tell a response kept after it (the same message id, as ``compact``'s
    tail and Claude Code's preserved segments keep it) in a run that resumes the file: it
    measures as from scratch, and the kept response is not counted again."""
    def line(n: int, kind: str, content, parent: int | None, **extra) -> bytes:
        return claude_line(n, kind, content, parent, timestamp=f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}Z", **extra)

    def session(kept_id: str) -> list[bytes]:
        lines = [line(1, "user", "Start", None)]
        for n in range(2, 80, 2):
            lines += [line(n, "assistant", [{"type": "text", "text": f"Step {n}."}], n - 1),
                      line(n + 1, "user", f"Go on with step {n + 1}", n)]
        boundary = {"parentUuid": None, "logicalParentUuid": "u79", "isSidechain": False, "type": "system",
                    "subtype": "compact_boundary", "content": "Conversation compacted", "sessionId": "S",
                    "timestamp": "2026-01-01T00:01:20Z", "uuid": "u80", "compactMetadata": {"trigger": "auto"}}
        lines.append((json.dumps(boundary) + "\n").encode())
        lines.append(line(81, "user", "Summary of the steps so far", 80, isCompactSummary=True))
        kept = json.loads(line(82, "assistant", [{"type": "text", "text": "Step 78."}], 81))
        kept["message"]["id"] = kept_id  # (msg78: the response before the compaction, kept)
        lines.append((json.dumps(kept) + "\n").encode())
        for n in range(83, 95, 2):
            lines += [line(n, "user", f"Then step {n}", n - 1),
                      line(n + 1, "assistant", [{"type": "text", "text": f"Did {n}."}], n)]
        return lines

    path = tmp_path / "session.jsonl"
    lines = session("msg78")
    path.write_bytes(b"".join(lines[:-4]))
    assert report(path) == fresh(path)
    with open(path, "ab") as fh:
        fh.write(b"".join(lines[-4:]))
    again = report(path)
    assert again == fresh(path)
    other = tmp_path / "other.jsonl"
    other.write_bytes(b"".join(session("msg-new")))
    # a response of its own would have counted (the cost of every response the view counts)
    assert fresh(other)["cost"]["priced"] == again["cost"]["priced"] + 1


def test_a_chain_that_runs_through_another_into_the_lines_before_the_compaction_reads_them(tmp_path):
    """A line whose parent is an agent's (sidechain) line, which descends from lines before the
    last compaction: the view walks into those lines, so it reads them (what stands for them
    says nothing of them), and measures as from scratch, again once the file was rewritten."""
    boundary = {"parentUuid": None, "logicalParentUuid": "u4", "isSidechain": False, "type": "system",
                "subtype": "compact_boundary", "content": "Conversation compacted", "sessionId": "S",
                "timestamp": "2026-01-01T00:00:07Z", "uuid": "u7", "compactMetadata": {"trigger": "auto"}}
    # (an agent's earlier work first: the format is known from the first lines, as a long
    # session's is, and the lines before the compaction are read into a settled value)
    earlier = [claude_line(n, "assistant" if n % 2 else "user", [{"type": "text", "text": f"Step {n}."}]
                           if n % 2 else f"Do step {n}", n - 1 if n > 11 else None, isSidechain=True)
               for n in range(11, 11 + SNIFF_RECORDS)]
    lines = [*earlier, claude_line(1, "user", "Start", None),
             claude_line(2, "user", "Look into it", None, isSidechain=True),
             claude_line(3, "assistant", [{"type": "text", "text": "Looked."}], 2, isSidechain=True),
             claude_line(4, "assistant", [{"type": "text", "text": "Started."}], 1),
             claude_line(5, "user", "Go on", 4), claude_line(6, "assistant", [{"type": "text", "text": "On."}], 5),
             (json.dumps(boundary) + "\n").encode(),
             claude_line(8, "user", "Summary of the start", 7, isCompactSummary=True),
             claude_line(9, "assistant", [{"type": "text", "text": "Found more."}], 3, isSidechain=True),
             claude_line(10, "user", "Then this", 9)]
    path = tmp_path / "session.jsonl"
    path.write_bytes(b"".join(lines))
    meter, transcript = measured(path, cache=False)
    assert to_dict(meter, str(path), None) == fresh(path)
    shown = len(earlier)
    assert sorted({item.record.lineno - shown for item in transcript.view().items}) == [2, 3, 9, 10]
    # measured with the memo, then written anew: the lines read again have no digest in it
    # (read into a settled value first), and give no one of them their items
    assert report(path) == fresh(path)
    replaced = tmp_path / "replaced.jsonl"
    replaced.write_bytes(b"".join([*lines[:-1], claude_line(10, "user", "Then that instead", 9)]))
    os.replace(replaced, path)
    assert report(path) == fresh(path)


def test_a_slash_command_is_read_again_when_its_expansion_follows(tmp_path):
    """A ``<command-name>`` line is a prompt when its isMeta expansion follows, a notice
    otherwise: its items depend on the next line, so the memo does not keep them."""
    path = tmp_path / "session.jsonl"
    path.write_bytes(
        claude_line(1, "user", "Fix the build", None)
        + claude_line(2, "assistant", [{"type": "text", "text": "Done."}], 1)
        + claude_line(3, "user", "<command-name>/review</command-name>\n<command-message>review</command-message>", 2))
    before = report(path)
    assert before == fresh(path)
    with open(path, "ab") as fh:
        fh.write(claude_line(4, "user", "Review the change for bugs and missing tests.", 3, isMeta=True)
                 + claude_line(5, "assistant", [{"type": "text", "text": "Reviewed."}], 4))
    after = report(path)
    assert after == fresh(path)
    assert (part_items(before)["messages"], part_items(after)["messages"]) == (1, 2)  # now a prompt


def test_a_tool_result_takes_the_name_of_the_call_in_view(tmp_path):
    call = claude_line(2, "assistant", [{"type": "tool_use", "id": "t1", "name": "Read",
                                         "input": {"file_path": "/w/app/a.py"}}], 1)
    result = claude_line(3, "user", [{"type": "tool_result", "tool_use_id": "t1", "content": "x = 1\n" * 50}], 2)
    path = tmp_path / "session.jsonl"
    path.write_bytes(claude_line(1, "user", "Read a.py", None) + result)  # the result before its call is in view
    report(path)
    path.write_bytes(claude_line(1, "user", "Read a.py", None) + call + result)
    meter, transcript = measured(path)
    assert [(i.tool, i.tokens > 0) for i in transcript.view().items if i.kind == "tool_result"] == [("Read", True)]
    assert to_dict(meter, str(path), None) == fresh(path)


@pytest.mark.parametrize("path", ALL_INPUTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_input_measured_again_from_its_memo(path, tmp_path):
    copy = tmp_path / path.name
    shutil.copyfile(path, copy)
    first = report(copy)
    os.utime(copy, ns=(1, 1))  # the snapshot no longer holds (another time): the memo does
    assert report(copy) == first
    replaced = tmp_path / "replaced"
    shutil.copyfile(path, replaced)
    os.replace(replaced, copy)
    assert report(copy) == first == fresh(copy)


def test_the_command_uses_the_memo_and_passes_the_file_through(grown):
    path, rest = grown
    assert run_lookout("measure", "-q", str(path)).returncode == 0
    with open(path, "ab") as fh:
        fh.write(rest)
    result = run_lookout("measure", "--json", "--now", NOW, str(path))
    assert result.returncode == 0, result.stderr.decode()
    scratch = run_lookout("measure", "--json", "--now", NOW, "--no-cache", str(path))
    assert orjson.loads(result.stdout) == orjson.loads(scratch.stdout)
    out = run_lookout("measure", "-q", str(path))
    assert out.stdout == path.read_bytes()


def test_a_last_line_measured_without_its_newline_still_lets_the_next_run_resume(grown, monkeypatch):
    """The last line measured had no newline yet (the agent was writing it): the next run
    resumes from the memo all the same, reads that line again with the new ones, and its
    figures are those of a measure from scratch."""
    path, rest = grown
    lines = rest.splitlines(keepends=True)
    with open(path, "ab") as fh:
        fh.write(lines[0].rstrip(b"\n"))  # a whole JSON value, its newline not written yet
    report(path)
    with open(path, "ab") as fh:
        fh.write(b"\n" + b"".join(lines[1:5]))
    parses = Parses(monkeypatch)
    again = report(path)
    assert parses.count <= 2 * 5 + 2  # the completed line and the new ones
    monkeypatch.undo()
    assert again == fresh(path)


# --- Codex rollouts -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def rollout(tmp_path_factory):
    """A rollout in the real shape, which compacts where Codex does (a local compaction, which
    carries the newest user messages forward): three compactions at least, the third 200
    lines before the end at least, and the line of each."""
    path = tmp_path_factory.mktemp("rollout") / "rollout.jsonl"
    size = 7.0
    while True:
        generate(path, "codex", size, shape="real")
        lines = lines_of(path)
        compactions = [n for n, line in enumerate(lines) if b'"type":"compacted"' in line]
        if len(compactions) >= 3 and len(lines) > compactions[2] + 200:
            return path, compactions
        size *= 1.5


def carried(path) -> int:
    """The user messages the last compaction of a rollout carries forward (read again by each run)."""
    _meter, transcript = measured(path, cache=False)
    return sum(1 for item in transcript.view().items if item.extra.get("rebuilt"))


def test_a_grown_rollout_reads_only_its_new_lines_and_what_its_last_compaction_carries(rollout, tmp_path):
    """A run that resumes a grown rollout goes on from where the scan stood after the last
    compaction it found (the memo keeps it) and takes the items of the lines it measured
    before from the memo: it parses the new lines and the user messages that compaction
    carries forward (a local one: their items are built anew; when it is among the new
    lines, it weighs them too), none of the thousands before. Across new compactions, and
    after the memo was written anew for another count, each run measures as from scratch."""
    source, compactions = rollout
    lines = lines_of(source)
    path = tmp_path / "rollout.jsonl"
    for before, cut in grown_in_steps(lines, compactions, path):
        with pytest.MonkeyPatch.context() as patch:  # (the folders the tests are given stay patched)
            parses = Parses(patch)
            again = report(path)
        crossed = any(before <= at < cut for at in compactions)  # (a compaction weighs what it carries)
        assert 0 < parses.count <= 2 * (cut - before) + (2 if crossed else 1) * carried(path) + 1
        assert again == fresh(path)
    assert report(path, model="gpt-4") == fresh(path, model="gpt-4")  # counted otherwise: written anew
    with open(path, "ab") as fh:
        fh.write(lines[-1])
    assert report(path) == fresh(path)


def test_a_rollout_rewritten_by_compact_is_measured_from_its_memo_as_from_scratch(rollout, tmp_path):
    """``compact -i`` writes a new compaction into the rollout: the next run does not resume
    the memo (the file was replaced) but takes the items of the lines it knows by their bytes,
    and measures as from scratch, as does the prompt's run after it."""
    source, compactions = rollout
    lines = lines_of(source)
    path = tmp_path / "rollout.jsonl"
    path.write_bytes(b"".join(lines[:compactions[1] + 150]))
    report(path)
    result = run_lookout("compact", "-i", "-q", "--force", "--summarizer", "embedded", str(path))
    assert result.returncode == 0, result.stderr.decode()
    assert report(path) == fresh(path)
    with open(path, "ab") as fh:
        fh.write(b"".join(lines[compactions[1] + 150:compactions[1] + 170]))
    assert report(path) == fresh(path)


def test_a_rollback_that_cuts_a_compactions_history_short_is_measured_as_from_scratch(tmp_path):
    """Codex's rollback drops the newest turns, those a compaction's replacement history holds
    too: the line of that history, measured whole before, gives the items left of it, not the
    memo's."""
    path = tmp_path / "rollout.jsonl"
    path.write_bytes((DATA / "codex" / "compacted.jsonl").read_bytes().rstrip(b"\n") + b"\n")
    assert report(path) == fresh(path)
    for turns in (1, 1, 1):
        rollback = {"timestamp": "2025-12-01T09:01:00.000Z", "type": "event_msg",
                    "payload": {"type": "thread_rolled_back", "num_turns": turns}}
        with open(path, "ab") as fh:
            fh.write(json.dumps(rollback).encode() + b"\n")
        assert report(path) == fresh(path)
