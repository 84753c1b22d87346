"""The stage plans, worked out on generated views: what prune protects and when it waits, what
clamp cuts, where the summary split lands, what shorten and truncate take."""

from __future__ import annotations

import pytest
from test_compact_fixtures import FORMATS, parse, session

from lookout_cli.compaction import plan
from lookout_cli.tokens.tokenizer import count


def view_of(fmt: str, **kw):
    view = parse(session(fmt, **kw)).view()
    return view, [count(i.text) for i in view.items]


@pytest.mark.parametrize("fmt", FORMATS)
def test_prune_clears_only_read_output_outside_the_protected_part(fmt):
    view, tokens = view_of(fmt, turns=16)
    items = view.items
    s = plan.Settings()
    p = plan.plan_prune(items, tokens, s)
    assert p.items and p.skipped is None
    assert p.items == sorted(p.items)  # oldest first
    assert all(items[i].kind == "tool_result" for i in p.items)
    read = plan.read_results(items)
    assert set(p.items) <= read
    starts = plan.prompts(items)
    assert all(i < starts[-2] for i in p.items)  # the last two turns are never touched
    newer = [i for i in range(p.items[-1] + 1, len(items)) if items[i].kind == "tool_result"]
    assert sum(tokens[i] for i in newer) >= s.protect_tokens  # the newest 40,000 tokens of output stay
    unpruned_older = [i for i in range(p.items[-1]) if items[i].kind == "tool_result" and i not in p.items]
    assert all(tokens[i] <= plan.PLACEHOLDER_TOKENS for i in unpruned_older)
    assert p.freed == sum(tokens[i] - plan.PLACEHOLDER_TOKENS for i in p.items) >= s.prune_minimum


def test_prune_skips_when_it_would_free_too_little():
    view, tokens = view_of("openai", turns=8, output_chars=4000)
    p = plan.plan_prune(view.items, tokens, plan.Settings())
    assert p.items == []
    assert "minimum" in p.skipped or "no read tool output" in p.skipped
    assert plan.plan_prune(view.items, tokens, plan.Settings(protect_tokens=1000, prune_minimum=1000)).items


def test_prune_off():
    view, tokens = view_of("openai", turns=14)
    assert plan.plan_prune(view.items, tokens, plan.Settings(prune=False)).skipped.startswith("pruning is off")


def test_prune_waits_while_a_warm_cache_would_not_repay_the_rewrite():
    view, tokens = view_of("anthropic", turns=16)
    s = plan.Settings()
    p = plan.plan_prune(view.items, tokens, s)
    suffix = sum(tokens[p.first:]) - p.freed
    assert plan.worth_rewrite(p, tokens, None, s)[0]  # no cache: always worth it
    assert plan.worth_rewrite(p, tokens, plan.CacheCost(warm=False), s)[0]  # a cold cache is rewritten anyway
    warm = plan.CacheCost(warm=True, write=1.25, read=0.1)
    payback = suffix * (warm.write - warm.read) / (p.freed * warm.read)
    ok, why = plan.worth_rewrite(p, tokens, warm, plan.Settings(payback_requests=int(payback) + 1))
    assert ok and "repays" in why
    ok, why = plan.worth_rewrite(p, tokens, warm, plan.Settings(payback_requests=int(payback) - 1))
    assert not ok and "warm" in why


@pytest.mark.parametrize("fmt", FORMATS)
def test_clamp_by_characters_and_by_the_steps_share(fmt):
    view, tokens = view_of(fmt, turns=3, output_chars=9000)
    items = view.items
    steps = plan.plan_clamp(items, tokens, plan.Settings(max_tool_output_chars=5000, step_share=None))
    assert steps and all(len(items[c.index].text) > 5000 and c.head + c.tail == 5000 for c in steps)
    over = {i for i, it in enumerate(items) if it.kind == "tool_result" and len(it.text) > 5000}
    assert {c.index for c in steps} == over
    by_share = plan.plan_clamp(items, tokens, plan.Settings(max_tool_output_chars=0, step_share=900))
    assert {c.index for c in by_share} == {i for i in over | set(range(len(items)))
                                           if items[i].kind == "tool_result" and tokens[i] > 900}
    assert all("share" in c.reason for c in by_share)


