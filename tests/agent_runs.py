"""Run the real Claude Code and Codex CLI against a loopback fake model, and keep what they send.

The agents come from ``.ci/agents``, which installs the pinned versions with npm into
``$LOOKOUT_TEST_AGENTS`` (default ``${XDG_CACHE_HOME:-~/.cache}/lookout/test-agents``; read when
this module is imported, before conftest gives each test its own XDG folders). A missing agent
skips the test and says how to get it.

    claude_bin(), codex_bin(), ccusage_bin() -> Path     (or pytest.skip naming .ci/agents)

    FakeModel(reply="ok", summary=...)   context manager: ThreadingHTTPServer on 127.0.0.1:0
        .base_url, .requests         every request: {method, path, headers (secrets redacted), body}
        Answers /v1/messages (SSE and plain, count_tokens) and /v1/responses (SSE and plain,
        /responses/compact), 426 to a WebSocket upgrade (Codex then posts over HTTP), {} elsewhere.
        Claude Code's compaction request gets "<summary>SUMMARY</summary>", so `-p /compact` works
        (one request; PreCompact and SessionStart "compact" hooks run, the status line does not).

    run_claude(tmp_path, *, session=None, prompt="continue", settings=None, cwd=None,
               extra_args=(), timeout=120, reply="ok") -> AgentRun
        With ``session`` (a .jsonl path) its copy goes to $HOME/.claude/projects/<slug>/<id>.jsonl
        (the sibling <stem>/ folder of subagents along; id: the file name if a UUID, else its
        first UUID sessionId) and ``claude -p PROMPT --resume ID`` runs; without, ``claude -p
        PROMPT`` starts a new session. Claude Code appends to that copy. ``settings`` (dict)
        becomes $HOME/.claude/settings.json (hooks). Runs in ``cwd`` (default tmp_path/proj).
    run_codex(tmp_path, *, session=None, prompt="continue", hooks=None, config_extra="",
              timeout=120, reply="ok") -> AgentRun
        With ``session`` the rollout goes to $CODEX_HOME/sessions/YYYY/MM/DD/rollout-<ts>-<id>.jsonl
        and ``codex exec --skip-git-repo-check --json resume ID PROMPT`` runs; without,
        ``codex exec --skip-git-repo-check --json PROMPT``. The fake is served as the provider the
        rollout records (Codex refuses to switch). ``hooks`` (dict) becomes $CODEX_HOME/hooks.json
        and adds --dangerously-bypass-hook-trust (without it `codex exec` skips them silently);
        ``config_extra`` (TOML) goes into config.toml. Runs in tmp_path/proj.

    AgentRun: returncode (None: killed at the timeout), stdout, stderr, requests (model requests
        only: POST …/messages or …/responses), home (the throwaway HOME, or CODEX_HOME, under
        tmp_path), session_path (the session file the run created or changed, else None),
        all_requests; last_request_body(), request_texts(body=None) (every text of the system
        prompt and the messages/input, in order), first_text() (first conversation text that is
        not a <system-reminder>: after a compaction, the summary).
    request_texts(body), codex_events(run) (the --json event stream), project_slug(cwd).

Both agents get an environment built from scratch: PATH, locale, TERM and TZ from ours, a
throwaway HOME and XDG folders, a dummy key and the fake's URL; telemetry, updates and other
traffic are off. A second run in the same tmp_path reuses the same HOME, so a test can resume
what an earlier run wrote (``session=first.session_path``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
import zlib
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Self

import pytest

AGENTS = Path(os.environ.get("LOOKOUT_TEST_AGENTS")
              or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
              / "lookout" / "test-agents")
KEEP_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ")
SECRET_HEADERS = {"authorization", "x-api-key", "cookie", "proxy-authorization",
                  "chatgpt-account-id", "openai-organization", "openai-project"}
# not shaped like a real key: nothing here is ever sent beyond 127.0.0.1
DUMMY_KEY = "loopback-test-key"
UUID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
ROLLOUT_NAME = re.compile(r"rollout-(\d{4})-(\d{2})-(\d{2})T\d{2}-\d{2}-\d{2}-(.+)\.jsonl")
# The instruction Claude Code puts in its compaction request (2.1.x); the answer must hold a summary.
COMPACT_MARKERS = ("create a detailed summary of the conversation",
                   "an <analysis> block followed by a <summary> block")


# ---- where the agents are -------------------------------------------------------------------

def _agent(folder: str, name: str) -> Path:
    exe = AGENTS / folder / "node_modules" / ".bin" / name
    if exe.exists():
        return exe
    if shutil.which("npm") is None:
        pytest.skip(f"{name} is not installed in {AGENTS} and npm is missing "
                    "(install Node.js with npm, then run .ci/agents)")
    pytest.skip(f"{name} is not installed in {AGENTS}: run .ci/agents "
                "(or set LOOKOUT_TEST_AGENTS to where it put them)")


def claude_bin() -> Path:
    """Claude Code's executable (the pinned npm install), or skip the test."""
    return _agent("claude", "claude")


