"""The claude-code adapter: detection, the model-visible view, and every edit, on hand-made
fixtures (counts worked out by hand, see tests/data/claude-code/README.md) and on the real
transcripts in tests/data/claude-code/real/."""

from __future__ import annotations

import base64
import contextlib
import io
import json
import operator
import os
import subprocess
import uuid

import orjson
import pytest
from claude_code_helpers import (
    DATA,
    chain_ok,
    dump,
    kinds,
    load,
    load_bytes,
    obj_of,
    raw_lines,
    reread,
    usage_sums,
)
from conftest import lookout_exe, real_transcripts

from lookout_cli.core.errors import LookoutError
from lookout_cli.core.jsonl import Record, read_records
from lookout_cli.formats import Transcript
from lookout_cli.formats.claude_chain import MOVED_FIELD
from lookout_cli.formats.claude_code import (
    SUMMARY_PREFIX,
    TRUNCATION_NOTICE,
    Adapter,
    wrap_setup,
)
from lookout_cli.formats.view import (
    IMAGE,
    NOTICE,
    SETUP,
    SUMMARY,
    TEXT,
    THINKING,
    TOOL_CALL,
    TOOL_RESULT,
)

PNG_2x2 = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAC0lEQVR4nGNgQAYAAA4AAamRc7EAAAAASUVORK5CYII="
SUBAGENT_MAIN = "real/agentsessions-subagent/0a1b2c3d-4e5f-4061-8071-2a3b4c5d6e7f.jsonl"
SUBAGENT_FILE = ("real/agentsessions-subagent/0a1b2c3d-4e5f-4061-8071-2a3b4c5d6e7f/subagents/"
                 "agent-a0ad4f44468bdf20d.jsonl")
ALL_FILES = sorted(str(p.relative_to(DATA)) for p in DATA.rglob("*.jsonl"))


def texts(view, kind=None):
    return [i.text for i in view.items if kind is None or i.kind == kind]


def signature(view):
    """What the model sees, without line identities: role, kind, text, call id, tool, image."""
    return [(i.role, i.kind, i.text, i.call_id, i.tool, i.setup, i.image.data if i.image else None)
            for i in view.items]


# --- detection ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ALL_FILES)
def test_detected_as_claude_code(name):
    _, transcript = load(name)
    assert transcript.format == "claude-code"


def test_sniff_scores_only_claude_lines():
    sniff = Adapter.sniff
    assert sniff({"type": "user", "uuid": "u", "parentUuid": None, "message": {}}) == 3
    assert sniff({"type": "summary", "summary": "t", "leafUuid": "x"}) == 2
    assert sniff({"type": "file-history-snapshot", "messageId": "m", "snapshot": {}}) == 2
    assert sniff({"type": "user", "id": "g1", "content": [{"text": "hi"}]}) == 0  # gemini-cli
    assert sniff({"timestamp": "t", "type": "response_item", "payload": {}}) == 0  # codex
    assert sniff({"role": "user", "content": "hi"}) == 0  # openai / anthropic
    assert sniff({"type": "lookout-future", "uuid": "u"}) == 0
    assert sniff(["not", "a", "dict"]) == 0


# --- views of the hand-made fixtures --------------------------------------------------------
def test_view_parallel_images():
    _, transcript = load("parallel-images.jsonl")
    view = transcript.view()
    assert kinds(view) == {TEXT: 5, THINKING: 1, TOOL_CALL: 2, TOOL_RESULT: 2, IMAGE: 2}
    assert len(view.items) == 12
    assert len(view.messages()) == 8  # msg_1's three lines are one message
    assert [i.record.lineno for i in view.items if i.prompt] == [3, 13]
    assert max(i.turn for i in view.items) == 2
    # the pasted image and its text belong to the second turn; the prompt item is the text
    u2 = [i for i in view.items if i.record.lineno == 13]
    assert [(i.kind, i.prompt, i.turn) for i in u2] == [(IMAGE, False, 2), (TEXT, True, 2)]
    assert view.orphans() == []
    calls, results = view.calls(), view.results()
    assert set(calls) == set(results) == {"toolu_A", "toolu_B"}
    assert results["toolu_B"].tool == "Read" and results["toolu_A"].tool == "Bash"
    assert results["toolu_A"].text == "a.txt\nb.txt"
    assert calls["toolu_A"].text == 'Bash{"command":"ls"}'
    # results out of order: B's result line comes first
    assert [i.call_id for i in view.items if i.kind == TOOL_RESULT] == ["toolu_B", "toolu_A"]
    thinking = [i for i in view.items if i.kind == THINKING][0]
    assert thinking.opaque and thinking.text == "Two tools at once."
    read_image = [i for i in view.items if i.kind == IMAGE and i.call_id == "toolu_B"][0]
    assert read_image.image.media_type == "image/png" and read_image.image.nbytes == 68
    assert read_image.extra["tool_use_result"] == ("toolUseResult", "file", "base64")
    # usage: msg_1 once (its last line), msg_2, msg_3; the <synthetic> error has none
    assert len(view.usages) == 3
    assert [u.record.lineno for u in view.usages] == [6, 10, 15]
    assert usage_sums(view) == (18, 150, 370, 77, 100)
    assert view.usages[-1].prompt == 263
    assert view.compactions == []
    assert view.model == "claude-sonnet-4-5" and view.session_id == "S1" and view.cwd == "/w/app"
    assert "It is caf\u00e9 black \U0001F600 and \udc00 odd." in texts(view)
    assert view.last_timestamp == "2026-01-02T10:01:05.100Z"


def test_view_compactions_rewind_sidechain_attachments():
    _, transcript = load("compactions.jsonl")
    view = transcript.view()
    assert kinds(view) == {SUMMARY: 1, SETUP: 2, NOTICE: 4, TEXT: 2, TOOL_CALL: 2, TOOL_RESULT: 2}
    assert view.items[0].kind == SUMMARY and view.items[0].text.endswith("Summary two.")
    assert len(view.messages()) == 12
    assert [i.text for i in view.items if i.prompt] == ["Now fix the two failing files"]
    assert [(i.setup, i.text) for i in view.items if i.kind == SETUP] == [
        ("rules", "Use tabs."), ("skills", "- pdf: read PDF files")]
    # the sibling tool result that hangs off the first assistant line is stitched back in
    assert view.orphans() == []
    assert [i.call_id for i in view.items if i.kind == TOOL_RESULT] == ["toolu_Y", "toolu_X"]
    # dead branch, earlier segments and the sidechain are not visible
    joined = "\n".join(texts(view))
    for hidden in ("First attempt", "Second attempt", "Summary one.", "Run the tests",
                   "Search for TODO", "Found 3 TODOs."):
        assert hidden not in joined
    # usage over the whole logical chain, once per response: no dead branch, no sidechain
    assert len(view.usages) == 6
    assert usage_sums(view) == (203, 1630, 4370, 121, 0)
    assert [(c.before, c.after, c.trigger) for c in view.compactions] == [
        (5000, 800, "auto"), (9000, None, "manual")]
    assert view.model == "claude-opus-4-1"


def test_view_crlf_no_final_newline_passes_through():
    data, transcript = load("crlf-no-final-newline.jsonl")
    view = transcript.view()
    assert texts(view) == ["Hi", "Hello", "Bye"]
    assert [i.prompt for i in view.items] == [True, False, True]
    assert usage_sums(view) == (1, 2, 3, 4, 0)
    assert dump(transcript) == data


def test_view_real_ccviewer_1_0_98():
    _, transcript = load("real/ccviewer-fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl")
    view = transcript.view()
    # 438 lines; 32 main-chain lines, 405 sidechain lines (not visible), 1 summary line
    assert len({id(i.record) for i in view.items}) == 32
    assert kinds(view) == {TEXT: 9, NOTICE: 1, TOOL_CALL: 11, TOOL_RESULT: 11}
    assert len(view.messages()) == 23
    # the /orchestrator slash command (followed by its isMeta expansion) and the last prompt
    assert [i.record.lineno for i in view.items if i.prompt] == [2, 434]
    assert view.orphans() == []
    assert len(view.usages) == 9  # nine response ids on the main chain, split lines merged
    assert [u.output for u in view.usages][:2] == [172, 1]
    assert usage_sums(view) == (3 + 7 + 6 + 329 + 6 + 7 + 6 + 3 + 6,
                                1331 + 235 + 304 + 1227 + 598 + 1278 + 274 + 421 + 1004,
                                14874 + 16205 + 16440 + 16744 + 17971 + 18569 + 19847 + 20121 + 20542,
                                172 + 1 + 598 + 233 + 414 + 231 + 1 + 976 + 10, 0)
    assert all(not i.record.data.get("isSidechain") for i in view.items)


def test_view_real_dag_compact_after_rewind():
    _, transcript = load("real/claudecodelog-dag_compact_after_rewind.jsonl")
    view = transcript.view()
    assert [(i.kind, i.text) for i in view.items] == [
        (SUMMARY, "This session is being continued from a previous conversation that ran out of "
                  "context. Summary: the user asked for a plan."),
        (TEXT, "After compaction"), (TEXT, "Final answer")]
    assert [(c.before, c.after, c.trigger) for c in view.compactions] == [(150000, None, "auto")]
    # a1, b2a, b2a2 before the boundary (b1a is a dead branch), p1a after it
    assert [u.record.lineno for u in view.usages] == [2, 6, 8, 12]


