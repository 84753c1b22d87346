"""``lookout mentions`` end to end, in real subprocesses, for every transcript format: the
attachments land in the targeted user message in the format's own shape, nothing else changes
(byte compare), a second run adds nothing, and the report says what happened."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import pytest
from conftest import SHARED_TRANSCRIPTS, run_lookout
from PIL import Image

from lookout_cli.core.jsonl import read_records
from lookout_cli.formats import Transcript, load_adapter
from lookout_cli.formats.view import IMAGE, TEXT

P_OLD = "first: see @src/app.py please"
P_NEW = 'now @src/app.py#L2-3, @"docs/read me.md"#usage, @shot.png, @.env, @debug.log and @../out.txt'
ENV = {"isSidechain": False, "userType": "external", "sessionId": "s-1", "version": "2.1.0", "gitBranch": "main"}


def j(obj) -> str:
    return json.dumps(obj, separators=(",", ":"))


def claude_code(root: str, prompts=(P_OLD, P_NEW)) -> list[dict]:
    recs, parent = [], None
    for n, p in enumerate(prompts):
        uid = f"u{n}"
        recs.append({"parentUuid": parent, **ENV, "cwd": root, "type": "user",
                     "message": {"role": "user", "content": p}, "uuid": uid,
                     "timestamp": f"2025-01-01T00:00:{n * 2:02}.000Z"})
        parent = uid
        if n < len(prompts) - 1:
            aid = f"a{n}"
            recs.append({"parentUuid": parent, **ENV, "cwd": root, "type": "assistant",
                         "message": {"id": f"msg_{n}", "type": "message", "role": "assistant",
                                     "model": "claude-sonnet-4-5", "content": [{"type": "text", "text": "ok"}],
                                     "stop_reason": "end_turn", "stop_sequence": None,
                                     "usage": {"input_tokens": 10, "output_tokens": 2}},
                         "requestId": f"req_{n}", "uuid": aid, "timestamp": f"2025-01-01T00:00:{n * 2 + 1:02}.000Z"})
            parent = aid
    return recs


def codex(root: str, prompts=(P_OLD, P_NEW)) -> list[dict]:
    recs = [{"timestamp": "2025-01-01T00:00:00.000Z", "type": "session_meta",
             "payload": {"id": "019a0000-0000-7000-8000-000000000000", "timestamp": "2025-01-01T00:00:00.000Z",
                         "cwd": root, "originator": "codex_cli_rs", "cli_version": "0.58.0", "instructions": None}}]
    for n, p in enumerate(prompts):
        ts = f"2025-01-01T00:00:{n * 2 + 1:02}.000Z"
        recs.append({"timestamp": ts, "type": "response_item",
                     "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": p}]}})
        recs.append({"timestamp": ts, "type": "event_msg", "payload": {"type": "user_message", "message": p, "images": []}})
        if n < len(prompts) - 1:
            recs.append({"timestamp": ts, "type": "response_item",
                         "payload": {"type": "message", "role": "assistant",
                                     "content": [{"type": "output_text", "text": "ok"}]}})
    return recs


def openai(root: str, prompts=(P_OLD, P_NEW)) -> list[dict]:
    recs = [{"role": "system", "content": "be brief"}]
    for n, p in enumerate(prompts):
        recs.append({"role": "user", "content": p})
        if n < len(prompts) - 1:
            recs.append({"role": "assistant", "content": "ok"})
    return recs


def anthropic(root: str, prompts=(P_OLD, P_NEW)) -> list[dict]:
    recs = []
    for n, p in enumerate(prompts):
        recs.append({"role": "user", "content": [{"type": "text", "text": p}]})
        if n < len(prompts) - 1:
            recs.append({"role": "assistant", "content": [{"type": "text", "text": "ok"}]})
    return recs


def openai_body(root: str, prompts=(P_OLD, P_NEW)) -> list[dict]:
    return [{"model": "gpt-4o", "messages": openai(root, prompts)}]


def anthropic_body(root: str, prompts=(P_OLD, P_NEW)) -> list[dict]:
    return [{"model": "claude-sonnet-4-5", "system": "be brief", "max_tokens": 1000, "messages": anthropic(root, prompts)}]


# name -> (builder, format, records the cwd itself, one body per line)
FORMATS = {
    "claude-code": (claude_code, "claude-code", True, False),
    "codex": (codex, "codex", True, False),
    "openai": (openai, "openai", False, False),
    "anthropic": (anthropic, "anthropic", False, False),
    "openai-body": (openai_body, "openai", False, True),
    "anthropic-body": (anthropic_body, "anthropic", False, True),
}


def sh(cwd, *args):
    subprocess.run(args, cwd=cwd, check=True, capture_output=True)


def png(w, h) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (w, h), (10, 90, 200)).save(buf, "PNG")
    return buf.getvalue()


@pytest.fixture
def repo(tmp_path) -> Path:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "docs").mkdir()
    sh(root, "git", "init", "-q")
    (root / "src/app.py").write_text("import os\nprint(1)\nprint(2)\nprint(3)\n")
    (root / "docs/read me.md").write_text("# Doc\n## Usage\nrun it\n## Other\nx\n")
    (root / "shot.png").write_bytes(png(4000, 1000))
    (root / ".env").write_text("TOKEN=abc\n")
    (root / ".gitignore").write_text("*.log\n")
    (root / "debug.log").write_text("log\n")
    (tmp_path / "out.txt").write_text("outside\n")
    return root


def transcript(tmp_path: Path, name: str, root: Path, prompts=(P_OLD, P_NEW), filename: str | None = None):
    builder = FORMATS[name][0]
    lines = [j(r) + "\n" for r in builder(str(root), prompts)]
    path = tmp_path / (filename or f"{name}.jsonl")
    path.write_text("".join(lines))
    return path, lines


def args_for(name: str, root: Path) -> list[str]:
    _, fmt, has_cwd, _ = FORMATS[name]
    out = ["--format", fmt]
    if not has_cwd:
        out += ["--root", str(root)]
    return out


def parse(data: bytes, fmt: str) -> Transcript:
    records = list(read_records(io.BytesIO(data)))
    return Transcript(records, load_adapter(fmt))


def message_items(data: bytes, fmt: str, prompt_text: str):
    view = parse(data, fmt).view()
    prompt = next(i for i in view.items if i.prompt and i.text == prompt_text)
    return [i for i in view.items if i.message == prompt.message]


@pytest.mark.parametrize("name", list(FORMATS))
def test_attachments_in_every_format(name, repo, tmp_path):
    path, lines = transcript(tmp_path, name, repo)
    report = tmp_path / "report.json"
    res = run_lookout("mentions", *args_for(name, repo), "--report", str(report), str(path), cwd=tmp_path)
    assert res.returncode == 0, res.stderr.decode()
    out = res.stdout
    _, fmt, _, body = FORMATS[name]

    # the new prompt's message now holds the header, the file, the section, the image
    items = message_items(out, fmt, P_NEW)
    texts = [i.text for i in items if i.kind == TEXT]
    header = next(t for t in texts if t.startswith('<lookout-mentions v="1">'))
    assert "- @src/app.py#L2-3: src/app.py lines 2-3" in header
    assert '- @"docs/read me.md"#usage: docs/read me.md lines 2-3' in header
    assert "- @.env: an environment file" in header
    assert "- @debug.log: ignored by .gitignore:1: *.log" in header
    assert "- @../out.txt: outside the workspace root" in header
    assert any(t.startswith('<lookout-attachment mention="@src/app.py#L2-3"') and "\nprint(1)\nprint(2)\n" in t
               for t in texts)
    assert any("## Usage\nrun it\n" in t for t in texts)
    images = [i for i in items if i.kind == IMAGE]
    assert len(images) == 1 and images[0].image.media_type == "image/png"
    assert not any("TOKEN=abc" in t or "outside\n" in t or "log\n" == t for t in texts)

    # the answered prompt is left alone (default scope: prompts not answered yet)
    old = message_items(out, fmt, P_OLD)
    assert not any("<lookout-" in i.text for i in old if i.kind == TEXT)

    # nothing but the targeted message changed
    out_lines = out.decode().splitlines(keepends=True)
    if body:
        assert len(out_lines) == 1
        before, after = json.loads(lines[0]), json.loads(out_lines[0])
        assert after["messages"][:-1] == before["messages"][:-1]
        assert {k: v for k, v in after.items() if k != "messages"} == {k: v for k, v in before.items() if k != "messages"}
    else:
        assert len(out_lines) == len(lines)
        changed = [n for n, (a, b) in enumerate(zip(lines, out_lines)) if a != b]
        assert len(changed) == 1
        assert P_NEW in json.loads(out_lines[changed[0]]).__repr__()

    # a second run adds nothing
    again = run_lookout("mentions", *args_for(name, repo), "-", input=out, cwd=tmp_path)
    assert again.returncode == 0 and again.stdout == out
    assert b"already expanded" in again.stderr

    # the report names every outcome with its reason, hash, sizes and tokens
    rep = json.loads(report.read_text())
    assert rep["format"] == fmt and rep["root"] == str(repo.resolve())
    ms = rep["messages"][0]["mentions"]
    assert [m["status"] for m in ms] == ["attached", "attached", "attached", "refused", "refused", "refused"]
    assert ms[0]["lines"] == "2-3" and len(ms[0]["sha256"]) == 64 and ms[0]["tokens"] > 0
    assert ms[2]["image"]["width"] == 2048 and ms[2]["image"]["source_width"] == 4000 and ms[2]["tokens"] > 0
    assert ms[4]["ignore"] == {"file": ".gitignore", "line": 1, "pattern": "*.log", "matched": "debug.log"}
    assert rep["totals"]["attached"] == 3 and rep["totals"]["refused"] == 3 and rep["totals"]["images"] == 1


@pytest.mark.parametrize("name", ["claude-code", "openai"])
def test_all_and_last_scopes(name, repo, tmp_path):
    path, _ = transcript(tmp_path, name, repo)
    _, fmt, _, _ = FORMATS[name]
    out = run_lookout("mentions", *args_for(name, repo), "--all", str(path)).stdout
    old = message_items(out, fmt, P_OLD)
    assert any(i.text.startswith("<lookout-mentions") for i in old)
    path2, _ = transcript(tmp_path, name, repo, prompts=("@src/app.py", "@src/app.py#L1"))
    out = run_lookout("mentions", *args_for(name, repo), "--last", str(path2)).stdout
    assert any(i.text.startswith("<lookout-mentions") for i in message_items(out, fmt, "@src/app.py#L1"))
    assert not any(i.text.startswith("<lookout-mentions") for i in message_items(out, fmt, "@src/app.py"))


def test_dry_run_and_check(repo, tmp_path):
    path, lines = transcript(tmp_path, "openai", repo)
    dry = run_lookout("mentions", "--root", str(repo), "--dry-run", str(path))
    assert dry.returncode == 0 and dry.stdout == path.read_bytes()
    assert b"would attach 3" in dry.stderr
    check = run_lookout("mentions", "--root", str(repo), "--check", str(path))
    assert check.returncode == 1 and check.stdout == path.read_bytes()
    done = run_lookout("mentions", "--root", str(repo), str(path)).stdout
    recheck = run_lookout("mentions", "--root", str(repo), "--check", "-", input=done)
    assert recheck.returncode == 0


def test_in_place(repo, tmp_path):
    path, _ = transcript(tmp_path, "claude-code", repo)
    res = run_lookout("mentions", "-q", "-i", str(path))
    assert res.returncode == 0 and res.stdout == b"" and res.stderr == b""
    assert b"<lookout-mentions" in path.read_bytes()


def test_root_defaults_to_the_recorded_cwd_then_the_current_folder(repo, tmp_path):
    path, _ = transcript(tmp_path, "claude-code", repo, prompts=("@src/app.py#L1",))
    out = run_lookout("mentions", "--report", "-", str(path), cwd=tmp_path)
    assert b'"status": "attached"' in out.stderr
    gone = tmp_path / "gone"
    path2, _ = transcript(tmp_path, "claude-code", gone, prompts=("@src/app.py#L1",))
    out = run_lookout("mentions", "--report", "-", str(path2), cwd=repo)
    assert b'"status": "attached"' in out.stderr and str(repo).encode() in out.stderr


def test_selection_problems_editors_and_workspace_flags(repo, tmp_path):
    problems = tmp_path / "p.txt"
    problems.write_text("src/app.py:2:1: error: bad print\n")
    editors = tmp_path / "e.txt"
    editors.write_text("src/app.py\ndocs/read me.md\n")
    path, _ = transcript(tmp_path, "openai", repo, prompts=("fix @selection given @problems in @editors; @workspace @git",))
    res = run_lookout("mentions", "--root", str(repo), "--selection", "src/app.py#L2-3", "--problems", str(problems),
                      "--editors", str(editors), str(path))
    assert res.returncode == 0, res.stderr.decode()
    items = message_items(res.stdout, "openai", "fix @selection given @problems in @editors; @workspace @git")
    texts = "\n".join(i.text for i in items)
    assert 'kind="selection" path="src/app.py" lines="2-3"' in texts
    assert "src/app.py:2:1: error: bad print" in texts
    assert "- docs/read me.md" in texts
    assert 'kind="workspace"' in texts and "  src/\n    app.py\n" in texts
    assert "$ git status --short --branch" in texts


def test_chat_summary_and_digest(repo, tmp_path):
    (repo / "chats").mkdir()
    other, _ = transcript(repo / "chats", "openai", repo, prompts=("plan the migration", "then write tests"),
                          filename="other chat.jsonl")
    shared = SHARED_TRANSCRIPTS / "claude-code/claudecodelog-dag_compact_after_rewind.jsonl"
    if shared.exists():
        (repo / "chats" / shared.name).write_bytes(shared.read_bytes())
    # An absolute path under the root is fine, as for any file mention.
    prompts = ((f'continue from @chat:"{other}" and @chat:chats/{shared.name}',) if shared.exists()
               else (f'@chat:"{other}"',))
    path, _ = transcript(tmp_path, "openai", repo, prompts=prompts)
    res = run_lookout("mentions", "--root", str(repo), str(path))
    assert res.returncode == 0, res.stderr.decode()
    texts = "\n".join(i.text for i in message_items(res.stdout, "openai", prompts[0]))
    assert "Digest of chat other chat.jsonl (openai; no compaction summary recorded): 2 prompts." in texts
    assert 'path="chats/other chat.jsonl"' in texts
    assert "1. plan the migration\n2. then write tests" in texts
    if shared.exists():
        assert "its latest compaction summary" in texts and "the user asked for a plan" in texts
    missing = transcript(tmp_path, "openai", repo, prompts=("@chat:nope.jsonl",))[0]
    res = run_lookout("mentions", "--root", str(repo), "--report", "-", str(missing))
    assert b"refused @chat:nope.jsonl: not found" in res.stderr


def test_many_images_in_the_request_scale_to_2000(repo, tmp_path):
    (repo / "wide.png").write_bytes(png(2048, 512))
    small = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + __import__("base64").b64encode(png(4, 4)).decode()}}
    recs = [{"role": "user", "content": [{"type": "text", "text": "old"}] + [small] * 20},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "and @wide.png"}]
    path = tmp_path / "many.jsonl"
    path.write_text("".join(j(r) + "\n" for r in recs))
    report = tmp_path / "r.json"
    res = run_lookout("mentions", "--root", str(repo), "--provider", "anthropic", "--report", str(report), str(path))
    assert res.returncode == 0, res.stderr.decode()
    image = json.loads(report.read_text())["messages"][0]["mentions"][0]["image"]
    assert image["width"] == 2000
    res = run_lookout("mentions", "--root", str(repo), "--report", str(report), str(path))  # openai: no such cap
    assert json.loads(report.read_text())["messages"][0]["mentions"][0]["image"]["width"] == 2048


def test_no_images_names_them(repo, tmp_path):
    path, _ = transcript(tmp_path, "openai", repo, prompts=("see @shot.png",))
    res = run_lookout("mentions", "--root", str(repo), "--no-images", str(path))
    items = message_items(res.stdout, "openai", "see @shot.png")
    assert not any(i.kind == IMAGE for i in items)
    assert any("Named only" in i.text and "--no-images" in i.text for i in items)


def test_content_the_agent_already_attached_is_not_attached_twice(repo, tmp_path):
    recs = claude_code(str(repo), prompts=("look at @src/app.py",))
    content = (repo / "src/app.py").read_text()
    recs.append({"parentUuid": "u0", **ENV, "cwd": str(repo), "type": "attachment", "uuid": "att1",
                 "timestamp": "2025-01-01T00:00:00.500Z",
                 "attachment": {"type": "file", "filename": str(repo / "src/app.py"),
                                "content": {"type": "text", "file": {"filePath": str(repo / "src/app.py"),
                                                                     "content": content, "numLines": 4,
                                                                     "startLine": 1, "totalLines": 4}}}})
    path = tmp_path / "cc.jsonl"
    path.write_text("".join(j(r) + "\n" for r in recs))
    res = run_lookout("mentions", "--report", "-", str(path))
    assert b"already in this message" in res.stderr


def test_nothing_to_do_is_an_identity(repo, tmp_path):
    path, _ = transcript(tmp_path, "codex", repo, prompts=("no mentions here, mail me@example.com",))
    res = run_lookout("mentions", str(path))
    assert res.returncode == 0 and res.stdout == path.read_bytes()
    empty = run_lookout("mentions", "-", input=b"")
    assert empty.returncode == 0 and empty.stdout == b""


def test_read_only_format_passes_through(repo, tmp_path):
    gem = SHARED_TRANSCRIPTS / "gemini-cli/agentsessions-gemini-jsonl_v040.jsonl"
    if not gem.exists():
        pytest.skip("no gemini fixture")
    res = run_lookout("mentions", "--root", str(repo), str(gem))
    assert res.returncode == 0 and res.stdout == gem.read_bytes()


@pytest.mark.parametrize("path", sorted(SHARED_TRANSCRIPTS.rglob("*.jsonl")) if SHARED_TRANSCRIPTS.is_dir() else [],
                         ids=lambda p: p.name)
def test_real_transcripts_pass_through_in_an_empty_folder(path, tmp_path):
    """Answered prompts stay as they are: a real session passes through byte for byte."""
    res = run_lookout("mentions", "--root", str(tmp_path), str(path), cwd=tmp_path)
    assert res.returncode == 0, res.stderr.decode()
    data = path.read_bytes()
    if res.stdout != data:  # only an unanswered last prompt may change
        changed = [a for a, b in zip(data.splitlines(), res.stdout.splitlines()) if a != b]
        assert len(changed) <= 1
    again = run_lookout("mentions", "--root", str(tmp_path), "-", input=res.stdout, cwd=tmp_path)
    assert again.stdout == res.stdout


def test_help_has_an_example_pipeline():
    res = run_lookout("mentions", "--help")
    assert res.returncode == 0
    assert b"lookout mentions < chat.jsonl | lookout clear-images" in res.stdout
    assert b"@workspace" in res.stdout and b"--allow-secret" in res.stdout


def test_limits_and_allowed_secrets_from_config(repo, tmp_path):
    import os

    (repo / ".env.test").write_text("A=1\n")
    for i in range(3):
        (repo / f"f{i}.txt").write_text(f"{i}\n")
    path, _ = transcript(tmp_path, "openai", repo, prompts=("@f0.txt @f1.txt @f2.txt @.env.test",))
    env = dict(os.environ, LOOKOUT_MENTIONS_MAX_MENTIONS="2", LOOKOUT_MENTIONS_ALLOW_SECRET=".env.test,x")
    rep = run_lookout("mentions", "--root", str(repo), "--report", "-", str(path), env=env)
    statuses = [m["status"] for m in json.loads(rep.stderr[rep.stderr.index(b"{"):rep.stderr.rindex(b"}") + 1])["messages"][0]["mentions"]]
    assert statuses == ["attached", "attached", "refused", "refused"]
    env["LOOKOUT_MENTIONS_MAX_MENTIONS"] = "9"
    rep = run_lookout("mentions", "--root", str(repo), "-q", str(path), env=env)
    assert b"A=1" in rep.stdout
    env["LOOKOUT_MENTIONS_MAX_CHARS"] = "lots"
    bad = run_lookout("mentions", "--root", str(repo), str(path), env=env)
    assert bad.returncode == 2 and b"mentions.max_chars: 'lots' is not a whole number" in bad.stderr
