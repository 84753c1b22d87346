"""Gemini CLI JSONL sessions (research/formats.md §5), read-only.

The file is an append-only log written by gemini-cli's ChatRecordingService
(``packages/core/src/services/chatRecordingService.ts``): a metadata line
(``sessionId``, ``projectHash``, ``startTime``…), then message records keyed by ``id`` (a record
with an id already seen replaces that message in place: tool calls, results and tokens are
added by rewriting the whole message), ``{"$set": {…}}`` metadata patches (a non-empty
``$set.messages`` replaces the whole message list) and ``{"$rewindTo": id}`` markers, which drop
that message and every later one (an unknown id drops them all).

What the model sees follows ``convertSessionToClientHistory`` (``packages/core/src/utils/
sessionUtils.ts``): ``info``/``error``/``warning`` records and slash commands are not sent; a
``gemini`` record is a model turn whose ``toolCalls`` each hold a call and, once run, its result
(sent back as the next user turn). ``thoughts`` are shown as thinking items.
"""

from __future__ import annotations

import json
import re
from typing import Any

from lookout_cli import formats
from lookout_cli.core.jsonl import Record
from lookout_cli.formats import sniff as sniffers
from lookout_cli.formats.view import IMAGE, TEXT, THINKING, TOOL_CALL, TOOL_RESULT, ImageRef, Item, Usage, View

MODEL_INPUT_TYPES = frozenset({"user", "gemini"})
_ISO_RE = re.compile(r"\A\d{4}-\d\d-\d\dT")


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), sort_keys=False)


def _int(value: Any) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, (int, float)):
        return int(value)
    return 0


def _parts(content: Any, path: tuple) -> list[tuple[tuple, Any]]:
    """A PartListUnion as (path, part) pairs; bare strings become text parts."""
    if isinstance(content, str):
        return [(path, {"text": content})]
    if isinstance(content, dict):
        return [(path, content)]
    if isinstance(content, list):
        out = []
        for i, part in enumerate(content):
            if isinstance(part, str):
                out.append((path + (i,), {"text": part}))
            elif isinstance(part, dict):
                out.append((path + (i,), part))
        return out
    return []


def _text_of(content: Any) -> str:
    return "".join(p["text"] for _path, p in _parts(content, ()) if isinstance(p.get("text"), str))