def test_view_real_schema_coverage_does_not_crash():
    _, transcript = load("real/agentsessions-claude-small-schema-coverage.jsonl")
    view = transcript.view()
    # line 51's boundary carries a preserved segment, so nothing before it can be the leaf
    # (Claude Code prunes it); the trimmed lines all share one uuid and each resolves to the
    # line before it, so the live chain is the main-chain run from line 63 (parentUuid null)
    # to line 89
    assert {i.record.lineno for i in view.items} <= set(range(63, 90))
    assert [i.record.lineno for i in view.items if i.prompt] == [63, 87]
    assert kinds(view) == {TEXT: 2, THINKING: 3, NOTICE: 7}
    assert view.orphans() == []
    assert view.usages == []  # every usage there is zero (trimmed)


def test_view_real_subagent_layout():
    _, main = load(SUBAGENT_MAIN)
    view = main.view()
    assert [(i.kind, i.text) for i in view.items] == [
        (TEXT, "Delegate a repo search to a subagent"), (TEXT, "Spawning a subagent."),
        (TOOL_CALL, 'Task{"subagent_type":"general-purpose","description":"search files"}')]
    _, sub = load(SUBAGENT_FILE)
    view = sub.view()  # every line is a sidechain line: the subagent's own chain
    assert [(i.kind, i.text) for i in view.items] == [
        (TEXT, "Search the repo for TODO comments"), (TEXT, "Searching."),
        (TOOL_CALL, 'bash{"command":"grep -rn TODO"}'), (TOOL_RESULT, "a.txt:1: TODO fix")]
    assert view.items[0].prompt and view.session_id == "agent-a0ad4f44468bdf20d"


def test_preserved_segment_and_duplicate_uuids():
    env = {"isSidechain": False, "userType": "external", "cwd": "/w", "sessionId": "S4", "version": "2.1.200"}

    def line(uid, parent, kind, content, mid=None, **extra):
        obj = {"parentUuid": parent, **env, "type": kind, "uuid": uid, "timestamp": "2026-04-01T00:00:00.000Z"}
        if kind == "assistant":
            obj["message"] = {"id": mid, "role": "assistant", "model": "claude-opus-4-1",
                              "content": [{"type": "text", "text": content}],
                              "usage": {"input_tokens": 1, "cache_creation_input_tokens": 0,
                                        "cache_read_input_tokens": 0, "output_tokens": 1}}
        else:
            obj["message"] = {"role": "user", "content": content}
        obj.update(extra)
        return json.dumps(obj).encode() + b"\n"

    boundary = {"parentUuid": None, "logicalParentUuid": "a2", **env, "type": "system",
                "subtype": "compact_boundary", "content": "Conversation compacted", "uuid": "b",
                "compactMetadata": {"trigger": "manual", "preTokens": 900, "postTokens": 100,
                                    "preservedSegment": {"headUuid": "u2", "anchorUuid": "s", "tailUuid": "a2"}}}
    data = b"".join([
        line("u1", None, "user", "old prompt"), line("a1", "u1", "assistant", "old answer", "m1"),
        line("u2", "a1", "user", "kept prompt"), line("a2", "u2", "assistant", "kept answer", "m2"),
        json.dumps(boundary).encode() + b"\n",
        line("s", "b", "user", "This session is being continued... S", isCompactSummary=True),
        line("u3", "a2", "user", "new prompt"), line("a3", "u3", "assistant", "new answer", "m3"),
        # a duplicated uuid on a dead line later on must not capture the chain
        line("u1", None, "user", "stray copy", isSidechain=True),
    ])
    view = load_bytes(data).view()
    assert [(i.kind, i.text) for i in view.items] == [
        (SUMMARY, "This session is being continued... S"), (TEXT, "kept prompt"),
        (TEXT, "kept answer"), (TEXT, "new prompt"), (TEXT, "new answer")]
    assert [u.record.lineno for u in view.usages] == [2, 4, 8]  # preserved m2 counted once
    assert [(c.before, c.after) for c in view.compactions] == [(900, 100)]


@pytest.mark.parametrize("upper", [False, True])
def test_canonical_uuids_are_keyed_as_numbers_and_read_the_same_lean(tmp_path, upper):
    """A lean read keys canonical uuids by their number (a long session's memory): the chain,
    items and usages are those of the whole parsed lines, and a uuid spelled otherwise (upper
    case) is another line's, as Claude Code compares them."""
    from lookout_cli.formats.claude_chain import uuid_key
    from lookout_cli.options import Run

    ids = {name: f"{n:08x}-abcd-4def-8abc-{n:012x}" for n, name in enumerate(("u1", "a1", "u2", "a2", "u3"), 1)}
    stray_parent = ids["a2"].upper() if upper else ids["a2"]
    data = b"".join([
        _line(ids["u1"], None, "user", "first"), _line(ids["a1"], ids["u1"], "assistant", "one", "m1"),
        _line(ids["u2"], ids["a1"], "user", "second"), _line(ids["a2"], ids["u2"], "assistant", "two", "m2"),
        _line(ids["u3"], stray_parent, "user", "third", ts="2026-04-01T00:00:01.000Z"),
    ])
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    lean = Run("measure", file=str(path), isolated=True).load()
    whole = load_bytes(data)
    assert {type(r.node[1]) for r in lean.records} == {int}  # the node keeps the number
    assert uuid_key(ids["u1"]) == int(ids["u1"].replace("-", ""), 16)
    assert (uuid_key(stray_parent) == uuid_key(ids["a2"])) is not upper
    for t in (lean, whole):
        view = t.view()
        texts = [i.text for i in view.items]
        assert texts == (["third"] if upper else ["first", "one", "second", "two", "third"])
    assert [u.record.lineno for u in lean.view().usages] == [u.record.lineno for u in whole.view().usages]


def _line(uid, parent, kind, content, mid=None, ts="2026-04-01T00:00:00.000Z", **extra):
    obj = {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": "/w",
           "sessionId": "S5", "version": "2.1.200", "type": kind, "uuid": uid, "timestamp": ts}
    if kind == "assistant":
        obj["message"] = {"id": mid, "role": "assistant", "model": "claude-opus-4-1",
                          "content": [{"type": "text", "text": content}],
                          "usage": {"input_tokens": 1, "cache_creation_input_tokens": 0,
                                    "cache_read_input_tokens": 0, "output_tokens": 1}}
    elif kind == "attachment":
        obj["attachment"] = {"type": "hook_additional_context", "content": content}
    else:
        obj["message"] = {"role": "user", "content": content}
    obj.update(extra)
    return json.dumps(obj).encode() + b"\n"


def test_preserved_segment_anchor_children_move_under_the_tail():
    boundary = {"parentUuid": None, "logicalParentUuid": "a2", "isSidechain": False, "cwd": "/w",
                "sessionId": "S5", "type": "system", "subtype": "compact_boundary", "uuid": "b",
                "timestamp": "2026-04-01T00:00:00.000Z", "content": "Conversation compacted",
                "compactMetadata": {"trigger": "auto", "preTokens": 900,
                                    "preservedSegment": {"headUuid": "u2", "anchorUuid": "s", "tailUuid": "a2"}}}
    data = b"".join([
        _line("u1", None, "user", "old prompt"), _line("a1", "u1", "assistant", "old answer", "m1"),
        _line("u2", "a1", "user", "kept prompt"), _line("a2", "u2", "assistant", "kept answer", "m2"),
        json.dumps(boundary).encode() + b"\n",
        _line("s", "b", "user", "S", isCompactSummary=True),
        _line("att", "s", "attachment", "hook context"),  # Claude Code's splice moves it under a2
        _line("u3", "att", "user", "new prompt"), _line("a3", "u3", "assistant", "new answer", "m3"),
    ])
    view = load_bytes(data).view()
    assert [(i.kind, i.text) for i in view.items] == [
        (SUMMARY, "S"), (TEXT, "kept prompt"), (TEXT, "kept answer"), (NOTICE, "hook context"),
        (TEXT, "new prompt"), (TEXT, "new answer")]


def test_leaf_is_the_newest_childless_line_by_timestamp():
    # a rewind whose old branch was written later in the file but is older in time
    data = b"".join([
        _line("u1", None, "user", "start", ts="2026-04-01T00:00:00.000Z"),
        _line("a1", "u1", "assistant", "ok", "m1", ts="2026-04-01T00:00:01.000Z"),
        _line("new", "a1", "user", "newer branch", ts="2026-04-01T00:00:09.000Z"),
        _line("old", "a1", "user", "older branch", ts="2026-04-01T00:00:05.000Z"),
        # equal timestamps: the first one wins, as in findLatestMessage
        _line("t1", None, "user", "tie one", ts="2026-04-01T00:00:09.000Z", isSidechain=True),
    ])
    view = load_bytes(data).view()
    assert texts(view) == ["start", "ok", "newer branch"]
    same = b"".join([
        _line("x1", None, "user", "first", ts="2026-04-01T00:00:09.000Z"),
        _line("x2", None, "user", "second", ts="2026-04-01T00:00:09.000Z"),
    ])
    assert texts(load_bytes(same).view()) == ["first"]
    # no parseable timestamp anywhere: the newest in file order
    trimmed = b"".join([
        _line("y1", None, "user", "one", ts="[trimmed]"), _line("y2", None, "user", "two", ts="[trimmed]"),
    ])
    assert texts(load_bytes(trimmed).view()) == ["two"]


