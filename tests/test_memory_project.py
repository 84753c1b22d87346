"""A project's memory belongs to its git repository: clones, worktrees, shallow clones and moved
copies share it; two copies merge with nothing lost. Real git repositories in tmp folders."""

from __future__ import annotations

import json
import shutil

import pytest
from test_memory_support import git, make_data, make_repo, notes, ok

from lookout_cli.memory.project import identify, known_projects, normalize_remote, resolve_project


@pytest.fixture
def data(tmp_path, monkeypatch):
    return make_data(tmp_path, monkeypatch)

def test_clone_worktree_shallow_clone_and_moved_folder_share_one_memory(data, tmp_path):
    origin = make_repo(tmp_path / "origin")
    ok("save", "-P", str(origin), "The API tests need Docker running")

    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(clone))
    worktree = tmp_path / "worktree"
    git(origin, "worktree", "add", "-q", str(worktree))
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{origin}", str(shallow))
    assert git(shallow, "rev-parse", "--is-shallow-repository").strip() == "true"
    sub = clone / "deep" / "er"
    sub.mkdir(parents=True)

    for place in (clone, worktree, shallow, sub):
        assert notes("-P", str(place)) == ["The API tests need Docker running"], place

    # each place adds a memory; all of them see all of them
    ok("save", "-P", str(clone), "Saved from the clone")
    ok("save", "-P", str(worktree), "Saved from the worktree")
    ok("save", "-P", str(shallow), "Saved from the shallow clone")

    moved = tmp_path / "moved-origin"
    shutil.move(str(origin), str(moved))
    expected = {"The API tests need Docker running", "Saved from the clone", "Saved from the worktree",
                "Saved from the shallow clone"}
    assert set(notes("-P", str(moved))) == expected
    assert len(known_projects()) == 1


def test_shallow_clone_of_a_network_remote_joins_the_full_clones_memory(data, tmp_path):
    """A shallow clone has no root commit to show; its remote links it. Whichever comes first,
    the two end up in one memory."""
    url = "https://github.com/Example/Widget.git"
    origin = make_repo(tmp_path / "origin")
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{origin}", str(shallow))
    git(shallow, "remote", "set-url", "origin", url)
    ident = identify(shallow)
    assert ident.shallow and ident.key == "url:github.com/example/widget"
    ok("save", "-P", str(shallow), "From the CI checkout")

    full = tmp_path / "full"
    git(tmp_path, "clone", "-q", str(origin), str(full))
    git(full, "remote", "set-url", "origin", "git@github.com:example/widget")
    assert notes("-P", str(full)) == ["From the CI checkout"]
    ok("save", "-P", str(full), "From the laptop")
    assert set(notes("-P", str(shallow))) == {"From the CI checkout", "From the laptop"}
    assert len(known_projects()) == 1


def test_two_copies_merge_with_nothing_lost(data, tmp_path, monkeypatch):
    """The shallow clone and the full clone each made a memory before they met (the full clone
    had no remote yet). When the full clone gains the remote, the copies merge: each memory
    once, and of two versions of one topic the newer stays, the older goes to Forgotten."""
    url = "https://git.example.com/team/app.git"
    origin = make_repo(tmp_path / "origin")
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{origin}", str(shallow))
    git(shallow, "remote", "set-url", "origin", url)
    full = tmp_path / "full"
    git(tmp_path, "clone", "-q", str(origin), str(full))
    git(full, "remote", "remove", "origin")

    monkeypatch.setenv("LOOKOUT_NOW", "2026-05-01T12:00:00Z")
    ok("save", "-P", str(full), "Both copies know this")
    ok("save", "-P", str(full), "--topic", "db", "Postgres 15")
    ok("save", "-P", str(full), "Only the full clone knows this")
    monkeypatch.setenv("LOOKOUT_NOW", "2026-05-02T12:00:00Z")
    ok("save", "-P", str(shallow), "Both copies know this")
    ok("save", "-P", str(shallow), "--topic", "db", "Postgres 16")
    ok("save", "-P", str(shallow), "Only the shallow clone knows this")
    assert len(known_projects()) == 2

    git(full, "remote", "add", "origin", url)
    result = ok("list", "-P", str(full))
    assert "merged another copy" in result.stderr
    assert len(known_projects()) == 1
    assert sorted(notes("-P", str(full))) == sorted(
        ["Both copies know this", "Postgres 16", "Only the full clone knows this", "Only the shallow clone knows this"])
    forgotten = [json.loads(x) for x in ok("forgotten", "--json", "-P", str(full)).stdout.splitlines()]
    assert [f["note"] for f in forgotten] == ["Postgres 15"]
    assert set(notes("-P", str(shallow))) == set(notes("-P", str(full)))
    # merging again changes nothing
    assert "merged" not in ok("list", "-P", str(full)).stderr


