"""Every ``console`` example in the README runs, and prints what the README says it prints.

In a ```console block, a line starting with ``$ `` is a command (run with bash in a scratch copy
of ``examples/``, with ``lookout`` on PATH and its own data folders); the lines after it are
expected output (standard output and standard error together). ``...`` stands for any lines.
Expected lines must appear in order; each must match an output line exactly (trailing spaces
ignored), or, when it ends in ``...``, its beginning (for figures that depend on the machine,
such as the length of a saved file's path). A ``# exit N`` comment at the end of a command line names its expected exit status.
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


def blocks() -> list[list[tuple[str, list[str], int]]]:
    """Each console block: its commands with their expected output and exit status."""
    found = []
    for block in BLOCK.findall((REPO / "README.md").read_text()):
        steps: list[tuple[str, list[str], int]] = []
        command: str | None = None
        expected: list[str] = []
        for line in block.splitlines() + ["$ "]:
            if line.startswith("$ "):
                if command:
                    code = EXIT.search(command)
                    steps.append((EXIT.sub("", command), expected, int(code.group(1)) if code else 0))
                command, expected = line[2:], []
            else:
                expected.append(line.rstrip())
        found.append(steps)
    return found


def same(expected: str, actual: str) -> bool:
    """Equal, or (for an expected line ending in ``...``) starting the same."""
    if expected.endswith("...") and expected != "...":
        return actual.startswith(expected[:-3])
    return expected == actual


def matches(expected: list[str], actual: list[str]) -> bool:
    position = 0
    skipping = False
    for line in expected:
        if line == "...":
            skipping = True
            continue
        while position < len(actual) and not same(line, actual[position]):
            if not skipping:
                return False
            position += 1
        if position == len(actual):
            return False
        position += 1
        skipping = False
    return skipping or position == len(actual)


@pytest.mark.parametrize("steps", blocks(), ids=[f"block{n}" for n in range(len(blocks()))])
def test_readme_example(steps, tmp_path):
    """The commands of one block run in order in one scratch folder, as a reader would type them."""
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               LOOKOUT_NO_CONFIG="1", COLUMNS="100", LOOKOUT_DATA_DIR=str(tmp_path / "data"),
               LOOKOUT_SAVE_DIR=str(tmp_path / "saved"))
    for command, expected, code in steps:
        result = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, timeout=300)
        output = [line.rstrip() for line in result.stdout.splitlines()]
        assert result.returncode == code, f"$ {command}\n{result.stdout}"
        assert matches(expected, output), (f"$ {command}\nexpected:\n" + "\n".join(expected)
                                           + "\ngot:\n" + "\n".join(output))


def test_the_matcher():
    assert matches(["a", "...", "c"], ["a", "b", "c"])
    assert not matches(["a", "c"], ["a", "b", "c"])
    assert matches(["..."], ["x"]) and matches([], [])
    assert not matches(["a"], ["a", "b"])
    assert matches(["a", "..."], ["a", "b"])
    assert matches(["ab..."], ["abc"]) and not matches(["ab..."], ["xbc"])
