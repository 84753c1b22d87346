"""Rows (``scan``) summed into the report: by session, day, project or model, with a total.

Usage figures are summed request by request: a request is counted once however many files
hold it (its ``message.id:requestId`` key; the file whose first line is oldest keeps it, as
ccusage counts), and goes to the day of its own time and the group of its own model. A
Claude Code subagent's file (``SESSION/subagents/*.jsonl``) belongs to its session. The
context's health (peak, compactions, time amber and red, reclaimable tokens) is a session's:
it goes to the session's group (by day: the day of its last activity; by model: the model
that served most of its requests).
"""

from __future__ import annotations

import datetime as dt
import marshal
from collections.abc import Iterable
from typing import Any

from lookout_cli.core.times import parse_time

SCHEMA = "lookout.report/1"
BY = ("session", "day", "project", "model")
FIGURES = ("requests", "input", "cache_write", "cache_read", "output")


class Group:
    """The sums of one line of the report."""

    __slots__ = (
        "amber_s",
        "cache_read",
        "cache_write",
        "compactions",
        "extra",
        "first",
        "input",
        "key",
        "last",
        "output",
        "peak",
        "reclaimable",
        "red_s",
        "requests",
        "sessions",
        "unpriced",
        "usd",
    )

    def __init__(self, key: str) -> None:
        self.key = key
        self.sessions: set[str] = set()
        self.requests = self.input = self.cache_write = self.cache_read = self.output = 0
        self.usd = 0.0
        self.unpriced = 0
        self.peak: list | None = None  # percent, tokens, time, budget, session
        self.compactions = 0
        self.amber_s = self.red_s = 0.0
        self.reclaimable = 0
        self.first: str | None = None
        self.last: str | None = None
        self.extra: dict[str, Any] = {}

    def add_request(self, entry: list, session: str) -> None:
        self.sessions.add(session)
        self.requests += 1
        self.input += entry[3]
        self.cache_write += entry[4]
        self.cache_read += entry[5]
        self.output += entry[6]
        if entry[8] is None:
            self.unpriced += 1
        else:
            self.usd += entry[8]

    def add_sums(self, sessions: Iterable[str], requests: int, inp: int, write: int, read: int, out: int,
                 usd: float, unpriced: int) -> None:
        """Usage figures summed elsewhere (a row's ``sums``, another group's) added to these."""
        self.sessions.update(sessions)
        self.requests += requests
        self.input += inp
        self.cache_write += write
        self.cache_read += read
        self.output += out
        self.usd += usd
        self.unpriced += unpriced

    def add_usage(self, other: Group) -> None:
        """``other``'s usage figures added to these (the totals line)."""
        self.add_sums(other.sessions, other.requests, other.input, other.cache_write, other.cache_read,
                      other.output, other.usd, other.unpriced)

    def add_health(self, health: Session) -> None:
        self.sessions.add(health.key)
        if health.peak is not None and (self.peak is None or health.peak[0] > self.peak[0]):
            self.peak = [*health.peak, health.key]
        self.compactions += health.compactions
        self.amber_s += health.amber_s
        self.red_s += health.red_s
        self.reclaimable += health.reclaimable
        _widen(self, health.first, health.last)

    def to_dict(self, by: str) -> dict:
        prompt = self.input + self.cache_write + self.cache_read
        out = {by: self.key}
        out.update(self.extra)
        out.update({
            "sessions": len(self.sessions),
            "requests": self.requests,
            "input": self.input,
            "cache_write": self.cache_write,
            "cache_read": self.cache_read,
            "output": self.output,
            "total_tokens": prompt + self.output,
            "cost_usd": round(self.usd, 6) if self.requests > self.unpriced else None,
            "unpriced_requests": self.unpriced,
            "cache_read_share": round(self.cache_read / prompt, 6) if prompt else None,
            "peak_percent": self.peak[0] if self.peak else None,
            "peak_tokens": self.peak[1] if self.peak else None,
            "peak_at": self.peak[2] if self.peak else None,
            "peak_session": self.peak[4] if self.peak else None,
            "compactions": self.compactions,
            "amber_seconds": round(self.amber_s, 3),
            "red_seconds": round(self.red_s, 3),
            "reclaimable_tokens": self.reclaimable,
            "first_activity": self.first,
            "last_activity": self.last,
        })
        return out


