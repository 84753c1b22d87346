"""The report as a table for people, or CSV (the JSON is ``aggregate``'s dict itself)."""

from __future__ import annotations

import csv
import io
import os
import re
from collections.abc import Callable

TITLES = {"session": "Session", "day": "Day", "project": "Project", "model": "Model"}
SESSION_WIDTH = 24  # a session named by its file, not a UUID (of which 8 characters tell one apart)
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _tokens(n: int | None) -> str:
    if n is None:
        return "-"
    for size, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


def _duration(seconds: float) -> str:
    if not seconds:
        return "-"
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def _cells(line: dict, by: str) -> list[str]:
    name = line.get(by) or "total"
    if by == "session" and name != "total":
        name = name[:8] if _UUID.fullmatch(name) else name[:SESSION_WIDTH]
    elif by == "project" and name != "total":
        name = os.path.basename(name.rstrip("/")) or name
    share = line["cache_read_share"]
    cost = line["cost_usd"]
    peak = line["peak_percent"]
    cells = [name]
    if by == "session":
        project = line.get("project") or ""
        cells.append(os.path.basename(project.rstrip("/")) or project or "-" if name != "total" else "")
    cells += [
        str(line["requests"]), _tokens(line["input"]), _tokens(line["cache_write"]), _tokens(line["cache_read"]),
        _tokens(line["output"]), "-" if cost is None else f"${cost:,.2f}" + ("*" if line["unpriced_requests"] else ""),
        "-" if share is None else f"{100 * share:.0f}%", "-" if peak is None else f"{peak:.0f}%",
        str(line["compactions"]), _duration(line["amber_seconds"]), _duration(line["red_seconds"]),
        _tokens(line["reclaimable_tokens"]), (line["last_activity"] or "-")[:16].replace("T", " "),
    ]
    return cells


def table(report: dict, style: Callable[..., str] | None = None) -> str:
    """The report's lines, a totals line and the files skipped, aligned for a terminal."""
    by = report["by"]
    head = [TITLES[by]] + (["Project"] if by == "session" else []) + [
        "Req", "Input", "C.write", "C.read", "Output", "Cost", "Cached", "Peak", "Compact", "Amber", "Red",
        "Reclaim", "Last activity"]
    body = [_cells(line, by) for line in report["rows"]]
    total = _cells(report["totals"], by)
    widths = [max(len(r[i]) for r in [head, total, *body]) for i in range(len(head))]
    left = 2 if by == "session" else 1

    def fmt(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    bold = (lambda t: style(t, bold=True)) if style else (lambda t: t)
    out = [bold(fmt(head))] + [fmt(r) for r in body] + ["-" * len(fmt(head)), bold(fmt(total))]
    if any(line["unpriced_requests"] for line in report["rows"]):
        out.append("* some requests' models have no known prices: not in the cost")
    for skip in report["skipped"]:
        where = f"{skip['path']}:{skip['line']}" if skip["line"] else skip["path"]
        out.append(f"skipped {where}: {skip['reason']}")
    return "\n".join(out) + "\n"


def to_csv(report: dict) -> str:
    """One CSV line per report line, then the totals (its first column ``total``)."""
    lines = report["rows"] + [report["totals"]]
    columns = [k for k in report["rows"][0]] if report["rows"] else [report["by"], *report["totals"]]
    columns = [c for c in dict.fromkeys([report["by"], *columns]) if c != "total"]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for line in lines:
        key = line.get(report["by"]) if line is not report["totals"] else "total"
        writer.writerow([key if c == report["by"] else _plain(line.get(c)) for c in columns])
    return buffer.getvalue()


def _plain(value) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return ";".join(map(str, value))
    return str(value)
