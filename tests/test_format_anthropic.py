"""The ``anthropic`` adapter (Messages API) on hand-made fixtures in both layouts.

tests/data/anthropic/lines.jsonl (one message per line) holds, counted by hand:
 line 1 user prompt (string)                                     → TEXT (prompt, turn 1)    message 0
 line 2 assistant: signed thinking, text, three parallel tool_use → THINKING, TEXT, 3 TOOL_CALL  message 1
 line 3 user: results for toolu_03 (an image), toolu_01 (is_error), toolu_02 (text + image),
        answered out of order                                    → 3 TOOL_RESULT + 2 IMAGE  message 2
 line 4 not JSON
 line 5 assistant: redacted_thinking, text, tool_use toolu_04, unknown field with a 30-digit
        integer                                                  → THINKING, TEXT, TOOL_CALL message 3
 line 6 user: result for toolu_04, CRLF                           → TOOL_RESULT              message 4
 line 7 an unknown record                                         → nothing
 line 8 response msg_01 (text with \\u00e9; usage 50 in, 2000 written of which 500 for 1 h,
        8000 read, 120 out)                                       → TEXT                     message 5
 line 9 user text with a lone surrogate + PNG                     → TEXT (prompt, turn 2) + IMAGE  message 6
 line 10 response msg_02, no final newline (30 in, 10000 read, 8 out) → TEXT                 message 7
Totals: 8 messages, 2 turns, TEXT 6, THINKING 2, TOOL_CALL 4, TOOL_RESULT 4, IMAGE 3 (19 items);
usage input 80, cache write 2000 (1 h: 500), cache read 18000, output 128.

tests/data/anthropic/bodies.jsonl (request bodies; the last one counts): system (one cached
block) → SETUP, tools (2) → SETUP; user; assistant signed thinking + toolu_a + toolu_b; user
results for toolu_b then toolu_a (is_error); assistant text; user text + PNG; assistant
string; user string.
Totals: 9 messages, 3 turns, SETUP 2, TEXT 5, THINKING 1, TOOL_CALL 2, TOOL_RESULT 2, IMAGE 1
(13 items); usage input 425, cache write 1500 (1 h: 300), cache read 1600, output 150.
"""

from __future__ import annotations

import pytest
from conftest import real_transcripts
from message_list_helpers import (
    DATA,
    Saver,
    check_compact_everywhere,
    dump,
    kinds,
    lines,
    load,
    parse,
    prompts,
    reread,
    visible,
)

from lookout_cli.core.errors import LookoutError
from lookout_cli.core.jsonl import read_records
from lookout_cli.formats import detect, load_adapter
from lookout_cli.formats.view import IMAGE, NOTICE, SETUP, SUMMARY, TEXT, THINKING, TOOL_CALL, TOOL_RESULT

LINES = "anthropic/lines.jsonl"
BODIES = "anthropic/bodies.jsonl"
COMPACTED = "anthropic/compacted.jsonl"


def roles_alternate(transcript) -> bool:
    """User and assistant messages alternate in what the API receives."""
    roles = []
    for group in transcript.view().messages():
        role = group[0].role
        if role in ("user", "assistant"):
            roles.append(role)
    return all(a != b for a, b in zip(roles, roles[1:])) and roles[:1] == ["user"]


# --- detection ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", [LINES, BODIES, COMPACTED])
def test_detected_as_anthropic(name):
    assert load(name).format == "anthropic"


def test_sniff_scores():
    sniff = load_adapter("anthropic").sniff
    assert sniff({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]}) >= 5
    assert sniff({"role": "assistant", "content": [{"type": "thinking", "thinking": "", "signature": "s"}]}) >= 5
    assert sniff({"role": "user", "content": [{"type": "image", "source": {"type": "base64"}}]}) >= 5
    assert sniff({"type": "message", "role": "assistant", "content": [], "stop_reason": "end_turn"}) >= 5
    assert sniff({"model": "m", "max_tokens": 10, "messages": []}) >= 5
    assert sniff({"role": "tool", "tool_call_id": "c", "content": "x"}) == 0
    assert sniff({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}) == 0
    assert sniff({"type": "assistant", "message": {"role": "assistant", "content": []}}) == 0  # Claude Code