class Session:
    """A session's files (its own and its subagents'), their context health combined."""

    __slots__ = (
        "amber_s",
        "compactions",
        "first",
        "format",
        "in_range",
        "key",
        "last",
        "models",
        "paths",
        "peak",
        "project",
        "reclaimable",
        "red_s",
    )

    def __init__(self, key: str) -> None:
        self.key = key
        self.project: str | None = None
        self.format: str | None = None
        self.paths: list[str] = []
        self.peak: list | None = None
        self.compactions = 0
        self.amber_s = self.red_s = 0.0
        self.reclaimable = 0
        self.first: str | None = None
        self.last: str | None = None
        self.models: dict[str, int] = {}
        self.in_range = False  # a request of it passed --since/--until

    def add(self, row: dict) -> None:
        if row.get("path"):
            self.paths.append(row["path"])
        if row["parent"] is None or self.format is None:
            self.format = row["format"]
        if row["project"] and (self.project is None or row["parent"] is None):
            self.project = row["project"]
        if row["parent"] is None:  # a subagent's context is its own, not the session's
            peak = row["peak"]
            if peak is not None and (self.peak is None or peak[0] > self.peak[0]):
                self.peak = peak
            self.compactions += row["compactions"]
            self.amber_s += row["amber_s"]
            self.red_s += row["red_s"]
            self.reclaimable += row["reclaimable"]
        _widen(self, row["first"], row["last"])


def _widen(span: Group | Session, first: str | None, last: str | None) -> None:
    """``span``'s first and last activity widened to take in ``first`` and ``last``."""
    if first and (span.first is None or first < span.first):
        span.first = first
    if last and (span.last is None or last > span.last):
        span.last = last


def session_of(row: dict) -> str:
    return row["parent"] or row["session"] or row["path"] or "?"


def _bound(text: str | None, end: bool) -> dt.datetime | None:
    """A --since/--until value: a date (2026-05-01 or 20260501: the local day, until's
    inclusive) or an ISO time."""
    if not text:
        return None
    value = text.strip()
    if len(value) == 8 and value.isdigit():
        value = f"{value[:4]}-{value[4:6]}-{value[6:]}"
    if len(value) == 10:
        try:
            day = dt.date.fromisoformat(value)
        except ValueError:
            raise ValueError(f"{'until' if end else 'since'}: {text!r} is not a date like 2026-05-01 or a time "
                             "like 2026-05-01T12:00:00Z") from None
        start = dt.datetime(day.year, day.month, day.day).astimezone()  # local midnight
        return start + dt.timedelta(days=1) if end else start
    when = parse_time(value)
    if when is None:
        raise ValueError(f"{'until' if end else 'since'}: {text!r} is not a date like 2026-05-01 or a time "
                         "like 2026-05-01T12:00:00Z")
    return when


