"""Claude Code session files: find the live conversation in the ``parentUuid`` tree.

A Claude Code file is append-only and holds a tree: rewinds leave dead branches, compactions
start new roots (a ``compact_boundary`` with ``parentUuid: null`` that points back through
``logicalParentUuid``), subagents write sidechains. This module finds, for the newest line of
the main chain (the *leaf*), the path back to its root, cut into *segments* at compaction
boundaries: the last segment is what the model sees on its next request.

Decisions (see formats.md §1 and the adapter report). Claude Code's own loader
(``loadTranscriptFile`` → ``applyPreservedSegmentRelinks`` → ``findLatestMessage`` →
``buildConversationChain`` → ``recoverOrphanedParallelToolResults``, as described by public
studies of its source [secondary]) is followed where it is known:

- The leaf is the conversation line (user, assistant, attachment, system) that no other
  conversation line descends from and that has the newest timestamp (the first of equal ones;
  the newest in file order when no timestamp parses), not a sidechain line. Progress lines
  below it do not count: a running tool or hook writes them under the newest line, and a hook
  that measures the session sees its own. ``last-prompt.leafUuid`` is not used: it can name
  the current turn's prompt, an ancestor of the live leaf.
- A file whose conversation lines are all sidechain lines (a 2.x ``subagents/agent-ID.jsonl``
  file) is read as that subagent's own conversation: the same walk over its lines.
- ``parentUuid`` resolves to the nearest line *before* the child with that uuid (a parent is
  always written before its children). This makes cycles impossible and copes with files that
  repeat a uuid (anthropics/claude-code #92089; trimmed fixtures).
- ``compactMetadata.preservedSegment`` on the last boundary (2.1.x partial compaction): if its
  tail walks back to its head, the head's parent becomes ``anchorUuid`` and the anchor's other
  children move under the tail, for the live conversation only.
- Parallel tool calls: newer versions parent each tool result on its own assistant line, so a
  single walk misses sibling lines of the same response. Lines that share a ``message.id`` with
  a response on the path, and tool results answering its calls, are stitched back in when their
  parent is on the path.

A cold load of a file (``claude_settled.Settling``) and a measure that resumes a grown file
from its line memo leave out the nodes of the lines before the last compaction they found, and
hand ``build_chain`` what those lines give instead (``Settled``: the older segments' usages and
compactions). The chain is built from the lines after it, and only when that is the chain the
whole file gives: none of them names a parent it cannot find, no preserved segment, the walk
reaches that compaction, and no line before it is a newer leaf. Else ``build_chain`` says None
and the caller reads those lines after all.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Sequence

from lookout_cli.core.dataclass import dataclass, field
from lookout_cli.core.jsonl import Record
from lookout_cli.core.times import parse_time
from lookout_cli.formats import CALL_BLOCKS, interned, type_of

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from typing import Any

CONVERSATION_TYPES = frozenset({"user", "assistant", "attachment", "system"})
# a line a compaction left where it moved a kept line from (``claude_code``): no ``type``, so
# Claude Code and viewers pass over it; lookout reads it as this kind, on the chain it held
MOVED_FIELD = "lookoutMoved"
MOVED_KIND = "lookout-moved"
CHAIN_TYPES = CONVERSATION_TYPES | {"progress", "saved_hook_context", MOVED_KIND}
METADATA_TYPES = frozenset({
    "summary", "file-history-snapshot", "file-history-delta", "queue-operation", "last-prompt",
    "ai-title", "custom-title", "agent-name", "agent-setting", "agent-color", "tag",
    "permission-mode", "mode", "worktree-state", "pr-link", "frame-link", "bridge-session",
    "relocated", "fork-context-ref", "atis-latch", "turn_end", "content-replacement",
})
LINE_TYPES = CHAIN_TYPES | METADATA_TYPES
ID_FIELDS = ("uuid", "parentUuid", "sessionId", "leafUuid", "messageId")


# What the chain walk, the usages and the compactions read of a line: ``node_of`` keeps these
# and drops the rest (message text, tool output, toolUseResult copies) for a lean transcript.
# Those every line has come first: a node ends at its last field present (a progress line's
# is three long, not eleven; ``isSidechain`` is kept only when true, all that is asked of it).
NODE_FIELDS = ("type", "uuid", "parentUuid", "timestamp", "message", "isSidechain", "requestId", "subtype",
               "logicalParentUuid", "isApiErrorMessage", "compactMetadata")


class Fields(tuple):
    """A value cut down to a few fields (``KEYS``; None when absent, and the tuple may end
    before its last fields) and read like the parsed dict with ``get``, so the functions below
    take either. A tuple, not a dict: a dict of a few keys takes 232 bytes, and there are
    nodes for every line of the file. A field that holds a smaller value of the kind
    (``NESTED``) keeps it as a plain tuple and wraps it when read: a node is one object, kept
    and read back by ``marshal`` as a plain tuple."""

    __slots__ = ()
    KEYS: tuple[str, ...] = ()
    NESTED: dict[str, Callable[[tuple], Any]] = {}
    _AT: dict[str, int] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._AT = {key: n for n, key in enumerate(cls.KEYS)}
        wrap = {cls._AT[key]: kind for key, kind in cls.NESTED.items()}

        def get(self, key: str, default: Any = None, _at=cls._AT.get, _wrap=wrap.get) -> Any:  # bound once: hot
            at = _at(key)
            if at is None:
                return default
            if at >= len(self):
                return None
            value, kind = self[at], _wrap(at)
            return value if kind is None or value is None else kind(value)

        cls.get = get


class NodeCreation(Fields):
    __slots__ = ()
    KEYS = ("ephemeral_1h_input_tokens",)


class NodeUsage(Fields):
    __slots__ = ()
    KEYS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens",
            "cache_creation")
    NESTED = {"cache_creation": NodeCreation}


class NodeBlock(Fields):
    __slots__ = ()
    KEYS = ("type", "id", "name", "tool_use_id")


class NodeMessage(Fields):
    __slots__ = ()
    KEYS = ("id", "model", "usage", "content")  # content: the blocks that carry ids
    NESTED = {"usage": NodeUsage, "content": lambda blocks: tuple(map(NodeBlock, _blocks_of(blocks)))}


class Node(Fields):
    """What ``node_of`` keeps of a line."""

    __slots__ = ()
    KEYS = NODE_FIELDS
    NESTED = {"message": NodeMessage}


def is_map(value: Any) -> bool:
    """A JSON object, parsed or cut down to a node's fields."""
    return isinstance(value, (dict, Fields))


