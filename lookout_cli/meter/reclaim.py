"""What could be taken out of the context without losing the work: a tool call's arguments as
the meter reads them, the files read more than once (only the last read is still needed), and
the largest items a compaction could clear."""

from __future__ import annotations

import json
import os
import re

from lookout_cli.core.dataclass import dataclass, field
from lookout_cli.core.jsonl import loads_to_read
from lookout_cli.formats.kinds import IMAGE, TOOL_CALL, TOOL_RESULT

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:  # pragma: no cover - the meter reads views but builds none
    from typing import Any

    from lookout_cli.formats.view import Item, View

TOP_RECLAIMABLE = 10
# As the meter's records (analysis._record): plain figures, no generated __eq__ and __repr__.
_record = dataclass(slots=True, eq=False, repr=False)

PATH_KEYS = ("file_path", "path", "filePath", "notebook_path", "absolute_path", "target_file", "filename", "file")
RANGE_KEYS = ("offset", "limit", "start_line", "end_line", "line_range", "view_range", "lines", "pages")
READ_TOOLS = {"read", "read_file", "readfile", "view", "view_file", "open_file", "notebookread",
              "read_text_file", "cat", "readmanyfiles"}
SHELL_TOOLS = {"bash", "shell", "shell_command", "exec_command", "local_shell", "run_shell_command",
               "run_terminal_cmd", "execute_command", "terminal"}
READ_COMMANDS = {"cat", "sed", "head", "tail", "nl", "less", "more", "bat", "batcat"}
SUMMARY_KEYS = ("command", "cmd", "pattern", "query", "url", "description", "prompt")
ARGUMENT_KEYS = frozenset(PATH_KEYS + RANGE_KEYS + SUMMARY_KEYS)  # all the meter reads of a call


ARGUMENT_FIELDS = ("arguments", "input", "args")  # where an adapter keeps a call's arguments in ``extra``


def call_arguments(item: Item) -> Any:
    """A tool call's arguments: the adapter's parsed copy if it kept one, else the JSON in its text."""
    for key in ARGUMENT_FIELDS:
        if key in item.extra:
            value = item.extra[key]
            if isinstance(value, str):
                try:
                    return loads_to_read(value)  # read several times a call: orjson first
                except ValueError:
                    return value
            return value
    text = item.text
    start = text.find("{")
    if start >= 0:
        try:
            return loads_to_read(text[start:] if start else text)
        except ValueError:
            pass
        try:
            return json.JSONDecoder().raw_decode(text[start:])[0]
        except ValueError:
            pass
    name = item.tool or ""
    return text[len(name):].strip() if text.startswith(name) else text


# a character that makes shlex cut words otherwise than ``str.split``: a quote, an escape,
# anything outside printable ASCII, tabs and line ends
_SHLEX_SPECIAL = re.compile(r"[^\x20-\x7e\t\n\r]|['\"\\]").search


def _shell_read(command: Any) -> tuple[str, str] | None:
    """The file a shell command reads whole or in part (``cat f``, ``sed -n '1,80p' f``…)."""
    if isinstance(command, list):
        words = [str(w) for w in command]
        if len(words) >= 3 and os.path.basename(words[0]) in ("bash", "sh", "zsh") and words[1].startswith("-"):
            return _shell_read(words[2])
    elif isinstance(command, str):
        if any(ch in command for ch in "|;&><`$"):
            return None
        first = command.split(None, 1)[0] if command.strip() else ""
        if os.path.basename(first.strip("'\"")) not in READ_COMMANDS:
            return None  # most commands read no file: skip the costly shlex parse
        if not _SHLEX_SPECIAL(command):
            words = command.split()  # what shlex would make of it, at a fraction of the cost
        else:
            import shlex  # (here: most runs meet no such command)

            try:
                words = shlex.split(command)
            except ValueError:
                return None
    else:
        return None
    if not words or os.path.basename(words[0]) not in READ_COMMANDS:
        return None
    program, args = os.path.basename(words[0]), words[1:]
    files, options = [], []
    skip = False
    for n, word in enumerate(args):
        if skip:
            skip = False
            options.append(word)
            continue
        if word.startswith("-") and len(word) > 1:
            options.append(word)
            if word in ("-n", "-c", "-e") and program != "sed" or word == "-e":
                skip = True
            continue
        files.append(word)
    if program == "sed":
        script = next((f for f in files if re.fullmatch(r"\d*,?\$?\d*p", f)), None)
        files = [f for f in files if f != script]
        if script is None and not options:
            return None
        options.append(script or "")
    if len(files) != 1:
        return None
    return files[0], " ".join(o for o in options if o)


def read_target(item: Item) -> tuple[str, str] | None:
    """(path, range) that a tool call reads, when it is a file read; range '' means whole."""
    if item.kind != TOOL_CALL:
        return None
    name = (item.tool or "").lower()
    args = call_arguments(item)
    if isinstance(args, dict):
        if name in READ_TOOLS or name.endswith(("read_file", "readfile")) or name.startswith("read"):
            path = next((args[k] for k in PATH_KEYS if isinstance(args.get(k), str) and args[k]), None)
            if path:
                rng = ",".join(f"{k}={args[k]}" for k in RANGE_KEYS if args.get(k) not in (None, ""))
                return path, rng
        if name in SHELL_TOOLS or "command" in args or "cmd" in args:
            return _shell_read(args.get("command", args.get("cmd")))
        return None
    if name in SHELL_TOOLS and isinstance(args, str):
        return _shell_read(args)
    return None


