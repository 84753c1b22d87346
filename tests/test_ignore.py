"""Ignore rules (lookout_cli.mentions.ignore): git's answer inside a work tree, pathspec with a pruning
walk outside, and the same answers from both."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from lookout_cli.mentions.ignore import IgnoreRules, git_toplevel


def sh(cwd, *args):
    subprocess.run(args, cwd=cwd, check=True, capture_output=True)


def write(root: Path, rel: str, text: str = "x\n") -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def tree(root: Path) -> Path:
    """A tree with nested ignore files, negation, an excluded parent and all three file kinds."""
    write(root, ".gitignore", "# build output\n\nbuild/\n!build/keep/\n*.log\n/top-only.txt\n")
    write(root, "sub/.gitignore", "!a.log\nlocal.txt\n")
    write(root, ".lookoutignore", "# lookout\nprivate/\n")
    write(root, ".cursorignore", "\n*.secret.md\n")
    for rel in ["build/out.js", "build/keep/k.txt", "a.log", "sub/a.log", "sub/b.log", "sub/local.txt",
                "sub/x.txt", "top-only.txt", "sub/top-only.txt", "private/p.txt", "notes.secret.md",
                "docs/ok.md", "src/app.py"]:
        write(root, rel)
    return root


EXPECTED = {
    "build/out.js": (".gitignore", 3, "build/"),
    "build/keep/k.txt": (".gitignore", 3, "build/"),  # git cannot re-include under an excluded folder
    "a.log": (".gitignore", 5, "*.log"),
    "sub/a.log": None,  # re-included by sub/.gitignore
    "sub/b.log": (".gitignore", 5, "*.log"),
    "sub/local.txt": ("sub/.gitignore", 2, "local.txt"),
    "sub/x.txt": None,
    "top-only.txt": (".gitignore", 6, "/top-only.txt"),
    "sub/top-only.txt": None,
    "private/p.txt": (".lookoutignore", 2, "private/"),
    "private": (".lookoutignore", 2, "private/"),
    "notes.secret.md": (".cursorignore", 2, "*.secret.md"),
    "docs/ok.md": None,
    "src/app.py": None,
}


def verdicts(rules: IgnoreRules) -> dict:
    out = {}
    for rel in EXPECTED:
        m = rules.check(rel)
        out[rel] = None if m is None else (m.source, m.line, m.pattern)
    return out


def test_outside_git_pathspec_with_pruning(tmp_path):
    root = tree(tmp_path / "plain")
    rules = IgnoreRules(root)
    assert not rules.in_git
    assert verdicts(rules) == EXPECTED


def test_inside_git_asks_git(tmp_path):
    root = tree(tmp_path / "repo")
    sh(root, "git", "init", "-q")
    rules = IgnoreRules(root)
    assert rules.in_git and rules.own_files == (".lookoutignore", ".cursorignore")
    assert verdicts(rules) == EXPECTED


def test_git_and_pathspec_agree_with_git_itself(tmp_path):
    root = tree(tmp_path / "repo")
    sh(root, "git", "init", "-q")
    out = subprocess.run(["git", "ls-files", "-o", "-i", "--exclude-standard", "-z"], cwd=root,
                         capture_output=True, check=True).stdout
    git_ignored = {p for p in out.decode().split("\0") if p}
    plain = IgnoreRules(root, git=False, files=(".gitignore",))
    for rel in EXPECTED:
        if (root / rel).is_file():
            assert (plain.check(rel) is not None) == (rel in git_ignored), rel


def test_info_exclude_and_tracked_files(tmp_path):
    root = tmp_path / "repo"
    write(root, "keep.txt")
    write(root, "tracked.cfg")
    sh(root, "git", "init", "-q")
    sh(root, "git", "add", "tracked.cfg")
    write(root, ".git/info/exclude", "keep.txt\n")
    write(root, ".gitignore", "*.cfg\n")
    rules = IgnoreRules(root)
    m = rules.check("keep.txt")
    assert m is not None and m.source.endswith("info/exclude") and m.pattern == "keep.txt"
    # --no-index: a pattern keeps a file out even when git tracks it
    assert str(rules.check("tracked.cfg")) == ".gitignore:1: *.cfg"


def test_root_below_the_repository_top(tmp_path):
    repo = tmp_path / "repo"
    write(repo, ".gitignore", "*.tmp\n")
    write(repo, ".lookoutignore", "pkg/hidden/\n")
    write(repo, "pkg/a.tmp")
    write(repo, "pkg/hidden/h.txt")
    write(repo, "pkg/ok.txt")
    sh(repo, "git", "init", "-q")
    rules = IgnoreRules(repo / "pkg")
    assert rules.git_top == repo.resolve()
    assert str(rules.check("a.tmp")) == "../.gitignore:1: *.tmp"
    assert str(rules.check("hidden/h.txt")) == "../.lookoutignore:1: pkg/hidden/"
    assert rules.check("ok.txt") is None
    assert [e.path for e in rules.walk()] == ["ok.txt"]


@pytest.mark.parametrize("in_git", [False, True])
def test_listdir_and_walk_leave_ignored_out(tmp_path, in_git):
    root = tree(tmp_path / "t")
    if in_git:
        sh(root, "git", "init", "-q")
    rules = IgnoreRules(root)
    kept, dropped = rules.listdir("")
    names = [e.name for e in kept]
    assert names[:4] == ["docs", "sub", "src", ".cursorignore"] or "build" not in names
    assert {"build", "private", "a.log", "top-only.txt", "notes.secret.md"} == {p for p, _ in dropped}
    walked = {e.path for e in rules.walk()}
    assert "sub/a.log" in walked and "sub/x.txt" in walked and "src/app.py" in walked
    assert not any(p.startswith(("build", "private")) for p in walked)
    assert "sub/local.txt" not in walked and "a.log" not in walked
    # breadth first: every folder comes before anything deeper
    depths = [e.depth for e in rules.walk()]
    assert depths == sorted(depths)
    assert len(list(rules.walk(limit=3))) == 3


def test_git_walk_skips_dot_git(tmp_path):
    root = tmp_path / "repo"
    write(root, "a.txt")
    sh(root, "git", "init", "-q")
    assert [e.path for e in IgnoreRules(root).walk()] == ["a.txt"]
    assert [e.path for e in IgnoreRules(root, git=False).walk()] == ["a.txt"]


def test_line_numbers_count_comments_and_blank_lines(tmp_path):
    root = tmp_path / "p"
    write(root, ".lookoutignore", "# one\n\n   \n# four\nsecret-dir/\n")
    write(root, "secret-dir/x")
    m = IgnoreRules(root).check("secret-dir/x")
    assert (m.source, m.line, m.pattern, m.path) == (".lookoutignore", 5, "secret-dir/", "secret-dir")


def test_later_file_and_deeper_folder_win(tmp_path):
    root = tmp_path / "p"
    write(root, ".gitignore", "*.md\n")
    write(root, ".lookoutignore", "!README.md\n")
    write(root, "docs/.cursorignore", "guide.md\n")
    write(root, "docs/.lookoutignore", "!*.md\n")
    for rel in ["README.md", "CHANGES.md", "docs/guide.md", "docs/other.md"]:
        write(root, rel)
    rules = IgnoreRules(root)
    assert rules.check("README.md") is None
    assert str(rules.check("CHANGES.md")) == ".gitignore:1: *.md"
    # docs/.lookoutignore re-includes, then docs/.cursorignore (read after it) excludes again
    assert str(rules.check("docs/guide.md")) == "docs/.cursorignore:1: guide.md"
    assert rules.check("docs/other.md") is None


def test_git_toplevel_outside_git(tmp_path):
    assert git_toplevel(tmp_path) is None


def test_paths_outside_the_root_are_not_judged(tmp_path):
    root = tmp_path / "p"
    write(root, ".gitignore", "*\n")
    assert IgnoreRules(root).check("../elsewhere.txt") is None