_UUIDS = [Node._AT[k] for k in ("uuid", "parentUuid", "logicalParentUuid")]
_MESSAGE, _TIMESTAMP, _SIDECHAIN = Node._AT["message"], Node._AT["timestamp"], Node._AT["isSidechain"]
_BLOCK_KEYS = NodeBlock.KEYS
_TYPE, _ID, _NAME, _USE_ID = (NodeBlock._AT[k] for k in ("type", "id", "name", "tool_use_id"))


def uuid_key(value: Any) -> Any:
    """A uuid as the chain keys it: a lower-case canonical UUID as its 128-bit number (48 bytes
    kept, not 85: a long session has one a line), another string as its interned self, anything
    else (which names no line) None. No two strings give one key."""
    if type(value) is not str:
        return None
    if len(value) == 36 and value[8] == value[13] == value[18] == value[23] == "-":
        digits = value.replace("-", "")
        if len(digits) == 32 and not digits.strip("0123456789abcdef"):  # int() also takes A-F and _
            return int(digits, 16)
    return sys.intern(value)


class RecentUuids(dict):
    """The uuids of the lines read last, by their text, as ``uuid_key`` gives them: a child's
    ``parentUuid`` (nearly always a line just before it) is then its parent's number, not a
    copy, and is not worked out again. Bounded: all of a long session's would take as much
    room as the copies."""

    LIMIT = 4096

    def key(self, value: Any) -> Any:
        found = self.get(value) if type(value) is str else None
        if found is None:
            if value is None:
                return None
            if len(self) >= self.LIMIT:
                self.clear()
            found = uuid_key(value)
            if found is not None:
                self[value] = found
        return found


_REQUEST_ID = Node._AT["requestId"]
# a moved line's usage stays where it was, and is read with its time (the meter's series and
# warm cache): it was dropped, and a compacted session's lean figures lacked the times
_TIMED_TYPES = CONVERSATION_TYPES | {MOVED_KIND}
_USAGE_KEYS = NodeUsage.KEYS[:-1]


