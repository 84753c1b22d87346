"""export (zip, git repositories), import (folders, zips; zip slip and zip bombs refused without
writing anything) and sync (two machines through a shared folder)."""

from __future__ import annotations

import json
import os
import random
import stat
import string
import zipfile
from pathlib import Path

import pytest
from test_memory_support import git, listed, make_data, make_repo, notes, ok, run

from lookout_cli.memory.exchange import Precondition, _remote_put, sha256_bytes


@pytest.fixture
def data(tmp_path, monkeypatch):
    return make_data(tmp_path, monkeypatch)

def fake_token() -> str:
    r = random.Random(3)
    return "gh" + "p_" + "".join(r.choice(string.ascii_letters + string.digits) for _ in range(36))


def tree(folder: Path) -> dict[str, bytes]:
    if not folder.exists():
        return {}
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def forgotten(*scope: str) -> list[str]:
    return [json.loads(x)["note"] for x in ok("forgotten", "--json", *scope).stdout.splitlines()]


# --- export ------------------------------------------------------------------------------------
def test_export_zip_holds_each_scope_folder(data, tmp_path):
    ok("save", "Project fact one", "--details", "with details")
    ok("save", "-E", "I prefer small pull requests")
    ok("save", "-A", "reviewer", "Review for security first")
    out = tmp_path / "all.zip"
    result = ok("export", "--all", "-o", str(out))
    assert result.stdout.strip() == str(out.resolve())
    with zipfile.ZipFile(out) as zf:
        names = set(zf.namelist())
        manifest = json.loads(zf.read("lookout-memory/manifest.json"))
    assert "lookout-memory/everywhere/MEMORY.md" in names
    assert "lookout-memory/agents/reviewer/review-security-first.md" in names
    assert any(n.startswith("lookout-memory/projects/work-") and n.endswith("project-fact-one.md") for n in names)
    assert not any(n.endswith((".index.json", ".lock")) for n in names)
    assert sorted(s["kind"] for s in manifest["scopes"]) == ["agent", "everywhere", "project"]


def test_export_git_makes_each_folder_a_repository(data, tmp_path):
    ok("save", "-E", "I prefer small pull requests")
    ok("save", "Project fact one")
    out = tmp_path / "repos"
    ok("export", "--all", "--git", "-o", str(out))
    assert (out / "manifest.json").exists()
    for folder in (out / "everywhere", *(out / "projects").iterdir()):
        log = git(folder, "log", "--oneline")
        assert "lookout memory export" in log
        assert git(folder, "status", "--porcelain") == ""
    zipped = tmp_path / "repos.zip"
    ok("export", "-E", "--git", "-o", str(zipped))
    with zipfile.ZipFile(zipped) as zf:
        assert any("/everywhere/.git/" in n for n in zf.namelist())


def test_export_of_nothing_is_an_error(data, tmp_path):
    result = run("export", "-o", str(tmp_path / "x.zip"))
    assert result.exit_code == 2 and "no memories" in result.stderr


# --- import -------------------------------------------------------------------------------------
def test_export_import_round_trip_puts_each_scope_back(data, tmp_path, monkeypatch):
    repo = make_repo(tmp_path / "repo")
    ok("save", "-P", str(repo), "Project fact one")
    ok("save", "-E", "I prefer small pull requests")
    ok("save", "-A", "reviewer", "Review for security first")
    out = tmp_path / "all.zip"
    ok("export", "--all", "-o", str(out))

    # another machine: a fresh data folder and a clone of the repository
    monkeypatch.setenv("LOOKOUT_DATA_DIR", str(tmp_path / "data2"))
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    result = ok("import", str(out))
    assert "3 imported" in result.stderr
    assert notes("-E") == ["I prefer small pull requests"]
    assert notes("-A", "reviewer") == ["Review for security first"]
    assert notes("-P", str(clone)) == ["Project fact one"]
    # a second import skips everything
    again = ok("import", str(out))
    assert "nothing imported" in again.stderr and "3 left out" in again.stderr and "already there" in again.stderr


def test_import_a_single_scope_into_the_scope_in_view(data, tmp_path):
    ok("save", "-E", "I prefer small pull requests")
    out = tmp_path / "everywhere.zip"
    ok("export", "-E", "-o", str(out))
    ok("import", "-A", "helper", str(out))
    assert notes("-A", "helper") == ["I prefer small pull requests"]


