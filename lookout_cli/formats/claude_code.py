"""The ``claude-code`` format: Claude Code session files (formats.md §1).

Reading: ``claude_chain`` finds the live conversation (the ``parentUuid`` path from the newest
main-chain line back to the last ``compact_boundary``); ``claude_items`` turns its lines into
the view. Writing follows Claude Code's own habits where it can: a compaction appends a
boundary and a summary and moves the kept lines after them (leaving stubs, see below); cleared
content (tool output, images) and lookout's own setup lines are changed in place.

Shapes written (the adapter report lists them too):

- ``set_setup(key, text)``: one ``isMeta: true`` user line per key, appended to the live chain
  (``parentUuid`` = the leaf) with ``message.content`` = ``"<system-reminder>\\n" + text +
  "\\n</system-reminder>"`` and ``"lookoutSetup": key``. A new text rewrites that line in
  place; ``None`` removes it and re-parents its children on its parent.
- ``compact``: a ``compact_boundary`` system line, an ``isCompactSummary`` user line, copies of
  the setup lines that sat before ``keep_from`` (rules, skills, lookout setup), then the kept
  lines themselves, moved: the request when the split lands inside its turn, then every chain
  line from ``keep_from`` to the leaf, each re-parented on the line before it and given a fresh
  timestamp (Claude Code resumes from the newest childless line), a response with its usage
  zeroed (the old usage would read as a full context). Each moved line leaves a stub in its
  place: no ``type`` (Claude Code and viewers pass over it), its uuid and parent (lookout's
  history of the conversation), a response's usage under its ids (ccusage and lookout count it
  there, once), and ``lookoutMoved``, a restore marker naming its original line. Every line
  written or moved carries ``lookoutAdded``, a restore marker that names nothing: ``lookout
  restore`` drops those and puts each stub's line back, so the input comes back byte for byte,
  and viewers show each kept message once. Kept lines are not named in
  ``compactMetadata.preservedMessages``/``preservedSegment``: Claude Code 2.1.328 resuming with
  ``-p --resume`` rebuilt from those, as lookout wrote them (anchored at the summary or the
  boundary), either the summary alone, the kept lines without the summary and request, or the
  whole pre-compaction chain.
- ``add_parts``: text and image blocks appended to the prompt line's ``message.content``.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator

from lookout_cli.core.errors import LookoutError
from lookout_cli.core.jsonl import Record, loads_exact
from lookout_cli.core.times import parse_time
from lookout_cli.formats import Adapter as _Base
from lookout_cli.formats import Transcript, as_str, type_of
from lookout_cli.formats import sniff as sniffers
from lookout_cli.formats.claude_chain import (
    CONVERSATION_TYPES,
    MOVED_FIELD,
    Chain,
    RecentUuids,
    build_chain,
    node_of,
    plain,
    revive,
)
from lookout_cli.formats.claude_items import (
    SETUP_FIELD,
    TRUNCATED_FIELD,
    LineItems,
    build_view,
    counted_texts,
    shown_from,
    text_of_result,
    usage_node,
    usage_view,
)
from lookout_cli.formats.claude_settled import Settling, settled, settled_from, settled_plain
from lookout_cli.formats.view import IMAGE, SETUP, THINKING, TOOL_CALL, TOOL_RESULT, Item, View

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from typing import Any

SUMMARY_PREFIX = (
    "This session is being continued from a previous conversation that ran out of context. "
    "The summary below covers the earlier portion of the conversation.\n\n"
)
TRUNCATION_NOTICE = (
    "This session is being continued from a previous conversation that ran out of context. "
    "The earlier portion of the conversation was removed to make room; no summary of it was "
    "written. Ask the user if you need something from it."
)
ENVELOPE = ("userType", "entrypoint", "cwd", "sessionId", "version", "gitBranch", "slug", "agentId")
CLEARED_NOTE = "lookoutCleared"
ADDED_FIELD = "lookoutAdded"  # a line a compaction wrote: its restore marker names nothing, so restore drops it
ENVELOPE_LOOKBACK = 200  # conversation lines read back for envelope fields the newest lacks


def fresh_stamp(records: list[Record], chain: Chain) -> str:
    """Now, or just after the newest timestamp in the file if that is later (clock skew):
    Claude Code resumes from the childless line with the newest timestamp: of the lines a
    settled value stands for (not read), the newest such line's (``chain.latest``)."""
    stamp = _dt.datetime.now(_dt.timezone.utc)
    start = chain.settled.at if chain.settled is not None else 0
    newest = parse_time(chain.latest) if start else None
    for record in records[start:]:
        # a lean record's node has the type and time: its line is not parsed again (and kept)
        data = record.node if record.node is not None and not record.edited else record.data
        if data is not None and type_of(data) in CONVERSATION_TYPES:
            when = parse_time(data.get("timestamp"))
            if when is not None and (newest is None or when > newest):
                newest = when
    if newest is not None and newest >= stamp:
        stamp = newest + _dt.timedelta(milliseconds=1)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z"


