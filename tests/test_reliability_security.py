"""Security: each test tries the attack.

Path traversal and symlink escapes through mentions; zip slip, links and zip bombs through
``memory import``; image decompression bombs through mentions and ``clear-images --repair``;
secrets through ``memory save``, ``learn`` and ``import``; traversal through memory ids.
"""

from __future__ import annotations

import base64
import io
import json
import os
import stat
import struct
import subprocess
import zipfile
import zlib
from pathlib import Path

import pytest
from conftest import lookout_exe
from test_reliability_harness import LONG, assert_clean, environment, run_cli, tally, workdir

SECRET_OUTSIDE = "TOPSECRET-OUTSIDE-THE-WORKSPACE"


@pytest.fixture
def workspace(tmp_path):
    """A workspace, a secret file beside it, and links that lead out of it."""
    (tmp_path / "outside.txt").write_text(SECRET_OUTSIDE + "\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "inner.txt").write_text(SECRET_OUTSIDE + " inner\n")
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "ok.py").write_text("print('inside')\n")
    (ws / "link.txt").symlink_to(tmp_path / "outside.txt")
    (ws / "rel-link.txt").symlink_to(Path("..") / "outside.txt")
    (ws / "dirlink").symlink_to(tmp_path / "outside")
    (ws / "src" / "deep-link").symlink_to(Path("..") / ".." / "outside")
    (ws / "rootlink").symlink_to("/")
    (ws / "loop").symlink_to(ws / "loop")  # a link to itself
    (ws / ".env").write_text("API_KEY=sk-live-0123456789abcdef0123456789abcdef\n")
    (ws / ".env.example").write_text("API_KEY=put-yours-here\n")
    (ws / ".ssh").mkdir()
    (ws / ".ssh" / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"
                                            "-----END OPENSSH PRIVATE KEY-----\n")
    (ws / "server.pem").write_text("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\n")
    return ws


TRAVERSALS = [
    "@../outside.txt", "@src/../../outside.txt", "@./../outside.txt", "@/etc/passwd", "@~/../../etc/passwd",
    "@link.txt", "@rel-link.txt", "@dirlink/inner.txt", "@dirlink/", "@src/deep-link/inner.txt",
    "@rootlink/etc/passwd", "@rootlink/", "@loop", "@\"../outside.txt\"", "@../outside.txt#L1-1",
    "@..%2Foutside.txt", "@src/..\\..\\outside.txt", "@chat:../outside.txt", "@workspace", "@src/",
]


@pytest.mark.parametrize("mention", TRAVERSALS)
def test_mentions_never_attach_what_is_outside_the_workspace(workspace, mention):
    chat = json.dumps({"role": "user", "content": f"please read {mention} now"}).encode() + b"\n"
    with workdir(workspace):
        outcome = run_cli(["mentions", "--all", "--root", str(workspace)], chat)
    tally("bad inputs tried")
    assert_clean(outcome, ["mentions", mention])
    assert SECRET_OUTSIDE.encode() not in outcome.out
    assert b"root:x:0:0" not in outcome.out  # /etc/passwd


@pytest.mark.parametrize("mention", ["@.env", "@.ssh/id_ed25519", "@server.pem", "@.ssh/"])
def test_mentions_refuse_secret_files(workspace, mention):
    chat = json.dumps({"role": "user", "content": f"look at {mention}"}).encode() + b"\n"
    with workdir(workspace):
        outcome = run_cli(["mentions", "--all"], chat)
    tally("bad inputs tried")
    assert_clean(outcome, ["mentions", mention])
    for secret in (b"sk-live-0123456789", b"b3BlbnNzaC1rZXktdjEAAAAA", b"MIIEowIBAAKCAQEA"):
        assert secret not in outcome.out
    allowed = json.dumps({"role": "user", "content": "look at @.env.example"}).encode() + b"\n"
    with workdir(workspace):
        fine = run_cli(["mentions", "--all"], allowed)
    assert b"put-yours-here" in fine.out  # the example file is not a secret


def test_workspace_listing_does_not_follow_links_out(workspace):
    chat = json.dumps({"role": "user", "content": "overview: @workspace and @dirlink/ and @rootlink/"}).encode()
    with workdir(workspace):
        outcome = run_cli(["mentions", "--all"], chat + b"\n")
    assert_clean(outcome, ["mentions"])
    assert b"inner.txt" not in outcome.out or SECRET_OUTSIDE.encode() not in outcome.out
    assert b"passwd" not in outcome.out and SECRET_OUTSIDE.encode() not in outcome.out


# --- zip slip and zip bombs ------------------------------------------------------------------
MEMORY_MD = "# Memory: everywhere\n\n- The CI needs Docker\n"


