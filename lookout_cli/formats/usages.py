"""A view's usages when a compacted session's older segments were read into a summary: those
by column, the others as ``Usage``s (``Usages``), and what the meter's passes over every usage
read of either (``split_usages``)."""

from __future__ import annotations

import array
import itertools
import operator
from collections.abc import Iterable, Iterator, Sequence

from lookout_cli.core.jsonl import Line

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:  # pragma: no cover
    from lookout_cli.formats.view import Usage


class Usages(Sequence):
    """A view's usages in order: first the older segments' (the responses before a compacted
    session's last boundary, read into a summary) by column, no object each (a long session
    records tens of thousands), then the others as ``Usage``s (``recent``). An older one is made
    a ``Usage`` when it is asked for (a new one each time: figures, not an object to keep).
    The meter's passes over every usage read the columns (``older_figures``), or what they add
    up to (``older_totals``)."""

    __slots__ = ("_figures", "_totals", "lines", "models", "numbers", "recent", "stamps")

    def __init__(self, recent: list[Usage] | None = None) -> None:
        self.recent = recent if recent is not None else []
        self.lines = array.array("q")  # each older usage's line number
        self.numbers = array.array("q")  # five each: input, cache write, cache read, output, 1-hour write
        self.models: list[str | None] = []
        self.stamps: list[str | None] = []
        self._figures: tuple[list[int], ...] | None = None  # ``older_figures``, once worked out
        self._totals: dict[str | None, tuple[int, ...]] | None = None  # ``older_totals``, once worked out

    @classmethod
    def older_of(cls, lines, numbers, models: list, stamps: list, totals: dict | None = None) -> Usages:
        usages = cls()
        usages.lines, usages.numbers, usages.models, usages.stamps = lines, numbers, models, stamps
        usages._totals = totals
        return usages

    def __len__(self) -> int:
        return len(self.lines) + len(self.recent)

    def __getitem__(self, at):
        if type(at) is slice:
            return [self[n] for n in range(*at.indices(len(self)))]
        older = len(self.lines)
        if at < 0:
            at += len(self)
            if at < 0:
                raise IndexError("usage out of range")
        if at >= older:
            return self.recent[at - older]
        from lookout_cli.formats.view import Usage  # (not imported to read figures)

        i = 5 * at
        return Usage(Line(self.lines[at]), *self.numbers[i:i + 5], self.models[at], self.stamps[at])

    def __iter__(self) -> Iterator[Usage]:
        for n in range(len(self.lines)):
            yield self[n]
        yield from self.recent

    def __reversed__(self) -> Iterator[Usage]:
        yield from reversed(self.recent)
        for n in reversed(range(len(self.lines))):
            yield self[n]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def append(self, usage: Usage) -> None:
        self.recent.append(usage)

    def __setitem__(self, at: int, usage: Usage) -> None:
        """``usage`` in the place of a recent one (an older one stays as it was read)."""
        if not len(self.lines) <= at < len(self):
            raise IndexError("only a recent usage is replaced")
        self.recent[at - len(self.lines)] = usage

    def first(self, count: int) -> Usages:
        """The first ``count`` usages, all as older ones (what a compaction settles)."""
        older = len(self.lines)
        kept = Usages.older_of(self.lines[:count], self.numbers[:5 * count], self.models[:count], self.stamps[:count])
        for usage in self.recent[:max(0, count - older)]:
            kept.lines.append(usage.record.lineno)
            kept.numbers.extend((usage.input, usage.cache_write, usage.cache_read, usage.output, usage.cache_write_1h))
            kept.models.append(usage.model)
            kept.stamps.append(usage.timestamp)
        return kept

    def older_only(self) -> Usages:
        """The older usages (their columns, and what they add up to) in a ``Usages`` of their
        own, with no recent one (a view adds its own)."""
        return Usages.older_of(self.lines, self.numbers, self.models, self.stamps, self._totals)

    def older_figures(self) -> tuple[list[int], ...]:
        """The older usages' inputs, cache writes, cache reads, outputs and 1-hour writes, a
        list each (the same lists every time: the meter reads them three times; not to change)."""
        if self._figures is None:
            numbers = self.numbers
            self._figures = tuple(numbers[k::5].tolist() for k in range(5))
        return self._figures

    def older_totals(self) -> dict[str | None, tuple[int, ...]]:
        """``totals_by_model`` of the older usages, once worked out. Kept with the columns
        (``settled_plain``): a prompt's re-measure of a long session then adds up no column."""
        if self._totals is None:
            self._totals = totals_by_model(self.older_figures(), self.models)
        return self._totals


def by_model(figures: Sequence[list[int]], models: Sequence[str | None]) -> dict[str | None, Sequence[list[int]]]:
    """Responses' figures by column (inputs, cache writes, cache reads, outputs, 1-hour writes),
    each model's apart, the models in the order they come (one model: ``figures`` themselves)."""
    distinct = dict.fromkeys(models)
    if len(distinct) == 1:
        return {model: figures for model in distinct}
    return {model: columns_where(figures, map(operator.eq, models, itertools.repeat(model))) for model in distinct}


def columns_where(figures: Sequence[list[int]], mask: Iterable[bool]) -> list[list[int]]:
    """The figures of the responses ``mask`` marks, by column."""
    mask = list(mask)
    return [list(itertools.compress(column, mask)) for column in figures]


def totals_by_model(figures: Sequence[list[int]], models: Sequence[str | None]) -> dict[str | None, tuple[int, ...]]:
    """``by_model``'s figures added up: (count, the five sums, the 1-hour writes each at most
    its response's write, whether any 1-hour write is not 0, the highest prompt). Sums made in
    C, not a loop of Python a response."""
    totals = {}
    for model, (u, w, r, o, h) in by_model(figures, models).items():
        prompts = map(operator.add, map(operator.add, u, w), r)
        some = any(h)  # (else each min is the write's when below 0: mostly none to add)
        hour = sum(map(min, h, w)) if some else sum(filter((0).__gt__, w))
        totals[model] = (len(u), sum(u), sum(w), sum(r), sum(o), sum(h), hour, int(some), max(prompts, default=0))
    return totals


def split_usages(usages: Sequence[Usage]) -> tuple[Usages | None, Sequence[Usage]]:
    """(the older usages by column, the others) of a view's usages; (None, them) for a list."""
    if type(usages) is Usages:
        return (usages if usages.lines else None), usages.recent
    return None, usages
