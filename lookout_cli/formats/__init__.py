"""Format adapters: detect a transcript's format, build its view, write edits back in its shape.

The neutral view every command reads (``view``, with its words in ``kinds``) and clearing a
part of it with the content saved first (``clearing``) live here too. Imports ``core`` and
``tokens.tokenizer``.

Each adapter module defines one ``Adapter`` subclass and registers it in ``ADAPTERS`` below.
The interface every command relies on is the ``Adapter`` base class; a command never checks
which format it holds.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Sequence

from lookout_cli.core.errors import LookoutError
from lookout_cli.core.jsonl import Lines, Record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:  # pragma: no cover - imported by the adapters, which build views
    from typing import IO, Any

    from lookout_cli.formats.view import Item, View

# name -> module inside lookout_cli.formats; imported only when needed
ADAPTERS = {
    "claude-code": "claude_code",
    "codex": "codex",
    "openai": "openai",
    "anthropic": "anthropic",
    "gemini-cli": "gemini_cli",
}

SNIFF_RECORDS = 50  # detection looks at this many JSON records from the top
# Anthropic Messages content blocks that call a tool (Claude Code and the anthropic list)
CALL_BLOCKS = ("tool_use", "server_tool_use", "mcp_tool_use")


def as_str(value: Any) -> str | None:
    """``value`` when it is a string, else None: a type or media type is looked up in sets and
    tables of known names, and a list or object there is unhashable (a TypeError)."""
    return value if isinstance(value, str) else None


def interned(value: Any) -> Any:
    """A string as its one shared copy (a parsed line's strings are its own: names, types and
    ids that many lines repeat are kept once), anything else as it is."""
    return sys.intern(value) if type(value) is str else value


def type_of(obj: dict) -> str | None:
    """``obj["type"]`` when it is a string: any other value names nothing known, so the line or
    part reads as an unknown one."""
    return as_str(obj.get("type"))


class OneLine:
    """Holds one record's line at a time while a view reads records in order: moving on to
    another record lets go of the one before (a lean record reads its line again if asked;
    a record that holds several items, such as a list of messages, is read once for all)."""

    def __init__(self) -> None:
        self.record: Record | None = None

    def visit(self, record: Record) -> None:
        if record is not self.record:
            self.close()
            self.record = record

    def close(self) -> None:
        if self.record is not None:
            self.record.release()
            self.record = None


class Transcript:
    """All records of one input, in order, and the adapter that understands them."""

    def __init__(self, records: list[Record] | Lines, adapter: Adapter | None, source: str | None = None):
        self.lines: Lines  # the records, those of the lines a lean load left unmade made when asked for: to read,
        # and to change in place (``lines[n] = record``: a line's place stays) or append to (``records``)
        self.records = records
        self.original = self.lines.copy()  # what came in, for --dry-run and --check (sharing the records made)
        self.adapter = adapter
        self.source = source  # the input file's path, or None for standard input
        self._view: View | None = None
        self._kept: dict[str, Any] = {}  # what ``kept`` worked out from the records
        # Run.load(lean=True): the open input the records point into, and the bytes they span
        self.spool: IO[bytes] | None = None
        self.spool_span = (0, 0)
        # called with the view and every item as it is built (measure counts and shrinks them)
        self.sink: Callable[[View, Item], None] | None = None
        self.memo = None  # line_memo.LineMemo: what a lean measure of this file learned before
        self.early = None  # early.EarlyItems: the items each line gave as it was read
        # what the lines before some line give the view (``Adapter.settled``): from a cold
        # load's ``Adapter.settling``, or set by an edit that changes none of them, for the
        # views built after it (until lines are inserted or removed)
        self.settled = None

    @property
    def records(self) -> list[Record]:
        """Every record, in a list (``Lines.every``: the lines a lean load left unmade are made now)."""
        return self.lines.every()

    @records.setter
    def records(self, records: list[Record] | Lines) -> None:
        self.lines = records if type(records) is Lines else Lines(None, 0, records)

    def number(self) -> None:
        """Number the lines as they are to be written (those a command added have none, 0)."""
        self.lines.number()

    def made(self) -> Iterable[Record]:
        """The records made so far (``lines``: the others hold nothing)."""
        return self.lines.made()

    @property
    def format(self) -> str | None:
        return self.adapter.name if self.adapter else None

    def view(self) -> View:
        """The model-visible view, built once and rebuilt after ``invalidate()``."""
        if self._view is None:
            if self.adapter is None:
                from lookout_cli.formats.view import View

                self._view = View(format="unknown")
            else:
                self._view = self.adapter.view(self)
        return self._view

    def kept(self, key: str, build: Callable[[], Any]) -> Any:
        """``build()``, worked out once from the records and again after ``invalidate()``
        (a claude-code chain: building it reads every line)."""
        if key not in self._kept:
            self._kept[key] = build()
        return self._kept[key]

    def invalidate(self) -> None:
        self._view = None
        self._kept.clear()

    @property
    def changed(self) -> bool:
        return self.records != list(self.original) or any(r.edited for r in self.records)

    # Structural edits used by adapters. Items point at Record objects, so indices never go stale.
    def insert_after(self, anchor: Record | None, new: Sequence[Record]) -> None:
        at = 0 if anchor is None else self.records.index(anchor) + 1
        self.records[at:at] = list(new)
        self.settled = None  # the line it names may have moved
        self.invalidate()

    def append(self, new: Sequence[Record]) -> None:
        self.lines.extend(new)
        self.invalidate()

    def remove(self, doomed: Sequence[Record]) -> None:
        ids = {id(r) for r in doomed}
        self.records = [r for r in self.records if id(r) not in ids]
        self.settled = None
        self.invalidate()


class Adapter:
    """What a format must provide. Methods that a format cannot support raise LookoutError."""

    name = "unknown"
    can_write = True  # False for read-only formats (gemini-cli)
    # True when the view can be built from each line's ``node`` (``record_node``) plus one more
    # reading of the model-visible lines (``OneLine``), and builds its items through
    # ``View.add`` with ``View.model`` set before the first
    lean = False
    # True when a lean view also keeps its lines' items in a line memo and takes them back from
    # it (``line_memo.LineMemo.begin``, ``items``, ``keep``)
    remembers_items = False
    # True when a line names the line it follows (a parent id), so that lines appended to the
    # file while a command worked continue from where they were written, not from the file's
    # end: they can follow the command's output only when it still ends with the input's end
    linked = False

    def node(self, obj: Any) -> Any:
        """What a lean transcript keeps of a line's parsed value (see ``lean``)."""
        return obj

    def record_node(self, record: Record) -> Any:
        """``record``'s node: the one a lean load kept, else worked out from its value (and kept
        while the record is not edited: editing commands read the view again after each step).
        None when the line is not a JSON object."""
        node = record.node
        if node is None or record.edited:
            data = record.data
            if data is None:
                return None
            node = self.node(data)
            if not record.edited:
                record.node = node
        return node

    def plain(self, node: Any) -> Any:
        """A node as values ``marshal`` keeps (``line_memo``); ``revive`` reverses it."""
        return node

    def settled(self, transcript: Transcript, known: int = 0) -> tuple[int, Any] | None:
        """What the lines before some line give the view, once it is built, as values
        ``marshal`` keeps: (that line's position, the value); None when there is none or it is
        the one before line ``known`` (which the caller holds). A measure that resumes the grown
        file (``line_memo``) hands the value back as ``memo.settled`` and leaves those lines'
        nodes out (``memo.unsettle()`` when the adapter finds it does not hold)."""
        return None

    def revive(self, kept: Any) -> Any:
        return kept

    @classmethod
    def sniff(cls, obj: Any) -> int:
        """Score how strongly one parsed record looks like this format (0 = not at all)."""
        return 0

    def view(self, transcript: Transcript) -> View:
        raise NotImplementedError

    # ``line_items(record, obj, sink)``: the items of a line worked out from the line alone as
    # it is read, each handed to ``sink``; None when the view must read the line again. A lean
    # load then parses each line once (``formats.early.EarlyItems``). None: not offered.
    line_items: Callable[[Record, Any, Callable], list[Item] | None] | None = None

    def shown_from(self, fd: int, start: int, end: int) -> int:
        """Where the line the conversation is shown from starts in the file open as ``fd``
        (read from ``start`` to ``end``): the lines before it are neither built as they are read
        nor counted ahead (a compacted session's earlier segments). 0: any line may be shown."""
        return 0

    def settling(self) -> Any:
        """For a load of a whole file, a reader of the lines before the one it is shown from
        that keeps what they give the view instead of a node a line: its ``add(value)`` takes
        each line in order (its parsed value, None when not a JSON object), or
        ``reader(size)``'s function each line's bytes (it parses them, in the way that pays
        for ``size`` bytes of lines; False: no JSON value, the caller keeps a record of it),
        ``settled(records)``, once they are read, gives the value the view takes (as
        ``Transcript.settled``) or None, and ``join(later)``, when it has one, takes in a reader
        of its type, made with ``follows=True``, that read the lines after these (in another
        process: ``--jobs``). None: every line keeps its node."""
        return None

    def counted_texts(self, obj: Any) -> Iterable[str]:
        """Texts of a parsed line that its view would count, known without the lines around it
        (``count_ahead``); none when the format cannot tell."""
        return ()

    # --- usage only (``measure --usage-only``) -----------------------------------------------
    # Bytes one of which a line holds when it records usage, a compaction or the model (a
    # usage-only load parses no other line); None: every line is read.
    usage_needles: tuple[bytes, ...] | None = None

    def usage_node(self, obj: Any) -> Any:
        """What a usage-only load keeps of a line holding a needle (``usage_view`` reads it);
        None: the line records nothing that view reads, and is not kept."""
        return self.node(obj)

    def usage_view(self, records: Sequence[Record]) -> View:
        """A view with the usages and compactions of ``records`` (its items are not read): the
        lines a usage-only load kept, or every line when the format has no needles."""
        return self.view(Transcript(list(records), self))

    # --- edits -------------------------------------------------------------------------------
    def replace_content(self, transcript: Transcript, item: Item, text: str) -> None:
        """Replace a part's content in place with ``text`` (a placeholder), keeping the part's
        role, ids and pairing. For images (and for Claude Code's second copy of a tool's image
        in ``toolUseResult``) every copy of the bytes goes."""
        raise self.unsupported("replace content")

    def copies(self, item: Item) -> list[Record]:
        """Other lines that ``replace_content`` changes with ``item`` (a display copy of an image
        kept in a line of its own). It leaves in each ``saved.restore_marker`` of its original
        bytes, which the caller saves first, so ``lookout restore`` puts that line back too."""
        return []

    def note_part(self, text: str) -> dict:
        """A text part in the format's shape, for ``add_note``."""
        return {"type": "text", "text": text}

    def add_note(self, transcript: Transcript, item: Item, text: str) -> None:
        """Put a text part right after ``item`` in the list of parts that holds it: a note the
        model reads with a part lookout changed in place (a shrunk image), which carries its
        restore marker. Raises LookoutError when the part is not in such a list."""
        *path, index = item.path or (None,)
        parts = item.record.obj
        for key in path:
            parts = parts[key]
        if not self.can_write or not isinstance(index, int) or not isinstance(parts, list):
            raise LookoutError(f"{self.name}: cannot add a note after this part")
        parts = item.record.edit()
        for key in path:
            parts = parts[key]
        parts.insert(index + 1, self.note_part(text))
        transcript.invalidate()

    def add_parts(self, transcript: Transcript, prompt: Item, parts: list[dict]) -> None:
        """Add attachments to the user message that ``prompt`` starts. Each part is a neutral
        dict: ``{"type": "text", "text": …}`` or
        ``{"type": "image", "media_type": …, "data": <base64>}``; the adapter writes them in the
        format's own shape."""
        raise self.unsupported("add attachments")

    def set_setup(self, transcript: Transcript, key: str, text: str | None) -> None:
        """Put (or with ``None`` remove) a named setup block such as the memory list, so the
        model sees it before the conversation. Running it twice with the same text changes
        nothing."""
        raise self.unsupported("edit the setup")

    def compact(
        self,
        transcript: Transcript,
        summary: str | None,
        keep_from: Item | None,
        metadata: dict[str, Any],
    ) -> list[Record]:
        """Record a compaction the way the format's own agent does: afterwards the model sees
        the setup, then ``summary`` (None: a truncation notice), then every item from
        ``keep_from`` (a prompt item; None: keep nothing) onward, word for word. ``metadata``
        holds ``trigger`` ("manual"/"auto"), ``pre_tokens`` and ``post_tokens``, and ``save``:
        a callable the adapter MUST call with the list of records it removes or edits in place
        (before changing them; with any lines among them that it keeps, see ``saved.carrying``);
        it saves their original bytes and returns a marker string that
        the adapter puts at the end of the summary text, so ``lookout restore`` can put them
        back. Formats that keep old lines on disk put the marker it returns on every line they add,
        so ``lookout restore`` drops those lines: Codex removes nothing (it calls ``save`` with no
        records); Claude Code moves each kept line after the summary (saving it, leaving a stub
        in its place), so that readers of the file show it once. ``metadata["request"]``, when given, holds the items of the
        request a split inside a turn keeps word for word: they stay, in order, between the
        summary and ``keep_from`` (the first kept step). Returns the records it wrote."""
        raise self.unsupported("write a compaction")

    def unsupported(self, what: str) -> LookoutError:
        return LookoutError(f"the {self.name} format is read-only here: cannot {what}")


def load_adapter(name: str) -> Adapter:
    if name not in ADAPTERS:
        raise LookoutError(f"unknown format {name!r} (known: {', '.join(ADAPTERS)})")
    module = importlib.import_module(f"lookout_cli.formats.{ADAPTERS[name]}")
    return module.Adapter()


def detect(records: Sequence[Record]) -> Adapter | None:
    """Pick the adapter whose sniffer scores the first records highest; None when nothing fits."""
    sample = []
    for record in records:
        if record.data is not None:
            sample.append(record.data)
            if len(sample) >= SNIFF_RECORDS:
                break
    if not sample:
        return None
    # (imported here, not at the top: the sniffers import this package)
    from lookout_cli.formats.sniff import SNIFFERS

    best, best_score = None, 0
    for name in ADAPTERS:  # (only the one picked is loaded)
        score = sum(map(SNIFFERS[name], sample))
        if score > best_score:
            best, best_score = name, score
    return load_adapter(best) if best is not None else None
