"""Codex CLI rollout files (research/formats.md §2 and §3.2).

Every line is ``{"timestamp", "type", "payload"}``. The model-visible history is rebuilt the way
Codex rebuilds it on resume (``codex_scan``): every ``response_item`` in order, except that a
``compacted`` record replaces everything before it with its ``replacement_history`` (or, for a
local compaction without one, with the earlier real user messages and its summary ``message``).
``event_msg`` lines are UI events: the user/agent messages they carry duplicate response items
and are never model input; ``token_count`` events carry the provider's usage.

Edits write the format's own shapes: a compaction is an appended ``compacted`` record with a
``replacement_history`` and a ``context_compacted`` event, as Codex writes them; setup blocks are
``developer`` messages; cleared content stays where it was with its call ids.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
from typing import Any

from lookout_cli import formats
from lookout_cli.core.errors import LookoutError
from lookout_cli.core.jsonl import Record, loads_exact
from lookout_cli.core.saved import restore_marker
from lookout_cli.formats import sniff as sniffers
from lookout_cli.formats.codex_items import (
    SETUP_MESSAGE,
    SUMMARY_PREFIX,
    TEXT_PARTS,
    TRUNCATION_NOTICE,
    TYPE,
    Builder,
    Entry,
    Scan,
    get_path,
    json_text,
    message_texts,
    parse_wrapped,
)
from lookout_cli.formats.codex_scan import (
    Scanner,
    Settling,
    going_on_from,
    node_of,
    settled_value,
    shown_from,
    valid_ts,
)
from lookout_cli.formats.view import (
    IMAGE,
    SETUP,
    THINKING,
    TOOL_CALL,
    TOOL_RESULT,
    Item,
    View,
)

CLEARED_NOTE = "lookout_cleared"  # in a user_message event whose images lookout blanked


SETUP_OPEN = '<lookout-setup name="{key}">'


SETUP_CLOSE = "</lookout-setup>"


def now_timestamp() -> str:
    """Codex's timestamp shape: ISO 8601, UTC, milliseconds, ``Z``."""
    now = dt.datetime.now(dt.timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def _exact(record: Record) -> Any:
    """The record's value parsed exactly (big integers, lone surrogates), without marking it edited."""
    if record.edited:
        return record.obj
    return loads_exact(record.body)


def data_url(media_type: str, data: str) -> str:
    return f"data:{media_type};base64,{data}"


def wrap_setup(key: str, text: str) -> str:
    return SETUP_OPEN.format(key=key) + "\n" + text + "\n" + SETUP_CLOSE


class Adapter(formats.Adapter):
    name = "codex"
    lean = True
    remembers_items = True

    sniff = staticmethod(sniffers.codex)

    # --- reading ------------------------------------------------------------------------------
    def node(self, obj: Any) -> Any:
        return node_of(obj)

    def shown_from(self, fd: int, start: int, end: int) -> int:
        return shown_from(fd, start, end)

    def settling(self) -> Settling:
        return Settling()

    def settled(self, transcript: formats.Transcript, known: int = 0) -> tuple[int, Any] | None:
        scan = self._view_scan(transcript)
        if scan.settle is None or scan.settle.record.lineno - 1 == known:  # none, or the memo holds it
            return None
        value = settled_value(scan)
        return (value[0], value) if value is not None else None

    def _view_scan(self, transcript: formats.Transcript) -> Scan:
        return transcript.kept("scan", lambda: self._scan(transcript))

    def _scan(self, transcript: formats.Transcript, items: bool = True) -> Scan:
        """What the view is built from; without ``items``, only usages, compactions and the
        model (``usage_view``: the lines a usage-only load kept, their bytes not at hand). A
        load that read the lines before the last compaction into a ``Settling`` goes on from
        it, with the lines from that compaction on (the messages it holds are read again, as
        the compaction weighs them; unless one was edited since: its kind is read from it);
        a measure that resumed its line memo goes on from where the scan stood then."""
        settled, memo = transcript.settled, transcript.memo
        going = going_on_from(memo.settled, transcript.lines) if memo is not None and memo.settled is not None \
            else None
        if going is not None:
            scanner, records = going[1], transcript.lines[going[0]:]
        elif settled is not None and items and not any(e.record.edited for e in settled.scan.entries):
            scanner, records = settled.going_on(), transcript.lines[settled.at:]
        else:
            if memo is not None and memo.settled is not None:
                memo.unsettle()  # (the lines it stood for are read from the file)
            scanner, records = Scanner(items), transcript.records
        read, record_node = scanner.read, self.record_node
        for record in records:
            node = record_node(record)
            if node is not None:
                read(record, node)
        return scanner.scan

    usage_needles = (b'"token_count"', b'"turn_context"', b'"compacted"', b'"session_meta"')

    def usage_view(self, records) -> View:
        return self._bare_view(self._scan(formats.Transcript(list(records), self), items=False))

    def _bare_view(self, scan: Scan, sink=None) -> View:
        """The view of a scan before its items: usages, compactions, model and session."""
        return View(format=self.name, usages=scan.usages, compactions=scan.compactions, model=scan.model,
                    session_id=scan.session_id, cwd=scan.cwd, last_timestamp=scan.last_timestamp, sink=sink)

    def view(self, transcript: formats.Transcript) -> View:
        scan = self._view_scan(transcript)
        view = self._bare_view(scan, transcript.sink)
        builder = Builder(view, scan, transcript.memo)
        if transcript.memo is not None:
            transcript.memo.begin(view.model)
        if scan.meta_setup is not None:
            builder.setup(*scan.meta_setup)
        builder.entries()
        return view

    # --- editing ------------------------------------------------------------------------------
    def replace_content(self, transcript: formats.Transcript, item: Item, text: str) -> None:
        if item.opaque:
            raise LookoutError("cannot replace encrypted or signed content: it must stay as it is")
        record, path = item.record, item.path
        shape = item.extra.get("shape")
        current = get_path(_exact(record), path)
        if item.kind == IMAGE and path[-1] == "result":  # a generated image (image_generation_call)
            if current:
                obj = get_path(record.edit(), path[:-1])
                obj["result"] = ""
                prompt = obj.get("revised_prompt")
                obj["revised_prompt"] = (prompt + "\n" if isinstance(prompt, str) and prompt else "") + text
                transcript.invalidate()
            return
        if item.kind == IMAGE:
            new = {"type": "input_text", "text": text}
            url = current.get("image_url") if isinstance(current, dict) else None
            if current != new:
                obj = record.edit()
                parent = get_path(obj, path[:-1])
                parent[path[-1]] = new
            if isinstance(url, str) and url:
                for event in item.extra.get("events", ()):
                    self._blank_event_image(event, url)
            transcript.invalidate()
            return
        if item.kind == TOOL_RESULT:
            new_output = _replaced_output(current, shape, text)
            field = "tools" if shape == "tools" else "output"
            if current.get(field) != new_output:
                record.edit()
                get_path(record.obj, path)[field] = new_output
                transcript.invalidate()
            return
        if item.kind == TOOL_CALL:
            field = item.extra.get("field")
            if not field:
                raise LookoutError(f"cannot replace the arguments of a {current.get('type')} call")
            if field == "arguments":
                value = text if _is_json_object(text) else json_text({"lookout_cleared": text})
            elif field == "input":
                value = text
            else:
                raise LookoutError(f"cannot replace the arguments of a {current.get('type')} call")
            if current.get(field) != value:
                record.edit()
                get_path(record.obj, path)[field] = value
                transcript.invalidate()
            return
        if item.kind == THINKING:
            new = [{"type": "summary_text", "text": text}]
            if current.get("summary") != new or current.get("content"):
                obj = get_path(record.edit(), path)
                obj["summary"] = new
                if obj.get("content"):
                    obj["content"] = None
                transcript.invalidate()
            return
        # A text part of a message, a summary string, or the session's instructions.
        if isinstance(current, str):
            if current != text:
                obj = record.edit()
                parent = get_path(obj, path[:-1])
                parent[path[-1]] = text
                transcript.invalidate()
            return
        if isinstance(current, dict):
            if current.get("text") != text:
                get_path(record.edit(), path)["text"] = text
                transcript.invalidate()
            return
        raise LookoutError(f"cannot replace this {item.kind} part of a Codex transcript")

    def note_part(self, text: str) -> dict:
        return {"type": "input_text", "text": text}

    def copies(self, item: Item) -> list[Record]:
        if item.kind != IMAGE:
            return []
        return [event for event in item.extra.get("events", ()) if event.raw is not None]

    @staticmethod
    def _blank_event_image(record: Record, url: str) -> None:
        """Blank the UI copy of an image in its ``user_message`` event. The entry becomes "" and
        the event names its own original line (``copies``): the placeholder's marker names the
        message's line, which restore must not put in the event's place."""
        payload = record.data.get("payload") if record.data else None
        if not isinstance(payload, dict) or url not in (payload.get("images") or ()):
            return
        payload = record.edit()["payload"]
        images = payload["images"]
        for i, value in enumerate(images):
            if value == url:
                images[i] = ""
        if record.raw is not None:
            payload[CLEARED_NOTE] = restore_marker(record.raw)

    def add_parts(self, transcript: formats.Transcript, prompt: Item, parts: list[dict]) -> None:
        entry_path = prompt.extra.get("entry_path")
        if not prompt.prompt or entry_path is None:
            raise LookoutError("attachments go into a user prompt; this item is not one")
        new = []
        for part in parts:
            if part.get("type") == "text":
                new.append({"type": "input_text", "text": part["text"]})
            elif part.get("type") == "image":
                new.append(
                    {"type": "input_image", "image_url": data_url(part.get("media_type") or "image/png", part["data"])}
                )
            else:
                raise LookoutError(f"unknown attachment type {part.get('type')!r}")
        if not new:
            return
        message = get_path(prompt.record.edit(), entry_path)
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "input_text", "text": content}]
        elif not isinstance(content, list):
            content = []
        content.extend(new)
        message["content"] = content
        transcript.invalidate()

    def set_setup(self, transcript: formats.Transcript, key: str, text: str | None) -> None:
        view = transcript.view()
        existing = [i for i in view.items if i.kind == SETUP and i.extra.get("setup_key") == key]
        if existing:
            item = existing[0]
            if text is None:
                self._remove_setup(transcript, item)
            else:
                wrapped = wrap_setup(key, text)
                if item.text != wrapped:
                    get_path(item.record.edit(), item.path)["text"] = wrapped
                    transcript.invalidate()
            return
        if text is None:
            return
        payload = {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": wrap_setup(key, text)}],
        }
        scan = self._scan(transcript)
        anchors = [
            i
            for i in view.items
            if i.kind == SETUP and i.extra.get("entry_path") is not None and not i.extra.get("rebuilt")
        ]
        if anchors:
            last = anchors[-1]
            entry_path = last.extra["entry_path"]
            if entry_path == ("payload",):
                transcript.insert_after(last.record, [self._new_line("response_item", payload, last.record)])
            else:  # inside a compacted record's replacement_history
                history = get_path(last.record.edit(), entry_path[:-1])
                history.insert(entry_path[-1] + 1, payload)
                transcript.invalidate()
            return
        if scan.base is not None:
            if scan.base_has_history:
                scan.base.edit()["payload"]["replacement_history"].insert(0, payload)
                transcript.invalidate()
            else:
                transcript.insert_after(scan.base, [self._new_line("response_item", payload, scan.base)])
            return
        anchor = None
        for record in transcript.records:
            data = record.data
            if data is None or record.blank:
                continue
            if data.get("type") in ("session_meta", "turn_context"):
                anchor = record
                continue
            break
        transcript.insert_after(anchor, [self._new_line("response_item", payload, anchor)])

    @staticmethod
    def _remove_setup(transcript: formats.Transcript, item: Item) -> None:
        entry_path = item.extra["entry_path"]
        message = get_path(_exact(item.record), entry_path)
        content = message.get("content") if isinstance(message, dict) else None
        only_part = isinstance(content, list) and len(content) == 1
        if only_part and entry_path == ("payload",):
            transcript.remove([item.record])
            return
        obj = item.record.edit()
        if only_part:
            del get_path(obj, entry_path[:-1])[entry_path[-1]]
        else:
            del get_path(obj, item.path[:-1])[item.path[-1]]
        transcript.invalidate()

    def compact(
        self,
        transcript: formats.Transcript,
        summary: str | None,
        keep_from: Item | None,
        metadata: dict[str, Any],
    ) -> list[Record]:
        scan = self._scan(transcript)
        entries = scan.entries
        keep = len(entries)
        if keep_from is not None:
            entry_path = keep_from.extra.get("entry_path")
            for i, entry in enumerate(entries):
                if entry.record is keep_from.record and entry.path == entry_path:
                    keep = i
                    break
            else:
                raise LookoutError("the item to keep from is not in the model-visible history")
        head, tail = entries[:keep], entries[keep:]
        # a split inside a turn: the request's entries stay word for word before the kept steps
        wanted = {(id(i.record), i.extra.get("entry_path")) for i in metadata.get("request") or ()}
        request = [e for e in head if (id(e.record), e.path) in wanted]
        head = [e for e in head if e not in request]
        setup = [e for e in head if e.facts[SETUP_MESSAGE]]
        ghosts = [e for e in head if e.facts[TYPE] == "ghost_snapshot"]
        text = SUMMARY_PREFIX + "\n" + summary if summary is not None else TRUNCATION_NOTICE
        message = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
        history = [_copy_payload(e) for e in setup] + [message] + [_copy_payload(e) for e in ghosts]
        history += [_copy_payload(e) for e in [*request, *tail]]
        reference = _latest_real_line(transcript)
        ts = now_timestamp()
        save = metadata.get("save")
        # both lines name an empty saved file (before any marker the history holds): ``lookout
        # restore`` drops them, and the file is the input again
        added = save([]) if save is not None else None
        compacted = self._new_line("compacted", {"message": text, "replacement_history": history}, reference, ts,
                                   added)
        event = self._new_line("event_msg", {"type": "context_compacted"}, reference, ts, added)
        if reference is not None:
            reference.release()  # its envelope was copied: a lean record keeps no line
        transcript.append([compacted, event])
        return [compacted, event]

    @staticmethod
    def _new_line(kind: str, payload: dict, reference: Record | None, ts: str | None = None,
                  added: str | None = None) -> Record:
        """A new rollout line with the envelope Codex writes (extra top-level fields such as
        ``ordinal`` copied from a nearby real line); ``added``: its restore marker."""
        if ts is None:
            ref_ts = valid_ts(reference.data.get("timestamp")) if reference is not None and reference.data else None
            ts = ref_ts or now_timestamp()
        obj: dict[str, Any] = {"timestamp": ts}
        if added:
            obj[ADDED_FIELD] = added
        if reference is not None and reference.data:
            for key, value in reference.data.items():
                if key not in ("timestamp", "type", "payload", ADDED_FIELD):
                    obj[key] = copy.deepcopy(value)
        obj["type"] = kind
        obj["payload"] = payload
        return Record.new(obj)


