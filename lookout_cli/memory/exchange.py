"""Moving memories between machines and tools: ``export`` (zip, or git repositories),
``import`` (a folder with ``MEMORY.md``, or an export zip) and ``sync`` (two machines through a
shared folder, with content-hash preconditions and nothing lost silently).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath

from lookout_cli.core import secrets
from lookout_cli.core.dataclass import dataclass, field, replace
from lookout_cli.core.errors import LookoutError
from lookout_cli.core.fsutil import atomic_write, new_temp_file
from lookout_cli.memory.store import (
    FORGOTTEN_DIR,
    LIST_FILE,
    META_FILE,
    NOTE_MAX,
    NOTE_MIN,
    Memory,
    Scope,
    file_lock,
    format_time,
    masked,
    normalize_note,
    now,
    parse_list,
    parse_memory,
    render_list,
    slugify,
    split_front_matter,
)

EXPORT_ROOT = "lookout-memory"
MANIFEST = "manifest.json"
SKIP_NAMES = {".index.json", ".lock", ".learned.lock"}
SKIP_DIRS = {".sync", ".git"}

# Import limits: a scope holds at most 128 KB with details, so anything far past that is not
# a memory export. Checked on the zip's directory before anything is read, and again while
# reading (a directory can lie about sizes).
MAX_ENTRY_BYTES = 1024 * 1024
MAX_TOTAL_BYTES = 64 * 1024 * 1024
MAX_ENTRIES = 20_000
MAX_RATIO = 200  # uncompressed / compressed, for entries over 64 KB

SYNC_MAX_BYTES = 1536 * 1024  # a scope larger than this stays on its machine (seed: 1.5 MB)
TOMBSTONES = ".tombstones"
CONFLICTS = "conflicts"


def host_name() -> str:
    return os.environ.get("LOOKOUT_HOST") or socket.gethostname().split(".")[0] or "this-machine"


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- export ---------------------------------------------------------------------------------------
def _scope_relpath(scope: Scope) -> str:
    if scope.kind == "everywhere":
        return "everywhere"
    if scope.kind == "project":
        return f"projects/{scope.path.name}"
    if scope.kind == "agent":
        return f"agents/{scope.name}"
    return scope.path.name


def _scope_files(scope: Scope, with_forgotten: bool) -> Iterable[tuple[str, Path]]:
    for path in sorted(scope.path.iterdir()):
        if path.is_file() and path.name not in SKIP_NAMES and not path.name.startswith(".tmp") and \
                (path.suffix == ".md" or path.name == META_FILE):
            yield path.name, path
    if with_forgotten and (scope.path / FORGOTTEN_DIR).is_dir():
        for path in sorted((scope.path / FORGOTTEN_DIR).glob("*.md")):
            yield f"{FORGOTTEN_DIR}/{path.name}", path


def export_scopes(scopes: list[Scope], output: Path, as_git: bool = False, with_forgotten: bool = False) -> dict:
    """Write the scopes' folders under ``lookout-memory/`` into a zip (or a folder, when
    ``output`` does not end in .zip), with a manifest naming each scope."""
    manifest = {"version": 1, "exported": format_time(now()), "host": host_name(), "scopes": []}
    count = 0
    with tempfile.TemporaryDirectory(prefix="lookout-export-") as tmp:
        root = Path(tmp) / EXPORT_ROOT
        for scope in scopes:
            rel = _scope_relpath(scope)
            dest = root / rel
            dest.mkdir(parents=True, exist_ok=True)
            for name, path in _scope_files(scope, with_forgotten):
                (dest / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, dest / name)
            if not (dest / LIST_FILE).exists():
                (dest / LIST_FILE).write_text(render_list(scope.title, scope.memories()), encoding="utf-8")
            entry = {"kind": scope.kind, "name": scope.name, "path": rel}
            if scope.kind == "project":
                with contextlib.suppress(OSError, ValueError):
                    meta = json.loads((scope.path / META_FILE).read_text(encoding="utf-8"))
                    entry["aliases"] = [a for a in meta.get("aliases", []) if not a.startswith("path:")]
            count += len(scope.memories())
            manifest["scopes"].append(entry)
            if as_git:
                _git_init(dest, f"lookout memory export: {scope.label}")
        (root / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        if output.suffix.lower() == ".zip":
            buffer = io.BytesIO()
            with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
                for path in sorted(root.rglob("*")):
                    if path.is_file():
                        zf.write(path, path.relative_to(Path(tmp)).as_posix())
            atomic_write(output, buffer.getvalue())
        else:
            if output.exists() and any(output.iterdir()):
                raise LookoutError(f"{output} exists and is not empty; export into a new folder")
            output.mkdir(parents=True, exist_ok=True)
            for path in root.iterdir():
                target = output / path.name
                if path.is_dir():
                    shutil.copytree(path, target, symlinks=True)
                else:
                    shutil.copyfile(path, target)
    return {"memories": count, "scopes": len(scopes)}


def _git_init(folder: Path, message: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_AUTHOR_NAME="lookout", GIT_AUTHOR_EMAIL="lookout@localhost",
               GIT_COMMITTER_NAME="lookout", GIT_COMMITTER_EMAIL="lookout@localhost")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "--no-verify", "--no-gpg-sign", "-m", message]):
        try:
            proc = subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True, env=env, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise LookoutError(f"--git needs git: {exc}") from None
        if proc.returncode != 0:
            raise LookoutError(f"git {args[0]} in {folder.name} failed: {proc.stderr.strip().splitlines()[-1:]}")


# --- reading an import source safely ----------------------------------------------------------
def _safe_name(name: str) -> str | None:
    """The entry's path if it stays inside the archive, else None."""
    if not name or "\x00" in name or name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
        return None
    parts = PurePosixPath(name.replace("\\", "/")).parts
    if any(p == ".." for p in parts):
        return None
    return "/".join(p for p in parts if p not in ("", "."))