def node_of(obj: dict, recent: RecentUuids | None = None) -> Node:
    """A line's parsed value cut down to the fields above, its uuids as ``uuid_key`` gives them
    (shared with the ``recent`` lines'). Names and ids are interned: a split response's lines
    share one ``message.id``, a result names its call."""
    values = list(map(obj.get, NODE_FIELDS))
    kind = values[0]
    if type(kind) is str:
        values[0] = kind = sys.intern(kind)
    elif kind is None and MOVED_FIELD in obj:
        values[0] = kind = MOVED_KIND
    key = recent.key if recent is not None else uuid_key
    for at in _UUIDS:
        if values[at] is not None:
            values[at] = key(values[at])
    if type(kind) is not str or kind not in _TIMED_TYPES:
        values[_TIMESTAMP] = None  # read only of conversation lines (the leaf, items, usages)
    if values[_SIDECHAIN] is not True:
        values[_SIDECHAIN] = None
    message = values[_MESSAGE]
    if type(message) is dict:
        mid = message.get("id")
        if type(mid) is str:
            mid = sys.intern(mid)
            if mid:
                values[_REQUEST_ID] = None  # the response's key is its message id then
        usage = message.get("usage")
        if type(usage) is dict:
            creation = usage.get("cache_creation")
            usage = (*map(usage.get, _USAGE_KEYS),
                     (creation.get("ephemeral_1h_input_tokens"),) if type(creation) is dict else None)
        else:
            usage = None
        content = message.get("content")
        if type(content) is list:
            content = tuple(tuple(map(interned, map(b.get, _BLOCK_KEYS))) for b in content
                            if type(b) is dict and ("id" in b or "tool_use_id" in b))
            content = content[0] if len(content) == 1 else content or None  # one block: kept bare
        else:
            content = None
        values[_MESSAGE] = (mid, interned(message.get("model")), usage, content)
    else:
        values[_MESSAGE] = None
    end = len(values)
    while end and values[end - 1] is None:
        end -= 1
    del values[end:]
    return Node(values)


def plain(node: Any) -> Any:
    """A node as a plain tuple (what ``marshal`` keeps); ``revive`` makes it a node again."""
    return tuple(node) if isinstance(node, Node) else node


def revive(kept: Any) -> Any:
    return Node(kept) if type(kept) is tuple else kept  # JSON gives lists, never tuples


def line_type(obj: Any) -> Any:
    """A line's ``type`` (a node's read by position: this runs for every line of a view)."""
    if type(obj) is Node:
        return obj[0] if obj else None
    kind = obj.get("type")
    return kind if kind is not None or MOVED_FIELD not in obj else MOVED_KIND


def is_sidechain(obj: dict) -> bool:
    return obj.get("isSidechain") is True


def is_boundary(obj: dict) -> bool:
    return obj.get("type") == "system" and obj.get("subtype") == "compact_boundary"


def message_id(obj: dict) -> str | None:
    if type(obj) is Node:  # read by position: these run for every line of the chain
        message = _message(obj)
        mid = message[0] if message is not None else None
    else:
        message = obj.get("message")
        mid = message.get("id") if is_map(message) else None
    return mid if isinstance(mid, str) and mid else None


def tool_result_ids(obj: dict) -> list[str]:
    if type(obj) is Node:  # the blocks' plain tuples, read by position: this runs for every line
        return [b[_USE_ID] for b in _node_blocks(obj) if b[_TYPE] == "tool_result" and type(b[_USE_ID]) is str]
    return [b.get("tool_use_id") for b in blocks(obj)
            if b.get("type") == "tool_result" and isinstance(b.get("tool_use_id"), str)]


def tool_use_ids(obj: dict) -> list[str]:
    if type(obj) is Node:
        return [b[_ID] for b in _node_blocks(obj) if b[_TYPE] in CALL_BLOCKS and type(b[_ID]) is str]
    return [b.get("id") for b in blocks(obj) if b.get("type") in CALL_BLOCKS and isinstance(b.get("id"), str)]