def test_progress_lines_under_the_newest_line_do_not_hide_it():
    """A running tool or hook writes progress lines under the newest line (a hook that
    measures the session sees its own): the conversation still ends at that line."""
    def progress(uid, parent, ts):
        return (json.dumps({"parentUuid": parent, "isSidechain": False, "type": "progress", "uuid": uid,
                            "data": {"type": "hook_progress", "hookEvent": "PostToolUse"},
                            "sessionId": "S5", "timestamp": ts}) + "\n").encode()

    data = b"".join([
        _line("u1", None, "user", "start", ts="2026-04-01T00:00:00.000Z"),
        _line("a1", "u1", "assistant", "ok", "m1", ts="2026-04-01T00:00:01.000Z"),
        _line("u2", "a1", "user", "go on", ts="2026-04-01T00:00:02.000Z"),
        progress("p1", "u2", "2026-04-01T00:00:03.000Z"),
        progress("p2", "u2", "2026-04-01T00:00:04.000Z"),
    ])
    assert texts(load_bytes(data).view()) == ["start", "ok", "go on"]
    # a conversation line below a progress line still ends the conversation below it
    data += _line("a2", "p2", "assistant", "done", "m2", ts="2026-04-01T00:00:05.000Z")
    assert texts(load_bytes(data).view()) == ["start", "ok", "go on", "done"]


# --- replace_content ------------------------------------------------------------------------
def test_replace_tool_result_text():
    data, transcript = load("parallel-images.jsonl")
    item = transcript.view().results()["toolu_A"]
    transcript.adapter.replace_content(transcript, item, "[cleared: 2 lines saved]")
    out, again = reread(transcript)
    before, after = raw_lines(data), raw_lines(out)
    assert [n for n, (b, a) in enumerate(zip(before, after), 1) if b != a] == [8]
    block = obj_of(after[7])["message"]["content"][0]
    assert block == {"tool_use_id": "toolu_A", "type": "tool_result",
                     "content": "[cleared: 2 lines saved]", "is_error": False}
    view = again.view()
    assert view.results()["toolu_A"].text == "[cleared: 2 lines saved]"
    assert view.orphans() == [] and len(view.items) == 12
    # the same replacement again changes nothing
    item = view.results()["toolu_A"]
    again.adapter.replace_content(again, item, "[cleared: 2 lines saved]")
    assert dump(again) == out and not any(r.edited for r in again.records)


def test_replace_read_image_clears_both_copies():
    data, transcript = load("parallel-images.jsonl")
    item = [i for i in transcript.view().items if i.kind == IMAGE and i.call_id == "toolu_B"][0]
    transcript.adapter.replace_content(transcript, item, "[image logo.png, 68 bytes, saved as X]")
    out, again = reread(transcript)
    before, after = raw_lines(data), raw_lines(out)
    assert [n for n, (b, a) in enumerate(zip(before, after), 1) if b != a] == [7]
    assert PNG_2x2.encode() not in after[6]
    obj = obj_of(after[6])
    assert obj["message"]["content"][0]["content"] == [
        {"type": "text", "text": "[image logo.png, 68 bytes, saved as X]"}]
    assert obj["message"]["content"][0]["tool_use_id"] == "toolu_B"
    file = obj["toolUseResult"]["file"]
    assert file["base64"] == "" and file["lookoutCleared"].startswith("[image logo.png")
    assert file["dimensions"]["originalWidth"] == 2 and obj["toolUseResult"]["type"] == "image"
    view = again.view()
    assert kinds(view)[IMAGE] == 1 and view.results()["toolu_B"].text.startswith("[image logo.png")
    assert view.orphans() == []
    # clearing it again (it is now the result's text) changes nothing
    again.adapter.replace_content(again, view.results()["toolu_B"], "[image logo.png, 68 bytes, saved as X]")
    assert dump(again) == out


def test_replace_pasted_image_and_text_keep_everything_else():
    data, transcript = load("parallel-images.jsonl")
    adapter = transcript.adapter
    view = transcript.view()
    pasted = [i for i in view.items if i.kind == IMAGE and i.call_id is None][0]
    adapter.replace_content(transcript, pasted, "[lookout cleared an image (68 bytes). It is saved in X]")
    answer = [i for i in transcript.view().items if i.text.startswith("It is caf")][0]
    adapter.replace_content(transcript, answer, "short")
    out, again = reread(transcript)
    changed = [n for n, (b, a) in enumerate(zip(raw_lines(data), raw_lines(out)), 1) if b != a]
    assert changed == [13, 15]
    u2 = obj_of(raw_lines(out)[12])
    assert u2["message"]["content"][0] == {"type": "text", "text": "[lookout cleared an image (68 bytes). It is saved in X]"}
    assert u2["futureField"] == {"x": 1} and u2["imagePasteIds"] == [1]
    # the edited assistant line keeps its 30-digit integer exactly
    assert b'"weird":123456789012345678901234567890' in raw_lines(out)[14]
    view = again.view()
    assert [i.prompt for i in view.items if i.record.lineno == 13] == [False, True]
    assert "short" in texts(view) and kinds(view)[IMAGE] == 1
    with pytest.raises(LookoutError):
        adapter.replace_content(again, [i for i in view.items if i.kind == THINKING][0], "x")
    with pytest.raises(LookoutError):
        adapter.replace_content(again, view.calls()["toolu_A"], "x")


def test_replace_keeps_unknown_and_non_json_lines():
    data, transcript = load("parallel-images.jsonl")
    item = transcript.view().results()["toolu_A"]
    transcript.adapter.replace_content(transcript, item, "gone")
    out = dump(transcript)
    assert b"this line is not JSON\n" in out
    assert b'{"type":"lookout-future","uuid":"zz1","parentUuid":"a4","payload":{"n":123456789012345678901234567890}}\n' in out


# --- add_parts ------------------------------------------------------------------------------
def test_add_parts_turns_string_content_into_blocks():
    data, transcript = load("parallel-images.jsonl")
    prompt = [i for i in transcript.view().items if i.prompt][0]
    parts = [{"type": "text", "text": "<file path=\"a.txt\">hello</file>"},
             {"type": "image", "media_type": "image/png", "data": PNG_2x2}]
    transcript.adapter.add_parts(transcript, prompt, parts)
    out, again = reread(transcript)
    changed = [n for n, (b, a) in enumerate(zip(raw_lines(data), raw_lines(out)), 1) if b != a]
    assert changed == [3]
    content = obj_of(raw_lines(out)[2])["message"]["content"]
    assert content == [
        {"type": "text", "text": "List the files and show me the logo"},
        {"type": "text", "text": "<file path=\"a.txt\">hello</file>"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_2x2}}]
    view = again.view()
    first = [i for i in view.items if i.record.lineno == 3]
    assert [(i.kind, i.prompt, i.turn) for i in first] == [(TEXT, True, 1), (TEXT, False, 1), (IMAGE, False, 1)]
    assert first[2].image.nbytes == 68
    # the same parts again: nothing changes
    again.adapter.add_parts(again, first[0], parts)
    assert dump(again) == out


def test_add_parts_to_block_prompt():
    _, transcript = load("compactions.jsonl")
    prompt = [i for i in transcript.view().items if i.prompt][0]
    transcript.adapter.add_parts(transcript, prompt, [{"type": "text", "text": "extra"}])
    out, again = reread(transcript)
    line = [r for r in again.records if (r.data or {}).get("uuid") == "u5"][0]
    assert line.data["message"]["content"] == [
        {"type": "text", "text": "Now fix the two failing files"}, {"type": "text", "text": "extra"}]
    with pytest.raises(LookoutError):
        again.adapter.add_parts(again, again.view().calls()["toolu_X"], [{"type": "text", "text": "x"}])


# --- set_setup ------------------------------------------------------------------------------
def test_set_setup_appends_replaces_and_removes():
    data, transcript = load("parallel-images.jsonl")
    adapter = transcript.adapter
    adapter.set_setup(transcript, "memory", "- likes tabs")
    out1, t1 = reread(transcript)
    assert out1.startswith(data + b"\n") or out1.startswith(data)
    new = raw_lines(out1)[len(raw_lines(data)):]
    assert len(new) == 1
    obj = obj_of(new[0])
    assert obj["parentUuid"] == "s1"  # chained to the newest main-chain line
    assert obj["isMeta"] is True and obj["lookoutSetup"] == "memory" and obj["type"] == "user"
    assert obj["message"] == {"role": "user", "content": wrap_setup("- likes tabs")}
    for key, value in (("sessionId", "S1"), ("cwd", "/w/app"), ("version", "2.1.150"),
                       ("gitBranch", "main"), ("userType", "external"), ("isSidechain", False)):
        assert obj[key] == value
    assert obj["timestamp"].endswith("Z") and len(obj["timestamp"]) == 24
    view = t1.view()
    setup = [i for i in view.items if i.kind == SETUP]
    assert [(i.setup, i.text) for i in setup] == [("memory", wrap_setup("- likes tabs"))]
    chain_ok(out1)
    # same text: nothing changes
    t1.adapter.set_setup(t1, "memory", "- likes tabs")
    assert dump(t1) == out1
    # a new text replaces that line in place
    t1.adapter.set_setup(t1, "memory", "- likes spaces")
    out2, t2 = reread(t1)
    assert len(raw_lines(out2)) == len(raw_lines(out1))
    assert [i.text for i in t2.view().items if i.kind == SETUP] == [wrap_setup("- likes spaces")]
    # a second key gets its own line
    t2.adapter.set_setup(t2, "rules", "be brief")
    out3, t3 = reread(t2)
    assert [(i.setup, i.text) for i in t3.view().items if i.kind == SETUP] == [
        ("memory", wrap_setup("- likes spaces")), ("rules", wrap_setup("be brief"))]
    chain_ok(out3)
    # None removes it and re-parents the line after it
    t3.adapter.set_setup(t3, "memory", None)
    out4, t4 = reread(t3)
    chain_ok(out4)
    assert [(i.setup) for i in t4.view().items if i.kind == SETUP] == ["rules"]
    assert signature(t4.view())[:12] == signature(load("parallel-images.jsonl")[1].view())
    t4.adapter.set_setup(t4, "rules", None)
    assert dump(t4) == data  # back to the original bytes
    t4.adapter.set_setup(t4, "rules", None)
    assert dump(t4) == data