def _wanted(rel: str) -> bool:
    parts = rel.split("/")
    if any(p in SKIP_DIRS for p in parts[:-1]):
        return False
    return rel.endswith(".md") or parts[-1] in (MANIFEST, META_FILE)


def read_zip(path: Path) -> dict[str, bytes]:
    """The memory files of an export zip; a zip that tries to leave itself (``../``, absolute
    paths, links) or to blow up (huge or too many entries) is refused before anything is read."""
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise LookoutError(f"{path}: not a zip file ({exc})") from None
    with zf:
        infos = zf.infolist()
        if len(infos) > MAX_ENTRIES:
            raise LookoutError(f"{path}: refused: {len(infos):,} entries (a memory export has far fewer)")
        total = 0
        for info in infos:
            rel = _safe_name(info.filename)
            if rel is None:
                raise LookoutError(f"{path}: refused: entry {info.filename!r} points outside the archive")
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                raise LookoutError(f"{path}: refused: entry {info.filename!r} is a symbolic link")
            if info.is_dir():
                continue
            if info.file_size > MAX_ENTRY_BYTES and _wanted(rel):
                raise LookoutError(
                    f"{path}: refused: entry {info.filename!r} is {info.file_size:,} bytes uncompressed "
                    f"(a memory file is at most {MAX_ENTRY_BYTES:,})"
                )
            if info.file_size > 64 * 1024 and info.compress_size and info.file_size / info.compress_size > MAX_RATIO:
                raise LookoutError(f"{path}: refused: entry {info.filename!r} expands {info.file_size / info.compress_size:.0f}-fold (a zip bomb?)")
            total += info.file_size
        if total > MAX_TOTAL_BYTES:
            raise LookoutError(f"{path}: refused: {total:,} bytes uncompressed (limit {MAX_TOTAL_BYTES:,})")
        files: dict[str, bytes] = {}
        read = 0
        for info in infos:
            rel = _safe_name(info.filename)
            if info.is_dir() or not rel or not _wanted(rel):
                continue
            try:
                with zf.open(info) as handle:
                    data = handle.read(MAX_ENTRY_BYTES + 1)
            except (zipfile.BadZipFile, zlib.error, EOFError, OSError, RuntimeError, NotImplementedError) as exc:
                raise LookoutError(f"{path}: refused: entry {info.filename!r} is damaged ({exc})") from None
            if len(data) > MAX_ENTRY_BYTES:
                raise LookoutError(f"{path}: refused: entry {info.filename!r} is larger than its directory says")
            read += len(data)
            if read > MAX_TOTAL_BYTES:
                raise LookoutError(f"{path}: refused: more than {MAX_TOTAL_BYTES:,} bytes uncompressed")
            files[rel] = data
    return files