def tool_calls(obj: dict) -> list[tuple[str, str]]:
    """(id, name) of each tool call a line's message makes."""
    if type(obj) is Node:
        return [(b[_ID], b[_NAME]) for b in _node_blocks(obj)
                if b[_TYPE] in CALL_BLOCKS and type(b[_ID]) is str and type(b[_NAME]) is str]
    return [(b.get("id"), b.get("name")) for b in blocks(obj) if b.get("type") in CALL_BLOCKS
            and isinstance(b.get("id"), str) and isinstance(b.get("name"), str)]


def usage_of(obj: dict) -> tuple[Any, Any, Any, Any, Any, Any] | None:
    """(model, input, cache write, cache read, output, 1-hour cache write) as a line's message
    records them in its usage object (unchecked), else None."""
    if type(obj) is Node:  # read by position: this runs for every response of the chain
        message = _message(obj)
        if message is None or message[2] is None:
            return None
        uncached, write, read, output, creation = message[2]
        return message[1], uncached, write, read, output, creation[0] if creation else None
    message = obj.get("message")
    usage = message.get("usage") if is_map(message) else None
    if not is_map(usage):
        return None
    creation = usage.get("cache_creation")
    return (message.get("model"), usage.get("input_tokens"), usage.get("cache_creation_input_tokens"),
            usage.get("cache_read_input_tokens"), usage.get("output_tokens"),
            creation.get("ephemeral_1h_input_tokens") if is_map(creation) else None)


def _message(node: Node) -> tuple | None:
    return node[_MESSAGE] if len(node) > _MESSAGE else None


def _blocks_of(content: tuple | None) -> tuple:
    """A node's blocks with ids: ``node_of`` keeps a single one bare (most lines have one)."""
    if not content:
        return ()
    return content if type(content[0]) is tuple else (content,)


def _node_blocks(node: Node) -> tuple:
    message = _message(node)
    return _blocks_of(message[3]) if message is not None else ()


def blocks(obj: dict) -> list | tuple:
    """The content blocks of a line's message that are objects (a node's are those with ids)."""
    if type(obj) is Node:
        return tuple(map(NodeBlock, _node_blocks(obj)))
    message = obj.get("message")
    content = message.get("content") if is_map(message) else None
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else ()


class Settled:
    """What the lines before line ``at`` (a compaction boundary) give the view: the ``usages``
    of the older segments as ``claude_items`` counts responses (``usages.Usages``, all older),
    with the ``keys`` they are counted by, and the ``compactions``, each as the view holds it;
    and ``latest``, the time of the newest leaf those lines offer."""

    __slots__ = ("at", "compactions", "keys", "latest", "usages")

    def __init__(self, at: int, usages: Any, keys: list, compactions: list, latest: str | None) -> None:
        self.at, self.usages, self.keys, self.compactions, self.latest = at, usages, keys, compactions, latest


@dataclass
class Chain:
    """The live conversation of one transcript, as positions in ``records``."""

    records: Sequence[Record]
    nodes: list = field(default_factory=list)  # each line's Node (or its whole value)
    sidechain: bool = False  # True when read as a subagent file (all lines sidechain)
    leaf: int | None = None
    visible: list[int] = field(default_factory=list)  # live segment in chain order, boundary excluded
    boundary: int | None = None  # the compact_boundary that starts the live segment
    segments: list[list[int]] = field(default_factory=list)  # oldest first, each in chain order
    boundaries: list[int] = field(default_factory=list)  # reachable boundaries, oldest first
    settled: Settled | None = None  # what the lines before the first boundary gave, not read
    latest: str | None = None  # the newest leaf the lines before the last boundary offer (its time)
    # once the view is built: its last boundary, the keys of the usages before it (in the view's
    # order) and ``latest``, for ``claude_items.settled`` (what the line memo keeps)
    settle: tuple | None = None

    def obj(self, pos: int) -> dict:
        return self.records[pos].data or {}

    def node(self, pos: int) -> dict:
        """What ``node_of`` keeps of a line: enough for ids, usage, model and times."""
        return self.nodes[pos] or {}

    def logical(self) -> list[int]:
        """Every line of every segment, oldest first, each boundary before its segment."""
        out: list[int] = list(self.segments[0]) if self.segments else []
        for boundary, segment in zip(self.boundaries, self.segments[1:]):
            out.append(boundary)
            out.extend(segment)
        return out


SPARSE_FROM = 16  # lines before the settled one for each after it, from which ``build_chain`` keeps a dict


