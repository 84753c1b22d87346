"""The transcript filters ``memory inject`` and ``memory learn``, on every transcript format:
untouched records byte for byte, idempotent, --dry-run/--check, the 6 KB 'not sent' mark."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from conftest import SHARED_TRANSCRIPTS, run_lookout
from test_memory_support import BUILDERS, make_data

from lookout_cli.core.jsonl import read_records
from lookout_cli.formats import Transcript, detect
from lookout_cli.formats.view import SETUP
from lookout_cli.memory.project import everywhere_scope, resolve_project
from lookout_cli.memory.store import MAX_LIST_BYTES, Memory


@pytest.fixture
def data(tmp_path, monkeypatch):
    return make_data(tmp_path, monkeypatch)

DATA = Path(__file__).resolve().parent / "data"
FIXTURES = [
    DATA / "claude-code" / "compactions.jsonl",
    DATA / "claude-code" / "crlf-no-final-newline.jsonl",
    DATA / "codex" / "basic.jsonl",
    DATA / "openai" / "lines.jsonl",
    DATA / "openai" / "bodies.jsonl",
    DATA / "anthropic" / "lines.jsonl",
    DATA / "anthropic" / "bodies.jsonl",
    DATA / "gemini-cli" / "handmade.jsonl",
    *sorted(SHARED_TRANSCRIPTS.rglob("*.jsonl")),
]
WRITABLE = {"claude-code", "codex", "openai", "anthropic"}


def env_for(tmp_path: Path, work: Path) -> dict:
    import os

    env = dict(os.environ)
    env["LOOKOUT_DATA_DIR"] = str(tmp_path / "data")
    env["LOOKOUT_NO_CONFIG"] = "1"
    return env


def lookout(args: list[str], data_in: bytes, tmp_path: Path, cwd: Path | None = None, check: bool = True):
    work = cwd or tmp_path / "work"
    work.mkdir(exist_ok=True)
    result = run_lookout("memory", *args, input=data_in, cwd=work, env=env_for(tmp_path, work))
    if check:
        assert result.returncode == 0, result.stderr.decode()
    return result


def fmt_of(data: bytes) -> str | None:
    adapter = detect(list(read_records(io.BytesIO(data))))
    return adapter.name if adapter else None


def untouched_in_order(before: bytes, after: bytes) -> tuple[int, int]:
    """How many input lines reach the output byte for byte and in order, and how many output
    lines are new or rewritten."""
    old = before.splitlines()
    new = after.splitlines()
    kept, extra, i = 0, 0, 0
    for line in new:
        j = i
        while j < len(old) and old[j] != line:
            j += 1
        if j < len(old):
            kept += 1
            i = j + 1
        else:
            extra += 1
    return kept, extra


def seed_memories(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("LOOKOUT_DATA_DIR", str(tmp_path / "data"))
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    with everywhere_scope().transaction() as txn:
        txn.add(Memory(id="", note="I prefer small pull requests"))
    with resolve_project(work).scope.transaction() as txn:
        txn.add(Memory(id="", note="The API tests need Docker running"))
        txn.add(Memory(id="", note="Staging needs the VPN", details="Profile corp-vpn"))


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_inject_on_every_format(path, tmp_path, monkeypatch):
    seed_memories(tmp_path, monkeypatch)
    data_in = path.read_bytes()
    first = lookout(["inject", "-P", str(tmp_path / "work")], data_in, tmp_path)
    out = first.stdout
    fmt = fmt_of(data_in)
    if fmt in WRITABLE:
        assert b"I prefer small pull requests" in out
        assert b"The API tests need Docker running" in out
        assert b"staging-needs-vpn.md" in out
        # the model sees the block as setup
        records = list(read_records(io.BytesIO(out)))
        adapter = detect(records)
        view = adapter.view(Transcript(records, adapter))
        setup = [i for i in view.items if i.kind == SETUP and "I prefer small pull requests" in i.text]
        assert setup, "the memory block is not in the model-visible setup"
        # every other record passes byte for byte: at most one rewritten, one added
        kept, extra = untouched_in_order(data_in, out)
        assert kept >= len(data_in.splitlines()) - 1 and extra <= 2, (kept, extra)
    else:
        assert out == data_in
        assert b"memory not injected" in first.stderr or fmt is None
    # idempotent
    second = lookout(["inject", "-P", str(tmp_path / "work")], out, tmp_path)
    assert second.stdout == out
    # dry run passes the input through untouched; check says whether it would change
    dry = lookout(["inject", "--dry-run", "-P", str(tmp_path / "work")], data_in, tmp_path)
    assert dry.stdout == data_in
    check = lookout(["inject", "--check", "-P", str(tmp_path / "work")], data_in, tmp_path, check=False)
    assert check.returncode == (1 if fmt in WRITABLE else 0)
    assert lookout(["inject", "--check", "-P", str(tmp_path / "work")], out, tmp_path).returncode == 0


def test_inject_updates_its_block_and_removes_it_when_memory_is_empty(tmp_path, monkeypatch):
    seed_memories(tmp_path, monkeypatch)
    data_in = BUILDERS["openai"](["hello"])
    out = lookout(["inject"], data_in, tmp_path).stdout
    assert out.count(b"I prefer small pull requests") == 1
    with everywhere_scope().transaction() as txn:
        txn.add(Memory(id="", note="Use British spelling"))
    out2 = lookout(["inject"], out, tmp_path).stdout
    assert out2.count(b"Use British spelling") == 1 and out2.count(b"I prefer small pull requests") == 1
    assert len(out2.splitlines()) == len(out.splitlines())
    # no Everywhere, an empty project: the block goes away
    empty = tmp_path / "empty"
    empty.mkdir()
    out3 = lookout(["inject", "--no-everywhere", "-P", str(empty)], out2, tmp_path).stdout
    assert out3 == data_in


def test_inject_marks_what_is_past_6_kb_as_not_sent(tmp_path, monkeypatch):
    seed_memories(tmp_path, monkeypatch)
    scope = resolve_project(tmp_path / "work").scope
    with scope.transaction() as txn:
        for i in range(30):
            txn.add(Memory(id="", note=f"Long fact {i:02d} " + "z" * 280), check=False)
    out = lookout(["inject"], BUILDERS["anthropic"](["hi"]), tmp_path).stdout.decode()
    text = json.loads(out.splitlines()[0])["content"][0]["text"]
    project_part = text.split("## Project", 1)[1]
    lines = [line for line in project_part.splitlines() if line.startswith("- ")]
    sent = [line for line in lines if "not sent" not in line]
    assert sum(len(line.encode()) + 1 for line in sent) <= MAX_LIST_BYTES
    assert "Long fact 29" in project_part  # newest first
    assert "Long fact 00" not in project_part
    marker = [line for line in lines if "not sent" in line]
    assert len(marker) == 1 and "older memories not sent" in marker[0]
    # list shows the same
    listing = run_lookout("memory", "list", cwd=tmp_path / "work", env=env_for(tmp_path, tmp_path)).stdout.decode()
    assert "(not sent)" in listing


@pytest.mark.parametrize("fmt", sorted(BUILDERS))
def test_learn_on_every_format(fmt, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    prompts = [
        "# The API tests need Docker running",
        "#! I prefer small pull requests",
        "Please remember that the staging deploy needs the VPN. Then fix the bug.",
        "Just a normal request with no memory in it",
        "# " + "too long " * 60,
    ]
    data_in = BUILDERS[fmt](prompts)
    first = lookout(["learn"], data_in, tmp_path)
    assert first.stdout == data_in  # the transcript passes through unchanged
    assert b"not saved" in first.stderr and b"3 to 400" in first.stderr
    env = env_for(tmp_path, work)
    listing = run_lookout("memory", "list", "--all", "--json", cwd=work, env=env).stdout.decode()
    mems = {m["note"]: m for m in map(json.loads, listing.splitlines())}
    assert set(mems) == {"The API tests need Docker running", "I prefer small pull requests",
                         "The staging deploy needs the VPN."}
    assert mems["I prefer small pull requests"]["scope"] == "everywhere"
    assert mems["The API tests need Docker running"]["author"] == "you"
    assert mems["The staging deploy needs the VPN."]["author"] == "learned"
    assert mems["The staging deploy needs the VPN."]["scope"] == "project"
    # idempotent: nothing new the second time, even after a forget
    run_lookout("memory", "forget", "api-tests-need-docker-running", cwd=work, env=env)
    second = lookout(["learn"], data_in, tmp_path)
    assert second.stdout == data_in
    assert b"save" not in second.stderr
    listing2 = run_lookout("memory", "list", "--all", "--json", cwd=work, env=env).stdout.decode()
    assert len(listing2.splitlines()) == 2


def test_learn_refuses_secrets_and_respects_dry_run_and_check(tmp_path):
    import random
    import string

    r = random.Random(5)
    token = "gh" + "p_" + "".join(r.choice(string.ascii_letters + string.digits) for _ in range(36))
    data_in = BUILDERS["openai"]([f"# deploy token {token}", "# Builds need Node 20"])
    dry = lookout(["learn", "--dry-run"], data_in, tmp_path)
    assert dry.stdout == data_in and b"would save" in dry.stderr
    assert not (tmp_path / "data").exists() or not list((tmp_path / "data").rglob("*.md"))
    check = lookout(["learn", "--check"], data_in, tmp_path, check=False)
    assert check.returncode == 1
    real = lookout(["learn"], data_in, tmp_path)
    assert b"github-pat" in real.stderr and token.encode() not in real.stderr
    assert lookout(["learn", "--check"], data_in, tmp_path).returncode == 0
    files = list((tmp_path / "data").rglob("*.md"))
    assert all(token not in f.read_text() for f in files)


def test_learn_in_an_agents_chat_goes_to_the_agent(tmp_path):
    data_in = BUILDERS["anthropic"](["# Review for security first", "remember that reports go to Slack"])
    lookout(["learn", "-A", "reviewer"], data_in, tmp_path)
    work = tmp_path / "work"
    env = env_for(tmp_path, work)
    out = run_lookout("memory", "list", "-A", "reviewer", "--json", cwd=work, env=env).stdout.decode()
    assert sorted(json.loads(x)["note"] for x in out.splitlines()) == ["Reports go to Slack",
                                                                        "Review for security first"]
    assert run_lookout("memory", "list", "--json", cwd=work, env=env).stdout == b""


def test_learn_ignores_attachments_and_tool_output(tmp_path):
    lines = [
        {"role": "user", "content": [{"type": "text", "text": "Summarise the README"},
                                     {"type": "text", "text": "# README\nremember that this is an attachment"}]},
        {"role": "assistant", "content": "# Not a note: the assistant said it"},
    ]
    data_in = b"".join(json.dumps(x).encode() + b"\n" for x in lines)
    lookout(["learn"], data_in, tmp_path)
    assert not (tmp_path / "data").exists() or not list((tmp_path / "data").rglob("*.md"))


def test_learn_and_inject_pipeline(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    data_in = BUILDERS["claude-code"](["# Deploys go through ArgoCD", "now deploy it"], cwd=str(work))
    learned = lookout(["learn"], data_in, tmp_path).stdout
    injected = lookout(["inject"], learned, tmp_path).stdout
    assert b"Deploys go through ArgoCD" in injected.split(data_in.splitlines()[-1])[-1] or \
        b"Deploys go through ArgoCD" in injected
    assert lookout(["inject"], injected, tmp_path).stdout == injected