def test_set_setup_on_subagent_file_stays_sidechain():
    _, transcript = load(SUBAGENT_FILE)
    transcript.adapter.set_setup(transcript, "memory", "note")
    out, again = reread(transcript)
    obj = obj_of(raw_lines(out)[-1])
    assert obj["isSidechain"] is True and obj["agentId"] == "a0ad4f44468bdf20d"
    assert obj["parentUuid"] == "catt1" and obj["sessionId"] == "agent-a0ad4f44468bdf20d"
    assert again.view().items[-1].kind == SETUP


# --- compact --------------------------------------------------------------------------------
def read_list(data):
    return list(read_records(io.BytesIO(data)))


def signature_of(items):
    return [(i.role, i.kind, i.text, i.call_id, i.tool, i.setup, i.prompt) for i in items]


def _check_compaction(data, transcript, summary, keep_index, pre=12345, post=678):
    """Compact, re-read, and check what every compaction must give; returns the pieces."""
    adapter = transcript.adapter
    view = transcript.view()
    sidechain = bool(view.items and view.items[0].record.data.get("isSidechain"))
    prompts = [i for i in view.items if i.prompt]
    keep = prompts[keep_index] if keep_index is not None else None
    # the kept part starts with keep_from's line (a pasted image before the prompt text stays)
    tail = view.items[min(n for n, i in enumerate(view.items) if i.record is keep.record):] if keep else []
    leaf = [r.data for r in transcript.records if r.data and r.data.get("type") in
            ("user", "assistant", "system", "attachment") and "uuid" in r.data
            and bool(r.data.get("isSidechain")) == sidechain][-1]
    new = adapter.compact(transcript, summary, keep,
                          {"trigger": "auto", "pre_tokens": pre, "post_tokens": post})
    out, again = reread(transcript)
    # every original line is still there, byte for byte and in order, but the kept ones: they
    # move after the summary and leave a stub (no type, their uuid) in their place
    before, after = read_list(data), read_list(out)
    for was, now in zip(before, after):
        if now.body != was.body:
            stub = obj_of(now.to_bytes())
            assert MOVED_FIELD in stub and "type" not in stub and stub["uuid"] == obj_of(was.to_bytes())["uuid"]
    assert len(after) == len(before) + len(new)
    added = [obj_of(r.to_bytes()) for r in new]
    boundary, summary_line = added[0], added[1]
    assert boundary["type"] == "system" and boundary["subtype"] == "compact_boundary"
    assert boundary["parentUuid"] is None and boundary["content"] == "Conversation compacted"
    assert boundary["logicalParentUuid"] == leaf["uuid"]
    assert boundary["level"] == "info" and boundary["isMeta"] is False
    assert boundary["compactMetadata"] == {"trigger": "auto", "preTokens": pre, "postTokens": post}
    assert summary_line["type"] == "user" and summary_line["parentUuid"] == boundary["uuid"]
    assert summary_line["isCompactSummary"] is True and summary_line["isVisibleInTranscriptOnly"] is True
    for obj in added:
        for key in ("sessionId", "cwd", "version", "userType", "timestamp", "uuid"):
            assert key in obj, key
        assert obj["isSidechain"] is sidechain
        assert obj["sessionId"] == leaf["sessionId"]
    assert boundary["timestamp"].endswith("Z") and len(boundary["timestamp"]) == 24
    chain_ok(out)
    view2 = again.view()
    assert view2.orphans() == []
    first = view2.items[0]
    if summary is None:
        assert first.kind == NOTICE and first.text == TRUNCATION_NOTICE
        assert SUMMARY not in kinds(view2)
    else:
        assert first.kind == SUMMARY and first.text == SUMMARY_PREFIX + summary
        assert kinds(view2)[SUMMARY] == 1
    # after the summary: the setup copied forward, then the kept tail word for word
    n_setup = len(view2.items) - 1 - len(tail)
    assert all(i.kind == SETUP for i in view2.items[1:1 + n_setup])
    assert signature_of(view2.items[1 + n_setup:]) == signature_of(tail)
    assert len(view2.compactions) == len(view.compactions) + 1
    assert view2.compactions[-1].before == pre and view2.compactions[-1].after == post
    # the copies' usage is not counted again
    assert usage_sums(view2) == usage_sums(view)
    # Claude Code's recoverOrphanedParallelToolResults stitches in every assistant line of the
    # file that shares a message.id with the resumed chain: none may exist outside it
    live = {id(i.record) for i in view2.items}
    live_ids = {i.record.data["message"].get("id") for i in view2.items if i.role == "assistant"}
    strays = [r.lineno for r in again.records if r.data and r.data.get("type") == "assistant"
              and id(r) not in live and isinstance(r.data.get("message"), dict)
              and r.data["message"].get("id") in live_ids - {None}]
    assert strays == []
    return out, again, boundary, added


def test_compact_fixture_keeps_tail_setup_and_pairs():
    data, transcript = load("compactions.jsonl")
    out, again, boundary, added = _check_compaction(data, transcript, "Goal: migrate.", 0)
    assert boundary["logicalParentUuid"] == "aF"  # the last chain line
    # boundary, summary, the rules attachment copied from before the kept prompt, 9 tail lines
    assert len(added) == 12
    view = again.view()
    assert [(i.kind, i.setup) for i in view.items[:3]] == [(SUMMARY, None), (SETUP, "rules"), (TEXT, None)]
    assert view.items[2].prompt and view.items[2].text == "Now fix the two failing files"
    # the rules line before the kept prompt is copied (a fresh uuid); the kept lines move: their
    # uuids, message ids, tool ids and toolUseResult stay, their usage goes to their stubs
    copied, moved = added[2], added[3:]
    originals = {r.data.get("uuid"): r.data for r in read_list(data) if r.data}
    assert copied["uuid"] not in originals
    assert all(m["uuid"] in originals for m in moved)
    assert [c["message"]["id"] for c in moved if c["type"] == "assistant"] == ["msg_f", "msg_f", "msg_g"]
    for c in moved:
        if c["type"] == "assistant":
            usage = c["message"]["usage"]
            assert [usage[k] for k in ("input_tokens", "output_tokens", "cache_creation_input_tokens",
                                       "cache_read_input_tokens")] == [0, 0, 0, 0]
        assert {k: v for k, v in c.items() if k not in ("parentUuid", "lookoutAdded", "message", "timestamp")} == \
            {k: v for k, v in originals[c["uuid"]].items() if k not in ("parentUuid", "message", "timestamp")}
    assert [b["id"] for c in moved if c["type"] == "assistant" for b in c["message"]["content"]
            if b["type"] == "tool_use"] == ["toolu_X", "toolu_Y"]
    # each moved line follows the one before it, the first the copied rules line
    assert [m["parentUuid"] for m in moved] == [copied["uuid"], *(m["uuid"] for m in moved[:-1])]
    # every new or moved line is newer than any line before (Claude Code resumes the newest leaf)
    assert all(c["timestamp"] > "2026-02-01T09:21:10.000Z" for c in added)
    # the same compaction again changes nothing
    prompt = [i for i in view.items if i.prompt][0]
    assert again.adapter.compact(again, "Goal: migrate.", prompt, {"trigger": "auto"}) == []
    assert dump(again) == out


def test_compact_truncation_keeps_nothing():
    data, transcript = load("compactions.jsonl")
    out, again, boundary, added = _check_compaction(data, transcript, None, None)
    view = again.view()
    # the notice, then the two setup lines (rules and skills) copied forward
    assert [(i.kind, i.setup) for i in view.items] == [(NOTICE, None), (SETUP, "rules"), (SETUP, "skills")]
    assert view.orphans() == []


def test_compact_twice_then_setup():
    data, transcript = load("parallel-images.jsonl")
    out, again, _, _ = _check_compaction(data, transcript, "first summary", 1)
    view = again.view()
    assert [i.kind for i in view.items] == [SUMMARY, IMAGE, TEXT, TEXT, TEXT]
    # compacting the compacted transcript updates nothing earlier and lists both compactions
    out2, again2, boundary2, _ = _check_compaction(out, again, "second summary", 0, pre=500, post=100)
    view2 = again2.view()
    assert [(c.before, c.after) for c in view2.compactions] == [(12345, 678), (500, 100)]
    assert [i.text for i in view2.items if i.kind == SUMMARY] == [SUMMARY_PREFIX + "second summary"]
    again2.adapter.set_setup(again2, "memory", "m")
    out3, again3 = reread(again2)
    assert again3.view().items[-1].kind == SETUP
    chain_ok(out3)


@pytest.mark.parametrize("name", [
    "real/ccviewer-fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl",
    "real/claudecodelog-dag_compact_after_rewind.jsonl",
    "crlf-no-final-newline.jsonl",
])
def test_compact_real_transcripts(name):
    data, transcript = load(name)
    prompts = [i for i in transcript.view().items if i.prompt]
    _check_compaction(data, transcript, "S", len(prompts) - 1)


