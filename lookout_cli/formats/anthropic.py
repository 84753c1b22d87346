"""Anthropic Messages API message lists (research/formats.md §4).

Either one message per line (``{"role":…,"content":…}``, optionally ``{"messages":[…]}`` lines
and ``{"type":"message",…}`` responses, whose content is an assistant message) or one request
body per line (``{"model":…,"system":…,"tools":…,"max_tokens":…,"messages":[…]}``, the last body
being the current context); see ``message_list`` for the two layouts.

What each block becomes:

- ``system`` (top level) → SETUP "system", ``tools`` → SETUP "tools"; a ``{"role":"system"}``
  line (not the API's, but logs have them) → SETUP "system"; a text block lookout wrote with
  ``set_setup`` (first line ``[lookout:KEY]``) → SETUP KEY.
- user text → TEXT (the first of a message without tool results is the prompt), image → IMAGE,
  document → TEXT (its text source, if any), tool_result → TOOL_RESULT paired by
  ``tool_use_id`` with ``is_error`` (images inside → IMAGE); a lookout summary → SUMMARY, a
  lookout truncation notice → NOTICE. A user message made only of tool results is not a prompt.
- assistant text → TEXT, thinking → THINKING (opaque: signed), redacted_thinking → THINKING
  (opaque, counted as a quarter of its length), tool_use / server_tool_use → TOOL_CALL,
  server tool results → TOOL_RESULT, a context-management ``compaction`` block → SUMMARY (opaque).

Usage comes from response lines: ``input_tokens`` is uncached input, cache writes and reads
are ``cache_creation_input_tokens`` / ``cache_read_input_tokens``.
"""

from __future__ import annotations

from typing import Any

from lookout_cli import formats
from lookout_cli.core.jsonl import Record
from lookout_cli.formats import sniff as sniffers
from lookout_cli.formats.claude_items import dumps, image_ref, text_of_result
from lookout_cli.formats.message_list import (
    BODIES,
    MessageListAdapter,
    Msg,
    as_parts,
    int_or_zero,
    lookout_kind,
    opaque_text,
    setup_header,
    setup_key,
    setup_text,
    text_part,
)
from lookout_cli.formats.sniff import anthropic_response, iter_parts
from lookout_cli.formats.view import (
    IMAGE,
    NOTICE,
    SETUP,
    SUMMARY,
    TEXT,
    THINKING,
    TOOL_CALL,
    TOOL_RESULT,
    Item,
    Usage,
)


def _is_setup_block(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str) \
        and setup_key(block["text"]) is not None


def _is_summary_block(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str) \
        and lookout_kind(block["text"]) in (SUMMARY, NOTICE)


