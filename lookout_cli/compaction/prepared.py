"""Summaries prepared while a chat was idle, kept until the chat is compacted or moves on.

A prepared summary belongs to one chat at one moment: it is keyed by the chat (its session id,
else its file) and remembers the hash of the chat's last record (the last line the model sees;
metadata lines an agent appends, such as a session title, do not count). When the chat has moved
on (a new last record), the prepared summary no longer applies and is dropped. The note itself
lives in the saved-output store; the index entry lives under the data folder.

The keep-warm reads made for a chat (``prepare-idle --on-ping``) are kept beside it the same
way, so the next run knows the cache was refreshed and how many reads were already spent.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
from pathlib import Path

import orjson

from lookout_cli.core.dataclass import dataclass
from lookout_cli.core.fsutil import atomic_write
from lookout_cli.core.paths import data_dir
from lookout_cli.core.saved import SavedStore
from lookout_cli.formats import Transcript


@dataclass(slots=True)
class Prepared:
    summary: str
    last_record: str  # sha256 of the chat's last record when the summary was written
    created: str
    expires: str | None
    keep_from: int | None  # line number of the first kept record, for the report
    path: Path
    summary_path: Path | None = None  # the note's file in the saved-output store


def _folder() -> Path:
    return data_dir() / "prepared"


def _utf8(text: str) -> bytes:
    """A transcript's text as bytes: JSON may hold lone surrogates, which strict UTF-8 refuses."""
    return text.encode("utf-8", "surrogatepass")


def chat_key(transcript: Transcript) -> str:
    view = transcript.view()
    identity = view.session_id or transcript.source
    if identity is None:
        first = next((r.raw for r in transcript.lines if r.raw and not r.blank), b"")
        identity = hashlib.sha256(first).hexdigest()
    return hashlib.sha256(_utf8(str(identity))).hexdigest()[:32]


def last_record_hash(transcript: Transcript) -> str:
    """sha256 of the last record the model sees (else of the last record at all), without its
    line ending."""
    last = None
    if transcript.adapter is not None:
        visible = {id(item.record) for item in transcript.view().items}
        last = next((r for r in reversed(transcript.lines) if id(r) in visible), None)
    if last is None:
        last = next((r for r in reversed(transcript.lines) if r.edited or (r.raw is not None and not r.blank)),
                    None)
    return hashlib.sha256(last.to_bytes().rstrip(b"\r\n") if last else b"").hexdigest()


def summary_path(store: SavedStore, summary: str) -> Path:
    """Where ``save`` keeps the note in the saved-output store."""
    return store.path_for(hashlib.sha256(_utf8(summary)).hexdigest(), ".txt").absolute()


def save(store: SavedStore, transcript: Transcript, summary: str, expires: str | None,
         keep_from: int | None = None, now: dt.datetime | None = None) -> Path:
    """Keep a prepared summary for this chat as it stands now (nothing written on dry runs)."""
    saved = store.put(_utf8(summary), "text", purpose="prepared-summary")
    path = _folder() / f"{chat_key(transcript)}.json"
    entry = {
        "summary_sha256": saved.sha256,
        "summary_path": str(saved.path),
        "last_record": last_record_hash(transcript),
        "created": (now or dt.datetime.now(dt.timezone.utc)).astimezone(dt.timezone.utc)
        .isoformat(timespec="seconds").replace("+00:00", "Z"),
        "expires": expires,
        "keep_from": keep_from,
        "transcript": transcript.source,
    }
    if not store.dry_run:
        atomic_write(path, orjson.dumps(entry, option=orjson.OPT_INDENT_2) + b"\n")
    return path


def find(store: SavedStore, transcript: Transcript) -> Prepared | None:
    """The prepared summary for this chat if it was written at its current last record."""
    path = _folder() / f"{chat_key(transcript)}.json"
    try:
        entry = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if entry.get("last_record") != last_record_hash(transcript):
        return None
    data = store.get(entry.get("summary_sha256", ""))
    if data is None:
        return None
    where = entry.get("summary_path")
    return Prepared(data.decode("utf-8", "surrogatepass"), entry["last_record"], entry.get("created", ""),
                    entry.get("expires"), entry.get("keep_from"), path, Path(where) if where else None)


def is_stale(transcript: Transcript) -> bool:
    """True when a summary was prepared for this chat but the chat has moved on since."""
    path = _folder() / f"{chat_key(transcript)}.json"
    try:
        entry = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return False
    return entry.get("last_record") != last_record_hash(transcript)


def drop(transcript: Transcript, dry_run: bool = False) -> bool:
    """Forget the chat's prepared summary (and the keep-warm reads recorded with it)."""
    path = _folder() / f"{chat_key(transcript)}.json"
    if not path.exists():
        return False
    if not dry_run:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    return True


# --- keep-warm reads ------------------------------------------------------------------------

def _reads_file(transcript: Transcript) -> Path:
    return _folder() / f"{chat_key(transcript)}.reads.json"


def reads(transcript: Transcript) -> list[dt.datetime]:
    """The keep-warm reads made for this chat since its current last record."""
    try:
        entry = orjson.loads(_reads_file(transcript).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return []
    if not isinstance(entry, dict) or entry.get("last_record") != last_record_hash(transcript):
        return []
    found = []
    for text in entry.get("reads") or []:
        try:
            when = dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
        except ValueError:
            continue
        found.append(when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc))
    return sorted(found)


def record_read(transcript: Transcript, when: dt.datetime, dry_run: bool = False) -> Path:
    """Remember a keep-warm read made at ``when`` (reads recorded at an older last record go)."""
    path = _reads_file(transcript)
    made = reads(transcript) + [when]
    entry = {"last_record": last_record_hash(transcript), "transcript": transcript.source,
             "reads": [t.astimezone(dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
                       for t in sorted(made)]}
    if not dry_run:
        atomic_write(path, orjson.dumps(entry, option=orjson.OPT_INDENT_2) + b"\n")
    return path


def forget_reads(transcript: Transcript, dry_run: bool = False) -> bool:
    """Forget the reads recorded at an older last record (the chat moved on)."""
    path = _reads_file(transcript)
    try:
        entry = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return False
    if isinstance(entry, dict) and entry.get("last_record") == last_record_hash(transcript):
        return False
    if not dry_run:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    return True