class _Sparse(dict):
    """A list's stand-in, by position, for the lines from a settled value's line on (``build_chain``):
    None where nothing is set. A prompt's chain of a long compacted session reads its last few
    hundred lines, and a list of every line's place (five of them) was most of its time: pages
    the kernel hands out fresh, a few microseconds each on this kind of machine."""

    __slots__ = ()
    __getitem__ = dict.get  # (not ``__missing__``: a call of Python's a line not set)

    def copy(self) -> _Sparse:
        return _Sparse(self)


def _chain_keys(objs: list | _Sparse, start: int, blank: Callable[[], Any]) -> tuple[Any, list[int], bytearray]:
    """One pass over the lines from ``start`` on (the ones before it are not read): each line's
    type by position (None off the chain; in ``blank()``), the chain's lines in order, and
    whether each of those is a sidechain line. A node is read by position: this runs for every
    line."""
    kinds = blank()
    lines: list[int] = []
    side = bytearray()
    for i, o in (objs.items() if type(objs) is _Sparse else enumerate(itertools.islice(objs, start, None), start)):
        if o is None:
            continue
        if type(o) is Node:
            if len(o) < 2:
                continue  # no uuid: not on the chain
            kind, uid, sidechain = o[0], o[1], len(o) > _SIDECHAIN and o[_SIDECHAIN] is True
        else:
            kind, uid, sidechain = type_of(o) or line_type(o), uuid_key(o.get("uuid")), is_sidechain(o)
        if uid is None or type(kind) is not str or kind not in CHAIN_TYPES:
            continue
        kinds[i] = kind
        lines.append(i)
        side.append(sidechain)
    return kinds, lines, side


def _uuids(obj: Any) -> tuple[Any, Any]:
    """A chain line's uuid and its parent's, as the chain keys them (read by position off a
    node)."""
    if type(obj) is Node:
        return obj[1], (obj[2] if len(obj) > 2 else None)
    return uuid_key(obj.get("uuid")), uuid_key(obj.get("parentUuid"))


def uuid_of(obj: Any, name: str) -> Any:
    """A line's uuid field as the chain keys it (a node keeps it so)."""
    return obj.get(name) if type(obj) is Node else uuid_key(obj.get(name))