def _image(part: dict) -> ImageRef | None:
    inline = part.get("inlineData")
    if isinstance(inline, dict):
        data = inline.get("data") if isinstance(inline.get("data"), str) else None
        nbytes = 0
        if data:
            nbytes = max(0, len(data) * 3 // 4 - (len(data) - len(data.rstrip("="))))
        return ImageRef(media_type=formats.as_str(inline.get("mimeType")), data=data, nbytes=nbytes)
    file_data = part.get("fileData")
    if isinstance(file_data, dict) and str(file_data.get("mimeType", "")).startswith("image/"):
        return ImageRef(media_type=file_data["mimeType"], url=formats.as_str(file_data.get("fileUri")))
    return None


def _fingerprint(name: Any, args: Any) -> str:
    return f"{name or ''}:{json.dumps(args if args is not None else {}, sort_keys=True, ensure_ascii=False)}"


class Adapter(formats.Adapter):
    name = "gemini-cli"
    can_write = False

    sniff = staticmethod(sniffers.gemini_cli)

    def _fold(self, transcript: formats.Transcript) -> tuple[dict, dict]:
        """Replay the log: the surviving messages (id -> (record, path, message)) and metadata."""
        messages: dict[str, tuple[Record, tuple, dict]] = {}
        meta: dict[str, Any] = {}
        for record in transcript.records:
            data = record.data
            if data is None:
                continue
            rewind = data.get("$rewindTo")
            if isinstance(rewind, str):
                if rewind in messages:
                    ids = list(messages)
                    for doomed in ids[ids.index(rewind) :]:
                        del messages[doomed]
                else:
                    messages.clear()
            elif isinstance(data.get("id"), str):
                messages[data["id"]] = (record, (), data)  # an update keeps the message's place
            elif isinstance(data.get("$set"), dict):
                patch = data["$set"]
                meta.update(patch)
                listed = patch.get("messages")
                if isinstance(listed, list) and listed:
                    messages = {}
                    for i, msg in enumerate(listed):
                        if isinstance(msg, dict) and isinstance(msg.get("id"), str):
                            messages[msg["id"]] = (record, ("$set", "messages", i), msg)
            elif isinstance(data.get("sessionId"), str):
                meta.update(data)
        return messages, meta

    def view(self, transcript: formats.Transcript) -> View:
        messages, meta = self._fold(transcript)
        view = View(format=self.name)
        sid = meta.get("sessionId")
        view.session_id = sid if isinstance(sid, str) else None
        dirs = meta.get("directories")
        if isinstance(dirs, list) and dirs and isinstance(dirs[0], str):
            view.cwd = dirs[0]
        last_ts = meta.get("lastUpdated") if isinstance(meta.get("lastUpdated"), str) else None
        state = {"message": -1, "turn": 0}

        def add(item: Item, new_message: bool) -> None:
            if new_message:
                state["message"] += 1
            if item.prompt:
                state["turn"] += 1
            item.message = state["message"]
            item.turn = state["turn"]
            view.items.append(item)

        for record, base, msg in messages.values():
            ts = (
                msg.get("timestamp")
                if isinstance(msg.get("timestamp"), str) and _ISO_RE.match(msg["timestamp"])
                else None
            )
            if ts and (last_ts is None or ts > last_ts):
                last_ts = ts
            kind = msg.get("type")
            if kind == "user":
                text = _text_of(msg.get("content")).strip()
                if text.startswith(("/", "?")):
                    continue  # slash commands are not sent to the model
                first, prompted = True, False
                for path, part in _parts(msg.get("content"), base + ("content",)):
                    item = self._part_item("user", part, record, path, ts)
                    if item is None:
                        continue
                    if item.kind in (TEXT, IMAGE) and not prompted:
                        item.prompt = prompted = True
                    add(item, first)
                    first = False
            elif kind == "gemini":
                self._gemini(msg, record, base, ts, add, view)
        view.last_timestamp = last_ts
        return view

    @staticmethod
    def _part_item(role: str, part: dict, record: Record, path: tuple, ts: str | None) -> Item | None:
        if isinstance(part.get("text"), str):
            kind = THINKING if part.get("thought") is True else TEXT
            return Item(role, kind, part["text"], record, path=path, timestamp=ts)
        image = _image(part)
        if image is not None:
            return Item(role, IMAGE, "", record, path=path, timestamp=ts, image=image)
        call = part.get("functionCall")
        if isinstance(call, dict):
            name = call.get("name") if isinstance(call.get("name"), str) else "tool"
            cid = call.get("id") if isinstance(call.get("id"), str) else None
            return Item(
                "assistant",
                TOOL_CALL,
                name + _dumps(call.get("args") or {}),
                record,
                path=path,
                tool=name,
                call_id=cid,
                timestamp=ts,
            )
        response = part.get("functionResponse")
        if isinstance(response, dict):
            text, error = _response_text(response)
            name = response.get("name") if isinstance(response.get("name"), str) else None
            cid = response.get("id") if isinstance(response.get("id"), str) else None
            return Item(
                "tool", TOOL_RESULT, text, record, path=path, tool=name, call_id=cid, timestamp=ts, is_error=error
            )
        return None

    def _gemini(self, msg: dict, record: Record, base: tuple, ts: str | None, add, view: View) -> None:
        model = msg.get("model") if isinstance(msg.get("model"), str) else None
        if model:
            view.model = model
        tokens = msg.get("tokens")
        if isinstance(tokens, dict):
            inp, cached = _int(tokens.get("input")), _int(tokens.get("cached"))
            out = _int(tokens.get("output")) + _int(tokens.get("thoughts"))
            tool = _int(tokens.get("tool"))
            if inp or cached or out or tool:
                view.usages.append(
                    Usage(
                        record,
                        input=max(inp - cached, 0) + tool,  # promptTokenCount includes the cached part
                        cache_read=cached,
                        output=out,  # thoughtsTokenCount is billed as output, apart from candidates
                        model=model,
                        timestamp=ts,
                    )
                )
        first = True

        def put(item: Item) -> None:
            nonlocal first
            add(item, first)
            first = False

        thoughts = msg.get("thoughts")
        for j, thought in enumerate(thoughts if isinstance(thoughts, list) else ()):
            if not isinstance(thought, dict):
                continue
            text = "\n".join(
                str(thought[k]) for k in ("subject", "description") if isinstance(thought.get(k), str) and thought[k]
            )
            put(Item("assistant", THINKING, text, record, path=base + ("thoughts", j), timestamp=ts))
        seen_ids: dict[str, int] = {}
        seen_prints: dict[str, int] = {}
        for path, part in _parts(msg.get("content"), base + ("content",)):
            item = self._part_item("assistant", part, record, path, ts)
            if item is None or (item.kind == TEXT and not item.text):
                continue
            if item.kind == TOOL_CALL:
                call = part["functionCall"]
                if item.call_id:
                    seen_ids[item.call_id] = seen_ids.get(item.call_id, 0) + 1
                else:
                    fp = _fingerprint(call.get("name"), call.get("args"))
                    seen_prints[fp] = seen_prints.get(fp, 0) + 1
            put(item)
        calls = msg.get("toolCalls")
        calls = [(k, c) for k, c in enumerate(calls) if isinstance(c, dict)] if isinstance(calls, list) else []
        for k, call in calls:
            cid = call.get("id") if isinstance(call.get("id"), str) else None
            if cid and seen_ids.get(cid):
                seen_ids[cid] -= 1
                continue
            fp = _fingerprint(call.get("name"), call.get("args"))
            if seen_prints.get(fp):
                seen_prints[fp] -= 1
                continue
            name = call.get("name") if isinstance(call.get("name"), str) else "tool"
            put(
                Item(
                    "assistant",
                    TOOL_CALL,
                    name + _dumps(call.get("args") or {}),
                    record,
                    path=base + ("toolCalls", k),
                    tool=name,
                    call_id=cid,
                    timestamp=ts,
                )
            )
        # The results go back to the model as the next (user) turn.
        first = True
        for k, call in calls:
            result = call.get("result")
            if not result:
                continue
            name = call.get("name") if isinstance(call.get("name"), str) else None
            cid = call.get("id") if isinstance(call.get("id"), str) else None
            cts = call.get("timestamp") if isinstance(call.get("timestamp"), str) else ts
            texts, images, error = [], [], call.get("status") in ("error", "cancelled")
            for path, part in _parts(result, base + ("toolCalls", k, "result")):
                response = part.get("functionResponse")
                if isinstance(response, dict):
                    text, err = _response_text(response)
                    texts.append(text)
                    error = error or err
                    inner = response.get("parts")
                    for ipath, ipart in _parts(inner, path + ("functionResponse", "parts")):
                        ref = _image(ipart)
                        if ref is not None:
                            images.append((ipath, ref))
                        elif isinstance(ipart.get("text"), str):
                            texts.append(ipart["text"])
                elif isinstance(part.get("text"), str):
                    texts.append(part["text"])
                else:
                    ref = _image(part)
                    if ref is not None:
                        images.append((path, ref))
            put(
                Item(
                    "tool",
                    TOOL_RESULT,
                    "\n".join(t for t in texts if t),
                    record,
                    path=base + ("toolCalls", k, "result"),
                    tool=name,
                    call_id=cid,
                    timestamp=cts,
                    is_error=error,
                )
            )
            for ipath, ref in images:
                put(Item("tool", IMAGE, "", record, path=ipath, tool=name, call_id=cid, timestamp=cts, image=ref))


def _response_text(response: dict) -> tuple[str, bool]:
    """The text a functionResponse carries, and whether it reports an error."""
    body = response.get("response")
    if isinstance(body, dict):
        if isinstance(body.get("output"), str) and len(body) == 1:
            return body["output"], False
        if isinstance(body.get("error"), str) and len(body) == 1:
            return body["error"], True
        return _dumps(body), "error" in body
    if isinstance(body, str):
        return body, False
    return "", False
