"""A view's usages when a compacted session's older segments were read into a summary: those
by column, the others as ``Usage``s (``Usages``), and what the meter's passes over every usage
read of either (``split_usages``)."""

from __future__ import annotations

import array
import bisect
import itertools
import operator
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence

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

    __slots__ = ("_figures", "_in_order", "_stamps", "_totals", "lines", "models", "numbers", "recent")

    def __init__(self, recent: list[Usage] | None = None) -> None:
        self.recent = recent if recent is not None else []
        # arrays (or views of the line memo's, read in place: ``first`` copies them to add to)
        self.lines: array.array | memoryview = array.array("q")  # each older usage's line number
        # five each: input, cache write, cache read, output, 1-hour write
        self.numbers: array.array | memoryview = array.array("q")
        self.models: list[str | None] = []
        self._stamps: list[str | None] | Callable[[], Iterable] = []
        self._figures: tuple[list[int], ...] | None = None  # ``older_figures``, once worked out
        self._totals: dict[str | None, tuple[int, ...]] | None = None  # ``older_totals``, once worked out
        self._in_order: bool | None = None  # ``older_in_order``, once worked out

    @classmethod
    def older_of(cls, lines, numbers, models: list, stamps: list | Callable[[], Iterable],
                 totals: dict | None = None, in_order: bool | None = None) -> Usages:
        """Older usages by column; ``stamps``, their times, may be a function that gives them,
        called when they are first read (a prompt's re-measure reads none: a string each)."""
        usages = cls()
        usages.lines, usages.numbers, usages.models, usages._stamps = lines, numbers, models, stamps
        usages._totals, usages._in_order = totals, in_order
        return usages

    @property
    def stamps(self) -> list[str | None]:
        """The older usages' times."""
        if type(self._stamps) is not list:
            self._stamps = list(self._stamps())
        return self._stamps

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
        added = self.recent[:max(0, count - older)]
        lines, numbers = memoryview(self.lines)[:count], memoryview(self.numbers)[:5 * count]
        if added:  # (copies, to add to; else the columns as they are, read only)
            lines, numbers = column(lines), column(numbers)
        kept = Usages.older_of(lines, numbers, self.models[:count], self.stamps[:count])
        for usage in added:
            kept.lines.append(usage.record.lineno)
            kept.numbers.extend((usage.input, usage.cache_write, usage.cache_read, usage.output, usage.cache_write_1h))
            kept.models.append(usage.model)
            kept.stamps.append(usage.timestamp)
        if count >= older:  # what the older ones' add up to and their order, when known: the others' added
            if self._in_order is not None:
                lines = kept.lines[max(0, older - 1):].tolist()
                kept._in_order = self._in_order and lines == sorted(lines)
            if self._totals is not None:
                figures = [[u.input for u in added], [u.cache_write for u in added], [u.cache_read for u in added],
                           [u.output for u in added], [u.cache_write_1h for u in added]]
                kept._totals = _merged(self._totals, totals_by_model(figures, [u.model for u in added]))
        return kept

    def older_only(self) -> Usages:
        """The older usages (their columns, and what they add up to) in a ``Usages`` of their
        own, with no recent one (a view adds its own)."""
        return Usages.older_of(self.lines, self.numbers, self.models, self._stamps, self._totals, self._in_order)

    def prompt(self, at: int) -> int:
        """The prompt of usage ``at`` (``Usage.prompt``), an older one's from its columns."""
        if at >= len(self.lines) or at < 0:
            return self[at].prompt
        i = 5 * at
        return self.numbers[i] + self.numbers[i + 1] + self.numbers[i + 2]

    def older_figures(self) -> tuple[list[int], ...]:
        """The older usages' inputs, cache writes, cache reads, outputs and 1-hour writes, a
        list each (the same lists every time: the meter reads them three times; not to change)."""
        if self._figures is None:
            numbers = self.numbers
            self._figures = tuple(numbers[k::5].tolist() for k in range(5))
        return self._figures

    def older_in_order(self) -> bool:
        """Whether the older usages' lines run in file order (kept with the columns, as
        ``older_totals``: the meter finds the response after each compaction by halving then)."""
        if self._in_order is None:  # (each against the next, in place: no list of ints a usage)
            lines = self.lines
            self._in_order = all(map(operator.le, lines, itertools.islice(lines, 1, None)))
        return self._in_order

    def older_totals(self) -> dict[str | None, tuple[int, ...]]:
        """``totals_by_model`` of the older usages, once worked out. Kept with the columns
        (``settled_plain``): a prompt's re-measure of a long session then adds up no column."""
        if self._totals is None:
            figures = self._figures  # (the meter's lists, when made; else the columns read in place:
            if figures is None:      # a long Codex rollout's were 29 MB of ints)
                numbers = memoryview(self.numbers)
                figures = tuple(numbers[k::5] for k in range(5))
            self._totals = totals_by_model(figures, self.models)
        return self._totals


