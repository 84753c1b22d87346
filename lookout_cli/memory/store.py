"""Memory storage: one folder per scope, a ``MEMORY.md`` list and one Markdown file per memory.

A scope folder holds::

    MEMORY.md              the list, newest first: one line per memory (the text a chat is sent)
    <topic>.md             one memory: front matter (author, source, dates, topic), note, details
    .forgotten/            forgotten memories, kept 30 days and restorable
    .index.json            what lookout last wrote (to notice hand edits), never the only copy
    .lock                  the scope's lock (the system's own: flock, or msvcrt on Windows)

The memory files are the source of truth; ``MEMORY.md`` is rewritten from them on every change.
A line added to ``MEMORY.md`` by hand becomes a memory, a line removed by hand forgets its
memory, and a memory file edited by hand gets its date moved and its old text kept in Forgotten.

Every change happens in a ``Transaction``: under the scope's lock, the scope is read, changed in
memory, checked against the limits, then written (each file atomically: temp file, fsync,
rename). A dry run computes the same changes and writes nothing.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import re
import unicodedata
from collections.abc import Iterable, Iterator
from pathlib import Path

from lookout_cli.core import lock, secrets
from lookout_cli.core.dataclass import dataclass, field, replace
from lookout_cli.core.errors import LookoutError
from lookout_cli.core.fsutil import atomic_write
from lookout_cli.core.times import parse_time

# --- limits (SPEC §4 memory, seed 002) ----------------------------------------------------------
NOTE_MIN = 3  # characters
NOTE_MAX = 400
MAX_MEMORIES = 200
MAX_LIST_BYTES = 6 * 1024  # the list as sent to a chat
MAX_SCOPE_BYTES = 128 * 1024  # the list plus every memory's details
SEND_BYTES = MAX_LIST_BYTES  # a chat is sent each list newest first up to this
FORGOTTEN_DAYS = 30
TIDY_NEAR = 10  # within this many of MAX_MEMORIES a tidy brings the scope to TIDY_TARGET
TIDY_TARGET = 180
LOCK_TIMEOUT = 60.0  # seconds to wait for another process's lock

AUTHORS = ("you", "agent", "learned")
AUTHOR_LABELS = {"you": "by you", "agent": "by the agent", "learned": "learned"}
LIST_FILE = "MEMORY.md"
FORGOTTEN_DIR = ".forgotten"
INDEX_FILE = ".index.json"
LOCK_FILE = ".lock"
META_FILE = "meta.json"  # a project's identity (memory_project)
RESERVED_IDS = {"memory"}  # memory.md would clash with MEMORY.md on case-insensitive disks

_FIELD_ORDER = ("topic", "author", "by", "source", "created", "updated", "verified", "edited_by", "learned_from")
_FORGOTTEN_FIELDS = ("forgotten", "forgotten_by", "reason")


# --- time ---------------------------------------------------------------------------------------
def now() -> dt.datetime:
    """The current time in UTC; ``LOOKOUT_NOW`` (ISO 8601) fixes it for scripts and tests."""
    fixed = os.environ.get("LOOKOUT_NOW")
    if fixed:
        parsed = parse_time(fixed)
        if parsed is None:
            raise LookoutError(f"LOOKOUT_NOW={fixed!r} is not a date and time like 2026-05-01T12:00:00Z")
        return parsed
    return dt.datetime.now(dt.timezone.utc)


def format_time(when: dt.datetime) -> str:
    when = when.astimezone(dt.timezone.utc)
    if when.microsecond:
        return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


# --- text helpers -------------------------------------------------------------------------------
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def utf8_safe(text: str) -> str:
    """``text`` with each lone surrogate (JSON's "\\ud800", an undecodable argument byte) as
    U+FFFD: memory files are UTF-8, which cannot hold one."""
    return _SURROGATE_RE.sub("\ufffd", text)


def normalize_note(text: str) -> str:
    """A note is one line: runs of whitespace become one space (every word is kept)."""
    return " ".join(utf8_safe(str(text)).split())


def note_key(text: str) -> str:
    """What makes two notes 'the same memory': case and punctuation at the ends ignored."""
    return normalize_note(text).casefold().strip(" .!;:,")


_SLUG_SKIP = frozenset("a an the is are was were be to of for and or in on at we our i my you your it its that this".split())


def _secret_fragment(word: str) -> bool:
    """A slug word that could be part of a secret the gate missed: letters and digits mixed the
    way passwords and tokens mix them (``ps3cr3tpass``, a hex token). A name with a number on
    it (``ubuntu2204``, ``python311``, a topic people save under again) and plain words stay."""
    if len(word) < 8 or word.isalpha() or word.isdigit():
        return False
    switches = sum(a.isdigit() != b.isdigit() for a, b in zip(word, word[1:]))
    return switches >= 3 or len(word) >= 16


def slugify(text: str, max_words: int = 6, max_len: int = 48) -> str:
    """A file name for a memory, made from its words. It never carries a secret: what the gate
    finds is taken out first (also when the memory was saved with --allow-secret), and so are
    words that could be the rest of one."""
    for finding in reversed(secrets.scan(text)):
        text = text[: finding.start] + " " + text[finding.end :]
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower()
    words = [w for w in re.findall(r"[a-z0-9]+", ascii_text) if not _secret_fragment(w)]
    words = [w for w in words if w not in _SLUG_SKIP] or words
    slug = ""
    for word in words[:max_words]:
        candidate = f"{slug}-{word}" if slug else word
        if len(candidate) > max_len:
            break
        slug = candidate
    if not slug and words:
        slug = words[0][:max_len]
    return slug or "note"


def check_note(note: str) -> str:
    note = normalize_note(note)
    if len(note) < NOTE_MIN:
        raise LookoutError(f"a note is {NOTE_MIN} to {NOTE_MAX} characters; this one has {len(note)}")
    if len(note) > NOTE_MAX:
        raise LookoutError(
            f"a note is {NOTE_MIN} to {NOTE_MAX} characters; this one has {len(note)} "
            "(put the rest in --details)"
        )
    return note


def secret_error(finding: secrets.Finding, what: str = "this memory") -> LookoutError:
    return LookoutError(
        f"{what} looks like it holds {finding.title} (rule {finding.rule}: {finding.preview}); "
        "save where the secret lives instead, such as the name of the variable that holds it "
        f"(--allow-secret {finding.rule} to save it anyway)"
    )


def masked(text: str, width: int = 50) -> str:
    """``text`` as a message may name a refused memory: every secret in it shown as its masked
    preview, the way ``memory save`` shows it, and at most ``width`` characters."""
    for finding in reversed(secrets.scan(text)):
        text = text[: finding.start] + finding.preview + text[finding.end :]
    return text if len(text) <= width else text[: width - 1] + "…"


def check_secrets(text: str, allow: Iterable[str] = (), what: str = "this memory") -> None:
    finding = secrets.first(text, allow)
    if finding is not None:
        raise secret_error(finding, what)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --- one memory ---------------------------------------------------------------------------------
@dataclass(slots=True)
class Memory:
    id: str  # the file's stem; also its topic when lookout named it
    note: str  # the one line in the list
    details: str = ""  # everything after the note, kept in the file only
    author: str = "you"  # you | agent | learned
    by: str | None = None  # the agent's name, when an agent wrote it
    source: str | None = None  # the chat it came from
    created: str = ""
    updated: str = ""
    verified: str = ""
    topic: str = ""
    edited_by: str | None = None  # "lookout", "agent", "hand": who last rewrote it
    learned_from: str | None = None  # the prompt key `memory learn` saved it from
    extra: dict[str, str] = field(default_factory=dict)  # unknown front matter, kept as is
    # forgotten entries only
    forgotten: str | None = None
    forgotten_by: str | None = None
    reason: str | None = None
    entry: str | None = None  # the Forgotten file's stem

    @property
    def updated_at(self) -> dt.datetime:
        return parse_time(self.updated) or parse_time(self.created) or dt.datetime.min.replace(tzinfo=dt.timezone.utc)

    @property
    def sort_key(self) -> tuple:
        return (self.updated_at, parse_time(self.created) or self.updated_at, self.id)

    @property
    def key(self) -> str:
        return note_key(self.note)

    @property
    def author_label(self) -> str:
        label = AUTHOR_LABELS.get(self.author, self.author)
        if self.author == "agent" and self.by:
            label = f"by {self.by}"
        return label

    def text(self) -> str:
        """Note and details: what the secret gate and the size limits look at."""
        return self.note + ("\n\n" + self.details if self.details else "")

    def content_hash(self) -> str:
        """The note and details only (dates and authors aside): same hash, same memory."""
        return sha256_text(normalize_note(self.note) + "\n\n" + self.details.strip())

    def list_line(self) -> str:
        line = f"- {self.note}"
        if self.details.strip():
            line += f" ([details]({self.id}.md))"
        return line

    def to_markdown(self) -> str:
        lines = ["---"]
        values = {
            "topic": self.topic or self.id,
            "author": self.author,
            "by": self.by,
            "source": self.source,
            "created": self.created,
            "updated": self.updated,
            "verified": self.verified,
            "edited_by": self.edited_by,
            "learned_from": self.learned_from,
        }
        for key in _FIELD_ORDER:
            if values.get(key):
                lines.append(f"{key}: {_fm_value(values[key])}")
        for key, value in self.extra.items():
            if key not in _FIELD_ORDER and key not in _FORGOTTEN_FIELDS:
                lines.append(f"{key}: {_fm_value(value)}")
        for key in _FORGOTTEN_FIELDS:
            value = getattr(self, key)
            if value:
                lines.append(f"{key}: {_fm_value(value)}")
        lines.append("---")
        body = self.note + "\n"
        if self.details.strip():
            body += "\n" + self.details.strip("\n") + "\n"
        return "\n".join(lines) + "\n" + body


def _fm_value(value: object) -> str:
    """A front matter value on one line, quoted (JSON style, valid YAML) when it needs it."""
    text = " ".join(str(value).split())
    if (
        not text
        or text[0] in "\"'[]{}>|*&!%@`#,?:-"
        or ": " in text
        or " #" in text
        or text.endswith(":")
        or text.lower() in ("true", "false", "null", "yes", "no", "~")
    ):
        return json.dumps(text, ensure_ascii=False)
    return text


def _fm_parse(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == '"' and value[-1] == '"':
        try:
            return str(json.loads(value))
        except ValueError:
            return value[1:-1]
    if len(value) >= 2 and value[0] == "'" and value[-1] == "'":
        return value[1:-1].replace("''", "'")
    return value


def split_front_matter(text: str) -> tuple[dict[str, str], str]:
    """Front matter (simple ``key: value`` lines; nested YAML is kept flat as text) and body."""
    text = text.lstrip("\ufeff")
    if not text.startswith("---"):
        return {}, text
    lines = text.split("\n")
    if lines[0].strip() != "---":
        return {}, text
    meta: dict[str, str] = {}
    last_key = None
    for i, line in enumerate(lines[1:], start=1):
        if line.strip() in ("---", "..."):
            return meta, "\n".join(lines[i + 1 :])
        m = re.match(r"^([A-Za-z_][\w\-]*)\s*:\s?(.*)$", line)
        if m:
            last_key = m.group(1)
            meta[last_key] = _fm_parse(m.group(2))
        elif last_key and line.startswith((" ", "\t")) and line.strip():
            meta[last_key] = (meta[last_key] + " " + line.strip()).strip()
    return {}, text  # no closing fence: not front matter


def split_body(body: str) -> tuple[str, str]:
    """The note (the first paragraph, as one line) and the details (the rest)."""
    body = body.strip("\n")
    lines = body.split("\n")
    i = 0
    while i < len(lines) and not lines[i].strip():
        i += 1
    start = i
    while i < len(lines) and lines[i].strip():
        i += 1
    note = normalize_note(" ".join(lines[start:i]))
    details = "\n".join(lines[i:]).strip("\n")
    return note, details


def parse_memory(text: str, id: str) -> Memory:
    meta, body = split_front_matter(text)
    note, details = split_body(body)
    if not note and meta.get("description"):  # a foreign memory file (Claude Code style)
        note = normalize_note(meta["description"])
    mem = Memory(id=id, note=note, details=details)
    mem.topic = meta.pop("topic", "") or id
    author = meta.pop("author", "you") or "you"
    mem.author = author if author in AUTHORS else "you"
    for key in ("by", "source", "edited_by", "learned_from", "forgotten", "forgotten_by", "reason"):
        value = meta.pop(key, None)
        if value:
            setattr(mem, key, value)
    for key in ("created", "updated", "verified"):
        value = meta.pop(key, None)
        when = parse_time(value)
        if when is not None:
            setattr(mem, key, format_time(when))
    mem.extra = meta
    return mem


# --- the list ----------------------------------------------------------------------------------
_LINK_RE = re.compile(r"\]\(\s*<?([^()<>\s]+?\.md)>?\s*\)")
_DETAILS_SUFFIX_RE = re.compile(r"\s*\(\[details\]\([^()\s]+\.md\)\)\s*$")


@dataclass(slots=True)
class ListEntry:
    text: str  # the line's note, links to details removed
    link: str | None  # the memory file's stem the line links to, if any
    raw: str


def parse_list(text: str) -> list[ListEntry]:
    """The entries of a ``MEMORY.md``: lines starting with ``-`` or ``*`` (lookout's own lines
    and lines in the ``- [Title](file.md) — hook`` style other agents write)."""
    entries = []
    for raw in text.splitlines():
        m = re.match(r"^\s{0,3}[-*+]\s+(.*\S)\s*$", raw)
        if not m:
            continue
        body = m.group(1)
        link_m = _LINK_RE.search(body)
        link = None
        if link_m and "/" not in link_m.group(1) and "\\" not in link_m.group(1):
            link = link_m.group(1)[:-3]
        if _DETAILS_SUFFIX_RE.search(body):
            note = _DETAILS_SUFFIX_RE.sub("", body)
        elif link_m:
            # "[Title](file.md) — hook" → "Title — hook"
            note = re.sub(r"\[([^\]]*)\]\(\s*<?[^()<>\s]+?\.md>?\s*\)", r"\1", body)
        else:
            note = body
        entries.append(ListEntry(normalize_note(note), link, raw))
    return entries


def newest_first(memories: Iterable[Memory]) -> list[Memory]:
    return sorted(memories, key=lambda m: m.sort_key, reverse=True)


def render_list(title: str, memories: Iterable[Memory]) -> str:
    lines = [f"# {title}", ""]
    lines += [m.list_line() for m in newest_first(memories)]
    return "\n".join(lines) + "\n"


def line_bytes(mem: Memory) -> int:
    return len(mem.list_line().encode("utf-8")) + 1


@dataclass(slots=True)
class Usage:
    memories: int
    list_bytes: int
    total_bytes: int

    def problems(self) -> list[str]:
        out = []
        if self.memories > MAX_MEMORIES:
            out.append(f"it holds at most {MAX_MEMORIES} memories")
        if self.list_bytes > MAX_LIST_BYTES:
            out.append(f"its list would be {self.list_bytes:,} bytes (at most {MAX_LIST_BYTES:,})")
        if self.total_bytes > MAX_SCOPE_BYTES:
            out.append(f"it would be {self.total_bytes:,} bytes with details (at most {MAX_SCOPE_BYTES:,})")
        return out

    def describe(self) -> str:
        return (
            f"{self.memories} of {MAX_MEMORIES} memories, {self.list_bytes / 1024:.1f} of "
            f"{MAX_LIST_BYTES // 1024} KB of list, {self.total_bytes / 1024:.1f} of "
            f"{MAX_SCOPE_BYTES // 1024} KB with details"
        )


def usage_of(memories: Iterable[Memory]) -> Usage:
    mems = list(memories)
    list_bytes = sum(line_bytes(m) for m in mems)
    details = sum(len(m.details.encode("utf-8")) for m in mems if m.details.strip())
    return Usage(len(mems), list_bytes, list_bytes + details)


def sent_split(memories: Iterable[Memory], budget: int = SEND_BYTES) -> tuple[list[Memory], list[Memory]]:
    """The memories a chat is sent (newest first, while the list fits ``budget`` bytes) and
    the ones past that, which are not sent."""
    sent: list[Memory] = []
    rest: list[Memory] = []
    used = 0
    for mem in newest_first(memories):
        size = line_bytes(mem)
        if not rest and used + size <= budget:
            sent.append(mem)
            used += size
        else:
            rest.append(mem)
    return sent, rest


# --- locking ------------------------------------------------------------------------------------
@contextlib.contextmanager
def file_lock(path: Path, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """An exclusive lock on ``path`` (created if missing), waited for up to ``timeout``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if not lock.lock(fd, timeout):
            raise LookoutError(f"{path.parent} is locked by another lookout process (waited {timeout:.0f} s)")
        yield
        lock.unlock(fd)
    finally:
        os.close(fd)  # closing releases the lock too (after an error)


# --- a scope ------------------------------------------------------------------------------------
@dataclass
class Scope:
    kind: str  # everywhere | project | agent | folder (an imported or shared folder)
    name: str  # display name: "everywhere", the project's name, the agent's name
    path: Path

    @property
    def label(self) -> str:
        if self.kind == "everywhere":
            return "everywhere"
        return f"{self.kind} {self.name}"

    @property
    def title(self) -> str:
        if self.kind == "everywhere":
            return "Memory: everywhere"
        return f"Memory: {self.kind} {self.name}"

    @property
    def list_path(self) -> Path:
        return self.path / LIST_FILE

    def exists(self) -> bool:
        return self.path.is_dir()

    # reading (no lock needed: every file is replaced atomically)
    def memory_files(self) -> list[Path]:
        if not self.path.is_dir():
            return []
        return sorted(
            p
            for p in self.path.iterdir()
            if p.suffix == ".md" and p.name != LIST_FILE and not p.name.startswith(".") and p.is_file()
        )

    def read_memories(self) -> dict[str, Memory]:
        out: dict[str, Memory] = {}
        for path in self.memory_files():
            try:
                text = path.read_bytes().decode("utf-8", errors="replace")
            except FileNotFoundError:
                continue  # forgotten meanwhile
            mem = parse_memory(text, path.stem)
            if not mem.note:
                mem.note = normalize_note(path.stem.replace("-", " "))
            out[mem.id] = mem
        return out

    def read_list(self) -> str | None:
        try:
            return self.list_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return None

    def memories(self) -> list[Memory]:
        """Every memory, newest first, with lines added to MEMORY.md by hand included."""
        mems = self.read_memories()
        list_text = self.read_list()
        known = index_keys(self).values() if list_text else ()
        for mem in _hand_added(self, mems, list_text, known):
            mems[mem.id] = mem
        return newest_first(mems.values())

    def get(self, ref: str) -> Memory:
        mems = {m.id: m for m in self.memories()}
        return mems[resolve_ref(ref, mems, self.label)]

    def forgotten(self, include_expired: bool = False) -> list[Memory]:
        folder = self.path / FORGOTTEN_DIR
        if not folder.is_dir():
            return []
        cutoff = now() - dt.timedelta(days=FORGOTTEN_DAYS)
        out = []
        for path in folder.glob("*.md"):
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except FileNotFoundError:
                continue
            mem = parse_memory(text, path.stem.split("~", 1)[0])
            mem.entry = path.stem
            when = parse_time(mem.forgotten) or dt.datetime.fromtimestamp(path.stat().st_mtime, dt.timezone.utc)
            mem.forgotten = format_time(when)
            if include_expired or when >= cutoff:
                out.append(mem)
        return sorted(out, key=lambda m: (parse_time(m.forgotten), m.entry or ""), reverse=True)

    def usage(self) -> Usage:
        return usage_of(self.memories())

    def transaction(self, dry_run: bool = False, actor: str = "you") -> Transaction:
        return Transaction(self, dry_run=dry_run, actor=actor)


def resolve_ref(ref: str, mems: dict[str, Memory], where: str) -> str:
    """A memory named by its id, a unique id prefix, or its list position (1 = newest)."""
    ref = ref.strip()
    if ref.endswith(".md"):
        ref = ref[:-3]
    if ref in mems:
        return ref
    if ref.isdigit():
        ordered = newest_first(mems.values())
        n = int(ref)
        if 1 <= n <= len(ordered):
            return ordered[n - 1].id
    matches = [i for i in mems if i.startswith(ref)] if ref else []
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise LookoutError(f"{ref!r} matches {len(matches)} memories in {where}: {', '.join(sorted(matches)[:5])}")
    raise LookoutError(f"no memory {ref!r} in {where} (see lookout memory list)")


def _hand_added(scope: Scope, mems: dict[str, Memory], list_text: str | None,
                known: Iterable[str] = ()) -> list[Memory]:
    """Lines of MEMORY.md that name no memory: memories added by hand. ``known`` holds note keys
    the list may still show for existing memories (their text before a hand edit of the file)."""
    if not list_text:
        return []
    keys = {m.key for m in mems.values()} | set(known)
    taken = set(mems)
    out = []
    when = format_time(dt.datetime.fromtimestamp(scope.list_path.stat().st_mtime, dt.timezone.utc))
    for entry in parse_list(list_text):
        if entry.link and entry.link in mems:
            continue
        if not entry.text or note_key(entry.text) in keys:
            continue
        keys.add(note_key(entry.text))
        mem_id = unique_id(slugify(entry.text), taken)
        taken.add(mem_id)
        out.append(Memory(id=mem_id, note=entry.text, author="you", created=when, updated=when,
                          verified=when, topic=mem_id, edited_by="hand"))
    return out


def index_keys(scope: Scope) -> dict[str, str]:
    """The note key each memory had when lookout last wrote the scope."""
    try:
        data = json.loads((scope.path / INDEX_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    out = {}
    for mem_id, entry in (data.get("files") or {}).items():
        if isinstance(entry, dict) and entry.get("text"):
            out[mem_id] = parse_memory(entry["text"], mem_id).key
    return out


def unique_id(base: str, taken: Iterable[str]) -> str:
    taken = set(taken)
    base = base or "note"
    if base in RESERVED_IDS:
        base = f"{base}-note"
    if base not in taken:
        return base
    n = 2
    while f"{base}-{n}" in taken:
        n += 1
    return f"{base}-{n}"


# --- changing a scope ---------------------------------------------------------------------------
class Transaction:
    """Read a scope under its lock, change it in memory, write what changed atomically.

    Use as a context manager; leaving the block without an error commits (or, in a dry run,
    only works out what would change). ``log`` holds one line per change, for the report.
    """

    def __init__(self, scope: Scope, dry_run: bool = False, actor: str = "you") -> None:
        self.scope = scope
        self.dry_run = dry_run
        self.actor = actor
        self.log: list[str] = []
        self.notices: list[str] = []  # things found on the way (hand edits, secrets taken out)
        self.forgotten_new: list[Memory] = []
        self.purged: list[str] = []  # Forgotten entries to delete
        self._lock_cm: contextlib.AbstractContextManager | None = None
        self._stamp: dt.datetime | None = None
        self.memories: dict[str, Memory] = {}
        self.on_disk: dict[str, str] = {}
        self.changed = False

    # context manager ------------------------------------------------------------------------
    def __enter__(self) -> Transaction:
        if not self.dry_run or self.scope.exists():
            if self.dry_run:
                self._lock_cm = contextlib.nullcontext()
            else:
                self._lock_cm = file_lock(self.scope.path / LOCK_FILE)
            self._lock_cm.__enter__()
        try:
            if self.scope.kind == "project" and not self.dry_run and not (self.scope.path / META_FILE).exists():
                raise LookoutError(
                    f"{self.scope.path} was merged into another copy of this project's memory meanwhile; "
                    "run the command again"
                )
            self._load()
        except BaseException:
            if self._lock_cm is not None:
                self._lock_cm.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                self.commit()
        finally:
            if self._lock_cm is not None:
                self._lock_cm.__exit__(exc_type, exc, tb)

    # loading and reconciling hand edits --------------------------------------------------------
    def _load(self) -> None:
        scope = self.scope
        self.on_disk = {}
        for path in scope.memory_files():
            try:
                self.on_disk[path.stem] = path.read_bytes().decode("utf-8", errors="replace")
            except FileNotFoundError:
                pass
        self.memories = {}
        for mem_id, text in self.on_disk.items():
            mem = parse_memory(text, mem_id)
            if not mem.note:
                mem.note = normalize_note(mem_id.replace("-", " "))
            self.memories[mem_id] = mem
        self.index = self._read_index()
        self._reconcile()

    def _read_index(self) -> dict:
        try:
            data = json.loads((self.scope.path / INDEX_FILE).read_text(encoding="utf-8"))
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def _reconcile(self) -> None:
        """Notice what was changed by hand since lookout last wrote this scope."""
        files = self.index.get("files") or {}
        stamp = None
        # memory files edited or deleted by hand
        for mem_id, entry in files.items():
            if not isinstance(entry, dict):
                continue
            old_text = entry.get("text")
            if mem_id in self.on_disk:
                if entry.get("sha256") == sha256_text(self.on_disk[mem_id]) or not old_text:
                    continue
                old = parse_memory(old_text, mem_id)
                mem = self.memories[mem_id]
                if old.content_hash() == mem.content_hash() and old.author == mem.author:
                    continue  # only the front matter was touched
                stamp = stamp or self.stamp()
                mem.updated = mem.verified = format_time(stamp)
                mem.edited_by = "hand"
                self._forget_copy(old, by="hand", reason="replaced by a hand edit of its file")
                self.notices.append(f"{mem_id}: edited by hand; the text it replaced is in Forgotten")
                self._take_out_secrets(mem)
            elif old_text and mem_id not in self.memories:
                old = parse_memory(old_text, mem_id)
                self._forget_copy(old, by="hand", reason="its file was deleted by hand")
                self.notices.append(f"{mem_id}: its file was deleted by hand; kept in Forgotten")
        # memory files added by hand
        for mem_id, mem in self.memories.items():
            if mem_id not in files and self.index:
                if not mem.created:
                    stamp = stamp or self.stamp()
                    mem.created = mem.updated = mem.verified = format_time(stamp)
                    mem.edited_by = mem.edited_by or "hand"
                self._take_out_secrets(mem)
            elif not mem.created:
                mem.created = mem.updated or mem.verified or format_time(self.stamp())
            if not mem.updated:
                mem.updated = mem.created
            if not mem.verified:
                mem.verified = mem.updated
        # the list edited by hand
        list_text = self.scope.read_list()
        if list_text is None:
            return
        list_hash = sha256_text(list_text)
        if self.index.get("list_sha256") == list_hash:
            return
        entries = parse_list(list_text)
        linked = {e.link for e in entries if e.link}
        texts = {note_key(e.text) for e in entries}
        old_keys = {mid: parse_memory(e["text"], mid).key for mid, e in files.items()
                    if isinstance(e, dict) and e.get("text")}
        if self.index.get("list_sha256"):
            # lines removed by hand forget their memory (only memories that were listed before)
            for mem_id in list(self.memories):
                mem = self.memories[mem_id]
                listed = mem_id in linked or mem.key in texts or old_keys.get(mem_id) in texts
                if mem_id in files and not listed:
                    self.forget(mem_id, by="you", reason="its line was removed from MEMORY.md by hand", quiet=True)
                    self.notices.append(f"{mem_id}: its line was removed from MEMORY.md by hand; forgotten")
            # a line whose text changed by hand (it still links its file) edits the note
            for entry in entries:
                if entry.link in self.memories:
                    mem = self.memories[entry.link]
                    if entry.text and note_key(entry.text) not in (mem.key, old_keys.get(mem.id)) \
                            and NOTE_MIN <= len(entry.text):
                        old = replace(mem)
                        mem.note = entry.text[:NOTE_MAX]
                        stamp = stamp or self.stamp()
                        mem.updated = mem.verified = format_time(stamp)
                        mem.edited_by = "hand"
                        self._forget_copy(old, by="hand", reason="replaced by a hand edit of MEMORY.md")
                        self.notices.append(f"{mem.id}: note edited by hand in MEMORY.md")
        for mem in _hand_added(self.scope, self.memories, list_text, old_keys.values()):
            finding = secrets.first(mem.text())
            if finding is not None:
                self.notices.append(f"a line added to MEMORY.md by hand holds {finding.describe()}; not kept")
                continue
            self.memories[mem.id] = mem
            self.notices.append(f"{mem.id}: added by hand to MEMORY.md; now a memory")

    def _take_out_secrets(self, mem: Memory) -> None:
        note, found = secrets.redact(mem.note)
        details, found2 = secrets.redact(mem.details)
        if found or found2:
            mem.note, mem.details = normalize_note(note), details
            for f in found + found2:
                self.notices.append(f"{mem.id}: {f.describe()} written into it was taken back out")

    # clock ---------------------------------------------------------------------------------
    def stamp(self) -> dt.datetime:
        """Now, but always later than every date in the scope, so 'newest first' keeps the
        order things happened in even within one second."""
        if self._stamp is None:
            current = now()
            latest = max((m.updated_at for m in self.memories.values()), default=None)
            if latest is not None and latest >= current and latest - current < dt.timedelta(seconds=5):
                current = latest + dt.timedelta(milliseconds=1)
            self._stamp = current
        else:
            self._stamp = self._stamp + dt.timedelta(milliseconds=1)
        return self._stamp

    # queries -------------------------------------------------------------------------------
    def find_note(self, note: str) -> Memory | None:
        key = note_key(note)
        for mem in self.memories.values():
            if mem.key == key:
                return mem
        return None

    def resolve(self, ref: str) -> str:
        return resolve_ref(ref, self.memories, self.scope.label)

    def usage(self) -> Usage:
        return usage_of(self.memories.values())

    def check_room(self, before: Usage | None = None, adding: bool = True) -> None:
        """Refuse a change that leaves the scope over a limit (unless it was over already and
        the change does not make it worse)."""
        after = self.usage()
        problems = after.problems()
        if not problems:
            return
        if before is not None and not adding and all(
            getattr(after, f) <= getattr(before, f) for f in ("memories", "list_bytes", "total_bytes")
        ):
            return
        raise LookoutError(
            f"{self.scope.label} memory is full: {', and '.join(problems)}; "
            "forget some memories first (lookout memory forget, or lookout memory tidy)"
        )

    # changes -------------------------------------------------------------------------------
    def add(self, mem: Memory, check: bool = True) -> Memory:
        before = self.usage()
        if not mem.id:
            mem.id = unique_id(slugify(mem.topic or mem.note), self.memories)
        if not mem.topic:
            mem.topic = mem.id
        stamp = format_time(self.stamp())
        mem.created = mem.created or stamp
        mem.updated = mem.updated or stamp
        mem.verified = mem.verified or mem.updated
        self.memories[mem.id] = mem
        if check:
            try:
                self.check_room(before, adding=True)
            except LookoutError:
                del self.memories[mem.id]
                raise
        return mem

    def forget(self, mem_id: str, by: str = "you", reason: str = "forgotten", quiet: bool = False) -> Memory:
        mem = self.memories.pop(mem_id)
        self._forget_copy(mem, by=by, reason=reason)
        if not quiet:
            self.log.append(f"forget {self.scope.label}: {mem_id} ({reason})")
        return mem

    def _forget_copy(self, mem: Memory, by: str, reason: str) -> None:
        copy = replace(mem, extra=dict(mem.extra))
        copy.forgotten = format_time(self.stamp())
        copy.forgotten_by = by
        copy.reason = reason
        self.forgotten_new.append(copy)

    def replace_memory(self, mem_id: str, new: Memory, by: str, reason: str) -> None:
        """Put a new version in place of ``mem_id``; the old one goes to Forgotten."""
        old = self.memories[mem_id]
        self._forget_copy(old, by=by, reason=reason)
        self.memories[mem_id] = new

    def keep_forgotten(self, mem: Memory) -> None:
        """Carry a Forgotten entry over as it is (when copies of a scope merge)."""
        self.forgotten_new.append(replace(mem, extra=dict(mem.extra)))

    def absorb(self, incoming: Memory, origin: str, enforce_limits: bool = False) -> str:
        """Take in a memory from another copy of this scope (a merge, an import, a sync).

        Each memory once: the same note is the same memory. Of two versions of one topic the
        newer stays and the older goes to Forgotten. Returns what happened: ``same``, ``added``,
        ``newer`` (it replaced an older version here) or ``older`` (it went to Forgotten).
        With ``enforce_limits``, a memory that does not fit raises LookoutError.
        """
        incoming = replace(incoming, extra=dict(incoming.extra), entry=None,
                           forgotten=None, forgotten_by=None, reason=None)
        incoming.topic = incoming.topic or incoming.id
        same = self.find_note(incoming.note)
        if same is None:
            same = next((m for m in self.memories.values() if (m.topic or m.id) == incoming.topic), None)
            if same is not None and same.key != incoming.key:
                return self._two_versions(same, incoming, origin, enforce_limits)
            same = None
        if same is not None:
            if incoming.details.strip() != same.details.strip() and incoming.details.strip():
                return self._two_versions(same, incoming, origin, enforce_limits)
            # one memory: keep the earliest creation and the latest check
            created = min(filter(None, (same.created, incoming.created)), key=lambda t: parse_time(t), default="")
            verified = max(filter(None, (same.verified, incoming.verified)), key=lambda t: parse_time(t), default="")
            if created and created != same.created:
                same.created = created
            if verified and verified != same.verified:
                same.verified = verified
            return "same"
        before = self.usage()
        if incoming.id in self.memories or incoming.id in RESERVED_IDS or not re.fullmatch(r"[a-z0-9][a-z0-9\-]*", incoming.id):
            incoming.id = unique_id(slugify(incoming.topic or incoming.note), self.memories)
        self.memories[incoming.id] = incoming
        if enforce_limits:
            try:
                self.check_room(before)
            except LookoutError:
                del self.memories[incoming.id]
                raise
        return "added"

    def _two_versions(self, here: Memory, incoming: Memory, origin: str, enforce_limits: bool) -> str:
        if incoming.sort_key > here.sort_key:
            before = self.usage()
            incoming.id = here.id
            self.replace_memory(here.id, incoming, by="lookout", reason=f"an older version; the newer came from {origin}")
            if enforce_limits:
                try:
                    self.check_room(before, adding=False)
                except LookoutError:
                    self.memories[here.id] = here
                    self.forgotten_new.pop()
                    raise
            return "newer"
        copy = replace(incoming, id=here.id)
        self._forget_copy(copy, by="lookout", reason=f"an older version from {origin}; the newer one stays")
        return "older"

    def purge_expired(self) -> None:
        for mem in self.scope.forgotten(include_expired=True):
            when = parse_time(mem.forgotten)
            if when is not None and when < now() - dt.timedelta(days=FORGOTTEN_DAYS):
                self.purged.append(mem.entry or "")

    # writing --------------------------------------------------------------------------------
    def planned_files(self) -> dict[str, str]:
        return {mem_id: mem.to_markdown() for mem_id, mem in self.memories.items()}

    def commit(self) -> None:
        files = self.planned_files()
        list_text = render_list(self.scope.title, self.memories.values())
        writes = {mid: text for mid, text in files.items() if self.on_disk.get(mid) != text}
        deletes = [mid for mid in self.on_disk if mid not in files]
        list_changed = self.scope.read_list() != list_text
        self.changed = bool(writes or deletes or self.forgotten_new or list_changed)
        if not self.dry_run:
            self.purge_expired()
        if self.dry_run:
            return
        if not (self.changed or self.purged) and self.index.get("list_sha256") == sha256_text(list_text):
            return
        path = self.scope.path
        path.mkdir(parents=True, exist_ok=True)
        # Forgotten copies first: a crash part way through loses nothing.
        if self.forgotten_new:
            folder = path / FORGOTTEN_DIR
            folder.mkdir(exist_ok=True)
            for mem in self.forgotten_new:
                atomic_write(folder / (_forgotten_name(mem, folder) + ".md"), mem.to_markdown().encode("utf-8"))
        for mem_id, text in writes.items():
            atomic_write(path / f"{mem_id}.md", text.encode("utf-8"))
        for mem_id in deletes:
            with contextlib.suppress(FileNotFoundError):
                (path / f"{mem_id}.md").unlink()
        if list_changed:
            atomic_write(self.scope.list_path, list_text.encode("utf-8"))
        for entry in self.purged:
            with contextlib.suppress(FileNotFoundError):
                (path / FORGOTTEN_DIR / f"{entry}.md").unlink()
        index = {
            "version": 1,
            "list_sha256": sha256_text(list_text),
            "files": {mid: {"sha256": sha256_text(text), "text": text} for mid, text in files.items()},
        }
        atomic_write(path / INDEX_FILE, json.dumps(index, ensure_ascii=False, sort_keys=True).encode("utf-8"))


def _forgotten_name(mem: Memory, folder: Path) -> str:
    when = parse_time(mem.forgotten) or now()
    base = f"{mem.id}~{when.strftime('%Y%m%dT%H%M%S')}{when.microsecond // 1000:03d}"
    name, n = base, 2
    while (folder / f"{name}.md").exists():
        name = f"{base}-{n}"
        n += 1
    mem.entry = name
    return name
