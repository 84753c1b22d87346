"""Model data and lookup; budgets, Hull's reserve rule and when compaction is due."""

from __future__ import annotations

import pytest

from lookout_cli.core.errors import LookoutError
from lookout_cli.core.units import parse_percent, parse_size
from lookout_cli.tokens import models
from lookout_cli.tokens.budget import Budget, parse_budget, reserve
from lookout_cli.tokens.models import lookup

# --- lookup -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("claude-sonnet-4-5", "claude-sonnet-4-5"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("Claude-Sonnet-4.5", "claude-sonnet-4-5"),
        ("anthropic/claude-sonnet-4.5", "claude-sonnet-4-5"),
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"),
        ("anthropic.claude-haiku-4-5-20251001-v1:0", "claude-haiku-4-5"),
        ("claude-sonnet-4-5@20250929", "claude-sonnet-4-5"),
        ("claude-sonnet-4-5-20250929[1m]", "claude-sonnet-4-5[1m]"),
        ("claude-opus-4-6[1m]", "claude-opus-4-6"),  # natively 1M: no separate entry
        ("claude-sonnet-4-20250514", "claude-sonnet-4"),
        ("claude-opus-4-0", "claude-opus-4"),
        ("claude-3-5-sonnet-20241022", "claude-3-5-sonnet"),
        ("claude-3-7-sonnet-latest", "claude-3-7-sonnet"),
        ("claude-opus-4-8", "claude-opus-4-8"),
        ("claude-fable-5", "claude-fable-5"),
        ("gpt-5-2025-08-07", "gpt-5"),
        ("openai/gpt-5.1-codex", "gpt-5.1-codex"),
        ("gpt-5-1-codex", "gpt-5.1-codex"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("chatgpt-4o-latest", "gpt-4o"),
        ("gpt-4-0613", "gpt-4"),
        ("gpt-3.5-turbo-0125", "gpt-3.5-turbo"),
        ("o3-2025-04-16", "o3"),
        ("models/gemini-2.5-pro", "gemini-2.5-pro"),
        ("google/gemini-3-pro", "gemini-3-pro-preview"),
        ("gemini-3-flash-preview", "gemini-3-flash-preview"),
    ],
)
def test_lookup_matches_the_forms_names_take(name, canonical):
    m = lookup(name)
    assert m.known and m.name == canonical and m.label == canonical


def test_every_model_in_the_shared_transcripts_that_we_list_is_found():
    # Names recorded in shared/transcripts (message.model / turn_context.model).
    for name in ("claude-sonnet-4-20250514", "gpt-5.1-codex", "claude-opus-4-8", "claude-fable-5",
                 "gpt-5.5", "gpt-5.4", "gpt-5.2", "gemini-3-flash-preview", "claude-sonnet-5",
                 "gpt-5.2-codex", "gpt-5.1", "claude-opus-5"):
        assert lookup(name).known, name


@pytest.mark.parametrize("name", ["gpt-5.6-sol", "my-local-llama", "<synthetic>", None, ""])
def test_unknown_models_get_labelled_defaults(name):
    m = lookup(name)
    assert not m.known
    assert "assuming a 200,000-token window" in m.label
    assert ("unknown model" in m.label) if name else ("no model named" in m.label)
    assert (m.context_window, m.max_output, m.input_limit, m.summary_point) == (200000, 32000, None, None)
    assert m.price_input is None and m.cost(input=1000) is None
    assert m.encoding == "o200k_base"


def test_unknown_model_keeps_what_its_name_tells():
    m = lookup("gpt-5.6-sol")
    assert m.provider == "openai" and m.cache_ttls == (300,)
    assert lookup("claude-next-9").provider == "anthropic"
    assert lookup("claude-next-9").cache_ttls == (300, 3600)


