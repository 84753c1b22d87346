"""The recipes in integrations/ work: a git pre-commit hook, agent hook events, completion."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from conftest import REPO, lookout_exe, run_lookout
from test_conventions import FILTERS

EXAMPLE = REPO / "examples" / "claude-code-session.jsonl"


def _claude_line(uuid: str, parent: str | None, kind: str, message: dict) -> bytes:
    return orjson.dumps({"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": "/w",
                         "sessionId": "s1", "version": "2.1.0", "type": kind, "message": message,
                         "uuid": uuid, "timestamp": "2026-11-01T10:00:00.000Z"}) + b"\n"


def nearly_full_transcript(prompt_tokens: int) -> bytes:
    """A Claude Code session whose last response's prompt the provider counted as given."""
    usage = {"input_tokens": 10, "cache_creation_input_tokens": 0,
             "cache_read_input_tokens": prompt_tokens - 10, "output_tokens": 5}
    return (_claude_line("u1", None, "user", {"role": "user", "content": "hello"})
            + _claude_line("a1", "u1", "assistant", {"id": "msg_1", "type": "message", "role": "assistant",
                                                   "model": "claude-sonnet-4-5-20250929",
                                                   "content": [{"type": "text", "text": "hi"}],
                                                   "usage": usage}))


def _git(repo: Path, *args: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env)


@pytest.fixture
def hook_env(tmp_path):
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.com", LOOKOUT_NO_CONFIG="1")
    return env


def test_git_pre_commit_hook_refuses_a_transcript_over_budget(tmp_path, hook_env):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    shutil.copy(REPO / "integrations" / "pre-commit", repo / ".git" / "hooks" / "pre-commit")
    (repo / "small.jsonl").write_bytes(nearly_full_transcript(20_000))
    _git(repo, "add", "small.jsonl")
    ok = _git(repo, "commit", "-qm", "small", env=hook_env)
    assert ok.returncode == 0, ok.stderr
    (repo / "full.jsonl").write_bytes(nearly_full_transcript(190_000))  # 95% of a 200k window
    _git(repo, "add", "full.jsonl")
    refused = _git(repo, "commit", "-qm", "full", env=hook_env)
    assert refused.returncode != 0
    assert "full.jsonl is at or over 90%" in refused.stderr
    assert _git(repo, "log", "--oneline").stdout.count("\n") == 1  # only the first commit landed
    hook_env["LOOKOUT_FAIL_AT"] = "99"
    assert _git(repo, "commit", "-qm", "full", env=hook_env).returncode == 0


def test_pre_commit_framework_definition_names_real_commands():
    text = (REPO / ".pre-commit-hooks.yaml").read_text()
    assert "id: lookout-budget" in text and "lookout measure" in text and "--fail-at" in text


@pytest.mark.parametrize("command", FILTERS, ids="-".join)
def test_a_hook_event_drives_every_command(command, tmp_path):
    transcript = tmp_path / "session.jsonl"
    transcript.write_bytes(EXAMPLE.read_bytes())
    event = orjson.dumps({"session_id": "s1", "transcript_path": str(transcript), "cwd": str(tmp_path),
                          "hook_event_name": "UserPromptSubmit", "prompt": "go on"})
    by_hook = run_lookout(*command, "--from-hook", input=event, cwd=tmp_path)
    direct = run_lookout(*command, str(transcript), cwd=tmp_path)
    assert by_hook.returncode == direct.returncode == 0, by_hook.stderr
    assert by_hook.stdout == direct.stdout


def test_claude_code_hook_recipe_commands_run(tmp_path):
    settings = orjson.loads((REPO / "integrations" / "claude-code-settings.json").read_bytes())
    transcript = tmp_path / "session.jsonl"
    transcript.write_bytes(EXAMPLE.read_bytes())
    event = orjson.dumps({"session_id": "s1", "transcript_path": str(transcript), "hook_event_name": "x"})
    for entries in settings["hooks"].values():
        for hook in entries[0]["hooks"]:
            argv = hook["command"].split()
            assert argv[0] == "lookout"
            result = run_lookout(*argv[1:], input=event, cwd=tmp_path)
            assert result.returncode == 0, (hook["command"], result.stderr)
            assert b"Traceback" not in result.stderr
    # each recipe left a transcript the adapters still read
    assert run_lookout("measure", "--report-only", str(transcript)).returncode == 0


def test_bash_completion_script_loads_and_completes(tmp_path):
    env = dict(os.environ, _LOOKOUT_COMPLETE="bash_source")
    source = subprocess.run(lookout_exe(), capture_output=True, text=True, env=env)
    assert source.returncode == 0 and "complete" in source.stdout
    script = tmp_path / "lookout.bash"
    script.write_text(source.stdout)
    loaded = subprocess.run(["bash", "-c", f"source {script} && complete -p lookout"], capture_output=True, text=True)
    assert loaded.returncode == 0 and "lookout" in loaded.stdout
    env = dict(os.environ, _LOOKOUT_COMPLETE="bash_complete", COMP_WORDS="lookout me", COMP_CWORD="1")
    words = subprocess.run(lookout_exe(), capture_output=True, text=True, env=env).stdout.split()
    assert {"plain,measure", "plain,memory", "plain,mentions"} <= set(words)


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_other_shells_get_a_completion_script(shell):
    env = dict(os.environ, _LOOKOUT_COMPLETE=f"{shell}_source")
    result = subprocess.run(lookout_exe(), capture_output=True, text=True, env=env)
    assert result.returncode == 0 and "lookout" in result.stdout
