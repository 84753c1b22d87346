"""Summaries prepared while a chat was idle, kept until the chat is compacted or moves on.

A prepared summary belongs to one chat at one moment: it is keyed by the chat (its session id,
else its file) and remembers the hash of the chat's last record. When the chat has moved on
(a new last record), the prepared summary no longer applies and is dropped. The note itself
lives in the saved-output store; the index entry lives under the data folder.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
from dataclasses import dataclass
from pathlib import Path

import orjson

from lookout_cli.formats import Transcript
from lookout_cli.fsutil import atomic_write
from lookout_cli.paths import data_dir
from lookout_cli.saved import SavedStore


@dataclass(slots=True)
class Prepared:
    summary: str
    last_record: str  # sha256 of the chat's last record when the summary was written
    created: str
    expires: str | None
    keep_from: int | None  # line number of the first kept record, for the report
    path: Path


def _folder() -> Path:
    return data_dir() / "prepared"


def chat_key(transcript: Transcript) -> str:
    view = transcript.view()
    identity = view.session_id or transcript.source
    if identity is None:
        first = next((r.raw for r in transcript.records if r.raw and not r.blank), b"")
        identity = hashlib.sha256(first).hexdigest()
    return hashlib.sha256(str(identity).encode()).hexdigest()[:32]


def last_record_hash(transcript: Transcript) -> str:
    last = next((r for r in reversed(transcript.records) if r.raw is not None and not r.blank), None)
    return hashlib.sha256(last.raw if last else b"").hexdigest()


def save(store: SavedStore, transcript: Transcript, summary: str, expires: str | None,
         keep_from: int | None = None) -> Path:
    """Keep a prepared summary for this chat as it stands now (nothing written on dry runs)."""
    saved = store.put(summary.encode(), "text", kind="prepared-summary")
    path = _folder() / f"{chat_key(transcript)}.json"
    entry = {
        "summary_sha256": saved.sha256,
        "last_record": last_record_hash(transcript),
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
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
    return Prepared(data.decode(), entry["last_record"], entry.get("created", ""), entry.get("expires"),
                    entry.get("keep_from"), path)


def is_stale(transcript: Transcript) -> bool:
    """True when a summary was prepared for this chat but the chat has moved on since."""
    path = _folder() / f"{chat_key(transcript)}.json"
    try:
        entry = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return False
    return entry.get("last_record") != last_record_hash(transcript)


def drop(transcript: Transcript, dry_run: bool = False) -> bool:
    path = _folder() / f"{chat_key(transcript)}.json"
    if not path.exists():
        return False
    if not dry_run:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    return True