def test_model_fields():
    s = lookup("claude-sonnet-4-5")
    assert (s.provider, s.context_window, s.input_limit, s.max_output, s.summary_point) == (
        "anthropic", 200000, None, 64000, 167000)
    assert (s.price_input, s.price_output, s.price_cache_write_5m, s.price_cache_write_1h, s.price_cache_read) == (
        3.0, 15.0, 3.75, 6.0, 0.3)
    assert s.cache_ttls == (300, 3600) and not s.has_input_limit and s.prompt_limit == 200000
    assert not s.exact_tokenizer
    g = lookup("gpt-5")
    assert g.has_input_limit and g.prompt_limit == 272000 and g.exact_tokenizer
    assert lookup("gpt-4").encoding == "cl100k_base"
    assert lookup("gpt-4o").encoding == "o200k_base"
    assert lookup("gemini-2.5-pro").input_limit == 1048576


def test_shipped_data_is_consistent():
    cat = models.catalog()
    assert len(cat.entries) >= 40
    for name in models.known_models():
        m = lookup(name)
        assert m.known and m.provider in ("anthropic", "openai", "gemini"), name
        assert m.max_output and m.context_window and m.price_input and m.price_output, name
        if m.input_limit is not None:
            assert m.input_limit <= m.context_window, name
        # Summary points follow the maker's agent (rules in models.toml's header).
        if m.provider == "anthropic":
            want = m.context_window - min(m.max_output, 20_000) - 13_000
            # Prompt-cache multipliers (research/compaction.md): 1.25x, 2x, 0.1x, within
            # the rounding of the official table (Haiku 3: $0.30 for 1.25 x $0.25).
            assert m.price_cache_write_5m == pytest.approx(1.25 * m.price_input, abs=0.02), name
            assert m.price_cache_write_1h == pytest.approx(2 * m.price_input, abs=0.02), name
            assert m.price_cache_read == pytest.approx(0.1 * m.price_input, abs=0.01), name
        elif m.provider == "openai":
            # Codex's window is 272k for GPT-5.x (their input limit or less), else the window.
            window = min(m.input_limit, 272_000) if m.input_limit else m.context_window
            want = window * 9 // 10
        else:
            want = m.context_window // 2
        assert m.summary_point == want, name


def test_model_cost_and_long_context_rates():
    s = lookup("claude-sonnet-4-5")
    assert s.cost(input=1_000_000) == pytest.approx(3.0)
    assert s.cost(input=100, output=200, cache_write_5m=300, cache_write_1h=400, cache_read=500) == pytest.approx(
        (100 * 3 + 200 * 15 + 300 * 3.75 + 400 * 6 + 500 * 0.3) / 1e6)
    big = lookup("claude-sonnet-4-5[1m]")
    assert big.context_window == 1_000_000 and big.summary_point == 967_000
    assert big.cost(input=150_000, output=1000) == pytest.approx((150_000 * 3 + 1000 * 15) / 1e6)
    # Over 200k of prompt (cache reads count), every token of the request pays the long rate.
    assert big.cost(input=10_000, cache_read=250_000, output=1000) == pytest.approx(
        (10_000 * 6 + 250_000 * 0.6 + 1000 * 22.5) / 1e6)
    assert lookup("gpt-5").cost(cache_write_1h=10) is None  # no such tier: unknown, not 0
    assert lookup("gpt-5").cost() == 0.0


# --- overrides from the config file ---------------------------------------------------------


def test_overrides_change_known_models_by_any_of_their_names():
    o = {"claude-sonnet-4-5": {"price_input": 2.5, "context_window": "1M"}}
    m = lookup("claude-sonnet-4-5-20250929", o)
    assert m.known and m.price_input == 2.5 and m.context_window == 1_000_000
    assert "config" in m.label
    assert lookup("anthropic/claude-sonnet-4.5", {"claude-sonnet-4-5-20250929": {"max_output": 8000}}).max_output == 8000
    assert lookup("claude-sonnet-4-5").price_input == 3.0  # shipped data untouched