def build_chain(records: Sequence[Record], settled: Settled | None = None) -> Chain | None:
    """The chain of ``records``; with ``settled``, of the lines from its ``at`` on (the others
    have no node), None when that is not the chain of every line."""
    # a lean record keeps only its node; any other keeps its whole value, which reads the same
    at = settled.at if settled is not None else 0
    size = len(records)
    # what is kept by position: lists, or with ``settled`` the lines from ``at`` on only
    # (a dict's lookups cost more than a list's: paid where the lines before are many more)
    sparse = settled is not None and at > SPARSE_FROM * (size - at)
    objs: list | _Sparse
    if sparse:
        objs = _Sparse(zip(range(at, size), [r.node if r.node is not None else r.data for r in records[at:]]))
    else:
        objs = [None] * at
        objs += [r.node if r.node is not None else r.data for r in records[at:]]

    def blank() -> list | _Sparse:  # a value a line, by position (flags: ``bytearray(size)``, few pages)
        return _Sparse() if sparse else [None] * size

    kinds, lines, side = _chain_keys(objs, at, blank)
    sidechain = not any(kinds[i] in CONVERSATION_TYPES and not s for i, s in zip(lines, side))
    if settled is not None and sidechain:
        return None
    chain = Chain(records, objs, sidechain=sidechain)
    members = lines if all(s == sidechain for s in side) else [i for i, s in zip(lines, side) if s == sidechain]
    del side
    if not members:
        return chain
    by_uuid: dict[Any, int | list[int]] = {}  # a list only for a uuid that repeats (rare)
    for i in lines:
        uid = _uuids(objs[i])[0]
        seen = by_uuid.get(uid)
        if seen is None:
            by_uuid[uid] = i
        elif type(seen) is int:
            by_uuid[uid] = [seen, i]
        else:
            seen.append(i)

    def resolve(uid: Any, before: int) -> int | None:
        """The nearest line before ``before`` with this uuid."""
        found = by_uuid.get(uid) if uid is not None else None
        if found is None:
            return None
        if type(found) is int:
            return found if found < before else None
        earlier = [p for p in found if p < before]
        return earlier[-1] if earlier else None

    def latest(uid: Any) -> int | None:
        found = by_uuid.get(uid) if uid is not None else None
        return found[-1] if isinstance(found, list) else found

    if settled is not None and (at >= size or not is_map(objs[at]) or preserved_segment(objs[at]) is not None):
        return None  # a partial compaction relinks lines not read
    overrides, pruned = _preserved_relinks(objs, kinds, lines, members, resolve, latest)
    if settled is not None and pruned:
        return None
    # each line's parent, resolved once (by position: a list, not a dict of every line); the
    # live conversation's with the relinks applied
    parents = blank()
    for i in lines:
        parents[i] = resolve(_uuids(objs[i])[1], i)
    if settled is not None and any(parents[i] is None and _uuids(objs[i])[1] is not None for i in members):
        return None  # a parent among the lines not read
    live_parents = parents
    if overrides:
        live_parents = parents.copy()
        for i, parent in overrides.items():
            live_parents[i] = parent

    leaf, offered = _find_leaf(objs, kinds, lines, [i for i in members if i not in pruned],
                               live_parents.__getitem__, bytearray(size))
    if leaf is None:
        return None if settled is not None else chain
    if settled is not None and settled.latest is not None:
        newest = parse_time(objs[leaf].get("timestamp"))
        if newest is None or newest <= parse_time(settled.latest):
            return None  # a line not read is the leaf (the first of equal times)
    chain.leaf = leaf

    def walk(start: int, live: bool) -> tuple[list[int], int | None]:
        """Walk back from ``start``; return the path (chain order) and the boundary it hit."""
        path: list[int] = []
        seen = bytearray(size)
        pos: int | None = start
        parent_of = (live_parents if live else parents).__getitem__
        while pos is not None and not seen[pos]:
            seen[pos] = 1
            if kinds[pos] == "system" and is_boundary(objs[pos]):
                return path[::-1], pos
            path.append(pos)
            pos = parent_of(pos)
        if settled is not None and pos is None and path and _uuids(objs[path[-1]])[1] is not None:
            raise LookupError  # (through a line of another chain: a parent among the lines not read)
        return path[::-1], None

    segments: list[list[int]] = []
    boundaries: list[int] = []
    start: int | None = leaf
    live = True
    while True:
        try:
            path, boundary = walk(start, live)
        except LookupError:
            return None
        segments.append(path)
        if boundary is None or boundary in boundaries:
            break
        boundaries.append(boundary)
        live = False
        if settled is not None and boundary == settled.at:
            segments.append([])  # the lines before it, not read: ``settled`` says what they give
            chain.settled = settled
            break
        start = resolve(uuid_of(objs[boundary], "logicalParentUuid"), boundary)
        if start is None:  # the logical parent is missing (#40027): an empty older segment
            if settled is not None:
                return None  # or among the lines not read
            segments.append([])
            break
    segments.reverse()
    boundaries.reverse()
    chain.segments = segments
    chain.boundaries = boundaries
    chain.boundary = boundaries[-1] if boundaries else None
    if chain.boundary is not None:
        stamps = [stamp for i, stamp in offered if i < chain.boundary]
        if chain.settled is not None and chain.settled.latest is not None:
            stamps.append(chain.settled.latest)
        chain.latest = max(stamps, key=parse_time) if stamps else None
    chain.visible = _recover_siblings(objs, kinds, members, segments[-1], chain.boundary,
                                      live_parents.__getitem__, blank())
    return chain


def _find_leaf(objs, kinds, lines, members, parent_of, above) -> tuple[int | None, list[tuple[int, str]]]:
    """Claude Code's ``findLatestMessage``: of the conversation lines no other conversation
    line descends from, the one with the newest timestamp (the first of equals); the newest in
    file order when no timestamp parses. With it, each of those lines whose time parses, and
    that time's text. ``above``: a line's place each, blank (to mark the lines with a
    conversation line below them)."""
    for i in lines:
        if kinds[i] in CONVERSATION_TYPES:
            pos = parent_of(i)
            while pos is not None and not above[pos]:  # each line is walked once
                above[pos] = 1
                pos = parent_of(pos)
    candidates = [i for i in members if kinds[i] in CONVERSATION_TYPES and not above[i]]
    if not candidates:
        return None, []
    best, best_time = None, None
    offered = []
    for i in candidates:
        text = objs[i].get("timestamp")
        stamp = parse_time(text)
        if stamp is not None:
            offered.append((i, text))
            if best_time is None or stamp > best_time:
                best, best_time = i, stamp
    return (best if best is not None else candidates[-1]), offered


