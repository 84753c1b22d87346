"""``lookout measure``: figures checked against hand-worked numbers on tiny fixtures and against
the raw usage fields of the real transcripts, in real subprocesses of the installed lookout.

Hand counts (o200k_base), each split into its tokens once by hand and written down here so the
tests do not ask the tokenizer for the answer:

  "hello world"                    hello | ␣world                                   2
  "Reading it."                    Reading | ␣it | .                                3
  'Read{"file_path":"/w/a.py"}'    Read | {" | file | _path | ": | "/ | w | /a | .py | "}   10
  "print(1)"                       print | ( | 1 | )                                4
  "Done."                          Done | .                                         2
  "thanks"                         thanks                                           1
  "You are helpful."               You | ␣are | ␣helpful | .                        4
  "yes"                            yes                                              1
  "Use tabs."                      Use | ␣tabs | .                                  3
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import orjson
import pytest
from conftest import DATA, SHARED_TRANSCRIPTS, real_transcripts, run_lookout

MEASURE = DATA / "measure"
CLAUDE_SMALL = MEASURE / "claude-small.jsonl"
OPENAI_IMAGE = MEASURE / "openai-image.jsonl"
CCVIEWER = SHARED_TRANSCRIPTS / "claude-code" / "ccviewer-fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
ROLLOUT = SHARED_TRANSCRIPTS / "codex" / "rollout-2025-11-17T15-30-28-019a93b9-f380-7600-98ff-940e6b99603c.jsonl"

HAND = {
    "hello world": ["hello", " world"],
    "Reading it.": ["Reading", " it", "."],
    'Read{"file_path":"/w/a.py"}': ["Read", '{"', "file", "_path", '":', '"/', "w", "/a", ".py", '"}'],
    "print(1)": ["print", "(", "1", ")"],
    "Done.": ["Done", "."],
    "thanks": ["thanks"],
    "You are helpful.": ["You", " are", " helpful", "."],
    "yes": ["yes"],
    "Use tabs.": ["Use", " tabs", "."],
}


def hand(text: str) -> int:
    pieces = HAND[text]
    assert "".join(pieces) == text  # the hand split covers the text exactly
    return len(pieces)


def fixture_inputs() -> list[Path]:
    """Every format's hand-made fixtures plus ours."""
    found = []
    for folder in ("anthropic", "openai", "claude-code", "codex", "gemini-cli", "measure"):
        found += sorted((DATA / folder).glob("*.jsonl"))
    return found


def measure_json(path: Path, *args: str, cwd=None) -> dict:
    result = run_lookout("measure", "--json", *args, str(path), cwd=cwd)
    assert result.returncode == 0, result.stderr.decode()
    return orjson.loads(result.stdout)


def part(report: dict, key: str) -> dict:
    return next(p for p in report["parts"] if p["key"] == key)


# --- the filter contract ----------------------------------------------------------------------

ALL_INPUTS = real_transcripts() + fixture_inputs()