def test_overrides_add_models():
    m = lookup("my-model", {"my-model": {"context_window": 128000, "max_output": 8000, "price_input": 0.5}})
    assert m.known and m.label == "my-model (from config)"
    assert (m.context_window, m.max_output, m.price_input) == (128000, 8000, 0.5)
    based = lookup("proxy/sonnet", {"proxy/sonnet": {"base": "claude-sonnet-4.5", "price_input": 0}})
    assert based.known and based.context_window == 200000 and based.price_input == 0.0
    partial = lookup("odd-model", {"odd-model": {"max_output": 4000}})
    assert not partial.known and partial.max_output == 4000 and "4,000 output tokens" in partial.label


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"context_windw": 1000}, "unknown field 'context_windw'"),
        ({"context_window": -5}, "positive whole number"),
        ({"context_window": "lots"}, "not a number"),
        ({"price_input": "cheap"}, "price"),
        ({"cache_ttls": [300, "1h"]}, "cache_ttls"),
        ({"encoding": "p50k_base"}, "unknown encoding"),
        ({"base": "no-such-model"}, "unknown base"),
        ({"context_window": 100, "input_limit": 200}, "over its context_window"),
    ],
)
def test_bad_overrides_are_clear_errors(fields, message):
    with pytest.raises(LookoutError, match=message):
        lookup("x-model", {"x-model": fields})


def test_bad_data_file_is_a_clear_error():
    with pytest.raises(LookoutError, match="names both"):
        models._load_toml('[models.a]\nprovider="openai"\n[models.b]\nprovider="openai"\naliases=["a"]\n')
    with pytest.raises(LookoutError, match="base loop"):
        models._load_toml('[models.a]\nbase="b"\n[models.b]\nbase="a"\n')
    with pytest.raises(LookoutError, match="has no provider"):
        models._load_toml("[models.a]\ncontext_window=5\n")
    with pytest.raises(LookoutError, match="models.toml"):
        models._load_toml("[models.a\n")


# --- sizes and budgets --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [("200k", 200_000), ("200K", 200_000), ("1.5M", 1_500_000), ("1.5m", 1_500_000), ("120000", 120_000),
     ("120_000", 120_000), ("120,000", 120_000), (" 8k ", 8000), ("0.5k", 500), ("0", 0), (32000, 32000),
     ("16MB", 16_000_000), ("12kb", 12_000), ("100B", 100), ("5MiB", 5_242_880), ("2GiB", 2 * 1024**3),
     ("1g", 1_000_000_000)],
)
def test_parse_size(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "k", "abc", "-5", "1.5", "12kbs", "5Mi", "80%", "1e6", True, None, -1, "1.2.3", "1.5B"])
def test_parse_size_rejects_bad_input(text):
    with pytest.raises(LookoutError):
        parse_size(text)


def test_parse_budget_and_percent():
    assert parse_budget("80%", 200_000) == 160_000
    assert parse_budget(" 12.5 % ", 272_000) == 34_000
    assert parse_budget("150k", 200_000) == 150_000
    assert parse_budget(90_000, 200_000) == 90_000
    assert parse_percent("80%") == 80.0 and parse_percent(95) == 95.0
    for bad in ("0", "0%", "150%", "-3%", "x%", "%"):
        with pytest.raises(LookoutError):
            parse_budget(bad, 200_000)
    with pytest.raises(LookoutError, match="percentage"):
        parse_percent(float("nan"))


def test_reserve_follows_hull():
    # Separate input limit: min(20,000, max output).
    assert reserve(lookup("gpt-5")) == 20_000
    assert reserve(lookup("gemini-2.5-pro")) == 20_000
    small = lookup("x", {"x": {"context_window": 100_000, "input_limit": 90_000, "max_output": 8_000}})
    assert reserve(small) == 8_000
    # One window: the full output allowance, up to 32,000.
    assert reserve(lookup("claude-sonnet-4-5")) == 32_000  # 64k output, capped
    assert reserve(lookup("claude-3-5-sonnet")) == 8_192
    assert reserve(lookup("gpt-4o")) == 16_384
    assert reserve(lookup("claude-opus-4-1")) == 32_000
    # A configured value wins.
    assert reserve(lookup("claude-sonnet-4-5"), reserved=5000) == 5000
    assert reserve(lookup("gpt-5"), reserved="50k") == 50_000