@pytest.mark.parametrize("fmt", FORMATS)
def test_split_lands_on_a_prompt_and_keeps_the_recent_turns(fmt):
    view, tokens = view_of(fmt, turns=8, output_chars=1500)
    items = view.items
    s = plan.Settings(tail_turns=2, preserve_recent_tokens=8000)
    split = plan.plan_split(items, tokens, s)
    assert items[split.keep_from].prompt
    starts = plan.prompts(items)
    assert split.keep_from == starts[-2]  # two turns fit in 8,000 tokens
    assert sum(tokens[split.keep_from:]) <= 8000
    kept_calls = {i.call_id for i in items[split.keep_from:] if i.kind == "tool_call"}
    kept_results = {i.call_id for i in items[split.keep_from:] if i.kind == "tool_result"}
    assert kept_calls == kept_results  # pairs stay together
    tight = plan.plan_split(items, tokens, plan.Settings(tail_turns=2, preserve_recent_tokens=100))
    # the latest turn, far over the budget, splits inside: its request stays, then its last step
    assert tight.request and tight.request[0] == plan.message_start(items, starts[-1])
    assert tight.keep_from > starts[-1] and tight.keep_from in plan.step_starts(items, starts[-1])


@pytest.mark.parametrize("fmt", FORMATS)
def test_unread_output_is_never_summarized(fmt):
    view, tokens = view_of(fmt, turns=5, output_chars=800, last_unread=True)
    items = view.items
    split = plan.plan_split(items, tokens, plan.Settings(tail_turns=1, preserve_recent_tokens=0))
    unread = plan.unread_results(items)
    assert unread and all(i >= split.keep_from for i in unread)
    assert not set(unread) & set(split.head)


def test_split_with_one_turn_has_nothing_to_summarize():
    view, tokens = view_of("openai", turns=1, output_chars=800)
    split = plan.plan_split(view.items, tokens, plan.Settings())
    assert split.keep_from is None and "nothing to summarize" in split.reason


@pytest.mark.parametrize("fmt", FORMATS)
def test_shorten_clears_read_output_then_shortens_unread_output_largest_first(fmt):
    view, tokens = view_of(fmt, turns=2, steps=3, output_chars=6000, last_unread=True)
    items = view.items
    read = sorted(plan.read_results(items))
    unread = plan.unread_results(items)
    small = plan.plan_shorten(items, tokens, tokens[read[0]] - 200)
    assert small.clear == [read[0]] and small.shorten == []
    everything = sum(tokens[i] for i in read) + tokens[unread[0]] // 2
    big = plan.plan_shorten(items, tokens, everything)
    assert big.clear == [i for i in read if tokens[i] > plan.PLACEHOLDER_TOKENS]
    assert [c.index for c in big.shorten] == unread
    assert big.shorten[0].head + big.shorten[0].tail >= plan.MIN_SHORTENED_CHARS
    assert plan.plan_shorten(items, tokens, 0).clear == []


@pytest.mark.parametrize("fmt", FORMATS)
def test_truncate_keeps_whole_recent_turns_and_the_latest_always(fmt):
    view, tokens = view_of(fmt, turns=6, output_chars=1500)
    items = view.items
    starts = plan.prompts(items)
    total = sum(tokens)
    p = plan.plan_truncate(items, tokens, total // 2)
    assert p.keep_from in starts and p.keep_from > starts[0]
    assert sum(tokens[p.keep_from:]) <= total // 2
    assert plan.plan_truncate(items, tokens, 10).keep_from == starts[-1]
    assert plan.plan_truncate(items, tokens, total * 2).keep_from is None