def codex_bin() -> Path:
    """Codex CLI's executable (the npm wrapper, a node script), or skip the test."""
    exe = _agent("codex", "codex")
    if shutil.which("node") is None:
        pytest.skip("node is missing: the Codex CLI wrapper needs it (install Node.js)")
    return exe


def ccusage_bin() -> Path:
    """ccusage's executable (a node script), or skip the test."""
    exe = _agent("ccusage", "ccusage")
    if shutil.which("node") is None:
        pytest.skip("node is missing: ccusage needs it (install Node.js)")
    return exe


# ---- the fake model -------------------------------------------------------------------------

def _texts(content) -> list[str]:
    """Texts of a message's content: a string, or blocks/parts with text (tool results too)."""
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    if isinstance(content, list):
        for part in content:
            if not isinstance(part, dict):
                continue
            if isinstance(part.get("text"), str):
                out.append(part["text"])
            elif part.get("type") == "tool_result":
                out += _texts(part.get("content"))
            elif isinstance(part.get("output"), str):  # Responses function_call_output
                out.append(part["output"])
    return out


def _reminder(text: str) -> bool:
    """A text the agent adds on its own: Claude Code's <system-reminder> block."""
    text = text.strip()
    return text.startswith("<system-reminder>") and text.endswith("</system-reminder>")


def request_texts(body: dict) -> list[str]:
    """Every text of a Messages or Responses request body, in order: the system prompt (system or
    instructions), then each message's (or input item's) texts, tool results included."""
    out = _texts(body.get("system"))
    if isinstance(body.get("instructions"), str):
        out.append(body["instructions"])
    for item in body.get("messages") or body.get("input") or []:
        if isinstance(item, dict):
            out += _texts(item.get("content"))
            if isinstance(item.get("output"), str):
                out.append(item["output"])
            out += _texts(item.get("summary"))  # reasoning summaries
    return out


