"""What the ``openai`` and ``anthropic`` adapters share: plain message lists in two layouts.

Both formats come in two layouts, told apart per file:

- **lines**: one message per line (``{"role":…,"content":…}``), optionally with lines that hold
  several messages at once (the fine-tuning style ``{"messages":[…]}``) and response lines
  (OpenAI ``{"choices":[…]}``, Anthropic ``{"type":"message",…}``) whose assistant message is part
  of the conversation. Every message in the file is model-visible, in file order.
- **bodies**: one request body per line (``{"model":…,"messages":[…]}``), with optional response
  lines in between. The LAST body is the current context: earlier bodies are earlier requests
  that repeat the history, and every edit goes to the last body only. Response lines give usage.

A file is in the bodies layout when it has a line with a ``messages`` list and no line that is a
bare message. Lines that are neither pass through untouched.

The API rejects unknown fields, so lookout marks what it writes by fixed text instead: a setup
block starts with the line ``[lookout:KEY]``, a summary with ``SUMMARY_PREFIX`` (or with the
title of lookout's own summary note), a truncation notice with ``NOTICE_PREFIX``; both end with
a trailer that records the compaction and the ``lookout restore`` marker.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from lookout_cli import formats
from lookout_cli.core.dataclass import dataclass, field, replace
from lookout_cli.core.errors import LookoutError
from lookout_cli.core.jsonl import Record, loads_exact
from lookout_cli.core.saved import carrying
from lookout_cli.formats.claude_items import b64_size
from lookout_cli.formats.sniff import is_bare_message, is_list_record
from lookout_cli.formats.view import (
    IMAGE,
    NOTE_TITLE,
    NOTICE,
    SETUP,
    SUMMARY,
    TEXT,
    THINKING,
    TOOL_CALL,
    TOOL_RESULT,
    Compaction,
    ImageRef,
    Item,
    Usage,
    View,
)

LINES, BODIES = "lines", "bodies"

SUMMARY_PREFIX = "Summary of the earlier conversation (written by lookout compact):\n\n"
NOTICE_PREFIX = "[lookout dropped "
TRAILER_PREFIX = "\n\n[lookout compaction"
_TRAILER_RE = re.compile(r"\[lookout compaction, (\w+)(?:: ([\d,]+) → ([\d,]+) tokens)?\]")
_SETUP_RE = re.compile(r"\[lookout:([A-Za-z0-9_.-]+)\](?:\n|$)")
_DATA_URL_RE = re.compile(r"data:([^;,]*)(;[^,]*)?,", re.S)


# --- small helpers ----------------------------------------------------------------------------

def int_or_zero(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def follow(obj: Any, path: tuple) -> Any:
    for key in path:
        obj = obj[key]
    return obj


def parse_data_url(url: str) -> ImageRef:
    """An ``image_url`` value as an ImageRef: inline base64 data, or a remote URL (0 bytes)."""
    match = _DATA_URL_RE.match(url)
    if match and "base64" in (match.group(2) or ""):
        data = url[match.end():]
        return ImageRef(media_type=match.group(1) or None, data=data, nbytes=b64_size(data))
    return ImageRef(media_type=None, url=url, nbytes=0)


def opaque_text(blob: str) -> str:
    """What an encrypted or redacted blob counts as: text of a quarter of its length."""
    return blob[: len(blob) // 4]


def setup_header(key: str) -> str:
    return f"[lookout:{key}]\n"


def setup_text(key: str, text: str) -> str:
    return setup_header(key) + text


def setup_key(text: str) -> str | None:
    """The key of a setup block lookout wrote, or None."""
    match = _SETUP_RE.match(text)
    return match.group(1) if match else None


def lookout_kind(text: str) -> str | None:
    """SUMMARY / NOTICE / SETUP for text that lookout wrote, else None."""
    if text.startswith(SUMMARY_PREFIX) or text.startswith(NOTE_TITLE + "\n"):
        return SUMMARY
    if text.startswith(NOTICE_PREFIX):
        return NOTICE
    if setup_key(text):
        return SETUP
    return None


def summary_body(text: str) -> str:
    """A summary or notice without its trailer (which changes from run to run)."""
    return text.split(TRAILER_PREFIX, 1)[0]


def compaction_text(body: str, metadata: dict[str, Any], marker: str) -> str:
    trigger = metadata.get("trigger") or "manual"
    pre, post = metadata.get("pre_tokens"), metadata.get("post_tokens")
    trailer = f"[lookout compaction, {trigger}"
    if isinstance(pre, int) and isinstance(post, int):
        trailer += f": {pre:,} → {post:,} tokens"
    trailer += "]"
    if marker:
        trailer += " " + marker
    return body + "\n\n" + trailer


def compaction_entry(item: Item) -> Compaction:
    match = _TRAILER_RE.search(item.text)
    entry = Compaction(record=item.record, timestamp=item.timestamp)
    if match:
        entry.trigger = match.group(1)
        if match.group(2):
            entry.before = int(match.group(2).replace(",", ""))
            entry.after = int(match.group(3).replace(",", ""))
    return entry


def text_part(text: str) -> dict:
    return {"type": "text", "text": text}


def first_text(content: Any) -> str:
    """The string content, or the first text part's text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
                return part["text"]
    return ""


