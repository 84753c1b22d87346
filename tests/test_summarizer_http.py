"""The HTTP summarizers against a real server on 127.0.0.1 that misbehaves on purpose: a slow
drip, a cut body, a null text, a huge body, 429/529 then success, an echoed key. Each failure
is one line and exit 2 within the deadline, with the transcript passed through untouched."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import lookout_exe
from test_compact_fixtures import write
from test_compact_summarizers import GOOD_NOTE, env_for, summaries

KEY = "zq-Hf83kLmN2pQrS7tUvW9xYz4AbCdEf6GhJkLmNpQ"
DEADLINE = 5


class Server:
    """Answers request number ``n`` (0 first) with ``self.respond(handler, n)``; records when
    each request came and its body."""

    def __init__(self) -> None:
        self.requests: list[tuple[float, dict]] = []
        self.respond = lambda handler, n: None
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                outer.requests.append((time.monotonic(), body))
                try:
                    outer.respond(self, len(outer.requests) - 1)
                except OSError:  # the client gave up: so do we
                    pass
                self.close_connection = True

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


def send(handler, status: int, value, headers: dict | None = None) -> None:
    data = value if isinstance(value, bytes) else json.dumps(value).encode()
    handler.send_response(status)
    for name, v in {"Content-Type": "application/json", "Content-Length": str(len(data)), **(headers or {})}.items():
        handler.send_header(name, v)
    handler.end_headers()
    handler.wfile.write(data)


def answer(kind: str, text) -> dict:
    if kind == "openai":
        return {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}
    return {"type": "message", "role": "assistant", "content": [{"type": "text", "text": text}], "stop_reason": "end_turn"}


@pytest.fixture
def server():
    s = Server()
    yield s
    s.server.shutdown()
    s.server.server_close()


def compact(server, tmp_path, kind="openai", *args, measure=False):
    """``lookout compact`` through ``kind`` at ``server``: (process, input bytes, seconds, peak RSS in KB
    when ``measure``)."""
    path = write(tmp_path, "anthropic", turns=6, output_chars=1500)
    if "--summary-timeout" not in args:  # every case has a deadline to end by
        args = ("--summary-timeout", str(DEADLINE), *args)
    argv = [*lookout_exe(), "compact", "--force", "--summarizer", kind, "--summary-url", server.url,
            "--summary-model", "m", "--summary-key-env", "SUMMARY_KEY", *args, str(path)]
    if measure:  # a fresh parent, so that its children's peak is lookout's alone
        argv = [sys.executable, "-c", ("import resource, subprocess, sys\n"
                "code = subprocess.run(sys.argv[1:]).returncode\n"
                "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
                "sys.exit(code)"), *argv]
    start = time.monotonic()
    r = subprocess.run(argv, capture_output=True, env=env_for(tmp_path, SUMMARY_KEY=KEY), timeout=120,
                       check=False)
    took = time.monotonic() - start
    server.finished = time.monotonic()
    peak = int(r.stderr.decode().splitlines()[-1]) if measure else None
    if measure:
        r.stderr = r.stderr.rsplit(b"\n", 2)[0] + b"\n"
    return r, path.read_bytes(), took, peak


def since(server) -> float:
    """Seconds from the first request the server received to the end of lookout's run."""
    return server.finished - server.requests[0][0]


def assert_failed_cleanly(r, before: bytes, reason: str, took: float | None = None,
                          deadline: float = DEADLINE) -> None:
    """Exit 2 with one line that says why, no traceback, the input passed through untouched, the
    key nowhere, and (``took``) by the deadline plus 5 s."""
    assert r.returncode == 2, r.stderr
    assert KEY[:16].encode() not in r.stderr + r.stdout and KEY[8:-8].encode() not in r.stderr
    if took is not None:  # from the first request on: the start of a loaded machine's process is not the call's
        assert took < deadline + 5, f"took {took:.1f} s after the first request"
    assert r.stdout == before  # passed through untouched
    lines = r.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lookout: error: compact:"), lines
    assert reason in lines[0] and "Traceback" not in r.stderr.decode()


@pytest.mark.parametrize("where", ["headers", "body"])
def test_a_slow_drip_ends_at_the_deadline(server, tmp_path, where):
    def drip(handler, n):
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
        if where == "body":
            handler.wfile.write(head)
        for byte in (head if where == "headers" else b'{"choices": [' + b" " * 1000)[:25]:
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
            time.sleep(1)

    server.respond = drip
    r, before, _, _ = compact(server, tmp_path, "openai", "--summary-timeout", "2")
    assert_failed_cleanly(r, before, "took longer than 2 s", since(server), deadline=2)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_a_cut_body_is_a_clear_error(server, tmp_path, kind):
    def cut(handler, n):
        data = json.dumps(answer(kind, GOOD_NOTE)).encode()
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(data) + 5000))
        handler.end_headers()
        handler.wfile.write(data[:40])

    server.respond = cut
    r, before, _, _ = compact(server, tmp_path, kind)
    assert_failed_cleanly(r, before, "broke off its answer", since(server))


