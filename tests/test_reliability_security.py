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
import sys
import zipfile
import zlib
from pathlib import Path

import pytest

from conftest import lookout_exe
from test_reliability_harness import LONG, assert_clean, run_cli, tally, workdir

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


def _export(tmp_path: Path, env: dict) -> bytes:
    """A real export of a scope, to graft attacks onto."""
    project = tmp_path / "exporter"
    project.mkdir(exist_ok=True)
    for note in ("The CI needs Docker running", "Releases are tagged from main"):
        subprocess.run([*lookout_exe(), "memory", "save", "-q", "-P", str(project), note], env=env, check=True,
                       capture_output=True, timeout=300)
    target = tmp_path / "export.zip"
    done = subprocess.run([*lookout_exe(), "memory", "export", "-q", "-P", str(project), "-o", str(target)],
                          env=env, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr.decode()
    return target.read_bytes()


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
def test_memory_import_refuses_zip_slip_and_links(attack, tmp_path):
    env = _env(tmp_path)
    real = _export(tmp_path, env)
    (tmp_path / "victim.txt").write_text("untouched\n")
    bad = tmp_path / "bad.zip"
    bad.write_bytes(_graft(real, ZIP_ATTACKS[attack](tmp_path)))
    project = tmp_path / "importer"
    project.mkdir()
    before = _files_under(tmp_path / "data")
    done = subprocess.run([*lookout_exe(), "memory", "import", "-P", str(project), str(bad)], env=env,
                          cwd=project, capture_output=True, timeout=300)
    tally("bad inputs tried")
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert "Traceback" not in err and "internal error" not in err
    assert (tmp_path / "victim.txt").read_text() == "untouched\n"
    for escaped in tmp_path.rglob("escaped*.md"):
        pytest.fail(f"zip slip wrote {escaped}")
    assert not (tmp_path / "absolute-escape.md").exists()
    assert _files_under(tmp_path / "data") == before  # refused without writing anything


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
    size = (1024 if LONG else 256) * 1024 * 1024
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
    assert peak_kib < 200 * 1024, f"peak memory {peak_kib} KiB reading a {size:,}-byte bomb"
    assert not (tmp_path / "data").exists() or not list((tmp_path / "data").rglob("*.md"))


def test_memory_import_refuses_a_zip_with_too_many_entries(tmp_path):
    entries = [(f"everywhere/n{i}.md", b"- x\n") for i in range(20_000)]
    bad = tmp_path / "many.zip"
    bad.write_bytes(_zip([("everywhere/MEMORY.md", MEMORY_MD.encode()), *entries]))
    env = _env(tmp_path)
    project = tmp_path / "p"
    project.mkdir()
    code, err, peak_kib = _run_measured([*lookout_exe(), "memory", "import", "-P", str(project), str(bad)],
                                        env, project)
    tally("bad inputs tried")
    assert code in (0, 2), err
    assert "Traceback" not in err and "internal error" not in err, err
    listed = subprocess.run([*lookout_exe(), "memory", "list", "--json", "-P", str(project)], env=env,
                            capture_output=True, timeout=300)
    assert len(listed.stdout.splitlines()) <= 200  # a scope's limit holds


def test_memory_ids_cannot_traverse(tmp_path):
    env = _env(tmp_path)
    (tmp_path / "victim.md").write_text("keep me\n")
    project = tmp_path / "p"
    project.mkdir()
    subprocess.run([*lookout_exe(), "memory", "save", "-q", "-P", str(project), "A harmless note"], env=env,
                   check=True, capture_output=True, timeout=300)
    for args in (["show", "../../../../victim"], ["forget", "../../../../victim"], ["edit", "../../../../victim",
                 "--note", "overwritten by an edit"], ["restore", "../../../../victim"], ["show", "/etc/passwd"]):
        done = subprocess.run([*lookout_exe(), "memory", *args, "-P", str(project)], env=env, capture_output=True,
                              timeout=300)
        tally("bad inputs tried")
        err = done.stderr.decode()
        assert done.returncode in (1, 2), err
        assert "Traceback" not in err and "internal error" not in err, err
        assert b"root:x:0:0" not in done.stdout
    assert (tmp_path / "victim.md").read_text() == "keep me\n"


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
    "under-pillow-limit": (9_000, 9_000, None),  # 81 million pixels, all present (81 MB decoded)
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
    assert peak_kib < 700 * 1024, f"peak memory {peak_kib} KiB for a {width}x{height} image"


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
    assert peak_kib < 700 * 1024, f"peak memory {peak_kib} KiB for a {width}x{height} image"
    if code == 0:  # whatever it did, restore gives the original back
        out = (tmp_path / "out.jsonl").read_bytes()
        back = subprocess.run([*lookout_exe(), "restore", "-q"], input=out, env=env, capture_output=True, timeout=300)
        assert back.stdout == chat.read_bytes()


# --- secrets in memory -----------------------------------------------------------------------
SECRETS = [
    "password=hunter2-correct-horse-battery",
    "AWS key AKIAIOSFODNN7EXAMPLE with secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "my token is ghp_0123456789abcdefghijklmnopqrstuvwxyzAB",
    "use sk-proj-0123456789abcdefghijklmnopqrstuvwxyz0123456789ab for the API",
    "-----BEGIN OPENSSH PRIVATE KEY----- b3BlbnNzaC1rZXktdjEAAAAABG5vbmU",
    "the db is postgres://admin:s3cr3tP4ssw0rd@db.internal:5432/prod",
    "slack xoxb-123456789012-1234567890123-abcdefghijklmnopqrstuvwx",
    "jwt eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
]


def _secret_part(text: str) -> str:
    return max(text.replace("=", " ").replace("@", " ").split(), key=len)


@pytest.mark.parametrize("secret", SECRETS)
def test_memory_refuses_secrets_and_never_writes_them(secret, tmp_path):
    env = _env(tmp_path)
    project = tmp_path / "p"
    project.mkdir()
    saved = subprocess.run([*lookout_exe(), "memory", "save", "-P", str(project), f"Note: {secret}"], env=env,
                           capture_output=True, timeout=300)
    tally("bad inputs tried")
    err = saved.stderr.decode()
    assert saved.returncode == 2, err
    assert _secret_part(secret) not in err, "the refusal must mask the secret"
    # the same secret through a chat the user asked to remember
    chat = tmp_path / "chat.jsonl"
    chat.write_bytes(json.dumps({"role": "user", "content": f"remember that {secret}"}).encode() + b"\n")
    learned = subprocess.run([*lookout_exe(), "memory", "learn", "-q", str(chat)], env=env, cwd=project,
                             capture_output=True, timeout=300)
    tally("bad inputs tried")
    assert learned.returncode in (0, 2), learned.stderr.decode()
    # nothing under the data folder holds it
    for path in (tmp_path / "data").rglob("*") if (tmp_path / "data").exists() else ():
        if path.is_file():
            assert _secret_part(secret).encode() not in path.read_bytes(), f"{path} holds the secret"


def test_memory_import_leaves_out_secrets(tmp_path):
    env = _env(tmp_path)
    folder = tmp_path / "incoming"
    folder.mkdir()
    (folder / "MEMORY.md").write_text("# Memory\n\n- The CI needs Docker\n- " + SECRETS[2] + "\n")
    project = tmp_path / "p"
    project.mkdir()
    done = subprocess.run([*lookout_exe(), "memory", "import", "-P", str(project), str(folder)], env=env,
                          capture_output=True, timeout=300)
    tally("bad inputs tried")
    assert done.returncode in (0, 2), done.stderr.decode()
    assert "Traceback" not in done.stderr.decode()
    for path in (tmp_path / "data").rglob("*"):
        if path.is_file():
            assert b"ghp_0123456789" not in path.read_bytes()