def read_folder(path: Path) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    total = 0
    for folder, dirs, names in os.walk(path, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not os.path.islink(os.path.join(folder, d)))
        for name in sorted(names):
            full = Path(folder) / name
            rel = full.relative_to(path).as_posix()
            if full.is_symlink() or not _wanted(rel):
                continue
            size = full.stat().st_size
            if size > MAX_ENTRY_BYTES:
                raise LookoutError(f"{full}: refused: {size:,} bytes (a memory file is at most {MAX_ENTRY_BYTES:,})")
            total += size
            if total > MAX_TOTAL_BYTES or len(files) >= MAX_ENTRIES:
                raise LookoutError(f"{path}: refused: too large to be a memory folder")
            files[rel] = full.read_bytes()
    return files


# --- interpreting what came in ------------------------------------------------------------------
@dataclass
class Incoming:
    kind: str | None  # the scope it came from (an export's manifest), else None
    name: str | None
    aliases: list[str]
    memories: list[Memory]
    problems: list[str] = field(default_factory=list)  # left out while reading


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _foreign_to_memory(stem: str, text: str) -> Memory:
    """A memory file in another tool's shape (Claude Code: name/description/type front matter)."""
    meta, body = split_front_matter(text)
    mem = parse_memory(text, stem)
    ours = "author" in meta or "topic" in meta or "updated" in meta
    if ours:
        return mem
    description = normalize_note(meta.get("description", ""))
    body = body.strip()
    mem.author = "agent"
    mem.by = None
    if description:
        mem.note = description
        mem.details = body
    mem.topic = slugify(meta.get("name") or stem, max_words=12, max_len=64)
    mem.extra = {k: v for k, v in meta.items() if k not in ("name", "description")}
    return mem


def _fit_note(mem: Memory) -> Memory | None:
    note = normalize_note(mem.note)
    if len(note) < NOTE_MIN:
        return None
    if len(note) > NOTE_MAX:
        cut = note[: NOTE_MAX - 1].rsplit(" ", 1)[0] + "…"
        mem.details = (note + ("\n\n" + mem.details if mem.details else "")).strip()
        note = cut
    mem.note = note
    return mem


def interpret(files: dict[str, bytes]) -> list[Incoming]:
    """Find the scope folders in an import: an export's manifest, else every folder with a
    MEMORY.md, else the top folder's Markdown files."""
    manifest_key = next((k for k in files if k.split("/")[-1] == MANIFEST), None)
    folders: list[tuple[str, dict]] = []
    if manifest_key is not None:
        try:
            manifest = json.loads(_decode(files[manifest_key]))
            base = manifest_key.rsplit("/", 1)[0] + "/" if "/" in manifest_key else ""
            for entry in manifest.get("scopes", []):
                rel = _safe_name(str(entry.get("path", "")))
                if rel:
                    folders.append((base + rel, entry))
        except (ValueError, AttributeError):
            folders = []
    if not folders:
        lists = sorted({k.rsplit("/", 1)[0] if "/" in k else "" for k in files if k.split("/")[-1] == LIST_FILE})
        folders = [(f, {}) for f in lists]
    if not folders:
        folders = [("", {})]
    out = []
    for folder, entry in folders:
        prefix = folder + "/" if folder else ""
        mems: list[Memory] = []
        problems: list[str] = []
        stems = set()
        for key in sorted(files):
            if not key.startswith(prefix) or "/" in key[len(prefix):]:
                continue
            name = key[len(prefix):]
            if not name.endswith(".md") or name == LIST_FILE:
                continue
            stem = name[:-3]
            stems.add(stem)
            mem = _fit_note(_foreign_to_memory(stem, _decode(files[key])))
            if mem is None:
                problems.append(f"{name} (no note of {NOTE_MIN} to {NOTE_MAX} characters)")
                continue
            mems.append(mem)
        list_text = files.get(prefix + LIST_FILE)
        if list_text is not None:
            notes = {m.key for m in mems}
            for line in parse_list(_decode(list_text)):
                if (line.link and line.link in stems) or not line.text:
                    continue
                mem = Memory(id="", note=line.text, author="you")
                mem = _fit_note(mem)
                if mem is None or mem.key in notes:
                    continue
                notes.add(mem.key)
                mems.append(mem)
        out.append(Incoming(entry.get("kind"), entry.get("name"), list(entry.get("aliases") or []), mems, problems))
    return out