def test_plain_text_file_is_read_as_openai():
    data = b'{"role":"user","content":"hi"}\n{"role":"assistant","content":"hello"}\n'
    assert parse(data).format == "openai"


@pytest.mark.parametrize("path", real_transcripts(), ids=lambda p: p.name)
def test_other_formats_score_nothing(path):
    """No real transcript of another agent looks like an Anthropic message list."""
    sniff = load_adapter("anthropic").sniff
    records = list(read_records(path.open("rb")))
    assert sum(sniff(r.data) for r in records if r.data is not None) == 0
    assert detect(records) is None or detect(records).name != "anthropic"


# --- views ----------------------------------------------------------------------------------

def test_lines_view_counts():
    transcript = load(LINES)
    view = transcript.view()
    assert kinds(view) == {TEXT: 6, THINKING: 2, TOOL_CALL: 4, TOOL_RESULT: 4, IMAGE: 3}
    assert len(view.messages()) == 8
    assert [(i.turn, i.message) for i in prompts(view)] == [(1, 0), (2, 6)]
    assert view.orphans() == []
    results = view.results()
    assert results["toolu_01"].is_error and not results["toolu_02"].is_error
    assert results["toolu_03"].tool == "view_image" and results["toolu_03"].text == ""
    assert results["toolu_02"].text == "shot1.png, 4x3"
    assert [i.call_id for i in view.items if i.kind == IMAGE] == ["toolu_03", "toolu_02", None]
    assert all(i.image.media_type == "image/png" and i.image.nbytes > 60 for i in view.items if i.kind == IMAGE)
    thinking = [i for i in view.items if i.kind == THINKING]
    assert all(i.opaque for i in thinking)
    assert thinking[1].text == "EmwKAhgBEgy3va3p"  # a quarter of the redacted blob
    assert view.calls()["toolu_04"].text == 'edit{"path":"calc.py","old":"a + b + 1","new":"a + b"}'
    assert "café" in view.items[15].text and "\ud800" in prompts(view)[1].text
    assert [(u.input, u.cache_write, u.cache_read, u.output, u.cache_write_1h) for u in view.usages] == [
        (50, 2000, 8000, 120, 500), (30, 0, 10000, 8, 0)]
    assert sum(u.prompt for u in view.usages) == 80 + 2000 + 18000
    assert view.model == "claude-sonnet-4-5"
    assert not any(r.edited for r in transcript.records)
    assert dump(transcript) == (DATA / LINES).read_bytes()
    assert roles_alternate(transcript)


def test_bodies_view_is_the_last_body():
    transcript = load(BODIES)
    view = transcript.view()
    assert kinds(view) == {TEXT: 5, SETUP: 2, THINKING: 1, TOOL_CALL: 2, TOOL_RESULT: 2, IMAGE: 1}
    assert len(view.messages()) == 9
    assert [i.setup for i in view.items if i.kind == SETUP] == ["system", "tools"]
    assert len(prompts(view)) == 3 and view.orphans() == []
    assert all(i.record is transcript.records[2] for i in view.items)
    assert [(u.input, u.cache_write, u.cache_read, u.output) for u in view.usages] == [
        (400, 1200, 0, 60), (25, 300, 1600, 90)]
    assert sum(u.cache_write_1h for u in view.usages) == 300


def test_compacted_view():
    view = load(COMPACTED).view()
    assert [(i.kind, i.prompt) for i in view.items] == [
        (SETUP, False), (SUMMARY, False), (TEXT, True), (SUMMARY, False), (TEXT, False), (TEXT, True)]
    assert view.items[0].setup == "memory" and view.items[3].opaque
    assert [(c.before, c.after, c.trigger) for c in view.compactions] == [(90000, 4000, "manual"), (None, None, None)]


# --- replace_content --------------------------------------------------------------------------

