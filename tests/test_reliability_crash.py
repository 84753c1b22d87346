"""Crash safety: a lookout killed (SIGKILL) at any point leaves the old or the new state.

Two ways to kill, both on real processes:

- at an exact point: the child counts its file operations (opens for writing, each write,
  fsync, chmod, rename, unlink, mkdir) and kills itself with SIGKILL at the N-th one, a write
  half done. A first run with no kill counts the points, so every point (long form) or a
  spread of them (CI) is tried;
- at a random time: the unmodified console script is killed after a random delay.

After each kill: the transcript written with ``-i`` (or ``-o``) is byte for byte the old or
the new one, never torn; every saved file matches its sha256 name, every manifest line is
JSON; when the new transcript is in place, ``restore`` gets the old one back (the store was
complete before the transcript was replaced). For ``memory save``, the scope still reads,
holds the note once or not at all, and the save succeeds when run again.

A full disk is simulated with RLIMIT_FSIZE (writes fail with EFBIG) and, when this runs as root
and may mount, a 1 MB tmpfs (ENOSPC): the error is one clear line and the input is intact.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import lookout_exe
from strategies import Call, Conversation, Result, Step, Turn, png_base64, render
from test_reliability_harness import LONG, environment, run_cli, tally, workdir

PYTHON = sys.executable

# A child that kills itself at its N-th file operation (CRASH_AT; 0 = never) and, on a normal
# exit, writes how many operations it did to CRASH_COUNT.
INJECT = r"""
import atexit, builtins, io, os, signal, sys
_at = int(os.environ.get("CRASH_AT", "0"))
_seen = [0]

def _point():
    _seen[0] += 1
    return _seen[0] == _at

def _die():
    os.kill(os.getpid(), signal.SIGKILL)

