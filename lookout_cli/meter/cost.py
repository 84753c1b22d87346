"""What the requests cost and how warm the cache is: the provider's cache figures summed over
the main chain, the cost at the models' list prices by kind of token, and how long the prompt
cache stays warm after the last response."""

from __future__ import annotations

import datetime as dt
import itertools
import operator
from collections.abc import Callable, Sequence

from lookout_cli.core.dataclass import dataclass, field
from lookout_cli.core.times import iso, parse_time
from lookout_cli.formats.usages import (
    CACHE_READ,
    CACHE_WRITE,
    by_model,
    columns_where,
    newest_with,
    split_usages,
    totals_by_model,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any

    from lookout_cli.formats.view import Usage

CACHE_TIERS = {"5m": 300, "1h": 3600}
# As the meter's records (analysis._record): plain figures, no generated __eq__ and __repr__.
_record = dataclass(slots=True, eq=False, repr=False)

@_record
class CacheTotals:
    """The provider's cache figures summed over every request of the main chain."""

    requests: int = 0
    input: int = 0
    cache_write: int = 0
    cache_write_1h: int = 0
    cache_read: int = 0
    output: int = 0

    @property
    def prompt(self) -> int:
        return self.input + self.cache_write + self.cache_read

    @property
    def total(self) -> int:
        return self.prompt + self.output

    @property
    def read_share(self) -> float | None:
        return self.cache_read / self.prompt if self.prompt else None


def cache_totals(usages: Sequence[Usage]) -> CacheTotals:
    older, recent = split_usages(usages)
    requests = uncached = write = write_1h = read = output = 0
    if older is not None:  # added up by model (kept with them): the models' sums added
        requests = len(older.lines)
        uncached, write, read, output, write_1h = list(map(sum, zip(*older.older_totals().values())))[1:6]
    for u in recent:  # locals: a long session records tens of thousands
        requests += 1
        uncached += u.input
        write += u.cache_write
        write_1h += u.cache_write_1h
        read += u.cache_read
        output += u.output
    return CacheTotals(requests, uncached, write, write_1h, read, output)


@_record
class Cost:
    """What the requests cost at the models' list prices, by kind of token."""

    usd: float | None  # None when no request's model has known prices
    input: float = 0.0
    cache_write: float = 0.0
    cache_read: float = 0.0
    output: float = 0.0
    priced: int = 0  # requests priced
    unpriced: int = 0  # requests whose model has no prices
    models: list[str] = field(default_factory=list)


def usage_cost(usage: Usage, model, long: bool | None = None) -> dict[str, float] | None:
    """Dollars for one response at API prices (``model`` is a ``models.Model``; prices per
    million tokens). Cache writes are priced by their TTL tier: 5-minute writes at
    ``price_cache_write_5m``, 1-hour writes at ``price_cache_write_1h``. A prompt over the
    model's long-context threshold pays the long-context rates for all its tokens (as
    ``Model.cost`` does; ``long`` says so for responses added up). None when a price the
    response needs is unknown."""
    if long is None:
        threshold = getattr(model, "long_context_threshold", None)
        long = threshold is not None and usage.prompt > threshold

    def price(key: str) -> float | None:
        value = getattr(model, f"long_price_{key}", None) if long else None
        return getattr(model, f"price_{key}", None) if value is None else value

    one_hour = min(usage.cache_write_1h, usage.cache_write)
    amounts = {
        "input": [(usage.input, "input")],
        "cache_write": [(usage.cache_write - one_hour, "cache_write_5m"), (one_hour, "cache_write_1h")],
        "cache_read": [(usage.cache_read, "cache_read")],
        "output": [(usage.output, "output")],
    }
    out = {}
    for kind, pairs in amounts.items():
        dollars = 0.0
        for tokens, key in pairs:
            if not tokens:
                continue
            p = price(key)
            if p is None:
                return None
            dollars += tokens * p / 1e6
        out[kind] = dollars
    return out


_FIGURES = ("input", "cache_write", "cache_read", "output", "cache_write_1h")


def _figures_by_model(usages: Sequence[Usage]) -> dict[str | None, list[list[int]]]:
    """Each model's responses' figures by column (``_FIGURES``), the models in the order they
    come: the older usages' read as the columns they are, the sums then made in C, not in a
    loop of Python a response (a long session records tens of thousands)."""
    older, recent = split_usages(usages)
    models = list(older.models) if older is not None else []
    figures = [column.copy() for column in older.older_figures()] if older is not None else [[] for _ in _FIGURES]
    models += [u.model for u in recent]
    for column, name in zip(figures, _FIGURES):
        column += map(operator.attrgetter(name), recent)
    return by_model(figures, models)


def _summed(figures: list[list[int]]) -> Usage:
    """Responses as one (whose prices are those of each of them)."""
    uncached, write, read, output, one_hour = figures
    # (a 1-hour write is rare: ``any`` passes over a long session's zeros twenty times as fast as ``min`` a pair)
    hour = sum(map(min, one_hour, write)) if any(one_hour) else 0
    return _usage((sum(uncached), sum(write), sum(read), sum(output), hour))


def _usage(figures: tuple) -> Usage:
    from lookout_cli.formats.view import Usage  # (not imported to reuse a meter)

    return Usage(None, *figures)


def total_cost(usages: Sequence[Usage], model_for: Callable[[str | None], Any], default_model: str | None) -> Cost:
    """The cost of every recorded response, each at its own model's prices (responses of one
    model and rate priced together: the same dollars up to float rounding). The responses of a
    model are priced from what they add up to (the older ones' kept: ``Usages.older_totals``),
    and one by one only when some prompt passed the model's long-context threshold or a price
    is unknown."""
    cost = Cost(usd=None)
    older, recent = split_usages(usages)
    # the model each is priced at: its responses added up as ``older_totals`` adds them
    by_name: dict[str | None, list[int]] = {}
    recent_totals = totals_by_model([list(map(operator.attrgetter(k), recent)) for k in _FIGURES],
                                    [u.model for u in recent])
    for model, totals in [*(older.older_totals().items() if older is not None else ()), *recent_totals.items()]:
        name = _priced_as(model, default_model)
        sums = by_name.get(name)
        if sums is None:
            by_name[name] = list(totals)
        else:
            sums[:7] = map(operator.add, sums[:7], totals[:7])
            sums[7:] = map(max, sums[7:], totals[7:])  # (any 1-hour write, the highest prompt)
    models_figures = None  # each model's figures by column, when one is priced a response at a time
    for name, (count, uncached, write, read, output, _, hour, any_hour, highest) in by_name.items():
        model = model_for(name)
        if model is None or not getattr(model, "known", True):
            cost.unpriced += count
            continue
        threshold = getattr(model, "long_context_threshold", None)
        parts = None
        if threshold is None or highest <= threshold:  # (``_summed``: a 1-hour write at most its write)
            parts = usage_cost(_usage((uncached, write, read, output, hour if any_hour else 0)), model, False)
        if parts is not None:
            _add(cost, parts, model, count)
            continue
        models_figures = models_figures or _figures_by_model(usages)
        figures = _figures_of(models_figures, name, default_model)
        rates = [(False, figures)]
        if threshold is not None:
            prompts = map(operator.add, map(operator.add, figures[0], figures[1]), figures[2])
            longs = list(map(operator.gt, prompts, itertools.repeat(threshold)))
            rates = [(long, part) for long in (False, True)
                     if (part := columns_where(figures, map(operator.is_, longs, itertools.repeat(long))))[0]]
        for long, part in rates:
            parts = usage_cost(_summed(part), model, long)
            if parts is not None:
                _add(cost, parts, model, len(part[0]))
            else:  # a price some response needs is unknown: which ones, one by one
                for one in zip(*part):
                    _add(cost, usage_cost(_usage(one), model), model)
    if cost.priced:
        cost.usd = cost.input + cost.cache_write + cost.cache_read + cost.output
    return cost


def _figures_of(models_figures: dict[str | None, list[list[int]]], name: str | None,
                default_model: str | None) -> list[list[int]]:
    """The figures by column (``_figures_by_model``'s) of the responses priced at ``name``."""
    figures: list[list[int]] = [[] for _ in _FIGURES]
    for model, more in models_figures.items():
        if _priced_as(model, default_model) == name:
            for column, added in zip(figures, more):
                column += added
    return figures


def _priced_as(model: str | None, default_model: str | None) -> str | None:
    """The model a response of ``model`` is priced at: the measured one for a response that
    names none, or a ``<synthetic>`` one."""
    return model if model and not model.startswith("<") else default_model


def _add(cost: Cost, parts: dict[str, float] | None, model, n: int = 1) -> None:
    """Add ``n`` responses priced ``parts`` in all (None: unpriced) to ``cost``."""
    if parts is None:
        cost.unpriced += n
        return
    cost.priced += n
    if model.name not in cost.models:
        cost.models.append(model.name)
    for key, value in parts.items():
        setattr(cost, key, getattr(cost, key) + value)


@_record
class WarmCache:
    """How long the provider's prompt cache stays warm after the last response."""

    tier: str  # "5m" | "1h"
    tier_source: str  # "recorded" (the usage's cache writes) or "model" (its default TTL)
    last_response_at: str
    expires_at: str
    now: str
    seconds_left: int  # negative once expired
    expired: bool


def cache_tier(usages: list[Usage], default_ttl: int | None) -> tuple[str, str] | None:
    """The cache tier the chat writes to: from the newest response that wrote to the cache,
    else the model's default TTL; None when nothing says the chat is cached."""
    written = newest_with(usages, CACHE_WRITE)  # (Codex records none: every usage is looked at)
    if written is not None:
        return ("1h" if usages[written].cache_write_1h else "5m"), "recorded"
    if default_ttl:
        return ("1h" if default_ttl >= 3600 else "5m"), "model"
    if newest_with(usages, CACHE_READ) is not None:
        return "5m", "model"
    return None


def last_timed(usages: list[Usage]) -> str | None:
    """The timestamp of the newest response that records a readable one."""
    return next((u.timestamp for u in reversed(usages) if parse_time(u.timestamp)), None)


def warm_cache(usages: list[Usage], now: dt.datetime, default_ttl: int | None = None) -> WarmCache | None:
    """How long the provider's cache stays warm from the last response's time and its tier."""
    at = parse_time(last_timed(usages))
    tier = cache_tier(usages, default_ttl) if at else None
    if tier is None:
        return None
    return warm_from(tier[0], tier[1], at, now)


def warm_from(tier: str, source: str, at: dt.datetime, now: dt.datetime) -> WarmCache:
    expires = at + dt.timedelta(seconds=CACHE_TIERS[tier])
    left = int((expires - now).total_seconds())
    return WarmCache(tier, source, iso(at), iso(expires), iso(now), left, left <= 0)


