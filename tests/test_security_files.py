"""Files and messages an attacker or an accident could exploit (issue 32, items 5-8), on real
runs of the installed ``lookout`` over real transcripts:

- a killed run's temp files are removed by the next write into their folder, and only they;
- a full disk (EFBIG under RLIMIT_FSIZE, ENOSPC on a 1 MB tmpfs) names the file it could not
  write, and ``compact`` reports no work it never wrote;
- the saved-output manifest, which lists transcript paths, is private (0600);
- no error prints a secret from a transcript, a LOOKOUT_* variable or a summary command.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest
from conftest import SHARED_TRANSCRIPTS, lookout_exe

TRANSCRIPTS = SHARED_TRANSCRIPTS
LONG_SESSION = TRANSCRIPTS / "claude-code" / "ccviewer-fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
SMALL_SESSION = Path(__file__).resolve().parent.parent / "examples" / "claude-code-session.jsonl"
# compacting LONG_SESSION this way clears and saves five tool outputs
COMPACT = ["compact", "--force", "--estimate", "--max-tokens", "20k"]
# put together here, so that this file holds no token a push-protection scanner would stop
GITHUB_TOKEN = "ghp" + "_16C7e42F292c6912E7710c838347Ae178B4a"
AWS_KEY_ID = "AKIA" + "2E0A8F3B244C9986"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYzq8hjkLwQp"  # bare: no rule names it without context
HOUR = 3600


def session(tmp_path: Path, source: Path = LONG_SESSION) -> Path:
    if not source.exists():
        pytest.skip(f"needs the real transcript {source}")
    target = tmp_path / "session.jsonl"
    shutil.copyfile(source, target)
    return target


def env_for(root: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOKOUT_")}
    env.update(XDG_DATA_HOME=str(root / "data"), XDG_CONFIG_HOME=str(root / "config"),
               XDG_CACHE_HOME=str(root / "cache"), LOOKOUT_SAVE_DIR=str(root / "saved"))
    return {**env, **extra}


def lookout(args: list, env: dict, cwd: Path, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*lookout_exe(), *map(str, args)], env=env, cwd=cwd, capture_output=True, timeout=300,
                          **kw)


def plant(folder: Path, name: str, age: float = 0) -> Path:
    path = folder / name
    path.write_bytes(b"half a transcript")
    if age:
        then = time.time() - age
        os.utime(path, (then, then))
    return path


# --- 5. temp files left by a kill ---------------------------------------------------------------
def test_next_write_removes_only_stale_lookout_temps_beside_the_transcript(tmp_path):
    source = session(tmp_path, SMALL_SESSION)
    stale = plant(tmp_path, ".session.jsonl.0123456789ab.tmp", 2 * HOUR)  # atomic_writer's name
    stale_part = plant(tmp_path, ".part-a1b2c3d4e5f6.tmp", 2 * HOUR)  # put_parts' name
    fresh = plant(tmp_path, ".session.jsonl.abcdef012345.tmp")  # a run writing right now
    mine = plant(tmp_path, ".session.jsonl.swp", 2 * HOUR)  # not a name lookout makes
    not_hex = plant(tmp_path, ".notes.backup.tmp", 2 * HOUR)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    target = plant(elsewhere, "precious.txt", 2 * HOUR)
    link = tmp_path / ".link.fedcba987654.tmp"  # a link with lookout's name: never followed
    link.symlink_to(target)
    os.utime(link, (time.time() - 2 * HOUR,) * 2, follow_symlinks=False)

    done = lookout(["compact", "-o", tmp_path / "next.jsonl", source], env_for(tmp_path), tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    assert (tmp_path / "next.jsonl").exists()
    assert not stale.exists() and not stale_part.exists()
    assert fresh.exists() and mine.exists() and not_hex.exists()
    assert link.is_symlink() and target.read_bytes() == b"half a transcript"


def test_next_sync_removes_stale_temps_in_the_memory_sync_folder(tmp_path):
    env = env_for(tmp_path)
    shared = tmp_path / "shared"
    assert lookout(["memory", "save", "-E", "prefer small commits in this repo"], env, tmp_path).returncode == 0
    first = lookout(["memory", "sync", "-E", shared], env, tmp_path)
    assert first.returncode == 0, first.stderr.decode()
    folder = shared / "everywhere"
    stale = plant(folder, ".prefer-small-commits-repo.md.0123456789ab.tmp", 2 * HOUR)
    fresh = plant(folder, ".MEMORY.md.abcdef012345.tmp")
    assert lookout(["memory", "save", "-E", "run the linter before pushing"], env, tmp_path).returncode == 0
    done = lookout(["memory", "sync", "-E", shared], env, tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    assert not stale.exists() and fresh.exists()


# --- 6. a full disk ----------------------------------------------------------------------------
def _limit_file_size(nbytes: int):
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes then fail with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))
    return apply


def _one_error(done: subprocess.CompletedProcess) -> str:
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("lookout: error:")]
    assert len(errors) == 1, err
    return errors[0]


def test_output_too_large_names_the_file_and_compact_reports_nothing(tmp_path):
    source = session(tmp_path)
    out = tmp_path / "next.jsonl"
    done = lookout([*COMPACT, "-o", out, source], env_for(tmp_path), tmp_path,
                   preexec_fn=_limit_file_size(300_000))
    error = _one_error(done)
    assert error == f"lookout: error: cannot write {out}: File too large"
    err = done.stderr.decode()
    assert "compact:" not in err and "shorten" not in err and "cleared" not in err, err
    assert not out.exists()


def test_store_write_failure_names_the_saved_file(tmp_path):
    source = session(tmp_path)
    done = lookout([*COMPACT, "-o", tmp_path / "next.jsonl", source], env_for(tmp_path), tmp_path,
                   preexec_fn=_limit_file_size(1_000))  # a saved record is larger
    error = _one_error(done)
    assert error.startswith(f"lookout: error: cannot write {tmp_path / 'saved' / 'sha256'}/"), error
    assert error.endswith(": File too large"), error


def _tmpfs(path: Path, size: str) -> bool:
    path.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True).returncode == 0


def test_full_disk_enospc_names_the_file(tmp_path):
    source = session(tmp_path)
    disk = tmp_path / "disk"
    if not _tmpfs(disk, "1m"):
        pytest.skip("needs root and mount for a 1 MB tmpfs (the RLIMIT_FSIZE tests cover the same paths)")
    try:
        with open(disk / "filler", "wb") as filler:  # fill it up
            try:
                filler.write(b"f" * (1 << 20))
            except OSError:
                pass
        out = disk / "next.jsonl"
        done = lookout([*COMPACT, "-o", out, source], env_for(tmp_path), tmp_path)
        assert _one_error(done) == f"lookout: error: cannot write {out}: No space left on device"
        assert "compact:" not in done.stderr.decode()
        # the store on the full disk: the file it could not save is named
        done = lookout([*COMPACT, "-o", tmp_path / "next.jsonl", source],
                       env_for(tmp_path, LOOKOUT_SAVE_DIR=str(disk / "saved")), tmp_path)
        error = _one_error(done)
        assert error.startswith(f"lookout: error: cannot write {disk / 'saved'}/"), error
        assert error.endswith(": No space left on device"), error
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)


# --- 7. the manifest ---------------------------------------------------------------------------
def test_manifest_is_private_and_an_old_one_is_tightened(tmp_path):
    source = session(tmp_path)
    env = env_for(tmp_path)
    manifest = tmp_path / "saved" / "manifest.jsonl"
    done = lookout([*COMPACT, "-o", tmp_path / "next.jsonl", source], env, tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    assert str(source).encode() in manifest.read_bytes()  # what makes it private
    assert stat.S_IMODE(manifest.stat().st_mode) == 0o600

    manifest.chmod(0o644)  # written by an earlier lookout
    before = manifest.read_bytes()
    done = lookout([*COMPACT, "--max-tokens", "15k", "-o", tmp_path / "next.jsonl", source], env, tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    assert manifest.read_bytes().startswith(before) and len(manifest.read_bytes()) > len(before)
    assert stat.S_IMODE(manifest.stat().st_mode) == 0o600


# --- 8. secrets in error messages --------------------------------------------------------------
def test_strict_parse_error_does_not_print_the_transcripts_secret(tmp_path):
    source = session(tmp_path, SMALL_SESSION)
    lines = source.read_bytes().splitlines(keepends=True)
    bad = (f'{{"type":"user","message":{{"content":"deploy with {GITHUB_TOKEN} and {AWS_KEY_ID} '
           f'secret {AWS_SECRET}"}}}} trailing\n').encode()
    source.write_bytes(b"".join([*lines[:2], bad, *lines[2:]]))
    for strict in (["--strict"], []):
        done = lookout(["measure", "--estimate", *strict, source], env_for(tmp_path), tmp_path)
        err = done.stderr.decode()
        assert done.returncode == (2 if strict else 0), err
        assert "session.jsonl:3: not JSON" in err, err
        for secret in (GITHUB_TOKEN, AWS_KEY_ID, AWS_SECRET, GITHUB_TOKEN[4:20], AWS_SECRET[4:20]):
            assert secret not in err


@pytest.mark.parametrize("variable, value", [
    ("LOOKOUT_COMPACTION_TAIL_TURNS", GITHUB_TOKEN),  # a number
    ("LOOKOUT_COMPACTION_PRUNE", AWS_SECRET),  # yes or no; a key the gate cannot tell alone
    ("LOOKOUT_COMPACTION_JOBS", AWS_KEY_ID),  # shorter; no setting is a 20-character word
])
def test_a_bad_lookout_variable_holding_a_secret_is_not_echoed(tmp_path, variable, value):
    source = session(tmp_path, SMALL_SESSION)
    done = lookout(["compact", source], env_for(tmp_path, **{variable: value}), tmp_path)
    error = _one_error(done)
    setting = variable.removeprefix("LOOKOUT_").lower().replace("compaction_", "compaction.")
    assert error.startswith(f"lookout: error: {variable}: {setting}: "), error  # still says which setting, and where
    assert value not in error and value[4:-4] not in error, error


@pytest.mark.parametrize("args, extra_env", [
    (["--budget", AWS_SECRET], {}),  # parsed as a size: core.units
    ([], {"LOOKOUT_BUDGET": GITHUB_TOKEN}),
])
def test_a_size_holding_a_secret_is_not_echoed(tmp_path, args, extra_env):
    source = session(tmp_path, SMALL_SESSION)
    done = lookout(["measure", "--report-only", *args, source], env_for(tmp_path, **extra_env), tmp_path)
    error = _one_error(done)
    value = args[1] if args else extra_env["LOOKOUT_BUDGET"]
    assert "not a number" in error and value not in error and value[4:-4] not in error, error


def test_a_failing_summary_command_does_not_print_the_key_it_echoes(tmp_path):
    source = session(tmp_path, SMALL_SESSION)
    command = f"command:echo 'error: bad credentials token={GITHUB_TOKEN}' >&2; exit 3"
    done = lookout(["compact", "--force", "--estimate", "--max-tokens", "5k", "--tail-turns", "1",
                    "--summarizer", command, "-o", tmp_path / "next.jsonl", source], env_for(tmp_path), tmp_path)
    error = _one_error(done)
    assert "the summary command exited with status 3: error: bad credentials token=" in error, error
    assert GITHUB_TOKEN not in error and GITHUB_TOKEN[4:-4] not in error, error
