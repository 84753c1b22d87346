"""``compact`` on the sessions agents really write: one request, then dozens of tool calls.

The split lands inside the turn on a step boundary (the request word for word, a summary of the
steps since it, the most recent steps with their output), in every writable format and for
automatic and forced runs; an automatic compaction lands at the target, far under the trigger,
so that a turn that keeps going does not compact again every few calls; what cannot fit the
window is refused; ``measure`` of the output says what ``compact`` said; ``restore`` gives the
input back byte for byte.
"""

from __future__ import annotations

import json
import os
import random
import re

import pytest
from compact_turns import claude_continue, claude_turn, codex_continue, codex_turn
from conftest import real_transcripts
from test_compact_cli import lookout
from test_compact_fixtures import (
    FORMATS,
    WRITERS,
    Call,
    Step,
    dump,
    output_text,
    parse,
    script,
)

from lookout_cli.compaction import engine as compactor
from lookout_cli.compaction import plan
from lookout_cli.core.saved import SavedStore
from lookout_cli.formats.view import TOOL_CALL, TOOL_RESULT

PRESERVE = 8_000  # compaction.preserve_recent_tokens' default


def measured(data: bytes, *extra: str) -> dict:
    code, out, err = lookout("measure", "--json", *extra, "-", data=data)
    assert code == 0, err
    return json.loads(out)


def conversation(report: dict) -> int:
    return sum(p["tokens"] for p in report["parts"] if p["group"] == "conversation")


def compacted(data: bytes, tmp_path, *args: str, env: dict | None = None) -> tuple[int, bytes, dict, str]:
    report = tmp_path / f"r{len(list(tmp_path.glob('r*.json')))}.json"
    code, out, err = lookout("compact", *args, "--report", str(report), "-", data=data, env=env)
    return code, out, json.loads(report.read_text()) if report.exists() else {}, err


def check_result(before: bytes, after: bytes, report: dict, tmp_path, *measure_args: str) -> None:
    """Pairs intact, the unread last result byte for byte, measure within 2% of compact, restore
    byte for byte."""
    view = parse(after).view()
    assert view.orphans() == []
    old = parse(before).view().items
    if old[-1].kind == TOOL_RESULT:  # output the agent has not read: kept as it was, last
        assert view.items[-1].kind == TOOL_RESULT and view.items[-1].text == old[-1].text
        assert view.items[-1].call_id == old[-1].call_id
    said = report["tokens"]["after"]
    got = measured(after, *measure_args)["used"]["tokens"]
    assert abs(got - said) <= 0.02 * said, (said, got)
    code, out, err = lookout("restore", "-", data=after)
    assert code == 0 and out == before, err