def test_a_folder_put_under_git_keeps_its_memory(data, tmp_path):
    folder = tmp_path / "notes-app"
    folder.mkdir()
    ok("save", "-P", str(folder), "Written before git init")
    assert identify(folder).key == f"path:{folder.resolve()}"
    make_repo(folder, commits=1)
    assert identify(folder).key.startswith("git:")
    assert notes("-P", str(folder)) == ["Written before git init"]
    # and from now on a clone shares it
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(folder), str(clone))
    assert notes("-P", str(clone)) == ["Written before git init"]


def test_a_different_repository_at_the_same_path_is_a_different_project(data, tmp_path):
    repo = make_repo(tmp_path / "repo")
    ok("save", "-P", str(repo), "Belongs to the first repository")
    shutil.rmtree(repo)
    make_repo(repo, commits=2, tag="other")  # new root commit, same path
    assert notes("-P", str(repo)) == []
    ok("save", "-P", str(repo), "Belongs to the second repository")
    assert notes("-P", str(repo)) == ["Belongs to the second repository"]
    assert len(known_projects()) == 2


def test_folders_outside_git_have_their_own_memory(data, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    ok("save", "-P", str(a), "Only in a")
    assert notes("-P", str(b)) == []
    assert notes("-P", str(a)) == ["Only in a"]


def test_empty_repository_uses_its_path_then_its_root(data, tmp_path):
    repo = tmp_path / "empty"
    repo.mkdir()
    git(repo, "init", "-q")
    ok("save", "-P", str(repo), "Before the first commit")
    (repo / "x").write_text("x")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "first")
    assert notes("-P", str(repo)) == ["Before the first commit"]


def test_read_only_commands_create_nothing(data, tmp_path):
    repo = make_repo(tmp_path / "repo")
    assert notes("-P", str(repo)) == []
    assert known_projects() == []
    ok("save", "-P", str(repo), "now it exists", "--dry-run")
    assert known_projects() == []


@pytest.mark.parametrize("url, alias", [
    ("https://github.com/Org/Repo.git", "url:github.com/org/repo"),
    ("https://user:secret@github.com:443/Org/Repo.git/", "url:github.com/org/repo"),
    ("http://github.com/org/repo", "url:github.com/org/repo"),
    ("git@github.com:org/repo.git", "url:github.com/org/repo"),
    ("ssh://git@github.com:22/org/repo.git", "url:github.com/org/repo"),
    ("ssh://git@github.com/org/repo", "url:github.com/org/repo"),
    ("git://github.com:9418/org/repo.git", "url:github.com/org/repo"),
    ("ssh://git@gitlab.example.com:2222/group/sub/repo.git", "url:gitlab.example.com:2222/group/sub/repo"),
])
def test_remote_urls_normalize(url, alias):
    assert normalize_remote(url)[0] == alias


def test_local_remotes_are_paths(tmp_path):
    assert normalize_remote(f"file://{tmp_path}/x") == ("", tmp_path / "x")
    assert normalize_remote("../up", tmp_path / "repo") == ("", tmp_path / "repo" / "../up")


def test_identity_aliases(tmp_path, data):
    repo = make_repo(tmp_path / "r")
    git(repo, "remote", "add", "origin", "https://example.com/a/b.git")
    ident = identify(repo / ".")
    roots = git(repo, "rev-list", "--max-parents=0", "HEAD").split()
    assert ident.key == f"git:{roots[0]}"
    assert ident.aliases[:2] == [f"git:{roots[0]}", "url:example.com/a/b"]
    assert f"path:{(repo / '.git').resolve()}" in ident.aliases
    res = resolve_project(repo)
    meta = json.loads((res.scope.path / "meta.json").read_text())
    assert meta["aliases"][0] == ident.key and meta["name"] == "r"


def test_a_project_merged_away_meanwhile_is_a_clear_error(data, tmp_path):
    repo = make_repo(tmp_path / "r")
    scope = resolve_project(repo).scope
    shutil.rmtree(scope.path)  # another process merged it into another copy
    from lookout_cli.memory.store import LookoutError

    with pytest.raises(LookoutError, match="merged into another copy"):
        with scope.transaction():
            pass
    # a folder without meta.json is not a project; the next command starts over cleanly
    ok("save", "-P", str(repo), "something here")
    assert notes("-P", str(repo)) == ["something here"]