def _zip(entries: list[tuple[str | zipfile.ZipInfo, bytes]]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries:
            archive.writestr(name, data)
    return out.getvalue()


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> bytes:
    """A real export of a project scope (made once), to graft attacks onto."""
    root = tmp_path_factory.mktemp("exporter")
    with environment({**os.environ, "XDG_DATA_HOME": str(root / "data"), "XDG_CONFIG_HOME": str(root / "config")}):
        project = root / "project"
        project.mkdir()
        for note in ("The CI needs Docker running", "Releases are tagged from main"):
            assert run_cli(["memory", "save", "-q", "-P", str(project), note]).code == 0
        done = run_cli(["memory", "export", "-q", "-P", str(project), "-o", str(root / "export.zip")])
        assert done.code == 0, done.err
    return (root / "export.zip").read_bytes()


def _graft(real: bytes, extra: list[tuple[str | zipfile.ZipInfo, bytes]]) -> bytes:
    source = zipfile.ZipFile(io.BytesIO(real))
    entries: list[tuple[str | zipfile.ZipInfo, bytes]] = [(i, source.read(i)) for i in source.infolist()]
    return _zip(entries + extra)


def _symlink_entry(name: str, target: str) -> tuple[zipfile.ZipInfo, bytes]:
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info, target.encode()


def _env(tmp_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOKOUT_")}
    env.update(XDG_DATA_HOME=str(tmp_path / "data"), XDG_CONFIG_HOME=str(tmp_path / "config"),
               XDG_CACHE_HOME=str(tmp_path / "cache"))
    return env


def _files_under(folder: Path) -> dict[str, bytes]:
    if not folder.exists():
        return {}
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


ZIP_ATTACKS = {
    "dot-dot": lambda root: [("../../../escaped.md", b"# pwned\n")],
    "absolute": lambda root: [(str(root / "absolute-escape.md"), b"# pwned\n")],
    "backslash": lambda root: [("..\\..\\escaped-backslash.md", b"# pwned\n")],
    "nested-dot-dot": lambda root: [("everywhere/../../../escaped-nested.md", b"# pwned\n")],
    "symlink": lambda root: [_symlink_entry("everywhere/evil.md", str(root / "victim.txt"))],
    "symlink-dir": lambda root: [_symlink_entry("everywhere/dir", str(root)), ("everywhere/dir/escaped.md", b"x")],
    "huge-entry": lambda root: [("everywhere/huge.md", b"- a\n" + b" " * (8 * 1024 * 1024))],
}


@pytest.mark.parametrize("attack", list(ZIP_ATTACKS))
def test_memory_import_refuses_zip_slip_and_links(attack, exported, tmp_path, isolated_env):
    (tmp_path / "victim.txt").write_text("untouched\n")
    bad = tmp_path / "bad.zip"
    bad.write_bytes(_graft(exported, ZIP_ATTACKS[attack](tmp_path)))
    project = tmp_path / "importer"
    project.mkdir()
    data = isolated_env / "data"
    before = _files_under(data)
    with workdir(project):
        done = run_cli(["memory", "import", "-P", str(project), str(bad)])
    tally("bad inputs tried")
    assert_clean(done, ["memory", "import"])
    assert done.code == 2, done.err
    assert (tmp_path / "victim.txt").read_text() == "untouched\n"
    for escaped in tmp_path.rglob("escaped*.md"):
        pytest.fail(f"zip slip wrote {escaped}")
    assert not (tmp_path / "absolute-escape.md").exists()
    assert _files_under(data) == before  # refused without writing anything


def _deflate_zeros(total: int) -> tuple[bytes, int]:
    """A raw deflate stream of ``total`` zero bytes (kept small: zeros compress ~1000:1), and its CRC."""
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk = bytes(1 << 20)
    parts, crc, left = [], 0, total
    while left:
        piece = chunk[: min(left, len(chunk))]
        parts.append(comp.compress(piece))
        crc = zlib.crc32(piece, crc)
        left -= len(piece)
    parts.append(comp.flush())
    return b"".join(parts), crc


def _bomb_zip(name: str, size: int) -> bytes:
    """A zip whose one entry inflates to ``size`` bytes, written by hand (no need to hold it)."""
    data, crc = _deflate_zeros(size)
    raw_name = name.encode()
    local = struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 20, 0, 8, 0, 0, crc, len(data), size & 0xFFFFFFFF,
                        len(raw_name), 0) + raw_name
    central = struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 20, 20, 0, 8, 0, 0, crc, len(data),
                          size & 0xFFFFFFFF, len(raw_name), 0, 0, 0, 0, 0, 0) + raw_name
    end = struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, 1, 1, len(central), len(local) + len(data), 0)
    return local + data + central + end