def as_parts(content: Any) -> list:
    """A message's content as a fresh part list (string content becomes one text part)."""
    if isinstance(content, str):
        return [text_part(content)] if content else []
    if isinstance(content, list):
        return list(content)
    return []


def replace_text_content(content: Any, text: str) -> Any:
    """A tool result's content with its text replaced by ``text``; image parts stay."""
    if not isinstance(content, list):
        return text
    out, placed = [], False
    for part in content:
        if isinstance(part, dict) and part.get("type") == "text":
            if not placed:
                out.append(text_part(text))
                placed = True
            continue
        out.append(part)
    if not placed:
        out.insert(0, text_part(text))
    return out


# --- the file's layout ------------------------------------------------------------------------

@dataclass(slots=True)
class Msg:
    """One message of the model-visible list: where it lives and its place in the list."""

    record: Record
    path: tuple  # keys from record.obj to the message object
    index: int

    @property
    def obj(self) -> dict:
        return follow(self.record.obj, self.path)

    @property
    def in_list(self) -> bool:
        return len(self.path) == 2 and self.path[0] == "messages"

    def edit(self) -> dict:
        return follow(self.record.edit(), self.path)

    def exact(self) -> dict:
        """The message parsed exactly (orjson's ``obj`` turns big integers into floats), for
        values that move into an edited record."""
        root = self.record.obj if self.record.edited else loads_exact(self.record.body)
        return follow(root, self.path)


@dataclass(slots=True)
class Layout:
    kind: str
    messages: list[Msg] = field(default_factory=list)
    setup_records: list[Record] = field(default_factory=list)  # records with top-level system/tools
    responses: list[tuple[Record, tuple]] = field(default_factory=list)  # and their nodes
    body: Record | None = None  # the last request body (bodies layout)


# Where ``MessageListAdapter.node`` keeps what it read of a line.
BARE, RESPONSE, LISTED, SETUP_FIELDS, RESPONSE_PATH, MESSAGES, USAGE, RESPONSE_ID, MODEL = range(9)


def _indices(node: tuple) -> Any:
    """The places of a list record's messages (a count when every entry is one)."""
    messages = node[MESSAGES]
    return range(messages) if type(messages) is int else messages


# --- the shared adapter ---------------------------------------------------------------------

class Builder:
    """Collects a view's items, numbering messages and turns."""

    def __init__(self, view: View) -> None:
        self.view = view
        self.message = 0
        self.turn = 0
        self.call_names: dict[str, str] = {}

    def add_message(self, items: list[Item], prompt: bool) -> None:
        if not items:
            return
        if prompt:
            self.turn += 1
            eligible = [i for i in items if i.kind in (TEXT, IMAGE) and not i.text.startswith("[lookout ")]
            texts = [i for i in eligible if i.kind == TEXT]
            (texts or eligible or items)[0].prompt = True
        for item in items:
            item.message = self.message
            item.turn = self.turn
            if item.kind == TOOL_CALL and item.call_id and item.tool:
                self.call_names[item.call_id] = item.tool
            if item.kind in (SUMMARY, NOTICE):  # read before measure's sink cuts the text
                self.view.compactions.append(compaction_entry(item))
            self.view.add(item)
        self.message += 1

    def finish(self) -> None:
        for item in self.view.items:
            if item.kind in (TOOL_RESULT, IMAGE) and item.call_id and not item.tool:
                item.tool = self.call_names.get(item.call_id)