def test_compact_subagent_file():
    data, transcript = load(SUBAGENT_FILE)
    prompt = [i for i in transcript.view().items if i.prompt][0]
    new = transcript.adapter.compact(transcript, "sub summary", prompt, {"trigger": "manual"})
    out, again = reread(transcript)
    assert all(obj_of(r.to_bytes())["isSidechain"] is True for r in new)
    view = again.view()
    assert view.items[0].kind == SUMMARY and [i.text for i in view.items[1:]] == [
        "Search the repo for TODO comments", "Searching.", 'bash{"command":"grep -rn TODO"}',
        "a.txt:1: TODO fix"]
    assert view.compactions[0].trigger == "manual" and view.compactions[0].before == 0


def test_compact_rejects_a_prompt_outside_the_live_chain():
    _, transcript = load("parallel-images.jsonl")
    old, kept = [i for i in transcript.view().items if i.prompt][:2]
    transcript.adapter.compact(transcript, "x", kept, {})  # ``old`` is summarized
    with pytest.raises(LookoutError):
        transcript.adapter.compact(transcript, "y", old, {})


def test_empty_and_metadata_only_transcripts():
    adapter = Adapter()
    assert adapter.view(Transcript([], adapter)).items == []
    records = [Record(1, b'{"type":"summary","summary":"t","leafUuid":"x"}\n')]
    transcript = Transcript(records, adapter)
    assert transcript.view().items == [] and transcript.view().usages == []
    with pytest.raises(LookoutError):
        adapter.compact(transcript, "s", None, {})
    with pytest.raises(LookoutError):
        adapter.set_setup(transcript, "memory", "m")


def test_image_sizes_are_decoded_sizes():
    _, transcript = load("parallel-images.jsonl")
    for item in transcript.view().items:
        if item.kind == IMAGE:
            assert item.image.nbytes == len(base64.b64decode(item.image.data))


def test_compact_copies_each_setup_key_once():
    data, transcript = load("compactions.jsonl")
    adapter = transcript.adapter
    adapter.set_setup(transcript, "memory", "old memory")  # now the leaf, so in the kept tail
    prompt = [i for i in transcript.view().items if i.prompt][0]
    adapter.compact(transcript, "s", prompt, {})
    _, again = reread(transcript)
    assert [(i.setup, i.text) for i in again.view().items if i.kind == SETUP] == [
        ("rules", "Use tabs."), ("skills", "- pdf: read PDF files"), ("memory", wrap_setup("old memory"))]
    # updating it afterwards edits the live copy, not the line before the boundary
    again.adapter.set_setup(again, "memory", "new memory")
    out, third = reread(again)
    assert [i.text for i in third.view().items if i.setup == "memory"] == [wrap_setup("new memory")]
    assert out.count(b"old memory") == 0  # the line was moved (its stub holds no text), not copied


def _boundary(uid, logical, ts, **meta):
    return json.dumps({"parentUuid": None, "logicalParentUuid": logical, "isSidechain": False, "cwd": "/w",
                       "sessionId": "S5", "type": "system", "subtype": "compact_boundary", "uuid": uid,
                       "timestamp": ts, "content": "Conversation compacted",
                       "compactMetadata": {"trigger": "auto", "preTokens": 900, **meta}}).encode() + b"\n"


def _t(second: int) -> str:
    return f"2026-04-01T00:{second // 60:02d}:{second % 60:02d}.000Z"


_OLDER = [  # two segments: a rewound branch, a split response, a subagent's lines, a stray progress line
    _line("u1", None, "user", "first", ts=_t(1)), _line("a1", "u1", "assistant", "one", "m1", ts=_t(2)),
    _line("dead", "a1", "user", "rewound", ts=_t(3)), _line("a1b", "dead", "assistant", "gone", "m9", ts=_t(4)),
    _line("u2", "a1", "user", "second", ts=_t(5)), _line("a2", "u2", "assistant", "two", "m2", ts=_t(6)),
    _line("a2b", "a2", "assistant", "two, more", "m2", ts=_t(7)),
    _line("side1", None, "user", "agent task", ts=_t(8), isSidechain=True),
    _line("side2", "side1", "assistant", "agent answer", "m8", ts=_t(9), isSidechain=True),
    _boundary("b1", "a2b", _t(10)), _line("s1", "b1", "user", "summary one", ts=_t(11), isCompactSummary=True),
    _line("u3", "s1", "user", "third", ts=_t(12)), _line("a3", "u3", "assistant", "three", "m3", ts=_t(13)),
    _line("a3c", "a3", "assistant", "copied", "m2", ts=_t(14)),  # a response counted before: not again
]
_LAST = [_boundary("b2", "a3c", _t(20)), _line("s2", "b2", "user", "summary two", ts=_t(21), isCompactSummary=True),
         _line("u4", "s2", "user", "fourth", ts=_t(22)), _line("a4", "u4", "assistant", "four", "m4", ts=_t(23))]


def _own_figures(numbered: tuple[int, bytes]) -> bytes:
    """A response line with figures and a model of its own (the line's number in each), so that
    a figure read from another response or column shows."""
    n, line = numbered
    obj = json.loads(line)
    usage = obj["message"].get("usage") if obj["type"] == "assistant" else None
    if usage is None or usage["input_tokens"] != 1:
        return line
    usage.update(input_tokens=n + 1, cache_creation_input_tokens=10 * n + 5, cache_read_input_tokens=1000 + n,
                 output_tokens=2 * n + 1, cache_creation={"ephemeral_1h_input_tokens": n})
    obj["message"]["model"] = f"claude-opus-4-{n % 3}"
    return json.dumps(obj).encode() + b"\n"


@pytest.fixture(params=["each parsed", "fields decoded"])
def older_lines(request, monkeypatch) -> None:
    """Both ways a load reads the lines before the last compaction (``Settling.reader``): each
    parsed by orjson, or, as a long read does, decoded by msgspec for the fields it reads."""
    from lookout_cli.formats import claude_settled

    if request.param == "fields decoded":
        monkeypatch.setattr(claude_settled, "FIELDS_BYTES", 0)


def _same_view_as_every_line(lean: Transcript, data: bytes):
    """Assert that ``lean`` (a file's load) views ``data`` as a load of every line does: the
    items, every figure of the usages, the compactions and the newest leaf's time; its chain."""
    whole_transcript = load_bytes(data)
    whole, whole_chain = whole_transcript.view(), whole_transcript.adapter.chain(whole_transcript)
    view = lean.view()
    assert [(i.kind, i.text, i.record.lineno) for i in view.items] == \
        [(i.kind, i.text, i.record.lineno) for i in whole.items]
    figures = operator.attrgetter("record.lineno", "input", "cache_write", "cache_read", "output", "cache_write_1h",
                                  "model", "timestamp")
    assert list(map(figures, view.usages)) == list(map(figures, whole.usages))
    assert [(c.record.lineno, c.before) for c in view.compactions] == \
        [(c.record.lineno, c.before) for c in whole.compactions]
    chain = lean.adapter.chain(lean)
    assert chain.latest == whole_chain.latest  # the newest leaf before the last compaction
    return chain


@pytest.mark.usefixtures("older_lines")
@pytest.mark.parametrize("told_from", [None, 1], ids=["format told from 50 lines", "format told from the first"])
@pytest.mark.parametrize("path", [p for p in real_transcripts() if "claude-code" in p.parts],
                         ids=lambda p: p.name)
def test_a_real_session_read_whole_views_as_every_line_does_with_its_uuids_put_away(tmp_path, monkeypatch, path,
                                                                                   told_from):
    """The real sessions, loaded as a measure loads a file, with all but the last two uuids read
    put away in chunks (``claude_settled._Uuids``): the view every line gives. The session
    compacted after a rewind is taken by the reader (no node before its boundary); the one with
    a partial compaction is read whole. Told the format from its first line (the real sessions
    are short), a session's lines before its last compaction are read without a record
    (``Lines``) but the ones asked for."""
    from lookout_cli import options
    from lookout_cli.formats import claude_settled
    from lookout_cli.options import Run

    monkeypatch.setattr(claude_settled._Uuids, "WINDOW", 2)
    if told_from is not None:
        monkeypatch.setattr(options, "SNIFF_RECORDS", told_from)
    copy = tmp_path / path.name
    copy.write_bytes(path.read_bytes())
    lean = Run("measure", file=str(copy), isolated=True).load()
    chain = _same_view_as_every_line(lean, copy.read_bytes())
    if path.name.startswith("claudecodelog-dag_compact_after_rewind"):
        at = chain.settled.at if chain.settled is not None else None
        assert at is not None and lean.lines.head == (at if told_from else 0)
        if told_from:  # made: the first line (the format told from it) and the older boundaries
            assert sorted(r.lineno - 1 for r in lean.lines.made() if r.lineno <= at) == \
                [0, *(c.record.lineno - 1 for c in chain.settled.compactions)]
        assert all(r.node is None for r in lean.records[:at])
    if path.name.startswith("agentsessions-claude-small-schema-coverage"):
        assert chain.settled is None and all(r.node is not None for r in lean.records if r.data is not None)


_UUID_KEYS = {"uuid", "parentUuid", "logicalParentUuid", "headUuid", "anchorUuid", "tailUuid"}


def _with_uuids(value):
    """A line whose ids are canonical uuids (a number each to the chain) made from its names,
    as a JSON line when given one's value. They share their first half, so that where the
    reader looks for their bytes (``claude_settled._Uuids``), only the second tells them apart."""
    def canonical(name: str) -> str:
        return f"0123abcd-0000-4000-{uuid.uuid5(uuid.NAMESPACE_OID, name).hex[16:20]}-" \
               f"{uuid.uuid5(uuid.NAMESPACE_OID, name).hex[20:]}"

    def swap(v):
        if isinstance(v, dict):
            return {k: canonical(x) if k in _UUID_KEYS and isinstance(x, str) else swap(x) for k, x in v.items()}
        return [swap(x) for x in v] if isinstance(v, list) else v

    return json.dumps(swap(value)).encode() + b"\n"