def single_turn(fmt: str, steps: int = 40, unread: bool = True) -> bytes:
    """One request and ``steps`` steps, one of them two parallel calls, in ``fmt``."""
    turns = script(turns=1, steps=steps, output_chars=2_000, last_unread=unread)
    rng = random.Random(5)
    par = [Call(f"call_p{i}", "read", f"src/par_{i}.py", None, output_text(rng, 1_500, f"src/par_{i}.py"))
           for i in range(2)]
    turns[0].steps.insert(steps // 2, Step("Reading two files at once.", par))
    return WRITERS[fmt](turns)


# --- the split ------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS)
def test_the_split_lands_on_a_step_boundary_inside_the_turn(fmt):
    view = parse(single_turn(fmt)).view()
    items = view.items
    from lookout_cli.tokens.tokenizer import count

    tokens = [count(i.text) for i in items]
    split = plan.plan_split(items, tokens, plan.Settings(preserve_recent_tokens=3_000))
    prompt = plan.prompts(items)[-1]
    assert split.request and split.request[0] == plan.message_start(items, prompt)  # the request stays
    c = split.keep_from
    assert c in plan.step_starts(items, prompt) and sum(tokens[c:]) <= 3_000
    # never between a call and its result, never inside the parallel group
    before = {i.call_id for i in items[:c] if i.kind == TOOL_CALL}
    assert before == {i.call_id for i in items[:c] if i.kind == TOOL_RESULT}
    assert {i.call_id for i in items[c:] if i.kind == TOOL_CALL} == {i.call_id for i in items[c:]
                                                                      if i.kind == TOOL_RESULT}
    for cut in plan.step_starts(items, prompt):  # no boundary between a call and its result anywhere
        assert {i.call_id for i in items[:cut] if i.kind == TOOL_CALL} == \
            {i.call_id for i in items[:cut] if i.kind == TOOL_RESULT}
    if fmt != "codex":  # (its writer here puts each parallel call's output right after it)
        group = next(n for n, i in enumerate(items) if i.call_id == "call_p0" and i.kind == TOOL_CALL)
        assert not any(group < cut <= group + 3 for cut in plan.step_starts(items, prompt))
    # the steps fit as they are: nothing to split (a second run changes nothing)
    assert plan.inside_turn(items, tokens, prompt, sum(tokens)) is None


@pytest.mark.parametrize("fmt", FORMATS)
def test_force_on_a_single_long_turn_every_format(fmt, tmp_path):
    data = single_turn(fmt)
    before = measured(data)
    code, out, report, err = compacted(data, tmp_path, "--force")
    assert code == 0, err
    assert report["changed"] and report["inside_turn"], err
    after = measured(out)
    assert conversation(after) <= 0.4 * conversation(before), (conversation(before), conversation(after))
    items = parse(out).view().items
    request = next(i for i in parse(data).view().items if i.prompt)
    assert [i.text for i in items if i.prompt] == [request.text]  # the request, word for word, once
    kinds = [i.kind for i in items if i.kind != "setup"]
    assert kinds.index("summary") < kinds.index(TOOL_CALL)  # the summary, then the recent steps
    note = next(i.text for i in items if i.kind == "summary")
    goal = note.split("## Goal\n", 1)[1].split("\n", 1)[0]
    assert goal and goal.split()[:6] == request.text.split()[:6]  # the note says what the request is
    check_result(data, out, report, tmp_path)
    # a second run with the same settings changes nothing
    code, again, report2, err = compacted(out, tmp_path, "--force")
    assert code == 0 and again == out and not report2["changed"], err


@pytest.mark.parametrize("path", real_transcripts(), ids=lambda p: p.name)
def test_real_transcripts_force(path, tmp_path):
    """Every real transcript whose conversation holds more than twice preserve_recent_tokens
    keeps at most 40% of it; a smaller one says there is nothing to compact, and why."""
    data = path.read_bytes()
    before = measured(data)
    code, out, report, err = compacted(data, tmp_path, "--force")
    if before["format"] == "gemini-cli":
        assert code == 0 and out == data
        return
    assert code == 0, err
    if conversation(before) <= 2 * PRESERVE:
        assert not report["changed"] and "nothing" in report["reason"] and out == data, report["reason"]
        return
    assert report["changed"], report["reason"]
    assert conversation(measured(out)) <= 0.4 * conversation(before)
    check_result(data, out, report, tmp_path)


# --- automatic: the target -------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["claude-code", "codex"])
def test_auto_lands_at_the_target_and_a_turn_that_goes_on_compacts_at_most_once_more(fmt, tmp_path):
    """185k of a 200k window: the automatic run leaves at most half the window; the turn goes on
    for 60 calls with ``compact -i`` after every 4 and compacts at most once more."""
    path = tmp_path / "s.jsonl"
    (claude_turn if fmt == "claude-code" else codex_turn)(path, 185_000)
    data = path.read_bytes()
    assert measured(data)["used"]["tokens"] >= 180_000
    code, out, report, err = compacted(data, tmp_path)
    assert code == 0 and report["changed"], err
    assert report["tokens"]["after"] <= 100_000 and report["tokens"]["target"] == 80_000
    assert "target 40%" in err
    check_result(data, out, report, tmp_path)
    path.write_bytes(out)
    again, used = 0, report["tokens"]["after"]
    for _ in range(15):
        (claude_continue if fmt == "claude-code" else codex_continue)(path, 4, used)
        code, _, err = lookout("compact", "-i", "--report", str(tmp_path / "loop.json"), str(path))
        assert code == 0, err
        loop = json.loads((tmp_path / "loop.json").read_text())
        again += loop["changed"]
        used = loop["tokens"]["after"]
    assert again <= 1
    assert used < 180_000


def test_target_percent_setting(tmp_path):
    path = tmp_path / "s.jsonl"
    codex_turn(path, 185_000)
    code, _, report, err = compacted(path.read_bytes(), tmp_path, env={"LOOKOUT_COMPACTION_TARGET_PERCENT": "10"})
    assert code == 0 and report["tokens"]["target"] == 20_000 and report["tokens"]["after"] <= 20_000, err
    code, _, _, err = compacted(path.read_bytes(), tmp_path, env={"LOOKOUT_COMPACTION_TARGET_PERCENT": "150"})
    assert code == 2 and "compaction.target_percent" in err


def test_auto_summarizes_when_clearing_alone_stays_near_the_trigger():
    """The summary is not skipped because pruning brought the chat just under the trigger: an
    automatic run summarizes while the chat is over the target."""
    transcript = parse(WRITERS["codex"](script(turns=12, steps=3, output_chars=4_000)))
    result = compactor.compact_transcript(transcript, compactor.Options(budget="40k"),
                                          SavedStore(os.environ["LOOKOUT_SAVE_DIR"]))
    assert result.changed and any(s.stage == "summarize" and s.ran for s in result.stages)
    assert result.before > result.due_at and result.after <= 0.5 * result.budget


# --- what cannot fit --------------------------------------------------------------------------

def test_a_request_over_the_window_is_refused(tmp_path):
    """A request of about 240k tokens for a 200k window: nothing over the window is written, with
    exit 0 or otherwise; one line says by how much."""
    rng = random.Random(9)
    turns = script(turns=1, steps=6, output_chars=2_000)
    turns[0].prompt = "Please apply this: " + " ".join(rng.choice(["alpha", "beta", "gamma", "delta"]) + str(i)
                                                       for i in range(80_000))
    data = WRITERS["anthropic"](turns)
    code, out, _, err = compacted(data, tmp_path, "--force", "--model", "claude-sonnet-4-5")
    assert code == 2 and out == data
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and re.search(r"context window exceeded by [\d,]+ tokens", lines[0]), lines
    # a goal smaller than what is left (--max-tokens) is not the window: reported, not refused
    small = WRITERS["anthropic"](script(turns=1, steps=30, output_chars=2_000))
    code, out, report, err = compacted(small, tmp_path, "--force", "--max-tokens", "1k")
    assert code == 0 and report["changed"] and report["still_over"], err


def test_on_failure_truncate_drops_older_steps_keeping_pairs(tmp_path):
    """No usable summary: the turn's oldest steps go, whole steps at a time, the request stays."""
    path = tmp_path / "s.jsonl"
    codex_turn(path, 60_000)
    data = path.read_bytes()
    failing = ("--force", "--summarizer", "command:false", "--max-tokens", "40k")
    code, out, _, err = compacted(data, tmp_path, *failing)
    assert code == 2 and out == data
    code, out, report, err = compacted(data, tmp_path, *failing, "--on-failure", "truncate")
    assert code == 0, err
    stage = next(s for s in report["stages"] if s["stage"] == "truncate")
    assert stage["ran"] and stage["items"][0]["inside_turn"], stage
    request = [i for i in parse(data).view().items if i.prompt]
    assert [i.text for i in parse(out).view().items if i.prompt] == [request[-1].text]
    check_result(data, out, report, tmp_path, "--budget", "40k")


def test_a_million_token_turn_never_leaves_over_the_window(tmp_path):
    path = tmp_path / "s.jsonl"
    claude_turn(path, 1_000_000)
    data = path.read_bytes()
    code, out, report, err = compacted(data, tmp_path)
    assert code == 0, err
    assert report["tokens"]["after"] <= 100_000
    check_result(data, out, report, tmp_path)


# --- measure agrees after a clear --------------------------------------------------------------

def test_measure_agrees_with_compact_after_clearing(tmp_path):
    """The provider's last count predates what prune cleared: measure calibrates it against the
    size the placeholders name, as compact does."""
    transcript = parse(WRITERS["codex"](script(turns=14, steps=3, output_chars=6_000)))
    data = dump(transcript)
    code, out, report, err = compacted(data, tmp_path, "--stage", "prune", "--max-tokens", "60k",
                                       env={"LOOKOUT_COMPACTION_PRUNE_PROTECT_TOKENS": "5000"})
    assert code == 0 and any(s["stage"] == "prune" and s["ran"] for s in report["stages"]), err
    said = report["tokens"]["after"]
    got = measured(out, "--budget", "60k")["used"]["tokens"]
    assert abs(got - said) <= 0.02 * said, (said, got)
