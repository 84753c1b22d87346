"""Times as transcripts, memories and flags write them: ISO 8601 in, aware UTC datetimes out."""

from __future__ import annotations

import datetime as dt

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from typing import Any


def parse_time(value: Any) -> dt.datetime | None:
    """An ISO 8601 time (``Z`` allowed, quotes around it ignored) as an aware datetime in UTC;
    a time without a zone is UTC, and a text that only begins with a date (``2026-05-01``, as
    people write one in a memory's front matter) is that day's midnight. None for anything else."""
    if not isinstance(value, str) or not value:
        return None
    text = value.strip().strip("'\"")
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        try:
            when = dt.datetime.strptime(text[:10], "%Y-%m-%d")
        except ValueError:
            return None
    if when.tzinfo is None:
        return when.replace(tzinfo=dt.timezone.utc)
    return when.astimezone(dt.timezone.utc)


def iso(when: dt.datetime) -> str:
    """``when`` in UTC to the second, as ``2026-05-01T12:00:00Z``."""
    return when.astimezone(dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
