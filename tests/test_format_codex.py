"""The codex adapter: detection, the model-visible view, and every edit written back as Codex
writes it (re-read, untouched lines byte-identical, repeating an edit changes nothing).

Expected numbers were counted by hand from the fixtures (see tests/data/codex/README.md).
"""

from __future__ import annotations

import base64
import copy
import json
import re

import pytest
from codex_helpers import assert_kept, crlf_variant, dump, kinds, load, read_bytes, reread

from lookout_cli.core.errors import LookoutError
from lookout_cli.core.jsonl import Record, loads_exact
from lookout_cli.formats import Transcript, detect
from lookout_cli.formats.codex import SUMMARY_PREFIX, TRUNCATION_NOTICE, Adapter
from lookout_cli.formats.view import IMAGE, NOTICE, SETUP, SUMMARY, TEXT, THINKING, TOOL_CALL, TOOL_RESULT

BASIC = "codex/basic.jsonl"
COMPACTED = "codex/compacted.jsonl"
REAL = "codex/rollout-2025-11-17T15-30-28-019a93b9-f380-7600-98ff-940e6b99603c.jsonl"
SCHEMA = "codex/agentsessions-codex-small-schema-coverage.jsonl"
RATE = "codex/agentsessions-codex_053_rate_limit.jsonl"
PNG1 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
TS_RE = re.compile(r"\A\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\Z")


def codex(name_or_bytes) -> Transcript:
    data = read_bytes(name_or_bytes) if isinstance(name_or_bytes, str) else name_or_bytes
    return load(data, "codex")


def by_line(view, lineno, kind=None):
    found = [i for i in view.items if i.record.lineno == lineno and (kind is None or i.kind == kind)]
    assert found, f"no item on line {lineno}"
    return found[0]


def payload_at(record: Record, path: tuple):
    obj = record.obj if record.edited else loads_exact(record.body)
    for key in path:
        obj = obj[key]
    return obj


# --- detection ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [BASIC, COMPACTED, REAL, SCHEMA, RATE])
def test_detection_picks_codex(name):
    assert codex(name).format == "codex"


def test_sniff_rejects_other_formats():
    claude = {
        "type": "user",
        "uuid": "u",
        "parentUuid": None,
        "sessionId": "s",
        "timestamp": "t",
        "message": {"role": "user", "content": "hi"},
    }
    gemini = {"id": "g1", "timestamp": "t", "type": "gemini", "content": "hi"}
    openai = {"role": "user", "content": "hi"}
    for obj in (claude, gemini, openai, {"sessionId": "s", "projectHash": "p"}, [1], "x"):
        assert Adapter.sniff(obj) == 0
    assert Adapter.sniff({"timestamp": "t", "type": "world_state", "payload": {}}) > 0


# --- the view -------------------------------------------------------------------------------


def test_basic_view_hand_counts():
    view = codex(BASIC).view()
    assert kinds(view) == {SETUP: 4, TEXT: 4, IMAGE: 2, THINKING: 1, TOOL_CALL: 5, TOOL_RESULT: 4}
    assert len(view.items) == 20
    assert len(view.messages()) == 15
    assert max(i.turn for i in view.items) == 2
    assert [i.record.lineno for i in view.items if i.prompt] == [5, 27]
    assert len(view.calls()) == 4 and len(view.results()) == 4  # the web search has no call id
    assert view.orphans() == []
    assert (view.session_id, view.cwd, view.model) == ("sess-basic", "/w/app", "gpt-5.1-codex-max")
    assert view.last_timestamp == "2025-11-20T10:00:12.000Z"
    assert [(i.setup, i.record.lineno) for i in view.items if i.kind == SETUP] == [
        ("system", 1),
        ("system", 2),
        ("rules", 3),
        ("environment", 4),
    ]
    # the event_msg duplicates (user_message, agent_message, agent_reasoning) are no items
    assert not {6, 9, 26, 28} & {i.record.lineno for i in view.items}


def test_basic_view_parts():
    view = codex(BASIC).view()
    thinking = by_line(view, 10)
    assert thinking.kind == THINKING and thinking.opaque
    assert thinking.text.startswith("**Looking at tests**")
    a, b = view.calls()["call_a"], view.calls()["call_b"]
    assert a.message == b.message == thinking.message  # one API response
    assert a.tool == "shell" and a.text == 'shell{"command":["bash","-lc","pytest -q"]}'
    ra, rb = view.results()["call_a"], view.results()["call_b"]
    assert rb.record.lineno == 14 and ra.record.lineno == 15  # results out of order
    assert ra.text == "F\n1 failed" and ra.is_error and ra.tool == "shell"
    assert rb.text == "def add(a, b):\n    return a - b\n" and not rb.is_error
    image = by_line(view, 5, IMAGE)
    assert image.image.media_type == "image/png" and image.image.data == PNG1
    assert image.image.nbytes == len(base64.b64decode(PNG1))
    assert image.message == by_line(view, 5, TEXT).message and image.turn == 1
    result_c = view.results()["call_c"]
    assert result_c.text == "Success. Updated app.py" and result_c.tool == "apply_patch"
    tool_image = by_line(view, 22, IMAGE)
    assert tool_image.call_id == "call_c" and tool_image.role == "tool"
    web = by_line(view, 29)
    assert web.kind == TOOL_CALL and web.call_id is None and web.tool == "web_search"
    assert by_line(view, 27).text == "Now run the linter caf\u00e9 \u2603 \U0001f600"
    assert by_line(view, 32).text == "Lint is clean \ud800."