def _later(stamp: str, ms: int) -> str:
    """``stamp`` (as ``fresh_stamp`` writes it) plus ``ms`` milliseconds."""
    when = _dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ") + _dt.timedelta(milliseconds=ms)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def new_uuid() -> str:
    import uuid  # (only a run that writes lines: uuid imports platform)

    return str(uuid.uuid4())


def wrap_setup(text: str) -> str:
    return f"<system-reminder>\n{text}\n</system-reminder>"


class Adapter(_Base):
    name = "claude-code"

    # --- reading --------------------------------------------------------------------------
    sniff = staticmethod(sniffers.claude_code)

    lean = True
    remembers_items = True
    linked = True  # parentUuid

    def __init__(self) -> None:
        super().__init__()
        self.recent = RecentUuids()
        self.line_items = LineItems()

    def node(self, obj: Any) -> Any:
        return node_of(obj, self.recent) if isinstance(obj, dict) else obj

    def revive(self, kept: Any) -> Any:
        return revive(kept)

    def plain(self, node: Any) -> Any:
        return plain(node)

    def chain(self, transcript: Transcript) -> Chain:
        return transcript.kept("chain", lambda: _chain_of(transcript))

    def settled(self, transcript: Transcript, known: int = 0) -> tuple[int, Any] | None:
        chain = self.chain(transcript)
        if chain.settle is not None and chain.settle[0] == known:  # the memo holds it: not made again
            return None
        found = settled(chain, transcript.view())
        return (found.at, settled_plain(found)) if found is not None and found.at != known else None

    def view(self, transcript: Transcript) -> View:
        return build_view(self.chain(transcript), self.name, transcript.sink, transcript.memo, transcript.early)

    def counted_texts(self, obj: Any) -> Iterator[str]:
        return counted_texts(obj)

    def shown_from(self, fd: int, start: int, end: int) -> int:
        return shown_from(fd, start, end)

    def settling(self) -> Settling:
        return Settling()

    usage_needles = (b'"usage"', b'"compact_boundary"')

    usage_node = staticmethod(usage_node)  # once a line of a usage-only load: called directly

    def usage_view(self, records) -> View:
        return usage_view(records, self.record_node)

    # --- replace_content ------------------------------------------------------------------
    def replace_content(self, transcript: Transcript, item: Item, text: str) -> None:
        if item.kind in (THINKING, TOOL_CALL):
            raise LookoutError(f"claude-code: a {item.kind.replace('_', ' ')} cannot be replaced")
        if not item.path:
            raise LookoutError("claude-code: this part records no replaceable text")
        record = item.record
        obj = record.data
        if obj is None:
            raise LookoutError(f"claude-code: line {record.lineno} is not JSON")
        current = _get(obj, item.path)
        if item.kind == TOOL_RESULT and item.role == "user":
            if not isinstance(current, dict):
                raise LookoutError("claude-code: the tool result moved")
            had_images = isinstance(current.get("content"), list) and any(
                isinstance(b, dict) and b.get("type") == "image" for b in current["content"])
            sibling = current.get("text")
            same = current.get("content") == text or (not had_images and text_of_result(current.get("content")) == text)
            if same and (not isinstance(sibling, str) or sibling == text) \
                    and not (had_images and _copy_left(obj)):
                return
            edited = record.edit()
            block = _get(edited, item.path)
            block["content"] = text
            if isinstance(block.get("text"), str):  # 2.1.x duplicates the output here
                block["text"] = text
            if had_images:
                _blank_copy(edited, text)
        elif item.kind == IMAGE:
            if item.extra.get("attachment_file"):
                if not isinstance(current, dict) or current.get("type") != "image":
                    return
                edited = record.edit()
                attachment = edited["attachment"]
                old = attachment["content"]
                old_file = old.get("file") if isinstance(old.get("file"), dict) else {}
                lines = text.count("\n") + 1
                attachment["content"] = {
                    "type": "text",
                    "file": {"filePath": old_file.get("filePath") or attachment.get("filename") or "",
                             "content": text, "numLines": lines, "startLine": 1, "totalLines": lines},
                }
                transcript.invalidate()
                return
            if isinstance(current, dict) and current.get("type") == "text" and current.get("text") == text \
                    and not (item.extra.get("tool_use_result") and _copy_left(obj)):
                return
            edited = record.edit()
            _set(edited, item.path, {"type": "text", "text": text})
            if item.extra.get("tool_use_result"):
                _blank_copy(edited, text)
        else:
            if current == text:
                return
            if not isinstance(current, str):
                raise LookoutError("claude-code: this part records no replaceable text")
            edited = record.edit()
            _set(edited, item.path, text)
        transcript.invalidate()

    # --- add_parts ------------------------------------------------------------------------
    def add_parts(self, transcript: Transcript, prompt: Item, parts: list[dict]) -> None:
        record = prompt.record
        obj = record.data or {}
        message = obj.get("message")
        if obj.get("type") != "user" or not isinstance(message, dict):
            raise LookoutError("claude-code: attachments go on a user prompt line")
        blocks = [_block(part) for part in parts]
        if not blocks:
            return
        content = message.get("content")
        existing = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        if len(existing) >= len(blocks) and existing[-len(blocks):] == blocks:
            return  # already attached
        edited = record.edit()
        emessage = edited["message"]
        econtent = emessage.get("content")
        if isinstance(econtent, str):
            econtent = [{"type": "text", "text": econtent}]
        elif not isinstance(econtent, list):
            econtent = []
        econtent.extend(blocks)
        emessage["content"] = econtent
        transcript.invalidate()

    # --- set_setup ------------------------------------------------------------------------
    def set_setup(self, transcript: Transcript, key: str, text: str | None) -> None:
        chain = self.chain(transcript)
        mine = []
        for record in (transcript.lines[p] for p in chain.visible):
            if _setup_key(record) == key:
                mine.append(record)
            else:
                record.release()  # a lean record reads its line again if it is needed
        if text is None:
            for record in mine:
                _unlink(transcript, record)
            if mine:
                transcript.remove(mine)
            return
        wrapped = wrap_setup(text)
        if mine:
            record = mine[-1]
            message = (record.data or {}).get("message") or {}
            if message.get("content") == wrapped:
                return
            edited = record.edit()
            edited["message"] = {"role": "user", "content": wrapped}
            transcript.invalidate()
            return
        env = _envelope(chain)
        if not env.get("sessionId"):
            raise LookoutError("claude-code: no conversation line to attach the setup to")
        leaf = chain.obj(chain.leaf) if chain.leaf is not None else {}
        line = {
            "parentUuid": leaf.get("uuid"),
            "isSidechain": chain.sidechain,
            **{k: env[k] for k in ENVELOPE if k in env},
            "type": "user",
            "message": {"role": "user", "content": wrapped},
            "isMeta": True,
            SETUP_FIELD: key,
            "uuid": new_uuid(),
            "timestamp": fresh_stamp(transcript.lines, chain),
        }
        transcript.append([Record.new(line)])

    # --- compact --------------------------------------------------------------------------
    def compact(self, transcript: Transcript, summary: str | None, keep_from: Item | None,
                metadata: dict[str, Any]) -> list[Record]:
        chain = self.chain(transcript)
        if chain.leaf is None:
            raise LookoutError("claude-code: there is no conversation to compact")
        records = transcript.lines  # (what moves is in the live conversation: the older lines are left unmade)
        visible = [records[p] for p in chain.visible]
        start = len(visible)
        if keep_from is not None:
            ids = [id(r) for r in visible]
            if id(keep_from.record) not in ids:
                raise LookoutError("claude-code: the kept part is not in the live conversation")
            start = ids.index(id(keep_from.record))
        # a split inside a turn: the request's lines stay word for word before the kept steps
        request = _records_of(metadata.get("request") or (), visible[:start])
        text = SUMMARY_PREFIX + summary if summary is not None else TRUNCATION_NOTICE
        first_kept = visible.index(request[0]) if request else start
        if self._already(chain, visible, first_kept, text):
            return []
        # the lines before the live boundary stay as they are (this moves and adds lines after
        # it): the view built next takes what they give instead of reading them all again
        transcript.settled = settled(chain, transcript.view())
        env = _envelope(chain)
        leaf = chain.obj(chain.leaf)
        stamp = fresh_stamp(records, chain)
        trigger = metadata.get("trigger") or "manual"
        pre = metadata.get("pre_tokens")
        if not isinstance(pre, int):
            usages = transcript.view().usages
            pre = usages[-1].prompt + usages[-1].output if usages else 0
        compact_meta: dict[str, Any] = {"trigger": trigger, "preTokens": pre}
        if isinstance(metadata.get("post_tokens"), int):
            compact_meta["postTokens"] = metadata["post_tokens"]
        envelope = {k: env[k] for k in ENVELOPE if k in env}
        save = metadata.get("save")
        # every line written here names an empty saved file (before any marker a copied line
        # holds): ``lookout restore`` drops them, and the file is the input again
        added = {ADDED_FIELD: save([])} if save is not None else {}
        boundary_id = new_uuid()
        boundary = {
            "parentUuid": None,
            **added,
            "logicalParentUuid": leaf.get("uuid"),
            "isSidechain": chain.sidechain,
            **envelope,
            "type": "system",
            "subtype": "compact_boundary",
            "content": "Conversation compacted",
            "isMeta": False,
            "timestamp": stamp,
            "uuid": boundary_id,
            "level": "info",
            "compactMetadata": compact_meta,
        }
        summary_id = new_uuid()
        summary_line = {
            "parentUuid": boundary_id,
            **added,
            "isSidechain": chain.sidechain,
            **envelope,
            "type": "user",
            "message": {"role": "user", "content": text},
            "isVisibleInTranscriptOnly": True,
            "isCompactSummary": True,
            "uuid": summary_id,
            "timestamp": stamp,
        }
        if summary is None:
            summary_line[TRUNCATED_FIELD] = True
        new = [Record.new(boundary), Record.new(summary_line)]
        # setup lines before the kept part stay in the context (rules, skills, lookout setup);
        # the transcript's view (patched in place by the stages before) names them as well as
        # a new one would, without reading every visible line again
        view = transcript.view()
        kept = {id(r) for r in [*request, *visible[start:]]}
        setup_records: list[Record] = []
        for item in view.items:
            if item.kind == SETUP and id(item.record) not in kept \
                    and all(r is not item.record for r in setup_records):
                setup_records.append(item.record)
        tail = [r for r in [*request, *visible[start:]] if (r.data or {}).get("type") != "progress"]
        in_tail = {_setup_key(r) for r in tail} - {None}
        setup_records = [r for r in _latest_per_key(setup_records) if _setup_key(r) not in in_tail]
        parent = summary_id
        for record in setup_records:  # copied: they stay where they are for what came before
            obj = _exact_copy(record)
            fresh = new_uuid()
            obj["uuid"] = fresh
            obj["parentUuid"] = parent
            obj["timestamp"] = stamp
            obj.pop(ADDED_FIELD, None)
            new.append(Record.new(_with_parent_first({"parentUuid": parent, **added, **obj})))
            parent = fresh
        # the kept lines move: each leaves a stub in its place (the usage a response recorded,
        # for usage readers, and a marker naming its original line, for ``lookout restore``)
        # and is written after the summary, once, marked as added
        at = {id(r): n for n, r in zip(chain.visible, visible)}
        for moved, record in enumerate(tail, 1):
            obj = _exact_copy(record)
            stub: dict[str, Any] = {MOVED_FIELD: save([record])} if save is not None else {MOVED_FIELD: ""}
            stub.update(_stub(obj))
            records[at[record_id := id(record)]] = Record.new(stub)
            del at[record_id]
            obj.pop(ADDED_FIELD, None)
            obj.pop("parentUuid", None)
            # newer than any line left behind, or Claude Code resumes from one of them (a summary
            # or setup line an earlier compaction wrote, whose children moved); each its own
            # time, or viewers take a split response's lines for one (claude-code-log)
            obj["timestamp"] = _later(stamp, moved)
            _zero_usage(obj)
            record.replace({"parentUuid": parent, **added, **obj})
            record.node = None  # the node a lean load kept names the old parent
            new.append(record)
            if isinstance(obj.get("uuid"), str):
                parent = obj["uuid"]
        for record in [*request, *visible[start:], *setup_records]:
            record.release()  # read for their copies: a lean record keeps no line
        transcript.append(new)
        return new

    def _already(self, chain: Chain, visible: list[Record], start: int, text: str) -> bool:
        """The same compaction is already the live one: the summary is the first line and
        the kept part follows it (after copied setup lines)."""
        if chain.boundary is None or not visible:
            return False
        first = visible[0].data or {}
        if not first.get("isCompactSummary"):
            return False
        message = first.get("message") if isinstance(first.get("message"), dict) else {}
        if message.get("content") != text:
            return False
        between = visible[1:start]
        return start >= 1 and all(_is_setup_line(r.data or {}) for r in between)