class _Writer:
    def __init__(self, f):
        self._f = f
    def write(self, data):
        if _point():
            self._f.write(data[: len(data) // 2])  # a torn write
            self._f.flush()
            _die()
        return self._f.write(data)
    def __enter__(self):
        self._f.__enter__()
        return self
    def __exit__(self, *exc):
        return self._f.__exit__(*exc)
    def __iter__(self):
        return iter(self._f)
    def __getattr__(self, name):
        return getattr(self._f, name)

def _writing(mode):
    return isinstance(mode, str) and any(c in mode for c in "wax+")

_fdopen, _open, _write, _fsync = os.fdopen, io.open, os.write, os.fsync

def fdopen(fd, mode="r", *a, **k):
    f = _fdopen(fd, mode, *a, **k)
    return _Writer(f) if _writing(mode) else f

def open_(file, mode="r", *a, **k):
    f = _open(file, mode, *a, **k)
    return _Writer(f) if _writing(mode) and not isinstance(file, int) else f

def write(fd, data):
    if fd > 2 and _point():
        _die()
    return _write(fd, data)

def fsync(fd):
    if _point():
        _die()
    return _fsync(fd)

os.fdopen, io.open, builtins.open, os.write, os.fsync = fdopen, open_, open_, write, fsync

_WATCH = {"os.rename", "os.remove", "os.chmod", "os.mkdir", "tempfile.mkstemp", "shutil.move", "os.truncate"}

def _audit(event, args):
    if event in _WATCH and _point():
        _die()
    if event == "open" and len(args) > 2 and isinstance(args[2], int) and args[2] & (os.O_WRONLY | os.O_RDWR):
        if _point():
            _die()

sys.addaudithook(_audit)

@atexit.register
def _count():
    seen = _seen[0]  # (opening the count file is itself an operation: not counted)
    if os.environ.get("CRASH_COUNT"):
        with _open(os.environ["CRASH_COUNT"], "w") as f:
            f.write(str(seen))

from lookout_cli.cli import main
main(sys.argv[1:])
"""


def env_for(root: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOKOUT_")}
    env.update(XDG_DATA_HOME=str(root / "data"), XDG_CONFIG_HOME=str(root / "config"),
               XDG_CACHE_HOME=str(root / "cache"), LOOKOUT_SAVE_DIR=str(root / "saved"))
    return env


def run_injected(args: list[str], env: dict, at: int, cwd: Path, count_file: Path | None = None):
    env = {**env, "CRASH_AT": str(at)}
    if count_file is not None:
        env["CRASH_COUNT"] = str(count_file)
    return subprocess.run([PYTHON, "-c", INJECT, *args], env=env, cwd=cwd, capture_output=True, timeout=300)


def count_points(args: list[str], env: dict, cwd: Path, tmp: Path) -> int:
    counter = tmp / "points"
    done = run_injected(args, env, 0, cwd, counter)
    assert done.returncode == 0, done.stderr.decode()
    return int(counter.read_text())


def fresh_state(root: Path) -> None:
    """Empty the store and caches, as they were before the counting run."""
    for name in ("saved", "cache"):
        shutil.rmtree(root / name, ignore_errors=True)


def kill_points(total: int, ci: int) -> list[int]:
    """Every point in the long form; in CI the last one and a reproducible sample of the rest."""
    if LONG or total <= ci:
        return list(range(1, total + 1))
    rng = random.Random(total)
    return sorted({total, *rng.sample(range(1, total), ci - 1)})


def store_is_sound(store: Path) -> None:
    """Every saved file is complete (its content hashes to its name); every manifest line is JSON."""
    for path in (store / "sha256").rglob("*") if (store / "sha256").is_dir() else ():
        if path.is_file() and not path.name.startswith("."):
            sha = path.parent.name + path.name.split(".")[0]
            assert hashlib.sha256(path.read_bytes()).hexdigest() == sha, f"torn saved file {path}"
    manifest = store / "manifest.jsonl"
    if manifest.exists():
        for line in manifest.read_bytes().splitlines():
            json.loads(line)


def complete_like(now: bytes, new: bytes) -> bool:
    """``now`` is a whole new transcript: ``new`` itself, or (a compaction writes fresh uuids and
    times) one with as many lines, each of them JSON, ending where ``new`` ends."""
    if now == new:
        return True
    lines, expected = now.splitlines(keepends=True), new.splitlines(keepends=True)
    if len(lines) != len(expected) or now[-1:] != new[-1:]:
        return False
    for line in lines:
        json.loads(line)
    return True


def restore_bytes(data: bytes, env: dict, cwd: Path) -> bytes:
    """``lookout restore`` (in this process, with the killed process's store)."""
    with environment(env), workdir(cwd):
        back = run_cli(["restore", "-q"], data)
    assert back.code == 0, back.err
    return back.out


def image_transcript(n_images: int = 4, fmt: str = "anthropic") -> bytes:
    turns = []
    for t in range(n_images):
        image = png_base64(600 + t, 600, (40 * t, 10, 10))  # worth more tokens than a placeholder
        step = Step(None, "reading", [Call(f"c{t}", "Read", {"path": f"f{t}"}, Result(f"line {t}\n" * 400)),
                                      Call(f"i{t}", "view_image", {}, Result(None, image))], [1, 0])
        turns.append(Turn(f"task {t}", image, [step], f"done {t}"))
    conv = Conversation("claude-sonnet-4-5", "You are careful.", turns, None, [(3, {"n": 10**30})], True,
                        [0, 1], False, True)
    return render(conv, fmt)


SCENARIOS = {
    # name: (arguments after the file, transcript maker, how restore must answer)
    "clear-images -i": (["clear-images", "--budget", "1", "--keep-recent", "0", "-i"], image_transcript, "exact"),
    "compact -i": (["compact", "--force", "--estimate", "--max-tokens", "3k", "--max-tool-output-chars", "500", "-i"],
                   lambda: image_transcript(3, "claude-code"), "lines"),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_sigkill_at_every_file_operation_leaves_old_or_new(name, tmp_path):
    args, make, restores = SCENARIOS[name]
    old = make()
    env = env_for(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    target = work / "session.jsonl"
    target.write_bytes(old)
    total = count_points([*args, str(target)], env, work, tmp_path)
    new = target.read_bytes()
    assert new != old
    restored = False
    for at in kill_points(total, 3):
        target.write_bytes(old)
        fresh_state(tmp_path)  # the same file operations as the counting run, in the same order
        done = run_injected([*args, str(target)], env, at, work)
        assert done.returncode == -signal.SIGKILL, (at, total, done.stderr.decode())
        tally("kills survived")
        now = target.read_bytes()
        assert now == old or complete_like(now, new), f"torn transcript after a kill at point {at} of {total}"
        store_is_sound(tmp_path / "saved")
        if now != old and (LONG or not restored):
            # the new transcript is only in place once everything it names is saved
            back = restore_bytes(now, env, work)
            restored = True
            if restores == "exact":
                assert back == old
            else:
                assert all(line in back.splitlines() for line in old.splitlines())
    # after the last kill, a second attempt finishes the job
    again = subprocess.run([*lookout_exe(), *args, str(target), "-q"], env=env, cwd=work,
                           capture_output=True, timeout=300)
    assert again.returncode == 0, again.stderr.decode()
    assert target.read_bytes() == new or restores == "lines"


def test_sigkill_while_writing_output_file(tmp_path):
    """``-o OUT`` (saving outputs): OUT is absent, the old OUT, or the whole new one."""
    data = image_transcript(3)
    env = env_for(tmp_path)
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_bytes(data)
    args = ["clear-images", "--budget", "1", "--keep-recent", "0", str(src), "-o", str(out)]
    out.write_bytes(b"previous contents\n")
    total = count_points(args, env, tmp_path, tmp_path)
    new = out.read_bytes()
    fresh_state(tmp_path)
    for at in kill_points(total, 3):
        out.write_bytes(b"previous contents\n")
        fresh_state(tmp_path)
        done = run_injected(args, env, at, tmp_path)
        assert done.returncode == -signal.SIGKILL
        tally("kills survived")
        assert out.read_bytes() in (b"previous contents\n", new)
        assert src.read_bytes() == data
        store_is_sound(tmp_path / "saved")


def _memory_notes(env: dict, project: Path) -> list[str]:
    with environment(env):
        listed = run_cli(["memory", "list", "--json", "-P", str(project)])
    assert listed.code == 0, listed.err
    return [json.loads(line)["note"] for line in listed.out.splitlines() if line.strip()]


def test_sigkill_during_memory_save(tmp_path):
    env = env_for(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    first = subprocess.run([*lookout_exe(), "memory", "save", "-q", "-P", str(project), "The build needs make 4"],
                           env=env, capture_output=True, timeout=300)
    assert first.returncode == 0, first.stderr.decode()
    note = "Deploys go through the staging VPN first"
    args = ["memory", "save", "-q", "-P", str(project), "--details", "Ask ops for access.\n" * 20, note]
    scope = Path(subprocess.run([*lookout_exe(), "memory", "path", "-P", str(project)], env=env,
                                capture_output=True, timeout=300).stdout.decode().strip())
    snapshot = tmp_path / "snapshot"
    shutil.copytree(scope, snapshot)
    total = count_points(args, env, tmp_path, tmp_path)
    for at in kill_points(total, 3):
        shutil.rmtree(scope)
        shutil.copytree(snapshot, scope)
        done = run_injected(args, env, at, tmp_path)
        assert done.returncode == -signal.SIGKILL
        tally("kills survived")
        notes = _memory_notes(env, project)
        assert "The build needs make 4" in notes
        assert notes.count(note) <= 1
    # the scope is not left locked or half written: the same save, run again, completes
    again = subprocess.run([*lookout_exe(), *args], env=env, capture_output=True, timeout=300)
    assert again.returncode == 0, again.stderr.decode()
    notes = _memory_notes(env, project)
    assert notes.count(note) == 1 and "The build needs make 4" in notes


def test_sigkill_at_random_times(tmp_path):
    """The unmodified console script, killed after a random delay while it works in place."""
    old = image_transcript(6)
    env = env_for(tmp_path)
    target = tmp_path / "session.jsonl"
    args = [*lookout_exe(), "clear-images", "--budget", "1", "--keep-recent", "0", "-i", str(target)]
    target.write_bytes(old)
    started = time.monotonic()
    subprocess.run(args, env=env, check=True, timeout=300, capture_output=True)
    took = time.monotonic() - started
    new = target.read_bytes()
    rng = random.Random(7)
    for _ in range(60 if LONG else 3):
        target.write_bytes(old)
        proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.3, 1.0) * took)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=300)
        if proc.returncode == -signal.SIGKILL:  # (it may have finished first)
            tally("kills survived")
        now = target.read_bytes()
        assert now in (old, new)
        store_is_sound(tmp_path / "saved")
        if now == new:
            assert restore_bytes(now, env, tmp_path) == old


# --- a full disk ------------------------------------------------------------------------------
def _limit_file_size(nbytes: int):
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes then fail with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))
    return apply


@pytest.mark.parametrize("command", [
    ["compact", "--force", "--estimate", "--max-tokens", "2k", "-i"],
    ["clear-images", "--budget", "1", "--keep-recent", "0", "-i"],
    ["measure", "--estimate", "-i"],  # nothing to write back: must succeed untouched
])
def test_file_size_limit_gives_clear_error_and_keeps_input(command, tmp_path):
    old = image_transcript(4) + b'{"type":"x","pad":"' + b"p" * 300_000 + b'"}\n'
    env = env_for(tmp_path)
    target = tmp_path / "session.jsonl"
    target.write_bytes(old)
    done = subprocess.run([*lookout_exe(), *command, str(target)], env=env, capture_output=True, timeout=300,
                          preexec_fn=_limit_file_size(len(old) // 2))
    tally("bad inputs tried")
    err = done.stderr.decode()
    assert target.read_bytes() == old
    if command[0] == "measure":
        assert done.returncode == 0, err
        return
    assert done.returncode == 2, err
    assert "Traceback" not in err and "internal error" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("lookout: error")]
    assert len(errors) == 1 and ("too large" in errors[0].lower() or "File too large" in errors[0]), err
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".session.jsonl.")]  # no temp left