def test_basic_usage_deduplicated():
    view = codex(BASIC).view()
    u = view.usages
    assert [x.record.lineno for x in u] == [8, 20, 24, 33]  # 13 repeats 8; 23 has info null
    assert [(x.input, x.cache_read, x.cache_write, x.output) for x in u] == [
        (1000, 0, 0, 50),
        (200, 1000, 0, 30),
        (200, 1000, 100, 40),
        (300, 1200, 0, 20),
    ]
    assert sum(x.input for x in u) == 1700 and sum(x.cache_read for x in u) == 3200
    assert sum(x.output for x in u) == 140
    assert [x.model for x in u] == ["gpt-5.1-codex"] + ["gpt-5.1-codex-max"] * 3
    assert all(x.context_window == 272000 for x in u)
    assert u[2].prompt == 1300  # input_tokens included the cached and written parts
    assert view.compactions == []


def test_crlf_and_no_final_newline_give_the_same_view():
    plain = codex(BASIC).view()
    variant = codex(crlf_variant(read_bytes(BASIC))).view()
    assert [(i.kind, i.text, i.turn, i.message) for i in plain.items] == [
        (i.kind, i.text, i.turn, i.message) for i in variant.items
    ]
    assert len(variant.usages) == 4


def test_untouched_transcript_round_trips_byte_for_byte():
    for name in (BASIC, COMPACTED, REAL, SCHEMA, RATE):
        data = read_bytes(name)
        t = codex(data)
        t.view()
        assert dump(t) == data


def test_compacted_view_starts_at_the_latest_compaction():
    view = codex(COMPACTED).view()
    assert kinds(view) == {SETUP: 2, TEXT: 2, SUMMARY: 1, THINKING: 1, TOOL_CALL: 1, TOOL_RESULT: 1}
    assert [i.record.lineno for i in view.items] == [1, 17, 17, 17, 19, 20, 21, 23]
    assert len(view.messages()) == 7 and max(i.turn for i in view.items) == 2
    summary = by_line(view, 17, SUMMARY)
    assert summary.opaque and summary.path == ("payload", "replacement_history", 2)
    assert view.orphans() == []
    assert [(c.record.lineno, c.before, c.after) for c in view.compactions] == [(11, 9200, 3000), (17, 3050, 4000)]
    assert [u.record.lineno for u in view.usages] == [5, 10, 14, 22]
    assert view.model == "gpt-5.2-codex" and view.session_id == "sess-compact"


def test_local_compaction_rebuilds_user_messages_and_summary():
    data = b"".join(read_bytes(COMPACTED).splitlines(keepends=True)[:16])  # up to "Third task"
    view = codex(data).view()
    assert kinds(view) == {SETUP: 2, TEXT: 4, SUMMARY: 1}
    assert [(i.record.lineno, i.kind) for i in view.items] == [
        (1, SETUP),
        (3, SETUP),
        (4, TEXT),
        (9, TEXT),
        (11, SUMMARY),
        (15, TEXT),
        (16, TEXT),
    ]
    assert [i.record.lineno for i in view.items if i.prompt] == [4, 9, 16]
    summary = by_line(view, 11)
    assert summary.extra["summary"] == "User asked for logging (done) and tests."
    assert view.calls() == {} and view.orphans() == []


def test_thread_rollback_drops_the_newest_user_turns():
    rollback = (
        b'{"timestamp":"2025-11-20T10:00:13.000Z","type":"event_msg",'
        b'"payload":{"type":"thread_rolled_back","num_turns":1}}\n'
    )
    view = codex(read_bytes(BASIC) + rollback).view()
    assert max(i.turn for i in view.items) == 1 and max(i.record.lineno for i in view.items) == 25
    assert view.orphans() == []
    view = codex(read_bytes(BASIC) + rollback.replace(b'"num_turns":1', b'"num_turns":5')).view()
    assert [i.kind for i in view.items] == [SETUP] * 4


# --- replace_content --------------------------------------------------------------------------


def _replace(t: Transcript, pick, text: str) -> bytes:
    item = pick(t.view())
    t.adapter.replace_content(t, item, text)
    return dump(t)


def test_a_lean_read_blanks_the_event_copy_of_a_large_image_too(tmp_path):
    """A lean rollout knows an event's images by their digest (a data URL holds the image): a
    real screenshot-sized PNG is cleared from the message and from its user_message copy."""
    import io as _io
    import random

    from PIL import Image

    from lookout_cli.options import Run

    noise = random.Random(3)
    image = Image.frombytes("RGB", (48, 48), bytes(noise.getrandbits(8) for _ in range(48 * 48 * 3)))
    buffer = _io.BytesIO()
    image.save(buffer, "PNG")
    png = base64.b64encode(buffer.getvalue()).decode()
    assert len(png) > 1000
    path = tmp_path / "rollout.jsonl"
    path.write_bytes(read_bytes(BASIC).replace(PNG1.encode(), png.encode()))
    t = Run("clear-images", file=str(path), isolated=True).load(lean=True)
    out = _replace(t, lambda v: by_line(v, 5, IMAGE), "[image cleared]")
    again = reread(t)
    event = [r for r in again.records if r.lineno == 6][0]
    assert event.data["payload"]["images"] == [""]  # the UI copy is blanked
    assert png not in out.decode("utf-8", "surrogatepass")


