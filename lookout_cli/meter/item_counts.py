"""Count a view's items while the adapter builds it, and keep of each only what the meter reads.

``measure`` must see the whole transcript but changes nothing, so it reads it lean
(``Run.load(lean=True)``: offsets, not bytes) and hands the adapter this sink. Each item is
counted as it is added; then its text goes (but for the sign of a placeholder), a tool call
keeps only the arguments the meter looks at (paths, ranges, commands) and an image only its
size. Memory then grows with the number of items, not with the bytes of text they hold (SPEC §1).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable

import orjson

from lookout_cli.formats.clearing import cleared_sign, is_cleared
from lookout_cli.formats.view import IMAGE, NO_EXTRA, TOOL_CALL, Item, View
from lookout_cli.images.costs import image_dimensions
from lookout_cli.meter.analysis import uncounted
from lookout_cli.meter.reclaim import ARGUMENT_FIELDS, ARGUMENT_KEYS, call_arguments

BATCH_CHARS = 4_000_000  # with --jobs: characters sent to the workers together
# In one process, exact counts are made a batch at a time too: tokenizing a text between the
# parsing of one line and the next ran 12-20% slower than in a run of counts (the tokenizer's
# tables leave the processor's caches meanwhile; a cold measure of a real-shaped 100 MB session,
# paired runs). A megabyte of text waits at most.
RUN_CHARS = 1_000_000
IN_FLIGHT = 2  # batches the workers may hold at once (the texts wait in memory meanwhile)


class CountingSink:
    """``Transcript.sink`` for measure. ``make_counter(model)`` gives the token counter once
    the adapter has set the view's model (before its first item)."""

    def __init__(self, make_counter: Callable[[str | None], object], jobs: int = 1, ahead=None) -> None:
        self.make_counter = make_counter
        self.jobs = jobs
        self.ahead = ahead  # count_ahead.Ahead: the input's end being counted already
        self.counter = None
        self._pending: list[Item] = []
        self._chars = 0
        self._away: list[tuple] = []  # (items, wait): batches the worker processes are counting

    def __call__(self, view: View, item: Item) -> None:
        if self.counter is None:
            self._make_counter(view)
        if item.kind == IMAGE:
            shrink(item)
            return
        if not getattr(self.counter, "exact", False):  # an estimate: as cheap now as later
            item.tokens = self.counter.count(item.text)
            shrink(item)
            return
        self._pending.append(item)
        self._chars += len(item.text)
        if self._chars >= (BATCH_CHARS if self.jobs > 1 else RUN_CHARS):
            self._flush()

    def finish(self, view: View):
        """Count what is still uncounted (all of a view whose adapter is not lean); return the
        counter."""
        if self.counter is None:
            self._make_counter(view)
        self._flush()
        self._settle()
        if self.ahead is not None:  # the view never reached the lines counted ahead
            self.ahead.close()
            self.ahead = None
        self._pending = uncounted(view)
        self._flush()
        self._settle()
        return self.counter

    def restart(self) -> None:
        """Count the next items with a counter for the view's model (not the one made before it
        was known)."""
        self._flush()
        self._settle()
        close = getattr(self.counter, "close", None)
        if close is not None:
            close()
        self.counter = None

    def _make_counter(self, view: View) -> None:
        self.counter = self.make_counter(view.model)
        adopt = getattr(self.counter, "adopt", None)
        if self.ahead is not None and not (adopt is not None and adopt(self.ahead)):
            self.ahead.close()  # counted in another encoding than the view's model's
            self.ahead = None

    def _flush(self) -> None:
        """Count the pending items: here, one after the other, or in the worker processes while
        the view goes on being built (at most IN_FLIGHT batches away: the oldest is settled
        before another goes)."""
        items, self._pending, self._chars = self._pending, [], 0
        if not items:
            return
        later = getattr(self.counter, "count_later", None)
        if self.jobs > 1 and later is not None:
            ahead = self.ahead
            if ahead is not None and ahead.due(i.record for i in items):
                self.counter.learn(ahead.counts())  # before the texts counted ahead are sent again
                self.ahead = None
            while len(self._away) >= IN_FLIGHT:
                self._settle_oldest()
            self._away.append((items, later([i.text for i in items], jobs=self.jobs)))
            return
        for item in items:
            item.tokens = self.counter.count(item.text)
            shrink(item)

    def _settle(self) -> None:
        while self._away:
            self._settle_oldest()

    def _settle_oldest(self) -> None:
        items, wait = self._away.pop(0)
        for item, n in zip(items, wait()):
            item.tokens = n
            shrink(item)


