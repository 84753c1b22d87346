"""``lookout report`` on a tree of real sessions: totals equal an independent sum and ccusage's,
incremental runs, grouping and filters, bad input listed and never fatal, the Python API."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from agent_runs import ccusage_bin
from conftest import REPO, SHARED_TRANSCRIPTS, run_lookout

sys.path.insert(0, str(REPO))  # bench/ is a top-level folder of the repository, not installed
from bench.tree import build
from lookout_cli.fleet.scan import scan

SESSIONS = 200
FIGURES = ("input", "cache_write", "cache_read", "output")


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """200 sessions, Claude Code and Codex, sliced from the real samples with fresh ids."""
    if not SHARED_TRANSCRIPTS.is_dir():
        pytest.skip(f"{SHARED_TRANSCRIPTS} is not here")
    root = tmp_path_factory.mktemp("tree")
    counts = build(root, SHARED_TRANSCRIPTS, SESSIONS, size=20_000, seed=7)
    assert counts["claude-code"] > 100 and counts["codex"] > 20 and counts["subagents"] > 5
    return root


def agents_env(root: Path, tmp_path: Path) -> dict:
    env = dict(os.environ, HOME=str(tmp_path / "home"), CLAUDE_CONFIG_DIR=str(root / "claude"),
               CODEX_HOME=str(root / "codex"), LOOKOUT_CACHE_DIR=str(tmp_path / "cache"), TZ="UTC")
    env.pop("NO_COLOR", None)
    return env


def report_json(*args: str, env: dict) -> tuple[dict, str]:
    result = run_lookout("report", "--json", *args, env=env)
    assert result.returncode == 0, result.stderr.decode()
    return json.loads(result.stdout), result.stderr.decode()


def independent_sum(root: Path) -> dict:
    """The providers' accounting, from orjson alone: a Claude Code response once per message
    id and request id (its last line's usage), sidechains and subagents included; a Codex
    request per token_count event (one written twice in a row counts once), its input less
    the cached part. A request that records no tokens at all (Codex opens a rollout with one)
    is not one."""
    claude: dict[tuple, dict] = {}
    totals = dict.fromkeys(FIGURES, 0)
    codex_requests = 0
    for path in sorted(root.rglob("*.jsonl")):
        previous = None
        for line in path.read_bytes().splitlines():
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if obj.get("type") == "assistant" and isinstance(obj["message"].get("usage"), dict):
                message = obj["message"]
                if message.get("model") == "<synthetic>" or obj.get("isApiErrorMessage"):
                    continue
                if any(message["usage"].get(k) for k in ("input_tokens", "cache_creation_input_tokens",
                                                          "cache_read_input_tokens", "output_tokens")):
                    claude[(message["id"], obj.get("requestId"))] = message["usage"]
            elif obj.get("type") == "event_msg" and obj["payload"].get("type") == "token_count":
                info = obj["payload"].get("info")
                if not info or (info.get("total_token_usage"), info.get("last_token_usage")) == previous:
                    continue
                previous = (info.get("total_token_usage"), info.get("last_token_usage"))
                last = info["last_token_usage"]
                if not any(last.get(k) for k in ("input_tokens", "cached_input_tokens", "output_tokens")):
                    continue
                codex_requests += 1
                totals["input"] += last["input_tokens"] - last.get("cached_input_tokens", 0)
                totals["cache_read"] += last.get("cached_input_tokens", 0)
                totals["output"] += last["output_tokens"]
    for usage in claude.values():
        totals["input"] += usage.get("input_tokens", 0)
        totals["cache_write"] += usage.get("cache_creation_input_tokens", 0)
        totals["cache_read"] += usage.get("cache_read_input_tokens", 0)
        totals["output"] += usage.get("output_tokens", 0)
    totals["requests"] = len(claude) + codex_requests
    return totals


def test_totals_equal_an_independent_sum_over_the_agents_folders(tree, tmp_path):
    report, err = report_json(env=agents_env(tree, tmp_path))  # no PATH: the agents' own folders
    expected = independent_sum(tree)
    assert expected["requests"] > 500
    assert {k: report["totals"][k] for k in expected} == expected
    assert report["schema"] == "lookout.report/1"
    assert report["skipped"] == []
    # a subagent's file counts in its session: one line a session, not a file
    sessions = {p.stem for p in tree.rglob("*.jsonl") if p.parent.name != "subagents"}
    codex = {p for p in tree.rglob("rollout-*.jsonl")}
    assert len(report["rows"]) == len(sessions) == SESSIONS
    assert sum(r["requests"] for r in report["rows"]) == expected["requests"]
    assert f"{SESSIONS + len(list(tree.rglob('agent-*.jsonl')))} file(s)" in err
    assert {r["format"] for r in report["rows"]} == {"claude-code", "codex"} and len(codex) > 0


def test_totals_equal_ccusages_on_the_same_tree(tree, tmp_path):
    exe = ccusage_bin()  # skips when .ci/agents has not installed it
    env = agents_env(tree, tmp_path)
    theirs = dict.fromkeys(FIGURES, 0)
    cost = 0.0
    sessions = {}
    for agent in ("claude", "codex"):
        out = subprocess.run([str(exe), agent, "session", "--json", "--offline"], capture_output=True, env=env,
                             timeout=120, check=False)
        if out.returncode != 0 and b"native binary" in out.stderr:
            pytest.skip(f"ccusage cannot run here: {out.stderr.decode().strip()}")
        assert out.returncode == 0, out.stderr.decode()
        totals = json.loads(out.stdout)["totals"]
        theirs["input"] += totals["inputTokens"]
        theirs["cache_write"] += totals["cacheCreationTokens"]
        theirs["cache_read"] += totals["cacheReadTokens"]
        theirs["output"] += totals["outputTokens"]
        cost += totals.get("totalCost", totals.get("costUSD", 0.0))
        if agent == "claude":  # a session with its subagents' files, as ccusage groups them
            sessions = {s["sessionId"]: (s["inputTokens"], s["cacheCreationTokens"], s["cacheReadTokens"],
                                         s["outputTokens"]) for s in json.loads(out.stdout)["sessions"]}
    report, _ = report_json(env=env)
    ours = {r["session"]: tuple(r[k] for k in FIGURES) for r in report["rows"] if r["format"] == "claude-code"}
    assert ours == sessions and len(sessions) > 100
    assert {k: report["totals"][k] for k in FIGURES} == theirs
    assert report["totals"]["cost_usd"] == pytest.approx(cost, rel=1e-4)  # the same list prices


def test_an_unchanged_file_is_not_read_again_and_a_changed_one_is(tree, tmp_path):
    env = agents_env(tree, tmp_path)
    grown = tmp_path / "copy"
    shutil.copytree(tree, grown)
    first, err = report_json(str(grown), env=env)
    assert ", 0 unchanged" in err
    again, err = report_json(str(grown), env=env)
    assert ", 0 read," in err and again["totals"] == first["totals"]
    target = min(grown.rglob("rollout-*.jsonl"))
    last = next(line for line in reversed(target.read_bytes().splitlines())
                if b'"token_count"' in line and b'"last_token_usage"' in line)
    event = orjson.loads(last)
    for figures in ("last_token_usage", "total_token_usage"):  # another request, not the same one again
        event["payload"]["info"][figures]["output_tokens"] += 1000
    with target.open("ab") as handle:
        handle.write(orjson.dumps(event) + b"\n")
    report, err = report_json(str(grown), env=env)
    assert ", 1 read," in err
    assert report["totals"]["requests"] == first["totals"]["requests"] + 1
    assert report["totals"]["output"] == first["totals"]["output"] + event["payload"]["info"]["last_token_usage"][
        "output_tokens"]


def test_groups_sum_to_the_totals_and_filters_keep_their_part(tree, tmp_path):
    env = agents_env(tree, tmp_path)
    whole, _ = report_json(str(tree), env=env)
    for by in ("day", "project", "model"):
        report, _ = report_json(str(tree), "--by", by, env=env)
        for key in ("requests", *FIGURES, "compactions", "reclaimable_tokens"):
            assert sum(r[key] for r in report["rows"]) == whole["totals"][key], (by, key)
        assert report["totals"]["cost_usd"] == pytest.approx(whole["totals"]["cost_usd"])
    days, _ = report_json(str(tree), "--by", "day", env=env)
    middle = days["rows"][len(days["rows"]) // 2]["day"]
    since, _ = report_json(str(tree), "--by", "day", "--since", middle, env=env)
    until, _ = report_json(str(tree), "--by", "day", "--until", middle.replace("-", ""), env=env)
    assert since["rows"][0]["day"] == middle and until["rows"][-1]["day"] == middle
    on_day = next(r for r in days["rows"] if r["day"] == middle)
    assert since["totals"]["requests"] + until["totals"]["requests"] == whole["totals"]["requests"] + on_day["requests"]
    project, _ = report_json(str(tree), "--project", "CHATBOT", env=env)  # the Codex sample's folder, any case
    assert project["rows"] and all("chatbot" in r["project"] for r in project["rows"])
    assert all(r["format"] == "codex" for r in project["rows"])


def test_csv_and_table_carry_the_same_figures(tree, tmp_path):
    env = agents_env(tree, tmp_path)
    report, _ = report_json(str(tree), "--by", "model", env=env)
    out = run_lookout("report", "--csv", "--by", "model", str(tree), env=env)
    assert out.returncode == 0
    rows = list(csv.DictReader(io.StringIO(out.stdout.decode())))
    assert rows[-1]["model"] == "total" and int(rows[-1]["requests"]) == report["totals"]["requests"]
    assert [r["model"] for r in rows[:-1]] == [r["model"] for r in report["rows"]]
    assert int(rows[0]["cache_read"]) == report["rows"][0]["cache_read"]
    table = run_lookout("report", "--by", "model", str(tree), env=env)
    lines = table.stdout.decode().splitlines()
    assert lines[0].split()[:3] == ["Model", "Req", "Input"] and "\x1b[" not in table.stdout.decode()
    total = next(line for line in lines if line.startswith("total"))
    assert total.split()[1] == str(report["totals"]["requests"])
    # sorted by cost, the dearest first
    costs = [r["cost_usd"] or 0 for r in report["rows"]]
    assert costs == sorted(costs, reverse=True)


def test_bad_input_is_listed_as_skipped_and_never_stops_the_report(tmp_path):
    folder = tmp_path / "mixed"
    folder.mkdir()
    real = SHARED_TRANSCRIPTS / "claude-code" / "ccviewer-fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
    if not real.exists():
        pytest.skip(f"{real} is not here")
    lines = real.read_bytes().splitlines(keepends=True)
    usage_at = next(i for i, line in enumerate(lines) if b'"usage"' in line)
    broken = lines[:usage_at] + [lines[usage_at][:-40] + b"\n"] + lines[usage_at + 1:]  # cut short
    (folder / "broken.jsonl").write_bytes(b"".join(broken))
    shutil.copy(SHARED_TRANSCRIPTS / "gemini-cli" / "agentsessions-gemini-jsonl_v040.jsonl", folder / "gemini.jsonl")
    (folder / "empty.jsonl").write_bytes(b"")
    (folder / "prose.jsonl").write_bytes(b"not a transcript\nat all\n")
    env = dict(os.environ, LOOKOUT_CACHE_DIR=str(tmp_path / "cache"))
    report, _ = report_json(str(folder), env=env)
    reasons = {Path(s["path"]).name: (s["line"], s["reason"]) for s in report["skipped"]}
    assert reasons["broken.jsonl"] == (usage_at + 1, "not JSON")
    assert "gemini-cli" in reasons["gemini.jsonl"][1]
    assert reasons["empty.jsonl"][1] == "empty"
    assert "no known transcript format" in reasons["prose.jsonl"][1]
    whole = scan(real)
    assert report["totals"]["requests"] >= len(whole["requests"]) - 1 > 100  # the rest still counts
    table = run_lookout("report", str(folder), env=env)
    assert table.returncode == 0 and f"broken.jsonl:{usage_at + 1}: not JSON" in table.stdout.decode()
    missing = run_lookout("report", str(tmp_path / "nowhere"), env=env)
    assert missing.returncode == 2 and missing.stderr.decode().count("\n") == 1
    assert "nowhere: no such file or folder" in missing.stderr.decode()
    both = run_lookout("report", "--json", "--csv", str(folder), env=env)
    assert both.returncode == 2


def test_scan_of_bytes_is_the_scan_of_the_file():
    paths = sorted(SHARED_TRANSCRIPTS.rglob("*.jsonl"))
    if not paths:
        pytest.skip(f"{SHARED_TRANSCRIPTS} is not here")
    for path in paths:
        assert scan(path.read_bytes(), path=str(path)) == scan(path), path.name


def _response(template: dict, n: int, prompt: int, at: str) -> bytes:
    line = json.loads(json.dumps(template))
    line["message"]["id"] = f"msg_test{n:04d}"
    line["requestId"] = f"req_test{n:04d}"
    line["uuid"] = f"00000000-0000-4000-8000-{n:012d}"
    line["isSidechain"] = False
    line["timestamp"] = at
    line["message"]["usage"] = {"input_tokens": 10, "cache_creation_input_tokens": 0,
                                "cache_read_input_tokens": prompt - 10, "output_tokens": 100}
    return orjson.dumps(line) + b"\n"


def test_peak_compactions_and_time_amber_and_red(tmp_path):
    """A Claude Code session on claude-sonnet-4 (200k window, summary point 167k = 83.5%):
    requests at 50%, 80% (amber) and 90% (red) a minute apart, a compaction, then 20%."""
    real = SHARED_TRANSCRIPTS / "claude-code" / "ccviewer-fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
    if not real.exists():
        pytest.skip(f"{real} is not here")
    template = next(orjson.loads(line) for line in real.read_bytes().splitlines() if b'"usage"' in line)
    assert template["message"]["model"] == "claude-sonnet-4-20250514"
    boundary = {"type": "system", "subtype": "compact_boundary", "uuid": "b1", "parentUuid": None,
                "timestamp": "2026-05-01T10:03:30.000Z", "sessionId": "s",
                "compactMetadata": {"trigger": "auto", "preTokens": 180000}}
    data = (_response(template, 1, 100_000, "2026-05-01T10:00:00.000Z")
            + _response(template, 2, 160_000, "2026-05-01T10:01:00.000Z")
            + _response(template, 3, 180_000, "2026-05-01T10:02:00.000Z")
            + orjson.dumps(boundary) + b"\n"
            + _response(template, 4, 40_000, "2026-05-01T10:04:00.000Z"))
    path = tmp_path / "session.jsonl"
    path.write_bytes(data)
    row = scan(path)
    assert row["peak"][:3] == [90.0, 180_000, "2026-05-01T10:02:00.000Z"]
    assert row["compactions"] == 1
    assert row["amber_s"] == 60.0 and row["red_s"] == 120.0  # red from 10:02 to the next request
    env = dict(os.environ, LOOKOUT_CACHE_DIR=str(tmp_path / "cache"), LOOKOUT_METER_RED="95")
    report, _ = report_json(str(path), env=env)
    assert report["totals"]["amber_seconds"] == 180.0 and report["totals"]["red_seconds"] == 0.0


def test_jobs_read_in_worker_processes_give_the_same_report(tree, tmp_path):
    env = agents_env(tree, tmp_path)
    one, _ = report_json("--no-cache", str(tree), env=env)
    two, err = report_json("--no-cache", "--jobs", "2", str(tree), env=env)
    assert two == one and f"{len(list(tree.rglob('*.jsonl')))} read" in err


def test_a_large_file_read_in_chunks_gives_the_same_row(monkeypatch):
    from lookout_cli.fleet import scan as scan_module

    paths = sorted(SHARED_TRANSCRIPTS.rglob("*.jsonl"))
    if not paths:
        pytest.skip(f"{SHARED_TRANSCRIPTS} is not here")
    whole = [scan(path) for path in paths]
    monkeypatch.setattr(scan_module, "WHOLE", 0)  # every file "large": read 4 KiB at a time
    monkeypatch.setattr(scan_module, "CHUNK", 4096)
    assert [scan(path) for path in paths] == whole


def test_the_agents_folders_follow_their_variables_as_ccusage_reads_them(tmp_path):
    from lookout_cli.fleet.index import agent_folders

    home, one, two, codex = (tmp_path / n for n in ("home", "one", "two", "codex"))
    for folder in (home / ".claude" / "projects", home / ".codex" / "sessions", one / "projects",
                   two / "projects", codex / "sessions"):
        folder.mkdir(parents=True)
    assert agent_folders({"HOME": str(home)}) == [home / ".claude" / "projects", home / ".codex" / "sessions"]
    assert agent_folders({"HOME": str(home), "CLAUDE_CONFIG_DIR": f"{one}, {two},{tmp_path / 'none'}",
                          "CODEX_HOME": str(codex)}) == [one / "projects", two / "projects", codex / "sessions"]


@pytest.mark.parametrize(("name", "compactions"), [
    ("claude-code/agentsessions-claude-small-schema-coverage.jsonl", 2),  # two compact_boundary lines
    ("claude-code/claudecodelog-dag_compact_after_rewind.jsonl", 1),
    ("codex/agentsessions-codex-small-schema-coverage.jsonl", 6),  # six compacted records
])
def test_compactions_as_the_samples_record_them(name, compactions):
    path = SHARED_TRANSCRIPTS / name
    if not path.exists():
        pytest.skip(f"{path} is not here")
    assert scan(path)["compactions"] == compactions


def test_a_response_in_two_files_counts_once_read_or_reused(tmp_path):
    """A resumed Claude Code session starts a new file with the old responses copied in: each
    counts once (the file whose first line is oldest keeps it), on the first run and when the
    rows are reused."""
    real = SHARED_TRANSCRIPTS / "claude-code" / "ccviewer-fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
    if not real.exists():
        pytest.skip(f"{real} is not here")
    folder = tmp_path / "projects" / "-w-app"
    folder.mkdir(parents=True)
    shutil.copy(real, folder / "first.jsonl")
    lines = real.read_bytes().splitlines(keepends=True)
    (folder / "resumed.jsonl").write_bytes(b"".join(lines[len(lines) // 2:]))  # the second half again
    env = dict(os.environ, LOOKOUT_CACHE_DIR=str(tmp_path / "cache"))
    alone, _ = report_json(str(real), "--no-cache", env=env)
    for by in ("session", "day", "session"):  # read, then reused (packed) by day and by session
        report, _ = report_json(str(tmp_path), "--by", by, env=env)
        assert {k: report["totals"][k] for k in ("requests", *FIGURES)} == \
            {k: alone["totals"][k] for k in ("requests", *FIGURES)}
    by_session = {r["session"]: r["requests"] for r in report["rows"]}
    assert by_session == {"first": alone["totals"]["requests"], "resumed": 0}