def _run_measured(cmd: list[str], env: dict, cwd: Path) -> tuple[int, str, int]:
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    err = proc.stderr.read().decode()
    _pid, status, usage = os.wait4(proc.pid, 0)
    return os.waitstatus_to_exitcode(status), err, usage.ru_maxrss


@pytest.mark.parametrize("entry", ["everywhere/MEMORY.md", "everywhere/bomb.md"])
def test_memory_import_refuses_a_zip_bomb_with_bounded_memory(entry, tmp_path):
    size = (1024 if LONG else 96) * 1024 * 1024
    bomb = tmp_path / "bomb.zip"
    bomb.write_bytes(_bomb_zip(entry, size))
    assert bomb.stat().st_size < size // 500
    env = _env(tmp_path)
    project = tmp_path / "p"
    project.mkdir()
    code, err, peak_kib = _run_measured([*lookout_exe(), "memory", "import", "-P", str(project), str(bomb)],
                                        env, project)
    tally("bad inputs tried")
    assert code == 2, err
    assert "Traceback" not in err and "internal error" not in err, err
    assert peak_kib - _baseline_kib() < 200 * 1024, f"peak memory {peak_kib} KiB reading a {size:,}-byte bomb"
    assert not (tmp_path / "data").exists() or not list((tmp_path / "data").rglob("*.md"))


def test_memory_import_refuses_a_zip_with_too_many_entries(tmp_path):
    entries = [(f"everywhere/n{i}.md", b"- x\n") for i in range(20_000)]
    bad = tmp_path / "many.zip"
    bad.write_bytes(_zip([("everywhere/MEMORY.md", MEMORY_MD.encode()), *entries]))
    project = tmp_path / "p"
    project.mkdir()
    done = run_cli(["memory", "import", "-P", str(project), str(bad)])
    tally("bad inputs tried")
    assert_clean(done, ["memory", "import"])
    listed = run_cli(["memory", "list", "--json", "-P", str(project)])
    assert len(listed.out.splitlines()) <= 200  # a scope's limit holds


def test_memory_ids_cannot_traverse(tmp_path, isolated_env):
    (tmp_path / "victim.md").write_text("keep me\n")
    project = tmp_path / "p"
    project.mkdir()
    assert run_cli(["memory", "save", "-q", "-P", str(project), "A harmless note"]).code == 0
    scope = run_cli(["memory", "path", "-P", str(project)]).out.decode().strip()
    depth = "../" * (len(Path(scope).relative_to(tmp_path.anchor).parts) + 2)
    for target in (f"{depth}{str(tmp_path)[1:]}/victim", "../../../../victim", "/etc/passwd", "..", "."):
        for args in (["show", target], ["forget", target], ["edit", target, "--note", "overwritten by an edit"],
                     ["restore", target]):
            done = run_cli(["memory", *args, "-P", str(project)])
            tally("bad inputs tried")
            assert_clean(done, ["memory", *args])
            assert done.code in (1, 2), done.err
            assert b"root:x:0:0" not in done.out and b"keep me" not in done.out
    assert (tmp_path / "victim.md").read_text() == "keep me\n"
    assert [n for n in run_cli(["memory", "list", "--json", "-P", str(project)]).out.splitlines()]


