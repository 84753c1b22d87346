"""``-i`` (and ``-o`` onto the input) never loses a line an agent appends while lookout works:
the agent only appends, and replacing the file with what was read would drop those lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import orjson
import pytest
from conftest import lookout_exe
from test_compact_fixtures import write

# A line each format's agent appends: a new user prompt, continuing from the last line.
APPENDED = {
    "codex": lambda n, last: {"timestamp": "2026-11-30T10:00:00.000Z", "type": "response_item",
                              "payload": {"type": "message", "role": "user",
                                          "content": [{"type": "input_text", "text": f"appended {n}"}]}},
    "openai": lambda n, last: {"role": "user", "content": f"appended {n}"},
    "anthropic": lambda n, last: {"role": "user", "content": f"appended {n}"},
    "claude-code": lambda n, last: {"parentUuid": last.get("uuid"), "isSidechain": False, "type": "user",
                                    "uuid": f"appended-{n}", "sessionId": last.get("sessionId"),
                                    "timestamp": "2026-11-30T10:00:00.000Z",
                                    "message": {"role": "user", "content": f"appended {n}"}},
}


def _appended_lines(fmt: str, path, count: int = 3) -> bytes:
    last = orjson.loads(path.read_bytes().splitlines()[-1])
    return b"".join(orjson.dumps(APPENDED[fmt](n, last)) + b"\n" for n in range(count))


def _env(tmp_path) -> dict:
    return dict(os.environ, LOOKOUT_SAVE_DIR=str(tmp_path / "saved"), LOOKOUT_NO_CONFIG="1")


def _summarizer_that_appends(tmp_path, path, lines: bytes) -> str:
    """A summarizer command that, while compact waits for it, appends ``lines`` to ``path`` as
    the agent would (open, append, close), then gives a note. Only its first call appends: a
    verification pass asks the summarizer a second time."""
    script = tmp_path / "agent_appends.py"
    once = tmp_path / "appended"
    script.write_text("import os, sys\nsys.stdin.read()\n"
                      f"if not os.path.exists({str(once)!r}):\n"
                      f"    open({str(once)!r}, 'w').close()\n"
                      f"    with open({str(path)!r}, 'ab') as f:\n        f.write({lines!r})\n"
                      "print('## Summary\\nThe work so far: the CSV importer was ported; tests pass.')\n")
    return f"command:{sys.executable} {script}"


@pytest.mark.parametrize("fmt", ["claude-code", "codex", "openai", "anthropic"])
@pytest.mark.parametrize("how", ["-i", "-o"])
def test_lines_appended_while_compacting_follow_the_result(tmp_path, fmt, how):
    path = write(tmp_path, fmt, turns=14)
    before = path.read_bytes()
    lines = _appended_lines(fmt, path)
    target = ["-i"] if how == "-i" else ["-o", str(path)]
    done = subprocess.run([*lookout_exe(), "compact", "--force", "--summarizer",
                           _summarizer_that_appends(tmp_path, path, lines), *target, str(path)],
                          capture_output=True, env=_env(tmp_path), timeout=120)
    assert done.returncode == 0, done.stderr
    after = path.read_bytes()
    assert after != before + lines  # compacted
    assert after.endswith(lines), "the appended lines come after the result, in order"
    assert b"carried over 3 line(s) appended to" in done.stderr
    restored = subprocess.run([*lookout_exe(), "restore", str(path)], capture_output=True, env=_env(tmp_path))
    assert restored.returncode == 0 and lines in restored.stdout


def test_a_claude_code_compaction_refuses_lines_it_cannot_carry(tmp_path):
    """Claude Code's lines name their parent. A compaction moves the kept messages, the last
    one included, after its summary, so what the agent appends follows them (above); when the
    file ends in a line the compaction does not move (here the session's title), lines appended
    after it may continue the conversation from before the compaction. The file is left as it is."""
    path = write(tmp_path, "claude-code", turns=14)
    last = json.loads(path.read_bytes().splitlines()[-1])
    with open(path, "ab") as handle:
        handle.write(json.dumps({"type": "summary", "summary": "Port the CSV importer",
                                 "leafUuid": last["uuid"]}).encode() + b"\n")
    before = path.read_bytes()
    lines = _appended_lines("claude-code", path)
    done = subprocess.run([*lookout_exe(), "compact", "--force", "--summarizer",
                           _summarizer_that_appends(tmp_path, path, lines), "-i", str(path)],
                          capture_output=True, env=_env(tmp_path), timeout=120)
    assert done.returncode == 2
    err = done.stderr.decode()
    assert err.strip().splitlines()[-1] == (
        f"lookout: error: {path} grew by 3 line(s) while lookout worked, and they continue the conversation "
        "from before this run's changes; left as it is (run again)")
    assert path.read_bytes() == before + lines


def _claude_session_with_images(tmp_path):
    """A Claude Code session with 12 noise images the agent has seen (about 1.5 MB)."""
    from test_security_images import chat, noise

    path = tmp_path / "images.jsonl"
    path.write_bytes(chat("claude-code", [noise((160, 160)) for _ in range(12)]))
    return path


RACES = {  # an in-place edit that keeps every line in its place (a Claude Code line keeps its parent)
    "compact": (lambda tmp_path: write(tmp_path, "claude-code", turns=30, output_chars=20_000),
                ["compact", "--stage", "prune", "-i"], b"prune"),
    "clear-images": (_claude_session_with_images, ["clear-images", "--budget", "400KB", "-i"], b"cleared"),
}


@pytest.mark.parametrize("command", RACES)
@pytest.mark.parametrize("round", range(2))
def test_lines_appended_during_an_in_place_edit_are_never_lost(tmp_path, command, round):
    """A real race: an agent appends a line every few milliseconds while lookout edits the file
    in place. Whatever the timing, every appended line is in the file afterwards, once. (One the
    agent appends in the instant of the replace reaches the new file just after it, and so may
    land after a line appended a moment later: kept, though not in order.)"""
    make, args, said = RACES[command]
    path = make(tmp_path)
    last = orjson.loads(path.read_bytes().splitlines()[-1])
    stop = threading.Event()
    appended: list[bytes] = []

    def agent():
        n = 0
        while not stop.is_set():
            line = orjson.dumps(APPENDED["claude-code"](n, last)) + b"\n"
            with open(path, "ab") as f:
                f.write(line)
            appended.append(line)
            n += 1
            time.sleep(0.005)

    writer = threading.Thread(target=agent)
    writer.start()
    try:
        done = subprocess.run([*lookout_exe(), *args, str(path)], capture_output=True, env=_env(tmp_path), timeout=120)
    finally:
        time.sleep(0.05)
        stop.set()
        writer.join()
    assert done.returncode in (0, 2), done.stderr
    assert done.returncode == 0 or b"while lookout worked" in done.stderr, done.stderr
    text = path.read_bytes()
    positions = [text.find(line) for line in appended]
    assert -1 not in positions, f"{positions.count(-1)} of {len(appended)} appended lines lost"
    assert all(text.count(line) == 1 for line in appended)
    out_of_order = sum(a > b for a, b in zip(positions, positions[1:]))
    assert out_of_order <= 1, out_of_order
    if done.returncode == 0:
        assert said in done.stderr and appended, done.stderr