def _preserved_relinks(objs, kinds, lines, members, resolve, latest) -> tuple[dict[int, int], set[int]]:
    """``applyPreservedSegmentRelinks``: when the last boundary carries a preserved segment
    whose tail walks back to its head, the head's parent becomes the anchor and the anchor's
    other children move under the tail (for the live conversation only). Once any boundary
    carries a preserved segment, the lines before the last boundary (except the preserved
    ones) cannot be the leaf. Returns the parent overrides and those pruned lines."""
    boundaries = [i for i in members if kinds[i] == "system" and is_boundary(objs[i])]
    if not boundaries:
        return {}, set()
    segments = [(i, seg) for i in boundaries if (seg := preserved_segment(objs[i])) is not None]
    if not segments:
        return {}, set()
    last = boundaries[-1]
    overrides: dict[int, int] = {}
    preserved: set[int] = set()
    where, seg = segments[-1]
    head, tail, anchor = (latest(uuid_key(seg.get(f"{end}Uuid"))) for end in ("head", "tail", "anchor"))
    if where == last and None not in (head, tail, anchor) and head != anchor and head <= tail:
        pos: int | None = tail
        walked: list[int] = []
        while pos is not None and pos not in walked:
            walked.append(pos)
            if pos == head:
                break
            pos = resolve(_uuids(objs[pos])[1], pos)
        if pos == head:
            preserved = set(walked)
            overrides[head] = anchor
            for i in lines:
                if i != head and i > anchor and resolve(_uuids(objs[i])[1], i) == anchor:
                    overrides[i] = tail
    pruned = {i for i in members if i < last and i not in preserved}
    return overrides, pruned



def preserved_segment(obj: Any) -> dict | None:
    """The ``compactMetadata.preservedSegment`` of a boundary (a partial compaction), if any."""
    meta = obj.get("compactMetadata")
    seg = meta.get("preservedSegment") if isinstance(meta, dict) else None
    return seg if isinstance(seg, dict) else None


def _recover_siblings(objs, kinds, members, path, boundary, parent_of, run_of) -> list[int]:
    """Add the split-response lines and tool results that a single parent walk misses.

    The path is in chain order. It rises in file order except where a preserved segment is
    relinked to its (later-written) anchor, so it is cut into rising runs; a recovered line
    joins its parent's run, and each run is put in file order. ``run_of``: a line's place
    each, blank (each line's run, by position)."""
    runs: list[list[int]] = []
    for pos in path:
        if not runs or pos < runs[-1][-1]:
            runs.append([])
        runs[-1].append(pos)
        run_of[pos] = len(runs) - 1
    low = boundary if boundary is not None else -1
    # only responses and tool results can be stitched in (not progress, not metadata)
    candidates = [i for i in members if i > low and run_of[i] is None
                  and kinds[i] in ("assistant", "user")]
    if not candidates:  # the walk found every line (the ids of a long path are not worth collecting)
        return [pos for run in runs for pos in sorted(run)]
    groups = {message_id(objs[p]) for p in path} - {None}
    answered = {t for p in path for t in tool_result_ids(objs[p])}
    called = {t for p in path for t in tool_use_ids(objs[p])}
    changed = True
    while changed:
        changed = False
        for i in candidates:
            if run_of[i] is not None:
                continue
            o = objs[i]
            parent = parent_of(i)
            if parent is None or run_of[parent] is None:
                continue
            if kinds[i] == "assistant" and message_id(o) in groups:
                pass
            elif kinds[i] == "user":
                ids = tool_result_ids(o)
                if not ids or not all(t in called and t not in answered for t in ids):
                    continue
            else:
                continue
            run_of[i] = run_of[parent]
            runs[run_of[i]].append(i)
            called.update(tool_use_ids(o))
            answered.update(tool_result_ids(o))
            changed = True
    return [pos for run in runs for pos in sorted(run)]
