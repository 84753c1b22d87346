"""lookout imports and runs where POSIX-only modules are missing (Windows, where Claude Code and
Codex also run), with the system's own lock taking over from flock.

Windows cannot run here, so the installed ``lookout`` runs under a ``sitecustomize`` that takes
away what Windows lacks (fcntl, termios, pwd, …; os.fchmod, os.sync, …) and supplies ``msvcrt``
as Windows' ``locking`` behaves: byte ranges from the file position, a busy range refused with
EACCES, unlocking a range not locked refused too. Real processes contend for real files.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import lookout_exe
from test_memory_support import make_repo

from lookout_cli.cli import COMMANDS

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "claude-code-session.jsonl"

WINDOWS_LIKE = textwrap.dedent('''
    import errno, os, sys, types
    import fcntl as _posix
    import subprocess  # it takes a platform with msvcrt for Windows: decided before msvcrt is given

    for name in ("fcntl", "termios", "tty", "pty", "pwd", "grp", "resource"):
        sys.modules[name] = None  # "import fcntl" now raises ImportError
    for name in ("fchmod", "sync", "getuid", "geteuid", "killpg", "O_NOFOLLOW", "O_DIRECTORY"):
        if hasattr(os, name):
            delattr(os, name)

    _held = set()

    def locking(fd, mode, nbytes):
        start = os.lseek(fd, 0, os.SEEK_CUR)
        if mode == msvcrt.LK_UNLCK:
            if (fd, start, nbytes) not in _held:
                raise PermissionError(errno.EACCES, "Permission denied")
            _held.discard((fd, start, nbytes))
            _posix.lockf(fd, _posix.LOCK_UN, nbytes, start)
        elif mode == msvcrt.LK_NBLCK:
            try:
                _posix.lockf(fd, _posix.LOCK_EX | _posix.LOCK_NB, nbytes, start)
            except OSError:
                raise PermissionError(errno.EACCES, "Permission denied") from None
            _held.add((fd, start, nbytes))
        else:
            raise NotImplementedError(mode)

    msvcrt = types.ModuleType("msvcrt")
    msvcrt.LK_UNLCK, msvcrt.LK_LOCK, msvcrt.LK_NBLCK, msvcrt.LK_RLCK, msvcrt.LK_NBRLCK = range(5)
    msvcrt.locking = locking
    sys.modules["msvcrt"] = msvcrt
''')


@pytest.fixture
def env(tmp_path) -> dict:
    site = tmp_path / "windows-like"
    site.mkdir()
    (site / "sitecustomize.py").write_text(WINDOWS_LIKE)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    env["LOOKOUT_DATA_DIR"] = str(tmp_path / "data")
    env["LOOKOUT_SAVE_DIR"] = str(tmp_path / "saved")
    env["LOOKOUT_NO_CONFIG"] = "1"
    return env


def lookout(env: dict, *args: str, cwd: Path | None = None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*lookout_exe(), *args], env=env, cwd=cwd, capture_output=True, timeout=120, check=False, **kw)


def python(env: dict, code: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def test_the_posix_modules_are_gone_and_the_windows_lock_is_used(env):
    probe = python(env, """
        import importlib
        for name in ("fcntl", "termios", "pwd"):
            try:
                importlib.import_module(name)
            except ImportError:
                continue
            raise SystemExit(f"{name} still imports")
        from lookout_cli.core import lock
        print(lock.fcntl)
    """)
    out, err = probe.communicate(timeout=60)
    assert probe.returncode == 0, err.decode()
    assert out.decode().strip() == "None"


def test_every_command_and_memory_subcommand_shows_its_help(env):
    from lookout_cli.commands.memory import memory

    runs = [[], *([name] for name in COMMANDS), *(["memory", sub] for sub in memory.commands)]
    for args in runs:
        got = lookout(env, *args, "--help")
        assert got.returncode == 0, (args, got.stderr.decode())
        assert got.stdout.startswith(b"Usage: lookout"), args
        assert not got.stderr


def test_measure_and_compact_run_end_to_end(env, tmp_path):
    session = tmp_path / "session.jsonl"
    shutil.copyfile(EXAMPLE, session)
    measured = lookout(env, "measure", "--report", str(tmp_path / "report.json"), str(session))
    assert measured.returncode == 0, measured.stderr.decode()
    assert measured.stdout == EXAMPLE.read_bytes()  # the filter passes the transcript through
    assert json.loads((tmp_path / "report.json").read_text())

    compacted = lookout(env, "compact", "--force", "--max-tokens", "20k", "-i", str(session))
    assert compacted.returncode == 0, compacted.stderr.decode()
    assert session.stat().st_size < EXAMPLE.stat().st_size
    # what was cleared was saved (write_new) and logged in the manifest (append_line, locked)
    manifest = (tmp_path / "saved" / "manifest.jsonl").read_bytes().splitlines()
    assert manifest and all(json.loads(line)["command"] == "compact" for line in manifest)
    assert not list(tmp_path.rglob("*.tmp"))


def test_memory_save_and_list(env, tmp_path):
    repo = make_repo(tmp_path / "repo")
    saved = lookout(env, "memory", "save", "-q", "The staging deploy needs the VPN", cwd=repo)
    assert saved.returncode == 0, saved.stderr.decode()
    listed = lookout(env, "memory", "list", "--json", cwd=repo)
    assert listed.returncode == 0, listed.stderr.decode()
    assert [json.loads(line)["note"] for line in listed.stdout.decode().splitlines()] == [
        "The staging deploy needs the VPN"]


def test_many_files_and_an_old_shared_log_are_written_without_sync_or_fchmod(env, tmp_path):
    """A batch large enough for one os.sync() (absent on Windows), and a log made before logs
    were private (os.fchmod, absent on Windows before Python 3.13)."""
    log = tmp_path / "manifest.jsonl"
    log.write_bytes(b"old\n")
    log.chmod(0o644)
    writer = python(env, f"""
        from lookout_cli.core import fsutil
        for i in range(2 * fsutil.SYNC_ALL_FROM):
            fsutil.write_new({str(tmp_path)!r} + f"/{{i}}.txt", b"saved\\n")
        fsutil.append_line({str(log)!r}, b"new\\n")
        fsutil.sync_pending()
    """)
    _, err = writer.communicate(timeout=60)
    assert writer.returncode == 0, err.decode()
    assert log.read_bytes() == b"old\nnew\n"
    assert len(list(tmp_path.glob("*.txt"))) == 64


HOLD_THE_EVERYWHERE_LOCK = """
    import sys
    from lookout_cli.memory.project import everywhere_scope
    from lookout_cli.memory.store import LOCK_FILE, file_lock
    with file_lock(everywhere_scope().path / LOCK_FILE):
        print("held", flush=True)
        sys.stdin.read()  # until the test closes it
