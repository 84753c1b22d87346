"""The keep-warm arithmetic and the cache timeline, against hand calculations."""

from __future__ import annotations

import datetime as dt

import pytest

from lookout_cli.compaction.idle_plan import Prices, break_even_reads, next_reset, plan
from lookout_cli.core.times import parse_time

T0 = parse_time("2026-11-29T10:00:00Z")
SONNET = Prices(input=3.0, cache_read=0.30, cache_write_5m=3.75, cache_write_1h=6.0)


def test_break_even_reads_by_hand():
    # 5m: write 1.25x, read 0.1x -> 12 reads cost 1.2x < 1.25x, 13 would cost 1.3x
    assert break_even_reads("5m") == 12
    # 1h: write 2x -> 19 reads cost 1.9x < 2x; 20 only break even
    assert break_even_reads("1h") == 19
    assert break_even_reads("5m", SONNET) == 12 and break_even_reads("1h", SONNET) == 19


def test_costs_by_hand_for_200k_tokens():
    p = plan(200_000, T0, T0 + dt.timedelta(minutes=1), "5m", SONNET)
    assert p.ping_cost == pytest.approx(0.2 * 0.30)  # $0.06 a read
    assert p.cold_cost == pytest.approx(0.2 * 3.75)  # $0.75 to resend cold
    p1h = plan(200_000, T0, T0 + dt.timedelta(minutes=1), "1h", SONNET)
    assert p1h.cold_cost == pytest.approx(0.2 * 6.0)


@pytest.mark.parametrize("minutes, state", [(1, "waiting"), (4.5, "prepare"), (5, "expired"), (30, "expired")])
def test_timeline_5m(minutes, state):
    p = plan(150_000, T0, T0 + dt.timedelta(minutes=minutes), "5m")
    assert p.expires == T0 + dt.timedelta(minutes=5)
    assert p.prepare_at == T0 + dt.timedelta(minutes=4)
    assert p.state == state


def test_one_hour_tier():
    p = plan(150_000, T0, T0 + dt.timedelta(minutes=50), "1h")
    assert p.state == "waiting" and p.expires == T0 + dt.timedelta(hours=1)
    assert plan(150_000, T0, T0 + dt.timedelta(minutes=59, seconds=30), "1h").state == "prepare"


def test_small_chat_is_left_alone():
    assert plan(99_999, T0, T0 + dt.timedelta(minutes=4, seconds=30)).state == "small"


def test_pings_are_spaced_and_never_cross_a_daily_reset():
    p = plan(150_000, T0, T0 + dt.timedelta(minutes=1), "5m")
    assert len(p.pings) == 12
    assert p.pings[0] == T0 + dt.timedelta(minutes=4, seconds=30)
    assert p.pings[1] - p.pings[0] == dt.timedelta(minutes=4, seconds=30)
    # a reset at 10:20 UTC: pings whose warmth would cross it are not planned,
    # and the cache expires at the reset even though the TTL would run later
    p = plan(150_000, T0, T0 + dt.timedelta(minutes=1), "1h", resets=["10:20"])
    assert p.expires == T0 + dt.timedelta(minutes=20)
    assert p.pings == []
    p = plan(150_000, T0, T0 + dt.timedelta(minutes=1), "5m", resets=["10:20"])
    assert all(ping + dt.timedelta(minutes=5) <= p.reset for ping in p.pings)
    assert len(p.pings) == 3  # 10:04:30, 10:09:00, 10:13:30 (10:18:00 + 5m would cross 10:20)


def test_next_reset_wraps_to_the_next_day():
    assert next_reset(T0, ["09:00"]) == T0 + dt.timedelta(hours=23)
    assert next_reset(T0, ["09:00", "12:00"]) == T0 + dt.timedelta(hours=2)


def test_one_hour_reads_by_hand():
    p = plan(150_000, T0, T0 + dt.timedelta(minutes=1), "1h", SONNET)
    assert len(p.pings) == 19
    assert p.pings[0] == T0 + dt.timedelta(minutes=59, seconds=30)
    assert p.pings[-1] == T0 + 19 * dt.timedelta(minutes=59, seconds=30)
    assert p.keep_warm_cost == pytest.approx(19 * 0.15 * 0.30)  # 19 reads at $0.045 < one $0.90 resend
    assert p.keep_warm_cost < p.cold_cost


def test_a_read_refreshes_the_cache_and_spends_one_of_the_reads():
    read = T0 + dt.timedelta(minutes=4, seconds=30)
    p = plan(150_000, T0, T0 + dt.timedelta(minutes=5), "5m", reads=[read])
    assert p.refreshed == read and p.expires == read + dt.timedelta(minutes=5)
    assert p.state == "waiting" and p.reads_made == 1 and p.reads_left == 11 and len(p.pings) == 11
    assert p.pings[0] == read + dt.timedelta(minutes=4, seconds=30)
    # a "read" made after the cache had run out kept nothing warm
    late = plan(150_000, T0, T0 + dt.timedelta(minutes=7), "5m", reads=[T0 + dt.timedelta(minutes=6)])
    assert late.reads_made == 0 and late.expires == T0 + dt.timedelta(minutes=5) and late.state == "expired"


def test_when_a_read_is_due_and_when_the_summary_takes_over():
    before = plan(150_000, T0, T0 + dt.timedelta(minutes=4, seconds=10), "5m")
    assert before.state == "prepare" and not before.ping_due and not before.last_window
    due = plan(150_000, T0, T0 + dt.timedelta(minutes=4, seconds=31), "5m")
    assert due.ping_due
    spent = plan(150_000, T0, T0 + dt.timedelta(minutes=4, seconds=31), "5m",
                 reads=[T0 + dt.timedelta(minutes=1)] * 12)
    assert spent.reads_left == 0 and spent.last_window and not spent.ping_due
    # with every read made, the summary is written a lead before the cache finally runs out
    assert before.summary_at == before.warm_until - dt.timedelta(seconds=60)


def test_reset_times_are_checked():
    from lookout_cli.compaction.idle_plan import parse_reset

    assert parse_reset("07:30") == (7, 30)
    for bad in ("7", "24:00", "07:60", "7:5", "noon"):
        with pytest.raises(ValueError):
            parse_reset(bad)