def test_replace_results_and_images():
    transcript = load(LINES)
    original = (DATA / LINES).read_bytes()
    view = transcript.view()
    adapter = transcript.adapter
    results = view.results()
    images = [i for i in view.items if i.kind == IMAGE]
    adapter.replace_content(transcript, results["toolu_01"], "[cleared]")  # string content
    adapter.replace_content(transcript, results["toolu_02"], "[cleared text]")  # text + image: image stays
    adapter.replace_content(transcript, images[0], "[image 1 cleared]")  # inside a tool_result
    adapter.replace_content(transcript, images[2], "[image 3 cleared]")  # in the user prompt
    out = dump(transcript)
    changed = {3, 9}
    for n, (a, b) in enumerate(zip(lines(original), lines(out)), 1):
        assert (a == b) == (n not in changed), n
    again = reread(transcript)
    view2 = again.view()
    res = view2.results()
    assert (res["toolu_01"].text, res["toolu_01"].is_error) == ("[cleared]", True)
    assert res["toolu_02"].text == "[cleared text]" and res["toolu_03"].text == "[image 1 cleared]"
    assert [i.call_id for i in view2.items if i.kind == IMAGE] == ["toolu_02"]
    assert view2.orphans() == [] and len(prompts(view2)) == 2
    assert prompts(view2)[1].text.startswith("Here is the new screenshot")
    # the thinking signature is untouched
    assert b'"signature":"EqQB' in lines(out)[1] and lines(out)[1] == lines(original)[1]
    for item in (res["toolu_01"], res["toolu_02"]):
        again.adapter.replace_content(again, item, item.text)
    assert dump(again) == out


def test_edited_line_keeps_its_big_integer_and_signature():
    transcript = load(LINES)
    view = transcript.view()
    reply = [i for i in view.items if i.text == "The test expects 3 but add returns 4."][0]  # line 5
    transcript.adapter.replace_content(transcript, reply, "Off by one.")
    out = lines(dump(transcript))
    assert out[4] == (b'{"role":"assistant","content":[{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4a'
                      b'DFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"},{"type":"text","text":"Off by one."},{"type":"tool_use",'
                      b'"id":"toolu_04","name":"edit","input":{"path":"calc.py","old":"a + b + 1","new":"a + b"}}],'
                      b'"x_unknown":123456789012345678901234567890}\n')
    assert reread(transcript).view().orphans() == []


def test_opaque_items_cannot_be_replaced():
    transcript = load(LINES)
    thinking = [i for i in transcript.view().items if i.kind == THINKING][0]
    with pytest.raises(LookoutError):
        transcript.adapter.replace_content(transcript, thinking, "x")


def test_replace_in_last_body_only():
    transcript = load(BODIES)
    transcript.adapter.replace_content(transcript, transcript.view().results()["toolu_b"], "[gone]")
    out = dump(transcript)
    assert [a == b for a, b in zip(lines((DATA / BODIES).read_bytes()), lines(out))] == [True, True, False, True]
    assert reread(transcript).view().results()["toolu_b"].text == "[gone]"


# --- add_parts --------------------------------------------------------------------------------

def test_add_parts():
    transcript = load(LINES)
    prompt = prompts(transcript.view())[0]
    parts = [{"type": "text", "text": "<file>calc.py</file>"},
             {"type": "image", "media_type": "image/png", "data": "iVBORw0KGgo="}]
    transcript.adapter.add_parts(transcript, prompt, parts)
    out = dump(transcript)
    assert lines(out)[0] == (
        b'{"role":"user","content":[{"type":"text","text":"Look at the two screenshots and fix the failing test."},'
        b'{"type":"text","text":"<file>calc.py</file>"},'
        b'{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]}\n')
    assert lines(out)[1:] == lines((DATA / LINES).read_bytes())[1:]
    again = reread(transcript)
    view = again.view()
    assert [i.kind for i in view.items if i.message == 0] == [TEXT, TEXT, IMAGE]
    again.adapter.add_parts(again, prompts(view)[0], parts)
    assert dump(again) == out


# --- set_setup --------------------------------------------------------------------------------