# --- helpers -------------------------------------------------------------------------------
def _chain_of(transcript: Transcript) -> Chain:
    """The chain, from the lines after a compaction when what the lines before it give is
    known (``Settled``: from a measure's line memo, from a cold load's ``Settling``, or kept by
    ``compact`` for the views after it) and that holds; else from every line (their nodes
    read then: from the memo, else from the file)."""
    memo = transcript.memo
    from_memo = memo is not None and memo.settled is not None
    found = settled_from(memo.settled, transcript.lines) if from_memo else transcript.settled
    if found is not None:
        chain = build_chain(transcript.lines, found)
        if chain is not None:
            return chain
        if from_memo:
            memo.unsettle()
        transcript.settled = None
    node = transcript.adapter.node
    for record in transcript.records:
        if record.node is None and record.stored() is not None:  # a line a settled value stood for
            data = record.data
            record.node = node(data) if data is not None else None
            record.release()
    return build_chain(transcript.records)


def _get(obj: Any, path: tuple) -> Any:
    for step in path:
        try:
            obj = obj[step]
        except (KeyError, IndexError, TypeError):
            return None
    return obj


def _set(obj: Any, path: tuple, value: Any) -> None:
    parent = _get(obj, path[:-1])
    if parent is None:
        raise LookoutError("claude-code: the part to replace is gone")
    parent[path[-1]] = value


