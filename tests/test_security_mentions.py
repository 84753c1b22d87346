"""``@chat:`` stays inside the workspace and never attaches a secret word for word (issue 32, item 1).

Each test runs the installed ``lookout mentions`` on a prompt that mentions another chat: a real
Codex rollout (or a real Claude Code session with a compaction summary) from the shared
transcripts, copied into a tmp workspace with an AWS secret key and a GitHub token written into
what the user said. Another chat is a file like any other: outside the root (an absolute path,
``..``, a symlink that leaves it) or ignored, it is refused; inside, it is attached with every
secret masked, and the report says so.
"""

from __future__ import annotations

import json
import random
import re
import string
from pathlib import Path

import pytest
from conftest import SHARED_TRANSCRIPTS, run_lookout

ROLLOUT = SHARED_TRANSCRIPTS / "codex" / "rollout-2025-11-17T15-30-28-019a93b9-f380-7600-98ff-940e6b99603c.jsonl"
COMPACTED = SHARED_TRANSCRIPTS / "claude-code" / "claudecodelog-dag_compact_after_rewind.jsonl"
FIRST_PROMPT = "finish up the users work by rigging up the chatbot-ui"  # how the rollout's prompt starts

pytestmark = pytest.mark.skipif(not (ROLLOUT.exists() and COMPACTED.exists()), reason="no shared transcripts")

# Made at run time, so that no secret-shaped literal sits in the repository for scanners to flag.
_rng = random.Random(32)
AWS_SECRET = "".join(_rng.choice(string.ascii_letters + string.digits + "/+") for _ in range(40))
GITHUB_TOKEN = "ghp_" + "".join(_rng.choice(string.ascii_letters + string.digits) for _ in range(36))
SAID = f"push with {GITHUB_TOKEN} and deploy with AWS_SECRET_ACCESS_KEY={AWS_SECRET}. "


def leaks(data: bytes) -> list[str]:
    """Every 12-character piece of a secret found in ``data`` (a masked preview shows at most 8)."""
    text = data.decode("utf-8", "replace")
    return [s[i : i + 12] for s in (AWS_SECRET, GITHUB_TOKEN) for i in range(len(s) - 11) if s[i : i + 12] in text]


def codex_chat(dest: Path, before: str = "") -> Path:
    """The real rollout, its user's prompt starting with ``before`` and the two secrets."""
    lines = []
    for line in ROLLOUT.read_text().splitlines():
        rec = json.loads(line)
        payload = rec.get("payload") or {}
        if payload.get("type") == "message" and payload.get("role") == "user":
            for part in payload["content"]:
                if part.get("type") == "input_text" and part["text"].startswith(FIRST_PROMPT):
                    part["text"] = before + SAID + part["text"]
        elif payload.get("type") == "user_message" and payload["message"].startswith(FIRST_PROMPT):
            payload["message"] = before + SAID + payload["message"]
        lines.append(json.dumps(rec))
    text = "\n".join(lines) + "\n"
    assert text.count(GITHUB_TOKEN) == 2  # the prompt as the model saw it and as the user typed it
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(text)
    return dest


@pytest.fixture
def workspace(tmp_path) -> Path:
    """ws/ (the root) holding a chat, a chat outside it, and links from inside to outside."""
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "app.py").write_text("print('hello')\n")
    codex_chat(ws / "chats" / "deploy.jsonl")
    codex_chat(tmp_path / "elsewhere" / "deploy.jsonl")
    (ws / "chats" / "link.jsonl").symlink_to(Path("..") / ".." / "elsewhere" / "deploy.jsonl")
    (ws / "outdir").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    return ws