def test_replace_wrapped_shell_output_keeps_the_wrapper():
    data = read_bytes(BASIC)
    t = codex(data)
    out = _replace(t, lambda v: v.results()["call_a"], "[cleared]")
    assert_kept(data, out, {15})
    again = reread(t)
    item = again.view().results()["call_a"]
    assert item.text == "[cleared]" and item.is_error  # exit code kept in the metadata
    wrapper = json.loads(payload_at(item.record, ("payload",))["output"])
    assert wrapper == {"output": "[cleared]", "metadata": {"exit_code": 1, "duration_seconds": 0.5}}
    assert again.view().orphans() == []
    assert _replace(again, lambda v: v.results()["call_a"], "[cleared]") == out  # idempotent
    assert not any(r.edited for r in again.records)


def test_replace_string_and_list_outputs():
    data = read_bytes(BASIC)
    t = codex(data)
    _replace(t, lambda v: v.results()["call_b"], "[b cleared]")
    out = _replace(t, lambda v: v.results()["call_c"], "[c cleared]")
    assert_kept(data, out, {14, 22})
    view = reread(t).view()
    assert view.results()["call_b"].text == "[b cleared]"
    assert view.results()["call_c"].text == "[c cleared]"
    output = payload_at(view.results()["call_c"].record, ("payload", "output"))
    assert output[0] == {"type": "input_text", "text": "[c cleared]"} and output[1]["type"] == "input_image"
    assert kinds(view)[IMAGE] == 2 and view.orphans() == []


def test_replace_image_blanks_the_event_copy_too():
    data = read_bytes(BASIC)
    t = codex(data)
    out = _replace(t, lambda v: by_line(v, 5, IMAGE), "[image cleared]")
    assert_kept(data, out, {5, 6})
    again = reread(t)
    view = again.view()
    assert kinds(view)[IMAGE] == 1 and kinds(view)[TEXT] == 5
    assert by_line(view, 5, TEXT).prompt and [i.text for i in view.items if i.record.lineno == 5] == [
        "Fix the failing test, see the screenshot",
        "[image cleared]",
    ]
    event = [r for r in again.records if r.lineno == 6][0]
    assert event.data["payload"]["images"] == [""]  # the UI copy is blanked
    assert PNG1 not in out.decode("utf-8", "surrogatepass")
    before = dump(again)
    for item in [i for i in view.items if i.record.lineno == 5]:
        again.adapter.replace_content(again, item, item.text)  # same text: nothing changes
    assert dump(again) == before and not any(r.edited for r in again.records)


def test_replace_image_in_tool_output():
    data = read_bytes(BASIC)
    t = codex(data)
    out = _replace(t, lambda v: by_line(v, 22, IMAGE), "[tool image cleared]")
    assert_kept(data, out, {22})
    view = reread(t).view()
    assert kinds(view)[IMAGE] == 1
    assert view.results()["call_c"].text == "Success. Updated app.py\n[tool image cleared]"


def test_opaque_parts_are_never_replaced():
    t = codex(BASIC)
    with pytest.raises(LookoutError):
        t.adapter.replace_content(t, by_line(t.view(), 10), "x")
    c = codex(COMPACTED)
    with pytest.raises(LookoutError):
        c.adapter.replace_content(c, by_line(c.view(), 17, SUMMARY), "x")
    assert dump(t) == read_bytes(BASIC) and dump(c) == read_bytes(COMPACTED)


def test_replace_inside_replacement_history_edits_the_compacted_record():
    data = read_bytes(COMPACTED)
    t = codex(data)
    out = _replace(t, lambda v: [i for i in v.items if i.record.lineno == 17 and i.kind == TEXT][0], "[x]")
    assert_kept(data, out, {17})
    view = reread(t).view()
    assert [i.text for i in view.items if i.kind == TEXT] == ["[x]", "Thanks"]
    assert by_line(view, 17, SUMMARY).opaque  # the encrypted compaction item is untouched
    history = payload_at(by_line(view, 17, SUMMARY).record, ("payload", "replacement_history"))
    assert history[2] == {"type": "compaction", "encrypted_content": "ENC" * 100}


# --- add_parts --------------------------------------------------------------------------------


def test_add_parts_appends_to_the_prompt_message():
    data = read_bytes(BASIC)
    t = codex(data)
    prompt = [i for i in t.view().items if i.prompt][1]
    parts = [
        {"type": "text", "text": "<file path='app.py'>def add(a, b): ...</file>"},
        {"type": "image", "media_type": "image/png", "data": PNG1},
    ]
    t.adapter.add_parts(t, prompt, parts)
    out = dump(t)
    assert_kept(data, out, {27})
    view = reread(t).view()
    on27 = [i for i in view.items if i.record.lineno == 27]
    assert [i.kind for i in on27] == [TEXT, TEXT, IMAGE]
    assert len({i.message for i in on27}) == 1 and {i.turn for i in on27} == {2}
    assert [i.prompt for i in on27] == [True, False, False]
    assert on27[2].image.data == PNG1
    content = payload_at(on27[0].record, ("payload", "content"))
    assert content[2] == {"type": "input_image", "image_url": "data:image/png;base64," + PNG1}
    assert "caf\u00e9" in content[0]["text"]  # escapes survive the rewrite as the same text
    with pytest.raises(LookoutError):
        t.adapter.add_parts(t, view.calls()["call_a"], parts)


