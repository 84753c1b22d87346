"""``lookout measure FILE`` again on an unchanged file reuses its last figures
(lookout_cli.meter.snapshot), and never when anything they depend on changed: the file (append,
a same-size rewrite in place, an atomic replace), the settings, or a setup file."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
from conftest import DATA, run_lookout

from lookout_cli.meter.snapshot import REUSED

SESSION = DATA / "measure" / "claude-small.jsonl"
NOW = "2026-01-01T00:00:00Z"


def measure(path, *args, cwd=None) -> dict:
    done = run_lookout("measure", "--json", "--now", NOW, *args, str(path), cwd=cwd)
    assert done.returncode == 0, done.stderr
    return orjson.loads(done.stdout)


def without_reuse_note(report: dict) -> dict:
    return {**report, "notes": [n for n in report["notes"] if n != REUSED]}


def test_an_unchanged_file_gives_the_same_figures_without_being_read_again(session):
    first = measure(session, "--no-discover")
    again = measure(session, "--no-discover")
    assert REUSED not in first["notes"] and REUSED in again["notes"]
    assert without_reuse_note(again) == first
    # the transcript still passes through byte for byte, to a pipe and to -o
    piped = run_lookout("measure", "-q", "--no-discover", str(session))
    assert piped.returncode == 0 and piped.stdout == session.read_bytes()
    out = session.parent / "copy.jsonl"
    assert run_lookout("measure", "-q", "--no-discover", "-o", str(out), str(session)).returncode == 0
    assert out.read_bytes() == session.read_bytes()
    # -i writes nothing: the file is the same inode with the same bytes
    inode = session.stat().st_ino
    assert run_lookout("measure", "-q", "--no-discover", "-i", str(session)).returncode == 0
    assert session.stat().st_ino == inode


def test_a_quiet_runs_figures_have_no_series_and_the_json_report_measures_for_it(session):
    """A quiet run (a hook's, a status line's) keeps no point a response: the JSON report after it
    measures again (its series whole), and the one after that reuses the figures."""
    assert run_lookout("measure", "-q", "--no-discover", str(session)).returncode == 0
    after_quiet = measure(session, "--no-discover")
    again = measure(session, "--no-discover")
    fresh = measure(session, "--no-discover", "--no-cache")
    assert REUSED not in after_quiet["notes"] and REUSED in again["notes"]
    assert after_quiet["series"] == again["series"] == fresh["series"] and len(fresh["series"]) > 1


def test_the_warm_cache_is_worked_out_for_the_new_time(session):
    measure(session, "--no-discover")
    later = orjson.loads(run_lookout("measure", "--json", "--no-discover", "--now", "2026-01-02T00:00:00Z",
                                     str(session)).stdout)
    fresh = orjson.loads(run_lookout("measure", "--json", "--no-cache", "--no-discover",
                                     "--now", "2026-01-02T00:00:00Z", str(session)).stdout)
    assert REUSED in later["notes"]
    assert later["warm_cache"] == fresh["warm_cache"] and later["warm_cache"] is not None


def test_an_appended_line_is_measured(session):
    measure(session, "--no-discover")
    records = session.read_bytes().splitlines(keepends=True)
    with open(session, "ab") as fh:
        fh.write(records[-1].replace(b'"uuid":"', b'"uuid":"x'))
    grown = measure(session, "--no-discover")
    assert REUSED not in grown["notes"]
    assert grown == measure(session, "--no-discover", "--no-cache")


def test_a_same_size_rewrite_in_place_is_measured(session):
    before = measure(session, "--no-discover")
    data = session.read_bytes()
    middle = data.index(b'"text":"', len(data) // 3) + len(b'"text":"')
    changed = data[:middle] + (b"Z" if data[middle:middle + 1] != b"Z" else b"Y") + data[middle + 1:]
    stat = session.stat()
    with open(session, "r+b") as fh:  # same inode, same size, same head and tail
        fh.write(changed)
    os.utime(session, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    after = measure(session, "--no-discover")
    assert REUSED not in after["notes"]
    assert after == measure(session, "--no-discover", "--no-cache")
    assert before["format"] == after["format"]


def test_other_settings_are_measured_again(session):
    measure(session)
    assert REUSED not in measure(session, "--budget", "150k")["notes"]
    assert REUSED in measure(session, "--budget", "150k")["notes"]
    assert REUSED not in measure(session, "--model", "gpt-5")["notes"]


def test_a_rules_file_created_beside_the_session_is_counted(tmp_path):
    work = tmp_path / "project"
    work.mkdir()
    # point the session at a folder of ours so CLAUDE.md can appear there
    data = b"".join(_with_cwd(r, str(work)) for r in SESSION.read_bytes().splitlines(keepends=True))
    path = work / "session.jsonl"
    path.write_bytes(data)
    first = measure(path)
    assert REUSED in measure(path)["notes"]
    (work / "CLAUDE.md").write_text("Always run the tests before committing.\n" * 40)
    after = measure(path)
    assert REUSED not in after["notes"]
    assert b"CLAUDE.md" in orjson.dumps(after) and b"CLAUDE.md" not in orjson.dumps(first)
    assert after == measure(path, "--no-cache")


def test_no_state_for_standard_input_or_with_no_cache(session):
    data = session.read_bytes()
    for _ in range(2):
        done = run_lookout("measure", "--json", "--no-discover", input=data)
        assert REUSED not in orjson.loads(done.stdout)["notes"]
    for _ in range(2):
        assert REUSED not in measure(session, "--no-discover", "--no-cache")["notes"]


def test_a_damaged_snapshot_is_measured_again(session):
    first = measure(session, "--no-discover")
    states = list(Path(os.environ["XDG_CACHE_HOME"]).rglob("state/*.json"))
    assert states
    for state in states:
        head, totals = state.read_bytes().split(b"\n", 1)  # the state's line, then the totals'
        totals = orjson.loads(totals)
        totals["meter"]["parts"] = "not a list of parts"
        state.write_bytes(head + b"\n" + orjson.dumps(totals))
    again = measure(session, "--no-discover")
    assert REUSED not in again["notes"] and again == first


def _with_cwd(record: bytes, cwd: str) -> bytes:
    if not record.strip():
        return record
    obj = orjson.loads(record)
    if isinstance(obj, dict) and "cwd" in obj:
        obj["cwd"] = cwd
        return orjson.dumps(obj) + b"\n"
    return record



def test_a_reuse_loads_no_tokenizer_parser_or_openssl(session):
    """Hooks and status lines re-measure an unchanged file most often: that run imports no
    tokenizer, no format adapter, no view classes, no hashlib (OpenSSL takes a tenth of it),
    no tempfile."""
    import subprocess
    import sys

    measure(session, "--no-discover")
    code = ("import sys\nfrom lookout_cli.cli import main\nsys.stdout = open(sys.argv[1], 'w')\n"
            "try:\n    main(['measure', '-q', '--no-discover', sys.argv[2]])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m in ('tiktoken', 'hashlib', 'tempfile', 'PIL', 'lookout_cli.formats.view')\n"
            "             or m.startswith(('lookout_cli.formats.', 'lookout_cli.token'))\n"
            "             and m not in ('lookout_cli.formats.kinds', 'lookout_cli.formats.usages')), file=sys.stderr)")
    # (allowed: the view's words, constants; and what the meter reads usages by column with, no dataclass)
    done = subprocess.run([sys.executable, "-c", code, os.devnull, str(session)], capture_output=True, text=True,
                          env=os.environ)
    assert done.stderr.strip() == "[]"