# --- image decompression bombs ---------------------------------------------------------------
def _png_bomb(width: int, height: int, rows: int | None = None) -> bytes:
    """A real grayscale PNG of ``width`` x ``height`` (all black), written by hand: its IDAT
    holds ``rows`` rows of zeros (all of them by default); tiny on disk, huge decoded."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    comp = zlib.compressobj(9)
    row = bytes(width + 1)
    parts = [comp.compress(row) for _ in range(height if rows is None else rows)]
    parts.append(comp.flush())
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", b"".join(parts)) + chunk(b"IEND", b"")


BOMBS = {
    "over-pillow-limit": (60_000, 60_000, 4),  # 3.6 billion pixels declared, a few rows present
    # all rows present: 81 million pixels (81 MB decoded) in the long form, 25 million in CI
    "under-pillow-limit": (9_000, 9_000, None) if LONG else (5_000, 5_000, None),
    "one-long-side": (200_000, 1, None),
}


@pytest.mark.parametrize("bomb", list(BOMBS))
def test_mentions_with_an_image_bomb(bomb, workspace, tmp_path):
    width, height, rows = BOMBS[bomb]
    (workspace / "bomb.png").write_bytes(_png_bomb(width, height, rows))
    chat = tmp_path / "chat.jsonl"
    chat.write_bytes(json.dumps({"role": "user", "content": "what is in @bomb.png"}).encode() + b"\n")
    code, err, peak_kib = _run_measured([*lookout_exe(), "mentions", "--all", str(chat)], _env(tmp_path), workspace)
    tally("bad inputs tried")
    assert code in (0, 2), err
    assert "Traceback" not in err and "internal error" not in err, err
    assert peak_kib - _baseline_kib() < 700 * 1024, f"peak memory {peak_kib} KiB for a {width}x{height} image"


@pytest.mark.parametrize("bomb", list(BOMBS))
def test_clear_images_repair_with_an_image_bomb(bomb, tmp_path):
    width, height, rows = BOMBS[bomb]
    data = base64.b64encode(_png_bomb(width, height, rows)).decode()
    lines = [{"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                       "data": data}},
                                          {"type": "text", "text": "what is this?"}]},
             {"role": "assistant", "content": [{"type": "text", "text": "A black image."}]}]
    chat = tmp_path / "chat.jsonl"
    chat.write_bytes(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
    env = {**_env(tmp_path), "LOOKOUT_SAVE_DIR": str(tmp_path / "saved")}
    code, err, peak_kib = _run_measured([*lookout_exe(), "clear-images", "--repair", "--provider", "anthropic",
                                         str(chat), "-o", str(tmp_path / "out.jsonl")], env, tmp_path)
    tally("bad inputs tried")
    assert code in (0, 2), err
    assert "Traceback" not in err and "internal error" not in err, err
    assert peak_kib - _baseline_kib() < 700 * 1024, f"peak memory {peak_kib} KiB for a {width}x{height} image"
    if code == 0:  # the output is whole (restoring a shrunk image: see the regressions file)
        for line in (tmp_path / "out.jsonl").read_bytes().splitlines():
            json.loads(line)


# --- secrets in memory -----------------------------------------------------------------------
SECRETS = [
    "password=hunter2-correct-horse-battery",
    "AWS key AKIAQ3ZJ7XK2LMNOP4RS for the uploads bucket",
    "my token is ghp_0123456789abcdefghijklmnopqrstuvwxyzAB",
    "use sk-proj-0123456789abcdefghijklmnopqrstuvwxyz0123456789ab for the API",
    "-----BEGIN OPENSSH PRIVATE KEY----- b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAAB",
    "the db is postgres://admin:s3cr3tP4ssw0rd@db.internal:5432/prod",
    "slack xoxb-123456789012-1234567890123-abcdefghijklmnopqrstuvwx",
    "jwt eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
]


def _secret_part(text: str) -> str:
    return max(text.replace("=", " ").replace("@", " ").split(), key=len)


@pytest.mark.parametrize("secret", SECRETS)
def test_memory_refuses_secrets_and_never_writes_them(secret, tmp_path, isolated_env):
    project = tmp_path / "p"
    project.mkdir()
    saved = run_cli(["memory", "save", "-P", str(project), f"Note: {secret}"])
    tally("bad inputs tried")
    assert_clean(saved, ["memory", "save"])
    assert saved.code == 2, saved.err
    assert _secret_part(secret) not in saved.err, "the refusal must mask the secret"
    # the same secret through a chat the user asked to remember
    chat = json.dumps({"role": "user", "content": f"remember that {secret}"}).encode() + b"\n"
    with workdir(project):
        learned = run_cli(["memory", "learn", "-q"], chat)
    tally("bad inputs tried")
    assert_clean(learned, ["memory", "learn"])
    # nothing under the data folder holds it
    for path, content in _files_under(isolated_env / "data").items():
        assert _secret_part(secret).encode() not in content, f"{path} holds the secret"


def test_memory_import_leaves_out_secrets(tmp_path, isolated_env):
    folder = tmp_path / "incoming"
    folder.mkdir()
    (folder / "MEMORY.md").write_text("# Memory\n\n- The CI needs Docker\n- " + SECRETS[2] + "\n")
    project = tmp_path / "p"
    project.mkdir()
    done = run_cli(["memory", "import", "-P", str(project), str(folder)])
    tally("bad inputs tried")
    assert_clean(done, ["memory", "import"])
    for path, content in _files_under(isolated_env / "data").items():
        assert b"ghp_0123456789" not in content, f"{path} holds the secret"


def _baseline_kib() -> int:
    """The peak a bare ``lookout --version`` reports from here. Linux carries the parent's
    high-water mark across fork and exec, so peaks are compared with this, not with zero."""
    proc = subprocess.Popen([*lookout_exe(), "--version"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _pid, _status, usage = os.wait4(proc.pid, 0)
    return usage.ru_maxrss