@pytest.mark.usefixtures("older_lines")
@pytest.mark.parametrize("case, lines, settled", [
    ("two older segments", _OLDER + _LAST, True),
    ("a line after the last compaction follows one before it", _OLDER + _LAST + [
        _line("u5", "a3", "user", "back to three", ts=_t(30))], False),
    ("a line before the last compaction is newer than the leaf, with a line below it", _OLDER[:4] + [
        _line("u2", "a1", "user", "second", ts=_t(59))] + _OLDER[5:] + _LAST, True),
    ("a line before the last compaction is the newest leaf", _OLDER[:3] + [
        _line("late", "dead", "user", "late", ts=_t(59))] + _OLDER[3:] + _LAST, False),
    ("the last compaction's logical parent is missing",
     _OLDER + [_boundary("b2", "nowhere", _t(20))] + _LAST[1:], True),
    ("a partial compaction", _OLDER + [_boundary("b2", "a3", _t(20), preservedSegment={
        "headUuid": "u3", "anchorUuid": "s2", "tailUuid": "a3"})] + _LAST[1:], False),
    ("a uuid written twice: a line names the newest", _OLDER[:9] + [
        _line("u2", "a1", "user", "second, again", ts=_t(18)), _line("a2x", "u2", "assistant", "two, again", "m7",
                                                                     ts=_t(16))] + _OLDER[9:] + _LAST, True),
    ("a count before the last compaction past 64 bits", _OLDER[:5] + [_line(  # (orjson refuses a lone surrogate)
        "a2", "u2", "assistant", "two", "m2", ts=_t(6), message={
            "id": "m2", "role": "assistant", "model": "claude-opus-4-1",
            "content": [{"type": "text", "text": "\ud800"}], "usage": {"input_tokens": 2**70, "output_tokens": 1}})]
     + _OLDER[6:] + _LAST, False),
    ("a count counted before the last compaction past 63 bits", _OLDER[:6] + [_line(  # (64 bits, unsigned)
        "a2b", "a2", "assistant", "two, more", "m2", ts=_t(7), message={
            "id": "m2", "role": "assistant", "model": "claude-opus-4-1",
            "content": [{"type": "text", "text": "more"}], "usage": {"input_tokens": 2**63, "output_tokens": 1}})]
     + _OLDER[7:] + _LAST, False),
    ("a count past 63 bits on a line whose response counts its last", _OLDER[:5] + [_line(
        "a2", "u2", "assistant", "two", "m2", ts=_t(6), message={
            "id": "m2", "role": "assistant", "model": "claude-opus-4-1",
            "content": [{"type": "text", "text": "two"}], "usage": {"input_tokens": 2**63, "output_tokens": 1}})]
     + _OLDER[6:] + _LAST, True),
])
@pytest.mark.parametrize("window, searches", [(None, None), (2, None), (2, 0)],
                         ids=["uuids in a dict", "uuids put away", "older uuids looked for too often"])
@pytest.mark.parametrize("canonical", [False, True], ids=["names for uuids", "canonical uuids"])
def test_a_file_read_whole_stands_the_lines_before_its_last_compaction_for_what_they_give(
        tmp_path, monkeypatch, case, lines, settled, window, searches, canonical):
    """A file loaded from its start keeps no node for the lines before its last compaction but
    what they give the view (``Adapter.settling``), and the view is the one every line gives;
    when that is not the chain every line gives, the lines are read after all. The reader keeps
    the uuids of all but the last lines read in chunks (a window of 2 puts nearly all away), and
    reads every line when lines name older ones too often."""
    from lookout_cli.formats import claude_settled
    from lookout_cli.options import Run

    if window is not None:
        monkeypatch.setattr(claude_settled._Uuids, "WINDOW", window)
    if searches is not None:
        monkeypatch.setattr(claude_settled._Uuids, "SEARCHES", searches)
        settled = settled and not canonical  # (names are no numbers: never put in a chunk nor looked for there)
    if canonical:
        lines = [_with_uuids(json.loads(line)) for line in lines]

    data = b"".join(map(_own_figures, enumerate(lines)))
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    lean = Run("measure", file=str(path), isolated=True).load()
    chain = _same_view_as_every_line(lean, data)
    last = max(n for n, line in enumerate(lines) if b'"compact_boundary"' in line)
    assert (chain.settled is not None) is settled
    assert all(r.node is None for r in lean.records[:last]) is settled


def test_a_count_past_64_bits_before_the_last_compaction_is_measured_again_and_again(tmp_path):
    """A response before the last compaction whose count does not fit 64 bits: the reader
    reads every line, the memo keeps no value for those lines (the older usages' columns hold
    64-bit numbers), and a measure of the file, again, and again once it grew, counts it."""
    big = _line("a3", "u3", "assistant", "three", "m3", ts=_t(13), message={
        "id": "m3", "role": "assistant", "model": "claude-opus-4-1", "content": [{"type": "text", "text": "three"}],
        "usage": {"input_tokens": 2**63 + 1, "output_tokens": 1}})  # (orjson reads it: up to 2**64 - 1)
    lines = [big if json.loads(line)["uuid"] == "a3" else line for line in _OLDER + _LAST]
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(map(_own_figures, enumerate(lines))))
    env = {**os.environ, "LOOKOUT_CACHE_DIR": str(tmp_path / "c"), "XDG_DATA_HOME": str(tmp_path / "d")}
    inputs = []
    for grow in (None, None, _line("u5", "a4", "user", "fifth", ts=_t(30))):
        if grow is not None:
            path.write_bytes(path.read_bytes() + grow)
        done = subprocess.run([*lookout_exe(), "measure", "--json", "--no-discover", str(path)], capture_output=True,
                              cwd=tmp_path, env=env, check=False)
        assert done.returncode == 0, done.stderr
        inputs.append(json.loads(done.stdout)["cache"]["input"])
    assert inputs[0] > 2**63 and inputs == [inputs[0]] * 3


@pytest.mark.parametrize("others", [[], ["upper"], ["not-a-uuid", "upper"]],
                         ids=["all canonical", "one in upper case", "one no uuid"])
def test_uuids_put_away_are_found_by_their_text_and_no_other(others):
    """``_Uuids`` puts its dict away at once, the numbers of all its uuids worked out together,
    when every one is a canonical uuid, else one at a time: either way each is found at its
    line, and another spelling of one (upper case) names its own line or none."""
    from lookout_cli.formats.claude_settled import _Uuids

    canonical = [str(uuid.UUID(int=(n + 1) * 0x9E3779B97F4A7C15F39CC0605CEDC835 % (1 << 128))) for n in range(40)]
    texts = canonical + [canonical[3].upper() if other == "upper" else other for other in others]
    ids = _Uuids()
    for pos, text in enumerate(texts):
        ids.recent[text] = pos
    ids.put_away()
    assert not ids.recent and [ids.get(text) for text in texts] == list(range(len(texts)))
    assert ids.get(canonical[5].upper()) == -1 and ids.get(str(uuid.UUID(int=5))) == -1


def test_a_uuid_whose_bytes_span_two_put_away_is_not_found_there(monkeypatch):
    """The chunks are scanned for a uuid's 16 bytes: the second half of one uuid and the first
    of the next are no uuid of the chunk (it is found where it is, or not at all); a scan past
    the bound of bytes scanned leaves the reader spent (the caller reads every line)."""
    from lookout_cli.formats.claude_settled import _Uuids

    first, second = "00000000-0000-4000-8000-00000000aaaa", "bbbbbbbb-cccc-4ddd-8eee-ffffffffffff"
    spanning = "80000000-0000-aaaa-bbbb-bbbbcccc4ddd"  # first's last 8 bytes, then second's first 8
    ids = _Uuids()
    ids.recent = {first: 0, second: 1}
    ids.put_away()
    assert (ids.get(first), ids.get(second), ids.get(spanning)) == (0, 1, -1) and not ids.spent
    ids.recent = {spanning: 2}
    ids.put_away()
    assert ids.get(spanning) == 2 and ids.get(second) == 1
    monkeypatch.setattr(_Uuids, "SCANNED", ids.scanned)
    assert not ids.spent and ids.get(str(uuid.UUID(int=7))) == -1 and ids.spent
    assert ids.get(second) == -1  # (spent: looked for no more)


def _odd_responses() -> list[dict]:
    """Responses whose counts or names are not what Claude Code writes: each must be read as
    ``response_figures`` reads it."""
    def response(usage=None, **message):
        return {"type": "assistant", "uuid": "a", "timestamp": _t(1), "requestId": "req_1",
                "message": {"id": "msg_1", "model": "claude-opus-4-1", "usage": usage, **message}}

    counts = {"input_tokens": 3, "cache_creation_input_tokens": 5, "cache_read_input_tokens": 7, "output_tokens": 11}
    odd = [None, True, False, -4, 0, 2.5, "9", [1], 2**63, 2**64, 2**70]
    return [
        *(response({**counts, name: value}) for name in counts for value in odd),
        *(response({**counts, "cache_creation": {"ephemeral_1h_input_tokens": value}}) for value in [*odd, 13]),
        response({**counts, "cache_creation": "13"}), response({**counts, "cache_creation": {}}),
        response({name: 0 for name in counts}), response({}), response(None), response([1, 2]),
        response(counts, model="<synthetic>"), response(counts, model=None), response(counts, model=["m"]),
        response(counts, id=""), response(counts, id=None), response(counts, id=7),
        {**response(counts, id=None), "requestId": None}, {**response(counts, id=None), "requestId": ""},
        {**response(counts), "timestamp": 5}, {"type": "assistant", "message": "text"}, {"type": "assistant"},
    ]


