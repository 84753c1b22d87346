"""The saved-output store: whatever a command clears is saved here first, so nothing is lost.

Files are named by their sha256 (``sha256/ab/cdef….txt``), written atomically, and listed in
``manifest.jsonl`` (hash, bytes, tokens, tool, call id, transcript, when, which command).
Saving the same content twice is a no-op, so reruns are idempotent.

Two things are saved for every cleared part: the content itself, which the placeholder names
so the agent can read it again, and the record's original line. The placeholder carries a
``lookout-restore:<sha256>`` marker naming that line; ``lookout restore`` swaps the line back,
byte for byte.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import os
import re
from collections.abc import Iterable

from lookout_cli.core import hashing
from lookout_cli.core.dataclass import dataclass
from lookout_cli.core.fsutil import append_line, keep_new, new_temp_file, write_new
from lookout_cli.core.jsonl import dumps, loads, loads_exact

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from pathlib import Path

MARKER = "lookout-restore:"
# "+N": the N lines after the marker's line are copies of saved lines (see ``carrying``)
MARKER_RE = re.compile(rb"lookout-restore:([0-9a-f]{64})(?:\+(\d+))?")
_MARKER = MARKER.encode()
CLEARED_PREFIX = "[lookout cleared"  # how every placeholder begins

EXTENSIONS = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
    "text": ".txt",
    "record": ".jsonl",
}


@dataclass(frozen=True, slots=True)
class Saved:
    """A file in the saved-output store: its content hash, path and size."""

    sha256: str
    path: Path
    nbytes: int


class SavedStore:
    """A content-addressed folder. With ``dry_run`` it computes names but writes nothing."""

    def __init__(self, root: Path, dry_run: bool = False, command: str = "", transcript: str | None = None):
        # (here: the meter reads the placeholders' markers, and makes no store, without pathlib)
        from pathlib import Path

        self.root = Path(root)
        self.dry_run = dry_run
        self.command = command
        self.transcript = transcript
        self.written: list[Saved] = []

    @functools.cached_property
    def _real_root(self) -> Path:
        """The root with its links resolved, once (not a realpath per saved file)."""
        return self.root.resolve() if self.root.is_absolute() else self.root.absolute()

    def path_for(self, sha: str, ext: str) -> Path:
        from pathlib import Path

        return Path(self._file(sha, ext))

    def _file(self, sha: str, ext: str) -> str:
        """``path_for`` as a string (no Path built per saved output)."""
        return f"{self._folder}/{sha[:2]}/{sha[2:]}{ext}"

    def real_path(self, sha: str, ext: str) -> Path:
        """``path_for`` from the root with its links resolved: the name placeholders give."""
        return self._real_root / "sha256" / sha[:2] / (sha[2:] + ext)

    def put(self, data: bytes, kind: str = "text", **meta) -> Saved:
        """Save ``data`` (kind: ``text``, ``record`` or an image media type) and return its name."""
        sha = hashing.sha256(data).hexdigest()
        ext = EXTENSIONS.get(kind, ".bin")
        if not self.dry_run:
            # durable before any transcript names it (fsutil syncs pending files first), in one
            # sync for a batch: compacting a long session saves thousands of outputs
            write_new(self._file(sha, ext), data)
        return self._saved(sha, ext, len(data), kind, meta)

    def put_parts(self, parts: Iterable[bytes], kind: str = "text", **meta) -> Saved:
        """``put`` for data made a piece at a time (a whole conversation as text), never held
        whole: hashed as it is written to a temporary file, which then takes its name."""
        digest, size = hashing.sha256(), 0
        tmp = None
        try:
            if not self.dry_run:
                self.root.mkdir(parents=True, exist_ok=True)
                fd, tmp = new_temp_file(self.root, ".part-")
            with os.fdopen(fd, "wb") if tmp else contextlib.nullcontext() as handle:
                for part in parts:
                    digest.update(part)
                    size += len(part)
                    if handle is not None:
                        handle.write(part)
            ext = EXTENSIONS.get(kind, ".bin")
            if tmp is not None:
                keep_new(tmp, self._file(digest.hexdigest(), ext))
        except BaseException:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
            raise
        return self._saved(digest.hexdigest(), ext, size, kind, meta)

    def _saved(self, sha: str, ext: str, size: int, kind: str, meta: dict) -> Saved:
        saved = Saved(sha, self.real_path(sha, ext), size)
        if not self.dry_run:
            self._log({"sha256": sha, "bytes": size, "kind": kind, "file": str(saved.path), **meta})
            self.written.append(saved)
        return saved

    def get(self, sha: str) -> bytes | None:
        """The saved bytes for a hash, whatever their extension; None when missing or damaged."""
        folder = self.root / "sha256" / sha[:2]
        if not folder.is_dir():
            return None
        for path in folder.glob(sha[2:] + "*"):
            data = path.read_bytes()
            if hashing.sha256(data).hexdigest() == sha:
                return data
        return None

    @functools.cached_property
    def _folder(self) -> str:
        return os.path.join(self.root, "sha256")

    @functools.cached_property
    def _manifest(self) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        return self.root / "manifest.jsonl"

    def _log(self, entry: dict) -> None:
        entry.update(
            {
                "when": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                "command": self.command,
                "transcript": self.transcript,
            }
        )
        append_line(self._manifest, dumps({k: v for k, v in entry.items() if v is not None}) + b"\n")


def human_size(nbytes: int) -> str:
    size = float(nbytes)
    for unit in ("bytes", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{int(size):,} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{nbytes} bytes"


def placeholder(what: str, content: Saved, restore: Saved | None, *, tokens: int | None = None,
                lines: tuple[int, int] | None = None) -> str:
    """The text left where content was cleared: size, saved file, lines to read, restore marker."""
    size = human_size(content.nbytes)
    if tokens is not None:
        size += f", about {tokens:,} tokens"
    text = f"{CLEARED_PREFIX} {what} ({size}). It is saved in {content.path}"
    if lines:
        text += f"; read lines {lines[0]}-{lines[1]} of that file to see it again"
    text += "."
    if restore is not None:
        text += f" {MARKER}{restore.sha256}"
    return text + "]"


# what ``placeholder`` writes of the original's size: "(1.2 KB, about 300 tokens)"
ORIGINAL_SIZE_RE = re.compile(r"\(\S+ \w+, about ([\d,]+) tokens\)")


def original_tokens(text: str) -> int | None:
    """The tokens a placeholder says its original held, None when it names none."""
    match = ORIGINAL_SIZE_RE.search(text)
    return int(match.group(1).replace(",", "")) if match else None


def restore_marker(raw: bytes) -> str:
    """The marker naming a line that ``SavedStore.put`` saves as it is (under its sha256)."""
    return MARKER + hashing.sha256(raw).hexdigest()


def _parse(raw: bytes):
    try:
        return loads(raw)
    except ValueError:
        try:
            return loads_exact(raw)
        except ValueError:
            return None


def same_record(current: bytes, original: bytes) -> bool:
    """Whether ``current`` is ``original`` changed in place, not a copy of it written elsewhere
    (a compaction copies kept lines, placeholders and all, under a new uuid or record type):
    every top-level plain value that holds no marker must be the original's."""
    now, then = _parse(current), _parse(original)
    if not isinstance(now, dict) or not isinstance(then, dict):
        return True
    for key, value in now.items():
        if isinstance(value, (dict, list)) or (isinstance(value, str) and MARKER in value):
            continue
        if key in then and then[key] != value:
            return False
    return True