# --- set_setup --------------------------------------------------------------------------------


def test_set_setup_inserts_a_developer_message_after_the_setup():
    data = read_bytes(BASIC)
    t = codex(data)
    t.adapter.set_setup(t, "memory", "- the user likes tabs")
    out = dump(t)
    extra = assert_kept(data, out)
    assert len(extra) == 1
    new = json.loads(extra[0])
    assert new["type"] == "response_item" and TS_RE.match(new["timestamp"])
    assert new["payload"] == {
        "type": "message",
        "role": "developer",
        "content": [
            {"type": "input_text", "text": '<lookout-setup name="memory">\n- the user likes tabs\n</lookout-setup>'}
        ],
    }
    assert out.split(b"\n")[4] == extra[0]  # right after the environment context (line 4)
    again = reread(t)
    view = again.view()
    memory = [i for i in view.items if i.kind == SETUP and i.setup == "memory"]
    assert len(memory) == 1 and memory[0].extra["setup_key"] == "memory"
    assert memory[0].turn == 0 and kinds(view)[SETUP] == 5
    # the same text again: nothing changes
    again.adapter.set_setup(again, "memory", "- the user likes tabs")
    assert dump(again) == out and not any(r.edited for r in again.records)
    # new text: replaced in place
    again.adapter.set_setup(again, "memory", "- the user likes spaces")
    changed = dump(again)
    assert len(changed.splitlines()) == len(out.splitlines())
    assert [i.text for i in reread(again).view().items if i.setup == "memory"] == [
        '<lookout-setup name="memory">\n- the user likes spaces\n</lookout-setup>'
    ]
    # removed: back to the original bytes
    again.adapter.set_setup(again, "memory", None)
    assert dump(again) == data


def test_set_setup_without_setup_goes_after_session_meta():
    data = read_bytes(RATE)
    t = codex(data)
    t.adapter.set_setup(t, "memory", "note")
    out = dump(t)
    assert_kept(data, out)
    assert json.loads(out.split(b"\n")[1])["payload"]["role"] == "developer"
    assert [i.setup for i in reread(t).view().items] == ["memory"]


def test_set_setup_after_a_local_compaction_goes_after_it():
    data = b"".join(read_bytes(COMPACTED).splitlines(keepends=True)[:16])
    t = codex(data)
    t.adapter.set_setup(t, "memory", "after the summary")
    out = dump(t)
    extra = assert_kept(data, out)
    assert out.splitlines()[11] == extra[0].rstrip(b"\r")  # right after the compacted line (11)
    view = reread(t).view()
    memory = [i for i in view.items if i.setup == "memory"]
    assert len(memory) == 1 and memory[0].text.endswith("after the summary\n</lookout-setup>")


def test_set_setup_after_a_compaction_edits_the_replacement_history():
    data = read_bytes(COMPACTED)
    t = codex(data)
    t.adapter.set_setup(t, "memory", "remember X")
    out = dump(t)
    assert_kept(data, out, {17})
    view = reread(t).view()
    assert [(i.record.lineno, i.kind, i.setup) for i in view.items[:4]] == [
        (1, SETUP, "system"),
        (17, SETUP, "environment"),
        (17, SETUP, "memory"),
        (17, TEXT, None),
    ]
    history = payload_at(view.items[2].record, ("payload", "replacement_history"))
    assert history[1]["role"] == "developer" and history[3]["type"] == "compaction"
    t2 = reread(t)
    t2.adapter.set_setup(t2, "memory", "remember X")
    assert dump(t2) == out


# --- compact ----------------------------------------------------------------------------------


def _compact(t: Transcript, summary, keep_from):
    return t.adapter.compact(
        t,
        summary,
        keep_from,
        {
            "trigger": "manual",
            "pre_tokens": 0,
            "post_tokens": 0,
            # codex keeps old lines: the only save is of none, for the added lines' restore marker
            "save": lambda records: pytest.fail("codex keeps old lines") if records else "lookout-restore:" + "0" * 64,
        },
    )


def test_compact_appends_compacted_and_event_like_codex():
    data = read_bytes(BASIC)
    t = codex(data)
    before = t.view()
    keep = [i for i in before.items if i.prompt][1]
    tail = [(i.kind, i.text, i.call_id) for i in before.items if i.turn >= 2]
    written = _compact(t, "Fixed add(); tests pass.", keep)
    assert len(written) == 2
    out = dump(t)
    extra = assert_kept(data, out)
    assert len(extra) == 2 and out.startswith(data)  # appended, nothing earlier rewritten
    compacted, event = (json.loads(x) for x in extra)
    assert compacted["type"] == "compacted" and TS_RE.match(compacted["timestamp"])
    assert compacted["payload"]["message"] == SUMMARY_PREFIX + "\nFixed add(); tests pass."
    assert event["type"] == "event_msg" and event["payload"] == {"type": "context_compacted"}
    history = compacted["payload"]["replacement_history"]
    # setup as it was, the summary as a user message, the kept response items verbatim
    originals = [loads_exact(r.body)["payload"] for r in t.records if r.lineno in (2, 3, 4, 27, 29, 30, 31, 32)]
    assert history[:3] == originals[:3]
    assert history[3] == {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": SUMMARY_PREFIX + "\nFixed add(); tests pass."}],
    }
    assert history[4:] == [loads_exact(r.body)["payload"] for r in t.records if r.lineno in (18,)] + originals[3:]

    view = reread(t).view()
    assert kinds(view) == {SETUP: 4, SUMMARY: 1, TEXT: 2, TOOL_CALL: 2, TOOL_RESULT: 1}
    assert [i.kind for i in view.items[:5]] == [SETUP] * 4 + [SUMMARY]
    assert view.items[4].extra["summary"] == "Fixed add(); tests pass."
    assert [(i.kind, i.text, i.call_id) for i in view.items[5:]] == tail  # kept word for word
    assert view.items[5].prompt and view.orphans() == []
    assert [c.before for c in view.compactions] == [1520]  # line 33's last request
    assert len(view.usages) == 4  # the usage history stays


