"""The format-neutral view of a transcript: what the model sees on its next request.

Every format adapter turns its records into a ``View``; every command reads the view and hands
its edits back to the adapter. A command never looks at a format's records itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType

from lookout_cli.core.dataclass import dataclass, field
from lookout_cli.core.jsonl import Line, Record, loads
from lookout_cli.formats.kinds import (  # the view's words, here with its classes for the modules that use both
    ASSISTANT_ROLES,
    IMAGE,
    KINDS,
    NOTE_TITLE,
    NOTICE,
    SETUP,
    SETUP_PARTS,
    SUMMARY,
    TEXT,
    THINKING,
    TOOL_CALL,
    TOOL_RESULT,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "ASSISTANT_ROLES", "IMAGE", "KINDS", "NOTE_TITLE", "NOTICE", "SETUP", "SETUP_PARTS", "SUMMARY", "TEXT",
    "THINKING", "TOOL_CALL", "TOOL_RESULT", "ImageRef", "Item", "Usage", "Compaction", "View", "arguments",
    "NO_EXTRA", "PROMPT", "EXTRA", "pack", "unpack", "has_prompt",
]

# The ``extra`` of an item that is only read from now on and has none: one read-only mapping
# for all of them, instead of an empty dict each (a long session's measure keeps 100k items).
NO_EXTRA: Any = MappingProxyType({})


@dataclass(slots=True)
class ImageRef:
    """An image carried in the context, found without decoding it."""

    media_type: str | None
    data: str | None = None  # base64 payload (no data: prefix), when inline
    url: str | None = None  # a remote URL, when not inline
    nbytes: int = 0  # decoded size in bytes (estimated from the base64 length)
    dims: tuple[int, int] | None = None  # width and height, once read (the data may then go)


@dataclass(slots=True, eq=False)
class Item:
    """One model-visible part: a text, a thinking block, a tool call or result, an image…"""

    role: str  # system | developer | user | assistant | tool
    kind: str  # one of KINDS
    text: str  # the countable text ("" for images; name + arguments for tool calls)
    record: Record  # the line it came from (for request-body formats: the last body)
    path: tuple = ()  # adapter-private location of the part inside record.obj
    message: int = 0  # index of the API message it belongs to (split lines share one)
    turn: int = 0  # index of the user turn it belongs to (0 = before the first prompt)
    tool: str | None = None  # tool name for calls and results
    call_id: str | None = None  # pairs a call with its result
    timestamp: str | None = None
    setup: str | None = None  # one of SETUP_PARTS for SETUP items
    image: ImageRef | None = None
    is_error: bool = False
    opaque: bool = False  # signed thinking, encrypted content: never altered
    prompt: bool = False  # a real user prompt (starts a turn), not a tool result or notice
    extra: dict[str, Any] = field(default_factory=dict)  # adapter-private details
    tokens: int | None = None  # counted as the view was built (then ``text`` may be cut short)


@dataclass(slots=True)
class Usage:
    """One API response's token usage as the provider recorded it (counted once)."""

    record: Record | Line  # its line (a ``Line``: one of an older segment, read into a summary)
    input: int = 0  # uncached input
    cache_write: int = 0
    cache_read: int = 0
    output: int = 0
    cache_write_1h: int = 0  # the part of cache_write written with the 1-hour TTL
    model: str | None = None
    timestamp: str | None = None
    context_window: int | None = None  # when the transcript records it (Codex)

    @property
    def prompt(self) -> int:
        return self.input + self.cache_write + self.cache_read


@dataclass(slots=True)
class Compaction:
    """A compaction already recorded in the transcript."""

    record: Record
    before: int | None = None  # tokens before, as recorded
    after: int | None = None  # tokens after, as recorded
    timestamp: str | None = None
    trigger: str | None = None


@dataclass(slots=True)
class View:
    """The model-visible context of a transcript: its items, usages and setup, in order."""

    format: str
    items: list[Item] = field(default_factory=list)
    usages: Sequence[Usage] = field(default_factory=list)  # main chain only, in order, deduplicated (or ``Usages``)
    compactions: list[Compaction] = field(default_factory=list)
    model: str | None = None
    session_id: str | None = None
    cwd: str | None = None
    last_timestamp: str | None = None
    sink: Any = None  # Transcript.sink: sees every item as it is added

    def add(self, item: Item) -> Item:
        """Add an item (adapters build their views through this)."""
        self.items.append(item)
        if self.sink is not None:
            self.sink(self, item)
        return item

    def messages(self) -> list[list[Item]]:
        """Items grouped by API message, in order."""
        groups: dict[int, list[Item]] = {}
        for item in self.items:
            groups.setdefault(item.message, []).append(item)
        return [groups[k] for k in sorted(groups)]

    def calls(self) -> dict[str, Item]:
        return {i.call_id: i for i in self.items if i.kind == TOOL_CALL and i.call_id}

    def results(self) -> dict[str, Item]:
        return {i.call_id: i for i in self.items if i.kind == TOOL_RESULT and i.call_id}

    def orphans(self) -> list[Item]:
        """Calls without a result and results without a call (the validator)."""
        calls, results = self.calls(), self.results()
        lonely = [i for k, i in calls.items() if k not in results]
        lonely += [i for k, i in results.items() if k not in calls]
        return lonely


def arguments(call: Item) -> dict:
    """A tool call's arguments as a dict, whatever shape the format stored them in."""
    for key in ("arguments", "input", "args"):
        value = call.extra.get(key)
        if isinstance(value, dict):
            return value
        if isinstance(value, str):
            try:
                parsed = loads(value)
            except ValueError:
                continue
            if isinstance(parsed, dict):
                return parsed
    start = call.text.find("{")
    if start >= 0:
        try:
            parsed = loads(call.text[start:])
            return parsed if isinstance(parsed, dict) else {}
        except ValueError:
            pass
    return {}


PROMPT = 10  # where ``prompt`` sits in a packed item
EXTRA = 11  # ... and ``extra``


def pack(item: Item) -> tuple:
    """A counted, cut-down item (``meter.analysis.item_counts.shrink``) as a plain tuple, without what
    other lines decide: how the line memo keeps a line's items between runs."""
    ref = item.image
    image = None if ref is None else (ref.media_type, ref.url, ref.nbytes, ref.dims)
    return (item.role, item.kind, item.text, item.tool, item.call_id, item.timestamp, item.setup, image,
            item.is_error, item.opaque, item.prompt, item.extra or None, item.tokens)


def unpack(packed: tuple, record: Any, message: int, turn: int) -> Item:
    role, kind, text, tool, call_id, timestamp, setup, image, is_error, opaque, prompt, extra, tokens = packed
    return Item(role=role, kind=kind, text=text, record=record, message=message, turn=turn, tool=tool,
                call_id=call_id, timestamp=timestamp, setup=setup,
                image=None if image is None else ImageRef(image[0], url=image[1], nbytes=image[2], dims=image[3]),
                is_error=is_error, opaque=opaque, prompt=prompt, extra=extra or NO_EXTRA, tokens=tokens)


def has_prompt(packed: list[tuple]) -> bool:
    for p in packed:  # not any() over a generator: this runs for every line reused
        if p[PROMPT]:
            return True
    return False