def _copy_left(obj: dict) -> bool:
    tur = obj.get("toolUseResult")
    return isinstance(tur, dict) and isinstance(tur.get("file"), dict) \
        and bool(tur["file"].get("base64"))


def _blank_copy(obj: dict, note: str) -> None:
    """Blank Claude Code's display copy of a tool's image (``toolUseResult.file.base64``),
    keeping the shape its renderer reads (type, dimensions, sizes)."""
    tur = obj.get("toolUseResult")
    if isinstance(tur, dict) and isinstance(tur.get("file"), dict) and tur["file"].get("base64"):
        tur["file"]["base64"] = ""
        tur["file"][CLEARED_NOTE] = note


def _block(part: dict) -> dict:
    kind = part.get("type")
    if kind == "text":
        return {"type": "text", "text": str(part.get("text", ""))}
    if kind == "image":
        if part.get("url") and not part.get("data"):
            return {"type": "image", "source": {"type": "url", "url": part["url"]}}
        return {"type": "image", "source": {"type": "base64", "media_type": part.get("media_type") or "image/png",
                                            "data": part.get("data") or ""}}
    raise LookoutError(f"claude-code: cannot attach a part of type {kind!r}")


def _envelope(chain: Chain) -> dict:
    """Envelope fields from the newest live line, filled from older lines when missing (from
    the newest ``ENVELOPE_LOOKBACK`` conversation lines: most sessions never write some of the
    fields, and reading every line back for them cost a tenth of a large compaction)."""
    env: dict[str, Any] = {}
    looked = 0
    order = list(reversed(chain.visible))
    if chain.leaf is not None and chain.leaf not in order:
        order.insert(0, chain.leaf)
    visible = set(chain.visible)
    order += [p for p in reversed(chain.logical()) if p not in visible]
    for pos in order:
        obj = chain.obj(pos)
        chain.records[pos].release()  # a lean record does not keep the line it was read for
        if type_of(obj) not in CONVERSATION_TYPES:
            continue
        for key in ENVELOPE:
            if key not in env and isinstance(obj.get(key), str):
                env[key] = obj[key]
        looked += 1
        if len(env) == len(ENVELOPE) or looked >= ENVELOPE_LOOKBACK:
            break  # the newest lines have them all (older lines are not read)
    return env