def test_import_another_agents_memory_folder(data, tmp_path):
    folder = tmp_path / "claude-memory"
    folder.mkdir()
    (folder / "MEMORY.md").write_text(
        "# Memory\n\n- [User role](user_role.md) — senior backend dev\n"
        "- [Testing](testing.md) — how tests run\n- A line with no file of its own\n"
        f"- Deploy key {fake_token()}\n")
    (folder / "user_role.md").write_text(
        "---\nname: user role\ndescription: The user is a senior backend developer\ntype: user\n---\n\n"
        "Prefers Go and Postgres.\n")
    (folder / "testing.md").write_text(
        "---\nname: testing\ndescription: Integration tests need Docker running\ntype: project\n---\n")
    (folder / "notes.txt").write_text("ignored")
    result = ok("import", str(folder))
    got = {m["note"]: m for m in listed()}
    assert set(got) == {"The user is a senior backend developer", "Integration tests need Docker running",
                        "A line with no file of its own"}
    assert got["The user is a senior backend developer"]["details"] == "Prefers Go and Postgres."
    assert got["The user is a senior backend developer"]["author"] == "agent"
    assert "3 imported" in result.stderr
    assert "1 left out" in result.stderr and "github-pat" in result.stderr and fake_token() not in result.stderr


def test_import_masks_the_secret_it_leaves_out(data, tmp_path):
    """The note of a refused memory is named with its secret masked, as save masks it, even
    when the note is short enough to be shown whole."""
    folder = tmp_path / "other-memory"
    folder.mkdir()
    (folder / "MEMORY.md").write_text(f"# Memory\n\n- token {fake_token()}\n- Use the staging VPN\n")
    result = ok("import", str(folder))
    assert "1 imported" in result.stderr and "1 left out" in result.stderr
    assert fake_token()[4:12] not in result.stderr
    assert f"'token {fake_token()[:4]}…{fake_token()[-4:]}'" in result.stderr


def test_import_keeps_the_newer_version_of_a_topic(data, tmp_path, monkeypatch):
    monkeypatch.setenv("LOOKOUT_NOW", "2026-05-01T12:00:00Z")
    ok("save", "--topic", "db", "Postgres 15")
    out = tmp_path / "old.zip"
    ok("export", "-o", str(out))
    monkeypatch.setenv("LOOKOUT_NOW", "2026-05-02T12:00:00Z")
    ok("save", "--topic", "db", "Postgres 16")
    result = ok("import", str(out))
    assert notes() == ["Postgres 16"]
    assert "older version" in result.stderr


def test_import_leaves_out_what_does_not_fit(data, tmp_path):
    src = tmp_path / "big"
    src.mkdir()
    (src / "MEMORY.md").write_text("# Memory\n\n" + "".join(f"- imported fact {i:03d}\n" for i in range(205)))
    result = ok("import", str(src))
    assert "200 imported" in result.stderr and "5 left out" in result.stderr and "full" in result.stderr
    assert len(notes()) == 200


def test_import_dry_run_and_check_write_nothing(data, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "MEMORY.md").write_text("- one fact here\n")
    ok("save", "-E", "existing")
    before = tree(data)
    assert "would be imported" in ok("import", "--dry-run", str(src)).stderr
    assert run("import", "--check", str(src)).exit_code == 1
    assert tree(data) == before


def _zip(entries: list[tuple[str | zipfile.ZipInfo, bytes]], path: Path) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, payload in entries:
            zf.writestr(name, payload)
    return path


GOOD = [("lookout-memory/everywhere/MEMORY.md", b"- fine fact\n")]


@pytest.mark.parametrize("bad", ["../evil.md", "lookout-memory/../../evil.md", "/etc/evil.md", "C:/evil.md",
                                 "a/../../evil.md"])
def test_zip_slip_is_refused_without_writing(data, tmp_path, bad):
    ok("save", "seed fact")
    before = tree(data)
    path = _zip(GOOD + [(bad, b"- evil\n")], tmp_path / "slip.zip")
    result = run("import", str(path))
    assert result.exit_code == 2
    assert "outside the archive" in result.stderr
    assert tree(data) == before
    assert not (tmp_path / "evil.md").exists()


def test_zip_symlink_entry_is_refused(data, tmp_path):
    info = zipfile.ZipInfo("lookout-memory/everywhere/link.md")
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    path = _zip(GOOD + [(info, b"/etc/passwd")], tmp_path / "link.zip")
    result = run("import", str(path))
    assert result.exit_code == 2 and "symbolic link" in result.stderr
    assert tree(data) == {}


