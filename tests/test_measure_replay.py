"""A quiet ``lookout measure FILE`` run again on the unchanged file is replayed without loading
the CLI (lookout_cli.meter.replay): the same bytes out, the same status and message; and it is not
replayed when anything the run depends on changed, or when it printed a report. The same
invocation over a file that changed since is measured again without click, with the flags click
read for it before, to the same figures, status and message.

Every run here is a real ``lookout`` process with Python's import log on (``PYTHONPROFILEIMPORTTIME``):
a replay is a run that imported neither click nor the measure (``lookout_cli.measure``); a
run again without click imported the measure but not click."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import orjson
import pytest
from xdg_base_dirs import xdg_config_home
from conftest import lookout_exe, real_transcripts, run_lookout

from lookout_cli.core import paths
from lookout_cli.config import Config
from lookout_cli.meter import replay
from lookout_cli.meter.snapshot import REUSED as replay_note


class Outcome:
    def __init__(self, done: subprocess.CompletedProcess) -> None:
        lines = done.stderr.splitlines(keepends=True)
        imports = [line for line in lines if line.startswith(b"import time:")]
        self.status = done.returncode
        self.stdout = done.stdout
        self.stderr = b"".join(line for line in lines if not line.startswith(b"import time:"))
        self.names = names = {line.rsplit(b"|", 1)[-1].strip() for line in imports}
        self.clicked = b"click" in names
        measured = b"lookout_cli.measure" in names
        self.replayed = bool(imports) and not self.clicked and not measured
        self.again = bool(imports) and not self.clicked and measured  # measured without click


def measure(*args, cwd=None, **env) -> Outcome:
    return Outcome(run_lookout("measure", *args, cwd=cwd, env=dict(os.environ, PYTHONPROFILEIMPORTTIME="1", **env)))


def test_a_quiet_run_is_replayed_with_the_same_output_status_and_message(session):
    first = measure("-q", "--no-discover", str(session))
    again = measure("-q", "--no-discover", str(session))
    assert not first.replayed and again.replayed
    assert again.stdout == first.stdout == session.read_bytes()
    assert again.status == first.status == 0 and again.stderr == first.stderr == b""
    # a failed --fail-at: exit 1 and its one line, replayed the same
    failing = [measure("-q", "--no-discover", "--fail-at", "0.5", str(session)) for _ in range(2)]
    assert [o.replayed for o in failing] == [False, True]
    assert failing[0].status == failing[1].status == 1
    assert failing[1].stderr == failing[0].stderr and failing[0].stderr.startswith(b"lookout: measure: context at")
    assert failing[1].stdout == session.read_bytes()


def test_a_changed_file_is_measured_again(session):
    measure("-q", "--no-discover", "--fail-at", "50", str(session))
    assert measure("-q", "--no-discover", "--fail-at", "50", str(session)).replayed
    record = session.read_bytes().splitlines(keepends=True)[-1]
    with open(session, "ab") as fh:  # grown
        fh.write(record.replace(b'"uuid":"', b'"uuid":"x'))
    grown = measure("-q", "--no-discover", "--fail-at", "50", str(session))
    assert not grown.replayed and grown.again and grown.stdout == session.read_bytes()
    assert measure("-q", "--no-discover", "--fail-at", "50", str(session)).replayed
    # rewritten in place, same size: only the time and the bytes moved
    data = session.read_bytes()
    middle = data.index(b'"text":"', len(data) // 3) + len(b'"text":"')
    changed = data[:middle] + (b"Z" if data[middle:middle + 1] != b"Z" else b"Y") + data[middle + 1:]
    stat = session.stat()
    with open(session, "r+b") as fh:
        fh.write(changed)
    os.utime(session, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    rewritten = measure("-q", "--no-discover", "--fail-at", "50", str(session))
    assert not rewritten.replayed and rewritten.again and rewritten.stdout == changed
    # replaced by another file (a new inode), same bytes
    copy = session.with_suffix(".new")
    shutil.copyfile(session, copy)
    os.replace(copy, session)
    assert not measure("-q", "--no-discover", "--fail-at", "50", str(session)).replayed


@pytest.mark.parametrize("path", [p for p in real_transcripts() if "claude-code" in p.parts and p.stat().st_size > 100_000],
                         ids=lambda p: p.name[:40])
def test_a_grown_session_is_measured_again_without_click_to_the_same_figures(path, tmp_path):
    """A real session measured by a hook, then grown by its next lines: the same invocation runs
    without click, fails --fail-at as a run through click does, and gives the figures a run
    through click gives (``--json`` on the unchanged file measures it for the series a quiet run
    does not keep, from the lines it remembered, then reuses them)."""
    lines = path.read_bytes().splitlines(keepends=True)
    session = tmp_path / "session.jsonl"
    session.write_bytes(b"".join(lines[:len(lines) * 3 // 4]))
    hook = ("-q", "--no-discover", "--fail-at", "5", "--now", "2026-01-01T00:00:00Z")
    assert measure(*hook, str(session)).clicked  # the first run of this invocation
    with open(session, "ab") as fh:
        fh.writelines(lines[len(lines) * 3 // 4:])
    again = measure(*hook, str(session))
    fresh = measure(*hook, str(session), LOOKOUT_CACHE_DIR=str(tmp_path / "fresh"))
    assert again.again and fresh.clicked
    # what such a run leaves out (ARCHITECTURE.md): the modules a prompt's run has no use for,
    # orjson too (and dataclasses, inspect, uuid that it imports) for the few lines it reads,
    # pathlib (with urllib.parse and ipaddress) and xdg_base_dirs for the cache files it opens
    assert not again.names & {b"typing", b"threading", b"heapq", b"base64", b"_hashlib", b"tiktoken", b"orjson",
                              b"dataclasses", b"inspect", b"uuid", b"pathlib", b"ipaddress", b"xdg_base_dirs",
                              b"copy"}, again.names
    # a first run tells the format by every format's sniffer (formats/sniff.py) and loads that
    # format's reader only: not Codex's or the message lists' (an adapter is loaded through
    # importlib, which the import log leaves out, but what it imports is in it)
    assert b"lookout_cli.formats.sniff" in fresh.names
    assert not fresh.names & {b"lookout_cli.formats.codex_items", b"lookout_cli.formats.message_list"}
    assert again.status == fresh.status == 1 and again.stdout == fresh.stdout == session.read_bytes()
    assert again.stderr == fresh.stderr and again.stderr.startswith(b"lookout: measure: context at")
    remembered = orjson.loads(measure("--json", *hook[1:], str(session)).stdout)
    reused = orjson.loads(measure("--json", *hook[1:], str(session)).stdout)
    measured = orjson.loads(measure("--json", *hook[1:], "--no-cache", str(session)).stdout)
    assert replay_note in reused.pop("notes") and replay_note not in measured.pop("notes")
    assert replay_note not in remembered.pop("notes")
    assert remembered == reused == measured


def test_a_session_gone_since_is_one_line_and_exit_2_without_click(session):
    quiet = ("-q", "--no-discover", str(session))
    measure(*quiet)
    session.unlink()
    gone = measure(*quiet)
    assert gone.again and gone.status == 2 and gone.stdout == b""
    assert gone.stderr == f"lookout: error: {session}: No such file or directory\n".encode()


def test_the_status_follows_the_file_not_the_record(session):
    """A file that grows past --fail-at fails, and so does the replay of that run."""
    quiet = ("-q", "--no-discover", "--fail-at", "1")
    assert measure(*quiet, str(session)).status == 0
    assert measure(*quiet, str(session)).replayed
    last = orjson.loads(session.read_bytes().splitlines()[-1])
    message = {**last, "parentUuid": last["uuid"], "uuid": "u-long", "timestamp": "2026-01-05T10:01:00.000Z",
               "message": {"role": "user", "content": "lorem ipsum dolor sit amet " * 1000}}
    with open(session, "ab") as fh:
        fh.write(orjson.dumps(message) + b"\n")
    after = [measure(*quiet, str(session)) for _ in range(2)]
    assert [o.status for o in after] == [1, 1] and [o.replayed for o in after] == [False, True]
    assert after[1].stdout == session.read_bytes()


def test_other_settings_or_setup_are_not_replayed(session, tmp_path):
    args = ("-q", str(session))
    measure(*args)
    assert measure(*args).replayed
    assert not measure("-q", "--budget", "150k", str(session)).replayed  # the arguments
    assert not measure(*args, cwd=tmp_path).replayed  # another working folder
    assert measure(*args).replayed  # each is remembered apart
    assert not measure(*args, LOOKOUT_BUDGET="150k").replayed  # the environment
    assert measure(*args, LOOKOUT_BUDGET="150k").replayed  # (the last one of the same arguments and folder)
    assert measure(*args, cwd=session.parent).replayed is False
    assert measure(*args, cwd=session.parent).replayed
    (tmp_path / ".lookout.toml").write_text("budget = 150000\n")  # a project config above the working folder
    assert not measure(*args, cwd=session.parent).replayed
    assert measure(*args, cwd=session.parent).replayed
    user_config = Path(os.environ["XDG_CONFIG_HOME"]) / "lookout" / "config.toml"
    user_config.parent.mkdir(parents=True, exist_ok=True)
    user_config.write_text("budget = 160000\n")
    assert not measure(*args, cwd=session.parent).replayed
    # a rules file set on the command line, edited
    rules = tmp_path / "RULES.md"
    rules.write_text("Run the tests.\n")
    with_rules = ("-q", "--rules", str(rules), str(session))
    measure(*with_rules)
    assert measure(*with_rules).replayed
    rules.write_text("Run the tests, then the linter.\n")
    assert not measure(*with_rules).replayed


def test_runs_with_a_report_or_another_output_are_never_replayed(session, tmp_path):
    for args in (("--no-discover",), ("--json", "--no-discover"), ("--report-only", "--no-discover"),
                 ("-q", "--no-discover", "--report", str(tmp_path / "r.json")),
                 ("-q", "--no-discover", "-o", str(tmp_path / "out.jsonl")),
                 ("-q", "--no-discover", "--no-cache")):
        runs = [measure(*args, str(session)) for _ in range(2)]
        assert not any(o.replayed for o in runs), args
        assert runs[1].status == 0
    assert (tmp_path / "out.jsonl").read_bytes() == session.read_bytes()
    piped = [Outcome(run_lookout("measure", "-q", input=session.read_bytes(),
                                 env=dict(os.environ, PYTHONPROFILEIMPORTTIME="1"))) for _ in range(2)]
    assert not any(o.replayed for o in piped) and piped[1].stdout == session.read_bytes()


def test_a_damaged_record_runs_lookout(session):
    measure("-q", "--no-discover", str(session))
    records = list(Path(paths.cache_folder(), "state").glob("replay-*.bin"))
    assert len(records) == 1
    records[0].write_bytes(b"\xff\x00 not marshal")
    again = measure("-q", "--no-discover", str(session))
    assert not again.replayed and again.status == 0 and again.stdout == session.read_bytes()
    assert measure("-q", "--no-discover", str(session)).replayed


def test_a_closed_pipe_ends_a_replay_with_141(session):
    big = session.parent / "big.jsonl"
    big.write_bytes(session.read_bytes() * 200)  # more than a pipe holds
    env = dict(os.environ, PYTHONPROFILEIMPORTTIME="1")
    command = [*lookout_exe(), "measure", "-q", "--no-discover", str(big)]
    subprocess.run(command, capture_output=True, env=env)
    for _ in range(2):
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        proc.stdout.read(100)
        proc.stdout.close()
        err = proc.stderr.read()
        assert proc.wait() == 141
        assert b"click" not in err  # the replay, not the CLI
        assert b"lookout:" not in err and b"Traceback" not in err


@pytest.mark.parametrize("env", [{}, {"LOOKOUT_CACHE_DIR": "/x/cache"}, {"XDG_CACHE_HOME": "/y"},
                                 {"XDG_CACHE_HOME": "relative/path"}, {"XDG_CACHE_HOME": ""},
                                 {"XDG_CONFIG_HOME": "/z"}, {"XDG_CONFIG_HOME": "relative"}, {"HOME": "/h"},
                                 {"LOOKOUT_CONFIG": "/c/custom.toml"}])
def test_the_folders_as_text_are_the_folders_as_paths(monkeypatch, env):
    """What a prompt's run opens without pathlib (``cache_folder``, ``user_config_file``) is
    where the other runs, through xdg_base_dirs, keep and read their files."""
    for name in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "LOOKOUT_CACHE_DIR", "LOOKOUT_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert Path(paths.cache_folder()) == paths.cache_dir()
    named = os.environ.get("LOOKOUT_CONFIG")
    assert Path(paths.user_config_file()) == (Path(named) if named else xdg_config_home() / "lookout" / "config.toml")


@pytest.mark.parametrize("user", [None, "custom.toml"])
def test_the_config_files_a_run_reads_are_in_its_invocation(tmp_path, monkeypatch, user):
    """Every file config.Config reads is one replay checks."""
    project = tmp_path / "a"
    (project / "b").mkdir(parents=True)
    (project / ".lookout.toml").write_text("budget = 1\n")
    if user:
        monkeypatch.setenv("LOOKOUT_CONFIG", str(tmp_path / user))
        (tmp_path / user).write_text("budget = 2\n")
    else:
        folder = Path(os.environ["XDG_CONFIG_HOME"]) / "lookout"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.toml").write_text("budget = 2\n")
    monkeypatch.chdir(project / "b")
    read = {os.path.realpath(p) for p in Config().files}
    checked = {os.path.realpath(s[0]) for s in replay.config_stamps(os.getcwd()) if s[1] is not None}
    assert len(read) == 2 and read == checked


def test_a_closed_standard_output_is_one_line_and_exit_2(session):
    """Started with standard output closed (``>&-``), a replay and the CLI say the same."""
    env = dict(os.environ, PYTHONPROFILEIMPORTTIME="1")
    command = [*lookout_exe(), "measure", "-q", "--no-discover", str(session)]
    subprocess.run(command, stdout=subprocess.DEVNULL, env=env)  # recorded
    closed = [subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                             preexec_fn=lambda: os.close(1)) for _ in range(2)]
    cli = subprocess.run([*command[:-1], "--no-cache", str(session)], stderr=subprocess.PIPE, env=env,
                         preexec_fn=lambda: os.close(1))
    for done in (*closed, cli):
        assert done.returncode == 2
        assert [line for line in done.stderr.splitlines() if not line.startswith(b"import time:")] == \
            [b"lookout: error: standard output is closed"]
    assert Outcome(closed[0]).replayed  # the run with an open output was the one recorded
    assert not Outcome(cli).replayed


def test_a_replay_appends_to_an_output_opened_to_append(session, tmp_path):
    """sendfile cannot write to a file opened to append (``>> out``): the replay copies
    through memory instead, and the file gets the same bytes as from the CLI."""
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"before\n")
    env = dict(os.environ, PYTHONPROFILEIMPORTTIME="1")
    runs = []
    for _ in range(2):
        with open(out, "ab") as handle:
            runs.append(Outcome(subprocess.run([*lookout_exe(), "measure", "-q", "--no-discover", str(session)],
                                               stdout=handle, stderr=subprocess.PIPE, env=env)))
    assert [o.replayed for o in runs] == [False, True] and [o.status for o in runs] == [0, 0]
    assert out.read_bytes() == b"before\n" + session.read_bytes() * 2