@dataclass
class ExchangeReport:
    came_in: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)
    other: list[str] = field(default_factory=list)
    changes: int = 0

    def lines(self, dry_run: bool) -> list[str]:
        would = "would be " if dry_run else ""
        out = list(self.other)
        if self.came_in:
            out.append(f"{len(self.came_in)} {would}imported: " + ", ".join(self.came_in))
        else:
            out.append(f"nothing {would}imported")
        if self.left_out:
            out.append(f"{len(self.left_out)} left out: " + "; ".join(self.left_out))
        return out


def _target_for(incoming: Incoming, target: Callable[[], Scope], chosen: bool, many: bool, dry_run: bool) -> Scope:
    from lookout_cli.memory.project import agent_scope, everywhere_scope

    if not many or chosen or incoming.kind is None:
        return target()
    if incoming.kind == "everywhere":
        return everywhere_scope()
    if incoming.kind == "agent" and incoming.name:
        return agent_scope(incoming.name)
    if incoming.kind == "project":
        return project_for_aliases(incoming.name or "project", incoming.aliases, dry_run)
    return target()


def project_for_aliases(name: str, aliases: list[str], dry_run: bool) -> Scope:
    """The project memory an exported project belongs to here: the one sharing an alias with
    it, or a new one that a clone of the repository will find."""
    from lookout_cli.memory.project import (
        Identity,
        _folder_name,
        known_projects,
        project_scope_for,
        projects_dir,
        write_meta,
    )

    mine = set(aliases)
    for folder, meta in known_projects():
        if mine & set(meta.get("aliases") or []):
            return project_scope_for(folder, meta)
    if not aliases:
        raise LookoutError(f"the export's project {name!r} names no repository; import it with --project DIR")
    ident = Identity(aliases[0], name, aliases)
    folder = projects_dir() / _folder_name(ident)
    if not dry_run:
        root = projects_dir()
        root.mkdir(parents=True, exist_ok=True)
        with file_lock(root / ".lock"):
            folder.mkdir(parents=True, exist_ok=True)
            if not (folder / META_FILE).exists():
                write_meta(folder, {"version": 1, "key": aliases[0], "name": name, "aliases": aliases,
                                    "created": format_time(now())})
    return Scope("project", name, folder)


def import_source(source: Path, target: Callable[[], Scope], chosen: bool, dry_run: bool = False,
                  allow: Iterable[str] = ()) -> ExchangeReport:
    if source.is_dir():
        files = read_folder(source)
    elif zipfile.is_zipfile(source):
        files = read_zip(source)
    else:
        raise LookoutError(f"{source}: not a folder with a MEMORY.md or a .zip export")
    if not any(k.endswith(".md") for k in files):
        raise LookoutError(f"{source}: no MEMORY.md or memory files in it")
    incoming = interpret(files)
    many = len(incoming) > 1
    report = ExchangeReport()
    allow = tuple(allow)
    for part in incoming:
        scope = _target_for(part, target, chosen, many, dry_run)
        origin = f"the import of {source.name}"
        for problem in part.problems:
            report.left_out.append(problem)
        with scope.transaction(dry_run=dry_run, actor="import") as txn:
            for mem in part.memories:
                finding = secrets.first(mem.text(), allow)
                shown = masked(mem.note)
                if finding is not None:
                    report.left_out.append(f"{shown!r} ({finding.describe()})")
                    continue
                try:
                    outcome = txn.absorb(mem, origin=origin, enforce_limits=True)
                except LookoutError as exc:
                    report.left_out.append(f"{shown!r} ({str(exc).split(':')[0]})")
                    continue
                if outcome == "same":
                    report.left_out.append(f"{shown!r} (already there)")
                elif outcome == "older":
                    report.left_out.append(f"{shown!r} (an older version of what is there; kept in Forgotten)")
                    report.changes += 1
                else:
                    report.came_in.append(f"{scope.label}: {_last_id(txn, mem)}")
                    report.changes += 1
        for line in txn.notices:
            report.other.append(line)
    return report