def _is_compaction(body: dict) -> bool:
    # the instruction ends the last user message (2.1.3xx puts a role "system" entry after it)
    users = [m for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "user"]
    text = " ".join(_texts(users[-1].get("content"))) if users else ""
    return any(marker in text for marker in COMPACT_MARKERS)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format, *args):  # the request list is the record
        pass

    def _body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            self.rfile.readline()
            return b"".join(chunks)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _record(self, raw: bytes):
        try:
            if (self.headers.get("Content-Encoding") or "").lower() in ("gzip", "deflate"):
                raw = zlib.decompress(raw, 47)
            body = json.loads(raw) if raw else None
        except (ValueError, zlib.error):
            body = {"_text": raw.decode("utf-8", "replace")}
        headers = {k: f"<redacted {len(v)} chars>" if k.lower() in SECRET_HEADERS else v
                   for k, v in self.headers.items()}
        with self.server.lock:
            self.server.requests.append({"method": self.command, "path": self.path,
                                         "headers": headers, "body": body})
        return body

    def _json(self, obj, status=200):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", "req_fake_" + uuid.uuid4().hex[:12])
        self.end_headers()
        self.wfile.write(data)

    def _sse(self, events):
        data = "".join(f"event: {name}\ndata: {json.dumps(payload)}\n\n"
                       for name, payload in events).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", "req_fake_" + uuid.uuid4().hex[:12])
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._record(b"")
        if (self.headers.get("Upgrade") or "").lower() == "websocket":
            # no WebSocket here: 426 makes Codex fall back to HTTP POST at once
            self._json({"error": {"message": "no websocket on the fake model"}}, status=426)
        elif self.path.split("?")[0].rstrip("/").endswith("/models"):
            self._json({"data": [], "models": [], "object": "list", "has_more": False})
        else:
            self._json({})

    def do_HEAD(self):
        self._record(b"")
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        body = self._record(self._body())
        body = body if isinstance(body, dict) else {}
        path = self.path.split("?")[0].rstrip("/")
        if path.endswith("/messages/count_tokens"):
            self._json({"input_tokens": 100})
        elif path.endswith("/messages"):
            self._messages(body)
        elif path.endswith("/responses/compact"):
            self._json({"output": [self._responses_message(self.server.summary)]})
        elif path.endswith("/responses"):
            self._responses(body)
        else:
            self._json({})

    def do_PUT(self):
        self._record(self._body())
        self._json({})

    do_DELETE = do_PATCH = do_PUT

    def _messages(self, body: dict):
        text = self.server.reply
        if _is_compaction(body):
            text = f"<analysis>fake analysis</analysis>\n<summary>{self.server.summary}</summary>"
        usage = {"input_tokens": 100, "output_tokens": 5,
                 "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        message = {"id": "msg_fake_" + uuid.uuid4().hex[:20], "type": "message",
                   "role": "assistant", "model": body.get("model") or "claude-fake",
                   "content": [{"type": "text", "text": text}],
                   "stop_reason": "end_turn", "stop_sequence": None, "usage": usage}
        if not body.get("stream"):
            self._json(message)
            return
        self._sse([
            ("message_start", {"type": "message_start", "message": dict(
                message, content=[], stop_reason=None, usage=dict(usage, output_tokens=1))}),
            ("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": {"type": "text", "text": ""}}),
            ("ping", {"type": "ping"}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "text_delta", "text": text}}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta", "usage": {"output_tokens": 5},
                               "delta": {"stop_reason": "end_turn", "stop_sequence": None}}),
            ("message_stop", {"type": "message_stop"}),
        ])

    @staticmethod
    def _responses_message(text: str) -> dict:
        return {"type": "message", "id": "msg_fake_" + uuid.uuid4().hex[:20],
                "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}

    def _responses(self, body: dict):
        item = self._responses_message(self.server.reply)
        usage = {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": 105}
        response = {"id": "resp_fake_" + uuid.uuid4().hex[:20], "object": "response",
                    "created_at": int(time.time()), "status": "completed",
                    "model": body.get("model") or "gpt-fake", "output": [item], "usage": usage}
        if not body.get("stream"):
            self._json(response)
            return
        started = dict(response, status="in_progress", output=[], usage=None)
        self._sse([(event["type"], event) for event in (
            {"type": "response.created", "sequence_number": 0, "response": started},
            {"type": "response.output_item.added", "sequence_number": 1, "output_index": 0,
             "item": dict(item, status="in_progress", content=[])},
            {"type": "response.output_text.delta", "sequence_number": 2, "item_id": item["id"],
             "output_index": 0, "content_index": 0, "delta": self.server.reply},
            {"type": "response.output_item.done", "sequence_number": 3, "output_index": 0,
             "item": item},
            {"type": "response.completed", "sequence_number": 4, "response": response},
        )])


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # a client hanging up early (after the refused WebSocket, say) is normal
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class FakeModel:
    """A loopback model endpoint that answers every model request with ``reply`` and records it.

    A Claude Code compaction request (and Codex's /responses/compact) is answered with
    ``summary`` instead, so the agent's own compaction completes."""

    def __init__(self, reply: str = "ok", summary: str = "Fake summary of the conversation so far."):
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.reply = reply
        self._server.summary = summary
        self._server.lock = threading.Lock()
        self._server.requests = []
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def requests(self) -> list[dict]:
        with self._server.lock:
            return list(self._server.requests)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def _model_request(request: dict) -> bool:
    path = request["path"].split("?")[0].rstrip("/")
    return request["method"] == "POST" and path.endswith(("/messages", "/responses"))


# ---- running an agent -----------------------------------------------------------------------

@dataclass
class AgentRun:
    """What one agent run did: its exit, its output, and the model requests it sent."""

    returncode: int | None  # None: killed at the timeout
    stdout: str
    stderr: str
    requests: list[dict]  # model requests only (POST /messages, /responses), in order
    home: Path  # the throwaway HOME (Claude Code) or CODEX_HOME (Codex)
    session_path: Path | None = None  # the session file the agent wrote or appended
    all_requests: list[dict] = field(default_factory=list)  # everything the fake saw

    def last_request_body(self) -> dict:
        assert self.requests, f"the agent sent no model request\n{self.stderr[-2000:]}"
        return self.requests[-1]["body"]

    def request_texts(self, body: dict | None = None) -> list[str]:
        """Every text of ``body`` (default: the last model request), system prompt first."""
        return request_texts(self.last_request_body() if body is None else body)

    def first_text(self) -> str:
        """The first text of the last request's conversation (not its system prompt, nor a
        <system-reminder> block): for Claude Code the first message's, for Codex the first user
        or assistant message's. After a compaction it is the summary the agent resumes from."""
        body = self.last_request_body()
        for item in body.get("messages") or body.get("input") or []:
            if isinstance(item, dict) and ("messages" in body
                                           or item.get("role") in ("user", "assistant")):
                for text in _texts(item.get("content")):
                    if not _reminder(text):
                        return text
        return ""


def _env(home: Path, extra: dict) -> dict:
    env = {k: os.environ[k] for k in KEEP_ENV if k in os.environ}
    env.setdefault("PATH", os.defpath)
    env.update(HOME=str(home), USER="tester", LOGNAME="tester", SHELL="/bin/sh",
               XDG_CONFIG_HOME=str(home / ".config"), XDG_CACHE_HOME=str(home / ".cache"),
               XDG_DATA_HOME=str(home / ".local" / "share"),
               XDG_STATE_HOME=str(home / ".local" / "state"),
               NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    env.update(extra)
    return env


def _run(cmd: list[str], cwd: Path, env: dict, timeout: float) -> tuple[int | None, str, str]:
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # its own process group: helpers go too
        out, err = proc.communicate()
        code = None
    return code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def _records(path: Path) -> list[dict]:
    return _objects(path.read_bytes().splitlines())


def _objects(lines) -> list[dict]:
    """The JSON objects among ``lines`` (others skipped)."""
    out = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            out.append(record)
    return out


def _stamps(files) -> dict[Path, tuple[int, int]]:
    return {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in files}


def _written(before: dict, after: dict) -> Path | None:
    """The newest file the run created or changed."""
    changed = [(stamp, p) for p, stamp in after.items() if before.get(p) != stamp]
    return max(changed)[1] if changed else None


def project_slug(cwd: Path) -> str:
    """Claude Code's folder name for a working directory (the short-path rule)."""
    slug = re.sub(r"[^A-Za-z0-9]", "-", str(cwd))
    assert len(slug) <= 200, f"working directory too long for Claude Code's plain slug: {cwd}"
    return slug


def _claude_session_id(session: Path) -> str:
    stem = session.name.removesuffix(".jsonl")
    if UUID_RE.fullmatch(stem):
        return stem
    for record in _records(session):
        sid = record.get("sessionId")
        if isinstance(sid, str) and UUID_RE.fullmatch(sid):
            return sid
    return str(uuid.uuid4())


def run_claude(tmp_path: Path, *, session: Path | None = None, prompt: str = "continue",
               settings: dict | None = None, cwd: Path | None = None, extra_args=(),
               timeout: float = 120, reply: str = "ok") -> AgentRun:
    """Run ``claude -p PROMPT`` (``--resume`` a copy of ``session`` when given); see the module
    docstring."""
    exe = claude_bin()
    tmp_path = Path(os.path.realpath(tmp_path))
    home = tmp_path / "claude-home"
    cwd = Path(os.path.realpath(cwd or tmp_path / "proj"))
    cwd.mkdir(parents=True, exist_ok=True)
    projects = home / ".claude" / "projects" / project_slug(cwd)
    projects.mkdir(parents=True, exist_ok=True)
    # a finished first run, so nothing interactive is even considered
    config = home / ".claude.json"
    if not config.exists():
        config.write_text(json.dumps({"hasCompletedOnboarding": True, "projects": {str(cwd): {
            "hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True}}}))
    if settings is not None:
        (home / ".claude" / "settings.json").write_text(json.dumps(settings, indent=1))
    args = [str(exe), "-p", prompt]
    if session is not None:
        session = Path(session)
        sid = _claude_session_id(session)
        target = projects / f"{sid}.jsonl"
        if session.resolve() != target.resolve():
            shutil.copyfile(session, target)
            sidecar = session.with_suffix("")  # <stem>/subagents/…
            if sidecar.is_dir():
                shutil.copytree(sidecar, projects / sid, dirs_exist_ok=True)
        args += ["--resume", sid]
    args += list(extra_args)
    before = _stamps(projects.glob("*.jsonl"))
    with FakeModel(reply=reply) as model:
        env = _env(home, {
            "ANTHROPIC_BASE_URL": model.base_url, "ANTHROPIC_API_KEY": DUMMY_KEY,
            "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_AUTOUPDATER": "1", "DISABLE_BUG_COMMAND": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
        })
        code, out, err = _run(args, cwd, env, timeout)
        seen = model.requests
    written = _written(before, _stamps(projects.glob("*.jsonl")))
    return AgentRun(code, out, err, [r for r in seen if _model_request(r)], home, written, seen)


def _rollout_place(session: Path, codex_home: Path) -> tuple[str, Path]:
    """The id Codex resumes by, and where the rollout copy goes under CODEX_HOME."""
    meta = next((r["payload"] for r in _records(session)
                 if r.get("type") == "session_meta" and isinstance(r.get("payload"), dict)), {})
    sid = meta.get("id") or meta.get("session_id")
    named = ROLLOUT_NAME.fullmatch(session.name)
    if not (isinstance(sid, str) and sid):
        sid = named.group(4) if named else str(uuid.uuid4())
    if named and named.group(4) == sid:
        y, m, d = named.group(1, 2, 3)
        return sid, codex_home / "sessions" / y / m / d / session.name
    try:
        when = dt.datetime.fromisoformat(str(meta.get("timestamp")))
    except ValueError:
        when = dt.datetime.now(dt.UTC)
    name = f"rollout-{when:%Y-%m-%dT%H-%M-%S}-{sid}.jsonl"
    return sid, codex_home / "sessions" / f"{when:%Y}" / f"{when:%m}" / f"{when:%d}" / name


def _provider(session: Path | None) -> str:
    if session is not None:
        for record in _records(session):
            if record.get("type") == "session_meta" and isinstance(record.get("payload"), dict):
                provider = record["payload"].get("model_provider")
                if isinstance(provider, str) and re.fullmatch(r"[A-Za-z0-9_.-]+", provider):
                    return provider
                break
    return "openai"


def _codex_config(base_url: str, provider: str, extra: str) -> tuple[str, dict]:
    """config.toml that reaches the fake as ``provider``, and the key variable it reads."""
    quote = json.dumps  # a JSON string is a TOML basic string
    if provider == "openai":
        head = [f"openai_base_url = {quote(base_url + '/v1')}"]
        tables = []
        env = {"OPENAI_API_KEY": DUMMY_KEY}
    else:
        head = [f"model_provider = {quote(provider)}"]
        tables = [f"[model_providers.{quote(provider)}]", f"name = {quote(provider)}",
                  f"base_url = {quote(base_url + '/v1')}", 'wire_api = "responses"',
                  'env_key = "FAKE_PROVIDER_API_KEY"', "request_max_retries = 0",
                  "stream_max_retries = 0"]
        env = {"FAKE_PROVIDER_API_KEY": DUMMY_KEY}
    # top-level keys of config_extra must come before any table
    extra_lines = extra.strip().splitlines()
    split = next((i for i, line in enumerate(extra_lines) if line.lstrip().startswith("[")),
                 len(extra_lines))
    lines = [*head, "check_for_update_on_startup = false", *extra_lines[:split],
             "[analytics]", "enabled = false", *tables, *extra_lines[split:]]
    return "\n".join(lines) + "\n", env


def run_codex(tmp_path: Path, *, session: Path | None = None, prompt: str = "continue",
              hooks: dict | None = None, config_extra: str = "", timeout: float = 120,
              reply: str = "ok") -> AgentRun:
    """Run ``codex exec … [resume ID] PROMPT`` (resuming a copy of ``session`` when given); see
    the module docstring."""
    exe = codex_bin()
    tmp_path = Path(os.path.realpath(tmp_path))
    home, codex_home, cwd = tmp_path / "codex-user", tmp_path / "codex-home", tmp_path / "proj"
    for folder in (home, codex_home, cwd):
        folder.mkdir(parents=True, exist_ok=True)
    args = [str(exe), "exec", "--skip-git-repo-check", "--json"]
    if hooks is not None:
        (codex_home / "hooks.json").write_text(json.dumps(hooks, indent=1))
        args.append("--dangerously-bypass-hook-trust")  # untrusted hooks are skipped silently
    if session is not None:
        session = Path(session)
        sid, target = _rollout_place(session, codex_home)
        if session.resolve() != target.resolve():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(session, target)
        args += ["resume", sid]
    args.append(prompt)
    rollouts = codex_home / "sessions"
    before = _stamps(rollouts.rglob("rollout-*.jsonl"))
    with FakeModel(reply=reply) as model:
        config, key = _codex_config(model.base_url, _provider(session), config_extra)
        (codex_home / "config.toml").write_text(config)
        env = _env(home, {"CODEX_HOME": str(codex_home), "RUST_BACKTRACE": "0", **key})
        code, out, err = _run(args, cwd, env, timeout)
        seen = model.requests
    written = _written(before, _stamps(rollouts.rglob("rollout-*.jsonl")))
    return AgentRun(code, out, err, [r for r in seen if _model_request(r)], codex_home,
                    written, seen)


def codex_events(run: AgentRun) -> list[dict]:
    """The JSON events of a ``codex exec --json`` run's stdout."""
    return _objects(run.stdout.splitlines())