def aggregate(rows: Iterable[dict], by: str = "session", since: str | None = None, until: str | None = None,
              project: str | None = None) -> dict:
    """The report (schema ``lookout.report/1``) of ``rows``: a line per group of ``by``, sorted
    (sessions and days by time, projects and models by cost), the totals, and the files
    skipped with their reasons. ``since``/``until`` keep requests from/to a date or time;
    ``project`` keeps sessions whose project holds that text (any case)."""
    if by not in BY:
        raise ValueError(f"by: {by!r} is not one of {', '.join(BY)}")
    start, stop = _bound(since, False), _bound(until, True)
    needle = project.lower() if project else None
    rows = sorted(rows, key=lambda r: (r["first"] or "~", r["path"] or ""))  # the oldest file keeps a request
    sessions: dict[str, Session] = {}
    groups: dict[str, Group] = {}
    total = Group("total")
    skipped: list[dict] = []
    seen: set[str] = set()
    files = 0
    for row in rows:
        files += 1
        if row["skipped"]:
            skipped.append({"path": row["path"], "line": None, "reason": row["skipped"]})
            continue
        for line in row["broken"]:
            skipped.append({"path": row["path"], "line": line, "reason": "not JSON"})
        key = session_of(row)
        session = sessions.get(key)
        if session is None:
            session = sessions[key] = Session(key)
        session.add(row)
        if needle is not None and needle not in (row["project"] or "").lower() and \
                needle not in (session.project or "").lower():
            continue
        filtered = start is not None or stop is not None
        fixed = key if by == "session" else (row["project"] or session.project or "unknown") \
            if by == "project" else None  # the group of all the row's requests
        group = None
        models = session.models
        requests = row["requests"]
        if fixed is not None and not filtered:
            keys = row.get("keys")
            if keys is None:
                keys = [entry[0] for entry in _requests(requests) if entry[0] is not None]
            if seen.isdisjoint(keys):  # none counted before (the usual case): the row's own sums
                seen.update(keys)
                if row["sums"][0]:
                    _group(groups, fixed).add_sums((key,), *row["sums"])
                for model, n in row["models"].items():
                    models[model] = models.get(model, 0) + n
                requests = ()
        for entry in _requests(requests):
            rkey = entry[0]
            if rkey is not None:
                if rkey in seen:
                    continue
                seen.add(rkey)
            when = None
            if filtered or by == "day":
                when = parse_time(entry[1])
                if filtered and (when is None or (start is not None and when < start)
                                 or (stop is not None and when >= stop)):
                    continue
            model = entry[2] or "unknown"
            models[model] = models.get(model, 0) + 1
            name = fixed if fixed is not None else _day(when) if by == "day" else model
            if group is None or group.key != name:
                group = _group(groups, name)
            group.add_request(entry, key)
        session.in_range = session.in_range or bool(models)
    for session in sessions.values():
        if needle is not None and needle not in (session.project or "").lower():
            continue
        if not session.in_range and (session.models or not _within(session.last, start, stop)):
            continue  # its requests are all out of range (or, without any, its last activity)
        if by == "session":
            name = session.key
        elif by == "day":
            name = _day(parse_time(session.last))
        elif by == "project":
            name = session.project or "unknown"
        else:
            name = max(session.models, key=session.models.get) if session.models else "unknown"
        group = _group(groups, name)
        group.add_health(session)
        total.add_health(session)
        if by == "session":
            group.extra = {"project": session.project, "format": session.format,
                           "models": sorted(session.models), "files": session.paths}
    lines = list(groups.values())
    for group in lines:
        total.add_usage(group)
    if by in ("session", "day"):
        lines.sort(key=lambda g: (g.last or "", g.key) if by == "session" else g.key)
    else:
        lines.sort(key=lambda g: (-g.usd, g.key))
    return {
        "schema": SCHEMA,
        "command": "report",
        "by": by,
        "since": since,
        "until": until,
        "project": project,
        "files": files,
        "rows": [g.to_dict(by) for g in lines],
        "totals": total.to_dict(by) | {by: None},
        "skipped": skipped,
    }


def _group(groups: dict[str, Group], name: str) -> Group:
    group = groups.get(name)
    if group is None:
        group = groups[name] = Group(name)
    return group


def _requests(requests: list | bytes) -> list:
    """A row's requests, unpacked when the index kept them packed (``index._kept``)."""
    return marshal.loads(requests) if type(requests) is bytes else requests


def _day(when: dt.datetime | None) -> str:
    return when.astimezone().date().isoformat() if when is not None else "unknown"


def _within(last: str | None, start: dt.datetime | None, stop: dt.datetime | None) -> bool:
    if start is None and stop is None:
        return True
    when = parse_time(last)
    return when is not None and (start is None or when >= start) and (stop is None or when < stop)