"""


def test_a_held_memory_lock_makes_others_wait(env):
    holder = python(env, HOLD_THE_EVERYWHERE_LOCK)
    try:
        assert holder.stdout.readline() == b"held\n", holder.stderr.read().decode()
        impatient = python(env, """
            from lookout_cli.core.errors import LookoutError
            from lookout_cli.memory.project import everywhere_scope
            from lookout_cli.memory.store import LOCK_FILE, file_lock
            try:
                with file_lock(everywhere_scope().path / LOCK_FILE, timeout=0.3):
                    print("got it")
            except LookoutError as exc:
                print(exc)
        """)
        out, err = impatient.communicate(timeout=60)
        assert b"is locked by another lookout process" in out, out + err
        saver = subprocess.Popen([*lookout_exe(), "memory", "save", "-q", "-E", "Saved after the wait"],
                                 env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(2)
        assert saver.poll() is None  # still waiting for the lock
    finally:
        holder.communicate(b"", timeout=60)
    assert holder.returncode == 0, holder.stderr
    assert saver.wait(timeout=60) == 0, saver.stderr.read().decode()
    listed = lookout(env, "memory", "list", "-E", "--json")
    assert [json.loads(line)["note"] for line in listed.stdout.decode().splitlines()] == ["Saved after the wait"]


def test_processes_saving_at_once_lose_nothing(env, tmp_path):
    procs = [subprocess.Popen(["bash", "-c", f'for j in 1 2 3; do "$@" "process {i} note $j" || exit 1; done',
                               "bash", *lookout_exe(), "memory", "save", "-q", "-E"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for i in range(4)]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err.decode()
    listed = lookout(env, "memory", "list", "-E", "--json")
    got = sorted(json.loads(line)["note"] for line in listed.stdout.decode().splitlines())
    assert got == sorted(f"process {i} note {j}" for i in range(4) for j in (1, 2, 3))
