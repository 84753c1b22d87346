"""A report row as plain values, made without loading what reads transcripts (``scan``
does): a run that reuses every row (``index``) loads no more than this."""

from __future__ import annotations

import os

ROW_VERSION = 2  # changes when what a row holds, or how it is worked out, does


def skipped_row(path: str | None, reason: str) -> dict:
    row = new_row(path, None)
    row["skipped"] = reason
    return row


def new_row(path: str | None, fmt: str | None) -> dict:
    session, parent = _names(path)
    return {"v": ROW_VERSION, "path": path, "format": fmt, "session": session, "parent": parent,
            "project": None, "skipped": None, "broken": [], "requests": [], "sums": [0, 0, 0, 0, 0, 0.0, 0],
            "models": {}, "peak": None, "amber_s": 0.0,
            "red_s": 0.0, "compactions": 0, "reclaimable": 0, "first": None, "last": None}


def _names(path: str | None) -> tuple[str | None, str | None]:
    """The session a file's name gives, and for a Claude Code subagent's file
    (``SESSION/subagents/agent-ID.jsonl``) the session it belongs to."""
    if not path:
        return None, None
    head, name = os.path.split(path)
    stem = name.removesuffix(".jsonl")
    folder, sub = os.path.split(head)
    if sub == "subagents":
        return stem, os.path.basename(folder) or None
    return stem, None
