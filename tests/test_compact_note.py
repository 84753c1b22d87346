"""The embedded summary note: its sections, the user's words kept exactly, files taken from the
tool calls' own arguments, a second compaction updating the first note, and the fact check."""

from __future__ import annotations

import pytest
from test_compact_fixtures import ERROR_LINE, FIRST_PROMPT, FORMATS, WRITERS, parse, script, session

from lookout_cli.compaction import note as sn
from lookout_cli.tokens.tokenizer import count, estimate


def head_items(fmt: str, **kw):
    view = parse(session(fmt, **kw)).view()
    last_prompt = [n for n, i in enumerate(view.items) if i.prompt][-1]
    return view.items[:last_prompt]


@pytest.mark.parametrize("fmt", FORMATS)
def test_note_keeps_user_messages_word_for_word_and_lists_files_from_calls(fmt):
    turns = script(turns=5, output_chars=400)
    items = parse(WRITERS[fmt](turns)).view().items
    note = sn.render(sn.digest(items))
    for section in ("## Goal", "## Constraints and preferences", "## Progress", "### Done", "### In progress",
                    "### Blocked", "## Key decisions", "## Files", "## Commands run", "## Findings and errors",
                    "## Next steps"):
        assert section in note
    for turn in turns:
        assert f"<user-message>\n{turn.prompt}\n</user-message>" in note
    changed, read = note.split("### Changed", 1)[1].split("### Read", 1)
    read = read.split("##", 1)[0]
    for turn_no in range(5):
        assert f"module_{turn_no}_1.py" in changed  # edits (Edit, apply_patch, write_file)
        assert f"module_{turn_no}_0.py" in read  # reads (Read, sed -n, read_file)
        assert f"module_{turn_no}_0.py" not in changed
    assert "pytest -q tests/test_module_0.py" in note
    assert ERROR_LINE in note  # the error string, exactly


def test_files_come_from_arguments_not_from_prose():
    items = parse(session("anthropic", turns=2, output_chars=300)).view().items
    for item in items:
        if item.role == "assistant" and item.kind == "text":
            item.text += " I might also look at docs/never_opened.md later."
    note = sn.render(sn.digest(items))
    assert "docs/never_opened.md" not in note.split("## Files", 1)[1].split("## Commands", 1)[0]


@pytest.mark.parametrize("text,read,changed", [
    ("cat src/a.py | head -5 && sed -i 's/x/y/' src/b.py", ["src/a.py"], ["src/b.py"]),
    ("echo hi > out/log.txt; nl -ba README.md", ["README.md"], ["out/log.txt"]),
    ("*** Begin Patch\n*** Add File: new.py\n+x\n*** Update File: old.py\n*** Move to: moved.py\n*** End Patch",
     [], ["new.py", "old.py", "moved.py"]),
    ("ls -la && git status", [], []),
])
def test_files_of_shell_scripts(text, read, changed):
    assert sn.files_of_script(text) == (read, changed)


def test_instructions_are_kept_in_full_with_what_they_name():
    items = head_items("openai", turns=4, output_chars=300)
    plan = "The migration plan: 1) freeze writes 2) copy rows to storage v2 3) flip the flag 4) drop v1."
    for item in items:
        if item.role == "assistant" and item.kind == "text":
            item.text = item.text + "\n\n" + plan
            break
    d = sn.digest(items, instructions="keep the migration plan")
    note = sn.render(d)
    assert "<keep>\nkeep the migration plan\n</keep>" in note
    assert plan in note.split("## Keep in full detail", 1)[1]


def test_second_compaction_updates_the_first_note():
    first_items = head_items("claude-code", turns=4, output_chars=300)
    first = sn.digest(first_items)
    first.next_steps = ["Stale step that the newer turns replace"]
    note1 = sn.render(first)
    parsed = sn.parse("Some agent prefix\n\n" + note1 + "\n\n[lookout compaction, manual] lookout-restore:" + "0" * 64)
    assert parsed is not None
    assert parsed.user_messages == first.user_messages
    assert parsed.files_changed == first.files_changed and parsed.files_read == first.files_read
    assert parsed.commands == first.commands
    assert parsed.errors == first.errors
    assert parsed.goal == first.goal
    newer = sn.digest(head_items("claude-code", turns=6, output_chars=300, seed=9)[-12:])
    newer.user_messages = ["Also rename the CLI flag to --storage."]
    newer.files_read = {"src/cli.py": 2}
    merged = sn.merge(parsed, newer)
    note2 = sn.render(merged)
    assert note2.count(sn.NOTE_TITLE) == 1  # one note, not a summary of a summary
    assert "<earlier-summary>" not in note2
    for text in first.user_messages + ["Also rename the CLI flag to --storage."]:
        assert f"<user-message>\n{text}\n</user-message>" in note2
    assert "- src/cli.py (2 reads)" in note2
    for path in first.files_changed:
        assert path in note2
    assert "Stale step" not in note2  # the state of the work comes from the newer turns
    assert note2.index(first.user_messages[0]) < note2.index("Also rename the CLI flag")


def test_a_foreign_summary_is_kept_whole():
    d = sn.Digest(earlier=["Claude's own summary: the user wants X."])
    assert "<earlier-summary>\nClaude's own summary: the user wants X.\n</earlier-summary>" in sn.render(d)
    assert sn.parse("no lookout title here") is None