def mention(ws: Path, text: str) -> tuple[dict, str, bytes]:
    """Run ``lookout mentions`` on a one-prompt chat saying ``text``: (the outcome of its one
    mention from the JSON report, the text of the message it wrote, all it printed)."""
    chat = ws.parent / "asking.jsonl"
    chat.write_text(json.dumps({"role": "user", "content": text}) + "\n")
    report = ws.parent / "report.json"
    res = run_lookout("mentions", "--root", str(ws), "--report", str(report), str(chat), cwd=ws)
    assert res.returncode == 0, res.stderr.decode()
    (outcome,) = json.loads(report.read_text())["messages"][0]["mentions"]
    message = json.loads(res.stdout)["content"]
    return outcome, "\n".join(part["text"] for part in message), res.stdout + res.stderr


@pytest.mark.parametrize(
    ("written", "reason"),
    [
        ("@chat:{outside}", "outside the workspace root (an absolute path"),
        ("@chat:../elsewhere/deploy.jsonl", "outside the workspace root (through .."),
        ("@chat:src/../../elsewhere/deploy.jsonl", "outside the workspace root (through .."),
        ("@chat:chats/link.jsonl", "a symlink leads outside the workspace root"),
        ("@chat:outdir/deploy.jsonl", "a symlink leads outside the workspace root"),
    ],
)
def test_chat_outside_the_workspace_is_refused(workspace, written, reason):
    written = written.format(outside=workspace.parent / "elsewhere" / "deploy.jsonl")
    outcome, text, printed = mention(workspace, f"continue from {written} please")
    assert outcome["status"] == "refused" and outcome["reason"].startswith(reason), outcome
    assert f"refused {written}: {reason}".encode() in printed
    assert "lookout-attachment" not in text and FIRST_PROMPT.encode() not in printed
    assert leaks(printed) == []


def test_chat_inside_the_workspace_is_attached_with_its_secrets_masked(workspace):
    outcome, text, printed = mention(workspace, "continue from @chat:chats/deploy.jsonl please")
    assert outcome["status"] == "attached" and outcome["path"] == "chats/deploy.jsonl", outcome
    assert leaks(printed) == []
    (note,) = outcome["warnings"]
    assert re.match(r"masked \d+ secrets? from the chat: ", note), note
    assert f"note: {note}".encode() in printed  # the reason, in the report on stderr too
    assert "Digest of chat deploy.jsonl (codex; no compaction summary recorded): 1 prompts." in text
    assert "1. push with " in text and FIRST_PROMPT in text  # the rest of the prompt is kept


def test_a_secret_where_the_digest_cuts_a_prompt_short_is_masked_whole(workspace):
    # The token starts at character 280 of the prompt; the digest keeps 300 characters of it.
    codex_chat(workspace / "chats" / "long.jsonl", before="w " * 135)
    outcome, text, printed = mention(workspace, "see @chat:chats/long.jsonl")
    assert outcome["status"] == "attached", outcome
    assert leaks(printed) == []
    assert "1. w w w" in text


def test_a_compaction_summary_is_masked_too(workspace):
    summary = "Summary: the user asked for a plan."
    text = COMPACTED.read_text()
    assert summary in text
    said = f"Summary: the user asked for a plan with the token {GITHUB_TOKEN} and the AWS secret key: {AWS_SECRET}."
    (workspace / "chats" / "compacted.jsonl").write_text(text.replace(summary, said))
    outcome, text, printed = mention(workspace, "see @chat:chats/compacted.jsonl")
    assert outcome["status"] == "attached" and outcome["warnings"], outcome
    assert leaks(printed) == []
    assert "its latest compaction summary" in text and "the user asked for a plan with the token" in text


def test_an_ignored_chat_is_refused_like_any_ignored_file(workspace):
    codex_chat(workspace / "private" / "deploy.jsonl")
    (workspace / ".lookoutignore").write_text("private/\n")
    outcome, text, printed = mention(workspace, "see @chat:private/deploy.jsonl")
    assert outcome["status"] == "refused" and outcome["reason"].startswith("ignored by .lookoutignore"), outcome
    assert "lookout-attachment" not in text and FIRST_PROMPT.encode() not in printed and leaks(printed) == []
