"""The ``openai`` adapter (Chat Completions messages) on hand-made fixtures in both layouts.

tests/data/openai/lines.jsonl (one message per line) holds, counted by hand:
 line 1 developer prompt                     → SETUP system                       message 0
 line 2 user prompt                          → TEXT (prompt, turn 1)              message 1
 line 3 assistant, two parallel tool_calls   → 2 TOOL_CALL (call_a, call_b)       message 2
 line 4 tool result for call_b (out of order)→ TOOL_RESULT                        message 3
 line 5 tool result for call_a (part list)   → TOOL_RESULT                        message 4
 line 6 not JSON; line 7 an unknown record   → nothing
 line 8 assistant text, unknown field, 30-digit integer → TEXT                    message 5
 line 9 user text (\\u00e9, lone surrogate) + data-URL PNG → TEXT (prompt, turn 2) + IMAGE  message 6
 line 10 assistant refusal part, CRLF        → TEXT                               message 7
 line 11 {"messages":[user, assistant call_c, tool call_c]} → TEXT (prompt, turn 3),
         TOOL_CALL, TOOL_RESULT                                                   messages 8-10
 line 12 chat.completion response            → TEXT + usage (1200 prompt, 1024 cached, 20 out)  message 11
 line 13 user text + http image + data-URL PNG → TEXT (prompt, turn 4) + 2 IMAGE  message 12
 line 14 response, no final newline          → TEXT + usage (1500 prompt, 1200 cached, 5 out)   message 13
Totals: 14 messages, 4 turns, SETUP 1, TEXT 8, TOOL_CALL 3, TOOL_RESULT 3, IMAGE 3 (18 items);
usage input 176 + 300 = 476, cache read 1024 + 1200 = 2224, output 25.

tests/data/openai/bodies.jsonl (one request body per line; the last body counts):
 tools (2 functions) → SETUP tools; system → SETUP; user; assistant with call_1 + call_2;
 tool call_2; tool call_1; user text + PNG; assistant text; user text.
Totals: 9 messages, 3 turns, SETUP 2, TEXT 4, TOOL_CALL 2, TOOL_RESULT 2, IMAGE 1 (11 items);
usage input 500 + (900 − 512 − 100) = 788, cache write 100, cache read 512, output 52.
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
    prompts,
    reread,
    visible,
)

from lookout_cli.core.jsonl import read_records
from lookout_cli.formats import detect, load_adapter
from lookout_cli.formats.view import IMAGE, SETUP, SUMMARY, TEXT, TOOL_CALL, TOOL_RESULT

LINES = "openai/lines.jsonl"
BODIES = "openai/bodies.jsonl"
COMPACTED = "openai/compacted.jsonl"


# --- detection ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", [LINES, BODIES, COMPACTED])
def test_detected_as_openai(name):
    assert load(name).format == "openai"


def test_sniff_scores():
    sniff = load_adapter("openai").sniff
    assert sniff({"role": "user", "content": "hi"}) == 1  # plain shapes: openai wins ties
    assert sniff({"role": "tool", "tool_call_id": "c", "content": "x"}) >= 5
    assert sniff({"role": "assistant", "tool_calls": [{"id": "c"}]}) >= 5
    assert sniff({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}) >= 5
    assert sniff({"choices": []}) >= 5
    assert sniff({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]}) == 0
    assert sniff({"type": "user", "message": {"role": "user", "content": "hi"}}) == 0  # Claude Code
    assert sniff({"system": "s", "messages": [{"role": "user", "content": "hi"}]}) == 0


@pytest.mark.parametrize("path", real_transcripts(), ids=lambda p: p.name)
def test_other_formats_score_nothing(path):
    """No real transcript of another agent looks like an OpenAI message list."""
    sniff = load_adapter("openai").sniff
    records = list(read_records(path.open("rb")))
    assert sum(sniff(r.data) for r in records if r.data is not None) == 0
    assert detect(records) is None or detect(records).name != "openai"


# --- views ----------------------------------------------------------------------------------

def test_lines_view_counts():
    transcript = load(LINES)
    view = transcript.view()
    assert kinds(view) == {TEXT: 8, TOOL_CALL: 3, TOOL_RESULT: 3, IMAGE: 3, SETUP: 1}
    assert len(view.messages()) == 14
    assert [i.turn for i in prompts(view)] == [1, 2, 3, 4]
    assert max(i.turn for i in view.items) == 4
    assert view.orphans() == []
    results = view.results()
    assert results["call_a"].tool == "read_file" and results["call_b"].text.startswith("# Demo")
    assert results["call_c"].tool == "fetch"
    assert view.calls()["call_a"].text == 'read_file{"path":"setup.py"}'
    assert view.items[0].role == "developer" and view.items[0].setup == "system"
    picture = [i for i in view.items if i.kind == IMAGE]
    assert [(i.image.media_type, i.image.url is None) for i in picture] == [
        ("image/png", True), (None, False), ("image/png", True)]
    assert picture[0].image.nbytes > 60 and picture[1].image.nbytes == 0
    assert "café \ud800" in prompts(view)[1].text
    assert [(u.input, u.cache_read, u.output) for u in view.usages] == [(176, 1024, 20), (300, 1200, 5)]
    assert sum(u.input for u in view.usages) == 476 and sum(u.output for u in view.usages) == 25
    assert view.usages[-1].timestamp == "2026-01-01T00:01:00Z" and view.model == "gpt-4.1"
    assert view.compactions == []
    assert not any(r.edited for r in transcript.records)  # reading edits nothing
    assert dump(transcript) == (DATA / LINES).read_bytes()


def test_bodies_view_is_the_last_body():
    transcript = load(BODIES)
    view = transcript.view()
    assert kinds(view) == {TEXT: 4, SETUP: 2, TOOL_CALL: 2, TOOL_RESULT: 2, IMAGE: 1}
    assert len(view.messages()) == 9
    assert [i.setup for i in view.items if i.kind == SETUP] == ["tools", "system"]
    assert '"name":"ls"' in view.items[0].text
    assert len(prompts(view)) == 3
    last_body = transcript.records[2]
    assert all(i.record is last_body for i in view.items)
    assert view.orphans() == []
    assert [(u.input, u.cache_write, u.cache_read, u.output) for u in view.usages] == [
        (500, 0, 0, 12), (288, 100, 512, 40)]


def test_compacted_view():
    view = load(COMPACTED).view()
    assert [i.kind for i in view.items] == [SETUP, SETUP, SUMMARY, TEXT, TEXT]
    assert view.items[1].setup == "memory"
    [entry] = view.compactions
    assert (entry.before, entry.after, entry.trigger) == (150000, 12000, "auto")


# --- replace_content --------------------------------------------------------------------------

def test_replace_tool_results_and_images_lines():
    transcript = load(LINES)
    original = (DATA / LINES).read_bytes()
    view = transcript.view()
    adapter = transcript.adapter
    results = view.results()
    picture = [i for i in view.items if i.kind == IMAGE][0]
    adapter.replace_content(transcript, results["call_b"], "[cleared b]")  # string content
    adapter.replace_content(transcript, results["call_a"], "[cleared a]")  # part list
    adapter.replace_content(transcript, results["call_c"], "[cleared c]")  # inside a messages line
    adapter.replace_content(transcript, picture, "[image cleared]")
    out = dump(transcript)
    again = reread(transcript)
    view2 = again.view()
    assert view2.results()["call_b"].text == "[cleared b]"
    assert view2.results()["call_a"].text == "[cleared a]"
    assert view2.results()["call_c"].text == "[cleared c]"
    assert view2.orphans() == []
    assert kinds(view2)[IMAGE] == 2 and "[image cleared]" in [i.text for i in view2.items]
    assert [i.turn for i in prompts(view2)] == [1, 2, 3, 4]
    assert prompts(view2)[1].text.startswith("What is in this picture?")
    changed = {4, 5, 9, 11}
    for n, (a, b) in enumerate(zip(lines(original), lines(out)), 1):
        assert (a == b) == (n not in changed), n
    record = lines(out)[3]
    assert b'"tool_call_id":"call_b"' in record and b'"content":"[cleared b]"' in record
    # once more with the same text: nothing changes
    view2 = again.view()
    for item in (view2.results()["call_b"], view2.results()["call_a"]):
        again.adapter.replace_content(again, item, item.text)
    assert not any(r.edited for r in again.records)
    assert dump(again) == out


def test_replace_in_last_body_only():
    transcript = load(BODIES)
    original = (DATA / BODIES).read_bytes()
    view = transcript.view()
    transcript.adapter.replace_content(transcript, view.results()["call_1"], "[gone]")
    out = dump(transcript)
    assert [a == b for a, b in zip(lines(original), lines(out))] == [True, True, False, True, True]
    assert reread(transcript).view().results()["call_1"].text == "[gone]"


def test_edited_lines_keep_big_integers_and_lone_surrogates():
    transcript = load(LINES)
    view = transcript.view()
    reply = [i for i in view.items if i.text == "It is a demo package."][0]  # line 8
    transcript.adapter.replace_content(transcript, reply, "It is a demo.")
    transcript.adapter.add_parts(transcript, prompts(view)[1], [{"type": "text", "text": "more \udc00"}])  # line 9
    out = lines(dump(transcript))
    assert out[7] == (b'{"role":"assistant","content":"It is a demo.","x_unknown_field":'
                      b'{"n":123456789012345678901234567890}}\n')
    assert b' \\ud800"' in out[8] and b'"more \\udc00"' in out[8]  # lone surrogates stay escaped
    view2 = reread(transcript).view()
    assert "café \ud800" in prompts(view2)[1].text and "more \udc00" in [i.text for i in view2.items]


def test_thinking_and_calls_cannot_be_replaced():
    transcript = load(LINES)
    call = transcript.view().calls()["call_a"]
    with pytest.raises(Exception):
        transcript.adapter.replace_content(transcript, call, "x")


# --- add_parts --------------------------------------------------------------------------------

def test_add_parts_to_string_prompt():
    transcript = load(LINES)
    original = (DATA / LINES).read_bytes()
    prompt = prompts(transcript.view())[0]
    parts = [{"type": "text", "text": "<file path=\"setup.py\">…</file>"},
             {"type": "image", "media_type": "image/png", "data": "iVBORw0KGgo="}]
    transcript.adapter.add_parts(transcript, prompt, parts)
    out = dump(transcript)
    assert lines(out)[1] == (
        b'{"role":"user","content":[{"type":"text","text":"Read setup.py and README.md, then tell me what '
        b'the project is."},{"type":"text","text":"<file path=\\"setup.py\\">\xe2\x80\xa6</file>"},'
        b'{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]}\n')
    assert [a == b for a, b in zip(lines(original), lines(out))].count(False) == 1
    again = reread(transcript)
    view = again.view()
    message = [i for i in view.items if i.message == prompt.message]
    assert [i.kind for i in message] == [TEXT, TEXT, IMAGE]
    assert [i.prompt for i in message] == [True, False, False]
    assert message[2].image.media_type == "image/png"
    again.adapter.add_parts(again, prompts(view)[0], parts)  # the same parts again: no change
    assert dump(again) == out


def test_add_parts_in_body():
    transcript = load(BODIES)
    prompt = prompts(transcript.view())[-1]
    transcript.adapter.add_parts(transcript, prompt, [{"type": "text", "text": "@notes.md: hello"}])
    view = reread(transcript).view()
    assert [i.text for i in view.items if i.message == prompt.message] == [
        "Thanks. Now write the summary.", "@notes.md: hello"]


# --- set_setup --------------------------------------------------------------------------------

def test_set_setup_lines_uses_developer_and_is_idempotent():
    transcript = load(LINES)
    original = (DATA / LINES).read_bytes()
    adapter = transcript.adapter
    adapter.set_setup(transcript, "memory", "- likes tabs")
    out = dump(transcript)
    assert lines(out)[0] == lines(original)[0]
    assert lines(out)[1] == b'{"role":"developer","content":"[lookout:memory]\\n- likes tabs"}\n'
    assert lines(out)[2:] == lines(original)[1:]
    view = reread(transcript).view()
    assert [(i.kind, i.setup) for i in view.items[:3]] == [(SETUP, "system"), (SETUP, "memory"), (TEXT, None)]
    again = reread(transcript)
    again.adapter.set_setup(again, "memory", "- likes tabs")
    assert dump(again) == out
    again.adapter.set_setup(again, "rules", "Use black.")
    again.adapter.set_setup(again, "memory", "- likes spaces")
    out2 = dump(again)
    assert lines(out2)[1] == b'{"role":"developer","content":"[lookout:memory]\\n- likes spaces"}\n'
    assert lines(out2)[2] == b'{"role":"developer","content":"[lookout:rules]\\nUse black."}\n'
    third = reread(again)
    third.adapter.set_setup(third, "memory", None)
    third.adapter.set_setup(third, "rules", None)
    third.adapter.set_setup(third, "rules", None)
    assert dump(third) == original


def test_set_setup_in_last_body():
    transcript = load(BODIES)
    transcript.adapter.set_setup(transcript, "memory", "- short answers")
    out = dump(transcript)
    assert lines(out)[:2] == lines((DATA / BODIES).read_bytes())[:2]
    view = reread(transcript).view()
    assert [(i.role, i.setup) for i in view.items if i.kind == SETUP] == [
        ("system", "tools"), ("system", "system"), ("system", "memory")]
    assert view.items[2].path == ("messages", 1, "content")


# --- compact ----------------------------------------------------------------------------------

def _compact(transcript, summary, keep_from, saver, **meta):
    return transcript.adapter.compact(transcript, summary, keep_from,
                                      {"trigger": "manual", "pre_tokens": 9000, "post_tokens": 800,
                                       "save": saver, **meta})


def test_compact_lines(tmp_path):
    transcript = load(LINES)
    original = (DATA / LINES).read_bytes()
    view = transcript.view()
    keep = prompts(view)[-1]  # line 13
    tail = visible(view, view.items.index(keep))
    saver = Saver(tmp_path)
    written = _compact(transcript, "Goal: describe the project.", keep, saver)
    out = dump(transcript)
    # the dropped lines were saved, in order, before anything changed
    [saved] = saver.calls
    assert [r.lineno for r in saved] == list(range(2, 13))  # the lines between them too
    assert len(written) == 1 and written[0].lineno == 0
    got = lines(out)
    assert got[0] == lines(original)[0]  # the developer prompt stays
    assert got[1].startswith(b'{"role":"user","content":"Summary of the earlier conversation (written by lookout compact):')
    assert got[2:4] == lines(original)[5:7]  # the non-JSON line and the unknown record pass through
    assert got[4:] == lines(original)[12:]  # the kept tail, byte for byte
    view2 = reread(transcript).view()
    assert [i.kind for i in view2.items[:2]] == [SETUP, SUMMARY]
    summary = view2.items[1]
    assert "Goal: describe the project." in summary.text and saver.calls and "lookout-restore:" in summary.text
    assert visible(view2, 2) == tail
    assert view2.orphans() == []
    [entry] = view2.compactions
    assert (entry.before, entry.after, entry.trigger) == (9000, 800, "manual")
    # restore puts the dropped lines back
    assert saver.restore(out) == original
    # the same compaction again changes nothing
    again = reread(transcript)
    keep2 = prompts(again.view())[0]
    assert _compact(again, "Goal: describe the project.", keep2, Saver(tmp_path)) == []
    assert dump(again) == out


def test_compact_into_a_messages_line(tmp_path):
    transcript = load(LINES)
    view = transcript.view()
    keep = prompts(view)[2]  # the first message of the {"messages":[…]} line
    tail = visible(view, view.items.index(keep))
    saver = Saver(tmp_path)
    _compact(transcript, "Earlier: read two files, looked at a picture.", keep, saver)
    assert [r.lineno for r in saver.calls[0]] == list(range(2, 12))
    view2 = reread(transcript).view()
    assert [i.kind for i in view2.items[:2]] == [SETUP, SUMMARY]
    assert view2.items[1].path == ("messages", 0, "content")
    assert visible(view2, 2) == tail and view2.orphans() == []


def test_truncate_bodies(tmp_path):
    transcript = load(BODIES)
    original = (DATA / BODIES).read_bytes()
    view = transcript.view()
    keep = prompts(view)[1]  # the image prompt
    tail = visible(view, view.items.index(keep))
    saver = Saver(tmp_path)
    _compact(transcript, None, keep, saver)
    assert [r.lineno for r in saver.calls[0]] == [3]
    out = dump(transcript)
    assert [a == b for a, b in zip(lines(original), lines(out))] == [True, True, False, True, True]
    view2 = reread(transcript).view()
    assert [i.kind for i in view2.items[:3]] == [SETUP, SETUP, "notice"]
    assert view2.items[2].text.startswith("[lookout dropped 4 earlier messages to fit the context window]")
    assert visible(view2, 3) == tail and view2.orphans() == []
    assert saver.restore(out) == original
    again = reread(transcript)
    assert _compact(again, None, prompts(again.view())[0], Saver(tmp_path)) == []
    assert dump(again) == out


def test_compact_keep_nothing(tmp_path):
    transcript = load(BODIES)
    _compact(transcript, "All done so far.", None, Saver(tmp_path))
    view = reread(transcript).view()
    assert [i.kind for i in view.items] == [SETUP, SETUP, SUMMARY]
    assert view.orphans() == []


def test_lookout_note_keeps_its_own_title(tmp_path):
    from lookout_cli.formats.view import NOTE_TITLE

    transcript = load(BODIES)
    note = NOTE_TITLE + "\n\nGoal: list src."
    _compact(transcript, note, prompts(transcript.view())[-1], Saver(tmp_path))
    view = reread(transcript).view()
    [summary] = [i for i in view.items if i.kind == SUMMARY]
    assert summary.text.startswith(note + "\n\n[lookout compaction, manual: 9,000 → 800 tokens] lookout-restore:")
    assert summary.text.count("Summary of the earlier conversation") == 1


@pytest.mark.parametrize("name", [LINES, BODIES, COMPACTED])
def test_compact_at_every_prompt(name, tmp_path):
    check_compact_everywhere(name, tmp_path)
