"""Every ``console`` example in the README runs, and prints what the README says it prints.

In a ```console block, a line starting with ``$ `` is a command (run with bash in a scratch copy
of ``examples/``, with ``lookout`` on PATH and its own data folders); the lines after it are
expected output (standard output and standard error together). ``...`` stands for any lines.
Expected lines must appear in order; each must match an output line exactly (trailing spaces
ignored). A ``# exit N`` comment at the end of a command line names its expected exit status.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

BLOCK = re.compile(r"```console\n(.*?)```", re.S)
EXIT = re.compile(r"\s+# exit (\d+)$")


def examples() -> list[tuple[str, list[str], int, int]]:
    found = []
    text = (REPO / "README.md").read_text()
    for number, block in enumerate(BLOCK.findall(text)):
        command: str | None = None
        expected: list[str] = []
        for line in block.splitlines() + ["$ "]:
            if line.startswith("$ "):
                if command:
                    code = EXIT.search(command)
                    found.append((EXIT.sub("", command), expected, int(code.group(1)) if code else 0, number))
                command, expected = line[2:], []
            else:
                expected.append(line.rstrip())
    return found


def matches(expected: list[str], actual: list[str]) -> bool:
    position = 0
    skipping = False
    for line in expected:
        if line == "...":
            skipping = True
            continue
        while position < len(actual) and actual[position] != line:
            if not skipping:
                return False
            position += 1
        if position == len(actual):
            return False
        position += 1
        skipping = False
    return skipping or position == len(actual)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("readme")
    shutil.copytree(REPO / "examples", folder / "examples")
    return folder


@pytest.mark.parametrize("command, expected, code, block", examples(),
                         ids=[f"{e[3]}:{e[0][:40]}" for e in examples()])
def test_readme_example(command, expected, code, block, workdir):
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               LOOKOUT_NO_CONFIG="1", COLUMNS="100", LOOKOUT_DATA_DIR=str(workdir / "data"),
               LOOKOUT_SAVE_DIR=str(workdir / "saved"))
    result = subprocess.run(["bash", "-c", command], cwd=workdir, env=env, capture_output=True, text=True,
                            timeout=300)
    output = [line.rstrip() for line in (result.stdout + result.stderr).splitlines()]
    assert result.returncode == code, f"$ {command}\n{result.stderr}"
    assert matches(expected, output), f"$ {command}\nexpected:\n" + "\n".join(expected) + "\ngot:\n" + "\n".join(output)


def test_the_matcher():
    assert matches(["a", "...", "c"], ["a", "b", "c"])
    assert not matches(["a", "c"], ["a", "b", "c"])
    assert matches(["..."], ["x"]) and matches([], [])
    assert not matches(["a"], ["a", "b"])
    assert matches(["a", "..."], ["a", "b"])