def test_set_setup_lines_prepends_to_first_user_message():
    transcript = load(LINES)
    original = (DATA / LINES).read_bytes()
    transcript.adapter.set_setup(transcript, "memory", "- prefers pytest")
    out = dump(transcript)
    assert lines(out)[0] == (b'{"role":"user","content":[{"type":"text","text":"[lookout:memory]\\n- prefers pytest"},'
                             b'{"type":"text","text":"Look at the two screenshots and fix the failing test."}]}\n')
    assert lines(out)[1:] == lines(original)[1:]
    again = reread(transcript)
    view = again.view()
    assert [(i.kind, i.setup, i.prompt) for i in view.items[:2]] == [(SETUP, "memory", False), (TEXT, None, True)]
    assert roles_alternate(again)
    again.adapter.set_setup(again, "memory", "- prefers pytest")
    assert dump(again) == out
    again.adapter.set_setup(again, "rules", "No network.")
    again.adapter.set_setup(again, "memory", "- prefers unittest")
    view = reread(again).view()
    assert [(i.setup, i.text) for i in view.items[:2]] == [
        ("memory", "[lookout:memory]\n- prefers unittest"), ("rules", "[lookout:rules]\nNo network.")]
    again.adapter.set_setup(again, "memory", None)
    again.adapter.set_setup(again, "rules", None)
    assert visible(reread(again).view()) == visible(load(LINES).view())


def test_set_setup_before_an_assistant_first_message():
    data = b'{"role":"assistant","content":"Hello, how can I help?"}\n{"role":"user","content":"Fix it"}\n'
    transcript = parse(data, "anthropic")
    transcript.adapter.set_setup(transcript, "memory", "- x")
    out = dump(transcript)
    assert lines(out) == [b'{"role":"user","content":[{"type":"text","text":"[lookout:memory]\\n- x"}]}\n', *lines(data)]
    again = reread(transcript)
    again.adapter.set_setup(again, "memory", None)
    assert dump(again) == data


def test_setup_message_of_its_own_survives_compaction(tmp_path):
    data = (b'{"role":"assistant","content":"Hello, how can I help?"}\n{"role":"user","content":"Fix it"}\n'
            b'{"role":"assistant","content":"Fixed."}\n{"role":"user","content":"Test it"}\n')
    transcript = parse(data, "anthropic")
    transcript.adapter.set_setup(transcript, "memory", "- x")
    transcript = reread(transcript)
    assert [i.kind for i in transcript.view().items][:2] == [SETUP, TEXT]
    _compact(transcript, "Fixed the bug.", prompts(transcript.view())[-1], Saver(tmp_path))
    again = reread(transcript)
    assert [(i.kind, i.text.split("\n")[0]) for i in again.view().items] == [
        (SETUP, "[lookout:memory]"), (SUMMARY, "Summary of the earlier conversation (written by lookout compact):"),
        (TEXT, "Test it")]
    assert roles_alternate(again) and len(again.records) == 1


def test_set_setup_in_body_system():
    transcript = load(BODIES)
    transcript.adapter.set_setup(transcript, "memory", "- likes tests")
    out = dump(transcript)
    body = lines(out)[2]
    assert body.startswith(b'{"model":"claude-sonnet-4-5","max_tokens":4096,"system":[{"type":"text","text":'
                           b'"You are a coding agent.","cache_control":{"type":"ephemeral"}},'
                           b'{"type":"text","text":"[lookout:memory]\\n- likes tests"}],"tools":')
    view = reread(transcript).view()
    assert [i.setup for i in view.items if i.kind == SETUP] == ["system", "memory", "tools"]
    again = reread(transcript)
    again.adapter.set_setup(again, "memory", "- likes tests")
    assert dump(again) == out
    again.adapter.set_setup(again, "memory", None)
    assert visible(reread(again).view()) == visible(load(BODIES).view())


# --- compact ----------------------------------------------------------------------------------

def _compact(transcript, summary, keep_from, saver):
    return transcript.adapter.compact(transcript, summary, keep_from,
                                      {"trigger": "auto", "pre_tokens": 21000, "post_tokens": 900,
                                       "save": saver})


