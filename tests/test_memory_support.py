"""Helpers shared by the memory tests (imported as ``test_memory_support``): the CLI runner,
real git repositories in tmp folders, and small transcripts in every format."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from click.testing import CliRunner

from lookout_cli.commands.memory import memory

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(cwd, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_ENV)
    env["HOME"] = str(cwd if Path(cwd).is_dir() else Path(cwd).parent)
    proc = subprocess.run(["git", "-c", "init.defaultBranch=main", "-c", "protocol.file.allow=always", *args],
                          cwd=cwd, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def make_repo(path: Path, commits: int = 3, tag: str = "") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q")
    for i in range(commits):
        (path / f"f{i}.txt").write_text(f"{tag}{i}\n")
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", f"commit {tag}{i}")
    return path


def run(*args: str, input: str | None = None):
    """Invoke ``lookout memory ARGS`` in process; returns click's Result."""
    return CliRunner().invoke(memory, list(args), input=input, catch_exceptions=False)


def ok(*args: str, input: str | None = None):
    result = run(*args, input=input)
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    return result


def listed(*scope: str) -> list[dict]:
    out = ok("list", "--json", *scope).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def notes(*scope: str) -> list[str]:
    return [m["note"] for m in listed(*scope)]


def make_data(tmp_path, monkeypatch) -> Path:
    """A fresh lookout data folder, the working folder outside any repository (each test
    module wraps this in its own ``data`` fixture)."""
    folder = tmp_path / "data"
    monkeypatch.setenv("LOOKOUT_DATA_DIR", str(folder))
    monkeypatch.setenv("LOOKOUT_NO_CONFIG", "1")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return folder


# --- small transcripts, one per format, with real user prompts -------------------------------
def claude_code(prompts: list[str], cwd: str = "/nowhere") -> bytes:
    lines = [{"type": "permission-mode", "permissionMode": "default", "sessionId": "S9"}]
    parent = None
    for i, text in enumerate(prompts):
        uid, aid = f"u{i}", f"a{i}"
        lines.append({"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": cwd,
                      "sessionId": "S9", "version": "2.1.150", "type": "user",
                      "message": {"role": "user", "content": text}, "uuid": uid,
                      "timestamp": f"2026-02-01T09:0{i}:00.000Z"})
        lines.append({"parentUuid": uid, "isSidechain": False, "userType": "external", "cwd": cwd,
                      "sessionId": "S9", "version": "2.1.150",
                      "message": {"id": f"msg_{i}", "type": "message", "role": "assistant",
                                  "model": "claude-opus-4-1", "content": [{"type": "text", "text": "Done."}],
                                  "usage": {"input_tokens": 10, "output_tokens": 5}},
                      "requestId": f"req_{i}", "type": "assistant", "uuid": aid,
                      "timestamp": f"2026-02-01T09:0{i}:05.000Z"})
        parent = aid
    return b"".join(json.dumps(x).encode() + b"\n" for x in lines)


def codex(prompts: list[str], cwd: str = "/nowhere") -> bytes:
    lines = [{"timestamp": "2025-11-20T10:00:00.000Z", "type": "session_meta",
              "payload": {"id": "sess-m", "timestamp": "2025-11-20T10:00:00.000Z", "cwd": cwd,
                          "originator": "codex_cli_rs", "cli_version": "0.58.0", "source": "cli",
                          "model_provider": "openai"}}]
    for i, text in enumerate(prompts):
        lines.append({"timestamp": f"2025-11-20T10:0{i}:01.000Z", "type": "response_item",
                      "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}})
        lines.append({"timestamp": f"2025-11-20T10:0{i}:02.000Z", "type": "event_msg",
                      "payload": {"type": "user_message", "message": text, "images": []}})
        lines.append({"timestamp": f"2025-11-20T10:0{i}:03.000Z", "type": "response_item",
                      "payload": {"type": "message", "role": "assistant",
                                  "content": [{"type": "output_text", "text": "Done."}]}})
    return b"".join(json.dumps(x).encode() + b"\n" for x in lines)


def openai(prompts: list[str]) -> bytes:
    lines = [{"role": "system", "content": "You are terse."}]
    for text in prompts:
        lines += [{"role": "user", "content": text}, {"role": "assistant", "content": "Done."}]
    return b"".join(json.dumps(x).encode() + b"\n" for x in lines)


def anthropic(prompts: list[str]) -> bytes:
    lines = []
    for i, text in enumerate(prompts):
        lines += [{"role": "user", "content": [{"type": "text", "text": text}]},
                  {"role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_{i}", "name": "ls",
                                                     "input": {"path": "."}}]},
                  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}",
                                                "content": "a.txt"}]},
                  {"role": "assistant", "content": [{"type": "text", "text": "Done."}]}]
    return b"".join(json.dumps(x).encode() + b"\n" for x in lines)


def gemini(prompts: list[str]) -> bytes:
    lines = [{"sessionId": "gem-9", "projectHash": "0b7dfb12", "startTime": "2026-05-01T10:00:00.000Z",
              "lastUpdated": "2026-05-01T10:00:00.000Z", "kind": "main"}]
    for i, text in enumerate(prompts):
        lines.append({"id": f"u{i}", "timestamp": f"2026-05-01T10:0{i}:01.000Z", "type": "user",
                      "content": [{"text": text}]})
        lines.append({"id": f"g{i}", "timestamp": f"2026-05-01T10:0{i}:03.000Z", "type": "gemini",
                      "content": "Done.", "model": "gemini-2.5-pro"})
    return b"".join(json.dumps(x).encode() + b"\n" for x in lines)


BUILDERS = {"claude-code": claude_code, "codex": codex, "openai": openai, "anthropic": anthropic,
            "gemini-cli": gemini}


def test_builders_are_detected():
    import io

    from lookout_cli.core.jsonl import read_records
    from lookout_cli.formats import detect

    for name, build in BUILDERS.items():
        records = list(read_records(io.BytesIO(build(["hello there"]))))
        adapter = detect(records)
        assert adapter is not None and adapter.name == name