def test_a_null_text_is_a_clear_error(server, tmp_path):
    server.respond = lambda handler, n: send(handler, 200, answer("anthropic", None))
    r, before, _, _ = compact(server, tmp_path, "anthropic")
    assert_failed_cleanly(r, before, "text block without text", since(server))


def test_a_huge_body_is_refused_without_reading_it(server, tmp_path):
    server.respond = lambda handler, n: send(handler, 400, {"error": {"message": "no"}})
    _, _, _, baseline = compact(server, tmp_path, "openai", measure=True)  # caches warm for the next run too

    def flood(handler, n):  # 64 MB of garbage, no length given
        handler.send_response(200)
        handler.send_header("Connection", "close")
        handler.end_headers()
        for _ in range(1024):
            handler.wfile.write(b"x" * 65_536)

    server.respond = flood
    r, before, _, peak = compact(server, tmp_path, "openai", measure=True)
    assert peak - baseline < 40_000, f"peak {peak:,} KB against {baseline:,} KB for a small error"
    assert_failed_cleanly(r, before, "over the 8,388,608-byte cap", since(server))


@pytest.mark.parametrize("kind,status", [("openai", 429), ("anthropic", 529), ("openai", 503)])
def test_overload_is_retried_honouring_retry_after(server, tmp_path, kind, status):
    def busy_twice(handler, n):
        if n == 0:
            send(handler, status, {"error": {"message": "slow down"}}, {"Retry-After": "2"})
        elif n == 1:
            send(handler, status, {"error": {"message": "slow down"}})
        else:
            send(handler, 200, answer(kind, GOOD_NOTE))

    server.respond = busy_twice
    r, _, _, _ = compact(server, tmp_path, kind, "--summary-timeout", "30")
    assert r.returncode == 0, r.stderr
    assert "Port the CSV importer." in summaries(r.stdout)[0]
    times = [t for t, _ in server.requests]
    assert len(times) == 4  # the fourth asks for what the note left out
    assert times[1] - times[0] >= 2  # Retry-After
    assert 0.4 <= times[2] - times[1] < 2.5  # backoff with jitter


def test_retries_stay_within_the_deadline(server, tmp_path):
    server.respond = lambda handler, n: send(handler, 503, {"error": {"message": "down"}}, {"Retry-After": "1"})
    r, before, _, _ = compact(server, tmp_path, "openai", "--summary-timeout", "3")
    assert_failed_cleanly(r, before, "answered 503", since(server), deadline=3)
    assert 2 <= len(server.requests) <= 4


def test_a_client_error_is_not_retried(server, tmp_path):
    server.respond = lambda handler, n: send(handler, 400, {"error": {"message": "unknown model m"}})
    r, before, _, _ = compact(server, tmp_path, "openai")
    assert_failed_cleanly(r, before, "answered 400: unknown model m")
    assert len(server.requests) == 1


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
@pytest.mark.parametrize("pad", [0, 150])  # 150: the key straddles where the detail is cut
@pytest.mark.parametrize("status", [401, 200])  # 200: an error object in a success answer
def test_an_echoed_key_is_never_printed(server, tmp_path, kind, pad, status):
    message = "x" * pad + f"Incorrect API key provided: {KEY}. Find yours at the console."
    server.respond = lambda handler, n: send(handler, status, {"type": "error", "error": {"message": message}})
    r, before, _, _ = compact(server, tmp_path, kind)
    assert_failed_cleanly(r, before, "Incorrect API key provided: [$SUMMARY_KEY]", since(server))


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_the_output_limit_sent_is_the_length_the_prompt_asks_for(server, tmp_path, kind):
    server.respond = lambda handler, n: send(handler, 200, answer(kind, GOOD_NOTE))
    r, _, _, _ = compact(server, tmp_path, kind)
    assert r.returncode == 0, r.stderr
    (_, body) = server.requests[0]
    asked = int(re.search(r"in at most about ([\d,]+) tokens", body["messages"][-1]["content"])[1].replace(",", ""))
    assert body["max_tokens"] == asked


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_a_key_the_model_repeats_stays_out_of_the_transcript(server, tmp_path, kind):
    server.respond = lambda handler, n: send(handler, 200, answer(kind, GOOD_NOTE + f"- debug: key {KEY}\n"))
    r, _, _, _ = compact(server, tmp_path, kind)
    assert r.returncode == 0, r.stderr
    assert KEY[:16].encode() not in r.stdout + r.stderr
    assert "[$SUMMARY_KEY]" in summaries(r.stdout)[0]


def test_retry_after_as_a_date_is_honoured():
    from email.utils import formatdate

    from lookout_cli.compaction.summarizers import _retry_wait

    assert 1.0 <= _retry_wait(formatdate(time.time() + 3, usegmt=True), 0) <= 3.0
    assert _retry_wait(formatdate(time.time() - 60, usegmt=True), 0) == 0.0
    assert 0.5 <= _retry_wait("soon", 0) <= 1.0
