"""Progress on long work (lookout_cli/core/progress.py), through the installed ``lookout`` with
standard error on a pseudo-terminal: shown there on a run that takes a while, erased before the
report or an error line; never in a pipe, with -q, under --from-hook or on a fast run; the
transcript the same byte for byte either way."""

from __future__ import annotations

import os
import pty
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson
import pytest
from conftest import DATA, REPO, lookout_exe

sys.path.insert(0, str(REPO))  # bench/ is a top-level folder of the repository, not installed
from bench.generate import Corpus, generate  # noqa: E402

PROGRESS = re.compile(rb"lookout: (reading|counting tokens): [\d.,]+ of [\d.,]+ (MB|lines|items) \(\d+%\)")
# what compact's new lines hold that differs from run to run: the time, fresh uuids and the ids
# made from them
FRESH = re.compile(rb'"timestamp":"[^"]*"|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}'
                   rb'|_lookout[0-9a-f]{8}')


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> Path:
    """A generated Claude Code session of 24 MB: a cold measure of it takes seconds, well over
    the delay before progress shows (8 MB took under one once each line was parsed once)."""
    path = tmp_path_factory.mktemp("big") / "session.jsonl"
    generate(path, "claude-code", 24, corpus=Corpus())
    return path


def _run(args: list[str], cwd: Path, terminal: bool = True, stdin: bytes | None = None,
         pause: float = 0.0) -> tuple[int, bytes, bytes]:
    """Run lookout with standard error on a pseudo-terminal (else a pipe) and standard output
    to a file: (status, standard output, what standard error showed). With ``pause``, standard
    input arrives in 20 parts that far apart, as from a slow disk or a network."""
    out = cwd / "stdout.bin"
    with open(out, "wb") as stdout:
        if not terminal:
            done = subprocess.run([*lookout_exe(), *args], input=stdin or b"", stdout=stdout,
                                  stderr=subprocess.PIPE, cwd=cwd, timeout=300)
            return done.returncode, out.read_bytes(), done.stderr
        leader, follower = pty.openpty()
        proc = subprocess.Popen([*lookout_exe(), *args], stdin=subprocess.PIPE, stdout=stdout, stderr=follower,
                                cwd=cwd)
    os.close(follower)
    threading.Thread(target=_feed, args=(proc.stdin, stdin or b"", pause), daemon=True).start()
    shown = b""
    while chunk := _read(leader):
        shown += chunk
    proc.wait(timeout=300)
    os.close(leader)
    return proc.returncode, out.read_bytes(), re.sub(rb"\x1b\[[0-9;]*m", b"", shown)  # colour aside


def _feed(pipe, data: bytes, pause: float) -> None:
    parts = 20 if pause else 1
    step = -(-len(data) // parts) or 1
    for start in range(0, len(data), step):
        if start:
            time.sleep(pause)
        pipe.write(data[start:start + step])
        pipe.flush()
    pipe.close()


def _read(leader: int) -> bytes:
    """What the terminal shows next (b"" once the other end is closed: the process is done)."""
    try:
        return os.read(leader, 65536)
    except OSError:
        return b""


def _line_before(shown: bytes, marker: bytes) -> bytes:
    """What the terminal's line holds where ``marker`` starts to be printed: each carriage
    return goes back to the line's start and what follows writes over it."""
    line = shown[: shown.index(marker)].rsplit(b"\n", 1)[-1]
    screen = b""
    for part in line.split(b"\r"):
        screen = part + screen[len(part):]
    return screen


def test_a_long_measure_shows_progress_and_erases_it_before_the_report(big, tmp_path):
    status, out, shown = _run(["measure", "--no-cache", str(big)], tmp_path)
    assert status == 0, shown.decode(errors="replace")
    report = shown.index(b"lookout measure:")
    assert PROGRESS.search(shown[:report]), shown[:2000]
    assert b"\n" not in shown[:report]  # progress is one line, redrawn in place
    assert _line_before(shown, b"lookout measure:").strip() == b""  # erased before the report
    assert not re.search(rb"\r(?!\n)", shown[report:])  # and never drawn again after it
    assert out == big.read_bytes()  # the transcript is untouched by it


def test_no_progress_in_a_pipe_with_quiet_or_from_a_hook(big, tmp_path):
    status, out, err = _run(["measure", "--no-cache", str(big)], tmp_path, terminal=False)
    assert status == 0 and b"lookout measure:" in err
    assert not PROGRESS.search(err) and b"\r" not in err
    assert out == big.read_bytes()
    status, out, shown = _run(["measure", "--no-cache", "-q", str(big)], tmp_path)
    assert status == 0 and shown == b""
    assert out == big.read_bytes()
    event = orjson.dumps({"transcript_path": str(big), "hook_event_name": "Stop"})
    status, out, shown = _run(["measure", "--no-cache", "--from-hook"], tmp_path, stdin=event)
    assert status == 0, shown
    assert not PROGRESS.search(shown) and not re.search(rb"\r(?!\n)", shown)
    # the same run with nothing to keep it quiet does show it
    status, out, shown = _run(["measure", "--no-cache", str(big)], tmp_path)
    assert PROGRESS.search(shown)


def test_a_fast_run_shows_no_progress(tmp_path):
    small = DATA / "measure" / "claude-small.jsonl"
    status, out, shown = _run(["measure", "--estimate", str(small)], tmp_path)  # no tokenizer to load
    assert status == 0, shown
    assert b"lookout measure:" in shown
    assert not re.search(rb"\r(?!\n)", shown)  # no carriage return but the terminal's own line ends
    assert out == small.read_bytes()


def test_ctrl_c_during_progress_gets_a_clean_line(big, tmp_path):
    """The line is erased on the way out, an error too: Ctrl-C while counting."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([*lookout_exe(), "measure", "--no-cache", str(big)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=follower, cwd=tmp_path,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    os.close(follower)
    shown = b""
    try:
        while not PROGRESS.search(shown):
            chunk = _read(leader)
            assert chunk, f"the run ended before it showed progress: {shown!r}"
            shown += chunk
        proc.send_signal(signal.SIGINT)
        while chunk := _read(leader):
            shown += chunk
        assert proc.wait(timeout=60) == 130, shown
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(leader)
    assert _line_before(shown, b"lookout: interrupted").strip() == b""
    assert b"Traceback" not in shown


def test_compact_shows_progress_and_writes_the_same_transcript(big, tmp_path):
    """Read from a pipe that takes two seconds to deliver the session: compact alone is now
    faster than the delay on a fast machine, so the file would not make it last."""
    args = ["compact", "--force", "-o", "out.jsonl"]
    status, _, shown = _run(args, tmp_path, stdin=big.read_bytes(), pause=0.1)
    assert status == 0, shown.decode(errors="replace")
    with_progress = FRESH.sub(b"", (tmp_path / "out.jsonl").read_bytes())
    summary = shown.index(b"compact:")
    assert re.search(rb"lookout: (reading|compacting|counting tokens|summarizing)", shown[:summary]), shown[:2000]
    assert _line_before(shown, b"compact:").strip() == b""
    status, _, err = _run(args, tmp_path, terminal=False, stdin=big.read_bytes())
    assert status == 0 and b"\r" not in err, err
    assert FRESH.sub(b"", (tmp_path / "out.jsonl").read_bytes()) == with_progress