def test_compact_lines_merges_into_the_kept_prompt(tmp_path):
    transcript = load(LINES)
    original = (DATA / LINES).read_bytes()
    transcript.adapter.set_setup(transcript, "memory", "- prefers pytest")
    transcript = reread(transcript)
    view = transcript.view()
    keep = prompts(view)[1]
    tail = visible(view, view.items.index(keep))
    before = dump(transcript)
    saver = Saver(tmp_path)
    written = _compact(transcript, "Goal: fix calc.py. Done: the fix.", keep, saver)
    out = dump(transcript)
    assert [r.lineno for r in saver.calls[0]] == list(range(1, 10))  # the lines between them too
    assert [r.lineno for r in written] == [9]
    got = lines(out)
    # the non-JSON and unknown lines pass through, right after the line that restores them
    assert got[1] == lines(original)[3] and got[2] == lines(original)[6]
    assert got[3] == lines(original)[9]  # the last response, untouched
    again = reread(transcript)
    view2 = again.view()
    assert [(i.kind, i.setup) for i in view2.items[:2]] == [(SETUP, "memory"), (SUMMARY, None)]
    assert view2.items[1].text.startswith("Summary of the earlier conversation (written by lookout compact):\n\n"
                                          "Goal: fix calc.py.")
    assert "[lookout compaction, auto: 21,000 → 900 tokens] lookout-restore:" in view2.items[1].text
    assert visible(view2, 2) == tail
    assert view2.orphans() == [] and roles_alternate(again)
    assert prompts(view2)[0].text.startswith("Here is the new screenshot")
    # restore puts every line back in its place
    restored = saver.restore(out)
    assert restored == before
    assert visible(parse(restored, "anthropic").view()) == visible(view)
    # the same compaction again changes nothing
    assert _compact(again, "Goal: fix calc.py. Done: the fix.", prompts(view2)[0], Saver(tmp_path)) == []
    assert dump(again) == out
    # a new summary for the same tail replaces the old one in place
    _compact(again, "Goal: fix calc.py (updated).", prompts(again.view())[0], Saver(tmp_path))
    view3 = reread(again).view()
    assert [i.kind for i in view3.items].count(SUMMARY) == 1
    assert "(updated)" in view3.items[1].text and visible(view3, 2) == tail


def test_compact_bodies_and_restore(tmp_path):
    transcript = load(BODIES)
    original = (DATA / BODIES).read_bytes()
    view = transcript.view()
    keep = prompts(view)[-1]
    tail = visible(view, view.items.index(keep))
    saver = Saver(tmp_path)
    _compact(transcript, "Ran the tests, found add() off by one.", keep, saver)
    assert [r.lineno for r in saver.calls[0]] == [3]
    out = dump(transcript)
    assert [a == b for a, b in zip(lines(original), lines(out))] == [True, True, False, True]
    again = reread(transcript)
    view2 = again.view()
    assert [i.kind for i in view2.items] == [SETUP, SETUP, SUMMARY, TEXT]
    assert visible(view2, 3) == tail and roles_alternate(again)
    assert lines(out)[2].endswith(b'"},{"type":"text","text":"Fix it, then run the tests again."}]}],'
                                  b'"metadata":{"user_id":"u-123"}}\n')
    assert saver.restore(out) == original


def test_truncate_keeps_pairs(tmp_path):
    transcript = load(BODIES)
    view = transcript.view()
    keep = prompts(view)[1]
    tail = visible(view, view.items.index(keep))
    _compact(transcript, None, keep, Saver(tmp_path))
    again = reread(transcript)
    view2 = again.view()
    assert [i.kind for i in view2.items[:3]] == [SETUP, SETUP, NOTICE]
    assert view2.items[2].text.startswith("[lookout dropped 4 earlier messages to fit the context window]")
    assert visible(view2, 3) == tail and view2.orphans() == [] and roles_alternate(again)
    out = dump(again)
    assert _compact(again, None, prompts(view2)[0], Saver(tmp_path)) == []
    assert dump(again) == out


def test_compact_keep_nothing_lines(tmp_path):
    transcript = load(LINES)
    _compact(transcript, "Everything so far.", None, Saver(tmp_path))
    again = reread(transcript)
    view = again.view()
    assert [i.kind for i in view.items] == [SUMMARY]
    assert view.orphans() == [] and roles_alternate(again)
    assert lines(dump(again))[1:] == [b"this line is not JSON\n", b'{"type":"lookout-test-unknown","payload":{"n":1}}\n']


@pytest.mark.parametrize("name", [LINES, BODIES, COMPACTED])
def test_compact_at_every_prompt(name, tmp_path):
    check_compact_everywhere(name, tmp_path)
