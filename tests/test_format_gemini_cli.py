"""The gemini-cli adapter (read-only): detection, the replayed view ($set, $rewindTo, message
updates), usage, and edits refused. Expected numbers were counted by hand from the fixtures."""

from __future__ import annotations

import base64

import pytest
from codex_helpers import crlf_variant, dump, kinds, load, read_bytes

from lookout_cli.core.errors import LookoutError
from lookout_cli.formats.gemini_cli import Adapter
from lookout_cli.formats.view import IMAGE, TEXT, THINKING, TOOL_CALL, TOOL_RESULT

HANDMADE = "gemini-cli/handmade.jsonl"
REAL = "gemini-cli/agentsessions-gemini-jsonl_v040.jsonl"
PNG2 = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAFklEQVR4nGP8z8DAwMDAxMDAwMDAAAANHQEDasKb6QAAAABJRU5ErkJggg=="


def gemini(name_or_bytes):
    data = read_bytes(name_or_bytes) if isinstance(name_or_bytes, str) else name_or_bytes
    return load(data, "gemini-cli")


@pytest.mark.parametrize("name", [HANDMADE, REAL])
def test_detection_picks_gemini(name):
    t = gemini(name)
    assert t.format == "gemini-cli" and t.adapter.can_write is False


def test_sniff():
    assert Adapter.sniff({"sessionId": "s", "projectHash": "p"}) > 0
    assert Adapter.sniff({"$rewindTo": "x"}) > 0 and Adapter.sniff({"$set": {}}) > 0
    assert Adapter.sniff({"id": "a", "type": "gemini", "content": ""}) > 0
    claude = {"type": "user", "uuid": "u", "parentUuid": None, "sessionId": "s", "message": {}}
    codex = {"timestamp": "t", "type": "response_item", "payload": {}}
    for obj in (claude, codex, {"role": "user", "content": "x"}, {"id": "a", "type": "user"}):
        assert Adapter.sniff(obj) == 0


def test_real_v040_view():
    view = gemini(REAL).view()
    assert kinds(view) == {TEXT: 2, TOOL_CALL: 1, TOOL_RESULT: 1}
    assert [(i.kind, i.message, i.turn) for i in view.items] == [
        (TEXT, 0, 1),
        (TOOL_CALL, 1, 1),
        (TOOL_RESULT, 2, 1),
        (TEXT, 3, 1),
    ]
    call, result = view.items[1], view.items[2]
    assert call.call_id == result.call_id == "run_shell_command_stage0"
    assert call.text == 'run_shell_command{"command":"ls -F","description":"List files in the current directory."}'
    assert result.text == "Output: AgentSessions/\nREADME.md\nProcess Group PGID: 12345"
    assert view.orphans() == []
    u = view.usages
    # input includes the cached part: 12069 input of which 11502 cached
    assert [(x.input, x.cache_read, x.output) for x in u] == [(11855, 0, 81), (567, 11502, 147)]
    assert [x.prompt for x in u] == [11855, 12069]
    assert (view.session_id, view.model) == ("gemini_stage0_jsonl", "gemini-3-flash-preview")
    assert view.last_timestamp == "2026-04-29T21:39:45.996Z"


def test_handmade_view_hand_counts():
    view = gemini(HANDMADE).view()
    assert kinds(view) == {TEXT: 4, IMAGE: 2, THINKING: 2, TOOL_CALL: 3, TOOL_RESULT: 3}
    assert len(view.items) == 14 and len(view.messages()) == 7
    assert max(i.turn for i in view.items) == 2
    assert [i.record.lineno for i in view.items if i.prompt] == [2, 12]
    # g1 is taken from its second write (line 5), which replaced the first (line 4)
    assert 4 not in {i.record.lineno for i in view.items}
    # the info record, the rewound turn (u2, g3) and the slash command are not sent
    assert not {6, 8, 9, 11} & {i.record.lineno for i in view.items}
    assert set(view.calls()) == {"c1", "c2", "c4"} == set(view.results())
    assert view.orphans() == []
    c2 = view.results()["c2"]
    assert c2.text == "Read image file: logo.png" and c2.tool == "read_file"
    image = [i for i in view.items if i.kind == IMAGE and i.call_id == "c2"][0]
    assert image.image.data == PNG2 and image.image.nbytes == len(base64.b64decode(PNG2))
    assert image.message == c2.message != view.calls()["c2"].message
    thinking = [i.text for i in view.items if i.kind == THINKING]
    assert thinking == ["Planning\nI will list the files.", "Reading it first."]
    assert [i.text for i in view.items if i.kind == TEXT] == [
        "List the files and show logo.png",
        "Here are the files.",
        "Summarize README caf\u00e9 \ud800",
        "README says hi.",
    ]
    assert view.session_id == "gem-1" and view.model == "gemini-2.5-flash"
    assert view.last_timestamp == "2026-05-01T10:00:13.000Z"


def test_handmade_usage():
    u = gemini(HANDMADE).view().usages
    assert [x.record.lineno for x in u] == [5, 7, 14]  # g3 was rewound
    assert [(x.input, x.cache_read, x.output) for x in u] == [(1500, 500, 70), (810, 1800, 20), (500, 2500, 42)]
    assert sum(x.input for x in u) == 2810 and sum(x.cache_read for x in u) == 4800
    assert sum(x.output for x in u) == 132
    assert [x.model for x in u] == ["gemini-2.5-pro", "gemini-2.5-pro", "gemini-2.5-flash"]


def test_rewind_to_an_unknown_id_clears_everything():
    data = read_bytes(HANDMADE) + b'{"$rewindTo":"nope"}\n{"id":"u9","type":"user","content":"again"}\n'
    view = gemini(data).view()
    assert [i.text for i in view.items] == ["again"] and view.usages == []


def test_set_messages_replaces_the_list():
    data = read_bytes(HANDMADE) + (
        b'{"$set":{"messages":[{"id":"u1","type":"user","content":"compressed history"},'
        b'{"id":"g9","type":"gemini","content":"ok"}]}}\n{"id":"u10","type":"user","content":"next"}\n'
    )
    view = gemini(data).view()
    assert [(i.text, i.path) for i in view.items] == [
        ("compressed history", ("$set", "messages", 0, "content")),
        ("ok", ("$set", "messages", 1, "content")),
        ("next", ("content",)),
    ]


def test_crlf_and_round_trip():
    data = read_bytes(HANDMADE)
    plain = gemini(data)
    variant = gemini(crlf_variant(data))
    assert [(i.kind, i.text) for i in plain.view().items] == [(i.kind, i.text) for i in variant.view().items]
    assert dump(plain) == data and dump(variant) == crlf_variant(data)


def test_edits_are_refused():
    data = read_bytes(HANDMADE)
    t = gemini(data)
    view = t.view()
    prompt = view.items[0]
    with pytest.raises(LookoutError, match="read-only"):
        t.adapter.replace_content(t, view.results()["c1"], "x")
    with pytest.raises(LookoutError, match="read-only"):
        t.adapter.add_parts(t, prompt, [{"type": "text", "text": "x"}])
    with pytest.raises(LookoutError, match="read-only"):
        t.adapter.set_setup(t, "memory", "x")
    with pytest.raises(LookoutError, match="read-only"):
        t.adapter.compact(t, "s", prompt, {})
    assert dump(t) == data and not any(r.edited for r in t.records)
