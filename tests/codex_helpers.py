"""Small helpers for the codex (and gemini-cli) format tests."""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path

from lookout_cli.core.jsonl import RecordWriter, read_records
from lookout_cli.formats import Transcript, detect

DATA = Path(__file__).resolve().parent / "data"


def read_bytes(name: str) -> bytes:
    return (DATA / name).read_bytes()


def load(data: bytes, expect: str) -> Transcript:
    """Parse bytes, detect the format (it must be ``expect``) and wrap them in a Transcript."""
    records = list(read_records(io.BytesIO(data)))
    adapter = detect(records)
    assert adapter is not None and adapter.name == expect, adapter and adapter.name
    return Transcript(records, adapter)


def dump(transcript: Transcript) -> bytes:
    out = io.BytesIO()
    RecordWriter(out).write_all(transcript.records)
    return out.getvalue()


def reread(transcript: Transcript) -> Transcript:
    """Write the transcript out and read it back, as the next command in a pipe would."""
    return load(dump(transcript), transcript.format)


def kinds(view) -> dict:
    return dict(Counter(item.kind for item in view.items))


def lines(data: bytes) -> list[bytes]:
    return [r.body for r in read_records(io.BytesIO(data))]


def assert_kept(before: bytes, after: bytes, changed: set[int] = frozenset()) -> list[bytes]:
    """Every original line except those numbered in ``changed`` (1-based) is in ``after``,
    byte for byte and in order. Returns the output lines that are not original lines."""
    old = lines(before)
    new = lines(after)
    keep = [line for n, line in enumerate(old, 1) if n not in changed]
    extra = []
    i = 0
    for line in new:
        if i < len(keep) and line == keep[i]:
            i += 1
        else:
            extra.append(line)
    assert i == len(keep), f"original line {i + 1} missing or changed"
    # changed lines really changed (or went away)
    for n in changed:
        assert old[n - 1] not in new, f"line {n} was expected to change"
    return extra


def crlf_variant(data: bytes) -> bytes:
    """The same transcript with CRLF line endings and no final newline."""
    body = data.replace(b"\r\n", b"\n").rstrip(b"\n")
    return body.replace(b"\n", b"\r\n")