def test_a_reader_keeps_of_every_response_what_its_figures_give():
    """``_Figures.take``, the reader's way with a response line, keeps what ``add`` keeps of
    ``response_figures``: on every response of the real sessions and on counts of every other
    kind (none, a bool, below zero, a fraction, text, past 63 and 64 bits) and missing names."""
    from lookout_cli.formats.claude_items import response_figures
    from lookout_cli.formats.claude_settled import _Figures

    lines = []
    for name in ALL_FILES:
        for line in (DATA / name).read_bytes().splitlines():
            try:
                lines.append(orjson.loads(line))
            except orjson.JSONDecodeError:  # (a line that is no JSON; one with a lone surrogate)
                pass
    lines = [obj for obj in lines if type(obj) is dict]
    responses = [obj for obj in lines if obj.get("type") == "assistant"] + _odd_responses()
    def kept(figures: _Figures) -> tuple:  # (the last response kept)
        return (figures.broken, len(figures.lines), list(figures.lines[-1:]), list(figures.numbers[-5:]),
                figures.keys[-1:], figures.models[-1:], figures.stamps[-1:])

    taken, added = _Figures(), _Figures()
    for pos, obj in enumerate(responses):
        taken.take(pos, obj)
        figures = response_figures(obj)
        if figures is not None:
            added.add(pos, figures)
        assert kept(taken) == kept(added), obj
        if taken.broken:  # (what a count past 64 bits left is never read: start again)
            taken, added = _Figures(), _Figures()
    assert sum(obj.get("type") == "assistant" for obj in lines) > 100


def _what_it_read(settling, uuids: list[str]) -> tuple:
    """What a reader of the lines before the last compaction (``Settling``) kept of them, its
    uuids by what they are found at (kept in a dict or in chunks, as it went)."""
    figures = settling.figures
    compactions = {pos: (c.before, c.after, c.timestamp, c.trigger) for pos, c in settling.compactions.items()}
    return (list(settling.parents), bytes(settling.flags), settling.stamps, list(figures.lines),
            list(figures.numbers), figures.keys, figures.models, figures.stamps, settling.logical, compactions,
            settling.broken, figures.broken, [settling.by_uuid.get(u) for u in uuids])


_SPLIT_SESSIONS = {
    **{name: (DATA / name).read_bytes() for name in ALL_FILES},
    "two older segments": b"".join(_OLDER + _LAST),
    "a uuid written twice": b"".join(_OLDER[:9] + [
        _line("u2", "a1", "user", "second, again", ts=_t(18)),
        _line("a2x", "u2", "assistant", "two, again", "m7", ts=_t(16))] + _OLDER[9:] + _LAST),
    "a line before the last compaction is the newest leaf": b"".join(_OLDER[:3] + [
        _line("late", "dead", "user", "late", ts=_t(59))] + _OLDER[3:] + _LAST),
    "the last compaction's logical parent is missing": b"".join(
        _OLDER + [_boundary("b2", "nowhere", _t(20))] + _LAST[1:]),
    "a child before its parent, a line its own parent": b"".join(_OLDER[:4] + [
        _line("early", "later", "user", "early", ts=_t(30)), _line("later", "u1", "user", "later", ts=_t(31)),
        _line("self", "self", "user", "itself", ts=_t(32))] + _OLDER[4:] + _LAST),
}


@pytest.mark.parametrize("window", [None, 2], ids=["uuids in a dict", "uuids put away"])
@pytest.mark.parametrize("name", list(_SPLIT_SESSIONS))
def test_lines_read_by_two_readers_joined_are_what_one_reader_keeps_of_them(monkeypatch, name, window):
    """``measure --jobs 2`` reads a long session's lines before its last compaction in two
    processes, each into a reader of its own, and joins them (``Settling.join``): at every
    line it could be split at, the two joined keep what one reader of every line keeps (the
    parents found across the split, the walks up the chain that crossed it, the newest leaf,
    the figures, the compactions and their logical parents, each uuid's line)."""
    from lookout_cli.formats import claude_settled

    if window is not None:
        monkeypatch.setattr(claude_settled._Uuids, "WINDOW", window)
    values = []
    for raw in _SPLIT_SESSIONS[name].splitlines():
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            value = None
        values.append(value if type(value) is dict else None)
    uuids = sorted({v["uuid"] for v in values if v is not None and isinstance(v.get("uuid"), str)})

    def read(lines, follows: bool = False) -> claude_settled.Settling:
        settling = claude_settled.Settling(follows)
        for value in lines:
            settling.add(value)
        return settling

    whole = _what_it_read(read(values), uuids)
    assert any(parent >= 0 for parent in whole[0])  # (lines that name others)
    for cut in range(1, len(values)):
        first = read(values[:cut])
        first.join(read(values[cut:], follows=True))
        assert _what_it_read(first, uuids) == whole, cut


def _odd_lines() -> list[bytes]:
    """Lines of every odd kind, between lines of a session: each must be read as its parsed
    value is (or not at all, as that is)."""
    def response(n: int, **changes) -> dict:
        obj = json.loads(_own_figures((n, _line(f"a{n}", f"u{n}", "assistant", f"answer {n}", f"m{n}", ts=_t(n)))))
        for path, value in changes.items():
            *above, key = path.split(".")
            place = obj
            for step in above:
                place = place[step]
            place[key] = value
        return obj

    def dump(obj) -> bytes:
        return json.dumps(obj, ensure_ascii=False).encode() + b"\n"

    deep = b'"x":' + b"[" * 1000 + b"]" * 1000 + b","
    return [
        _line("u1", None, "user", "first", ts=_t(1)),
        dump(response(1, **{"message.content": [{"type": "text", "text": "d\u00e9j\u00e0 vu \u2014 \U0001F600"}]})),
        dump(response(2)).replace(b"answer 2", b"answer \xff 2"),  # not UTF-8 where no field is read
        dump(response(3)).replace(b"answer 3", b"answer \xed\xa0\x80 3"),  # a surrogate's bytes
        dump(response(4)).replace(b"answer 4", b"answer \\ud800 4"),  # a lone surrogate
        dump(response(5)).replace(b"{", b"{" + deep, 1),  # nested past what msgspec takes, as deep as orjson does
        dump(response(6, **{"message.usage.input_tokens": 2**64 - 1})),
        dump(response(7, **{"message.usage.input_tokens": 2**70})),  # (orjson: a float)
        dump(response(8, **{"message.usage.output_tokens": 2.0})),
        dump(response(9, **{"message.usage.cache_creation": 13})), dump(response(10, **{"message.usage": [1]})),
        dump(response(11, **{"message.usage": None})), dump(response(12, message="text")),
        dump(response(13, **{"message.id": None})), dump(response(14, **{"message.model": "<synthetic>"})),
        dump(response(15, **{"message.usage.cache_creation": {}})), dump(response(16, isApiErrorMessage=True)),
        dump(response(17, type=["assistant"])), dump(response(18, type=None, lookoutMoved=True)),
        dump(response(19, type="lookout-moved")), dump(response(20, isSidechain=1)), dump(response(21, uuid=5)),
        dump(response(22, parentUuid=["u1"])), dump(response(23, timestamp=7)),
        dump(response(24)).replace(b'{"parentUuid"', b'{"type": "user", "parentUuid"'),  # a key twice: the last
        dump(response(25)).replace(b'"type": "assistant"', b'"type": "assistant", "type": "user"'),
        dump(response(26)).replace(b'"timestamp"', b'"t\\u0069mestamp"'),  # a key spelled with an escape
        _boundary("b1", "a26", _t(40)), b"null\n", b"[1, 2]\n", b"\n", b"{not json\n",
        b'\xef\xbb\xbf' + _line("u27", "b1", "user", "a byte-order mark", ts=_t(41)),
        _line("u28", "b1", "user", "NaN", ts=_t(42)).replace(b'"cwd"', b'"x": NaN, "cwd"'),
        _line("u29", "u28", "user", "last", ts=_t(43)),
    ]


@pytest.mark.parametrize("name", [*_SPLIT_SESSIONS, "odd lines"])
def test_a_line_decoded_for_the_fields_read_is_read_as_its_parsed_value(name):
    """A long read decodes each line before the last compaction for the fields the reader
    reads (msgspec, ``claude_fields``) instead of parsing all of it: line by line, it keeps
    what the line parsed gives, and says the same of which lines are no JSON value, on the
    real sessions and on lines of every odd kind (not UTF-8 where no field is read, a lone
    surrogate, nested deeper than msgspec goes, counts past 64 bits or of another type, a
    message or usage of another type, a compaction, lookout's moved lines, a key twice)."""
    from lookout_cli.formats import claude_settled

    raws = _odd_lines() if name == "odd lines" else _SPLIT_SESSIONS[name].splitlines(keepends=True)
    parsed, decoded = claude_settled.Settling(), claude_settled.Settling()
    by_value, by_fields = parsed.reader(0), decoded.reader(claude_settled.FIELDS_BYTES)
    assert by_fields.__name__ == "by_fields" and by_value.__name__ == "by_value"
    uuids = []
    for raw in raws:
        with contextlib.suppress(orjson.JSONDecodeError):
            value = orjson.loads(raw)
            if type(value) is dict and type(value.get("uuid")) is str:
                uuids.append(value["uuid"])
    for raw in raws:
        assert by_fields(raw) is by_value(raw), raw
        assert _what_it_read(decoded, uuids) == _what_it_read(parsed, uuids), raw
    assert name != "odd lines" or len(parsed.figures.lines) > 10  # (the responses Claude Code writes among them)


