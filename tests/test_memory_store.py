"""Storage and the management subcommands: save, list, show, edit, forget, forgotten, restore,
path; the limits at their boundaries; Forgotten's 30 days; hand edits; --dry-run and --check."""

from __future__ import annotations

import json
import os
import random
import string
from pathlib import Path

import pytest
from test_memory_support import listed, make_data, notes, ok, run

from lookout_cli.memory.project import everywhere_scope, resolve_project
from lookout_cli.memory.store import (
    MAX_LIST_BYTES,
    MAX_MEMORIES,
    MAX_SCOPE_BYTES,
    Memory,
    parse_list,
    parse_memory,
    usage_of,
)


@pytest.fixture
def data(tmp_path, monkeypatch):
    return make_data(tmp_path, monkeypatch)

def project_scope():
    return resolve_project(None).scope


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under a folder (for 'nothing was written' checks)."""
    if not folder.exists():
        return {}
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# --- save, list, show ----------------------------------------------------------------------------
def test_save_writes_a_file_and_the_list(data):
    ok("save", "The API tests need Docker running")
    ok("save", "The staging deploy needs the VPN", "--details", "Profile: corp-vpn.\nAsk IT for access.",
       "--source", "chat.jsonl#L4")
    scope = project_scope()
    files = sorted(p.name for p in scope.path.glob("*.md"))
    assert files == ["MEMORY.md", "api-tests-need-docker-running.md", "staging-deploy-needs-vpn.md"]
    text = (scope.path / "staging-deploy-needs-vpn.md").read_text()
    meta_lines = text.split("---")[1].strip().splitlines()
    keys = [line.split(":")[0] for line in meta_lines]
    assert keys == ["topic", "author", "source", "created", "updated", "verified"]
    assert text.endswith("The staging deploy needs the VPN\n\nProfile: corp-vpn.\nAsk IT for access.\n")
    listing = (scope.path / "MEMORY.md").read_text().splitlines()
    assert listing[0] == "# Memory: project work"
    # newest first; details linked
    assert listing[2:] == [
        "- The staging deploy needs the VPN ([details](staging-deploy-needs-vpn.md))",
        "- The API tests need Docker running",
    ]
    mem = parse_memory(text, "staging-deploy-needs-vpn")
    assert (mem.author, mem.source, mem.details) == ("you", "chat.jsonl#L4", "Profile: corp-vpn.\nAsk IT for access.")


def test_same_note_is_remembered_once(data):
    ok("save", "Use pnpm, not yarn")
    result = ok("save", "use pnpm,   not yarn.")
    assert "already remembered" in result.stderr
    assert notes() == ["Use pnpm, not yarn"]


def test_newest_first_even_within_one_second(data, monkeypatch):
    monkeypatch.setenv("LOOKOUT_NOW", "2026-05-01T12:00:00Z")
    for i in range(5):
        ok("save", f"note number {i}")
    assert notes() == [f"note number {i}" for i in reversed(range(5))]


@pytest.mark.parametrize("length, good", [(2, False), (3, True), (400, True), (401, False)])
def test_note_length_boundaries(data, length, good):
    note = ("abcdefghij" * 41)[:length]
    result = run("save", note)
    if good:
        assert result.exit_code == 0, result.stderr
        assert notes() == [note]
    else:
        assert result.exit_code == 2
        assert "3 to 400 characters" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
        assert not project_scope().path.joinpath("MEMORY.md").exists()


def test_note_from_stdin(data):
    ok("save", "-", input="Builds need\nNode 20\n")
    assert notes() == ["Builds need Node 20"]


def test_list_filters_sort_and_json(data):
    ok("save", "Docker runs the API tests")
    ok("save", "--by", "agent:reviewer", "Review for security first")
    ok("save", "--by", "learned", "The docs build with mkdocs")
    assert [m["author"] for m in listed("--author", "agent")] == ["agent"]
    assert notes("--search", "DOCKER") == ["Docker runs the API tests"]
    assert notes("--sort", "oldest")[0] == "Docker runs the API tests"
    text = ok("list").stdout
    assert "by reviewer" in text and "learned" in text and "3 of 200 memories" in text
    one = listed()[0]
    assert set(one) >= {"id", "note", "author", "created", "updated", "verified", "sent", "path"}


def test_show_by_id_prefix_and_position(data):
    ok("save", "First note here")
    ok("save", "Second note here", "--details", "more")
    assert ok("show", "1").stdout.startswith("Second note here\n\nmore\n")
    assert ok("show", "first").stdout.startswith("First note here")
    shown = json.loads(ok("show", "second-note-here", "--json").stdout)
    assert shown["details"] == "more"
    bad = run("show", "nope")
    assert bad.exit_code == 2 and "no memory 'nope'" in bad.stderr


def test_path_prints_the_folder(data):
    assert ok("path", "-E").stdout.strip() == str(everywhere_scope().path)


def test_scopes_are_separate(data):
    ok("save", "-E", "I prefer small pull requests")
    ok("save", "-A", "reviewer", "Review for security first")
    ok("save", "Project fact here")
    assert notes("-E") == ["I prefer small pull requests"]
    assert notes("-A", "reviewer") == ["Review for security first"]
    assert notes() == ["Project fact here"]
    assert len(listed("--all")) == 3
    bad = run("save", "-A", "../escape", "nope nope")
    assert bad.exit_code == 2 and "agent name" in bad.stderr
    both = run("save", "-E", "-A", "x", "two scopes")
    assert both.exit_code == 2


def test_agent_saves_to_everywhere_need_approval(data, monkeypatch):
    bad = run("save", "-E", "--by", "agent", "Agent wants this everywhere")
    assert bad.exit_code == 2 and "approval" in bad.stderr
    assert notes("-E") == []
    monkeypatch.setenv("LOOKOUT_MEMORY_SAVE_EVERYWHERE", "only-me")
    monkeypatch.delenv("LOOKOUT_NO_CONFIG")
    ok("save", "-E", "--by", "agent", "Agent wants this everywhere")
    assert notes("-E") == [] and notes() == ["Agent wants this everywhere"]
    monkeypatch.setenv("LOOKOUT_MEMORY_SAVE_EVERYWHERE", "agents")
    ok("save", "-E", "--by", "agent", "Agents may save here")
    assert notes("-E") == ["Agents may save here"]
    learned = run("save", "-E", "--by", "learned", "never everywhere")
    assert learned.exit_code == 2


def test_topic_replaces_and_keeps_the_old_version(data):
    ok("save", "--topic", "package manager", "We use yarn")
    ok("save", "--topic", "package manager", "We use pnpm")
    assert notes() == ["We use pnpm"]
    gone = [json.loads(x) for x in ok("forgotten", "--json").stdout.splitlines()]
    assert [g["note"] for g in gone] == ["We use yarn"]
    assert listed()[0]["id"] == "package-manager"


def test_an_agent_may_not_replace_your_memory(data):
    ok("save", "--topic", "style", "Use black")
    bad = run("save", "--topic", "style", "--by", "agent", "Use ruff format")
    assert bad.exit_code == 2 and "written by you" in bad.stderr
    assert notes() == ["Use black"]


# --- secrets -----------------------------------------------------------------------------------
def fake_github_token() -> str:
    r = random.Random(7)
    return "gh" + "p_" + "".join(r.choice(string.ascii_letters + string.digits) for _ in range(36))


def test_secret_is_refused_with_rule_and_masked_preview(data):
    token = fake_github_token()
    result = run("save", f"Deploy with {token}")
    assert result.exit_code == 2
    assert "rule github-pat" in result.stderr
    assert token not in result.stderr and token[:4] + "…" in result.stderr
    assert "save where the secret lives instead" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    details = run("save", "Deploy notes", "--details", f"token {token}")
    assert details.exit_code == 2
    assert tree(data) == {} or not project_scope().path.joinpath("MEMORY.md").exists()
    ok("save", f"Deploy with {token}", "--allow-secret", "github-pat")
    assert len(notes()) == 1


def test_a_hex_token_in_details_is_refused(data):
    r = random.Random(5)
    hex_token = "".join(r.choice("0123456789abcdef") for _ in range(40))
    result = run("save", "Staging API access", "--details", f"curl -H 'Authorization: Bearer {hex_token}'")
    assert result.exit_code == 2 and "rule authorization-header" in result.stderr
    assert hex_token not in result.stderr and hex_token[:8] not in result.stderr


@pytest.mark.parametrize("note,allow,fragment", [
    ("Connect with mysql -uroot -pS3cr3tPass db", "command-line-password", "s3cr3t"),
    ("Deploy with the key AKIAIOSFODNN7EXAMPLE", "aws-access-key-id", "akia"),
    # a password the gate cannot tell from a word keeps out of the name all the same
    ("The wifi at the office takes Xk29fLq9wz", None, "xk29"),
])
def test_a_memory_file_name_never_carries_a_secret(data, note, allow, fragment):
    ok("save", note, *(["--allow-secret", allow] if allow else []))
    names = [p.name for p in project_scope().path.glob("*.md") if p.name != "MEMORY.md"]
    assert len(names) == 1 and fragment not in names[0], names


# --- limits at their boundaries ------------------------------------------------------------------
def fill(scope, mems: list[Memory]) -> None:
    with scope.transaction() as txn:
        for mem in mems:
            txn.add(mem, check=False)


def test_two_hundred_memories_then_full(data):
    scope = project_scope()
    fill(scope, [Memory(id="", note=f"fact {i:03d}") for i in range(MAX_MEMORIES - 1)])
    ok("save", "fact 199")
    assert scope.usage().memories == MAX_MEMORIES
    full = run("save", "fact 200")
    assert full.exit_code == 2
    assert "memory is full" in full.stderr and "200 memories" in full.stderr
    assert scope.usage().memories == MAX_MEMORIES
    ok("forget", "fact-000")
    ok("save", "fact 200")
    assert scope.usage().memories == MAX_MEMORIES


def _note_for_line(n: int) -> str:
    """A note whose list line is exactly n bytes ("- " + note + newline)."""
    return "x" * (n - 3)


def test_six_kb_of_list_boundary(data):
    scope = project_scope()
    # 15 lines of 400 bytes = 6000 bytes; the last memory fills the list to exactly 6144
    fill(scope, [Memory(id="", note=_note_for_line(400)[:-3] + f"{i:03d}") for i in range(15)])
    assert scope.usage().list_bytes == 6000
    over = run("save", _note_for_line(MAX_LIST_BYTES - 6000 + 1))
    assert over.exit_code == 2 and "list would be 6,145 bytes" in over.stderr
    ok("save", _note_for_line(MAX_LIST_BYTES - 6000))
    assert scope.usage().list_bytes == MAX_LIST_BYTES
    assert run("save", "one more").exit_code == 2


def test_128_kb_with_details_boundary(data):
    scope = project_scope()
    ok("save", "Big one", "--details", "d" * 100_000)
    used = scope.usage().total_bytes
    line = len("- Second ([details](second.md))\n")
    room = MAX_SCOPE_BYTES - used - line
    over = run("save", "Second", "--details", "e" * (room + 1))
    assert over.exit_code == 2 and "with details" in over.stderr
    ok("save", "Second", "--details", "e" * room)
    assert scope.usage().total_bytes == MAX_SCOPE_BYTES


def test_edit_cannot_grow_past_the_limit(data):
    scope = project_scope()
    ok("save", "Grow me", "--details", "a")
    fill(scope, [Memory(id="", note="filler", details="f" * (MAX_SCOPE_BYTES - 200))])
    bad = run("edit", "grow-me", "--details", "g" * 500)
    assert bad.exit_code == 2 and "full" in bad.stderr
    ok("edit", "grow-me", "--details", "b")  # no larger: fine even near the limit


# --- forget, forgotten, restore, 30 days ---------------------------------------------------------
def test_forget_and_restore(data, monkeypatch):
    monkeypatch.setenv("LOOKOUT_NOW", "2026-05-01T12:00:00Z")
    ok("save", "Keep this around")
    ok("save", "Another note")
    ok("forget", "keep-around", "--reason", "moved to the wiki")
    assert notes() == ["Another note"]
    gone = ok("forgotten").stdout
    assert "Keep this around" in gone and "moved to the wiki" in gone and "30 days left" in gone
    ok("restore", "keep-around")
    assert sorted(notes()) == ["Another note", "Keep this around"]
    assert ok("forgotten").stdout.count("Keep this around") == 0


def test_forgotten_is_kept_30_days_then_purged(data, monkeypatch):
    monkeypatch.setenv("LOOKOUT_NOW", "2026-05-01T12:00:00Z")
    ok("save", "Short-lived note")
    ok("forget", "1")
    monkeypatch.setenv("LOOKOUT_NOW", "2026-05-31T11:59:00Z")  # 29 days 23:59 later
    assert "Short-lived note" in ok("forgotten").stdout
    monkeypatch.setenv("LOOKOUT_NOW", "2026-05-31T12:00:01Z")
    assert "Short-lived note" not in ok("forgotten").stdout
    bad = run("restore", "short-lived-note")
    assert bad.exit_code == 2
    ok("save", "Any write purges")
    assert list((project_scope().path / ".forgotten").glob("*.md")) == []


def test_restore_over_a_newer_version_keeps_both(data):
    ok("save", "--topic", "db", "Postgres 15")
    ok("forget", "db")
    ok("save", "--topic", "db", "Postgres 16")
    ok("restore", "db")
    assert notes() == ["Postgres 15"]
    assert "Postgres 16" in ok("forgotten").stdout


def test_forget_purge_deletes_for_good(data):
    ok("save", "Oops a mistake here")
    ok("forget", "1")
    ok("restore", "oops-mistake-here")
    ok("forget", "oops-mistake-here", "--purge")
    assert notes() == []
    assert "Oops" not in ok("forgotten").stdout


# --- edit --------------------------------------------------------------------------------------
def test_edit_moves_the_date_and_keeps_the_old_text(data, monkeypatch):
    monkeypatch.setenv("LOOKOUT_NOW", "2026-05-01T12:00:00Z")
    ok("save", "Staging needs the VPN")
    monkeypatch.setenv("LOOKOUT_NOW", "2026-05-02T12:00:00Z")
    ok("edit", "1", "Staging needs the VPN and 2FA")
    mem = listed()[0]
    assert mem["note"] == "Staging needs the VPN and 2FA"
    assert mem["updated"].startswith("2026-05-02") and mem["created"].startswith("2026-05-01")
    assert "Staging needs the VPN" in ok("forgotten").stdout
    ok("edit", "1", "--details", "Use corp profile")
    ok("edit", "1", "--no-details")
    assert listed()[0]["details"] == ""
    monkeypatch.setenv("LOOKOUT_NOW", "2026-05-09T12:00:00Z")
    ok("edit", "1", "--verified")
    assert listed()[0]["verified"].startswith("2026-05-09")
    token = fake_github_token()
    bad = run("edit", "1", f"VPN token {token}")
    assert bad.exit_code == 2 and "github-pat" in bad.stderr
    assert run("edit", "1").exit_code == 2  # no new text and no terminal


# --- hand edits -----------------------------------------------------------------------------------
def test_hand_edits_are_noticed(data, monkeypatch):
    monkeypatch.setenv("LOOKOUT_NOW", "2026-05-01T12:00:00Z")
    ok("save", "First fact here")
    ok("save", "Second fact here")
    scope = project_scope()
    # an agent edits a memory file with a file tool
    path = scope.path / "first-fact-here.md"
    path.write_text(path.read_text().replace("First fact here", "First fact, edited by hand"))
    # a person adds a line to MEMORY.md
    listing = scope.path / "MEMORY.md"
    listing.write_text(listing.read_text() + "- Added straight to the list\n")
    monkeypatch.setenv("LOOKOUT_NOW", "2026-05-03T12:00:00Z")
    result = ok("save", "Third fact here")
    assert "edited by hand" in result.stderr and "added by hand" in result.stderr
    mems = {m["note"]: m for m in listed()}
    assert mems["First fact, edited by hand"]["updated"].startswith("2026-05-03")
    assert mems["First fact, edited by hand"]["edited_by"] == "hand"
    assert "Added straight to the list" in mems
    assert "First fact here" in ok("forgotten").stdout
    # a line removed by hand forgets its memory
    text = listing.read_text()
    listing.write_text("\n".join(line for line in text.splitlines() if "Second fact" not in line) + "\n")
    ok("save", "Fourth fact here")
    assert "Second fact here" not in notes()
    assert "Second fact here" in ok("forgotten").stdout


def test_secret_written_by_hand_is_taken_back_out(data):
    ok("save", "Deploy notes for prod")
    scope = project_scope()
    path = scope.path / "deploy-notes-prod.md"
    token = fake_github_token()
    path.write_text(path.read_text() + f"\nThe token is {token}\n")
    result = ok("save", "Unrelated fact")
    assert "taken back out" in result.stderr
    assert token not in path.read_text()
    assert "[github-pat removed:" in path.read_text()


def test_hand_added_list_lines_are_memories_on_read(data):
    ok("save", "Seed memory here")
    listing = project_scope().path / "MEMORY.md"
    listing.write_text(listing.read_text() + "- Hand line one\n")
    assert "Hand line one" in notes()


def test_parse_list_reads_other_agents_lists():
    entries = parse_list("# Memory\n\n- [User role](user_role.md) — senior backend dev\n- plain line\n"
                         "- Ours ([details](ours.md))\nnot a list line\n")
    assert [(e.text, e.link) for e in entries] == [
        ("User role — senior backend dev", "user_role"), ("plain line", None), ("Ours", "ours")]


# --- dry run and check on every writing subcommand -------------------------------------------
WRITERS = [
    ("save", "A brand new note"),
    ("edit", "1", "An edited note"),
    ("forget", "1"),
    ("tidy", "--include-mine"),
]


@pytest.mark.parametrize("args", WRITERS, ids=lambda a: a[0])
def test_dry_run_and_check_write_nothing(data, args):
    ok("save", "Existing note one")
    ok("save", "TODO: run the benchmark")
    before = tree(data)
    dry = ok(*args, "--dry-run")
    assert "would" in dry.stderr
    assert tree(data) == before
    check = run(*args, "--check")
    assert check.exit_code == 1
    assert tree(data) == before


def test_restore_dry_run_and_check(data):
    ok("save", "Bring me back")
    ok("forget", "1")
    before = tree(data)
    ok("restore", "bring-me-back", "--dry-run")
    assert run("restore", "bring-me-back", "--check").exit_code == 1
    assert tree(data) == before


def test_check_passes_when_nothing_would_change(data):
    ok("save", "Stable note")
    assert run("save", "Stable note", "--check").exit_code == 0
    assert run("tidy", "--check").exit_code == 0


def test_dry_run_on_a_new_project_creates_nothing(data):
    ok("save", "Nothing yet", "--dry-run")
    assert tree(data) == {}


def test_usage_counts():
    mems = [Memory(id="a", note="abc"), Memory(id="b", note="defg", details="12345")]
    usage = usage_of(mems)
    assert usage.memories == 2
    assert usage.list_bytes == len("- abc\n") + len("- defg ([details](b.md))\n")
    assert usage.total_bytes == usage.list_bytes + 5


def test_files_are_private_and_atomic(data):
    ok("save", "Private by default")
    scope = project_scope()
    assert not [p for p in scope.path.iterdir() if p.name.endswith(".tmp")]
    mode = os.stat(scope.path / "MEMORY.md").st_mode & 0o777
    assert mode & 0o077 == 0