def carrying(marker: str, copies: int) -> str:
    """``marker`` for saved lines of which the writer kept ``copies``, unchanged, right after
    the marker's own line (a compaction keeps the unknown records among the lines it removes:
    they pass through). ``lookout restore`` drops those copies: the saved lines hold them in
    place."""
    return f"{marker}+{copies}" if copies else marker


class Restorer:
    """Restores lines one after another, following nested restores: ``lines(raw)`` is what a
    line stood for before lookout changed it ([] for a copy that the line before it restores in
    place, see ``carrying``). A line whose marker names nothing in the store, or that is a copy
    of the changed line rather than the line itself, stays as it is."""

    def __init__(self, store: SavedStore, depth: int = 16) -> None:
        self.store = store
        self.depth = depth
        self.copies = 0  # lines still expected to be copies of lines just restored
        self.block: list[bytes] = []  # the lines just restored that the copies are of, in order

    def lines(self, raw: bytes) -> list[bytes]:
        if self.copies and raw in self.block:
            del self.block[: self.block.index(raw) + 1]
            self.copies -= 1
            return []
        self.copies = 0
        match = MARKER_RE.search(raw) if self.depth > 0 and _MARKER in raw else None
        original = self.store.get(match.group(1).decode()) if match else None
        if original is None:
            return [raw]
        lines = original.splitlines(keepends=True)
        if len(lines) == 1 and not same_record(raw, lines[0]):
            return [raw]
        inner = Restorer(self.store, self.depth - 1)
        restored = [line for saved in lines for line in inner.lines(saved)]
        self.copies, self.block = int(match.group(2) or 0), lines
        return restored


def restore_lines(store: SavedStore, raw: bytes, depth: int = 16) -> list[bytes]:
    """The lines one line stood for before lookout changed it (``Restorer``)."""
    return Restorer(store, depth).lines(raw)
