"""OpenAI Chat Completions message lists (research/formats.md §3.1).

Either one message per line (``{"role":…,"content":…}``, optionally ``{"messages":[…]}`` lines
and ``{"choices":[…]}`` responses) or one request body per line (``{"model":…,"messages":[…]}``,
the last body being the current context); see ``message_list`` for the two layouts.

What each message becomes:

- ``system`` / ``developer`` → SETUP "system" (a message lookout wrote with ``set_setup`` starts
  with the line ``[lookout:KEY]`` and is SETUP KEY); a body's ``tools`` → SETUP "tools".
- ``user``: text parts → TEXT (the first one of the message is the prompt), ``image_url``
  parts → IMAGE (a data URL carries the bytes; an http URL is a reference of 0 bytes), other
  parts (audio, files) → TEXT with their text, if any; a lookout summary → SUMMARY, a lookout
  truncation notice → NOTICE.
- ``assistant``: content and refusal → TEXT, ``reasoning_content`` (OpenAI-compatible servers)
  → THINKING, ``tool_calls[]`` → TOOL_CALL (``function_call`` of old: a call without an id).
- ``tool`` → TOOL_RESULT paired by ``tool_call_id`` (image parts inside → IMAGE).

Usage comes from response lines: ``prompt_tokens`` includes cached tokens, so
input = prompt_tokens − cached_tokens (− cache_write_tokens, when recorded).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from lookout_cli import formats
from lookout_cli.core.jsonl import Record
from lookout_cli.formats import sniff as sniffers
from lookout_cli.formats.claude_items import dumps, text_of_result
from lookout_cli.formats.message_list import (
    MessageListAdapter,
    Msg,
    first_text,
    int_or_zero,
    lookout_kind,
    parse_data_url,
    setup_header,
    setup_key,
    setup_text,
)
from lookout_cli.formats.sniff import iter_parts, openai_response
from lookout_cli.formats.view import IMAGE, SETUP, TEXT, THINKING, TOOL_CALL, TOOL_RESULT, Item, Usage


class Adapter(MessageListAdapter):
    name = "openai"

    sniff = staticmethod(sniffers.openai)

    # --- reading ----------------------------------------------------------------------------
    def is_response(self, obj: dict) -> bool:
        return openai_response(obj)

    def response_message_path(self, obj: dict) -> tuple | None:
        choices = obj.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict) \
                and isinstance(choices[0].get("message"), dict):
            return ("choices", 0, "message")
        return None

    def usage(self, record: Record, obj: dict) -> Usage | None:
        u = obj.get("usage")
        if not isinstance(u, dict):
            return None
        prompt = int_or_zero(u.get("prompt_tokens"))
        details = u.get("prompt_tokens_details") if isinstance(u.get("prompt_tokens_details"), dict) else {}
        cached, written = int_or_zero(details.get("cached_tokens")), int_or_zero(details.get("cache_write_tokens"))
        created = obj.get("created")
        stamp = None
        if isinstance(created, int) and not isinstance(created, bool) and 0 < created < 1 << 34:
            stamp = dt.datetime.fromtimestamp(created, dt.timezone.utc).isoformat().replace("+00:00", "Z")
        model = obj.get("model") if isinstance(obj.get("model"), str) else None
        return Usage(record=record, input=max(0, prompt - cached - written), cache_write=written,
                     cache_read=cached, output=int_or_zero(u.get("completion_tokens")), model=model,
                     timestamp=stamp)

    def top_setup_items(self, record: Record, obj: dict) -> list[list[Item]]:
        tools = obj.get("tools")
        if not isinstance(tools, list) or not tools:
            return []
        return [[Item(role="system", kind=SETUP, text=dumps(tools), record=record, path=("tools",),
                      setup="tools")]]

    def message_items(self, msg: Msg, obj: dict) -> tuple[list[Item], bool]:
        role = obj.get("role") if isinstance(obj.get("role"), str) else "user"
        content = obj.get("content")
        items: list[Item] = []
        if role in self.setup_roles:
            for local, text in _texts(content):
                items.append(self.item(msg, role, SETUP, text, local, setup=setup_key(text) or "system"))
            return items, False
        if role in ("tool", "function"):
            call_id = obj.get("tool_call_id") if isinstance(obj.get("tool_call_id"), str) else None
            tool = obj.get("name") if role == "function" and isinstance(obj.get("name"), str) else None
            items.append(self.item(msg, role, TOOL_RESULT, text_of_result(content), (), call_id=call_id,
                                   tool=tool))
            for i, part in iter_parts(content):
                if part.get("type") == "image_url":
                    items.append(self._image(msg, role, part, i, call_id=call_id, tool=tool))
            return items, False
        if role == "assistant":
            reasoning = obj.get("reasoning_content")
            if isinstance(reasoning, str) and reasoning:
                items.append(self.item(msg, role, THINKING, reasoning, ("reasoning_content",)))
        if isinstance(content, str):
            items.append(self._text(msg, role, content, ("content",)))
        for i, part in iter_parts(content):
            ptype = part.get("type")
            if ptype == "image_url":
                items.append(self._image(msg, role, part, i))
            elif ptype == "refusal" and isinstance(part.get("refusal"), str):
                items.append(self.item(msg, role, TEXT, part["refusal"], ("content", i)))
            elif ptype == "text" and isinstance(part.get("text"), str):
                items.append(self._text(msg, role, part["text"], ("content", i)))
            else:  # audio, files: counted by their text, if any
                text = part.get("text") if isinstance(part.get("text"), str) else ""
                items.append(self.item(msg, role, TEXT, text, ("content", i), extra={"part": ptype}))
        if role == "assistant":
            if isinstance(obj.get("refusal"), str) and obj["refusal"]:
                items.append(self.item(msg, role, TEXT, obj["refusal"], ("refusal",)))
            calls = obj.get("tool_calls")
            for i, call in iter_parts(calls):
                name, args = _call(call)
                call_id = call.get("id") if isinstance(call.get("id"), str) else None
                items.append(self.item(msg, role, TOOL_CALL, name + args, ("tool_calls", i), tool=name or None,
                                       call_id=call_id))
            legacy = obj.get("function_call")
            if isinstance(legacy, dict):
                name, args = _call({"function": legacy})
                items.append(self.item(msg, role, TOOL_CALL, name + args, ("function_call",), tool=name or None))
        prompt = role == "user" and any(i.kind in (TEXT, IMAGE) for i in items)
        return items, prompt

    def _text(self, msg: Msg, role: str, text: str, local: tuple) -> Item:
        kind = lookout_kind(text) if role == "user" else None
        return self.item(msg, role, kind or TEXT, text, local, setup=setup_key(text) if kind == SETUP else None)

    def _image(self, msg: Msg, role: str, part: dict, i: int, **kw: Any) -> Item:
        image_url = part.get("image_url")
        url = image_url.get("url") if isinstance(image_url, dict) else image_url
        ref = parse_data_url(url) if isinstance(url, str) else None
        return self.item(msg, role, IMAGE, "", ("content", i), image=ref, **kw)

    # --- writing ----------------------------------------------------------------------------
    def image_part(self, media_type: str, data: str) -> dict:
        return {"type": "image_url", "image_url": {"url": f"data:{media_type};base64,{data}"}}

    def set_setup(self, transcript: formats.Transcript, key: str, text: str | None) -> None:
        """A system message (developer, if the file uses that role) right after the setup
        messages at the top, whose text starts with the line ``[lookout:KEY]``."""
        layout = self.layout(transcript)
        msgs = layout.messages
        header = setup_header(key)
        for msg in msgs:
            obj = msg.obj
            if obj.get("role") in self.setup_roles and first_text(obj.get("content")).startswith(header):
                if text is None:
                    self.remove_message(transcript, msg)
                elif obj.get("content") != setup_text(key, text):
                    msg.edit()["content"] = setup_text(key, text)
                    transcript.invalidate()
                return
        if text is None:
            return
        role = "developer" if any(m.obj.get("role") == "developer" for m in msgs) else "system"
        new = {"role": role, "content": setup_text(key, text)}
        leading = 0
        while leading < len(msgs) and msgs[leading].obj.get("role") in self.setup_roles:
            leading += 1
        if leading:
            self.insert_message(transcript, layout, new, after=msgs[leading - 1])
        else:
            self.insert_message(transcript, layout, new, before=msgs[0] if msgs else None)


def _texts(content: Any) -> list[tuple[tuple, str]]:
    """(path inside the message, text) of a string content or of its text parts."""
    if isinstance(content, str):
        return [(("content",), content)]
    return [(("content", i), p["text"]) for i, p in iter_parts(content)
            if p.get("type") == "text" and isinstance(p.get("text"), str)]


def _call(call: dict) -> tuple[str, str]:
    """(name, arguments text) of a function or custom tool call."""
    fn = call.get("function") if isinstance(call.get("function"), dict) else call.get("custom")
    if not isinstance(fn, dict):
        return "", ""
    name = fn.get("name") if isinstance(fn.get("name"), str) else ""
    args = fn.get("arguments", fn.get("input", ""))
    return name, args if isinstance(args, str) else dumps(args)