def _tmpfs(path: Path, size: str) -> bool:
    path.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    return done.returncode == 0


def test_full_disk_enospc_gives_clear_error_and_keeps_input(tmp_path):
    """A real full disk (a 1 MB tmpfs) holding the transcript and the store: ENOSPC."""
    disk = tmp_path / "disk"
    if not _tmpfs(disk, "1m"):
        pytest.skip("needs root and mount for a tmpfs (RLIMIT_FSIZE covers the same path)")
    try:
        old = image_transcript(4) + b'{"type":"x","pad":"' + b"p" * 400_000 + b'"}\n'
        target = disk / "session.jsonl"
        target.write_bytes(old)
        env = {**env_for(tmp_path), "LOOKOUT_SAVE_DIR": str(disk / "saved")}
        for command in (["clear-images", "--budget", "1", "--keep-recent", "0", "-i"],
                        ["compact", "--force", "--estimate", "--max-tokens", "2k", "-i"]):
            # fill what is left of the disk but a little
            filler = disk / "filler"
            with open(filler, "wb") as handle:
                try:
                    handle.write(b"f" * (1024 * 1024))
                except OSError:
                    pass
            done = subprocess.run([*lookout_exe(), *command, str(target)], env=env, capture_output=True,
                                  timeout=300)
            tally("bad inputs tried")
            err = done.stderr.decode()
            assert done.returncode == 2, err
            assert "Traceback" not in err and "internal error" not in err, err
            assert "No space left on device" in err, err
            assert target.read_bytes() == old
            assert not [p for p in disk.iterdir() if p.name.startswith(".session.jsonl.")]
            filler.unlink()
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)
