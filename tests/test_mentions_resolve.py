"""Resolving mentions into attachments (lookout_cli.mentions.resolve), in real temporary git
repositories and in a folder outside git: every kind, every limit at its boundary, every
refusal reason."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from lookout_cli.mentions import resolve as mr
from lookout_cli.mentions.parse import Mention, find_mentions


def sh(cwd, *args):
    return subprocess.run(args, cwd=cwd, check=True, capture_output=True).stdout.decode()


def write(root: Path, rel: str, data: str | bytes = "x\n") -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        p.write_bytes(data)
    else:
        p.write_text(data)
    return p


def git_init(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    sh(root, "git", "init", "-q")
    sh(root, "git", "config", "user.email", "t@example.com")
    sh(root, "git", "config", "user.name", "T")
    sh(root, "git", "config", "commit.gpgsign", "false")
    return root


def png(w: int, h: int, fmt: str = "PNG") -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (w, h), (20, 120, 220)).save(buf, fmt)
    return buf.getvalue()


@pytest.fixture(params=["git", "plain"])
def ws(request, tmp_path) -> Path:
    """A workspace, once as a git repository and once as a plain folder."""
    root = tmp_path / "ws"
    if request.param == "git":
        git_init(root)
    else:
        root.mkdir()
    return root


@pytest.fixture
def repo(tmp_path) -> Path:
    return git_init(tmp_path / "repo")


def resolve(root: Path, text: str, *, present_images: int = 0, **settings):
    r = mr.Resolver(mr.Settings(root=root, **settings))
    return r.resolve_message(r.find(text), images_present=present_images)


def only(root: Path, text: str, **settings) -> mr.Outcome:
    out = resolve(root, text, **settings)
    assert len(out) == 1, [o.as_dict() for o in out]
    return out[0]


# --- files and ranges -----------------------------------------------------------------------

def test_file_attaches_with_path_and_content_hash(ws):
    data = "alpha\nbeta\n"
    write(ws, "src/app.py", data)
    o = only(ws, "fix @src/app.py please")
    assert (o.status, o.kind, o.path, o.text) == (mr.ATTACHED, mr.FILE, "src/app.py", data)
    assert o.sha256 == hashlib.sha256(data.encode()).hexdigest()
    assert o.bytes == len(data) and o.chars == len(data) and o.tokens > 0
    assert o.lines is None and o.total_lines == 2


@pytest.mark.parametrize("spelling", ["#L3-L5", "#L3-5", "#3-5", ":3-5"])
def test_every_range_spelling_resolves_the_same_lines(ws, spelling):
    write(ws, "n.txt", "".join(f"{i}\n" for i in range(1, 11)))
    o = only(ws, f"@n.txt{spelling}")
    assert o.lines == (3, 5) and o.text == "3\n4\n5\n" and o.total_lines == 10
    assert o.as_dict()["lines"] == "3-5"


def test_single_line_and_range_to_the_end(ws):
    write(ws, "n.txt", "a\nb\nc")  # no final newline
    assert only(ws, "@n.txt#L2").text == "b\n"
    assert only(ws, "@n.txt:3").text == "c"


def test_range_past_the_end_is_clamped_with_a_warning(ws):
    write(ws, "n.txt", "a\nb\nc\n")
    o = only(ws, "@n.txt#L2-L99")
    assert o.status == mr.ATTACHED and o.lines == (2, 3) and o.text == "b\nc\n"
    assert "ends at line 3" in o.warnings[0]


def test_range_starting_past_the_end_or_backwards_is_refused(ws):
    write(ws, "n.txt", "a\nb\n")
    o = only(ws, "@n.txt#L5-6")
    assert o.status == mr.REFUSED and "past the end" in o.reason and "2 lines" in o.reason
    o = only(ws, "@n.txt#L5-2")
    assert o.status == mr.REFUSED and "bad line range" in o.reason


def test_markdown_heading_section(ws):
    write(ws, "README.md", "# Title\nintro\n## Install\npip install x\n### Extra\nmore\n## Usage\nrun\n```\n# not a heading\n```\n")
    o = only(ws, "@README.md#install")
    assert o.lines == (3, 6) and o.text.startswith("## Install\n") and "## Usage" not in o.text
    assert o.heading == "install"
    o = only(ws, "@README.md#usage")
    assert o.lines == (7, 11) and "# not a heading" in o.text
    assert only(ws, "@README.md#nope").reason == "no heading matching #nope"
    write(ws, "a.py", "# comment\n")
    assert "only Markdown" in only(ws, "@a.py#comment").reason


def test_heading_slug_with_spaces_and_punctuation(ws):
    write(ws, "doc.md", "# Doc\n## Getting Started: Fast!\nsteps\n")
    assert only(ws, "@doc.md#getting-started-fast").lines == (2, 3)


def test_quoted_path_with_spaces(ws):
    write(ws, "my docs/a b.txt", "1\n2\n3\n")
    o = only(ws, 'read @"my docs/a b.txt"#L2')
    assert (o.path, o.text) == ("my docs/a b.txt", "2\n")


def test_absolute_path_inside_the_root_is_fine(ws):
    write(ws, "a.txt", "in\n")
    o = only(ws, f"@{ws / 'a.txt'}")
    assert o.status == mr.ATTACHED and o.path == "a.txt"


def test_bom_is_dropped_and_crlf_kept(ws):
    write(ws, "w.txt", b"\xef\xbb\xbfone\r\ntwo\r\n")
    assert only(ws, "@w.txt").text == "one\r\ntwo\r\n"


# --- folders, workspace, git -----------------------------------------------------------------

def test_folder_listing_leaves_ignored_entries_out(ws):
    write(ws, ".gitignore", "*.log\nbuild/\n")
    write(ws, "src/a.py", "a = 1\n")
    write(ws, "src/debug.log")
    write(ws, "src/build/x.js")
    write(ws, "src/lib/b.py")
    o = only(ws, "@src/")
    assert (o.status, o.kind, o.path) == (mr.ATTACHED, mr.FOLDER, "src/")
    assert "lib/" in o.text and "a.py  (6 bytes)" in o.text
    assert "debug.log" not in o.text and "build" not in o.text
    assert "2 ignored entries not shown" in o.text
    assert o.sha256 == hashlib.sha256(o.text.encode()).hexdigest()
    # without the slash a folder is listed too; with a slash a file is refused
    assert only(ws, "@src").kind == mr.FOLDER
    assert only(ws, "@src/a.py/").reason == "not a folder"
    assert "no lines" in only(ws, "@src#L1-2").reason


def test_workspace_root_itself_is_refused(ws):
    for text in ("@/", "@./"):
        assert "use @workspace" in only(ws, text).reason


@pytest.mark.parametrize("count, more", [(399, None), (400, None), (401, 1), (450, 50)])
def test_workspace_tree_stops_at_400_entries(ws, count, more):
    # count entries in all: one folder plus count-1 files inside it
    for i in range(count - 1):
        write(ws, f"d/f{i:03}.txt")
    o = only(ws, "@workspace")
    assert o.status == mr.ATTACHED and o.kind == mr.WORKSPACE
    body = o.text.splitlines()
    assert body[0] == "ws/"
    shown = [ln for ln in body[1:] if not ln.startswith("…")]
    assert len(shown) == min(count, 400)
    if more is None:
        assert "more entries not shown" not in o.text
    else:
        assert body[-1].startswith(f"… {more} more entries not shown")


def test_workspace_leaves_ignored_out(ws):
    write(ws, ".gitignore", "node_modules/\n")
    write(ws, ".cursorignore", "secret/\n")
    write(ws, "node_modules/x/index.js")
    write(ws, "secret/s.txt")
    write(ws, "src/main.py")
    o = only(ws, "@workspace")
    assert "main.py" in o.text and "node_modules" not in o.text and "secret" not in o.text


def test_git_status_diff_stat_and_staged_diff(repo):
    write(repo, "a.txt", "one\n")
    write(repo, "b.txt", "bee\n")
    sh(repo, "git", "add", ".")
    sh(repo, "git", "commit", "-q", "-m", "init")
    write(repo, "a.txt", "one\ntwo unstaged\n")
    write(repo, "b.txt", "bee\nstaged line\n")
    sh(repo, "git", "add", "b.txt")
    write(repo, "new.txt", "untracked\n")
    o = only(repo, "@git")
    assert (o.status, o.kind) == (mr.ATTACHED, mr.GIT)
    status, stat, staged = o.text.split("\n$ ")
    assert status.startswith("$ git status --short --branch\n")
    assert " M a.txt" in status and "M  b.txt" in status and "?? new.txt" in status
    assert stat.startswith("git diff --stat\n") and "a.txt | 1 +" in stat and "b.txt" not in stat
    assert staged.startswith("git diff --cached\n") and "+staged line" in staged and "two unstaged" not in staged


def test_git_with_no_commits_and_nothing_staged(repo):
    o = only(repo, "@git")
    assert o.status == mr.ATTACHED and "(nothing)" in o.text


def test_git_outside_a_repository_is_refused(tmp_path):
    (tmp_path / "plain").mkdir()
    o = only(tmp_path / "plain", "@git")
    assert (o.status, o.reason) == (mr.REFUSED, "not a git repository")


# --- selection, problems, editors -------------------------------------------------------------

def test_selection_from_the_flag(ws):
    write(ws, "src/app.ts", "".join(f"line {i}\n" for i in range(1, 51)))
    o = only(ws, "explain @selection", selection="src/app.ts#L10-12")
    assert (o.kind, o.path, o.lines, o.text) == (mr.SELECTION, "src/app.ts", (10, 12), "line 10\nline 11\nline 12\n")
    o = only(ws, "explain @selection", selection="src/app.ts:49-50")
    assert o.lines == (49, 50)
    o = only(ws, "explain @selection", selection="src/app.ts")  # the whole active file
    assert o.lines is None and o.chars == sum(len(f"line {i}\n") for i in range(1, 51))
    assert "--selection" in only(ws, "@selection").reason
    assert only(ws, "@selection", selection="../x.ts#L1").status == mr.REFUSED


def test_problems_from_sarif(ws, tmp_path):
    sarif = {
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "ruff"}},
            "results": [
                {"ruleId": "F401", "level": "error", "message": {"text": "`os` imported but unused"},
                 "locations": [{"physicalLocation": {"artifactLocation": {"uri": str(ws / "src/a.py")},
                                                     "region": {"startLine": 3, "startColumn": 8}}}]},
                {"message": {"text": "line too long"},
                 "locations": [{"physicalLocation": {"artifactLocation": {"uri": "src/b.py"},
                                                     "region": {"startLine": 10}}}]},
            ],
        }],
    }
    f = tmp_path / "ruff.sarif"
    f.write_text(json.dumps(sarif))
    o = only(ws, "fix @problems", problems=str(f))
    assert (o.status, o.kind) == (mr.ATTACHED, mr.PROBLEMS)
    assert "src/a.py:3:8: error: `os` imported but unused [F401]" in o.text
    assert "src/b.py:10: warning: line too long" in o.text
    assert o.text.startswith("Problems (2: 1 error, 1 warning)")
    assert o.sha256 == hashlib.sha256(f.read_bytes()).hexdigest()


def test_problems_from_compiler_lines(ws, tmp_path):
    f = tmp_path / "mypy.txt"
    f.write_text("src/a.py:12:5: error: Incompatible types\nsrc/b.py:3: note: see here\nFound 1 error\n")
    o = only(ws, "@problems", problems=str(f))
    assert "src/a.py:12:5: error: Incompatible types" in o.text and "src/b.py:3: note: see here" in o.text
    assert "Found 1 error" not in o.text
    bad = tmp_path / "bad.txt"
    bad.write_text("nothing useful here\n")
    assert "neither SARIF" in only(ws, "@problems", problems=str(bad)).reason
    assert "--problems" in only(ws, "@problems").reason
    assert "cannot read" in only(ws, "@problems", problems=str(tmp_path / "missing")).reason


def test_editors_from_a_file(ws, tmp_path):
    f = tmp_path / "editors.txt"
    f.write_text("src/a.py\n\n# comment\nREADME.md\n")
    o = only(ws, "@editors", editors=str(f))
    assert o.text == "Open editors (2):\n- src/a.py\n- README.md\n"
    assert "--editors" in only(ws, "@editors").reason


# --- images -----------------------------------------------------------------------------------

def test_image_attaches_scaled_with_tokens(ws):
    write(ws, "shots/big.png", png(4096, 2048))
    o = only(ws, "what is @shots/big.png")
    assert (o.status, o.kind, o.path) == (mr.ATTACHED, mr.IMAGE, "shots/big.png")
    assert (o.image.width, o.image.height, o.image.media_type) == (2048, 1024, "image/png")
    assert o.tokens > 0 and "scaled down from 4096x2048 to 2048x1024" in o.warnings
    assert o.sha256 == hashlib.sha256((ws / "shots/big.png").read_bytes()).hexdigest()
    d = o.as_dict()["image"]
    assert d["source_width"] == 4096 and d["resized"] is True


@pytest.mark.parametrize("fmt, ext", [("JPEG", "jpg"), ("WEBP", "webp"), ("GIF", "gif")])
def test_other_image_formats(ws, fmt, ext):
    write(ws, f"i.{ext}", png(50, 40, fmt))
    o = only(ws, f"@i.{ext}")
    assert o.kind == mr.IMAGE and o.image.media_type == f"image/{fmt.lower()}"
    assert o.image.data == (ws / f"i.{ext}").read_bytes()


def test_images_named_only_for_a_model_without_vision(ws):
    write(ws, "a.png", png(10, 10))
    o = only(ws, "@a.png", images=False)
    assert o.status == mr.NAMED and "--no-images" in o.reason


def test_image_decompression_bomb_is_refused(ws):
    buf = io.BytesIO()
    Image.new("1", (10_000, 10_000)).save(buf, "PNG")
    write(ws, "bomb.png", buf.getvalue())
    o = only(ws, "@bomb.png")
    assert o.status == mr.REFUSED and "decompression bomb" in o.reason


def test_many_images_in_the_request_cap_at_2000(ws):
    write(ws, "w.png", png(2048, 100))
    assert only(ws, "@w.png", many_images=True).image.width == 2000
    assert only(ws, "@w.png", provider="openai", many_images=True).image.width == 2048


# --- limits at their boundaries ---------------------------------------------------------------

def test_twenty_mentions_attach_the_twenty_first_is_refused(ws):
    for i in range(21):
        write(ws, f"f{i:02}.txt", f"{i}\n")
    text = " ".join(f"@f{i:02}.txt" for i in range(21))
    out = resolve(ws, text)
    assert [o.status for o in out[:20]] == [mr.ATTACHED] * 20
    assert out[20].status == mr.REFUSED and "20 mentions" in out[20].reason
    assert len(resolve(ws, " ".join(f"@f{i:02}.txt" for i in range(20)))) == 20


def test_sixty_thousand_characters_exactly_attach(ws):
    write(ws, "a.txt", "a" * 30_000)
    write(ws, "b.txt", "b" * 30_000)
    write(ws, "c.txt", "c")
    out = resolve(ws, "@a.txt @b.txt")
    assert [o.status for o in out] == [mr.ATTACHED, mr.ATTACHED]
    assert sum(o.chars for o in out) == 60_000
    out = resolve(ws, "@a.txt @b.txt @c.txt")
    assert [o.status for o in out] == [mr.ATTACHED, mr.ATTACHED, mr.NAMED]
    assert "60,000-character budget" in out[2].reason and out[2].text is None


def test_a_file_past_the_budget_and_every_later_file_are_named_by_path(ws):
    write(ws, "big.txt", "x" * 59_990)
    write(ws, "over.txt", "y" * 11)  # 60,001 in all
    write(ws, "tiny.txt", "z")  # would fit, but comes later
    out = resolve(ws, "@big.txt @over.txt @tiny.txt")
    assert [o.status for o in out] == [mr.ATTACHED, mr.NAMED, mr.NAMED]
    assert [o.path for o in out] == ["big.txt", "over.txt", "tiny.txt"]
    write(ws, "fits.txt", "y" * 10)  # 60,000 in all
    assert [o.status for o in resolve(ws, "@big.txt @fits.txt")] == [mr.ATTACHED, mr.ATTACHED]


def test_generated_text_is_cut_to_the_budget_left(repo):
    write(repo, "big.txt", "x" * 59_000)
    write(repo, "b.txt", "line\n" * 400)
    sh(repo, "git", "add", "b.txt")
    out = resolve(repo, "@big.txt @git")
    assert out[1].status == mr.ATTACHED and out[1].truncated
    assert out[0].chars + out[1].chars <= 60_000 and "more lines not shown" in out[1].text
    write(repo, "full.txt", "x" * 59_950)
    out = resolve(repo, "@full.txt @git")
    assert out[1].status == mr.NAMED and "budget" in out[1].reason


def test_twenty_images_attach_the_twenty_first_is_refused(ws):
    for i in range(20):
        write(ws, f"i{i:02}.png", png(8, 8))
    text = " ".join(f"@i{i:02}.png" for i in range(20))
    assert [o.status for o in resolve(ws, text)] == [mr.ATTACHED] * 20
    # one image already in the message: the twentieth mention is the twenty-first image
    out = resolve(ws, text, present_images=1)
    assert [o.status for o in out[:19]] == [mr.ATTACHED] * 19
    assert out[19].status == mr.REFUSED and "20 images" in out[19].reason


def test_twenty_files_attach_the_twenty_first_is_refused(ws):
    for i in range(21):
        write(ws, f"f{i:02}.txt", f"{i}\n")
    text = " ".join(f"@f{i:02}.txt" for i in range(21))
    out = resolve(ws, text, limits=mr.Limits(max_mentions=30))
    assert [o.status for o in out[:20]] == [mr.ATTACHED] * 20
    assert out[20].status == mr.REFUSED and "20 files" in out[20].reason


def test_ten_megabytes_is_the_limit_for_one_attachment(ws):
    limit = mr.MAX_BYTES
    assert limit == 10 * 1024 * 1024
    write(ws, "at.txt", b"a" * limit)
    write(ws, "over.txt", b"a" * (limit + 1))
    at, over = resolve(ws, "@at.txt @over.txt")
    assert at.status == mr.NAMED and at.bytes == limit  # read, then named: over the character budget
    assert over.status == mr.REFUSED and "10.0 MB limit" in over.reason and over.bytes == limit + 1


# --- refusals ---------------------------------------------------------------------------------

def test_not_found(ws):
    o = only(ws, "@missing/file.py")
    assert (o.status, o.reason, o.path) == (mr.REFUSED, "not found", "missing/file.py")


def test_dot_dot_and_absolute_paths_outside_are_refused(ws, tmp_path):
    write(tmp_path, "outside.txt", "secret\n")
    o = only(ws, "@../outside.txt")
    assert o.status == mr.REFUSED and "outside the workspace root" in o.reason and ".." in o.reason
    o = only(ws, f"@{tmp_path / 'outside.txt'}")
    assert o.status == mr.REFUSED and "absolute path" in o.reason
    o = only(ws, "@sub/../../outside.txt")
    assert o.status == mr.REFUSED and "outside" in o.reason
    o = only(ws, "@~/anything.txt")
    assert o.status == mr.REFUSED and "outside" in o.reason


def test_symlinks_leaving_the_workspace_are_refused(ws, tmp_path):
    write(tmp_path, "outside/secret.txt", "s\n")
    os.symlink(tmp_path / "outside/secret.txt", ws / "link.txt")
    os.symlink(tmp_path / "outside", ws / "linkdir")
    o = only(ws, "@link.txt")
    assert o.status == mr.REFUSED and "symlink leads outside" in o.reason
    assert "symlink leads outside" in only(ws, "@linkdir/secret.txt").reason
    assert "symlink leads outside" in only(ws, "@linkdir/").reason
    # a symlink that stays inside is followed
    write(ws, "real.txt", "r\n")
    os.symlink("real.txt", ws / "inner.txt")
    o = only(ws, "@inner.txt")
    assert o.status == mr.ATTACHED and o.path == "real.txt" and o.text == "r\n"


def test_symlink_to_a_secret_inside_is_refused(ws):
    write(ws, ".env", "TOKEN=1\n")
    os.symlink(".env", ws / "notes.txt")
    o = only(ws, "@notes.txt")
    assert o.status == mr.REFUSED and o.rule == "env-file"


@pytest.mark.parametrize(
    "rel, rule",
    [
        (".env", "env-file"),
        (".env.local", "env-file"),
        ("config/.env.production", "env-file"),
        (".envrc", "env-file"),
        (".ssh/config", "ssh-dir"),
        ("home/.ssh/known_hosts", "ssh-dir"),
        ("id_rsa", "private-key"),
        ("keys/id_ed25519", "private-key"),
        ("server.pem", "private-key"),
        ("tls/site.key", "private-key"),
        ("cert.p12", "private-key"),
        ("credentials.json", "credentials"),
        ("gcp-credentials.json", "credentials"),
        (".aws/credentials", "credentials"),
        (".netrc", "credentials"),
        (".npmrc", "credentials"),
        (".git-credentials", "credentials"),
        ("secrets.yaml", "secrets-file"),
        ("deploy/app.secrets.json", "secrets-file"),
        (".gnupg/pubring.kbx", "gnupg-dir"),
        (".git/config", "git-dir"),
    ],
)
def test_secret_files_are_refused(ws, rel, rule):
    write(ws, rel, "value\n")
    o = only(ws, f'@"{rel}"')
    assert o.status == mr.REFUSED and o.rule == rule, o.as_dict()
    assert "likely secret" in o.reason and "--allow-secret" in o.reason


@pytest.mark.parametrize("rel", [".env.example", ".env.sample", ".env.template", "config/.env.dist",
                                 "id_rsa.pub", "credentials.py", "src/secrets.py", "keys.md"])
def test_harmless_look_alikes_attach(ws, rel):
    write(ws, rel, "fine\n")
    assert only(ws, f'@"{rel}"').status == mr.ATTACHED


def test_allow_secret_by_glob_name_or_rule(ws):
    write(ws, ".env.test", "A=1\n")
    write(ws, "keys/dev.pem", "not really\n")
    assert only(ws, "@.env.test", allow_secret=(".env.test",)).status == mr.ATTACHED
    assert only(ws, "@.env.test", allow_secret=(".env.*",)).status == mr.ATTACHED
    assert only(ws, "@keys/dev.pem", allow_secret=("keys/*.pem",)).status == mr.ATTACHED
    assert only(ws, "@keys/dev.pem", allow_secret=("private-key",)).status == mr.ATTACHED
    assert only(ws, "@keys/dev.pem", allow_secret=(".env.*",)).status == mr.REFUSED


def test_private_key_content_is_refused_whatever_the_name(ws):
    write(ws, "notes.txt", "hello\n-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----\n")
    o = only(ws, "@notes.txt")
    assert o.status == mr.REFUSED and o.rule == "private-key"
    assert only(ws, "@notes.txt", allow_secret=("notes.txt",)).status == mr.ATTACHED


def test_ignored_files_name_the_ignore_file_line_and_pattern(ws):
    write(ws, ".gitignore", "# comment\n\n*.log\n")
    write(ws, ".lookoutignore", "drafts/\n")
    write(ws, ".cursorignore", "\n\nprivate.md\n")
    write(ws, "debug.log", "log\n")
    write(ws, "drafts/plan.md", "plan\n")
    write(ws, "private.md", "p\n")
    o = only(ws, "@debug.log")
    assert (o.status, o.reason) == (mr.REFUSED, "ignored by .gitignore:3: *.log")
    assert o.as_dict()["ignore"] == {"file": ".gitignore", "line": 3, "pattern": "*.log", "matched": "debug.log"}
    assert only(ws, "@drafts/plan.md").reason == "ignored by .lookoutignore:1: drafts/"
    assert only(ws, "@drafts/").reason == "ignored by .lookoutignore:1: drafts/"
    assert only(ws, "@private.md").reason == "ignored by .cursorignore:3: private.md"
    assert only(ws, "@debug.log", include_ignored=True).status == mr.ATTACHED


def test_binary_files_are_refused(ws):
    write(ws, "blob.bin", b"abc\0def")
    o = only(ws, "@blob.bin")
    assert (o.status, o.reason) == (mr.REFUSED, "binary file") and o.sha256
    write(ws, "latin1.txt", "caf\xe9\n".encode("latin-1"))
    assert only(ws, "@latin1.txt").reason == "binary file (not UTF-8 text)"
    write(ws, "bitmap.bmp", b"BM" + b"\0" * 60)
    assert only(ws, "@bitmap.bmp").reason == "binary file"


def test_special_files_are_refused(ws):
    os.mkfifo(ws / "pipe.txt")
    o = only(ws, "@pipe.txt")
    assert (o.status, o.reason) == (mr.REFUSED, "not a regular file")


# --- parts ------------------------------------------------------------------------------------

def test_parts_header_first_then_attachments(ws):
    write(ws, "a.py", "print(1)\n")
    write(ws, "p.png", png(4, 4))
    write(ws, ".env", "X=1\n")
    out = resolve(ws, "@a.py#L1 @p.png @.env @missing.txt")
    parts = mr.build_parts(out)
    assert [p["type"] for p in parts] == ["text", "text", "text", "image"]
    header = parts[0]["text"]
    assert header.startswith('<lookout-mentions v="1">') and header.endswith("</lookout-mentions>")
    assert "- @a.py#L1: a.py lines 1" in header and "- @.env: an environment file" in header
    assert "- @missing.txt: not found" in header
    assert mr.is_expanded_text(header)
    sha = hashlib.sha256(b"print(1)\n").hexdigest()
    assert parts[1]["text"] == (
        f'<lookout-attachment mention="@a.py#L1" kind="file" path="a.py" lines="1" of="1" sha256="{sha}">\n'
        "print(1)\n</lookout-attachment>"
    )
    assert parts[2]["text"].startswith('<lookout-attachment mention="@p.png" kind="image"')
    assert parts[2]["text"].endswith("/>") and 'media-type="image/png"' in parts[2]["text"]
    assert parts[3]["media_type"] == "image/png" and parts[3]["data"]
    assert mr.build_parts([]) == []


def test_named_files_are_listed_for_the_agent(ws):
    write(ws, "a.txt", "a" * 60_000)
    write(ws, "b.txt", "b")
    header = mr.build_parts(resolve(ws, "@a.txt @b.txt"))[0]["text"]
    assert "Named only" in header and "- @b.txt: b.txt" in header


def test_attribute_values_are_escaped(ws):
    write(ws, 'q "<&>.txt', "x\n")
    parts = mr.build_parts(resolve(ws, """@'q "<&>.txt'"""))
    assert 'path="q &quot;&lt;&amp;&gt;.txt"' in parts[1]["text"]


def test_mention_kind_for_over_limit_refusals():
    m = Mention(kind="path", raw="@d/", path="d/", folder=True)
    assert mr._kind_of(m) == mr.FOLDER
    assert find_mentions("@chat:x.jsonl")[0].kind == "chat"
