"""Count a view's items while the adapter builds it, and keep of each only what the meter reads.

``measure`` must see the whole transcript but changes nothing, so it reads it lean
(``Run.load(lean=True)``: offsets, not bytes) and hands the adapter this sink. Each item is
counted as it is added; then its text goes (but for the sign of a placeholder), a tool call
keeps only the arguments the meter looks at (paths, ranges, commands) and an image only its
size. Memory then grows with the number of items, not with the bytes of text they hold (SPEC §1).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from lookout_cli.core.jsonl import dumps
from lookout_cli.formats.clearing import cleared_sign, is_cleared
from lookout_cli.formats.view import IMAGE, NO_EXTRA, TOOL_CALL, Item, View
from lookout_cli.images.costs import image_dimensions
from lookout_cli.meter.analysis import uncounted
from lookout_cli.meter.reclaim import ARGUMENT_FIELDS, ARGUMENT_KEYS, call_arguments
from lookout_cli.tokens.tokenizer import count_left

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
        self._chars = sum(len(item.text) for item in self._pending)
        self._flush()
        self._settle()
        return self.counter

    def idle_bytes(self) -> int:
        """The bytes of lines counted ahead in this process while it waits (``count_ahead.Idle``)."""
        return self.ahead.idle_bytes() if self.ahead is not None else 0

    def work(self) -> None:
        """This process waits: count those lines now."""
        if self.ahead is not None:
            self.ahead.work()

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
        items, chars, self._pending, self._chars = self._pending, self._chars, [], 0
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
        count_left(chars, self.counter.encoding)  # (a batch before the last is past what the lite path takes)
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
            item.text = dumps(kept).decode()
        except TypeError:  # a big integer, a lone surrogate
            item.text = json.dumps(kept, ensure_ascii=False, separators=(",", ":"))
        return
    if is_cleared(item):
        item.text = cleared_sign(item.text)  # the meter asks whether it was cleared
        return
    item.text = ""  # counted: the meter reads no more of it
