"""Which memory a command works on: Everywhere, an agent's own, or a project's.

A project's memory belongs to its git repository, not to the folder's path. Its identity is
built from aliases, strongest first:

- ``git:<sha>``: the repository's root commit(s); shared by every clone, worktree and moved
  copy. A shallow clone's oldest commit is not the root, so a shallow clone gives none (unless
  its remote is a local repository, which is asked instead);
- ``url:<host/path>``: each remote URL, normalized (scheme, user, default port, ``.git`` and
  case dropped), so a shallow clone finds the project a full clone of the same remote made;
- ``path:<folder>``: the repository's common git folder (shared by its worktrees) and its top
  folder. A folder outside git is known by its path alone.

Each project folder keeps every alias it has been reached by in ``meta.json``. A repository whose
aliases reach two project folders (a shallow clone and a full clone met, a folder put under git)
merges them into one: each memory once, and of two versions of one topic the newer stays and the
older goes to Forgotten.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import unquote, urlsplit

from lookout_cli.core.dataclass import dataclass, field
from lookout_cli.core.errors import LookoutError
from lookout_cli.core.fsutil import atomic_write
from lookout_cli.core.paths import data_dir
from lookout_cli.memory.store import (
    META_FILE,
    Scope,
    file_lock,
    format_time,
    now,
)

_GIT_ENV_DROP = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY",
                 "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_PREFIX", "GIT_NAMESPACE")
_AGENT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,63}$")


def memory_root() -> Path:
    return data_dir() / "memory"


def everywhere_scope() -> Scope:
    return Scope("everywhere", "everywhere", memory_root() / "everywhere")


def agent_scope(name: str) -> Scope:
    if not _AGENT_RE.match(name or "") or name in (".", ".."):
        raise LookoutError(f"agent name {name!r}: use letters, digits, '.', '_' and '-' (up to 64)")
    return Scope("agent", name, memory_root() / "agents" / name)


# --- git ----------------------------------------------------------------------------------------
def _git(args: list[str], cwd: Path, timeout: float = 20) -> str | None:
    env = {k: v for k, v in os.environ.items() if k not in _GIT_ENV_DROP}
    env["GIT_TERMINAL_PROMPT"] = "0"
    env.setdefault("LC_ALL", "C")
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env,
                              timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    return proc.stdout


@dataclass
class RepoFacts:
    toplevel: Path | None
    common_dir: Path
    shallow: bool
    roots: list[str]
    remotes: list[str]  # raw URLs, origin first


def repo_facts(directory: Path) -> RepoFacts | None:
    """What git says about the repository holding ``directory``, or None outside git."""
    out = _git(["rev-parse", "--path-format=absolute", "--git-common-dir", "--is-shallow-repository",
                "--is-bare-repository"], directory)
    if out is None:
        return None
    lines = out.splitlines()
    if len(lines) < 3:
        return None
    common_dir = Path(lines[0]).resolve()
    shallow = lines[1].strip() == "true"
    bare = lines[2].strip() == "true"
    toplevel = None
    if not bare:
        top = _git(["rev-parse", "--path-format=absolute", "--show-toplevel"], directory)
        if top and top.strip():
            toplevel = Path(top.strip()).resolve()
    roots: list[str] = []
    if not shallow:
        rev = _git(["rev-list", "--max-parents=0", "HEAD", "--"], directory)
        if rev:
            roots = sorted(set(rev.split()))
    remotes: list[str] = []
    conf = _git(["config", "--get-regexp", r"^remote\..*\.url$"], directory)
    if conf:
        pairs = []
        for line in conf.splitlines():
            key, _, url = line.partition(" ")
            name = key[len("remote."):-len(".url")]
            pairs.append((0 if name == "origin" else 1 if name == "upstream" else 2, name, url.strip()))
        remotes = [url for _, _, url in sorted(pairs) if url]
    return RepoFacts(toplevel, common_dir, shallow, roots, remotes)


def normalize_remote(url: str, base: Path | None = None) -> tuple[str, Path | None]:
    """``(alias, local_path)``: ``url:host/path`` for a network remote, or ``("", path)`` for a
    remote that is a folder on this machine."""
    url = url.strip()
    if not url:
        return "", None
    # local: file://, absolute or relative paths
    if url.startswith("file://"):
        return "", Path(unquote(urlsplit(url).path))
    if url.startswith(("/", "./", "../", "~")) or re.match(r"^[A-Za-z]:[\\/]", url):
        path = Path(os.path.expanduser(url))
        if not path.is_absolute() and base is not None:
            path = base / path
        return "", path
    scp = re.match(r"^(?:[^@/]+@)?([^:/]+):(?!//)(.+)$", url)
    if "://" not in url and scp:
        host, path, port = scp.group(1), scp.group(2), None
    else:
        parts = urlsplit(url)
        if not parts.hostname:
            path = Path(url)
            return "", (base / path if base is not None and not path.is_absolute() else path)
        host, path = parts.hostname, parts.path
        try:
            port = parts.port
        except ValueError:
            port = None
        default_ports = {"https": 443, "http": 80, "ssh": 22, "git": 9418, "git+ssh": 22, "ssh+git": 22}
        if port is not None and port == default_ports.get(parts.scheme):
            port = None
    path = unquote(path).strip("/")
    path = re.sub(r"\.git$", "", path).strip("/")
    path = re.sub(r"/+", "/", path)
    host = host.lower()
    where = f"{host}:{port}" if port else host
    return f"url:{where}/{path}".lower(), None


@dataclass
class Identity:
    key: str  # the strongest alias
    name: str  # for people: the folder's name
    aliases: list[str] = field(default_factory=list)  # strongest first
    in_git: bool = False
    shallow: bool = False

    @property
    def roots(self) -> set[str]:
        return {a for a in self.aliases if a.startswith("git:")}


def identify(directory: str | os.PathLike | None = None) -> Identity:
    """The identity of the project holding ``directory`` (default: the working folder)."""
    start = Path(directory or os.getcwd()).expanduser()
    try:
        start = start.resolve(strict=True)
    except OSError:
        raise LookoutError(f"{start}: no such folder") from None
    if start.is_file():
        start = start.parent
    facts = repo_facts(start)
    if facts is None:
        return Identity(f"path:{start}", start.name or str(start), [f"path:{start}"])
    roots = [f"git:{r}" for r in facts.roots]
    urls: list[str] = []
    paths: list[str] = []
    base = facts.toplevel or facts.common_dir
    for url in facts.remotes:
        alias, local = normalize_remote(url, base)
        if alias:
            urls.append(alias)
        elif local is not None and local.exists():
            # a remote on this machine: ask it (a shallow clone of it learns the real root)
            other = repo_facts(local)
            if other is not None:
                paths.append(f"path:{other.common_dir}")
                if not facts.roots and not other.shallow:
                    roots += [f"git:{r}" for r in other.roots]
            else:
                paths.append(f"path:{local.resolve()}")
    paths.append(f"path:{facts.common_dir}")
    if facts.toplevel is not None:
        paths.append(f"path:{facts.toplevel}")
    aliases = list(dict.fromkeys(sorted(set(roots)) + urls + paths))
    top = facts.toplevel or facts.common_dir
    name = top.name if top.name != ".git" else top.parent.name
    if facts.common_dir.name == ".git":
        name = facts.common_dir.parent.name
    return Identity(aliases[0], name or "project", aliases, in_git=True, shallow=facts.shallow)


# --- the project registry -----------------------------------------------------------------------
def projects_dir() -> Path:
    return memory_root() / "projects"


def read_meta(folder: Path) -> dict | None:
    try:
        data = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_meta(folder: Path, meta: dict) -> None:
    atomic_write(folder / META_FILE, (json.dumps(meta, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))


def known_projects() -> list[tuple[Path, dict]]:
    root = projects_dir()
    if not root.is_dir():
        return []
    out = []
    for folder in sorted(root.iterdir()):
        if folder.is_dir() and not folder.name.startswith("."):
            meta = read_meta(folder)
            if meta is not None:
                out.append((folder, meta))
    return out


def _conflict(a: set[str], b: set[str]) -> bool:
    """Two sets of root commits that share none: different repositories."""
    return bool(a) and bool(b) and not (a & b)


def _strength(alias: str) -> int:
    return 0 if alias.startswith("git:") else 1 if alias.startswith("url:") else 2


def _folder_name(identity: Identity) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", identity.name.lower()).strip("-")[:40] or "project"
    return f"{slug}-{hashlib.sha256(identity.key.encode()).hexdigest()[:10]}"


def project_scope_for(folder: Path, meta: dict) -> Scope:
    return Scope("project", meta.get("name") or folder.name, folder)


@dataclass
class Resolution:
    scope: Scope
    identity: Identity
    merged: list[str] = field(default_factory=list)  # messages about copies merged (or to merge)
    created: bool = False


def _matches(identity: Identity) -> list[tuple[int, Path, dict]]:
    mine = set(identity.aliases)
    my_roots = identity.roots
    found = []
    for folder, meta in known_projects():
        theirs = set(meta.get("aliases") or [])
        common = mine & theirs
        if not common:
            continue
        their_roots = {a for a in theirs if a.startswith("git:")}
        if _conflict(my_roots, their_roots):
            continue  # the same path or remote, but another repository
        found.append((min(_strength(a) for a in common), folder, meta))
    found.sort(key=lambda t: (t[0], t[2].get("created") or "", str(t[1])))
    return found


def resolve_project(directory: str | os.PathLike | None = None, write: bool = True,
                    create: bool = True) -> Resolution:
    """Find the project memory for ``directory``. With ``write`` the project's new aliases are
    recorded and other copies of its memory merged in; with ``create`` too, a project seen for
    the first time gets its folder."""
    identity = identify(directory)
    if not write or (not create and not _matches(identity)):
        found = _matches(identity)
        if not found:
            folder = projects_dir() / _folder_name(identity)
            return Resolution(Scope("project", identity.name, folder), identity)
        _, folder, meta = found[0]
        res = Resolution(project_scope_for(folder, meta), identity)
        for _, other, other_meta in found[1:]:
            if not _conflict(_roots(meta), _roots(other_meta)):
                res.merged.append(f"would merge the copy of this project's memory in {other}")
        return res
    root = projects_dir()
    root.mkdir(parents=True, exist_ok=True)
    with file_lock(root / ".lock"):
        found = _matches(identity)
        if not found:
            folder = root / _folder_name(identity)
            n = 2
            while folder.exists() and read_meta(folder) is not None:
                folder = root / f"{_folder_name(identity)}-{n}"
                n += 1
            folder.mkdir(parents=True, exist_ok=True)
            meta = {"version": 1, "key": identity.key, "name": identity.name, "aliases": identity.aliases,
                    "created": format_time(now())}
            write_meta(folder, meta)
            return Resolution(project_scope_for(folder, meta), identity, created=True)
        _, folder, meta = found[0]
        res = Resolution(project_scope_for(folder, meta), identity)
        aliases = list(meta.get("aliases") or [])
        for _, other, other_meta in found[1:]:
            if _conflict(_roots(meta) | identity.roots, _roots(other_meta)):
                continue
            res.merged.append(merge_copies(res.scope, project_scope_for(other, other_meta)))
            aliases += other_meta.get("aliases") or []
            meta.setdefault("merged_from", []).append(other.name)
        new_aliases = list(dict.fromkeys(sorted(set(aliases) | set(identity.aliases), key=lambda a: (_strength(a), a))))
        if new_aliases != meta.get("aliases") or res.merged:
            meta["aliases"] = new_aliases
            if identity.roots and not str(meta.get("key", "")).startswith("git:"):
                meta["key"] = identity.key
            write_meta(folder, meta)
        return res


def _roots(meta: dict) -> set[str]:
    return {a for a in meta.get("aliases") or [] if a.startswith("git:")}


def merge_copies(into: Scope, other: Scope) -> str:
    """Merge another copy of a project's memory into ``into`` and remove the copy: each memory
    once; of two versions of one topic the newer stays, the older goes to Forgotten."""
    counts = {"same": 0, "added": 0, "newer": 0, "older": 0}
    with file_lock(other.path / ".lock"), into.transaction() as txn:
        for mem in other.read_memories().values():
            counts[txn.absorb(mem, origin=f"the copy in {other.path.name}")] += 1
        for mem in other.forgotten(include_expired=False):
            txn.keep_forgotten(mem)
        txn.log.append(f"merged {other.path}")
    shutil.rmtree(other.path, ignore_errors=True)
    older = counts["newer"] + counts["older"]
    return (
        f"merged another copy of this project's memory ({other.path.name}): "
        f"{counts['added'] + counts['newer']} came in, {counts['same']} were already here"
        + (f", {older} older version(s) went to Forgotten" if older else "")
    )


def known_scopes() -> list[Scope]:
    """Every scope on this machine: Everywhere, each project, each agent."""
    scopes = [everywhere_scope()]
    scopes += [project_scope_for(folder, meta) for folder, meta in known_projects()]
    agents = memory_root() / "agents"
    if agents.is_dir():
        scopes += [Scope("agent", p.name, p) for p in sorted(agents.iterdir()) if p.is_dir()]
    return scopes