class MessageListAdapter(formats.Adapter):
    """The two layouts, the view skeleton and the edits both message-list formats share.

    A format fills in: ``sniff``, ``is_response``, ``response_message_path``, ``usage``,
    ``message_items``, ``top_setup_items``, ``image_part`` and ``set_setup``, and where its
    summary goes: ``summary_message``, or ``merges_into`` / ``merge_summary`` /
    ``existing_summary`` / ``carried_setup`` to fold it into the first kept message.
    """

    setup_roles: tuple[str, ...] = ("system", "developer")
    lean = True

    # --- hooks ------------------------------------------------------------------------------
    def is_response(self, obj: dict) -> bool:
        raise NotImplementedError

    def response_message_path(self, obj: dict) -> tuple | None:
        raise NotImplementedError

    def usage(self, record: Record, obj: dict) -> Usage | None:
        raise NotImplementedError

    def message_items(self, msg: Msg, obj: dict) -> tuple[list[Item], bool]:
        """The items of one message, and whether it is a real user prompt."""
        raise NotImplementedError

    def top_setup_items(self, record: Record, obj: dict) -> list[list[Item]]:
        """Setup items from a record's top-level ``system`` / ``tools``, one list per message."""
        raise NotImplementedError

    def is_setup_message(self, obj: dict) -> bool:
        """Messages that compaction keeps at the top (the system prompt and its kin)."""
        return obj.get("role") in self.setup_roles

    def image_part(self, media_type: str, data: str) -> dict:
        raise NotImplementedError

    def summary_message(self, text: str, carry: list) -> dict:
        """The message that holds a summary when it is not merged into the kept tail."""
        return {"role": "user", "content": text}

    def merge_summary(self, obj: dict, text: str, carry: list) -> Any:
        """New content for the first kept message with the summary merged in."""
        raise NotImplementedError

    def carried_setup(self, obj: dict) -> list:
        """Setup parts inside a message that compaction drops and that must move along."""
        return []

    def existing_summary(self, obj: dict) -> str | None:
        """The text of a lookout summary or notice at the front of a message (after any setup
        blocks), if there is one."""
        for part in as_parts(obj.get("content")):
            text = part.get("text") if isinstance(part, dict) and part.get("type") == "text" else None
            kind = lookout_kind(text) if isinstance(text, str) else None
            if kind != SETUP:
                return text if kind in (SUMMARY, NOTICE) else None
        return None

    def is_lookout_summary(self, obj: dict) -> bool:
        """A message made only of a lookout summary (or notice) and setup blocks."""
        parts = [p for p in as_parts(obj.get("content"))
                 if not (isinstance(p, dict) and lookout_kind(str(p.get("text"))) == SETUP)]
        return len(parts) == 1 and self.existing_summary(obj) is not None

    # --- layout -----------------------------------------------------------------------------
    def node(self, obj: Any) -> tuple:
        """What a lean transcript keeps of a line: what the layout and the usages read."""
        bare, response, listed = is_bare_message(obj), self.is_response(obj), is_list_record(obj)
        messages = None
        if listed:
            kept = [i for i, m in enumerate(obj["messages"]) if isinstance(m, dict)]
            messages = len(kept) if len(kept) == len(obj["messages"]) else kept  # a count when all are
        model = obj.get("model") if listed and isinstance(obj.get("model"), str) else None
        return (bare, response, listed, "system" in obj or "tools" in obj,
                self.response_message_path(obj) if response else None, messages,
                self.usage(None, obj) if response else None, obj.get("id") if response else None, model)

    def layout(self, transcript: formats.Transcript) -> Layout:
        lines = [(r, n) for r in transcript.records if (n := self.record_node(r)) is not None]
        bare = any(n[BARE] and not n[RESPONSE] for _, n in lines)
        bodies = [(r, n) for r, n in lines if n[LISTED]]
        if bodies and not bare:
            body, node = bodies[-1]
            layout = Layout(BODIES, body=body, setup_records=[body])
            layout.responses = [(r, n) for r, n in lines if n[RESPONSE]]
            layout.messages = [Msg(body, ("messages", i), at) for at, i in enumerate(_indices(node))]
            return layout
        layout = Layout(LINES)
        for record, node in lines:
            if node[RESPONSE]:
                layout.responses.append((record, node))
                if node[RESPONSE_PATH] is not None:
                    layout.messages.append(Msg(record, node[RESPONSE_PATH], len(layout.messages)))
            elif node[LISTED]:
                if node[SETUP_FIELDS]:
                    layout.setup_records.append(record)
                for i in _indices(node):
                    layout.messages.append(Msg(record, ("messages", i), len(layout.messages)))
            elif node[BARE]:
                layout.messages.append(Msg(record, (), len(layout.messages)))
            elif node[SETUP_FIELDS]:
                layout.setup_records.append(record)
        return layout

    # --- view -------------------------------------------------------------------------------
    def view(self, transcript: formats.Transcript) -> View:
        layout = self.layout(transcript)
        view = View(format=self.name, sink=transcript.sink)
        seen: set[str] = set()
        for record, node in layout.responses:
            usage, rid = node[USAGE], node[RESPONSE_ID]
            if usage is None or (isinstance(rid, str) and rid in seen):
                continue
            if isinstance(rid, str):
                seen.add(rid)
            view.usages.append(replace(usage, record=record))
        models = [u.model for u in view.usages if u.model]
        body_model = self.record_node(layout.body)[MODEL] if layout.body is not None else None
        view.model = body_model if body_model is not None else models[-1] if models else None  # known before the items
        build = Builder(view)
        setup_first = {id(r) for r in layout.setup_records}
        done: set[int] = set()
        line = formats.OneLine()
        for msg in layout.messages:
            line.visit(msg.record)
            if id(msg.record) in setup_first and id(msg.record) not in done:
                done.add(id(msg.record))
                for items in self.top_setup_items(msg.record, msg.record.data):
                    build.add_message(items, False)
            items, prompt = self.message_items(msg, msg.obj)
            build.add_message(items, prompt)
        line.close()
        for record in layout.setup_records:  # setup records without messages
            if id(record) not in done:
                for items in self.top_setup_items(record, record.data):
                    build.add_message(items, False)
                record.release()
        build.finish()
        stamps = [i.timestamp for i in view.items if i.timestamp] + [u.timestamp for u in view.usages if u.timestamp]
        view.last_timestamp = max(stamps) if stamps else None
        return view

    def item(self, msg: Msg, role: str, kind: str, text: str, local: tuple = (), **kw: Any) -> Item:
        """An item of ``msg`` at ``local`` (a path inside the message)."""
        obj = msg.obj
        stamp = obj.get("timestamp") if isinstance(obj.get("timestamp"), str) else None
        item = Item(role=role, kind=kind, text=text, record=msg.record, path=msg.path + local,
                    timestamp=stamp, **kw)
        item.extra["mpath"] = msg.path
        return item

    def _msg_of(self, transcript: formats.Transcript, item: Item) -> Msg:
        mpath = item.extra.get("mpath")
        for msg in self.layout(transcript).messages:
            if msg.record is item.record and msg.path == mpath:
                return msg
        raise LookoutError(f"{self.name}: the item's message is no longer in the transcript")

    # --- replace_content ----------------------------------------------------------------------
    def replace_content(self, transcript: formats.Transcript, item: Item, text: str) -> None:
        if item.opaque or item.kind in (THINKING, TOOL_CALL, SETUP, SUMMARY):
            raise LookoutError(f"{self.name}: cannot replace the content of a {item.kind} item")
        if _replaced(item.kind, follow(item.record.obj, item.path), text) is None:
            return  # already replaced: nothing to do
        node = follow(item.record.edit(), item.path)
        new = _replaced(item.kind, node, text)
        if isinstance(node, dict):
            node.clear()
            node.update(new)
        else:
            follow(item.record.obj, item.path[:-1])[item.path[-1]] = new
        transcript.invalidate()

    # --- add_parts ----------------------------------------------------------------------------
    def add_parts(self, transcript: formats.Transcript, prompt: Item, parts: list[dict]) -> None:
        msg = self._msg_of(transcript, prompt)
        new = []
        for part in parts:
            if part.get("type") == "text":
                new.append(text_part(part["text"]))
            elif part.get("type") == "image":
                new.append(self.image_part(part["media_type"], part["data"]))
            else:
                raise LookoutError(f"{self.name}: cannot attach a part of type {part.get('type')!r}")
        new = [p for p in new if p not in as_parts(msg.obj.get("content"))]
        if not new:
            return
        obj = msg.edit()
        obj["content"] = as_parts(obj.get("content")) + new
        transcript.invalidate()

    # --- structural helpers -------------------------------------------------------------------
    def insert_message(self, transcript: formats.Transcript, layout: Layout, new: dict, *,
                       before: Msg | None = None, after: Msg | None = None) -> Record:
        """Put a new message before or after another (or at the end); returns the record."""
        anchor = before or after
        if anchor is None:
            if layout.body is not None:
                layout.body.edit()["messages"].append(new)
                transcript.invalidate()
                return layout.body
            record = Record.new(new)
            transcript.append([record])
            return record
        if anchor.in_list:
            at = anchor.path[1] + (1 if after is not None else 0)
            anchor.record.edit()["messages"].insert(at, new)
            transcript.invalidate()
            return anchor.record
        record = Record.new(new)
        if after is not None:
            transcript.insert_after(anchor.record, [record])
        else:
            at = transcript.records.index(anchor.record)
            transcript.insert_after(transcript.records[at - 1] if at else None, [record])
        return record

    def remove_message(self, transcript: formats.Transcript, msg: Msg) -> None:
        if msg.in_list:
            del msg.record.edit()["messages"][msg.path[1]]
            transcript.invalidate()
        else:
            transcript.remove([msg.record])

    # --- compact ------------------------------------------------------------------------------
    def compact(self, transcript: formats.Transcript, summary: str | None, keep_from: Item | None,
                metadata: dict[str, Any]) -> list[Record]:
        """Rewrite the message list: setup messages stay where they are, every other message
        before ``keep_from`` goes, and one summary takes their place right before the kept tail
        (in the kept tail's own line when it shares a ``{"messages":[…]}`` line or a request
        body; Anthropic folds it into the kept user message). Whole lines that go are removed,
        lines that hold the kept tail are edited; all of them are handed to ``save`` first, and
        the marker it returns ends the summary, so ``lookout restore`` replaces the summary's
        line with the original lines."""
        layout = self.layout(transcript)
        msgs = layout.messages
        keep_at = self._msg_of(transcript, keep_from).index if keep_from is not None else len(msgs)
        keep = msgs[keep_at] if keep_at < len(msgs) else None
        # a split inside a turn: the request's messages stay word for word, the summary before them
        request = sorted({self._msg_of(transcript, i).index for i in metadata.get("request") or ()})
        request = [msgs[n] for n in request if n < keep_at]
        if request:
            keep = request[0]
        dropped = [m for m in msgs[:keep_at] if not self.is_setup_message(m.obj) and m not in request]
        carry = [p for m in dropped for p in self.carried_setup(m.exact())]
        merge = keep is not None and self.merges_into(keep.obj)

        if summary is not None:  # lookout's own note carries its title: no second heading
            body = summary.strip()
            if not body.startswith(NOTE_TITLE + "\n"):
                body = SUMMARY_PREFIX + body
        else:
            count = sum(1 for m in dropped if not self.is_lookout_summary(m.obj))
            body = f"[lookout dropped {count} earlier messages to fit the context window]"
        if self._already(summary, body, dropped, keep, merge):
            return []

        # Plan: whole-record messages go, list records lose messages, the host gets the summary.
        drop_ids = {id(m) for m in dropped}
        by_record: dict[int, list[Msg]] = {}
        for m in msgs:
            by_record.setdefault(id(m.record), []).append(m)
        removed: list[Record] = []
        edited: list[Record] = []
        for m in dropped:
            if not m.in_list:
                removed.append(m.record)
            elif m.record not in edited:
                edited.append(m.record)
        for record in list(edited):
            empty = all(id(m) in drop_ids for m in by_record[id(record)])
            hosts = keep is not None and keep.record is record
            if empty and not hosts and set(record.data) <= {"messages"}:
                edited.remove(record)
                removed.append(record)
        if keep is None:
            host = layout.body  # None: a new line at the end
        elif merge or keep.in_list:
            host = keep.record
        else:
            host = None  # a new line before the kept tail
        if host is not None and host not in edited:
            edited.append(host)
        # What came in is saved; lines added in this run (no original bytes) need no restoring.
        # The lines among them that stay (unknown records, setup, lines that are not JSON) are
        # saved too, and move right after the summary's line, so that restore puts the saved
        # lines back in their place instead of those copies (``saved.carrying``).
        touched = {id(r) for r in removed + edited}
        spanned = touched | {id(m.record) for m in request}  # the request's lines stay between the summary and the steps
        at = [n for n, r in enumerate(transcript.records) if id(r) in spanned and r.raw is not None]
        span = transcript.records[at[0]: at[-1] + 1] if at else []
        carried = [r for r in span if id(r) not in touched and r.raw is not None]
        save: Callable[[list[Record]], str] | None = metadata.get("save")
        marker = ""
        if save is not None and span:
            marker = carrying(save([r for r in span if r.raw is not None]), len(carried))
        text = compaction_text(body, metadata, marker)

        # Apply.
        for record in edited:
            obj = record.edit()
            if not is_list_record(obj):  # a whole-record message the summary merges into
                target = follow(obj, keep.path)
                target["content"] = self.merge_summary(target, text, carry)
                continue
            new_list = []
            for m in by_record.get(id(record), []):
                if id(m) in drop_ids:
                    continue
                value = follow(obj, m.path)
                if m is keep:
                    if merge:
                        value["content"] = self.merge_summary(value, text, carry)
                    else:
                        new_list.append(self.summary_message(text, carry))
                new_list.append(value)
            if keep is None and record is host:
                new_list.append(self.summary_message(text, carry))
            obj["messages"] = new_list
        written = list(edited)
        if host is None:
            host = Record.new(self.summary_message(text, carry))
            if keep is None:
                transcript.append([host])
            else:
                n = transcript.records.index(keep.record)
                transcript.insert_after(transcript.records[n - 1] if n else None, [host])
            written.append(host)
        transcript.remove(removed)
        if marker and carried:
            transcript.remove(carried)
            transcript.insert_after(host, carried)
        transcript.invalidate()
        return written

    def _already(self, summary: str | None, body: str, dropped: list[Msg], keep: Msg | None,
                 merge: bool) -> bool:
        """True when the same compaction already stands where this one would go."""
        if merge:
            existing = self.existing_summary(keep.obj)
            if dropped or existing is None:
                return False
        else:
            if len(dropped) != 1 or not self.is_lookout_summary(dropped[0].obj):
                return False
            existing = self.existing_summary(dropped[0].obj)
        if summary is None:  # a truncation with nothing new to drop
            return existing.startswith(NOTICE_PREFIX)
        return summary_body(existing) == body

    def merges_into(self, obj: dict) -> bool:
        """Whether the summary merges into this first kept message instead of standing alone."""
        return False


def _replaced(kind: str, node: Any, text: str) -> Any:
    """``node`` (a part, a tool result or a string) with its content replaced by ``text``;
    None when it already is."""
    if kind == IMAGE:
        new = text_part(text)
    elif kind == TOOL_RESULT and isinstance(node, dict):
        new = dict(node)
        new["content"] = replace_text_content(node.get("content"), text)
    elif isinstance(node, str):
        new = text
    elif isinstance(node, dict):
        new = dict(node)
        new["refusal" if "refusal" in node and "text" not in node else "text"] = text
    else:
        raise LookoutError("cannot replace this part")
    return None if new == node else new

