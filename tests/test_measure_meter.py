"""The meter's pure functions, the ones other commands reuse: cost, cache tier, file-read
targets, meter state."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from lookout_cli.core.jsonl import Line, Record
from lookout_cli.formats.usages import Usages
from lookout_cli.formats.view import TOOL_CALL, Item, Usage
from lookout_cli.meter import analysis as meter
from lookout_cli.meter import cost, reclaim
from lookout_cli.tokens.models import lookup


def usage(**kw) -> Usage:
    return Usage(Record(1, b"{}\n"), **kw)


def test_long_context_prompt_pays_long_rates_for_everything():
    # claude-sonnet-4-5[1m] in models.toml: over 200,000 prompt tokens the rates are $6 input,
    # $7.50 5-minute write, $12 1-hour write, $0.60 read, $22.50 output per million.
    m = lookup("claude-sonnet-4-5[1m]")
    assert m.long_context_threshold == 200_000
    u = usage(input=10_000, cache_write=50_000, cache_write_1h=20_000, cache_read=150_000, output=2_000)
    parts = cost.usage_cost(u, m)
    by_hand = {
        "input": 10_000 * 6.0 / 1e6,
        "cache_write": (30_000 * 7.5 + 20_000 * 12.0) / 1e6,
        "cache_read": 150_000 * 0.6 / 1e6,
        "output": 2_000 * 22.5 / 1e6,
    }
    assert parts == pytest.approx(by_hand)
    assert sum(parts.values()) == pytest.approx(
        m.cost(input=10_000, output=2_000, cache_write_5m=30_000, cache_write_1h=20_000, cache_read=150_000))
    short = cost.usage_cost(usage(input=1_000, output=100), m)  # under the threshold: base rates
    assert short == pytest.approx({"input": 1_000 * 3.0 / 1e6, "cache_write": 0, "cache_read": 0,
                                   "output": 100 * 15.0 / 1e6})


def test_the_total_adds_up_each_response_at_its_own_model_and_rate():
    # responses added up by model and rate come to what each one costs by itself
    long_model, other = "claude-sonnet-4-5[1m]", "claude-opus-4-1"
    usages = [usage(model=long_model, input=1_000, cache_write=3_000, cache_write_1h=5_000, output=100),
              usage(model=long_model, input=10_000, cache_read=250_000, cache_write=40_000, cache_write_1h=20_000,
                    output=2_000),
              usage(model=other, input=7, cache_write=900, cache_read=5_000, output=40),
              usage(model="<synthetic>", input=50, output=5),  # priced at the measured model
              usage(model="no-such-model-x", input=5, output=5),
              usage(model=long_model, input=300_000, output=1)]
    total = cost.total_cost(usages, lookup, other)
    each = [cost.usage_cost(dataclasses.replace(u, model=other if u.model == "<synthetic>" else u.model),
                            lookup(other if u.model == "<synthetic>" else u.model)) for u in usages]
    priced = [parts for parts in each if parts is not None]
    assert (total.priced, total.unpriced) == (5, 1)
    for kind in ("input", "cache_write", "cache_read", "output"):
        assert getattr(total, kind) == pytest.approx(sum(parts[kind] for parts in priced))
    assert total.usd == pytest.approx(sum(sum(parts.values()) for parts in priced))
    assert set(total.models) == {lookup(long_model).name, lookup(other).name}


def _older_and_recent(usages: list[Usage], older: int) -> Usages:
    """``usages`` as a view holds them when the first ``older`` were read into a summary."""
    kept = Usages(list(usages)).first(older)
    kept.recent = usages[older:]
    return kept


def test_usages_read_by_column_are_the_usages_they_hold():
    """``Usages`` reads as the list of its usages, the older ones made from their columns: by
    position from both ends, by slice, forwards and backwards; a recent one can be replaced,
    an older one not; the first n are the older ones of a summary, over both parts."""
    made = [Usage(Line(n), input=n, cache_write=2 * n, cache_read=3 * n, output=n + 1, cache_write_1h=n // 2,
                  model=f"m{n % 2}", timestamp=f"2026-01-01T00:00:{n:02}Z") for n in range(1, 9)]
    usages = _older_and_recent(made, 5)
    assert len(usages) == 8 and list(usages) == made and usages == made and list(reversed(usages)) == made[::-1]
    assert usages[0] == made[0] and usages[-1] is made[-1] and usages[-8] == made[0] and usages[2:7] == made[2:7]
    assert usages[4].record.lineno == 5 and usages[::3] == made[::3]
    with pytest.raises(IndexError):
        usages[-9]
    with pytest.raises(IndexError):
        usages[8]
    with pytest.raises(IndexError):
        usages[4] = made[0]  # an older one stays as it was read
    usages[5] = made[0]
    usages.append(made[1])
    assert list(usages) == [*made[:5], made[0], *made[6:], made[1]]
    assert usages.first(7) == [*made[:5], made[0], made[6]] and usages.first(7).recent == []
    assert usages.first(3) == made[:3]


def test_the_meter_reads_older_usages_by_column_as_it_reads_usages():
    """A view whose older usages are held by column gets the cost, cache totals, warm cache,
    series and compaction rows it gets with every usage an object (long-context rates, an
    unknown model and a compaction among them)."""
    from lookout_cli.formats.view import Compaction, View

    long_model, other = "claude-sonnet-4-5[1m]", "claude-opus-4-1"
    made = [Usage(Line(10 * n), input=1_000 * n, cache_write=300 * n, cache_read=(250_000 if n % 3 == 0 else 9_000),
                  output=50 * n, cache_write_1h=100 * (n % 2), model=(long_model, other, "no-such-model-x", None)[n % 4],
                  timestamp=f"2026-01-01T00:{n:02}:00Z") for n in range(1, 13)]
    now = dt.datetime(2026, 1, 1, 0, 14, tzinfo=dt.UTC)
    views = [View("claude-code", usages=usages, compactions=[Compaction(Record(55, b"{}\n")), Compaction(Record(95, b"{}\n"))])
             for usages in (made, _older_and_recent(made, 7))]
    figures = []
    for view in views:
        total = cost.total_cost(view.usages, lookup, other)
        found = [meter.Response(view.usages[-1], 0, 0)] if type(view.usages) is list else \
            [meter.Response(view.usages.recent[-1], 0, 0)]
        series = meter.series(view, found)
        figures.append((dataclasses.astuple(total), dataclasses.astuple(cost.cache_totals(view.usages)),
                        dataclasses.astuple(cost.warm_cache(view.usages, now, 300)), list(series),
                        [dataclasses.astuple(row) for row in meter.compactions(view)]))
    assert figures[0] == figures[1]
    assert figures[0][0][5:7] == (9, 3) and figures[0][4][0][4] == made[5].prompt  # priced, unpriced; after the first


def test_the_older_usages_add_up_by_model_as_their_columns_do():
    """What the line memo keeps of the older usages instead of adding their columns up on every
    run: by model, in the order they come, each 1-hour write at most its write (a negative
    write, which only a damaged line holds, counted as the columns count it)."""
    made = [Usage(Line(n), input=n, cache_write=(-5 if n == 10 else 7 * n), cache_read=1_000 * n, output=n,
                  cache_write_1h=(2 * n if n % 3 == 0 else 0), model=("a", "b", "c")[n % 2 if n < 10 else 2])
            for n in range(1, 11)]
    totals = _older_and_recent(made, 10).older_totals()
    assert list(totals) == ["b", "a", "c"]
    for model, (count, uncached, write, read, output, hour, hour_min, some, highest) in totals.items():
        mine = [u for u in made if u.model == model]
        assert (count, uncached, write, read, output, hour) == (len(mine), *(sum(getattr(u, k) for u in mine) for k in (
            "input", "cache_write", "cache_read", "output", "cache_write_1h")))
        assert hour_min == sum(min(u.cache_write_1h, u.cache_write) for u in mine)
        assert some == any(u.cache_write_1h for u in mine) and highest == max(u.prompt for u in mine)
    assert totals["c"][6:8] == (-5, 0)  # no 1-hour write: each min is the write below 0


def test_the_points_a_compaction_comes_before_are_found_in_and_out_of_file_order():
    """A point comes after a compaction when one lies after the previous point's line (the
    first point: after line 0), up to its own: found by halving when the usages run in file
    order, by counting when they do not; a compaction at line 0 or after the last point comes
    before none."""
    from lookout_cli.formats.view import Compaction, View

    def brute(lines: list[int], marks: list[int]) -> list[int]:
        return [n for n, line in enumerate(lines) if any((lines[n - 1] if n else 0) < m <= line for m in marks)]

    marks = [0, 20, 25, 26, 45, 60]
    for lines, expected in (([10, 20, 30, 40, 50], [1, 2, 4]), ([10, 30, 20, 40, 50], [1, 3, 4])):
        view = View("claude-code", usages=[Usage(Line(n), input=n) for n in lines],
                    compactions=[Compaction(Record(m, b"{}\n")) for m in marks])
        assert meter.series(view, []).compaction_before == brute(lines, marks) == expected


def test_unknown_models_are_not_priced():
    total = cost.total_cost([usage(input=5, output=5)], lambda name: lookup(name), "no-such-model-x")
    assert total.usd is None and total.unpriced == 1 and total.priced == 0


def test_cache_tier_and_warm_time():
    t0 = "2026-01-01T00:00:00Z"
    now = dt.datetime(2026, 1, 1, 0, 3, tzinfo=dt.timezone.utc)
    five = cost.warm_cache([usage(cache_write=10, timestamp=t0)], now)
    assert (five.tier, five.tier_source, five.seconds_left, five.expired) == ("5m", "recorded", 120, False)
    hour = cost.warm_cache([usage(cache_write=10, cache_write_1h=10, timestamp=t0),
                             usage(cache_read=10, timestamp=t0)], now)
    assert (hour.tier, hour.seconds_left) == ("1h", 3600 - 180)
    # no cache writes recorded: the model's own TTL (OpenAI: 300 s)
    model = cost.warm_cache([usage(cache_read=10, timestamp=t0)], now, meter.model_ttl(lookup("gpt-5.1-codex")))
    assert (model.tier, model.tier_source) == ("5m", "model")
    assert cost.warm_cache([usage(input=10)], now) is None  # no time recorded


@pytest.mark.parametrize("tool, args, expected", [
    ("Read", '{"file_path":"/w/a.py"}', ("/w/a.py", "")),
    ("Read", '{"file_path":"/w/a.py","offset":10,"limit":5}', ("/w/a.py", "offset=10,limit=5")),
    ("read_file", '{"path":"src/x.ts"}', ("src/x.ts", "")),
    ("shell", '{"command":["bash","-lc","sed -n \'1,220p\' components/a.ts"],"workdir":"/w"}',
     ("components/a.ts", "-n 1,220p")),
    ("shell", '{"command":["bash","-lc","cat README.md"]}', ("README.md", "")),
    ("shell", '{"command":["cat","README.md"]}', ("README.md", "")),
    ("shell_command", '{"command":"head -n 40 notes.txt"}', ("notes.txt", "-n 40")),
    ("shell", '{"command":["bash","-lc","cat a | grep x"]}', None),
    ("shell", '{"command":["bash","-lc","rg -n ollama"]}', None),
    ("Edit", '{"file_path":"/w/a.py","old_string":"a"}', None),
])
def test_read_targets_from_tool_call_arguments(tool, args, expected):
    item = Item("assistant", TOOL_CALL, tool + args, Record(1, b"{}\n"), tool=tool, call_id="c1")
    assert reclaim.read_target(item) == expected


@pytest.mark.parametrize("pct, state", [(5, "hidden"), (10, "normal"), (74.9, "normal"), (75, "amber"),
                                        (83.4, "amber"), (83.5, "red"), (120, "red")])
def test_meter_state_thresholds(pct, state):
    assert meter.meter_state(pct, 75, 83.5) == state