def test_compact_without_summary_or_tail():
    data = read_bytes(BASIC)
    t = codex(data)
    _compact(t, None, None)
    view = reread(t).view()
    assert [i.kind for i in view.items] == [SETUP] * 4 + [NOTICE]
    assert view.items[-1].text == TRUNCATION_NOTICE and view.orphans() == []


def test_compact_twice_on_a_compacted_transcript():
    data = read_bytes(COMPACTED)
    t = codex(data)
    keep = [i for i in t.view().items if i.prompt][-1]  # "Thanks"
    _compact(t, "Docs task under way.", keep)
    first = reread(t)
    view = first.view()
    assert [(i.kind, i.text[:20]) for i in view.items] == [
        (SETUP, "You are Codex."),
        (SETUP, "<environment_context"),
        (SUMMARY, SUMMARY_PREFIX[:20]),
        (TEXT, "Thanks"),
    ]
    assert view.orphans() == [] and len(view.compactions) == 3
    assert [i.record.lineno for i in view.items] == [1, 24, 24, 24]  # all in the new compacted line
    # set_setup then lands in the new compacted record, and a second compaction keeps it
    first.adapter.set_setup(first, "memory", "M")
    again = reread(first)
    keep = [i for i in again.view().items if i.prompt][-1]
    _compact(again, "Still docs.", keep)
    view = reread(again).view()
    assert [(i.kind, i.setup) for i in view.items] == [
        (SETUP, "system"),
        (SETUP, "environment"),
        (SETUP, "memory"),
        (SUMMARY, None),
        (TEXT, None),
    ]
    assert view.items[3].extra["summary"] == "Still docs."


def test_compact_rejects_an_item_outside_the_history():
    t = codex(COMPACTED)
    stale = [i for i in codex(COMPACTED).view().items if i.prompt][0]
    with pytest.raises(LookoutError):
        _compact(t, "s", stale)


# --- the real transcripts ---------------------------------------------------------------------


def test_real_058_rollout():
    t = codex(REAL)
    view = t.view()
    assert kinds(view) == {SETUP: 1, TEXT: 1, THINKING: 38, TOOL_CALL: 39, TOOL_RESULT: 39}
    assert view.items[0].setup == "environment" and view.items[1].prompt
    assert all(i.opaque for i in view.items if i.kind == THINKING)
    assert view.orphans() == [] and len(view.calls()) == 39
    assert max(i.turn for i in view.items) == 1
    # 79 token_count events: one has info null, the other 78 come in identical pairs
    assert len(view.usages) == 39
    # their sum equals the session's final cumulative total_token_usage
    assert sum(u.input for u in view.usages) == 1099261 - 1027328
    assert sum(u.cache_read for u in view.usages) == 1027328
    assert sum(u.output for u in view.usages) == 22305
    assert view.usages[0].prompt == 10128 and view.usages[0].context_window == 258400
    assert (view.model, view.session_id) == ("gpt-5.1-codex", "019a93b9-f380-7600-98ff-940e6b99603c")


def test_real_058_prune_everything_then_compact():
    data = read_bytes(REAL)
    t = codex(data)
    results = list(t.view().results().values())
    wrapped = {i.call_id for i in results if i.extra["shape"] == "wrapped"}
    assert len(wrapped) == 37  # the shell outputs; the two update_plan outputs are plain strings
    for item in results:
        t.adapter.replace_content(t, item, f"[cleared {item.call_id}]")
    out = dump(t)
    assert_kept(data, out, {r.record.lineno for r in results})
    again = reread(t)
    view = again.view()
    assert all(i.text == f"[cleared {i.call_id}]" for i in view.results().values())
    for item in view.results().values():  # Codex still parses the wrapper and its exit code
        if item.call_id not in wrapped:
            assert payload_at(item.record, ("payload", "output")) == item.text
            continue
        wrapper = json.loads(payload_at(item.record, ("payload", "output")))
        assert set(wrapper) == {"output", "metadata"} and "exit_code" in wrapper["metadata"]
    assert view.orphans() == []
    for item in list(view.results().values()):
        again.adapter.replace_content(again, item, item.text)
    assert dump(again) == out
    _compact(again, "Wired LM Studio.", None)
    final = reread(again).view()
    assert [i.kind for i in final.items] == [SETUP, SUMMARY] and final.orphans() == []


