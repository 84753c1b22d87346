"""The items of each line as the load parses it, for the view to take instead of parsing the
line again (``Adapter.line_items``): every lean load builds them (``Run.load``); ``measure``
hands them its counting sink (``meter.item_counts.CountingSink``), so they are counted and cut
down as they are made.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence

from lookout_cli.formats.view import Item


class EarlyItems:
    """The items of each line, built (and, for a measure, counted) as the line is read
    (``Adapter.line_items``), so that each line is parsed once; the view takes them by the
    line's position (``take``). ``key(model)`` says how a model's texts are counted: the items
    are counted before the view's model is known (as ``key(None)``), and taken only when the
    view's model is counted the same way (else the view reads the lines again). Without a
    ``sink`` (every command but measure), nothing is counted nor cut down: the view takes the
    items whole."""

    def __init__(self, sink=None, key: Callable[[str | None], tuple] | None = None) -> None:
        self.sink = sink
        self.key = key
        self.make = None
        self.items: list = []  # by line position: None, one item, or a tuple of a line's items
        self.skip_to = 0  # lines that start before this offset are left to the view
        self.before = None  # what those lines give, when the file is read whole (``Adapter.settling``)

    def start(self, adapter, fd: int, begin: int) -> EarlyItems | None:
        """The format is known: this, when its adapter can say a line's items on its own (or
        read the lines before the one shown into what they give).
        ``fd`` is the file being read from ``begin`` (not a pipe: its end is looked at first):
        its lines before the one from which the conversation is shown (``Adapter.shown_from``)
        are not built nor counted (the view does not show them), and when the file is read
        from its start, what they give is kept instead of their nodes (``settles``)."""
        self.make = getattr(adapter, "line_items", None)
        with contextlib.suppress(OSError):  # not looked at: every line's items are built
            self.skip_to = adapter.shown_from(fd, begin, os.fstat(fd).st_size)
        if self.skip_to and begin == 0:
            self.before = adapter.settling()
        # (a format that builds no item early still settles the lines before the one shown)
        return self if self.make is not None or self.before is not None else None

    def idle_bytes(self) -> int:
        """The bytes of lines the sink counts while this process waits (0 without one)."""
        idle_bytes = getattr(self.sink, "idle_bytes", None)
        return idle_bytes() if idle_bytes is not None else 0

    def work(self) -> None:
        """This process waits: the sink counts those lines now."""
        work = getattr(self.sink, "work", None)
        if work is not None:
            work()

    def before_shown(self, record) -> bool:
        """Whether ``record`` is a line before the one shown from whose value the adapter's
        reader of such lines takes (``settles``)."""
        return self.before is not None and record.span()[0] < self.skip_to

    def settles(self, record, value) -> bool:
        """Whether ``record`` is such a line, taken (its parsed ``value``): it needs no node then."""
        if not self.before_shown(record):
            return False
        self.before.add(value)
        return True

    def settled(self, records: Sequence) -> object:
        """Every line is read: what the lines before the one shown from give (``Transcript.settled``)."""
        before, self.before = self.before, None
        return before.settled(records) if before is not None else None

    def read(self, record, obj) -> None:
        if self.make is None:
            return
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

    def finish(self) -> None:
        """The view is built: what it did not take is of lines it does not show (a rewound branch)."""
        self.items = []

    def take(self, pos: int) -> list[Item] | None:
        items = self.items
        if pos >= len(items) or items[pos] is None:
            return None
        found, items[pos] = items[pos], None
        return [found] if type(found) is Item else list(found)