def _last_id(txn, mem: Memory) -> str:
    found = txn.find_note(mem.note)
    return found.id if found else mem.id


# --- sync ----------------------------------------------------------------------------------------
@dataclass
class SyncReport(ExchangeReport):
    scope: str = ""
    pushed: list[str] = field(default_factory=list)
    pulled: list[str] = field(default_factory=list)
    forgot_here: list[str] = field(default_factory=list)
    forgot_there: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)

    def lines(self, dry_run: bool) -> list[str]:
        w = "would " if dry_run else ""
        out = list(self.other)
        parts = []
        for label, items in (("sent", self.pushed), ("received", self.pulled), ("forgotten here", self.forgot_here),
                             ("forgotten there", self.forgot_there)):
            if items:
                parts.append(f"{len(items)} {label} ({', '.join(items)})")
        out.append(f"sync {self.scope}: " + (f"{w}" + "; ".join(parts) if parts else "up to date"))
        for line in self.conflicts:
            out.append(f"sync {self.scope}: conflict: {line}")
        if self.left_out:
            out.append(f"sync {self.scope}: {len(self.left_out)} left out: " + "; ".join(self.left_out))
        return out


def shared_folder_for(scope: Scope, shared: Path, dry_run: bool) -> Path:
    if scope.kind == "everywhere":
        return shared / "everywhere"
    if scope.kind == "agent":
        return shared / "agents" / scope.name
    if scope.kind == "project":
        try:
            meta = json.loads((scope.path / META_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            meta = {}
        aliases = [a for a in meta.get("aliases", []) if not a.startswith("path:")]
        if not aliases:
            raise LookoutError(f"{scope.label} names no repository (no root commit or remote); it stays on this machine")
        projects = shared / "projects"
        best = None
        if projects.is_dir():
            for folder in sorted(projects.iterdir()):
                try:
                    theirs = set(json.loads((folder / META_FILE).read_text(encoding="utf-8")).get("aliases", []))
                except (OSError, ValueError):
                    continue
                common = theirs & set(aliases)
                if common:
                    rank = 0 if any(a.startswith("git:") for a in common) else 1
                    if best is None or rank < best[0]:
                        best = (rank, folder, theirs)
        if best is not None:
            folder = best[1]
            merged = sorted(best[2] | set(aliases))
            if not dry_run and merged != sorted(best[2]):
                write_json(folder / META_FILE, {"version": 1, "name": scope.name, "aliases": merged})
            return folder
        folder = projects / scope.path.name
        if not dry_run:
            folder.mkdir(parents=True, exist_ok=True)
            write_json(folder / META_FILE, {"version": 1, "name": scope.name, "aliases": aliases})
        return folder
    return shared / scope.path.name


def write_json(path: Path, data: dict) -> None:
    atomic_write(path, (json.dumps(data, indent=2, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8"))


def _read_remote(folder: Path) -> dict[str, bytes]:
    out = {}
    if folder.is_dir():
        for path in sorted(folder.glob("*.md")):
            if path.name != LIST_FILE and not path.name.startswith(".") and path.is_file():
                data = path.read_bytes()
                if len(data) <= MAX_ENTRY_BYTES:
                    out[path.stem] = data
    return out


def _remote_hash(path: Path) -> str | None:
    try:
        return sha256_bytes(path.read_bytes())
    except FileNotFoundError:
        return None


class Precondition(Exception):
    """The shared folder changed since it was read: another machine is syncing."""


def _remote_put(path: Path, data: bytes | None, expected: str | None) -> None:
    """Replace (or with None delete) a shared file only if it still holds ``expected``."""
    if _remote_hash(path) != expected:
        raise Precondition(path.name)
    if data is None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = new_temp_file(path.parent, f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if _remote_hash(path) != expected:  # checked again just before the rename
            raise Precondition(path.name)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def sync_scope(scope: Scope, shared: Path, dry_run: bool = False, allow: Iterable[str] = ()) -> SyncReport:
    """Sync one scope with its folder inside ``shared`` (see the module docstring)."""
    report = SyncReport(scope=scope.label)
    allow = tuple(allow)
    host = host_name()
    if not dry_run:
        shared.mkdir(parents=True, exist_ok=True)
    elif not shared.exists():
        report.other.append(f"{shared} does not exist yet; it would be created")
    remote_dir = shared_folder_for(scope, shared, dry_run)
    base_path = scope.path / ".sync" / (hashlib.sha256(str(shared.resolve()).encode()).hexdigest()[:16] + ".json")
    lock_cm = file_lock(remote_dir / ".lock") if not dry_run else contextlib.nullcontext()
    with lock_cm, scope.transaction(dry_run=dry_run, actor="sync") as txn:
        size = sum(len(t.encode()) for t in txn.planned_files().values())
        if size > SYNC_MAX_BYTES:
            raise LookoutError(f"{scope.label} holds {size:,} bytes, too large to share (limit {SYNC_MAX_BYTES:,}); "
                               "it stays on this machine until some is forgotten")
        try:
            base = json.loads(base_path.read_text(encoding="utf-8")).get("files", {})
        except (OSError, ValueError):
            base = {}
        local = {mid: text.encode("utf-8") for mid, text in txn.planned_files().items()}
        remote = _read_remote(remote_dir)
        tombs = {}
        if (remote_dir / TOMBSTONES).is_dir():
            for path in (remote_dir / TOMBSTONES).glob("*.json"):
                with contextlib.suppress(OSError, ValueError):
                    tombs[path.stem] = json.loads(path.read_text(encoding="utf-8"))
        new_base: dict[str, str] = {}
        for mid in sorted(set(local) | set(remote) | set(base)):
            L = sha256_bytes(local[mid]) if mid in local else None
            R = sha256_bytes(remote[mid]) if mid in remote else None
            B = base.get(mid)
            try:
                outcome = _sync_one(txn, report, mid, L, R, B, local, remote, tombs, remote_dir, host, dry_run, allow)
            except Precondition:
                report.left_out.append(f"{mid} (changed in the shared folder meanwhile; sync again)")
                if B:
                    new_base[mid] = B
                continue
            if outcome:
                new_base[mid] = outcome
        report.changes = len(report.pushed) + len(report.pulled) + len(report.forgot_here) + \
            len(report.forgot_there) + len(report.conflicts)
        if not dry_run:
            remote_now = _read_remote(remote_dir)
            mems = [parse_memory(_decode(d), m) for m, d in remote_now.items()]
            title = scope.title + " (shared)"
            list_text = render_list(title, mems).encode("utf-8")
            if _remote_hash(remote_dir / LIST_FILE) != sha256_bytes(list_text):
                atomic_write(remote_dir / LIST_FILE, list_text)
    if not dry_run:
        write_json(base_path, {"version": 1, "shared": str(shared.resolve()), "synced": format_time(now()),
                               "files": new_base})
    return report


def _sync_one(txn, report: SyncReport, mid, L, R, B, local, remote, tombs, remote_dir: Path, host: str,
              dry_run: bool, allow) -> str | None:
    """Sync one memory; returns the hash both sides now agree on (the new base), or None."""
    path = remote_dir / f"{mid}.md"
    tomb_path = remote_dir / TOMBSTONES / f"{mid}.json"
    if L == R:
        return L
    if L == B:  # only the shared folder changed
        if R is None:
            mem = txn.memories.get(mid)
            if mem is not None:
                who = (tombs.get(mid) or {}).get("host", "another machine")
                txn.forget(mid, by=f"sync ({who})", reason=f"forgotten on {who}", quiet=True)
                report.forgot_here.append(mid)
            return None
        return _pull(txn, report, mid, remote[mid], R, path, dry_run, allow)
    if R == B:  # only this machine changed
        if L is None:
            if not dry_run:
                _remote_put(path, None, R)
                write_json(tomb_path, {"id": mid, "hash": R, "host": host, "forgotten": format_time(now())})
            report.forgot_there.append(mid)
            return None
        if not dry_run:
            _remote_put(path, local[mid], R)
            with contextlib.suppress(FileNotFoundError):
                tomb_path.unlink()
        report.pushed.append(mid)
        return L
    # both sides changed since the last sync
    if L is None:  # forgotten here, changed there: the change wins, nothing is lost
        report.conflicts.append(f"{mid} was forgotten here but changed on another machine; brought back")
        return _pull(txn, report, mid, remote[mid], R, path, dry_run, allow)
    if R is None:  # forgotten there, changed here
        if not dry_run:
            _remote_put(path, local[mid], None)
            with contextlib.suppress(FileNotFoundError):
                tomb_path.unlink()
        report.conflicts.append(f"{mid} was forgotten on another machine but changed here; sent back")
        report.pushed.append(mid)
        return L
    mine = txn.memories[mid]
    theirs = parse_memory(_decode(remote[mid]), mid)
    theirs_newer = (theirs.sort_key, R) > (mine.sort_key, L)
    stamp = now().strftime("%Y%m%dT%H%M%S")
    if theirs_newer:
        finding = secrets.first(theirs.text(), allow)
        if finding is not None:
            report.left_out.append(f"{masked(mid)} from the shared folder ({finding.describe()})")
            return B
        txn.replace_memory(mid, theirs, by="sync", reason="changed on two machines; the other machine's is newer")
        if not dry_run:
            _remote_put(remote_dir / CONFLICTS / f"{mid}~{host}~{stamp}.md", local[mid], None)
        report.conflicts.append(f"{mid} changed on both machines; kept the newer (from the shared folder), "
                                "the older is in Forgotten")
        report.pulled.append(mid)
        settled = txn.memories[mid].to_markdown().encode("utf-8")
        if sha256_bytes(settled) != R and not dry_run:
            _remote_put(path, settled, R)
        return sha256_bytes(settled)
    txn._forget_copy(replace(theirs, extra=dict(theirs.extra)), by="sync",
                     reason="changed on two machines; this machine's is newer")
    if not dry_run:
        _remote_put(remote_dir / CONFLICTS / f"{mid}~other~{stamp}.md", remote[mid], None)
        _remote_put(path, local[mid], R)
    report.conflicts.append(f"{mid} changed on both machines; kept the newer (this machine's), the older is in Forgotten")
    report.pushed.append(mid)
    return L


def _pull(txn, report: SyncReport, mid: str, data: bytes, R: str, path: Path, dry_run: bool, allow) -> str | None:
    mem = parse_memory(_decode(data), mid)
    finding = secrets.first(mem.text(), allow)
    if finding is not None:
        report.left_out.append(f"{masked(mid)} from the shared folder ({finding.describe()})")
        return None
    if len(normalize_note(mem.note)) < NOTE_MIN:
        report.left_out.append(f"{mid} from the shared folder (no note)")
        return None
    before = txn.usage()
    old = txn.memories.get(mid)
    if old is not None:
        txn.replace_memory(mid, mem, by="sync", reason="replaced by a newer version from another machine")
    else:
        txn.memories[mid] = mem
    try:
        txn.check_room(before, adding=old is None)
    except LookoutError as exc:
        if old is not None:
            txn.memories[mid] = old
            txn.forgotten_new.pop()
        else:
            del txn.memories[mid]
        report.left_out.append(f"{mid} from the shared folder ({str(exc).split(':')[0]})")
        return None
    report.pulled.append(mid)
    settled = mem.to_markdown().encode("utf-8")
    if sha256_bytes(settled) != R:
        if not dry_run:
            _remote_put(path, settled, R)
        return sha256_bytes(settled)
    return R
