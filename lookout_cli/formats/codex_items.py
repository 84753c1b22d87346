"""How a Codex rollout's history entries become the view's items (research/formats.md §2):
the entries and the scan that finds them, message texts and setup blocks, tool calls and their
wrapped outputs, images; the ``Builder`` that numbers messages and turns. ``codex`` holds the
adapter that reads the rollout with these and writes edits back.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable
from typing import Any

from lookout_cli import formats
from lookout_cli.core.dataclass import dataclass
from lookout_cli.core.hashing import sha256
from lookout_cli.core.jsonl import Record, loads_to_read
from lookout_cli.formats import interned
from lookout_cli.formats.view import (
    EXTRA,
    IMAGE,
    NOTICE,
    SETUP,
    SETUP_PARTS,
    SUMMARY,
    TEXT,
    THINKING,
    TOOL_CALL,
    TOOL_RESULT,
    ImageRef,
    Item,
    View,
    unpack,
)

# codex-rs/core/templates/compact/summary_prefix.md
SUMMARY_PREFIX = (
    "Another language model started to solve this problem and produced a summary of its thinking "
    "process. You also have access to the state of the tools that were used by that language "
    "model. Use this to build on the work that has already been done and avoid duplicating work. "
    "Here is the summary produced by the other language model, use the information in this "
    "summary to assist with your own analysis:"
)


TRUNCATION_NOTICE = (
    "[lookout: the earlier part of this conversation was removed to make room in the context "
    "window; no summary of it was kept.]"
)


_SETUP_RE = re.compile(r'\A<lookout-setup name="([^"]*)">\n')


# Output items the model produced (one API response may hold several).
_MODEL_OUTPUT_TYPES = frozenset(
    {
        "reasoning",
        "function_call",
        "custom_tool_call",
        "local_shell_call",
        "web_search_call",
        "image_generation_call",
        "tool_search_call",
        "shell_call",
        "apply_patch_call",
        "mcp_call",
        "computer_call",
        "code_interpreter_call",
        "file_search_call",
    }
)


# Tool calls without a call_id (server-side) and what to call them.
_CALL_NAMES = {
    "local_shell_call": "local_shell",
    "web_search_call": "web_search",
    "image_generation_call": "image_generation",
    "tool_search_call": "tool_search",
    "shell_call": "shell",
    "apply_patch_call": "apply_patch",
    "computer_call": "computer",
    "code_interpreter_call": "code_interpreter",
    "file_search_call": "file_search",
}


TEXT_PARTS = ("input_text", "output_text", "text", "summary_text", "reasoning_text", "refusal")


_DATA_URL_RE = re.compile(r"\Adata:([^;,]*)((?:;[^;,]*)*?);base64,", re.I)


def get_path(obj: Any, path: tuple) -> Any:
    for key in path:
        obj = obj[key]
    return obj


def json_text(obj: Any) -> str:
    """serde_json's compact shape, for JSON that Codex keeps inside a string."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def image_ref(url: Any) -> ImageRef:
    """An ImageRef for an ``input_image.image_url`` (a data URL, a remote URL, or nothing)."""
    if not isinstance(url, str):
        return ImageRef(media_type=None)
    match = _DATA_URL_RE.match(url)
    if match:
        data = url[match.end() :]
        pad = len(data) - len(data.rstrip("="))
        return ImageRef(media_type=match.group(1) or None, data=data, nbytes=max(0, len(data) * 3 // 4 - pad))
    return ImageRef(media_type=None, url=url)


def _opaque_text(blob: Any) -> str:
    """An encrypted blob counts as text of a quarter of its length."""
    if not isinstance(blob, str):
        return ""
    return blob[: len(blob) // 4]


def classify_user_text(text: str) -> tuple[str, str | None]:
    """(kind, setup part) of one text part of a user message, by Codex's own context markers."""
    head = text.lstrip()
    low = head[:64].lower()
    if low.startswith("# agents.md instructions for ") or low.startswith("<user_instructions>"):
        return SETUP, "rules"
    if low.startswith("<environment_context>"):
        return SETUP, "environment"
    if low.startswith("<skill"):
        return SETUP, "skills"
    if head.startswith(SUMMARY_PREFIX):
        return SUMMARY, None
    if head.startswith(TRUNCATION_NOTICE[:40]):
        return NOTICE, None
    if low.startswith(("<user_shell_command>", "<turn_aborted>", "<subagent_notification>")):
        return NOTICE, None
    if _SETUP_RE.match(text):
        return SETUP, None
    return TEXT, None


def summary_body(text: str) -> str:
    """The summary itself, without Codex's prefix."""
    head = text.lstrip()
    if head.startswith(SUMMARY_PREFIX):
        return head[len(SUMMARY_PREFIX) :].lstrip("\n")
    return text


def setup_key(text: str) -> str | None:
    match = _SETUP_RE.match(text)
    return match.group(1) if match else None


def _setup_part(key: str | None) -> str:
    if key in SETUP_PARTS:
        return key  # type: ignore[return-value]
    return "memory" if key and "memory" in key else "system"


@dataclass(slots=True, eq=False)
class Entry:
    """One item of the model-visible history: where it lives and what the scan needs of it (its
    payload is read from the record when the item is built, unless made up here)."""

    record: Record
    path: tuple  # path of the payload inside the record's value
    facts: tuple  # payload_facts(payload)
    ts: str | None = None  # the record's timestamp
    payload: dict | None = None  # made up: the summary message of a compaction without history
    rebuilt: bool = False  # an earlier item that a local compaction carries forward
    truncated: str | None = None  # the text Codex keeps of a rebuilt user message, when cut

    @property
    def synthetic(self) -> bool:
        """A summary message built from ``compacted.message`` (no payload in the line)."""
        return self.payload is not None

    def read(self) -> dict:
        """The payload (a lean record reads its line again: ``release()`` it after)."""
        return self.payload if self.payload is not None else get_path(self.record.data, self.path)

    def carried(self, truncated: str | None = None) -> Entry:
        """This entry as a local compaction carries it forward."""
        return Entry(self.record, self.path, self.facts, self.ts, self.payload, True, truncated)


@dataclass(slots=True)
class Scan:
    entries: list
    base: Record | None = None  # the compacted record the current history starts at
    base_has_history: bool = False
    session_id: str | None = None
    cwd: str | None = None
    model: str | None = None
    meta_setup: tuple | None = None  # (record, path, text) of the session's base instructions
    usages: list | None = None
    compactions: list | None = None
    last_timestamp: str | None = None
    event_images: dict | None = None  # data URL -> event_msg user_message records listing it
    settle: Any = None  # where the scan stood once it read the last compaction (``codex_scan.SettlePoint``)
    rolled_back: bool = False  # a rollback since the base: the entries of a line may be partly gone


def message_texts(payload: dict) -> list[str]:
    content = payload.get("content")
    if isinstance(content, str):
        return [content]
    texts = []
    if isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and part.get("type") in TEXT_PARTS and isinstance(part.get("text"), str):
                texts.append(part["text"])
    return texts


def _is_real_user_message(payload: dict, texts: list[str]) -> bool:
    """Codex's collect_user_messages: user messages that are not injected context or summaries."""
    if payload.get("type") != "message" or payload.get("role") != "user" or not texts:
        return False
    return all(classify_user_text(t)[0] == TEXT for t in texts)


def _is_setup_message(payload: dict, texts: list[str]) -> bool:
    if payload.get("type") != "message":
        return False
    role = payload.get("role")
    if role in ("developer", "system"):
        return True
    return bool(texts) and role == "user" and all(classify_user_text(t)[0] == SETUP for t in texts)


# What the scan, a rollback, a local compaction and ``compact`` read of a history item, so that
# a lean transcript keeps this instead of the item: (type, call_id and tool name when it is a
# call, a real user message, a setup message, a setup block lookout put there).
TYPE, CALL_ID, CALL_NAME, REAL_USER, SETUP_MESSAGE, LOOKOUT_SETUP = range(6)


def payload_facts(payload: dict) -> tuple:
    kind = interned(formats.type_of(payload))
    call_id = payload.get("call_id")
    call = isinstance(call_id, str) and kind is not None and (kind in _MODEL_OUTPUT_TYPES or kind.endswith("_call"))
    texts = message_texts(payload) if kind == "message" else []
    return (kind, call_id if call else None, interned(_call_name(payload)) if call else None,
            _is_real_user_message(payload, texts), _is_setup_message(payload, texts),
            any(setup_key(t) for t in texts))


def image_key(url: str) -> str:
    """What an image's URL is known by in the scan: a data URL by its digest (it holds the image)."""
    return url if len(url) <= 256 else sha256(url.encode("utf-8", "surrogatepass")).hexdigest()


def _call_name(payload: dict) -> str:
    name = payload.get("name")
    if isinstance(name, str) and name:
        return name
    kind = formats.type_of(payload)
    return _CALL_NAMES.get(kind, kind or "tool")


def parse_wrapped(output: str, exact: bool = True) -> dict | None:
    """The 0.5x shell output: a JSON object inside the string, ``{"output": …, "metadata": …}``.
    ``exact=False`` (to read it, not to write it back) reads it with orjson first, five times
    faster (``loads_to_read``: no text, no exit code is an integer past 64 bits)."""
    if not output.startswith("{"):
        return None
    try:
        value = json.loads(output) if exact else loads_to_read(output)
    except ValueError:
        return None
    if isinstance(value, dict) and isinstance(value.get("output"), str):
        return value
    return None


class Builder:
    """Turns history entries into view items, numbering messages and turns. With a line memo
    (``meter.line_memo``: a measure of a file), a line's items (those of every entry it holds)
    are taken from it when a line with its bytes gave them before, and kept for the next run;
    not an image whose UI events copy it (``Adapter.copies``). The user messages a local
    compaction carries forward (their text cut by it) are taken only by a run that resumed the
    memo from that compaction (``_lines_remembered``)."""

    def __init__(self, view: View, scan: Scan, memo=None) -> None:
        self.view = view
        self.scan = scan
        self.memo = memo
        self.message = -1
        self.turn = 0
        self.prev_assistant = False
        self.line = formats.OneLine()  # a compacted record holds many entries: read it once
        self.tools = {e.facts[CALL_ID]: e.facts[CALL_NAME] for e in scan.entries if e.facts[CALL_NAME] is not None}
        # the lines whose items are taken from the memo (True: as a compaction carried them), and
        # those whose items are only kept in it
        self.taken, self.kept = _lines_remembered(scan, memo) if memo is not None else ({}, ())

    def add(self, item: Item, assistant: bool, same_message: bool = False) -> Item:
        self._number(item, assistant, same_message)
        return self.view.add(item)

    def _number(self, item: Item, assistant: bool, same_message: bool) -> None:
        if not same_message and not (assistant and self.prev_assistant):
            self.message += 1
        self.prev_assistant = assistant
        item.message = self.message
        if item.prompt:
            self.turn += 1
        item.turn = self.turn

    def setup(self, record: Record, path: tuple, ts: str | None) -> None:
        """The session's base instructions (``Scan.meta_setup``), the first item."""
        self._line(record, self._setup, record, path, ts)

    def _setup(self, record: Record, path: tuple, ts: str | None) -> None:
        text = get_path(record.data, path)
        record.release()
        self.add(Item("system", SETUP, text, record, path=path, setup="system", timestamp=ts), assistant=False)

    def entries(self) -> None:
        """Every entry's items, in order, a line's entries at a time."""
        for _, group in itertools.groupby(self.scan.entries, key=lambda e: id(e.record)):
            group = list(group)
            self._line(group[0].record, self._entries, group)
        self.line.close()

    def _entries(self, entries: list[Entry]) -> None:
        for entry in entries:
            self.entry(entry)

    def _line(self, record: Record, build: Callable[..., None], *args: Any) -> None:
        """The items of ``record`` that ``build(*args)`` adds, or the memo's."""
        memo, pos = self.memo, record.lineno - 1
        if pos not in self.taken and pos not in self.kept:
            build(*args)
            return
        known = memo.items(pos) if pos in self.taken else None
        if known is not None and _carried(known) == self.taken[pos]:  # (else kept as the other kind)
            self.reuse(record, known)
            memo.keep(pos, known)
            return
        first = len(self.view.items)
        build(*args)
        if not any("events" in item.extra for item in self.view.items[first:]):
            memo.keep(pos, (first, len(self.view.items)))

    def reuse(self, record: Record, packed: list[tuple]) -> None:
        """The items a line with these bytes gave before, counted then: numbered as this view
        numbers them (an entry's first item may start a message: their ``entry_path`` tells a
        compacted line's entries apart), a result named by the call in view; not counted again."""
        path = None
        for n, values in enumerate(packed):
            item = unpack(values, record, 0, 0)
            entry_path = item.extra.get("entry_path")
            if item.call_id and item.kind in (TOOL_RESULT, IMAGE):
                item.tool = self.tools.get(item.call_id)
            self._number(item, item.role == "assistant", n > 0 and entry_path == path)
            path = entry_path
            self.view.items.append(item)

    def entry(self, entry: Entry) -> None:
        self.line.visit(entry.record)
        payload = entry.read()
        kind = formats.type_of(payload)
        ts = entry.ts
        base = {"entry_path": entry.path}
        if entry.rebuilt:
            base["rebuilt"] = True
        if entry.synthetic:  # the summary of a compaction without replacement_history
            texts = message_texts(payload)
            text = texts[0] if texts else ""
            extra = dict(base, summary=summary_body(text))
            self.add(Item("user", SUMMARY, text, entry.record, path=entry.path, timestamp=ts, extra=extra), False)
        elif kind == "message":
            self._message(entry, payload, ts, base)
        elif kind == "reasoning":
            texts = []
            for field in ("summary", "content"):
                parts = payload.get(field)
                if isinstance(parts, list):
                    texts += [p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]
            blob = payload.get("encrypted_content")
            opaque = isinstance(blob, str) and bool(blob)
            if opaque:
                texts.append(_opaque_text(blob))
            self.add(
                Item(
                    "assistant",
                    THINKING,
                    "\n".join(texts),
                    entry.record,
                    path=entry.path,
                    timestamp=ts,
                    opaque=opaque,
                    extra=dict(base),
                ),
                True,
            )
        elif kind in ("compaction", "compaction_summary"):
            self.add(
                Item(
                    "user",
                    SUMMARY,
                    _opaque_text(payload.get("encrypted_content")),
                    entry.record,
                    path=entry.path,
                    timestamp=ts,
                    opaque=True,
                    extra=dict(base),
                ),
                False,
            )
        elif kind == "agent_message":  # a message from another agent (inter-agent communication)
            first = True
            content = payload.get("content")
            for i, part in enumerate(content if isinstance(content, list) else ()):
                if not isinstance(part, dict):
                    continue
                if isinstance(part.get("text"), str):
                    item = Item(
                        "user",
                        NOTICE,
                        part["text"],
                        entry.record,
                        path=entry.path + ("content", i),
                        timestamp=ts,
                        extra=dict(base),
                    )
                elif isinstance(part.get("encrypted_content"), str):
                    item = Item(
                        "user",
                        NOTICE,
                        _opaque_text(part["encrypted_content"]),
                        entry.record,
                        path=entry.path + ("content", i),
                        timestamp=ts,
                        opaque=True,
                        extra=dict(base),
                    )
                else:
                    continue
                self.add(item, False, same_message=not first)
                first = False
        elif kind in _MODEL_OUTPUT_TYPES or (kind and kind.endswith("_call")):
            self._call(entry, payload, ts, base)
        elif kind and kind.endswith("_output") and isinstance(payload.get("call_id"), str):
            self._result(entry, payload, ts, base)
        # ghost_snapshot and unknown item types are not sent to the model

    def _message(self, entry: Entry, payload: dict, ts: str | None, base: dict) -> None:
        role = payload.get("role") if isinstance(payload.get("role"), str) else "user"
        content = payload.get("content")
        if isinstance(content, str):
            content = [{"type": "input_text", "text": content}]
            path_of = lambda i: entry.path + ("content",)  # noqa: E731
        else:
            path_of = lambda i: entry.path + ("content", i)  # noqa: E731
        if not isinstance(content, list):
            return
        first = True
        prompted = False
        assistant = role == "assistant"
        for i, part in enumerate(content):
            if not isinstance(part, dict):
                continue
            ptype = part.get("type")
            extra = dict(base)
            if ptype == "input_image" or ptype == "image":
                if entry.rebuilt:
                    continue  # a local compaction carries only the text of earlier messages
                ref = image_ref(part.get("image_url"))
                if ref.data:
                    extra["events"] = self.scan.event_images.get(image_key(part["image_url"]), [])
                item = Item(role, IMAGE, "", entry.record, path=path_of(i), timestamp=ts, image=ref, extra=extra)
                if role == "user" and not prompted:
                    item.prompt = prompted = True
            elif isinstance(part.get("text"), str):
                text = part["text"]
                if entry.truncated is not None:  # Codex keeps the head of the joined text only
                    if not first:
                        continue
                    text = entry.truncated
                    extra["truncated"] = True
                if role in ("developer", "system"):
                    key = setup_key(text)
                    extra["setup_key"] = key
                    item = Item(
                        role,
                        SETUP,
                        text,
                        entry.record,
                        path=path_of(i),
                        timestamp=ts,
                        setup=_setup_part(key) if key else "system",
                        extra=extra,
                    )
                elif role == "user":
                    kind, part_name = classify_user_text(text)
                    if kind == SETUP:
                        key = setup_key(text)
                        if key:
                            extra["setup_key"] = key
                            part_name = _setup_part(key)
                        item = Item(
                            role, SETUP, text, entry.record, path=path_of(i), timestamp=ts, setup=part_name, extra=extra
                        )
                    elif kind == SUMMARY:
                        extra["summary"] = summary_body(text)
                        item = Item(role, SUMMARY, text, entry.record, path=path_of(i), timestamp=ts, extra=extra)
                    else:
                        item = Item(role, kind, text, entry.record, path=path_of(i), timestamp=ts, extra=extra)
                        if kind == TEXT and not prompted:
                            item.prompt = prompted = True
                else:
                    item = Item(role, TEXT, text, entry.record, path=path_of(i), timestamp=ts, extra=extra)
            else:
                continue
            self.add(item, assistant, same_message=not first)
            first = False

    def _call(self, entry: Entry, payload: dict, ts: str | None, base: dict) -> None:
        kind = payload.get("type")
        name = _call_name(payload)
        extra = dict(base)
        if kind == "function_call" or isinstance(payload.get("arguments"), str):
            args = payload.get("arguments")
            args = args if isinstance(args, str) else ("" if args is None else json_text(args))
            extra["field"] = "arguments" if kind == "function_call" else None
        elif kind == "custom_tool_call":
            args = payload.get("input") if isinstance(payload.get("input"), str) else ""
            extra["field"] = "input"
        else:
            detail = {
                k: v
                for k, v in payload.items()
                if k in ("action", "arguments", "query", "revised_prompt", "input", "operation")
            }
            args = json_text(detail) if detail else ""
        call_id = payload.get("call_id") if isinstance(payload.get("call_id"), str) else None
        self.add(
            Item(
                "assistant",
                TOOL_CALL,
                name + args,
                entry.record,
                path=entry.path,
                tool=name,
                call_id=call_id,
                timestamp=ts,
                extra=extra,
            ),
            True,
        )
        if kind == "image_generation_call" and isinstance(payload.get("result"), str) and len(payload["result"]) > 64:
            ref = ImageRef(media_type="image/png", data=payload["result"], nbytes=len(payload["result"]) * 3 // 4)
            self.add(
                Item(
                    "assistant",
                    IMAGE,
                    "",
                    entry.record,
                    path=entry.path + ("result",),
                    tool=name,
                    timestamp=ts,
                    image=ref,
                    extra=dict(base),
                ),
                True,
            )

    def _result(self, entry: Entry, payload: dict, ts: str | None, base: dict) -> None:
        call_id = payload["call_id"]
        tool = self.tools.get(call_id)
        extra = dict(base)
        images: list[tuple[tuple, ImageRef]] = []
        is_error = False
        if payload.get("type") == "tool_search_output" and "output" not in payload:
            text = json_text(payload.get("tools")) if payload.get("tools") is not None else ""
            extra["shape"] = "tools"
        else:
            output = payload.get("output")
            text, shape, is_error = _output_text(output, entry.path + ("output",), images)
            extra["shape"] = shape
        if payload.get("status") in ("failed", "error") or payload.get("success") is False:
            is_error = True
        self.add(
            Item(
                "tool",
                TOOL_RESULT,
                text,
                entry.record,
                path=entry.path,
                tool=tool,
                call_id=call_id,
                timestamp=ts,
                is_error=is_error,
                extra=extra,
            ),
            False,
        )
        for path, ref in images:
            if entry.rebuilt:
                break
            self.add(
                Item(
                    "tool",
                    IMAGE,
                    "",
                    entry.record,
                    path=path,
                    tool=tool,
                    call_id=call_id,
                    timestamp=ts,
                    image=ref,
                    extra=dict(base),
                ),
                False,
                same_message=True,
            )


def _carried(packed: list[tuple]) -> bool:
    """Whether a line's packed items are those of messages a compaction carried forward."""
    return any(values[EXTRA] is not None and values[EXTRA].get("rebuilt") for values in packed)


def _lines_remembered(scan: Scan, memo) -> tuple[dict[int, bool], set[int]]:
    """The positions of the lines whose items a line memo gives and keeps: from the scan's last
    compaction on, those whose entries are their own, one after the other, and the setup's
    line; and those whose entries that compaction carries forward (a local one), when the memo
    was resumed from that compaction (the items kept of them then are as it carries them),
    each said to be carried or not (items kept as the other kind are not taken). Then the
    lines whose items it only keeps: those it carries otherwise. After a rollback, not a
    compaction's history (it may have cut it short)."""
    start = scan.base.lineno - 1 if scan.base is not None else 0
    from_base = memo.resumed and memo.settled is not None and memo.settled[0] == start > 0
    taken: dict[int, bool] = {}
    kept, seen = set(), set()
    for _, group in itertools.groupby(scan.entries, key=lambda e: id(e.record)):
        group = list(group)
        pos = group[0].record.lineno - 1
        if pos in seen:  # (its entries apart: not one line's items)
            taken.pop(pos, None)
            kept.discard(pos)
        elif scan.rolled_back and group[0].path[1:2] == ("replacement_history",):
            pass
        elif all(e.rebuilt for e in group) and pos < start:
            if from_base:
                taken[pos] = True
            else:
                kept.add(pos)
        elif pos >= start and not any(e.rebuilt for e in group):
            taken[pos] = False
        seen.add(pos)
    if scan.meta_setup is not None and scan.meta_setup[0].lineno - 1 >= start:
        taken[scan.meta_setup[0].lineno - 1] = False
    return taken, kept


def _output_text(output: Any, path: tuple, images: list) -> tuple[str, str, bool]:
    """(text, shape, is_error) of a tool output; image parts are appended to ``images.probe``."""
    if isinstance(output, str):
        wrapper = parse_wrapped(output, exact=False)
        if wrapper is not None:
            meta = wrapper.get("metadata")
            code = meta.get("exit_code") if isinstance(meta, dict) else None
            return wrapper["output"], "wrapped", isinstance(code, int) and not isinstance(code, bool) and code != 0
        return output, "string", False
    if isinstance(output, list):
        texts = []
        for i, part in enumerate(output):
            if not isinstance(part, dict):
                continue
            if part.get("type") in ("input_image", "image"):
                images.append((path + (i,), image_ref(part.get("image_url"))))
            elif isinstance(part.get("text"), str):
                texts.append(part["text"])
        return "\n".join(texts), "list", False
    if isinstance(output, dict):
        if output.get("type") in ("input_image", "image"):
            images.append((path, image_ref(output.get("image_url"))))
            return "", "dict_image", False
        if isinstance(output.get("text"), str):
            return output["text"], "dict_text", False
        if "content" in output:
            content = output["content"]
            error = output.get("success") is False
            if isinstance(content, str):
                return content, "dict_content", error
            text, _shape, _err = _output_text(content, path + ("content",), images)
            return text, "dict_content", error
        return json_text(output), "string", False
    if output is None:
        return "", "string", False
    return json_text(output), "string", False