def test_schema_coverage_file():
    t = codex(SCHEMA)
    view = t.view()
    # the latest compacted record (line 111) replaces everything before it; then 114-116
    assert kinds(view) == {SETUP: 10, TEXT: 11, SUMMARY: 1, TOOL_CALL: 1, TOOL_RESULT: 1, NOTICE: 1}
    assert {i.record.lineno for i in view.items} == {1, 111, 114, 115, 116}
    assert len(view.compactions) == 6 and [c.record.lineno for c in view.compactions] == [26, 47, 69, 81, 89, 111]
    assert len(view.usages) == 1 and view.usages[0].input == 16341 - 3584  # 86 is null, 87 all zero
    assert max(i.turn for i in view.items) == 9 and view.orphans() == []
    assert view.session_id == "019fc8be-3658-7ca3-9e29-000000000000"
    data = read_bytes(SCHEMA)
    keep = [i for i in view.items if i.prompt][-1]
    t.adapter.set_setup(t, "memory", "m")
    _compact(t, "summary", [i for i in t.view().items if i.prompt][-1])
    out = dump(t)
    assert_kept(data, out, {111})
    after = reread(t).view()
    # the new summary, and the encrypted compaction item that followed the kept prompt
    assert after.orphans() == [] and [i.kind for i in after.items].count(SUMMARY) == 2
    assert [i.setup for i in after.items if i.kind == SETUP].count("memory") == 1
    assert keep.text == [i for i in after.items if i.prompt][0].text


def test_rate_limit_file():
    view = codex(RATE).view()
    assert view.items == [] and len(view.usages) == 1
    u = view.usages[0]
    assert (u.input, u.cache_read, u.output, u.context_window) == (12091 - 10880, 10880, 182, 258400)
    assert view.session_id == "test-ratelimit-session"


def test_detect_on_a_mixed_sample_prefers_codex():
    records = codex(BASIC).records
    assert detect(records).name == "codex"
    assert detect(records[15:16]) is None  # the non-JSON line alone


def test_new_lines_copy_extra_envelope_fields():
    data = read_bytes(SCHEMA)
    t = codex(data)
    _compact(t, "s", None)
    last = json.loads(dump(t).splitlines()[-1])
    assert last["ordinal"] == 0 and last["type"] == "event_msg"  # line 118 carries an ordinal
    assert copy.deepcopy(last) == last


def test_a_wrapped_output_reads_the_same_through_orjson_and_the_standard_library():
    """Reading a 0.5x wrapped shell output tries orjson first; what orjson refuses (NaN, a lone
    surrogate) is read by the standard library, so every wrapper gives what it gave before."""
    from lookout_cli.formats.codex_items import parse_wrapped

    wrappers = [
        '{"output":"ok\\n","metadata":{"exit_code":0,"duration_seconds":0.5}}',
        '{"output":"fail","metadata":{"exit_code":2}}',
        '{"output":"half \\ud800 a surrogate","metadata":{"exit_code":1}}',
        '{"output":"x","metadata":{"duration_seconds":NaN}}',
        '{"output":["not","text"]}', '["output"]', '{"output": "unclosed', "plain text",
    ]
    for text in wrappers:
        assert parse_wrapped(text, exact=False) == parse_wrapped(text) or "NaN" in text, text
    nan = parse_wrapped(wrappers[3], exact=False)
    assert nan is not None and nan["output"] == "x"  # NaN != NaN: compared by its text


# --- a long rollout read lean: the lines before its last compaction settled ---------------------


def _line(ts: int, kind: str, payload: dict) -> bytes:
    return json.dumps({"timestamp": f"2025-12-01T10:{ts // 60:02d}:{ts % 60:02d}.000Z", "type": kind,
                       "payload": payload}, separators=(",", ":")).encode() + b"\n"


def _user(text: str, *parts: dict) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}, *parts]}


