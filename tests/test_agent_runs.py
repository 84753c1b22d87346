"""The real-agent harness (tests/agent_runs.py) drives the pinned Claude Code and Codex CLI: they
resume the shared real transcripts, start new sessions, compact, run hooks, and ccusage reads a
session. Each agent run takes about 1.5-2.5 s; they skip when .ci/agents has not installed them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.error
import urllib.request

import pytest
from agent_runs import (
    FakeModel,
    ccusage_bin,
    codex_events,
    project_slug,
    request_texts,
    run_claude,
    run_codex,
)
from conftest import SHARED_TRANSCRIPTS

CLAUDE_SESSIONS = [
    "claude-code/ccviewer-fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl",
    "claude-code/agentsessions-claude-small-schema-coverage.jsonl",
    "claude-code/agentsessions-subagent/0a1b2c3d-4e5f-4061-8071-2a3b4c5d6e7f.jsonl",
    "claude-code/claudecodelog-dag_compact_after_rewind.jsonl",
]
CODEX_ROLLOUT = "codex/rollout-2025-11-17T15-30-28-019a93b9-f380-7600-98ff-940e6b99603c.jsonl"


def _shared(name: str):
    path = SHARED_TRANSCRIPTS / name
    if not path.exists():
        pytest.skip(f"{name} is not among the shared transcripts here")
    return path


def _records(path) -> list[dict]:
    return [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def _last_user_text(run) -> str:
    texts = request_texts({"messages": [m for m in run.last_request_body()["messages"]
                                        if m.get("role") == "user"][-1:]})
    return "\n".join(texts)


def _post(url: str, body: dict, headers: dict | None = None) -> tuple[int, bytes, str]:
    request = urllib.request.Request(url, json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", **(headers or {})})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return answer.status, answer.read(), answer.headers["Content-Type"]


def test_fake_model_answers_both_apis_and_records_requests():
    with FakeModel(reply="fake words") as model:
        key = "loopback-" + "key" * 4
        status, data, kind = _post(model.base_url + "/v1/messages?beta=true",
                                   {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                                   {"x-api-key": key})
        assert (status, kind) == (200, "application/json")
        assert json.loads(data)["content"][0]["text"] == "fake words"
        _, data, kind = _post(model.base_url + "/v1/messages", {"stream": True, "messages": []})
        assert kind == "text/event-stream" and b'"text": "fake words"' in data
        assert data.rstrip().endswith(b'{"type": "message_stop"}')
        _, data, kind = _post(model.base_url + "/v1/responses", {"stream": True, "input": []})
        assert kind == "text/event-stream" and b"event: response.completed" in data
        _, data, _ = _post(model.base_url + "/v1/responses", {"input": []})
        assert json.loads(data)["output"][0]["content"][0]["text"] == "fake words"
        upgrade = urllib.request.Request(model.base_url + "/v1/responses",
                                         headers={"Upgrade": "websocket", "Connection": "Upgrade"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(upgrade, timeout=10)
        assert refused.value.code == 426
        seen = model.requests
    assert [(r["method"], r["path"]) for r in seen] == [
        ("POST", "/v1/messages?beta=true"), ("POST", "/v1/messages"), ("POST", "/v1/responses"),
        ("POST", "/v1/responses"), ("GET", "/v1/responses")]
    assert seen[0]["body"]["messages"][0]["content"] == "hi"
    assert key not in json.dumps(seen)


@pytest.mark.parametrize("name", CLAUDE_SESSIONS, ids=lambda n: n.split("/")[-1][:30])
def test_claude_code_resumes_each_shared_session(tmp_path, name):
    source = _shared(name)
    run = run_claude(tmp_path, session=source, prompt="please continue the work")
    assert run.returncode == 0, run.stderr
    assert len(run.requests) == 1 and "resume" not in run.stderr.lower(), run.stderr
    assert "please continue the work" in _last_user_text(run)
    # history from the file reached the model, up to the conversation's last text
    originals = request_texts({"messages": [r["message"] for r in _records(source)
                                            if r.get("type") in ("user", "assistant")
                                            and not r.get("isSidechain")]})
    originals = [text.strip() for text in originals if text.strip()]
    assert originals[-1] in "\n".join(run.request_texts()[:-1])
    # it appended to the copy, which keeps the original bytes in front
    assert run.session_path.parent.name == project_slug(tmp_path / "proj")
    assert run.session_path.read_bytes().startswith(source.read_bytes())
    assert run.session_path.stat().st_size > source.stat().st_size
    assert run.stdout.strip() == "ok"


def test_claude_code_new_session_then_compact_then_resume(tmp_path):
    first = run_claude(tmp_path, prompt="first words of a new session")
    assert first.returncode == 0, first.stderr
    assert len(first.requests) == 1
    assert "first words of a new session" in _last_user_text(first)
    assert first.session_path is not None and first.session_path.exists()
    # /compact in -p mode: one summary request, answered with <summary>, written as a boundary
    compacted = run_claude(tmp_path, session=first.session_path, prompt="/compact")
    assert compacted.returncode == 0, compacted.stderr
    assert len(compacted.requests) == 1
    assert "create a detailed summary" in _last_user_text(compacted)
    assert compacted.session_path == first.session_path
    records = _records(first.session_path)
    assert any(r.get("subtype") == "compact_boundary" for r in records)
    assert any(r.get("isCompactSummary") for r in records)
    # resuming now starts from the summary the fake wrote
    after = run_claude(tmp_path, session=first.session_path, prompt="after the summary")
    assert after.returncode == 0, after.stderr
    assert "Fake summary of the conversation so far." in after.first_text()
    assert "first words of a new session" not in "\n".join(after.request_texts())


def test_claude_code_runs_hooks_from_settings(tmp_path):
    marker = tmp_path / "hook-input.json"
    command = f"{shutil.which('cat') or 'cat'} > {marker}; echo hook-context-words"
    settings = {"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command",
                                                           "command": command}]}]}}
    run = run_claude(tmp_path, prompt="with a hook", settings=settings)
    assert run.returncode == 0, run.stderr
    event = json.loads(marker.read_text())
    assert event["hook_event_name"] == "UserPromptSubmit" and event["prompt"] == "with a hook"
    assert "hook-context-words" in "\n".join(run.request_texts())


def test_codex_resumes_the_shared_rollout(tmp_path):
    source = _shared(CODEX_ROLLOUT)
    run = run_codex(tmp_path, session=source, prompt="please continue the work")
    assert run.returncode == 0, run.stderr
    events = codex_events(run)
    assert not [e for e in events if e.get("type") in ("error", "turn.failed")], run.stdout
    assert events[0] == {"type": "thread.started",
                         "thread_id": "019a93b9-f380-7600-98ff-940e6b99603c"}
    assert len(run.requests) == 1 and run.requests[0]["path"] == "/v1/responses"
    assert run.request_texts()[-1] == "please continue the work"
    user_texts = [c["text"] for r in _records(source) if r.get("type") == "response_item"
                  and r["payload"].get("role") == "user"
                  for c in r["payload"].get("content", []) if c.get("type") == "input_text"]
    assert user_texts and set(user_texts) <= set(run.request_texts())
    assert run.session_path.read_bytes().startswith(source.read_bytes())


def test_codex_new_session_and_hooks_in_exec_mode(tmp_path):
    marker = tmp_path / "hook-input.json"
    hooks = {"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command",
                                                        "command": f"cat > {marker}"}]}]}}
    run = run_codex(tmp_path, prompt="first words for codex", hooks=hooks)
    assert run.returncode == 0, run.stderr
    assert len(run.requests) == 1
    assert run.request_texts()[-1] == "first words for codex"
    assert run.session_path is not None
    assert _records(run.session_path)[0]["type"] == "session_meta"
    event = json.loads(marker.read_text())
    assert event["hook_event_name"] == "UserPromptSubmit"
    assert event["prompt"] == "first words for codex"


def test_ccusage_reads_a_claude_code_session(tmp_path):
    exe = ccusage_bin()
    version = subprocess.run([str(exe), "--version"], check=False, capture_output=True,
                             text=True, timeout=60)
    assert version.returncode == 0 and version.stdout.strip().endswith("20.0.24"), version
    source = _shared(CLAUDE_SESSIONS[0])
    config = tmp_path / "claude"
    (config / "projects" / "proj").mkdir(parents=True)
    shutil.copyfile(source, config / "projects" / "proj" / source.name)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path),
           "CLAUDE_CONFIG_DIR": str(config), "TZ": "UTC"}
    report = subprocess.run([str(exe), "session", "--json", "--offline"], check=False,
                            capture_output=True, text=True, timeout=60, env=env)
    assert report.returncode == 0, report.stderr
    sessions = json.loads(report.stdout)["session"]
    assert [(s["agent"], s["period"]) for s in sessions] == [("claude", source.stem)]
    assert sessions[0]["outputTokens"] > 0 and sessions[0]["modelsUsed"], sessions