@_record
class DuplicateRead:
    """A file read more than once while its earlier reads are still in the context."""

    path: str
    reads: int
    tokens: int  # tokens of all the results of reading it
    reclaimable: int  # tokens of earlier reads a later identical read supersedes
    calls: list[str]
    ranges: list[str] = field(default_factory=list)  # "" = the whole file


@_record
class Reclaimable:
    """Something compact or clear-images could take out of the context, and what it frees."""

    kind: str  # "tool_result" | "image" | "duplicate_read"
    tokens: int
    line: int
    tool: str | None
    call_id: str | None
    target: str | None
    why: str


def _results_by_call(view: View, tokens: list[int]) -> dict[str, tuple[int, int]]:
    """call id -> (tokens of its result, including images in it; index of the result)."""
    found: dict[str, tuple[int, int]] = {}
    for n, item in enumerate(view.items):
        if item.call_id and item.kind in (TOOL_RESULT, IMAGE) and item.role != "assistant":
            old = found.get(item.call_id)
            found[item.call_id] = ((old[0] if old else 0) + tokens[n], old[1] if old else n)
    return found


def duplicate_reads(view: View, tokens: list[int]) -> tuple[list[DuplicateRead], set[str]]:
    """Files read more than once (from the calls' arguments), and the call ids of reads that a
    later read of the same file and range supersedes."""
    results = _results_by_call(view, tokens)
    by_path: dict[str, list[tuple[str, str]]] = {}
    for item in view.items:
        target = read_target(item)
        if target and item.call_id:
            by_path.setdefault(target[0], []).append((target[1], item.call_id))
    rows, superseded = [], set()
    for path, reads in by_path.items():
        if len(reads) < 2:
            continue
        spent = sum(results.get(cid, (0, 0))[0] for _, cid in reads)
        gone = 0
        for n, (rng, cid) in enumerate(reads):
            if any(later_rng in (rng, "") for later_rng, _ in reads[n + 1:]):
                if cid in results:
                    superseded.add(cid)
                    gone += results[cid][0]
        rows.append(DuplicateRead(path, len(reads), spent, gone, [cid for _, cid in reads],
                                  [rng for rng, _ in reads]))
    rows.sort(key=lambda r: (-r.reclaimable, -r.tokens, r.path))
    return rows, superseded


def assistant_runs(view: View) -> list[tuple[int, int]]:
    """(start, end) indexes of each run of consecutive assistant items: one step each."""
    runs, start = [], None
    for n, item in enumerate(view.items):
        if item.role == "assistant":
            if start is None:
                start = n
        elif start is not None:
            runs.append((start, n))
            start = None
    if start is not None:
        runs.append((start, len(view.items)))
    return runs


def reclaimable(view: View, tokens: list[int], limit: int = TOP_RECLAIMABLE,
                superseded: set[str] | None = None) -> tuple[list[Reclaimable], int]:
    """The largest items that could be cleared (and saved) without taking away what the agent
    is working on: tool results and images it has already read, except those its latest step
    read (anything before the step before the last), and reads of a file that a later read of
    the same file and range supersedes. Returns the top ``limit`` and the tokens of all of them
    (each item counted once). ``superseded`` is what :func:`duplicate_reads` found, when known."""
    from lookout_cli.formats.clearing import is_cleared  # (as in stale_reason)

    items = view.items
    calls = view.calls()
    runs = assistant_runs(view)
    seen_before = runs[-2][0] if len(runs) >= 2 else 0  # items before this were read twice over
    if superseded is None:
        _, superseded = duplicate_reads(view, tokens)
    found: list[tuple[int, int, int, str, str]] = []  # (tokens, line, index, kind, why)
    for n, item in enumerate(items):
        if item.kind not in (TOOL_RESULT, IMAGE) or item.role == "assistant" or tokens[n] <= 0 \
                or is_cleared(item):
            continue
        if item.call_id in superseded and item.kind == TOOL_RESULT:
            found.append((tokens[n], item.record.lineno, n, "duplicate_read",
                          "a later read of the same file and range supersedes it"))
        elif n < seen_before:
            found.append((tokens[n], item.record.lineno, n, "image" if item.kind == IMAGE else "tool_result",
                          "the agent has already read it (before its latest step)"))
    top = []
    # the largest first (thousands sorted in C cost less than importing heapq for its nsmallest)
    for count, line, n, kind, why in sorted(found, key=lambda f: (-f[0], f[1]))[:limit]:
        item = items[n]
        tool = tool_name(item, calls) if item.kind == TOOL_RESULT or item.call_id else None
        top.append(Reclaimable(kind, count, line, tool, item.call_id, call_target(item, calls), why))
    return top, sum(f[0] for f in found)


def tool_name(item: Item, calls: dict[str, Item]) -> str:
    if item.tool:
        return item.tool
    call = calls.get(item.call_id or "")
    return (call.tool if call is not None and call.tool else None) or "unknown"


def call_target(item: Item, calls: dict[str, Item]) -> str | None:
    """The path the call behind a result read, else what the call did (worked out only for the
    results a report shows: a long session holds thousands)."""
    call = calls.get(item.call_id or "")
    target = read_target(call) if call is not None else None
    return target[0] if target else _call_summary(call)


def _call_summary(call: Item | None, width: int = 60) -> str | None:
    if call is None:
        return None
    args = call_arguments(call)
    if isinstance(args, dict):
        for key in SUMMARY_KEYS:
            value = args.get(key)
            if isinstance(value, list):
                value = " ".join(map(str, value[-1:] if len(value) > 2 else value))
            if isinstance(value, str) and value:
                return _shorten(value, width)
        return None
    return _shorten(str(args), width) if args else None


def _shorten(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