ADDED_FIELD = "lookout_added"  # a line a compaction wrote (see ``compact``)


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


def _copy_payload(entry: Entry) -> dict:
    if entry.synthetic:  # the summary of a compaction without replacement_history
        texts = message_texts(entry.payload)
        text = texts[0] if texts else ""
        if not text.lstrip().startswith(SUMMARY_PREFIX):  # stays a summary, not a user prompt, in
            text = SUMMARY_PREFIX + "\n" + text  # a replacement_history (as Codex writes its own)
        return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
    return copy.deepcopy(get_path(_exact(entry.record), entry.path))


def _latest_real_line(transcript: formats.Transcript) -> Record | None:
    for record in reversed(transcript.lines):  # (from the end: the lines before are left unmade)
        if record.raw is not None and record.data is not None and formats.type_of(record.data) in sniffers.RECORD_TYPES:
            return record
    return None


def _replaced_output(payload: dict, shape: str | None, text: str) -> Any:
    """The tool output with its text replaced, in the shape Codex reads back."""
    output = payload.get("output")
    if shape == "wrapped" and isinstance(output, str):
        wrapper = parse_wrapped(output)
        if wrapper is not None:
            if wrapper["output"] == text:
                return output
            wrapper["output"] = text
            return json_text(wrapper)
        return text
    if shape == "list" and isinstance(output, list):
        new: list = []
        placed = False
        for part in output:
            if isinstance(part, dict) and part.get("type") in TEXT_PARTS:
                if not placed:
                    new.append({"type": "input_text", "text": text})
                    placed = True
                continue
            new.append(part)
        if not placed:
            new.insert(0, {"type": "input_text", "text": text})
        return new
    if shape == "dict_image" and isinstance(output, dict):
        return [{"type": "input_text", "text": text}, output]
    if shape == "dict_text" and isinstance(output, dict):
        return {**output, "text": text}
    if shape == "dict_content" and isinstance(output, dict):
        return {**output, "content": text}
    if shape == "tools":
        raise LookoutError("cannot replace a tool_search_output: it holds tool definitions, not text")
    return text