class Keys:
    """The ids older usages are counted by, in their order (``claude_items.Responses``: a
    response seen again after a compaction is not counted twice): those a settled value kept,
    given or loaded when first read (a function), with a mark of each text id (``mark``),
    sorted (``marks``), then any ``added`` after them. A prompt's re-measure of a long session
    asks whether each of its few new responses is among tens of thousands: it looks the marks
    up, and loads the ids only on a match (the same mark: mostly the same id), not a string an
    id."""

    __slots__ = ("_older", "_set", "added", "count", "marks")

    def __init__(self, older: Sequence | Callable[[], Sequence] = (), marks: array.array | None = None,
                 count: int | None = None, added: Sequence = ()) -> None:
        self._older = older
        self.marks = marks  # (none: the ids are given, and looked up in a set of them)
        self.count = count if count is not None else len(older)
        self.added = added
        self._set: set | None = None

    @classmethod
    def joined(cls, older: Sequence, added: Sequence) -> Keys:
        """``older`` (a ``Keys``: its ids and marks, loaded once for both; or a list) then ``added``."""
        if type(older) is not Keys:
            return cls([*older, *added])
        return cls(older._loaded, older.marks, older.count, [*older.added, *added])

    def _loaded(self) -> Sequence:
        if callable(self._older):
            self._older = self._older()
        return self._older

    def _ids(self) -> Sequence:
        return [*self._loaded(), *self.added] if self.added else self._loaded()

    def __len__(self) -> int:
        return self.count + len(self.added)

    def __iter__(self) -> Iterator:
        return iter(self._ids())

    def __contains__(self, key: object) -> bool:
        if type(key) is str and self.marks is not None and not self.added:  # (the marks are the kept ids')
            crc = mark(key)
            found = bisect.bisect_left(self.marks, crc)
            if found == len(self.marks) or self.marks[found] != crc:
                return False
        if self._set is None:
            self._set = set(self._ids())
        return key in self._set

    def all_marks(self) -> array.array:
        """The marks of every text id, sorted (what a settled value keeps with them)."""
        if self.marks is None:
            return array.array("I", sorted(_marks(self)))
        added = _marks(self.added)
        return array.array("I", sorted([*self.marks, *added])) if added else self.marks


INPUT, CACHE_WRITE, CACHE_READ, OUTPUT, CACHE_WRITE_1H = range(5)  # ``Usages.numbers``' columns
_FIELDS = ("input", "cache_write", "cache_read", "output", "cache_write_1h")


def newest_with(usages: Sequence[Usage], figure: int) -> int | None:
    """The position of the newest usage whose ``figure`` (one of the columns above) is not 0,
    an older one's found in its column (a long Codex rollout's hundred thousand usages, none of
    which records a cache write); None: none is."""
    name = _FIELDS[figure]
    recent = usages.recent if type(usages) is Usages else usages
    older = len(usages) - len(recent)
    for n in range(len(recent) - 1, -1, -1):
        if getattr(recent[n], name):
            return older + n
    if older:
        raw = memoryview(usages.numbers)[figure::5].tobytes()
        end = len(raw.rstrip(b"\0"))  # (the last value with a byte not 0)
        if end:
            return (end - 1) // 8
    return None


def column(values: Sequence[int]) -> array.array:
    """A copy of an older usages' column (an array, or a view of one in the line memo's
    bytes) to add to."""
    out = array.array("q")
    out.frombytes(memoryview(values).cast("B"))
    return out


MARK_MASK = (1 << 30) - 1  # of a CRC-32: a number CPython sorts as one digit (twice as fast as two)


def mark(key: str) -> int:
    """A text id's mark (``Keys.marks``): its CRC-32's low 30 bits."""
    return zlib.crc32(key.encode("utf-8", "surrogatepass")) & MARK_MASK


def _marks(keys: Iterable) -> list[int]:
    """``mark`` of each text id among ``keys`` (a cold run's tens of thousands: no call of
    Python's each)."""
    crcs = map(zlib.crc32, map(_ENCODE, [key for key in keys if type(key) is str]))
    return list(map(MARK_MASK.__and__, crcs))


_ENCODE = operator.methodcaller("encode", "utf-8", "surrogatepass")


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


def prompt_of(usages: Sequence[Usage], at: int) -> int:
    """``usages[at].prompt``, an older usage's read from its columns (no ``Usage`` made)."""
    return usages.prompt(at) if type(usages) is Usages else usages[at].prompt


def _merged(totals: dict, more: dict) -> dict:
    """``totals_by_model`` of two runs of usages from each one's (every figure adds up, but
    whether any 1-hour write is not 0, and the highest prompt)."""
    out = dict(totals)
    for model, b in more.items():
        a = out.get(model)
        out[model] = b if a is None else (*map(operator.add, a[:7], b[:7]), a[7] | b[7], max(a[8], b[8]))
    return out


def split_usages(usages: Sequence[Usage]) -> tuple[Usages | None, Sequence[Usage]]:
    """(the older usages by column, the others) of a view's usages; (None, them) for a list."""
    if type(usages) is Usages:
        return (usages if usages.lines else None), usages.recent
    return None, usages
