"""The installed ``lookout memory`` in real subprocesses: exit codes 0/1/2, one-line errors,
help with examples for every subcommand."""

from __future__ import annotations

import json
import os
import zipfile

import click
import pytest
from conftest import run_lookout

from lookout_cli.commands.memory import memory

SUBCOMMANDS = sorted(memory.list_commands(click.Context(memory)))


@pytest.fixture
def env(tmp_path):
    environ = dict(os.environ)
    environ["LOOKOUT_DATA_DIR"] = str(tmp_path / "data")
    environ["LOOKOUT_NO_CONFIG"] = "1"
    (tmp_path / "work").mkdir()
    return environ


def lk(tmp_path, env, *args, input=b""):
    return run_lookout("memory", *args, input=input, cwd=tmp_path / "work", env=env)


def one_line_error(result) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr)
    err = result.stderr.decode()
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err
    return err


def test_subcommands():
    assert SUBCOMMANDS == ["edit", "export", "forget", "forgotten", "import", "inject", "learn", "list", "path",
                           "restore", "save", "show", "sync", "tidy"]


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_help_has_examples(sub, tmp_path, env):
    result = lk(tmp_path, env, sub, "--help")
    assert result.returncode == 0
    out = result.stdout.decode()
    assert "Examples:" in out and "lookout memory" in out
    assert out.isascii()


def test_group_help(tmp_path, env):
    out = lk(tmp_path, env, "--help").stdout.decode()
    assert "Scopes" in out and "Limits" in out and "Examples:" in out


def test_exit_codes(tmp_path, env):
    assert lk(tmp_path, env, "save", "A fine note").returncode == 0
    assert lk(tmp_path, env, "save", "Another note", "--check").returncode == 1
    assert lk(tmp_path, env, "save", "A fine note", "--check").returncode == 0
    assert lk(tmp_path, env, "list").returncode == 0
    assert "3 to 400" in one_line_error(lk(tmp_path, env, "save", "ab"))
    one_line_error(lk(tmp_path, env, "show", "no-such-memory"))
    one_line_error(lk(tmp_path, env, "forget", "no-such-memory"))
    one_line_error(lk(tmp_path, env, "restore", "no-such-memory"))
    one_line_error(lk(tmp_path, env, "save", "-A", "bad/name", "some note"))
    assert lk(tmp_path, env, "save").returncode == 2  # usage: no NOTE
    assert lk(tmp_path, env, "list", "--sort", "sideways").returncode == 2
    assert lk(tmp_path, env, "nonsense").returncode == 2


def test_secret_error_is_one_line_and_masked(tmp_path, env):
    import random
    import string

    r = random.Random(11)
    key = "AKIA" + "".join(r.choice(string.ascii_uppercase + "234567") for _ in range(16))
    err = one_line_error(lk(tmp_path, env, "save", f"AWS key {key}"))
    assert "aws-access-key-id" in err and key not in err and key[:4] + "…" in err


def test_zip_slip_exit_2_and_nothing_written(tmp_path, env):
    path = tmp_path / "slip.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("MEMORY.md", "- fine\n")
        zf.writestr("../../evil.md", "- evil\n")
    err = one_line_error(lk(tmp_path, env, "import", str(path)))
    assert "outside the archive" in err
    assert not (tmp_path / "data").exists()


def test_list_json_is_json_lines(tmp_path, env):
    lk(tmp_path, env, "save", "First note here")
    lk(tmp_path, env, "save", "-E", "Everywhere note")
    out = lk(tmp_path, env, "list", "--all", "--json").stdout.decode()
    rows = [json.loads(line) for line in out.splitlines()]
    assert {r["scope"] for r in rows} == {"everywhere", "project"}


def test_stdin_dash_on_a_terminal_is_a_usage_error(tmp_path, env):
    import pty
    import subprocess

    from conftest import lookout_exe

    leader, follower = pty.openpty()
    try:
        result = subprocess.run([*lookout_exe(), "memory", "save", "-"], stdin=follower, capture_output=True,
                                env=env, cwd=tmp_path / "work", timeout=60)
    finally:
        os.close(leader)
        os.close(follower)
    assert result.returncode == 2 and b"terminal" in result.stderr