class Adapter(MessageListAdapter):
    name = "anthropic"

    sniff = staticmethod(sniffers.anthropic)

    # --- reading ----------------------------------------------------------------------------
    def is_response(self, obj: dict) -> bool:
        return anthropic_response(obj)

    def response_message_path(self, obj: dict) -> tuple | None:
        return ()

    def usage(self, record: Record, obj: dict) -> Usage | None:
        u = obj.get("usage")
        if not isinstance(u, dict):
            return None
        created = u.get("cache_creation") if isinstance(u.get("cache_creation"), dict) else {}
        model = obj.get("model") if isinstance(obj.get("model"), str) else None
        stamp = obj.get("timestamp") if isinstance(obj.get("timestamp"), str) else None
        return Usage(record=record, input=int_or_zero(u.get("input_tokens")),
                     cache_write=int_or_zero(u.get("cache_creation_input_tokens")),
                     cache_read=int_or_zero(u.get("cache_read_input_tokens")),
                     output=int_or_zero(u.get("output_tokens")),
                     cache_write_1h=int_or_zero(created.get("ephemeral_1h_input_tokens")),
                     model=model, timestamp=stamp)

    def top_setup_items(self, record: Record, obj: dict) -> list[list[Item]]:
        groups: list[list[Item]] = []
        system = obj.get("system")
        if isinstance(system, str) and system:
            groups.append([Item(role="system", kind=SETUP, text=system, record=record, path=("system",),
                                setup=setup_key(system) or "system")])
        elif isinstance(system, list):
            group = [Item(role="system", kind=SETUP, text=b["text"], record=record, path=("system", i),
                          setup=setup_key(b["text"]) or "system")
                     for i, b in iter_parts(system) if isinstance(b.get("text"), str)]
            if group:
                groups.append(group)
        tools = obj.get("tools")
        if isinstance(tools, list) and tools:
            groups.append([Item(role="system", kind=SETUP, text=dumps(tools), record=record, path=("tools",),
                                setup="tools")])
        return groups

    def message_items(self, msg: Msg, obj: dict) -> tuple[list[Item], bool]:
        role = obj.get("role") if isinstance(obj.get("role"), str) else "user"
        content = obj.get("content")
        items: list[Item] = []
        if role in self.setup_roles:
            if isinstance(content, str):
                items.append(self.item(msg, role, SETUP, content, ("content",), setup=setup_key(content) or "system"))
            for i, block in iter_parts(content):
                if isinstance(block.get("text"), str):
                    items.append(self.item(msg, role, SETUP, block["text"], ("content", i),
                                           setup=setup_key(block["text"]) or "system"))
            return items, False
        if isinstance(content, str):
            items.append(self._text(msg, role, content, ("content",)))
        has_result = False
        for i, block in iter_parts(content):
            btype = block.get("type")
            local = ("content", i)
            if btype == "text":
                text = block.get("text") if isinstance(block.get("text"), str) else ""
                items.append(self._text(msg, role, text, local))
            elif btype == "image":
                items.append(self.item(msg, role, IMAGE, "", local, image=image_ref(block.get("source"))))
            elif btype == "thinking":
                text = block.get("thinking") if isinstance(block.get("thinking"), str) else ""
                items.append(self.item(msg, role, THINKING, text, local, opaque=bool(block.get("signature"))))
            elif btype == "redacted_thinking":
                data = block.get("data") if isinstance(block.get("data"), str) else ""
                items.append(self.item(msg, role, THINKING, opaque_text(data), local, opaque=True))
            elif btype in formats.CALL_BLOCKS:
                name = block.get("name") if isinstance(block.get("name"), str) else ""
                call_id = block.get("id") if isinstance(block.get("id"), str) else None
                items.append(self.item(msg, role, TOOL_CALL, name + dumps(block.get("input", {})), local,
                                       tool=name or None, call_id=call_id))
            elif btype == "tool_result" or (isinstance(btype, str) and btype.endswith("_tool_result")):
                has_result = has_result or btype == "tool_result"
                items.extend(self._result(msg, role, block, local))
            elif btype == "compaction":
                text = block.get("content") if isinstance(block.get("content"), str) else \
                    opaque_text(block.get("encrypted_content") or "")
                items.append(self.item(msg, role, SUMMARY, text, local, opaque=True))
            elif btype == "document":
                source = block.get("source")
                text = source.get("data") if isinstance(source, dict) and source.get("type") == "text" else ""
                items.append(self.item(msg, role, TEXT, text if isinstance(text, str) else "", local,
                                       extra={"block": btype}))
            else:
                items.append(self.item(msg, role, TEXT, dumps(block), local, extra={"block": btype}))
        prompt = role == "user" and not has_result and any(i.kind in (TEXT, IMAGE) for i in items)
        return items, prompt

    def _text(self, msg: Msg, role: str, text: str, local: tuple) -> Item:
        kind = lookout_kind(text) if role == "user" else None
        return self.item(msg, role, kind or TEXT, text, local, setup=setup_key(text) if kind == SETUP else None)

    def _result(self, msg: Msg, role: str, block: dict, local: tuple) -> list[Item]:
        call_id = block.get("tool_use_id") if isinstance(block.get("tool_use_id"), str) else None
        content = block.get("content")
        text = text_of_result(content)
        if not text and block.get("type") != "tool_result" and content is not None:
            text = dumps(content)  # server tool results: count what they carry
        items = [self.item(msg, role, TOOL_RESULT, text, local, call_id=call_id,
                           is_error=bool(block.get("is_error")))]
        for j, inner in iter_parts(content):
            if inner.get("type") == "image":
                items.append(self.item(msg, role, IMAGE, "", (*local, "content", j), call_id=call_id,
                                       image=image_ref(inner.get("source"))))
        return items

    # --- writing ----------------------------------------------------------------------------
    def image_part(self, media_type: str, data: str) -> dict:
        return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}

    def carried_setup(self, obj: dict) -> list:
        """Setup blocks move into the message that takes the summary (a user message made only
        of setup blocks is dropped too, so that roles keep alternating)."""
        if obj.get("role") != "user":
            return []
        return [b for b in as_parts(obj.get("content")) if _is_setup_block(b)]

    def merges_into(self, obj: dict) -> bool:
        return obj.get("role") == "user"  # roles must alternate: no second user message

    def merge_summary(self, obj: dict, text: str, carry: list) -> Any:
        """Setup blocks first, then the summary, then the message's own blocks (an earlier
        lookout summary at its front is replaced)."""
        blocks = as_parts(obj.get("content"))
        own_setup = [b for b in blocks if _is_setup_block(b)]
        rest = [b for b in blocks if not _is_setup_block(b) and not _is_summary_block(b)]
        return carry + own_setup + [text_part(text)] + rest

    def summary_message(self, text: str, carry: list) -> dict:
        return {"role": "user", "content": carry + [text_part(text)]}

    def set_setup(self, transcript: formats.Transcript, key: str, text: str | None) -> None:
        """Bodies: a text block appended to the last body's ``system``. One message per line:
        a text block at the front of the first user message (a user message of its own at the
        top when the conversation does not start with the user). The block's first line is
        ``[lookout:KEY]``."""
        layout = self.layout(transcript)
        header = setup_header(key)
        new_text = setup_text(key, text) if text is not None else None
        if layout.kind == BODIES:
            self._set_system(transcript, layout.body, header, new_text)
            return
        msgs = [m for m in layout.messages if m.obj.get("role") not in self.setup_roles]
        for msg in msgs:
            if msg.obj.get("role") != "user":
                continue
            blocks = as_parts(msg.obj.get("content"))
            found = [i for i, b in enumerate(blocks) if _is_setup_block(b) and b["text"].startswith(header)]
            if not found:
                continue
            at = found[0]
            if new_text is not None and blocks[at]["text"] == new_text:
                return
            if new_text is None and len(blocks) == 1:
                self.remove_message(transcript, msg)
                return
            obj = msg.edit()
            blocks = as_parts(obj.get("content"))
            if new_text is None:
                del blocks[at]
            else:
                blocks[at] = {**blocks[at], "text": new_text}
            obj["content"] = blocks
            transcript.invalidate()
            return
        if new_text is None:
            return
        first = msgs[0] if msgs else None
        if first is not None and first.obj.get("role") == "user":
            obj = first.edit()
            blocks = as_parts(obj.get("content"))
            at = 0
            while at < len(blocks) and (_is_setup_block(blocks[at]) or
                                        (isinstance(blocks[at], dict) and blocks[at].get("type") == "tool_result")):
                at += 1
            blocks.insert(at, text_part(new_text))
            obj["content"] = blocks
            transcript.invalidate()
        else:
            self.insert_message(transcript, layout, {"role": "user", "content": [text_part(new_text)]},
                                before=first)

    def _set_system(self, transcript: formats.Transcript, body: Record, header: str, new_text: str | None) -> None:
        system = body.data.get("system")
        blocks = list(system) if isinstance(system, list) else []
        found = [i for i, b in enumerate(blocks) if _is_setup_block(b) and b["text"].startswith(header)]
        if (new_text is None and not found) or (found and blocks[found[0]]["text"] == new_text):
            return
        obj = body.edit()
        system = obj.get("system")
        blocks = [text_part(system)] if isinstance(system, str) and system else \
            list(system) if isinstance(system, list) else []
        if not found:
            blocks.append(text_part(new_text))
        elif new_text is None:
            del blocks[found[0]]
        else:
            blocks[found[0]] = {**blocks[found[0]], "text": new_text}
        if blocks:
            obj["system"] = blocks
        else:
            obj.pop("system", None)
        transcript.invalidate()