def _is_setup_line(obj: dict) -> bool:
    if obj.get(SETUP_FIELD):
        return True
    att = obj.get("attachment")
    return obj.get("type") == "attachment" and isinstance(att, dict) \
        and att.get("type") in ("nested_memory", "skill_listing", "invoked_skills")


def _setup_key(record: Record) -> str | None:
    """The key of a lookout setup line (only a string is one: it is looked up in sets)."""
    return as_str((record.data or {}).get(SETUP_FIELD))


def _latest_per_key(records: list[Record]) -> list[Record]:
    """Of several lookout setup lines for one key keep the newest (the others are stale)."""
    last = {_setup_key(r): r for r in records}
    return [r for r in records if not _setup_key(r) or last[_setup_key(r)] is r]


def _exact_copy(record: Record) -> dict:
    """A mutable copy that keeps big integers and lone surrogates exactly."""
    if record.edited:
        import copy  # (with weakref: not on a measure's path)

        return copy.deepcopy(record.obj)
    return loads_exact(record.body)


def _stub(obj: dict) -> dict:
    """What a moved line leaves in its place besides its marker: its place on the chain (for
    lookout's history of the conversation) and a response's recorded usage, under its time,
    response and request ids (ccusage counts each response once, by those ids). No ``type``:
    Claude Code and the viewers pass over it."""
    stub = {k: obj[k] for k in ("parentUuid", "uuid", "timestamp") if k in obj}
    if obj.get("isSidechain") is True:
        stub["isSidechain"] = True
    message = obj.get("message")
    if obj.get("type") == "assistant" and isinstance(message, dict) and isinstance(message.get("usage"), dict):
        if "requestId" in obj:
            stub["requestId"] = obj["requestId"]
        import copy

        stub["message"] = copy.deepcopy({k: message[k] for k in ("id", "model", "usage") if k in message})
    return stub


