"""Many real processes writing one scope at once lose nothing (fcntl lock + atomic writes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from conftest import lookout_exe
from test_memory_support import make_repo

PROCESSES = 8


def env_for(tmp_path) -> dict:
    env = dict(os.environ)
    env["LOOKOUT_DATA_DIR"] = str(tmp_path / "data")
    env["LOOKOUT_NO_CONFIG"] = "1"
    return env


def test_eight_cli_processes_saving_at_once_lose_nothing(tmp_path):
    repo = make_repo(tmp_path / "repo")
    env = env_for(tmp_path)
    exe = " ".join(lookout_exe())
    per_process = 4
    script = textwrap.dedent(f"""
        for j in $(seq 1 {per_process}); do
          {exe} memory save -q "process $1 note $j" || exit 1
        done
    """)
    procs = [subprocess.Popen(["bash", "-c", script, "bash", str(i)], cwd=repo, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for i in range(PROCESSES)]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err.decode()
    listing = subprocess.run([*lookout_exe(), "memory", "list", "--json"], cwd=repo, env=env,
                             capture_output=True, check=True).stdout.decode()
    got = sorted(json.loads(line)["note"] for line in listing.splitlines())
    want = sorted(f"process {i} note {j}" for i in range(PROCESSES) for j in range(1, per_process + 1))
    assert got == want
    # one project, one list that names every memory, no temp files left behind
    projects = [p for p in (tmp_path / "data" / "memory" / "projects").iterdir() if p.is_dir()]
    assert len(projects) == 1
    listed = (projects[0] / "MEMORY.md").read_text()
    assert all(f"- {note}\n" in listed for note in want)
    assert not [p for p in projects[0].rglob("*") if p.name.endswith(".tmp")]


def test_eight_processes_fill_a_scope_to_exactly_200(tmp_path, monkeypatch):
    """A scope of 150, then 8 processes trying 8 saves each at once: exactly 200 memories, and
    every save past the limit refused."""
    env = env_for(tmp_path)
    monkeypatch.setenv("LOOKOUT_DATA_DIR", env["LOOKOUT_DATA_DIR"])
    from lookout_cli.memory.project import everywhere_scope
    from lookout_cli.memory.store import Memory

    with everywhere_scope().transaction() as txn:
        for i in range(150):
            txn.add(Memory(id="", note=f"seed {i}"))
    code = textwrap.dedent("""
        import sys
        from lookout_cli.core.errors import LookoutError
        from lookout_cli.memory.project import everywhere_scope
        from lookout_cli.memory.store import Memory
        me = sys.argv[1]
        refused = 0
        for j in range(8):
            try:
                with everywhere_scope().transaction() as txn:
                    txn.add(Memory(id="", note=f"p{me} n{j}"))
            except LookoutError:
                refused += 1
        print(refused)
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code, str(i)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) for i in range(PROCESSES)]
    refused = 0
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err.decode()
        refused += int(out)
    assert refused == PROCESSES * 8 - 50
    folder = tmp_path / "data" / "memory" / "everywhere"
    files = [p for p in folder.glob("*.md") if p.name != "MEMORY.md"]
    assert len(files) == 200
    lines = [line for line in (folder / "MEMORY.md").read_text().splitlines() if line.startswith("- ")]
    assert len(lines) == 200