def _tokens(total: int, prompt: int, window: int | None = 258400) -> dict:
    last = {"input_tokens": prompt, "cached_input_tokens": prompt // 2, "output_tokens": 40, "total_tokens": prompt + 40}
    info = {"total_token_usage": {**last, "total_tokens": total}, "last_token_usage": last}
    if window:
        info["model_context_window"] = window
    return {"type": "token_count", "info": info}


IMAGE_URL = f"data:image/png;base64,{PNG1}"


def _compacted_twice(history: bool) -> bytes:
    """The compacted fixture (a local compaction, then one with a replacement history) and
    more: an image with its UI event, a developer message, a rolled-back turn, Codex's token
    counts written twice and once without a window, then a last compaction, local or (with
    ``history``) one whose history holds the image message, and a turn after it."""
    image_message = _user("Look at this", {"type": "input_image", "image_url": IMAGE_URL})
    steps = [  # (a load reads its first lines before it knows the format: many more come after)
        line for n in range(60) for line in (
            _line(1, "response_item", {"type": "function_call", "name": "shell", "call_id": f"s{n}",
                                       "arguments": json.dumps({"command": ["ls", str(n)]})}),
            _line(1, "response_item", {"type": "function_call_output", "call_id": f"s{n}", "output": "ok " * n}),
            _line(1, "event_msg", _tokens(20000 + n, 8000 + n)),
            _line(1, "event_msg", _tokens(20000 + n, 8000 + n)))]
    more = [
        *steps,
        _line(1, "response_item", image_message),
        _line(1, "event_msg", {"type": "user_message", "message": "Look at this", "images": [IMAGE_URL]}),
        _line(2, "response_item", {"type": "message", "role": "developer",
                                   "content": [{"type": "input_text", "text": "Be brief."}]}),
        _line(3, "response_item", _user("Fourth task: " + "words " * 21000)),  # (over what a compaction carries)
        _line(4, "event_msg", _tokens(30000, 9000)),
        _line(4, "event_msg", _tokens(30000, 9000)),
        _line(5, "response_item", _user("A turn undone")),
        _line(6, "event_msg", {"type": "thread_rolled_back", "num_turns": 1}),
        _line(7, "response_item", _user("Fifth task")),
        _line(8, "event_msg", _tokens(42000, 12000, window=None)),
        _line(9, "turn_context", {"cwd": "/w/lib", "model": "gpt-5.3-codex"}),
        # counts read otherwise: the same event with its keys in another order (a duplicate),
        # a count that is a fraction, a field Codex does not write, text that is not ASCII
        _line(9, "event_msg", _tokens(43000, 12500)),
        _line(9, "event_msg", {"info": dict(reversed(_tokens(43000, 12500)["info"].items())), "type": "token_count"}),
        _line(9, "event_msg", {"type": "token_count", "info": {**_tokens(44000, 13000)["info"], "last_token_usage": {
            "input_tokens": 13000.0, "output_tokens": 7}}}),
        _line(9, "event_msg", {"type": "token_count", "info": {"total_token_usage": {"total_tokens": 45000},
                                                               "last_token_usage": {"input_tokens": 700, "extra": 1}}}),
        _line(9, "response_item", {"type": "function_call_output", "call_id": "c9", "output": "naïve café ✓"}),
        _line(9, "response_item", {"type": "message", "role": "assistant",
                                   "content": [{"type": "output_text", "text": "Done."}]}),
        _line(9, "event_msg", {"type": "user_message", "message": "Fifth task", "images": []}),
        _line(9, "event_msg", _tokens(46000, 14000)),
    ]
    if history:
        last = {"message": "", "replacement_history": [image_message, _user(SUMMARY_PREFIX + "\nall done")]}
    else:
        last = {"message": SUMMARY_PREFIX + "\nLogging, tests and docs are done; the fifth task is next."}
    more += [
        _line(10, "compacted", last),
        _line(10, "event_msg", {"type": "context_compacted"}),
        _line(10, "event_msg", _tokens(46000, 14000)),  # (the one before the compaction again)
        _line(11, "event_msg", _tokens(50000, 6000)),
        _line(12, "response_item", {"type": "message", "role": "assistant",
                                    "content": [{"type": "output_text", "text": "On it."}]}),
        _line(13, "response_item", _user("Sixth task")),
    ]
    return read_bytes(COMPACTED).rstrip(b"\n") + b"\n" + b"".join(more)


def _facts(view) -> tuple:
    """What a view shows and counts, by line numbers (not by record objects)."""
    items = [(i.record.lineno, i.kind, i.role, i.text, i.path, i.message, i.turn, i.prompt, i.opaque,
              sorted((k, [e.lineno for e in v] if k == "events" else v) for k, v in i.extra.items()))
             for i in view.items]
    usages = [(u.record.lineno, u.input, u.cache_write, u.cache_read, u.output, u.model, u.timestamp)
              for u in view.usages]
    compactions = [(c.record.lineno, c.before, c.after, c.timestamp) for c in view.compactions]
    window = next((u.context_window for u in reversed(view.usages) if u.context_window), None)  # (the meter's)
    return items, usages, compactions, view.model, view.session_id, view.cwd, view.last_timestamp, window


def _lean(path):
    from lookout_cli.options import Run

    return Run("measure", file=str(path), isolated=True).load(lean=True)


@pytest.mark.parametrize("fields", [False, True], ids=["parsed", "decoded"])
@pytest.mark.parametrize("history", [False, True], ids=["local", "with-history"])
def test_a_lean_read_settles_the_lines_before_the_last_compaction_and_views_as_every_line_does(tmp_path, history,
                                                                                             fields, monkeypatch):
    """A lean load reads the lines before a rollout's last compaction into what they give the
    view (usages by column, the compactions, the model, the setup and the user messages a
    local compaction carries, the images' UI events), and the view built from that and the
    lines after is the one every line gives: each line parsed, or (a long read) the lines that
    give it little decoded for that alone (``codex_fields``)."""
    from lookout_cli.formats import codex_scan

    if fields:
        monkeypatch.setattr(codex_scan, "FIELDS_BYTES", 0)
    data = _compacted_twice(history)
    path = tmp_path / "rollout.jsonl"
    path.write_bytes(data)
    lean = _lean(path)
    last = data.count(b"\n") - 5  # the last compaction's line
    assert lean.settled is not None and lean.settled.at == last - 1
    whole = codex(data).view()
    assert _facts(lean.view()) == _facts(whole)
    assert [c.record.lineno for c in whole.compactions] == [11, 17, last]
    if history:  # the image in the history is known with its UI event, before the compaction
        image = by_line(whole, last, IMAGE)
        assert [e.lineno for e in image.extra["events"]] == [265]
    else:  # the local compaction carries the setup and the recent real user messages, 20k tokens
        carried = [i for i in whole.items if i.extra.get("rebuilt") and i.kind == TEXT]
        assert [i.text[:12] for i in carried] == ["Fourth task:", "Fifth task"]
        assert carried[0].extra.get("truncated") and len(carried[0].text) < 70_000
    assert lean.view().usages[-1].context_window == 258400


def test_the_window_a_rollout_records_last_is_known_however_many_counts_follow_without_one(tmp_path):
    """The meter reads the context window of the newest usage that records one: before the last
    compaction, and followed by a hundred that record none (through it and after it), it is
    still the one the lean view gives."""
    lines = _compacted_twice(history=False).splitlines(keepends=True)
    last = max(n for n, line in enumerate(lines) if b'"type":"compacted"' in line)
    bare = [_line(9, "event_msg", _tokens(60000 + n, 15000 + n, window=None)) for n in range(100)]
    after = [line.replace(b',"model_context_window":258400', b"") for line in lines[last:]]
    data = b"".join([*lines[:last], *bare, *after])
    path = tmp_path / "rollout.jsonl"
    path.write_bytes(data)
    lean, whole = _lean(path), codex(data).view()
    assert lean.settled is not None
    assert _facts(lean.view()) == _facts(whole) and _facts(whole)[-1] == 258400


def test_a_summary_without_codexs_prefix_carried_by_a_later_local_compaction_settles(tmp_path):
    """A local compaction whose message lacks Codex's summary prefix reads as a person's message,
    so the local compactions after it weigh and carry it: the lines before the last one settle
    (the made-up summary has no line to let go of) and view as every line does."""
    lines = _compacted_twice(history=False).splitlines(keepends=True)
    last = max(n for n, line in enumerate(lines) if b'"type":"compacted"' in line)
    plain = [_line(9, "compacted", {"message": "Logging and tests are done."}), _line(9, "response_item", _user("Go on")),
             _line(9, "compacted", {"message": SUMMARY_PREFIX + "\nGoing on."})]
    data = b"".join([*lines[:last], *plain, *lines[last:]])
    path = tmp_path / "rollout.jsonl"
    path.write_bytes(data)
    lean, whole = _lean(path), codex(data).view()
    assert lean.settled is not None
    assert _facts(lean.view()) == _facts(whole)
    assert "Logging and tests are done." in [i.text for i in whole.items if i.extra.get("rebuilt")]


def test_a_count_past_64_bits_before_the_last_compaction_reads_every_line(tmp_path):
    """The lines before the last compaction keep their usages' counts in 64-bit columns: a
    count past them (no real rollout has one) leaves them unsettled, and the view reads every
    line, as a whole read does."""
    huge = _line(9, "event_msg", {"type": "token_count", "info": {
        "total_token_usage": {"total_tokens": 1 << 70}, "last_token_usage": {"input_tokens": 1 << 70}}})
    lines = _compacted_twice(history=False).splitlines(keepends=True)
    last = max(n for n, line in enumerate(lines) if b'"type":"compacted"' in line)
    data = b"".join([*lines[:last], huge, *lines[last:]])
    path = tmp_path / "rollout.jsonl"
    path.write_bytes(data)
    lean = _lean(path)
    assert lean.settled is None
    whole = codex(data).view()
    assert _facts(lean.view()) == _facts(whole) and 1 << 70 in [u.input for u in whole.usages]


ENVIRONMENT = "<environment_context>\n  <cwd>/w/elsewhere</cwd>\n</environment_context>"


@pytest.mark.parametrize("text", ["[lookout: cleared]", ENVIRONMENT], ids=["cleared", "now-setup"])
def test_an_edit_to_a_message_before_the_last_compaction_is_seen_by_the_lean_view(tmp_path, text):
    """The lines before a local compaction give it the messages it weighs, read again each time
    the view is built: a long message cleared leaves room for older ones; a message edited
    into another kind (here the setup Codex injects) is read as every line reads it."""
    data = _compacted_twice(history=False)
    path = tmp_path / "rollout.jsonl"
    path.write_bytes(data)
    lean, whole = _lean(path), codex(data)
    for t in (lean, whole):
        fourth = next(i for i in t.view().items if i.text.startswith("Fourth task"))
        t.adapter.replace_content(t, fourth, text)
    assert _facts(lean.view()) == _facts(whole.view())
    carried = [(i.kind, i.text[:12]) for i in lean.view().items if i.extra.get("rebuilt")]
    setup = [(SETUP, "<environment"), (SETUP, "Be brief.")]
    older = [(TEXT, "Third task: "), (TEXT, "Thanks"), (TEXT, "Look at this")]
    if text == ENVIRONMENT:  # (set up again before the messages, not weighed with them)
        assert carried == [*setup, (SETUP, "<environment"), *older, (TEXT, "Fifth task")]
    else:
        assert carried == [*setup, *older, (TEXT, "[lookout: cl"), (TEXT, "Fifth task")]
    assert dump(lean) == dump(whole)


def test_the_meter_takes_the_context_a_local_compaction_left_to_start_at_it():
    """A local compaction carries user messages from lines before it: the responses between
    those lines and the compaction were of the context it replaced, not of this one (the
    meter took the first of them for this context's first prompt, and inferred the setup, a
    hundred thousand tokens too many on a real-shaped rollout, from it)."""
    from lookout_cli.meter.analysis import responses

    view = codex(_compacted_twice(history=False)).view()
    last = view.compactions[-1].record.lineno
    assert min(i.record.lineno for i in view.items if i.kind != SETUP) < last  # carried from before it
    found = responses(view)
    assert [r.usage.record.lineno for r in found] == [u.record.lineno for u in view.usages if u.record.lineno > last]