def test_zip_with_a_huge_entry_is_refused(data, tmp_path):
    path = _zip(GOOD + [("lookout-memory/everywhere/huge.md", os.urandom(1024 * 1024 + 1))], tmp_path / "huge.zip")
    result = run("import", str(path))
    assert result.exit_code == 2 and "huge.md" in result.stderr and "bytes uncompressed" in result.stderr
    assert tree(data) == {}


def test_zip_bomb_is_refused(data, tmp_path):
    path = _zip(GOOD + [("lookout-memory/everywhere/bomb.md", b"0" * (50 * 1024 * 1024))], tmp_path / "bomb.zip")
    assert path.stat().st_size < 200_000
    result = run("import", str(path))
    assert result.exit_code == 2 and "refused" in result.stderr
    assert tree(data) == {}


def test_zip_whose_directory_lies_about_sizes_is_refused(data, tmp_path):
    path = _zip(GOOD + [("lookout-memory/everywhere/liar.md", b"x" * 2_000_000)], tmp_path / "liar.zip")
    raw = bytearray(path.read_bytes())
    # shrink the declared uncompressed size in the central directory to 100 bytes
    central = raw.rfind(b"PK\x01\x02")
    raw[central + 24:central + 28] = (100).to_bytes(4, "little")
    local = raw.find(b"PK\x03\x04", raw.find(b"liar.md") - 60)
    raw[local + 22:local + 26] = (100).to_bytes(4, "little")
    path.write_bytes(bytes(raw))
    result = run("import", str(path))
    assert result.exit_code == 2 and "refused" in result.stderr
    assert tree(data) == {}


def test_not_a_memory_source(data, tmp_path):
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"nope")
    assert run("import", str(junk)).exit_code == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run("import", str(empty))
    assert result.exit_code == 2 and "no MEMORY.md" in result.stderr


# --- sync -----------------------------------------------------------------------------------------
class Machine:
    def __init__(self, name: str, root: Path, monkeypatch):
        self.name = name
        self.data = root / f"data-{name}"
        self.monkeypatch = monkeypatch

    def __enter__(self):
        self.monkeypatch.setenv("LOOKOUT_DATA_DIR", str(self.data))
        self.monkeypatch.setenv("LOOKOUT_HOST", self.name)
        return self

    def __exit__(self, *exc):
        return None