def test_render_fits_a_budget_and_says_what_it_left_out():
    items = parse(session("codex", turns=14, output_chars=300)).view().items
    d = sn.digest(items)
    full = sn.render(d)
    small = sn.render(d, budget=count(full) // 3, count=count)
    assert count(small) <= count(full) // 3
    assert "left out; the original context has them" in small
    assert f"<user-message>\n{d.user_messages[-1]}\n</user-message>" in small  # the newest message stays


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_long_note_is_cut_as_little_as_fits(fmt):
    """The cut is searched with tokens per character (estimating each of dozens of renders of
    a note that starts at megabytes took a tenth of compacting 100 MB): the note must still fit
    and keep at least what the estimate of every render kept (the whole note's ratio alone cut
    the Codex note to 3,000 tokens down to 1,374, where the estimate kept 2,410). And it uses
    its budget: a list is cut by halves, then as little as fits (halving alone left about half
    of the budget unused)."""
    d = sn.digest(parse(session(fmt, turns=300, output_chars=300)).view().items)
    for budget in (1_500, 3_000, 6_000):
        lines = sn._Lines(d)
        cut = sn._trim(d, {}, lambda note: estimate(note) <= 0.9 * budget, lines)
        before = count(sn._render(d, sn._trim(d, cut, lambda note: count(note) <= budget, lines), lines))
        note = count(sn.render(d, budget=budget, count=count))
        assert before <= note <= budget and note >= 0.75 * budget


def test_fact_check_reports_what_a_note_lost():
    items = head_items("anthropic", turns=4, output_chars=300)
    d = sn.digest(items)
    facts = sn.must_survive(d)
    assert FIRST_PROMPT in facts.instructions
    assert ERROR_LINE in facts.errors
    assert "pytest -q tests/test_module_0.py" in facts.commands
    assert "src/importer/module_0_0.py" in facts.files
    full = sn.render(d)
    assert len(sn.missing(full, facts)) == 0
    lossy = full.replace(FIRST_PROMPT, "Port the importer.").replace(ERROR_LINE, "a test failed")
    lost = sn.missing(lossy, facts)
    assert lost.instructions == [FIRST_PROMPT]
    assert lost.errors == [ERROR_LINE]
    assert lost.files == [] and lost.commands == []


def test_pin_adds_the_users_words_and_files_a_model_dropped():
    d = sn.digest(head_items("openai", turns=3, output_chars=300))
    pinned = sn.pin("## Goal\nPort the importer.\n", d)
    assert len(sn.missing(pinned, sn.Facts(instructions=sn.must_survive(d).instructions,
                                           files=sn.must_survive(d).files))) == 0
    assert sn.pin(pinned, d) == pinned


def test_todo_list_gives_progress_and_next_steps():
    from lookout_cli.core.jsonl import Record
    from lookout_cli.formats.view import TOOL_CALL, Item

    rec = Record(1, b"{}\n")
    todo = Item("assistant", TOOL_CALL, 'TodoWrite{"todos":[{"content":"Write the reader","status":"completed"},'
                '{"content":"Wire the CLI","status":"in_progress"},{"content":"Update docs","status":"pending"}]}',
                rec, tool="TodoWrite", call_id="t1")
    d = sn.digest([todo])
    assert "Write the reader (to-do list)" in d.done
    assert d.in_progress == ["Wire the CLI"]
    assert d.next_steps == ["Update docs"]


def test_transcript_text_cuts_outputs_and_names_images():
    items = parse(session("anthropic", turns=2, output_chars=6000)).view().items
    text = sn.transcript_text(items, limit=1000)
    assert "characters left out" in text
    assert FIRST_PROMPT in text


def test_a_cut_note_lists_what_its_cut_keeps():
    """The lines of each list are formatted once for all the cuts trimming tries: a note cut
    any way lists, read back, what the cut keeps of each list, in the note's order."""
    d = sn.Digest(goal="Ship it", user_messages=["first", "second", "third"], done=["a", "b", "c"],
                  choices=[f'{sn.CHOICE} "yes" to the agent\'s question "ok?"', f'{sn.CHOICE} "no" to "why?"'],
                  decisions=["We'll use SQS.", "Going with Redis."], files_read={"a.py": 1, "b.py": 3, "c.py": 2},
                  files_changed={"x.py": 2, "y.py": 1}, commands=["ls  → 3 files", "pwd", "make  (failed, exit 2)"],
                  facts=["`env`: PORT=8443", "`cat v`: 1.2.3"], keep=["the port"], keep_excerpts=["port 8443", "PORT"],
                  earlier=["Their summary.", "Another one."], attached=[("rules", "Be brief."), ("skills", "Use uv.")])
    names = ["user_messages", "done", "choices", "decisions", "files_read", "files_changed", "commands", "facts",
             "keep_excerpts", "earlier", "attached"]
    for cut in ({}, {name: 1 for name in names}, {name: 2 for name in names}):
        back = sn.parse(sn._render(d, cut, sn._Lines(d)))
        for name in names:
            listed = getattr(back, name)
            assert (list(listed.items()) if isinstance(listed, dict) else listed) == sn._kept(d, name, cut), name