def test_a_number_past_a_doubles_range_where_no_field_is_read_is_read_as_json_parse_reads_it():
    """The one line a long read takes that orjson does not: a number too large for a double in
    a part of the line no field is read from (orjson calls the line no JSON; Claude Code's
    ``JSON.parse`` reads Infinity there, and never writes one). In a field that is read, the
    line is parsed, and refused, as orjson refuses it."""
    from lookout_cli.formats import claude_settled

    line = _own_figures((3, _line("a3", "u3", "assistant", "three", "m3", ts=_t(3))))
    unread = line.replace(b'"cwd"', b'"durationMs": 1e400, "cwd"')
    read = line.replace(b'"output_tokens": 7', b'"output_tokens": 1e400')
    assert read != line
    for raw, taken in ((unread, True), (read, False)):
        with pytest.raises(orjson.JSONDecodeError):
            orjson.loads(raw)
        decoded = claude_settled.Settling()
        assert decoded.reader(claude_settled.FIELDS_BYTES)(raw) is taken
        assert list(decoded.figures.lines) == ([0] if taken else [])


def _long_session(odd_at: int | None = None) -> tuple[bytes, list[bytes]]:
    """A session of 120 exchanges, two compactions, then a short last segment (and, at line
    ``odd_at``, a line that is no JSON)."""
    lines = [_line("u0", None, "user", "first", ts=_t(0))]
    for n in range(1, 120):
        lines += [_line(f"a{n}", json.loads(lines[-1])["uuid"], "assistant", f"answer {n}", f"m{n}", ts=_t(n)),
                  _line(f"u{n}", f"a{n}", "user", f"prompt {n}", ts=_t(n))]
    lines[150:150] = [_boundary("b1", "u70", _t(200)), _line("s1", "b1", "user", "summary", ts=_t(201),
                                                            isCompactSummary=True)]
    lines[151] = lines[151].replace(b'"parentUuid": "a75"', b'"parentUuid": "s1"')
    lines += [_boundary("b2", "u119", _t(300)), _line("s2", "b2", "user", "summary two", ts=_t(301),
                                                        isCompactSummary=True),
              _line("a999", "s2", "assistant", "last", "m999", ts=_t(302))]
    if odd_at is not None:
        lines.insert(odd_at, b"{not json\n")
    return b"".join(line if line.startswith(b"{not") else _own_figures((n, line)) for n, line in enumerate(lines)), lines


@pytest.mark.usefixtures("older_lines")
@pytest.mark.parametrize("odd_at", [None, 30, 200], ids=["every line an object", "a line no JSON in the first half",
                                                          "a line no JSON in the second half"])
def test_with_jobs_the_lines_before_the_last_compaction_are_read_in_two_processes(tmp_path, monkeypatch, odd_at):
    """A load with ``jobs`` > 1 reads the second half of the lines before the last compaction
    in a forked process (``Run._settle``) and joins what it kept: the view is the one every
    line gives, each line is where it was, and the lines that are no JSON are warned about and
    kept as before. The child gives up at such a line (this process reads its half then)."""
    from lookout_cli import options
    from lookout_cli.core import forked
    from lookout_cli.options import Run

    data, lines = _long_session(odd_at)
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    serial = Run("measure", file=str(path), isolated=True, quiet=True)
    expected = serial.load()
    monkeypatch.setattr(options, "APART_BYTES", 0)
    taken = []
    result = forked.Forked.result
    monkeypatch.setattr(forked.Forked, "result", lambda self: taken.append(result(self)) or taken[-1])
    run = Run("measure", file=str(path), isolated=True, quiet=True)
    lean = run.load(jobs=2)
    assert len(taken) == 1 and (taken[0] is not None) is (odd_at != 200)
    assert run._bad_lines == serial._bad_lines == (odd_at is not None)
    chain = _same_view_as_every_line(lean, data.replace(b"{not json\n", b"\n"))
    assert chain.settled is not None and chain.settled.at == lines.index(_boundary("b2", "u119", _t(300)))
    assert [r.lineno for r in lean.lines] == [r.lineno for r in expected.lines] == list(range(1, len(lines) + 1))
    assert sorted(r.lineno for r in lean.lines.made()) == sorted(r.lineno for r in expected.lines.made())
    assert [r.raw for r in lean.records] == data.splitlines(keepends=True)


@pytest.mark.usefixtures("older_lines")
@pytest.mark.parametrize("path", [p for p in real_transcripts() if "claude-code" in p.parts], ids=lambda p: p.name)
def test_a_real_session_loaded_with_jobs_views_as_every_line_does(tmp_path, monkeypatch, path):
    """The real sessions, told their format from the first line and split however short they
    are: a load with ``jobs`` reads the second half of the lines before the last compaction in
    a forked process (the session compacted after a rewind has some), and the view is the one
    every line gives, each line where it was."""
    from lookout_cli import options
    from lookout_cli.core import forked
    from lookout_cli.options import Run

    monkeypatch.setattr(options, "SNIFF_RECORDS", 1)
    monkeypatch.setattr(options, "APART_BYTES", 0)
    taken = []
    result = forked.Forked.result
    monkeypatch.setattr(forked.Forked, "result", lambda self: taken.append(result(self)) or taken[-1])
    copy = tmp_path / path.name
    copy.write_bytes(data := path.read_bytes())
    lean = Run("measure", file=str(copy), isolated=True, quiet=True).load(jobs=2)
    _same_view_as_every_line(lean, data)
    assert [r.raw for r in lean.records] == data.splitlines(keepends=True)
    if path.name.startswith("claudecodelog-dag_compact_after_rewind"):
        assert taken and taken[0] is not None  # (read apart, and taken)


def test_a_load_stopped_while_its_forked_reader_reads_stops_and_reaps_it(tmp_path, monkeypatch):
    """Ctrl-C (or any failure) while this process reads its half: the forked reader of the
    other half is stopped and reaped, not left running or a zombie, and the error goes on."""
    from lookout_cli import options
    from lookout_cli.core import forked
    from lookout_cli.options import Run

    data, _ = _long_session()
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    monkeypatch.setattr(options, "APART_BYTES", 0)
    children = []
    start = forked.Forked.__init__
    monkeypatch.setattr(forked.Forked, "__init__", lambda self, *a: start(self, *a) or children.append(self.pid))

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(Run, "_settle_blocks", interrupted)
    with pytest.raises(KeyboardInterrupt):
        Run("measure", file=str(path), isolated=True, quiet=True).load(jobs=2)
    assert len(children) == 1
    with pytest.raises(ChildProcessError):
        os.waitpid(children[0], os.WNOHANG)  # stopped and reaped: no longer a child of this process


@pytest.mark.usefixtures("older_lines")
def test_a_long_file_read_whole_makes_no_record_for_a_line_before_its_last_compaction(tmp_path):
    """Past the lines the format is told from, a line before the last compaction is parsed into
    what it gives and left unmade (``Lines``): a record is made for it only when it is asked
    for, and for the lines a record must speak for (blank, null, not JSON, what only the
    standard library reads), which are warned about as before. The view is the one every line
    gives, and the lines read as the records of every line do."""
    from lookout_cli.formats import SNIFF_RECORDS
    from lookout_cli.options import Run

    older = [_line("u0", None, "user", "first", ts=_t(0))]
    for n in range(1, 60):
        older += [_line(f"a{n}", json.loads(older[-1])["uuid"], "assistant", f"answer {n}", f"m{n}", ts=_t(n)),
                  _line(f"u{n}", f"a{n}", "user", f"prompt {n}", ts=_t(n))]
    odd = [b"\n", b"null\n", b"{not json\n", _line("sur", "u59", "user", "\ud800", ts=_t(61))]
    lines = older[:80] + odd[:3] + older[80:] + [odd[3], _boundary("b1", "sur", _t(70))] + \
        [_line("s1", "b1", "user", "summary", ts=_t(71), isCompactSummary=True), _line("x1", "s1", "user", "more", ts=_t(72)),
         _boundary("b2", "x1", _t(73)), _line("s2", "b2", "user", "summary two", ts=_t(74), isCompactSummary=True),
         _line("a99", "s2", "assistant", "last", "m99", ts=_t(75))]
    data = b"".join(line if line in odd[:3] else _own_figures((n, line)) for n, line in enumerate(lines))
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    run = Run("measure", file=str(path), isolated=True, quiet=True)
    lean = run.load()
    assert run._bad_lines == 2  # null and "{not json"
    chain = _same_view_as_every_line(lean, data.replace(b"null\n", b"\n").replace(b"{not json\n", b"\n"))
    last = lines.index(_boundary("b2", "x1", _t(73)))
    assert chain.settled is not None and chain.settled.at == last
    made = sorted(r.lineno - 1 for r in lean.lines.made() if r.lineno - 1 < last)
    told_from = list(range(SNIFF_RECORDS))  # (read before the format was known)
    assert lean.lines.head == last
    assert made == [*told_from, 80, 81, 82, lines.index(odd[3]), lines.index(odd[3]) + 1]  # the odd lines, the older boundary
    assert [r.lineno for r in lean.lines] == list(range(1, len(lines) + 1))
    assert lean.lines[5] is lean.lines[5] and lean.lines[-1] is lean.records[-1]
    assert [r.raw for r in lean.records] == data.splitlines(keepends=True)