def test_sync_two_machines(data, tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    laptop, server = Machine("laptop", tmp_path, monkeypatch), Machine("server", tmp_path, monkeypatch)
    monkeypatch.setenv("LOOKOUT_NOW", "2026-05-01T12:00:00Z")
    with laptop:
        ok("save", "-E", "I prefer small pull requests")
        ok("save", "-E", "Use British spelling")
        assert "2 sent" in ok("sync", "-E", str(shared)).stderr
    with server:
        ok("save", "-E", "Server-only preference")
        result = ok("sync", "-E", str(shared))
        assert "2 received" in result.stderr and "1 sent" in result.stderr
        assert sorted(notes("-E")) == ["I prefer small pull requests", "Server-only preference",
                                       "Use British spelling"]
    with laptop:
        ok("sync", "-E", str(shared))
        assert len(notes("-E")) == 3
        # a forget travels, and lands in Forgotten on the other machine
        ok("forget", "-E", "use-british-spelling")
        assert "1 forgotten there" in ok("sync", "-E", str(shared)).stderr
    with server:
        assert "1 forgotten here" in ok("sync", "-E", str(shared)).stderr
        assert "Use British spelling" not in notes("-E")
        assert "Use British spelling" in forgotten("-E")
        # nothing more to do
        assert "up to date" in ok("sync", "-E", str(shared)).stderr
        assert run("sync", "-E", str(shared), "--check").exit_code == 0


def test_sync_conflict_keeps_the_newer_and_a_copy_of_the_older(data, tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    laptop, server = Machine("laptop", tmp_path, monkeypatch), Machine("server", tmp_path, monkeypatch)
    monkeypatch.setenv("LOOKOUT_NOW", "2026-05-01T12:00:00Z")
    with laptop:
        ok("save", "-E", "--topic", "editor", "Use vim")
        ok("sync", "-E", str(shared))
    with server:
        ok("sync", "-E", str(shared))
    monkeypatch.setenv("LOOKOUT_NOW", "2026-05-02T12:00:00Z")
    with laptop:
        ok("edit", "-E", "editor", "Use neovim")
    monkeypatch.setenv("LOOKOUT_NOW", "2026-05-03T12:00:00Z")
    with server:
        ok("edit", "-E", "editor", "Use helix")
        ok("sync", "-E", str(shared))  # the server's newer edit reaches the folder first
    monkeypatch.setenv("LOOKOUT_NOW", "2026-05-04T12:00:00Z")
    with laptop:
        result = ok("sync", "-E", str(shared))
        assert "conflict" in result.stderr
        assert notes("-E") == ["Use helix"]
        assert "Use neovim" in forgotten("-E")
    conflicts = list((shared / "everywhere" / "conflicts").glob("*.md"))
    assert len(conflicts) == 1 and "Use neovim" in conflicts[0].read_text()
    with server:
        ok("sync", "-E", str(shared))
        assert notes("-E") == ["Use helix"]


def test_sync_refuses_secrets_coming_in(data, tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    with Machine("laptop", tmp_path, monkeypatch):
        ok("save", "-E", "A harmless preference")
        ok("sync", "-E", str(shared))
    # someone writes a secret straight into the shared folder
    (shared / "everywhere" / "leak.md").write_text(f"---\ntopic: leak\nauthor: you\n---\nToken {fake_token()}\n")
    with Machine("server", tmp_path, monkeypatch):
        result = ok("sync", "-E", str(shared))
        assert "github-pat" in result.stderr and "left out" in result.stderr
        assert fake_token() not in result.stderr
        assert notes("-E") == ["A harmless preference"]


def test_sync_project_memory_by_repository(data, tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    origin = make_repo(tmp_path / "origin")
    git(origin, "remote", "add", "origin", "https://example.com/team/app.git")
    with Machine("laptop", tmp_path, monkeypatch):
        ok("save", "-P", str(origin), "Laptop project fact")
        ok("sync", "-P", str(origin), str(shared))
    clone = tmp_path / "clone-elsewhere"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{origin}", str(clone))
    git(clone, "remote", "set-url", "origin", "git@example.com:team/app.git")
    with Machine("server", tmp_path, monkeypatch):
        ok("sync", "-P", str(clone), str(shared))
        assert notes("-P", str(clone)) == ["Laptop project fact"]
    outside = tmp_path / "plain"
    outside.mkdir()
    result = run("sync", "-P", str(outside), str(shared))
    assert result.exit_code == 2 and "stays on this machine" in result.stderr


def test_sync_dry_run_writes_nothing(data, tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    ok("save", "-E", "A preference")
    before = tree(data)
    assert "would" in ok("sync", "-E", "--dry-run", str(shared)).stderr
    assert run("sync", "-E", "--check", str(shared)).exit_code == 1
    assert tree(data) == before and not shared.exists()


def test_remote_writes_check_the_content_hash_first(tmp_path):
    path = tmp_path / "m.md"
    path.write_bytes(b"one")
    with pytest.raises(Precondition):
        _remote_put(path, b"two", expected=sha256_bytes(b"something else"))
    assert path.read_bytes() == b"one"
    _remote_put(path, b"two", expected=sha256_bytes(b"one"))
    assert path.read_bytes() == b"two"
    with pytest.raises(Precondition):
        _remote_put(tmp_path / "new.md", b"x", expected=sha256_bytes(b"y"))
    _remote_put(tmp_path / "new.md", b"x", expected=None)
    _remote_put(path, None, expected=sha256_bytes(b"two"))
    assert not path.exists()


def test_export_dry_run_writes_nothing_and_a_folder_export_imports(data, tmp_path, monkeypatch):
    ok("save", "-E", "I prefer small pull requests")
    out = tmp_path / "x.zip"
    assert "would export 1 memories" in ok("export", "-E", "--dry-run", "-o", str(out)).stderr
    assert run("export", "-E", "--check", "-o", str(out)).exit_code == 1
    assert not out.exists()
    folder = tmp_path / "exported"
    ok("export", "-E", "-o", str(folder))
    monkeypatch.setenv("LOOKOUT_DATA_DIR", str(tmp_path / "fresh"))
    ok("import", "-E", str(folder))
    assert notes("-E") == ["I prefer small pull requests"]
