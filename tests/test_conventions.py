"""The filter contract (SPEC §1), checked for every registered filter command in real
subprocesses of the installed ``lookout``. A new command gets these tests for free."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import time

import click
import orjson
import pytest
from conftest import SHARED_TRANSCRIPTS, lookout_exe, run_lookout

from lookout_cli.cli import cli


def _filters(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command that takes the filter options (found by its --from-hook parameter)."""
    found = []
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            found += _filters(command, (*prefix, name))
        elif any(p.name == "from_hook" for p in command.params):
            found.append((*prefix, name))
    return found


FILTERS = _filters(cli)
INPUTS = [
    "claude-code/agentsessions-claude-small-schema-coverage.jsonl",
    "claude-code/claudecodelog-dag_compact_after_rewind.jsonl",
    "codex/agentsessions-codex-small-schema-coverage.jsonl",
    "codex/agentsessions-codex_053_rate_limit.jsonl",
    "gemini-cli/agentsessions-gemini-jsonl_v040.jsonl",
]
UNKNOWN = [
    b'{"type":"lookout-test-unknown","payload":{"big":123456789012345678901234567890,"s":"caf\\u00e9 \\ud800"}}\n',
    b"this line is not JSON\n",
    b'{"weird" :  [1, 2.50, {"nested": null}] }\r\n',
]
ID = lambda p: "-".join(p)  # noqa: E731


def _input(name: str) -> bytes:
    path = SHARED_TRANSCRIPTS / name
    if not path.exists():
        pytest.skip(f"{path} is not here")
    data = path.read_bytes()
    if not data.endswith(b"\n"):
        data += b"\n"
    lines = data.splitlines(keepends=True)
    # unknown records go in the middle and at the end
    middle = len(lines) // 2
    return b"".join(lines[:middle] + UNKNOWN[:2] + lines[middle:] + UNKNOWN[2:])


@pytest.fixture
def env(tmp_path):
    environ = dict(os.environ)
    environ["LOOKOUT_SAVE_DIR"] = str(tmp_path / "saved")
    environ["LOOKOUT_DATA_DIR"] = str(tmp_path / "data")
    environ["LOOKOUT_CACHE_DIR"] = str(tmp_path / "cache")
    return environ


def test_every_command_is_registered():
    assert {"restore"} <= {p[0] for p in FILTERS}
    for path in FILTERS:
        assert run_lookout(*path, "--help").returncode == 0


@pytest.mark.parametrize("command", FILTERS, ids=ID)
@pytest.mark.parametrize("name", INPUTS)
def test_passthrough_idempotence_and_pure_stdout(command, name, env, tmp_path):
    data = _input(name)
    first = run_lookout(*command, input=data, env=env, cwd=tmp_path)
    assert first.returncode == 0, first.stderr.decode()
    out = first.stdout
    # stdout is only the transcript: every line is JSON or an input line passed through
    input_lines = set(data.splitlines(keepends=True))
    for line in out.splitlines(keepends=True):
        if line not in input_lines:
            orjson.loads(line)
    # unknown records and non-JSON lines pass through byte for byte and in order
    positions = [out.find(u) for u in UNKNOWN]
    assert all(p >= 0 for p in positions), f"unknown records lost: {positions}"
    assert positions == sorted(positions[:2]) + positions[2:]
    second = run_lookout(*command, input=out, env=env, cwd=tmp_path)
    assert second.returncode == 0, second.stderr.decode()
    assert second.stdout == out, "a second run changed the transcript"


@pytest.mark.parametrize("command", FILTERS, ids=ID)
def test_empty_input_gives_empty_output(command, env, tmp_path):
    result = run_lookout(*command, input=b"", env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout == b""


@pytest.mark.parametrize("command", FILTERS, ids=ID)
def test_terminal_on_stdin_is_a_usage_error(command, env, tmp_path):
    leader, follower = pty.openpty()
    try:
        result = subprocess.run([*lookout_exe(), *command], stdin=follower, capture_output=True,
                                env=env, cwd=tmp_path, timeout=60)
    finally:
        os.close(leader)
        os.close(follower)
    assert result.returncode == 2
    assert b"terminal" in result.stderr
    assert b"Traceback" not in result.stderr


@pytest.mark.parametrize("command", FILTERS, ids=ID)
def test_missing_file_is_one_line_exit_2(command, env, tmp_path):
    result = run_lookout(*command, str(tmp_path / "nope.jsonl"), env=env, cwd=tmp_path)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr.decode()
    assert b"nope.jsonl" in result.stderr


@pytest.mark.parametrize("command", FILTERS, ids=ID)
def test_closed_pipe_exits_141(command, env, tmp_path):
    # enough output that the writer meets the closed pipe
    big = _input(INPUTS[2]) * 40
    path = tmp_path / "big.jsonl"
    path.write_bytes(big)
    script = f"set -o pipefail; {' '.join(lookout_exe())} {' '.join(command)} {path} | head -c1 >/dev/null"
    result = subprocess.run(["bash", "-c", script], capture_output=True, env=env, cwd=tmp_path, timeout=120)
    assert result.returncode == 141, result.stderr.decode()
    assert b"Traceback" not in result.stderr


@pytest.mark.parametrize("command", FILTERS, ids=ID)
def test_ctrl_c_exits_130(command, env, tmp_path):
    # stdin stays open and empty, so the command is waiting for input when Ctrl-C arrives
    # SIGINT as a terminal gives it: a runner started in the background (nohup, `&`) passes it on
    # ignored, and Python then leaves it ignored
    proc = subprocess.Popen([*lookout_exe(), *command], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=tmp_path,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        time.sleep(2.0)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err.decode()
    assert b"Traceback" not in err


@pytest.mark.parametrize("command", FILTERS, ids=ID)
def test_strict_refuses_non_json(command, env, tmp_path):
    result = run_lookout(*command, "--strict", input=b'{"role":"user","content":"hi"}\nnot json\n',
                         env=env, cwd=tmp_path)
    assert result.returncode == 2
    assert b"<stdin>:2" in result.stderr