def test_budget_from_a_single_window_model():
    b = Budget.from_settings(lookup("claude-sonnet-4-5"))
    assert (b.limit, b.reserve, b.summary_point, b.due_at) == (200_000, 32_000, 167_000, 168_000)
    assert not b.due(167_999) and b.due(168_000) and b.due(250_000)
    assert b.step_share == 66_666
    assert b.percent(50_000) == 25.0 and b.remaining(150_000) == 50_000


def test_budget_from_an_input_limit_model():
    b = Budget.from_settings(lookup("gpt-5"))
    assert (b.limit, b.reserve, b.summary_point, b.due_at) == (272_000, 20_000, 244_800, 252_000)
    assert not b.due(251_999) and b.due(252_000)


def test_threshold_and_reserve_whichever_comes_first():
    m = lookup("claude-sonnet-4-5")
    early = Budget.from_settings(m, threshold_percent=80)
    assert early.due_at == 160_000
    assert not early.due(159_999) and early.due(160_000)
    late = Budget.from_settings(m, threshold_percent="95%")  # the reserve comes first
    assert late.due_at == 168_000
    assert not late.due(167_999) and late.due(168_000)
    odd = Budget.from_settings(m, threshold_percent=33.3)
    assert not odd.due(odd.due_at - 1) and odd.due(odd.due_at)


def test_budget_settings_override():
    m = lookup("claude-sonnet-4-5")
    b = Budget.from_settings(m, budget="150k", reserved="10k")
    assert (b.limit, b.reserve) == (150_000, 10_000)
    assert b.summary_point == 127_500  # the model's own 167k is past the budget: 85%
    assert not b.due(139_999) and b.due(140_000)
    pct = Budget.from_settings(m, budget="50%")
    assert pct.limit == 100_000 and pct.step_share == 33_333
    tiny = Budget.from_settings(m, budget=40_000)  # the reserve never takes over half
    assert tiny.reserve == 20_000 and not tiny.due(19_999) and tiny.due(20_000)
    cfg = Budget.from_config(m, {"threshold_percent": 80, "reserved": 20000, "other": 1})
    assert (cfg.limit, cfg.reserve, cfg.due_at) == (200_000, 20_000, 160_000)
    assert Budget.from_config(m, None) == Budget.from_settings(m)


def test_summary_point_defaults_to_85_percent():
    b = Budget.from_settings(lookup("some-unknown-model"))
    assert b.summary_point == 170_000
    g = Budget.from_settings(lookup("gemini-2.5-pro"))
    assert g.summary_point == 524_288 and g.reserve == 20_000


def test_bad_budget_settings_are_clear_errors():
    m = lookup("claude-sonnet-4-5")
    with pytest.raises(LookoutError, match="not a number"):
        Budget.from_settings(m, budget="lots")
    with pytest.raises(LookoutError, match="percentage"):
        Budget.from_settings(m, threshold_percent=0)
    with pytest.raises(LookoutError, match="percentage"):
        Budget.from_settings(m, threshold_percent="101")
    with pytest.raises(LookoutError, match="negative"):
        Budget.from_settings(m, reserved=-1)


def test_the_parsed_models_file_is_kept_in_the_cache_folder_and_a_damaged_copy_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("LOOKOUT_CACHE_DIR", str(tmp_path))
    models.catalog.cache_clear()
    try:
        parsed = models.catalog()
        kept = list(tmp_path.glob("models-*.marshal"))
        assert len(kept) == 1
        models.catalog.cache_clear()
        assert models.catalog() == parsed  # read back
        blob = kept[0].read_bytes()
        kept[0].write_bytes(blob[:40] + bytes([blob[40] ^ 1]) + blob[41:])  # its hash no longer fits
        models.catalog.cache_clear()
        assert models.catalog() == parsed and kept[0].read_bytes() == blob  # parsed again, written whole
        assert lookup("claude-sonnet-4-5-20250929").name == "claude-sonnet-4-5"
    finally:
        models.catalog.cache_clear()
