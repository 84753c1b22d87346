"""When a quiet chat's prompt cache runs out, and what keeping it warm would cost (pure).

Facts (research/compaction.md, provider docs): a cache entry lives 5 minutes or 1 hour after
its last use and each read refreshes it; writing it costs 1.25x (5 minutes) or 2x (1 hour) the
input price, reading it 0.1x. So a short read that keeps the chat cached costs
``read/write`` of sending the chat again cold: at most ``write/read`` reads (12 for the
5-minute tier, 19 for the 1-hour tier, since 20 would only break even) are worth making, and
none across a provider's daily reset, which empties the cache however recently it was read.

A keep-warm read refreshes the cache like a response does: ``plan(..., reads=[...])`` starts the
timeline from the latest read made in time and plans only the reads still worth making. While a
read is planned before the cache runs out, the summary waits; it is written ``lead`` before the
expiry that no read follows (``last_window``, ``summary_at``).
"""

from __future__ import annotations

import datetime as dt
import math

from lookout_cli.core.dataclass import dataclass, field

TTL = {"5m": dt.timedelta(minutes=5), "1h": dt.timedelta(hours=1)}
WRITE_MULTIPLIER = {"5m": 1.25, "1h": 2.0}
READ_MULTIPLIER = 0.1
MIN_TOKENS = 100_000  # smaller chats are cheap to resend: nothing to plan
PREPARE_LEAD = dt.timedelta(seconds=60)  # write the summary this long before expiry
PING_MARGIN = dt.timedelta(seconds=30)  # read this long before expiry, so the read lands in time


def parse_reset(text: str) -> tuple[int, int]:
    """``HH:MM`` (UTC) as (hour, minute); ValueError naming the text when it is not one."""
    hour_text, sep, minute_text = str(text).strip().partition(":")
    if sep and hour_text.isdigit() and minute_text.isdigit() and len(minute_text) == 2:
        hour, minute = int(hour_text), int(minute_text)
        if hour < 24 and minute < 60:
            return hour, minute
    raise ValueError(f"{text!r} is not a time of day like 07:00 (UTC)")


def next_reset(after: dt.datetime, resets: list[str]) -> dt.datetime | None:
    """The first daily reset (``HH:MM`` in UTC) strictly after ``after``."""
    best = None
    after = after.astimezone(dt.timezone.utc)
    for text in resets:
        hour, minute = parse_reset(text)
        candidate = after.replace(hour=hour, minute=minute, second=0, microsecond=0)
        if candidate <= after:
            candidate += dt.timedelta(days=1)
        best = candidate if best is None or candidate < best else best
    return best


@dataclass(slots=True)
class Prices:
    """Dollars per million tokens."""

    input: float
    cache_read: float | None = None
    cache_write_5m: float | None = None
    cache_write_1h: float | None = None

    def write(self, tier: str) -> float:
        explicit = self.cache_write_1h if tier == "1h" else self.cache_write_5m
        return explicit if explicit is not None else self.input * WRITE_MULTIPLIER[tier]

    def read(self) -> float:
        return self.cache_read if self.cache_read is not None else self.input * READ_MULTIPLIER


