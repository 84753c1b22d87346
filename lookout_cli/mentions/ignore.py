"""Which files the ignore files exclude, and why.

Inside a git work tree git itself is asked (``git check-ignore -v --no-index``), which covers
nested ``.gitignore`` files, ``.git/info/exclude`` and ``core.excludesFile`` exactly as git sees
them; ``.lookoutignore`` and ``.cursorignore`` (which git does not know) are evaluated with
``pathspec``. Outside git all three files are evaluated with ``pathspec``.

pathspec knows nothing about nested ignore files or excluded parent folders, so evaluation
walks down from the top, folder by folder, and stops at the first excluded folder (git cannot
re-include a file whose parent folder is excluded; a flat match would get that wrong). In one
folder the files are read in the order ``.gitignore``, ``.lookoutignore``, ``.cursorignore``;
later lines and deeper folders win, and ``!pattern`` re-includes.

``--no-index`` means a file git tracks still counts as ignored when a pattern matches it: the
pattern says what the user wants kept out, whether or not the file was committed earlier.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

from lookout_cli.core.dataclass import dataclass

IGNORE_FILES = (".gitignore", ".lookoutignore", ".cursorignore")
GIT_KNOWS = (".gitignore",)
ALWAYS_SKIPPED = (".git",)  # never listed, never walked into
GIT_TIMEOUT = 60


@dataclass(frozen=True, slots=True)
class IgnoreMatch:
    """The rule that excludes a path."""

    source: str  # the ignore file (relative to the workspace root when under it)
    line: int  # 1-based line in that file
    pattern: str  # the pattern as written
    path: str  # the path it matched: the file itself or an excluded parent folder

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}: {self.pattern}"
        return where

    def as_dict(self) -> dict:
        return {"file": self.source, "line": self.line, "pattern": self.pattern, "matched": self.path}


@dataclass(frozen=True, slots=True)
class Entry:
    """A file or folder found by a listing, relative to the workspace root."""

    path: str  # "src/app.py", folders without a trailing slash
    is_dir: bool
    size: int = 0
    is_link: bool = False

    @property
    def depth(self) -> int:
        return self.path.count("/")

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


def git(args: list[str], cwd: Path | str, *, input: bytes | None = None, check: bool = True) -> bytes:
    """Run git without a pager, prompts, colour or optional locks; return its standard output."""
    env = dict(os.environ)
    env.update({"GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"})
    env.pop("GIT_DIR", None)
    env.pop("GIT_WORK_TREE", None)
    cmd = ["git", "--no-pager", "-c", "core.quotepath=off", "-c", "color.ui=false", *args]
    proc = subprocess.run(
        cmd,
        cwd=cwd,
        input=input,
        stdin=None if input is not None else subprocess.DEVNULL,
        capture_output=True,
        env=env,
        timeout=GIT_TIMEOUT,
    )
    if check and proc.returncode != 0:
        msg = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(msg[-1] if msg else f"git {args[0]} failed ({proc.returncode})")
    return proc.stdout


class GitError(RuntimeError):
    pass


def git_toplevel(path: Path | str) -> Path | None:
    """The top of the git work tree holding ``path``, or None outside git (or without git)."""
    try:
        out = git(["rev-parse", "--show-toplevel"], cwd=path, check=True)
    except (GitError, OSError, subprocess.SubprocessError):
        return None
    top = out.decode("utf-8", "surrogateescape").strip()
    return Path(top).resolve() if top else None


def _load_spec(path: Path):
    """Compile one ignore file into (spec, lines); pattern index i is line i + 1."""
    import pathspec
    from pathspec.gitignore import GitIgnoreSpecPattern

    try:
        raw = path.read_bytes()
    except OSError:
        return None
    lines = raw.decode("utf-8", "replace").splitlines()
    # An empty line compiles to nothing, so give it a comment instead: indices stay line numbers.
    patterns = [GitIgnoreSpecPattern(line if line.strip() else "#") for line in lines]
    return pathspec.GitIgnoreSpec(patterns), lines


class IgnoreRules:
    """Ignore decisions for paths under one workspace root.

    ``files`` are the ignore file names to honour; ``git`` forces (True/False) or auto-detects
    (None) asking git for ``.gitignore``.
    """

    def __init__(self, root: Path | str, *, files: tuple[str, ...] = IGNORE_FILES, git: bool | None = None):
        self.root = Path(root).resolve()
        self.files = tuple(files)
        top = git_toplevel(self.root) if git is not False else None
        if top is not None and not (self.root == top or top in self.root.parents):
            top = None
        self.git_top = top
        # Ignore files above the root count too, up to the repository's top.
        self.base = top if top is not None else self.root
        self.own_files = tuple(f for f in self.files if not (top is not None and f in GIT_KNOWS))
        self._specs: dict[str, list] = {}
        self._git_cache: dict[str, IgnoreMatch | None] = {}

    @property
    def in_git(self) -> bool:
        return self.git_top is not None

    # --- helpers -----------------------------------------------------------------------------
    def _base_rel(self, rel: str) -> str:
        """A root-relative path made relative to the base (the git top or the root)."""
        full = os.path.normpath(os.path.join(self.root, rel)) if rel else str(self.root)
        r = os.path.relpath(full, self.base)
        return "" if r == "." else Path(r).as_posix()

    def _root_rel(self, base_rel: str) -> str:
        full = self.base / base_rel if base_rel else self.base
        rel = os.path.relpath(full, self.root)
        return Path(rel).as_posix()

    def _specs_in(self, base_dir: str) -> list:
        """Compiled ignore files in one folder (base-relative), in evaluation order."""
        specs = self._specs.get(base_dir)
        if specs is None:
            specs = []
            folder = self.base / base_dir if base_dir else self.base
            for name in self.own_files:
                loaded = _load_spec(folder / name)
                if loaded is not None:
                    source = self._root_rel(f"{base_dir}/{name}" if base_dir else name)
                    specs.append((source, loaded[0], loaded[1]))
            self._specs[base_dir] = specs
        return specs

    def _own_match(self, base_path: str, is_dir: bool) -> IgnoreMatch | None:
        """The deciding pattern of the lookout-evaluated files for one path (no parent check)."""
        parts = base_path.split("/")
        decision = None
        for depth in range(len(parts)):
            folder = "/".join(parts[:depth])
            below = "/".join(parts[depth:]) + ("/" if is_dir else "")
            for source, spec, lines in self._specs_in(folder):
                res = spec.check_file(below)
                if res.include is not None:
                    decision = (res.include, source, res.index + 1, lines[res.index].strip())
        if decision and decision[0]:
            return IgnoreMatch(decision[1], decision[2], decision[3], self._root_rel(base_path))
        return None

    def _own_check(self, base_path: str, is_dir: bool) -> IgnoreMatch | None:
        """The pruning walk for one path: each parent folder first, then the path itself."""
        if not self.own_files or not base_path:
            return None
        parts = base_path.split("/")
        for i in range(1, len(parts) + 1):
            last = i == len(parts)
            found = self._own_match("/".join(parts[:i]), is_dir if last else True)
            if found is not None:
                return found
        return None

    def _git_check(self, base_paths: list[str]) -> dict[str, IgnoreMatch | None]:
        """Ask git about several base-relative paths at once."""
        todo = [p for p in base_paths if p not in self._git_cache and p]
        if todo and self.git_top is not None:
            try:
                self._git_cache.update(self._git_batch(todo))
            except (GitError, OSError, subprocess.SubprocessError):
                # One bad path (beyond a symlink, …) fails the batch: ask one at a time.
                for p in todo:
                    try:
                        self._git_cache.update(self._git_batch([p]))
                    except (GitError, OSError, subprocess.SubprocessError):
                        self._git_cache[p] = None
        return {p: self._git_cache.get(p) for p in base_paths}

    def _git_batch(self, paths: list[str]) -> dict[str, IgnoreMatch | None]:
        data = b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in paths)
        out = git(
            ["check-ignore", "-v", "-n", "-z", "--no-index", "--stdin"],
            cwd=self.git_top,
            input=data,
            check=False,
        )
        fields = out.split(b"\0")
        result: dict[str, IgnoreMatch | None] = {p: None for p in paths}
        for k in range(0, len(fields) - 3, 4):
            source, line, pattern, path = (f.decode("utf-8", "surrogateescape") for f in fields[k : k + 4])
            if not source or pattern.startswith("!"):
                continue  # not matched, or matched a re-including pattern
            src = source if os.path.isabs(source) else self._root_rel(source)
            result[path] = IgnoreMatch(src, int(line), pattern, self._root_rel(path))
        if len(fields) < 4 * len(paths):
            raise GitError("git check-ignore gave a short answer")
        return result

    # --- public ------------------------------------------------------------------------------
    def check(self, rel: str, is_dir: bool | None = None) -> IgnoreMatch | None:
        """The rule that excludes ``rel`` (a path relative to the root), or None."""
        return self.check_many([rel], is_dir)[rel]

    def check_many(self, rels: list[str], is_dir: bool | None = None) -> dict[str, IgnoreMatch | None]:
        out: dict[str, IgnoreMatch | None] = {}
        base = {rel: self._base_rel(rel.rstrip("/")) for rel in rels}
        git_answers = self._git_check([b for b in base.values() if b]) if self.in_git else {}
        for rel, b in base.items():
            if not b or b.startswith("../"):
                out[rel] = None
                continue
            d = is_dir if is_dir is not None else (rel.endswith("/") or (self.root / rel).is_dir())
            out[rel] = git_answers.get(b) or self._own_check(b, d)
        return out

    def listdir(self, rel_dir: str = "") -> tuple[list[Entry], list[tuple[str, IgnoreMatch]]]:
        """The direct entries of a folder, sorted (folders first): (kept, [(path, why), …] left out).

        The folder itself is taken as not ignored (check it first): only its entries are judged.
        """
        folder = self.root / rel_dir if rel_dir else self.root
        entries: list[Entry] = []
        try:
            with os.scandir(folder) as it:
                for de in it:
                    if de.name in ALWAYS_SKIPPED:
                        continue
                    entries.append(_entry(de, rel_dir))
        except OSError:
            return [], []
        verdicts = self._entry_verdicts(entries) if entries else {}
        kept = [e for e in entries if verdicts.get(e.path) is None]
        dropped = [(e.path, verdicts[e.path]) for e in entries if verdicts.get(e.path) is not None]
        kept.sort(key=lambda e: (not e.is_dir, e.name.lower(), e.name))
        return kept, dropped

    def _entry_verdicts(self, entries: list[Entry]) -> dict[str, IgnoreMatch | None]:
        """Verdicts for entries of one folder that is not ignored: no parent chain to walk."""
        base = {e.path: self._base_rel(e.path) for e in entries}
        git_answers = self._git_check(list(base.values())) if self.in_git else {}
        out = {}
        for e in entries:
            b = base[e.path]
            found = git_answers.get(b)
            if found is None and self.own_files:
                found = self._own_match(b, e.is_dir)
            out[e.path] = found
        return out

    def walk(self, rel_dir: str = "", *, limit: int | None = None) -> Iterator[Entry]:
        """Every entry under a folder that is not ignored, breadth first; ignored folders are
        pruned (never entered). Stops after ``limit`` entries."""
        if self.in_git:
            yield from self._git_walk(rel_dir, limit)
            return
        queue = [rel_dir]
        count = 0
        while queue:
            nxt: list[str] = []
            for folder in queue:
                kept, _ = self.listdir(folder)
                for e in kept:
                    yield e
                    count += 1
                    if limit is not None and count >= limit:
                        return
                    if e.is_dir and not e.is_link:
                        nxt.append(e.path)
            queue = nxt

    def _git_walk(self, rel_dir: str, limit: int | None) -> Iterator[Entry]:
        """Files git shows (tracked, and untracked but not ignored), with their folders."""
        where = self.root / rel_dir if rel_dir else self.root
        try:
            out = git(["ls-files", "-z", "-c", "-o", "--exclude-standard", "--", "."], cwd=where)
        except (GitError, OSError, subprocess.SubprocessError):
            return
        prefix = f"{rel_dir.rstrip('/')}/" if rel_dir else ""
        files = sorted({prefix + f.decode("utf-8", "surrogateescape") for f in out.split(b"\0") if f})
        folders: set[str] = set()
        skip = len(prefix.strip("/").split("/")) if prefix else 0
        for f in files:
            parts = f.split("/")
            for i in range(skip + 1, len(parts)):
                folders.add("/".join(parts[:i]))
        # lookout's own ignore files (and the parent-folder rule) on top of git's answer
        pruned: set[str] = set()
        ordered = sorted(folders, key=lambda p: (p.count("/"), p))
        kept_folders = []
        for d in ordered:
            parent = d.rsplit("/", 1)[0] if "/" in d else ""
            if parent in pruned or (self.own_files and self._own_match(self._base_rel(d), True)):
                pruned.add(d)
            else:
                kept_folders.append(d)
        kept_files = []
        for f in files:
            parent = f.rsplit("/", 1)[0] if "/" in f else ""
            if parent in pruned:
                continue
            if self.own_files and self._own_match(self._base_rel(f), False):
                continue
            if not os.path.lexists(self.root / f):  # deleted but still tracked
                continue
            kept_files.append(f)
        entries = [Entry(d, True) for d in kept_folders]
        for f in kept_files:
            try:
                st = os.lstat(self.root / f)
                entries.append(Entry(f, False, st.st_size, stat.S_ISLNK(st.st_mode)))
            except OSError:
                continue
        entries.sort(key=lambda e: (e.depth, not e.is_dir, e.path))
        for n, e in enumerate(entries):
            if limit is not None and n >= limit:
                return
            yield e


def _entry(de: os.DirEntry, rel_dir: str) -> Entry:
    path = f"{rel_dir.rstrip('/')}/{de.name}" if rel_dir else de.name
    try:
        is_link = de.is_symlink()
        is_dir = de.is_dir(follow_symlinks=True)
        size = 0 if is_dir else de.stat(follow_symlinks=True).st_size
    except OSError:
        return Entry(path, False, 0, True)
    return Entry(path, is_dir, size, is_link)
