"""What pip installs: the wheel holds every module and shipped file and runs from them alone
(lookout_cli.agents was once left out of a hand-kept package list, which only an editable
install hid), and the README's editable install is a path in a .pth file, not an import hook
that every Python process of the environment would load at start-up."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from test_statusline import STATUS_JSON

import lookout_cli

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = Path(lookout_cli.__file__).parent
EXAMPLE = ROOT / "examples" / "claude-code-session.jsonl"


def _shipped(folder: Path) -> set[str]:
    """The package's files as a wheel names them (no compiled caches)."""
    return {p.relative_to(folder.parent).as_posix() for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}


def test_the_wheel_holds_every_module_and_runs_the_commands_alone(tmp_path):
    source = tmp_path / "source"  # built from a copy: a build leaves build/ and egg-info behind
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source)
    shutil.copytree(ROOT / "man", source / "man")
    shutil.copytree(PACKAGE, source / "lookout_cli", ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                            "--no-index", "-w", str(tmp_path / "dist"), str(source)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("lookout-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        archive.extractall(tmp_path / "installed")
    assert _shipped(source / "lookout_cli") <= names, sorted(_shipped(source / "lookout_cli") - names)
    assert any(n.endswith("/man1/lookout-measure.1") for n in names)

    # the unpacked wheel ahead of the checkout on the path: every lookout module from the wheel
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "installed"), LOOKOUT_CACHE_DIR=str(tmp_path / "cache"))
    where = subprocess.run([sys.executable, "-c", "import lookout_cli.agents, lookout_cli.commands; "
                            "print(lookout_cli.__file__)"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert where.returncode == 0 and where.stdout.startswith(str(tmp_path / "installed")), where

    def run(*args: str, input: bytes = b"") -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "lookout_cli", *args], input=input, capture_output=True,
                              env=env, cwd=tmp_path, timeout=120)

    measured = run("measure", "--json", str(EXAMPLE))
    assert measured.returncode == 0 and json.loads(measured.stdout)["used"]["tokens"] > 0, measured.stderr
    # statusline and hook live in lookout_cli.agents, the package the hand-kept list missed
    payload = {**STATUS_JSON, "transcript_path": str(EXAMPLE), "cwd": str(tmp_path)}
    line = run("statusline", input=json.dumps(payload).encode())
    assert line.returncode == 0 and line.stderr == b"" and b"%" in line.stdout, line
    helped = run("hook", "--help")
    assert helped.returncode == 0 and b"Usage:" in helped.stdout, helped.stderr


def test_the_editable_install_is_a_path_not_an_import_hook():
    """Setuptools installs an import hook for packages mapped outside one root; the hook's module
    imports pathlib, re and urllib in every Python process of the environment (start-up 13 ms
    -> 27 ms here), the status line and a prompt's hook included."""
    started = subprocess.run([sys.executable, "-c", "import sys; print(sorted(sys.modules))"],
                             capture_output=True, text=True, cwd="/")
    assert started.returncode == 0, started.stderr
    hooks = [m for m in json.loads(started.stdout.replace("'", '"')) if m.startswith("__editable__")]
    assert hooks == [], hooks