@pytest.mark.parametrize("path", ALL_INPUTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_transcript_passes_through_byte_for_byte(path):
    data = path.read_bytes()
    result = run_lookout("measure", "--now", "2026-01-01T00:00:00Z", input=data)
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout == data
    assert b"lookout measure" in result.stderr  # the report went to standard error
    # and from a FILE argument as well
    result = run_lookout("measure", "-q", str(path))
    assert result.returncode == 0 and result.stdout == data and result.stderr == b""


@pytest.mark.parametrize("path", ALL_INPUTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_report_only_on_every_input(path):
    result = run_lookout("measure", "--report-only", str(path))
    assert result.returncode == 0, result.stderr.decode()
    text = result.stdout.decode()
    assert text.startswith("lookout measure:") and "Context [" in text
    assert not text.lstrip().startswith("{")  # the report, not the transcript


def test_empty_input_gives_empty_output(tmp_path):
    result = run_lookout("measure", input=b"")
    assert result.returncode == 0 and result.stdout == b""
    report = orjson.loads(run_lookout("measure", "--json", input=b"").stdout)
    assert report["used"]["tokens"] == 0 and report["parts"]


# --- hand-worked figures: a tiny Claude Code session --------------------------------------------

def test_claude_small_parts_match_hand_counts():
    r = measure_json(CLAUDE_SMALL, "--now", "2026-01-05T10:30:09Z")
    call = hand('Read{"file_path":"/w/a.py"}')
    assert part(r, "messages")["tokens"] == hand("hello world") + hand("thanks")
    assert part(r, "replies")["tokens"] == hand("Reading it.") + 2 * call + hand("Done.")
    tool = part(r, "tool_results")
    assert tool["tokens"] == 2 * hand("print(1)")
    assert [(c["label"], c["tokens"], c["items"]) for c in tool["children"]] == [("Read", 8, 2)]
    conversation = sum(p["tokens"] for p in r["parts"] if p["group"] == "conversation")
    assert conversation == 2 + 3 + 10 + 4 + 10 + 4 + 2 + 1
    # Setup is not recorded: first prompt (3 + 1000 + 0) minus the conversation before it (2)
    inferred = part(r, "inferred")
    assert inferred["tokens"] == 3 + 1000 + 0 - hand("hello world")
    assert inferred["basis"] == "inferred"
    assert inferred["label"] == "System prompt and tool definitions"
    # the parts add up to the total
    assert sum(p["tokens"] for p in r["parts"]) == r["total"]["tokens"] == 1001 + 36
    assert r["largest_part"]["key"] == "inferred"
    assert [p["key"] for p in r["two_largest"]] == ["inferred", "replies"]


def test_claude_small_provider_truth_and_calibration():
    r = measure_json(CLAUDE_SMALL, "--now", "2026-01-05T10:30:09Z")
    last = r["last_response"]
    # msg_3 on line 7: input 2 + cache write 0 + cache read 1045
    assert (last["input"], last["cache_write"], last["cache_read"]) == (2, 0, 1045)
    assert last["prompt"] == 1047 and last["output"] == 3 and last["basis"] == "exact" and last["line"] == 7
    # our estimate of that prompt: the inferred setup + everything before "Done."
    estimate = 1001 + 2 + 3 + 10 + 4 + 10 + 4
    assert last["estimate"] == estimate
    assert r["calibration"]["ratio"] == pytest.approx(1047 / estimate, abs=1e-6)
    # used: the provider's prompt + output, plus "thanks" (1 token) scaled by the calibration
    assert r["used"]["provider"] == 1047 + 3
    assert r["used"]["pending"] == round(1 * 1047 / estimate)
    assert r["used"]["tokens"] == 1050 + r["used"]["pending"]
    assert r["used"]["basis"] == "exact+estimated"
    assert r["used"]["percent"] == pytest.approx(100 * r["used"]["tokens"] / 200_000, abs=1e-3)


def test_claude_small_cache_cost_and_warm_cache():
    r = measure_json(CLAUDE_SMALL, "--now", "2026-01-05T10:30:09Z")
    cache = r["cache"]
    # msg_1 spans two lines with the same usage: counted once. The sidechain line (500,000
    # input tokens) is not part of the main chain.
    assert cache["requests"] == 3
    assert (cache["input"], cache["cache_write"], cache["cache_write_1h"], cache["cache_read"], cache["output"]) == (
        3 + 5 + 2, 1000 + 40, 40, 0 + 1000 + 1045, 20 + 10 + 3)
    assert cache["total"] == 10 + 1040 + 2045 + 33
    assert cache["read_share"] == pytest.approx(2045 / (10 + 1040 + 2045), abs=1e-6)
    # claude-sonnet-4-5 in models.toml: $3 input, $3.75 5-minute write, $6 1-hour write,
    # $0.30 cache read, $15 output per million tokens.
    from lookout_cli.tokens.models import lookup

    m = lookup("claude-sonnet-4-5-20250929")
    assert (m.price_input, m.price_cache_write_5m, m.price_cache_write_1h, m.price_cache_read, m.price_output) == (
        3.0, 3.75, 6.0, 0.3, 15.0)
    by_hand = (10 * 3 + 1000 * 3.75 + 40 * 6 + 2045 * 0.3 + 33 * 15) / 1e6  # = 0.0051285
    assert r["cost"]["usd"] == pytest.approx(by_hand, abs=1e-9)
    assert r["cost"]["cache_write"] == pytest.approx((1000 * 3.75 + 40 * 6) / 1e6, abs=1e-9)
    assert r["cost"]["priced"] == 3 and r["cost"]["unpriced"] == 0
    # the last write (msg_2) went to the 1-hour tier: warm until 10:00:09 + 1 h
    warm = r["warm_cache"]
    assert warm["tier"] == "1h" and warm["tier_source"] == "recorded"
    assert warm["expires_at"] == "2026-01-05T11:00:09Z"
    assert warm["seconds_left"] == 1800 and warm["expired"] is False
    expired = measure_json(CLAUDE_SMALL, "--now", "2026-01-05T12:00:09Z")["warm_cache"]
    assert expired["expired"] is True and expired["seconds_left"] == -3600


def test_claude_small_budget_and_meter_state():
    r = measure_json(CLAUDE_SMALL)
    b = r["budget"]
    # claude-sonnet-4-5: one 200k window, 64k max output -> reserve min(64k, 32k)
    assert (b["window"], b["budget"], b["reserve"]) == (200_000, 200_000, 32_000)
    assert b["summary_point"] == 167_000 and b["summary_point_source"] == "the model's own"
    assert b["compaction_due_at"] == 200_000 - 32_000 and b["due"] is False
    assert r["meter"]["state"] == "hidden"  # 0.5% is under a tenth
    used = r["used"]["tokens"]
    # a budget that puts the same usage at about 80% (amber) and past the summary point (red)
    amber = measure_json(CLAUDE_SMALL, "--budget", str(round(used / 0.80)))
    assert amber["meter"]["state"] == "amber" and amber["budget"]["budget_source"].startswith("--budget")
    # with a budget below the model's summary point, the summary point is 85% of the budget
    red = measure_json(CLAUDE_SMALL, "--budget", str(round(used / 0.90)))
    assert red["budget"]["summary_point"] == int(red["budget"]["budget"] * 0.85)
    assert red["meter"]["state"] == "red"
    # LocalPilot's thresholds: amber from 65%, red from 85%
    lp = measure_json(CLAUDE_SMALL, "--preset", "localpilot", "--budget", str(round(used / 0.70)))
    assert lp["meter"]["amber_percent"] == 65 and lp["meter"]["red_percent"] == 85
    assert lp["meter"]["state"] == "amber"
    normal = measure_json(CLAUDE_SMALL, "--budget", str(round(used / 0.70)))
    assert normal["meter"]["state"] == "normal"
    # a budget as a share of the window
    half = measure_json(CLAUDE_SMALL, "--budget", "50%")
    assert half["budget"]["budget"] == 100_000


def test_meter_thresholds_from_config(tmp_path, monkeypatch):
    used = measure_json(CLAUDE_SMALL)["used"]["tokens"]
    env = dict(os.environ, LOOKOUT_METER_AMBER="60", LOOKOUT_METER_RED="70")
    result = run_lookout("measure", "--json", "--budget", str(round(used / 0.65)), str(CLAUDE_SMALL), env=env)
    r = orjson.loads(result.stdout)
    assert (r["meter"]["amber_percent"], r["meter"]["red_percent"], r["meter"]["state"]) == (60, 70, "amber")


def test_duplicate_reads_and_reclaimable():
    r = measure_json(CLAUDE_SMALL)
    [dup] = r["duplicate_reads"]
    assert dup["path"] == "/w/a.py" and dup["reads"] == 2 and dup["calls"] == ["toolu_1", "toolu_2"]
    assert dup["tokens"] == 2 * hand("print(1)") and dup["reclaimable"] == hand("print(1)")
    assert r["reclaimable"]["tokens"] == hand("print(1)")
    [item] = r["reclaimable"]["items"]
    assert (item["kind"], item["call_id"], item["line"], item["target"]) == ("duplicate_read", "toolu_1", 4, "/w/a.py")


def test_largest_tool_results_named_by_tool_and_call():
    r = measure_json(CLAUDE_SMALL)
    assert [(x["tool"], x["call_id"], x["tokens"], x["line"]) for x in r["largest_tool_results"]] == [
        ("Read", "toolu_1", 4, 4), ("Read", "toolu_2", 4, 6)]


# --- setup from flags and discovered rules ------------------------------------------------------

def test_setup_from_files_and_discovered_rules(tmp_path):
    (tmp_path / "CLAUDE.md").write_text("Use tabs.")
    text = CLAUDE_SMALL.read_text().replace("/nonexistent/lookout-measure-fixture", str(tmp_path))
    session = tmp_path / "session.jsonl"
    session.write_text(text)
    r = measure_json(session)
    rules = part(r, "rules")
    assert rules["tokens"] == hand("Use tabs.") and rules["basis"] == "file"
    assert str(tmp_path / "CLAUDE.md") in rules["source"] and "discovered" in rules["source"]
    # what the rules take comes off the inferred remainder
    assert part(r, "inferred")["tokens"] == 1001 - hand("Use tabs.")
    assert part(measure_json(session, "--no-discover"), "rules")["tokens"] == 0
    system = tmp_path / "system.txt"
    system.write_text("You are helpful.")
    r = measure_json(session, "--system", str(system), "--no-discover")
    assert part(r, "system")["tokens"] == hand("You are helpful.") and part(r, "system")["basis"] == "file"
    assert part(r, "inferred")["label"] == "Tool definitions"
    assert part(r, "inferred")["tokens"] == 1001 - hand("You are helpful.")
    missing = run_lookout("measure", "--tools", str(tmp_path / "nope.json"), str(session))
    assert missing.returncode == 2 and b"nope.json" in missing.stderr and missing.stdout == b""


# --- images by the provider's formula -----------------------------------------------------------

def test_image_tokens_follow_the_provider_formula():
    # 100x60 PNG. OpenAI: fits one 512-px tile: 85 + 170 = 255. Anthropic: 100*60/750 = 8.
    r = measure_json(OPENAI_IMAGE)
    assert r["model"]["image_provider"] == "openai"
    assert part(r, "images")["tokens"] == 255
    assert part(r, "system")["tokens"] == hand("You are helpful.") and part(r, "system")["basis"] == "estimated"
    assert part(r, "messages")["tokens"] == hand("hello world")
    assert part(r, "replies")["tokens"] == hand("yes")
    assert r["total"]["tokens"] == 255 + 4 + 2 + 1
    claude = measure_json(OPENAI_IMAGE, "--model", "claude-sonnet-4-5")
    assert claude["model"]["image_provider"] == "anthropic" and claude["model"]["source"] == "flag"
    assert part(claude, "images")["tokens"] == 8
    # no usage recorded: the figure is our estimate
    assert r["used"]["basis"] == "estimated" and r["used"]["tokens"] == 262 and r["last_response"] is None


def test_estimate_mode_never_loads_the_tokenizer(tmp_path):
    script = (
        "from lookout_cli.options import Run\n"
        "from lookout_cli.meter import analysis as meter\n"
        "from lookout_cli.tokens import tokenizer as tokens\n"
        f"view = Run('measure', file={str(CLAUDE_SMALL)!r}).load().view()\n"
        "m = meter.measure(view, meter.Settings(estimate=True))\n"
        "print(m.counting, tokens.is_loaded('o200k_base'), m.total > 1001)\n"
    )
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["estimate", "False", "True"], out.stderr
    report = measure_json(CLAUDE_SMALL, "--estimate")
    assert report["model"]["counting"] == "estimate"
    assert report["last_response"]["prompt"] == 1047  # provider figures do not depend on counting


# --- the real transcripts -----------------------------------------------------------------------

def _main_chain_usages(path: Path) -> list[dict]:
    """Per distinct main-chain message id, the last line's usage (worked out from the raw file)."""
    by_id: dict[str, dict] = {}
    for line in path.read_bytes().splitlines():
        obj = json.loads(line)
        message = obj.get("message") or {}
        if obj.get("type") != "assistant" or obj.get("isSidechain") or "usage" not in message:
            continue
        by_id.pop(message["id"], None)
        by_id[message["id"]] = message["usage"]
    return list(by_id.values())


def test_real_claude_code_exact_figure_and_sidechains():
    if not CCVIEWER.exists():
        pytest.skip("shared transcripts are not here")
    r = measure_json(CCVIEWER)
    usages = _main_chain_usages(CCVIEWER)
    last = usages[-1]
    prompt = last["input_tokens"] + last["cache_creation_input_tokens"] + last["cache_read_input_tokens"]
    assert r["last_response"]["prompt"] == prompt
    assert r["last_response"]["output"] == last["output_tokens"]
    assert r["used"]["provider"] == prompt + last["output_tokens"]
    # each response once, though most span several lines
    lines_with_usage = sum(1 for line in CCVIEWER.read_bytes().splitlines()
                           if (o := json.loads(line)).get("type") == "assistant" and not o.get("isSidechain"))
    assert r["cache"]["requests"] == len(usages) < lines_with_usage
    assert r["cache"]["input"] == sum(u["input_tokens"] for u in usages)
    assert r["cache"]["cache_read"] == sum(u["cache_read_input_tokens"] for u in usages)
    assert r["cache"]["cache_write"] == sum(u["cache_creation_input_tokens"] for u in usages)
    # sidechain (subagent) usage is in the file but not in the figures
    side = [json.loads(l)["message"]["usage"] for l in CCVIEWER.read_bytes().splitlines()
            if json.loads(l).get("isSidechain") and json.loads(l).get("type") == "assistant"]
    assert side and sum(u["input_tokens"] for u in side) > 0
    assert r["model"]["name"] == "claude-sonnet-4-20250514" and r["model"]["source"] == "transcript"
    assert r["budget"]["window"] == 200_000
    assert sum(p["tokens"] for p in r["parts"]) == r["total"]["tokens"]


def test_real_codex_context_and_window():
    if not ROLLOUT.exists():
        pytest.skip("shared transcripts are not here")
    r = measure_json(ROLLOUT)
    last_info = None
    for line in ROLLOUT.read_bytes().splitlines():
        payload = json.loads(line).get("payload") or {}
        if payload.get("type") == "token_count" and payload.get("info"):
            last_info = payload["info"]
    total = last_info["last_token_usage"]["total_tokens"]
    assert r["used"]["provider"] == total
    assert r["last_response"]["prompt"] + r["last_response"]["output"] == total
    assert r["budget"]["window"] == last_info["model_context_window"] and r["budget"]["window_source"] == "transcript"
    assert r["cache"]["input"] + r["cache"]["cache_read"] == last_info["total_token_usage"]["input_tokens"]
    assert r["cache"]["output"] == last_info["total_token_usage"]["output_tokens"]
    # the five largest tool results are the tool's own calls, largest first
    calls = {}
    for line in ROLLOUT.read_bytes().splitlines():
        payload = json.loads(line).get("payload") or {}
        if payload.get("type") == "function_call":
            calls[payload["call_id"]] = payload["name"]
    top = r["largest_tool_results"]
    assert len(top) == 5
    assert all(calls[x["call_id"]] == x["tool"] for x in top)
    tokens = [x["tokens"] for x in top]
    assert tokens == sorted(tokens, reverse=True)
    shell = next(c for c in part(r, "tool_results")["children"] if c["label"] == "shell")
    assert tokens[0] <= shell["tokens"] and shell["items"] == sum(1 for v in calls.values() if v == "shell")
    assert sum(c["tokens"] for c in part(r, "tool_results")["children"]) == part(r, "tool_results")["tokens"]


def test_recorded_compactions_before_and_after():
    path = DATA / "claude-code" / "compactions.jsonl"
    r = measure_json(path)
    rows = r["compactions"]
    assert len(rows) == 2
    raw = [json.loads(l) for l in path.read_bytes().splitlines() if l.strip()]
    boundaries = [o for o in raw if o.get("subtype") == "compact_boundary"]
    assert [row["before"] for row in rows] == [b["compactMetadata"]["preTokens"] for b in boundaries]
    for row, b in zip(rows, boundaries):
        if "postTokens" in b["compactMetadata"]:
            assert row["after"] == b["compactMetadata"]["postTokens"] and row["after_basis"] == "recorded"
        else:
            assert row["after_basis"] == "next response"


@pytest.mark.parametrize("order", ["file", "relinked"])
def test_a_compaction_without_a_recorded_after_takes_the_next_response(order):
    """The first response after each compaction gives its "after", found by halving when the
    usages run in file order (a long session: hundreds of compactions, 100k responses) and by
    looking through them when a relink put one out of order."""
    import random

    from lookout_cli.core.jsonl import Record
    from lookout_cli.formats.view import Compaction, Usage, View
    from lookout_cli.meter.analysis import compactions

    rng = random.Random(7)
    lines = sorted(rng.sample(range(1, 5000), 400))
    if order == "relinked":
        lines[100], lines[300] = lines[300], lines[100]
    usages = [Usage(Record(n, b"{}\n"), input=n) for n in lines]
    marks = sorted(rng.sample(range(1, 5200), 60))
    view = View("claude-code", usages=usages, compactions=[Compaction(Record(n, b"{}\n")) for n in marks])
    rows = compactions(view)
    for row, line in zip(rows, marks):
        later = [u for u in usages if u.record.lineno > line]
        assert (row.after, row.after_basis) == ((later[0].prompt, "next response") if later else (None, None))


def test_compaction_after_the_last_response_makes_the_figure_an_estimate():
    # Codex's schema-coverage fixture ends with compacted records after its only token_count
    path = SHARED_TRANSCRIPTS / "codex" / "agentsessions-codex-small-schema-coverage.jsonl"
    if not path.exists():
        pytest.skip("shared transcripts are not here")
    r = measure_json(path)
    assert r["used"]["basis"] == "estimated" and r["used"]["provider"] is None
    assert "compacted" in r["used"]["note"]
    assert r["used"]["tokens"] == r["total"]["tokens"]


# --- JSON report schema -------------------------------------------------------------------------

SCHEMA = {
    "schema": str, "command": str, "format": str, "model": dict, "budget": dict, "used": dict, "meter": dict,
    "parts": list, "total": dict, "two_largest": list, "largest_tool_results": list, "calibration": dict,
    "cache": dict, "cost": dict, "compactions": list, "duplicate_reads": list, "reclaimable": dict,
    "series": list, "notes": list,
}
INT, NUM, OPT_INT, OPT_NUM = int, (int, float), (int, type(None)), (int, float, type(None))
FIELDS = {
    "budget": {"window": INT, "budget": INT, "reserve": INT, "summary_point": INT, "compaction_due_at": INT,
               "summary_point_percent": NUM, "due": bool, "window_source": str, "budget_source": str},
    "used": {"tokens": INT, "percent": NUM, "basis": str, "provider": OPT_INT, "pending": INT},
    "meter": {"state": str, "amber_percent": NUM, "red_percent": NUM, "hidden_below_percent": NUM},
    "total": {"tokens": INT, "basis": str},
    "cache": {"requests": INT, "read_share": OPT_NUM, "input": INT, "cache_write": INT, "cache_write_1h": INT,
              "cache_read": INT, "output": INT, "total": INT, "basis": str},
    "cost": {"usd": OPT_NUM, "input": NUM, "cache_write": NUM, "cache_read": NUM, "output": NUM, "priced": INT,
             "unpriced": INT, "models": list, "basis": str},
    "calibration": {"ratio": OPT_NUM, "basis": str},
    "model": {"name": (str, type(None)), "known": bool, "source": str, "encoding": str, "counting": str},
}
PART = {"group": str, "key": str, "label": str, "tokens": INT, "share": NUM, "items": INT, "basis": str, "children": list}


@pytest.mark.parametrize("path", real_transcripts() + [CLAUDE_SMALL, OPENAI_IMAGE],
                         ids=lambda p: p.name)
def test_json_schema_fields_and_types(path, tmp_path):
    report_file = tmp_path / "report.json"
    result = run_lookout("measure", "--json", "--report", str(report_file), str(path))
    assert result.returncode == 0, result.stderr.decode()
    r = orjson.loads(result.stdout)
    assert orjson.loads(report_file.read_bytes()) == r  # --report writes the same report
    for key, kind in SCHEMA.items():
        assert isinstance(r[key], kind), key
    assert r["schema"] == "lookout.measure/1" and r["command"] == "measure"
    for group, fields in FIELDS.items():
        for key, kind in fields.items():
            assert isinstance(r[group][key], kind), f"{group}.{key}"
    assert r["used"]["basis"] in ("exact", "estimated", "exact+estimated")
    assert r["meter"]["state"] in ("hidden", "normal", "amber", "red")
    for p in r["parts"]:
        for key, kind in PART.items():
            assert isinstance(p[key], kind), f"part.{key}"
        assert p["group"] in ("setup", "conversation") and p["basis"] in ("estimated", "inferred", "file")
    assert sum(p["tokens"] for p in r["parts"]) == r["total"]["tokens"]
    assert r["last_response"] is None or r["last_response"]["basis"] == "exact"
    for x in r["largest_tool_results"]:
        assert isinstance(x["tool"], str) and isinstance(x["tokens"], int) and isinstance(x["line"], int)
    for s in r["series"]:
        assert s["context"] == s["prompt"] + s["output"]


def test_report_file_alongside_the_transcript(tmp_path):
    report_file = tmp_path / "r.json"
    data = CLAUDE_SMALL.read_bytes()
    result = run_lookout("measure", "-q", "--report", str(report_file), input=data)
    assert result.stdout == data and result.returncode == 0
    assert orjson.loads(report_file.read_bytes())["used"]["provider"] == 1050


# --- flags and errors ---------------------------------------------------------------------------

def test_report_only_and_json_are_exclusive():
    result = run_lookout("measure", "--report-only", "--json", str(CLAUDE_SMALL))
    assert result.returncode == 2 and b"cannot be used together" in result.stderr and result.stdout == b""


@pytest.mark.parametrize("args, words", [
    (["--now", "yesterday"], b"--now"),
    (["--budget", "lots"], b"lots"),
    (["--fail-at", "eighty"], b"eighty"),
])
def test_bad_flags_are_one_line_errors(args, words):
    result = run_lookout("measure", *args, str(CLAUDE_SMALL))
    assert result.returncode == 2 and words in result.stderr and b"Traceback" not in result.stderr
    assert result.stdout == b""


def test_report_only_goes_to_stdout_not_stderr():
    result = run_lookout("measure", "--report-only", str(CLAUDE_SMALL))
    assert result.returncode == 0 and result.stderr == b""
    text = result.stdout.decode()
    assert "1,051 of 200,000 tokens (exact+estimated)" in text
    assert "Input 2 · Cache write 0 · Cache read 1,045 = 1,047" in text
    assert "inferred" in text and "/w/a.py: read 2×" in text


def test_json_with_output_file_writes_the_transcript_there(tmp_path):
    out = tmp_path / "next.jsonl"
    result = run_lookout("measure", "--json", "-o", str(out), str(CLAUDE_SMALL))
    assert result.returncode == 0
    assert out.read_bytes() == CLAUDE_SMALL.read_bytes()
    assert orjson.loads(result.stdout)["used"]["provider"] == 1050


def test_a_count_past_64_bits_is_reported_in_json_too(tmp_path):
    """A transcript may record any number (a damaged or a made-up one): the report says it as
    JSON, on standard output and in --report's file, as the text report does, where orjson
    refuses an integer past 64 bits."""
    lines = (DATA / "codex" / "basic.jsonl").read_bytes().splitlines(keepends=True)
    at = next(n for n, line in enumerate(lines) if b'"last_token_usage":{' in line)
    obj = json.loads(lines[at])
    obj["payload"]["info"]["last_token_usage"]["input_tokens"] = 1 << 70
    lines[at] = json.dumps(obj).encode() + b"\n"
    path = tmp_path / "rollout.jsonl"
    path.write_bytes(b"".join(lines))
    report = tmp_path / "report.json"
    result = run_lookout("measure", "--json", "--no-discover", "--report", str(report), "-o", os.devnull, str(path))
    assert result.returncode == 0, result.stderr
    for data in (result.stdout, report.read_bytes()):
        assert any(point["prompt"] >= 1 << 70 for point in json.loads(data)["series"])


@pytest.mark.parametrize("mode", ["--json", "--report-only"])
def test_report_to_stderr_with_an_output_file_is_written_once(tmp_path, mode):
    """``-o FILE --report -``: standard error holds the one report (an empty one was written
    before it when the transcript went to its file)."""
    out = tmp_path / "next.jsonl"
    result = run_lookout("measure", mode, "--report", "-", "-o", str(out), str(CLAUDE_SMALL))
    assert result.returncode == 0 and out.read_bytes() == CLAUDE_SMALL.read_bytes()
    report = json.loads(result.stderr)  # (one document: a second would be "extra data")
    assert report["used"]["provider"] == 1050
    if mode == "--json":
        assert json.loads(result.stdout) == report