@dataclass(slots=True)
class IdlePlan:
    tokens: int  # the chat's prompt size as the provider last counted it
    tier: str
    last_response: dt.datetime
    now: dt.datetime
    expires: dt.datetime  # when the cache runs out if nothing is sent
    prepare_at: dt.datetime  # when to write the summary
    reset: dt.datetime | None  # the next daily reset, if one is configured
    state: str  # small | waiting | prepare | expired
    pings: list[dt.datetime] = field(default_factory=list)  # keep-warm reads worth making
    ping_cost: float | None = None  # dollars per keep-warm read
    cold_cost: float | None = None  # dollars to send the chat again after expiry
    warm_cost: float | None = None  # dollars to send it while cached
    max_pings: int = 0  # reads that cost less than one cold resend
    refreshed: dt.datetime | None = None  # the cache's last use: the last response or a later read
    reads_made: int = 0  # keep-warm reads already made since the last response
    lead: dt.timedelta = PREPARE_LEAD

    @property
    def reads_left(self) -> int:
        return max(0, self.max_pings - self.reads_made)

    @property
    def warm_until(self) -> dt.datetime:
        """How long the cache can be kept warm by the planned reads."""
        return (self.pings[-1] + TTL[self.tier]) if self.pings else self.expires

    @property
    def ping_due(self) -> bool:
        """A keep-warm read is due now: the cache is still warm, now is within the ping margin
        before it runs out, and another read still costs less than sending the chat again."""
        return self.state in ("waiting", "prepare") and bool(self.pings) and self.now >= self.pings[0]

    @property
    def last_window(self) -> bool:
        """No keep-warm read is planned before this expiry: the summary must be written now."""
        return not self.pings

    @property
    def summary_at(self) -> dt.datetime:
        """When the summary is written if the planned reads keep the cache warm until then."""
        return max(self.refreshed or self.last_response, self.warm_until - self.lead)

    @property
    def keep_warm_cost(self) -> float | None:
        """Dollars for every planned read."""
        return None if self.ping_cost is None else round(self.ping_cost * len(self.pings), 6)

    def to_dict(self) -> dict:
        iso = lambda t: t.isoformat().replace("+00:00", "Z") if t else None  # noqa: E731
        return {
            "tokens": self.tokens, "tier": self.tier, "state": self.state,
            "last_response": iso(self.last_response), "now": iso(self.now), "expires": iso(self.expires),
            "prepare_at": iso(self.prepare_at), "daily_reset": iso(self.reset),
            "refreshed": iso(self.refreshed),
            "keep_warm": {"max_reads": self.max_pings, "reads_made": self.reads_made,
                          "reads_left": self.reads_left, "reads": [iso(p) for p in self.pings],
                          "due_now": self.ping_due, "cost_per_read": self.ping_cost,
                          "cost_of_planned_reads": self.keep_warm_cost,
                          "warm_until": iso(self.warm_until), "summary_at": iso(self.summary_at)},
            "cost": {"cold_resume": self.cold_cost, "warm_resume": self.warm_cost},
        }


def break_even_reads(tier: str, prices: Prices | None = None) -> int:
    """How many keep-warm reads together cost strictly less than one cold resend."""
    write = prices.write(tier) if prices else WRITE_MULTIPLIER[tier]
    read = prices.read() if prices else READ_MULTIPLIER
    if read <= 0:
        return 0
    return max(0, math.ceil(write / read) - 1)


def plan(tokens: int, last_response: dt.datetime, now: dt.datetime, tier: str = "5m",
         prices: Prices | None = None, resets: list[str] | None = None,
         min_tokens: int = MIN_TOKENS, lead: dt.timedelta = PREPARE_LEAD, *,
         reads: list[dt.datetime] | tuple = (), margin: dt.timedelta = PING_MARGIN) -> IdlePlan:
    """The cache timeline of a quiet chat. ``reads`` are keep-warm reads already made since the
    last response (each refreshes the cache); ``margin`` is how long before expiry a read is
    made; ``lead`` how long before the last expiry the summary is written."""
    ttl = TTL[tier]
    made = sorted(r for r in reads if last_response <= r <= now)
    refreshed = made[-1] if made else last_response
    reset = next_reset(refreshed, resets or [])
    if made:  # a read made after the cache had run out (past a reset or its TTL) did not keep it warm
        first_reset = next_reset(last_response, resets or [])
        warm = last_response + ttl
        for read in made:
            if read > warm or (first_reset is not None and read >= first_reset):
                made, refreshed, reset = [], last_response, first_reset
                break
            warm = read + ttl
    expires = refreshed + ttl
    if reset is not None and reset < expires:
        expires = reset
    prepare_at = max(refreshed, expires - lead)
    if tokens < min_tokens:
        state = "small"
    elif now >= expires:
        state = "expired"
    elif now >= prepare_at:
        state = "prepare"
    else:
        state = "waiting"
    result = IdlePlan(tokens, tier, last_response, now, expires, prepare_at, reset, state,
                      refreshed=refreshed, reads_made=len(made), lead=lead)
    result.max_pings = break_even_reads(tier, prices)
    if prices is not None:
        million = tokens / 1_000_000
        result.ping_cost = round(million * prices.read(), 6)
        result.cold_cost = round(million * prices.write(tier), 6)
        result.warm_cost = result.ping_cost
    if state in ("waiting", "prepare"):
        when = refreshed
        for _ in range(result.reads_left):
            when = when + ttl - margin
            if reset is not None and when + ttl > reset:  # never keep warm across a reset
                break
            result.pings.append(when)
    return result