def _zero_usage(obj: dict) -> None:
    """A moved response keeps its ``message.id`` but not its usage: its stub holds that, and
    the old usage would read as a full context (Claude Code and lookout estimate the context
    from the last response's usage) and compact again at once. Claude Code zeroes the usage of
    lines it keeps across a compaction for the same reason."""
    message = obj.get("message")
    if obj.get("type") != "assistant" or not isinstance(message, dict):
        return
    usage = message.get("usage")
    if isinstance(usage, dict):
        for key in ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
            if key in usage:
                usage[key] = 0
        split = usage.get("cache_creation")  # ccusage adds its tiers up too
        if isinstance(split, dict):
            for key, value in split.items():
                if isinstance(value, int) and not isinstance(value, bool):
                    split[key] = 0


def _records_of(items, lines: list[Record]) -> list[Record]:
    """The lines of ``lines`` that hold ``items``, in their order."""
    wanted = {id(i.record) for i in items}
    return [r for r in lines if id(r) in wanted]


def _with_parent_first(obj: dict) -> dict:
    """Claude Code writes ``parentUuid`` as the first key; some readers rely on it."""
    return {"parentUuid": obj["parentUuid"], **{k: v for k, v in obj.items() if k != "parentUuid"}}


def _unlink(transcript: Transcript, doomed: Record) -> None:
    """Point every reference to ``doomed`` at its parent, so removing it breaks no chain."""
    obj = doomed.data or {}
    uid, parent = obj.get("uuid"), obj.get("parentUuid")
    if not isinstance(uid, str):
        return
    for record in transcript.records:
        if record is doomed:
            continue
        data = record.data
        if not isinstance(data, dict):
            continue
        fields = [f for f in ("parentUuid", "logicalParentUuid", "leafUuid") if data.get(f) == uid]
        if fields:
            edited = record.edit()
            for f in fields:
                edited[f] = parent

