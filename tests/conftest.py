"""Shared test set-up: every test runs with its own XDG folders and no user config."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_TRANSCRIPTS = REPO.parent / "shared" / "transcripts"
DATA = Path(__file__).resolve().parent / "data"


def pytest_configure(config):
    """A cache folder of the session's for what this process keeps there before a test's own
    (``isolated_env``) is set: lookout's classes are made as the test modules import them, and
    the compiled ``__init__`` they keep (``core/dataclass.py``) would otherwise go to the
    user's; gone with the session (written at exit only where the folder still is).

    Compile lookout's modules once, as pip does when it installs a wheel: an editable install
    under PYTHONDONTWRITEBYTECODE (set in some CI images) would otherwise compile every module
    in each of the suite's thousands of ``lookout`` processes (about 0.1 s each)."""
    import tempfile

    folder = tempfile.mkdtemp(prefix="lookout-session-cache-")
    os.environ["LOOKOUT_CACHE_DIR"] = folder
    config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
    if hasattr(config, "workerinput"):  # xdist workers: the controller did it
        return
    import compileall

    import lookout_cli
    import lookout_cli.commands

    for package in (lookout_cli, lookout_cli.commands):
        compileall.compile_dir(Path(package.__file__).parent, quiet=1)


def lookout_exe() -> list[str]:
    """The installed console script (falls back to ``python -m lookout_cli``)."""
    exe = shutil.which("lookout", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "lookout_cli"]


@pytest.fixture(scope="session")
def rank_tables(tmp_path_factory) -> list[Path]:
    """The tokenizers' rank tables as lookout keeps them in its cache folder, made once."""
    from lookout_cli.tokens import tokenizer as tokens

    folder = tmp_path_factory.mktemp("ranks")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LOOKOUT_CACHE_DIR", str(folder))
        for name in tokens.ENCODINGS:
            tokens.cached_ranks(name)
    return sorted(folder.glob("ranks-*"))


@pytest.fixture(autouse=True)
def isolated_env(tmp_path_factory, monkeypatch, rank_tables):
    home = tmp_path_factory.mktemp("home")
    for var, sub in (("XDG_DATA_HOME", "data"), ("XDG_CONFIG_HOME", "config"),
                     ("XDG_CACHE_HOME", "cache"), ("XDG_STATE_HOME", "state")):
        monkeypatch.setenv(var, str(home / sub))
    for var in list(os.environ):
        if var.startswith("LOOKOUT_"):
            monkeypatch.delenv(var)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("LOOKOUT_SAVE_DIR", str(home / "saved"))
    # Each test has its own cache folder, but not its own copy of the rank tables: every
    # lookout process would otherwise write 3.4 MB there on its first count. Links, which the
    # code only ever replaces (a test that damages one unlinks it first).
    cache = home / "cache" / "lookout"
    cache.mkdir(parents=True)
    for table in rank_tables:
        os.link(table, cache / table.name)
    return home


@pytest.fixture
def session(tmp_path) -> Path:
    """A copy of the small Claude Code session of tests/data/measure, alone in a folder."""
    path = tmp_path / "work" / "session.jsonl"
    path.parent.mkdir()
    shutil.copyfile(DATA / "measure" / "claude-small.jsonl", path)
    return path


def run_lookout(*args: str, input: bytes | None = b"", cwd=None, env=None, timeout: float = 120):
    """Run the installed ``lookout`` in a real subprocess; returns CompletedProcess (bytes)."""
    return subprocess.run([*lookout_exe(), *args], input=input, capture_output=True,
                          cwd=cwd, env=env, timeout=timeout)


@pytest.fixture
def lookout():
    return run_lookout


def real_transcripts() -> list[Path]:
    """Every transcript file shipped in ../shared/transcripts (skipped when absent)."""
    if not SHARED_TRANSCRIPTS.is_dir():
        return []
    return sorted(p for p in SHARED_TRANSCRIPTS.rglob("*.jsonl"))
