"""``lookout hook``: each Claude Code and Codex hook event gets its answer in the agent's own
protocol (the shapes checked against the real agents in test_hook_agents.py), from the installed
``lookout`` in a real subprocess; ``lookout hook install`` merges the recipes into settings."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import REPO, SHARED_TRANSCRIPTS, run_lookout
from test_integrations import nearly_full_transcript

CCVIEWER = "claude-code/ccviewer-fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
COMPACTED = "claude-code/agentsessions-claude-small-schema-coverage.jsonl"
ROLLOUT = "codex/rollout-2025-11-17T15-30-28-019a93b9-f380-7600-98ff-940e6b99603c.jsonl"


def _shared(name: str) -> Path:
    path = SHARED_TRANSCRIPTS / name
    if not path.exists():
        pytest.skip(f"{name} is not among the shared transcripts here")
    return path


def hook(event: dict, cwd: Path, *args: str):
    result = run_lookout("hook", *args, input=json.dumps(event).encode(), cwd=cwd)
    assert result.returncode == 0, result.stderr
    assert b"Traceback" not in result.stderr
    return result


def answer(event: dict, cwd: Path, *args: str) -> dict:
    out = hook(event, cwd, *args).stdout
    return json.loads(out) if out.strip() else {}


def event(name: str, cwd: Path, transcript: Path | str, **fields) -> dict:
    return {"session_id": "0b5e7a1c-2f00-4c3b-9a55-3d0f6c1e2a10", "transcript_path": str(transcript), "cwd": str(cwd),
            "hook_event_name": name, **fields}


@pytest.fixture
def proj(tmp_path) -> Path:
    folder = tmp_path / "proj"
    folder.mkdir()
    return folder


def save_memory(proj: Path, note: str, *args: str) -> None:
    saved = run_lookout("memory", "save", *args, note, cwd=proj)
    assert saved.returncode == 0, saved.stderr


def memories(proj: Path, *args: str) -> str:
    return run_lookout("memory", "list", *args, cwd=proj).stdout.decode()


# --- SessionStart --------------------------------------------------------------------------------

def test_session_start_gives_the_memory_lists_even_before_the_file_exists(proj):
    save_memory(proj, "The API tests need Docker running")
    save_memory(proj, "I prefer small pull requests", "--everywhere")
    new = event("SessionStart", proj, proj / "not-yet.jsonl", source="startup")
    out = answer(new, proj)["hookSpecificOutput"]
    assert out["hookEventName"] == "SessionStart"
    context = out["additionalContext"]
    assert "The API tests need Docker running" in context and "I prefer small pull requests" in context
    # the block memory inject writes into a transcript, word for word
    injected = run_lookout("memory", "inject", str(_shared(CCVIEWER)), "-P", str(proj), cwd=proj).stdout
    assert json.dumps(context)[1:-1] in injected.decode()
    codex = answer({**new, "transcript_path": str(proj / "rollout-2026-01-01T00-00-00-x.jsonl")}, proj)
    assert codex["hookSpecificOutput"]["additionalContext"] == context
    # memory.read_everywhere read as every yes/no setting is (OFF, not only off)
    quiet = run_lookout("hook", input=json.dumps(new).encode(), cwd=proj,
                        env={**os.environ, "LOOKOUT_MEMORY_READ_EVERYWHERE": "OFF"})
    kept = json.loads(quiet.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "The API tests need Docker running" in kept and "I prefer small pull requests" not in kept


def test_no_memory_no_answer_and_resume_does_not_send_a_block_twice(proj, tmp_path):
    session = tmp_path / "session.jsonl"
    shutil.copyfile(_shared(CCVIEWER), session)
    assert hook(event("SessionStart", proj, session, source="startup"), proj).stdout == b""
    save_memory(proj, "The deploy script lives in tools/ship.sh")
    resume = event("SessionStart", proj, session, source="resume")
    context = answer(resume, proj)["hookSpecificOutput"]["additionalContext"]
    # Claude Code keeps the context a hook gave as an attachment and resends it on resume
    record = {"type": "attachment", "attachment": {"type": "hook_additional_context", "content": [context]}}
    with open(session, "a") as handle:
        handle.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
    assert hook(resume, proj).stdout == b""
    save_memory(proj, "Releases are cut on Tuesdays")  # a changed list is sent again
    assert "Tuesdays" in answer(resume, proj)["hookSpecificOutput"]["additionalContext"]


# --- PreCompact and after it ----------------------------------------------------------------------

def test_pre_compact_tells_claude_code_what_to_keep_and_saves_the_conversation(proj, tmp_path, isolated_env):
    session = tmp_path / "session.jsonl"
    shutil.copyfile(_shared(CCVIEWER), session)
    out = hook(event("PreCompact", proj, session, trigger="auto", custom_instructions=None), proj).stdout.decode()
    # plain text: Claude Code appends it to its compaction prompt (JSON would fail its schema)
    assert not out.lstrip().startswith("{") and len(out) <= 10_000
    from lookout_cli.agents.hooks import facts, load

    facts = facts(load(str(session)))  # compaction.note's reading of the conversation
    assert facts.user_messages and facts.files_changed
    for message in facts.user_messages[-3:]:  # the newest stay when they do not all fit
        assert " ".join(message.split())[:200] in out
    for path in list(facts.files_changed)[:3]:
        assert path in out
    saved = Path(out.split("is saved at ")[1].split(" (JSONL")[0])
    assert saved.read_bytes() == session.read_bytes()
    assert saved.is_relative_to(isolated_env / "saved")
    # the turn after the compaction gets what the summary tends to lose, and where the copy is
    after = answer(event("SessionStart", proj, session, source="compact"), proj)
    context = after["hookSpecificOutput"]["additionalContext"]
    assert str(saved) in context and " ".join(facts.user_messages[-1].split())[:100] in context


def test_after_a_compaction_without_pre_compact_the_file_is_read_up_to_it(proj):
    session = _shared(COMPACTED)
    context = answer(event("SessionStart", proj, session, source="compact"), proj)
    text = context["hookSpecificOutput"]["additionalContext"]
    assert "was just compacted" in text and "is saved at" in text


def test_codex_pre_compact_prints_nothing_but_saves_the_rollout(proj, tmp_path):
    rollout = tmp_path / "rollout-2025-11-17T15-30-28-019a93b9-f380-7600-98ff-940e6b99603c.jsonl"
    shutil.copyfile(_shared(ROLLOUT), rollout)
    pre = event("PreCompact", proj, rollout, trigger="auto", turn_id="t1")
    assert hook(pre, proj).stdout == b""  # Codex puts nothing a PreCompact hook prints into its request
    context = answer(event("SessionStart", proj, rollout, source="compact"), proj)
    text = context["hookSpecificOutput"]["additionalContext"]
    saved = Path(text.split("is saved at ")[1].split(" (JSONL")[0])
    assert saved.read_bytes() == rollout.read_bytes()


# --- UserPromptSubmit -------------------------------------------------------------------------------

def test_a_note_is_saved_and_starts_no_turn(proj):
    note = answer(event("UserPromptSubmit", proj, proj / "s.jsonl", prompt="# The API tests need Docker running"), proj)
    assert note["decision"] == "block" and "saved to project proj memory" in note["reason"]
    everywhere = answer(event("UserPromptSubmit", proj, proj / "s.jsonl", prompt="#! I prefer small pull requests"), proj)
    assert everywhere["decision"] == "block" and "everywhere" in everywhere["reason"].lower()
    asked = answer(event("UserPromptSubmit", proj, proj / "s.jsonl",
                         prompt="Fix the login bug. Remember that staging needs the VPN."), proj)
    assert "decision" not in asked and "saved to project proj memory" in asked["systemMessage"]
    listed = memories(proj)
    assert "The API tests need Docker running" in listed and "Staging needs the VPN" in listed
    assert "I prefer small pull requests" in memories(proj, "--everywhere")
    again = answer(event("UserPromptSubmit", proj, proj / "s.jsonl", prompt="# The API tests need Docker running"), proj)
    assert "already remembered" in again["reason"]
    secret = "sk-" + "proj-" + "Q" * 40
    refused = answer(event("UserPromptSubmit", proj, proj / "s.jsonl", prompt=f"# the key is {secret}"), proj)
    assert "not saved" in refused["reason"] and secret not in json.dumps(refused)
    assert secret not in memories(proj)
    assert hook(event("UserPromptSubmit", proj, proj / "s.jsonl", prompt="go on"), proj).stdout == b""


def test_the_meter_warns_the_user_once_per_level(proj, tmp_path):
    session = tmp_path / "session.jsonl"
    prompt = event("UserPromptSubmit", proj, session, prompt="go on")
    session.write_bytes(nearly_full_transcript(100_000))  # 50% of a 200k window
    assert hook(prompt, proj).stdout == b""
    session.write_bytes(nearly_full_transcript(156_000))  # 78%: amber
    warned = answer(prompt, proj)
    assert set(warned) == {"systemMessage"}  # for the user, not the model
    assert "78% of the context" in warned["systemMessage"] and "amber" in warned["systemMessage"]
    assert hook(prompt, proj).stdout == b""  # said once
    session.write_bytes(nearly_full_transcript(167_200))  # at the summary point (167k): red
    assert "at the summary point" in answer(prompt, proj)["systemMessage"]
    session.write_bytes(nearly_full_transcript(180_000))  # past where compaction is due (168k)
    assert "compaction is due" in answer(prompt, proj)["systemMessage"]
    session.write_bytes(nearly_full_transcript(40_000))  # compacted: the level drops...
    assert hook(prompt, proj).stdout == b""
    session.write_bytes(nearly_full_transcript(156_000))  # ...and warns again when it rises
    assert "amber" in answer(prompt, proj)["systemMessage"]


# --- Stop ---------------------------------------------------------------------------------------------

def test_stop_learns_from_the_session_at_most_every_ten_minutes(proj, tmp_path):
    session = tmp_path / "session.jsonl"
    lines = [json.loads(x) for x in nearly_full_transcript(20_000).splitlines()]
    lines[0]["message"]["content"] = "Remember that the build needs make 4."
    lines[0]["cwd"] = lines[1]["cwd"] = str(proj)
    session.write_text("".join(json.dumps(x) + "\n" for x in lines))
    stop = event("Stop", proj, session, stop_hook_active=False)
    assert "learned 1 memory" in answer(stop, proj)["systemMessage"]
    assert "The build needs make 4" in memories(proj)
    lines[0]["message"]["content"] = "Remember that releases are cut on Tuesdays."
    lines[0]["timestamp"] = "2026-11-01T10:05:00.000Z"
    session.write_text("".join(json.dumps(x) + "\n" for x in lines))
    # within 10 minutes of the last: nothing learned, and (as on most turns) nothing of the
    # memory store loaded, nor pathlib (Python's import log on)
    quiet = run_lookout("hook", input=json.dumps(stop).encode(), cwd=proj,
                        env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"})
    assert quiet.returncode == 0 and quiet.stdout == b""
    loaded = {line.rsplit(b"|", 1)[-1].strip() for line in quiet.stderr.splitlines() if line.startswith(b"import time:")}
    assert b"lookout_cli.agents.hooks" in loaded
    assert not loaded & {b"lookout_cli.memory.store", b"lookout_cli.memory.tidy", b"pathlib"}, loaded
    assert "Tuesdays" not in memories(proj)


# --- a hook never fails its agent ---------------------------------------------------------------------

def test_bad_input_is_one_line_and_exit_zero(proj, tmp_path):
    for raw in (b"not json", b"[1, 2]", b""):
        result = run_lookout("hook", input=raw, cwd=proj)
        assert result.returncode == 0 and result.stdout == b""
    folder = tmp_path / "a-folder.jsonl"
    folder.mkdir()
    broken = answer(event("Stop", proj, folder), proj)
    assert broken["systemMessage"].startswith("lookout hook: Stop: ")
    pre = hook(event("PreCompact", proj, folder, trigger="manual"), proj)
    assert pre.stdout == b"" and pre.stderr.startswith(b"lookout hook: PreCompact: ")
    assert hook(event("Notification", proj, folder), proj).stdout == b""


# --- install --------------------------------------------------------------------------------------------

def test_install_merges_without_clobbering_and_is_idempotent(tmp_path):
    from lookout_cli.agents.install import recipe

    settings = tmp_path / "settings.json"
    theirs = {"model": "opus", "statusLine": {"type": "command", "command": "my-status"},
              "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit"}]}],
                        "SessionStart": [{"hooks": [{"type": "command", "command": "lookout memory inject --from-hook -i -q"},
                                                    {"type": "command", "command": "echo hi"}]}]}}
    settings.write_text(json.dumps(theirs))
    printed = run_lookout("hook", "install", "--agent", "claude", "--file", str(settings), "--print")
    assert printed.returncode == 0 and json.loads(settings.read_text()) == theirs  # --print writes nothing
    first = run_lookout("hook", "install", "--agent", "claude", "--file", str(settings))
    assert first.returncode == 0, first.stderr
    merged = json.loads(settings.read_text())
    assert merged == json.loads(printed.stdout)
    assert json.loads((tmp_path / "settings.json.lookout-backup").read_text()) == theirs
    assert merged["model"] == "opus" and merged["statusLine"]["command"] == "my-status"
    assert merged["hooks"]["PreToolUse"] == theirs["hooks"]["PreToolUse"]
    commands = {e: [h["command"] for g in groups for h in g["hooks"]] for e, groups in merged["hooks"].items()}
    assert commands["SessionStart"] == ["echo hi", "lookout hook"]  # the old recipe is gone
    for name in recipe("claude")["hooks"]:
        assert commands[name].count("lookout hook") == 1
    assert b"kept your own" in first.stderr
    second = run_lookout("hook", "install", "--agent", "claude", "--file", str(settings))
    assert json.loads(settings.read_text()) == merged and b"already installed" in second.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("[1]")
    refused = run_lookout("hook", "install", "--agent", "codex", "--file", str(bad))
    assert refused.returncode == 2 and bad.read_text() == "[1]"


def test_install_finds_each_agents_settings(tmp_path):
    home = tmp_path / "home"
    env = dict(os.environ, HOME=str(home))
    env.pop("CODEX_HOME", None)
    (tmp_path / "repo").mkdir()
    for agent, scope, where in (("claude", "user", home / ".claude" / "settings.json"),
                                ("claude", "project", tmp_path / "repo" / ".claude" / "settings.json"),
                                ("codex", "user", home / ".codex" / "hooks.json"),
                                ("codex", "project", tmp_path / "repo" / ".codex" / "hooks.json")):
        result = run_lookout("hook", "install", "--agent", agent, "--scope", scope, cwd=tmp_path / "repo", env=env)
        assert result.returncode == 0, result.stderr
        assert json.loads(where.read_text())["hooks"]["PreCompact"][0]["hooks"][0]["command"] == "lookout hook"
    env["CODEX_HOME"] = str(tmp_path / "codex-home")
    run_lookout("hook", "install", "--agent", "codex", env=env, cwd=tmp_path)
    assert (tmp_path / "codex-home" / "hooks.json").exists()


def test_the_recipes_in_integrations_are_what_install_writes():
    from lookout_cli.agents.install import recipe

    assert json.loads((REPO / "integrations" / "claude-code-settings.json").read_text()) == recipe("claude")
    assert json.loads((REPO / "integrations" / "codex-hooks.json").read_text()) == recipe("codex")
    plugin = REPO / "integrations" / "claude-code-plugin"
    assert json.loads((plugin / "hooks" / "hooks.json").read_text()) == {"hooks": recipe("claude")["hooks"]}
    assert json.loads((plugin / ".claude-plugin" / "plugin.json").read_text())["name"] == "lookout"