class EarlyItems:
    """The items of each line, built (and, for a measure, counted) as the line is read
    (``Adapter.line_items``), so that each line is parsed once; the view takes them by the
    line's position (``take``). ``key(model)`` says how a model's texts are counted: the items
    are counted before the view's model is known (as ``key(None)``), and taken only when the
    view's model is counted the same way (else the view reads the lines again). Without a
    ``sink`` (``compact``), nothing is counted nor cut down: the view takes the items whole."""

    def __init__(self, sink: CountingSink | None = None, key: Callable[[str | None], tuple] | None = None) -> None:
        self.sink = sink
        self.key = key
        self.make = None
        self.items: list = []  # by line position: None, one item, or a tuple of a line's items
        self.skip_to = 0  # lines that start before this offset are left to the view

    def start(self, adapter, fd: int, begin: int) -> EarlyItems | None:
        """The format is known: this, when its adapter can say a line's items on its own.
        ``fd`` is the file being read from ``begin`` (not a pipe: its end is looked at first):
        its lines before the one from which the conversation is shown
        (``line_items.shown_from``: a compacted session's last boundary) are not built nor
        counted (the view does not show them)."""
        self.make = getattr(adapter, "line_items", None)
        if self.make is None:
            return None
        shown_from = getattr(self.make, "shown_from", None)
        if shown_from is not None:
            with contextlib.suppress(OSError):  # not looked at: every line's items are built
                self.skip_to = shown_from(fd, begin, os.fstat(fd).st_size)
        return self

    def read(self, record, obj) -> None:
        if self.skip_to:
            if record.span()[0] < self.skip_to:
                return
            self.skip_to = 0  # the lines come in order: none after this one is skipped
        made = self.make(record, obj, self.sink)
        if not made:
            return
        items, pos = self.items, record.lineno - 1
        if pos > len(items):
            items.extend([None] * (pos - len(items)))
        if pos == len(items):  # (a line read twice is not taken twice)
            items.append(made[0] if len(made) == 1 else tuple(made))

    def usable(self, model: str | None) -> bool:
        """Whether the view of ``model`` can take the items (else they are let go)."""
        if self.sink is None or self.key(model) == self.key(None):
            return True
        self.items = []
        self.sink.restart()
        return False

    def take(self, pos: int) -> list[Item] | None:
        items = self.items
        if pos >= len(items) or items[pos] is None:
            return None
        found, items[pos] = items[pos], None
        return [found] if type(found) is Item else list(found)


def shrink(item: Item) -> None:
    """Cut a counted item down to what the meter reads of it."""
    item.path = ()  # where the part sits in its line: for edits, and measure makes none
    if not item.extra:
        item.extra = NO_EXTRA
    if item.kind == IMAGE:
        ref = item.image
        if ref is not None and ref.data:
            ref.dims = image_dimensions(item)
            ref.data = None
        return
    if not item.text:
        return
    if item.kind == TOOL_CALL:
        args = call_arguments(item)
        if not isinstance(args, dict):
            return  # arguments the meter reads as text: keep them
        # the arguments the meter reads, as the JSON text it reads them from (call_arguments):
        # one string, not two dicts and a string a value (a long session makes 100k calls)
        item.extra = {k: v for k, v in item.extra.items() if k not in ARGUMENT_FIELDS} or NO_EXTRA
        kept = {k: v for k, v in args.items() if k in ARGUMENT_KEYS}
        try:  # read back as JSON only (not counted): orjson's text is as good and 5-10x cheaper
            item.text = orjson.dumps(kept).decode()
        except (TypeError, orjson.JSONEncodeError):  # a big integer, a lone surrogate
            item.text = json.dumps(kept, ensure_ascii=False, separators=(",", ":"))
        return
    if is_cleared(item):
        item.text = cleared_sign(item.text)  # the meter asks whether it was cleared
        return
    item.text = ""  # counted: the meter reads no more of it
