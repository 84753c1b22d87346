"""``memory tidy``: merges one subject, forgets task status, to-dos, passed dates and what a newer
memory contradicts, keeps decisions and measured results, and near the limit brings a scope to
about 180. Your own memories are left alone unless asked."""

from __future__ import annotations

import datetime as dt

import pytest
from test_memory_support import listed, make_data, notes, ok

from lookout_cli.memory.project import resolve_project
from lookout_cli.memory.store import TIDY_TARGET, Memory
from lookout_cli.memory.tidy import dates_in, notes_in, remembered_in, sentences, stale_reason


@pytest.fixture
def data(tmp_path, monkeypatch):
    return make_data(tmp_path, monkeypatch)

def learned(*texts: str) -> None:
    for text in texts:
        ok("save", "--by", "learned", text)


def forgotten_notes() -> list[str]:
    import json

    return [json.loads(x)["note"] for x in ok("forgotten", "--json").stdout.splitlines()]


def test_forgets_status_and_todos_keeps_decisions_and_measurements(data, monkeypatch):
    monkeypatch.setenv("LOOKOUT_NOW", "2026-05-10T12:00:00Z")
    learned(
        "TODO: rerun the flaky integration suite",
        "The migration is in progress",
        "We decided to use Postgres for the event store",
        "Cold start takes 4.2 s on the CI runner",
        "The API tests need Docker running",
    )
    result = ok("tidy")
    assert "forget" in result.stderr
    assert sorted(notes()) == sorted([
        "We decided to use Postgres for the event store",
        "Cold start takes 4.2 s on the CI runner",
        "The API tests need Docker running",
    ])
    assert set(forgotten_notes()) == {"TODO: rerun the flaky integration suite", "The migration is in progress"}


def test_rewrites_a_memory_that_also_holds_a_lasting_fact(data):
    learned("We chose SQLite for tests. Still need to port the fixtures.")
    ok("tidy")
    assert notes() == ["We chose SQLite for tests."]
    assert listed()[0]["edited_by"] == "lookout"
    assert forgotten_notes() == ["We chose SQLite for tests. Still need to port the fixtures."]


def test_passed_dates_go_future_runs_stay(data, monkeypatch):
    monkeypatch.setenv("LOOKOUT_NOW", "2026-05-10T12:00:00Z")
    learned(
        "Code freeze until 2026-04-30",
        "Release call on 12 May 2026",
        "Need to rerun the load test on 2026-05-10",
    )
    ok("tidy")
    assert sorted(notes()) == sorted(["Release call on 12 May 2026", "Need to rerun the load test on 2026-05-10"])
    assert forgotten_notes() == ["Code freeze until 2026-04-30"]


def test_forgets_what_a_newer_memory_contradicts(data):
    learned("Install dependencies with yarn install")
    learned("We moved off yarn to pnpm")
    learned("CI takes 12 minutes")
    learned("CI takes 8 minutes")
    ok("tidy")
    assert sorted(notes()) == sorted(["We moved off yarn to pnpm", "CI takes 8 minutes"])
    assert set(forgotten_notes()) == {"Install dependencies with yarn install", "CI takes 12 minutes"}


def test_merges_memories_about_one_subject(data, monkeypatch):
    monkeypatch.setenv("LOOKOUT_NOW", "2026-05-01T12:00:00Z")
    learned("The staging deploy needs the VPN")
    monkeypatch.setenv("LOOKOUT_NOW", "2026-05-03T12:00:00Z")
    learned("Staging deploy needs the corporate VPN")
    learned("Frontend uses React 18")
    ok("tidy")
    kept = {m["note"]: m for m in listed()}
    assert set(kept) == {"Staging deploy needs the corporate VPN", "Frontend uses React 18"}
    merged = kept["Staging deploy needs the corporate VPN"]
    assert merged["updated"].startswith("2026-05-03")  # the date of the newest it came from
    assert merged["created"].startswith("2026-05-01")
    assert "The staging deploy needs the VPN" in forgotten_notes()


def test_never_lumps_different_subjects(data):
    learned("The API tests need Docker running", "The API docs build with mkdocs", "Docker images go to GHCR")
    ok("tidy")
    assert len(notes()) == 3


def test_leaves_your_own_memories_alone(data):
    ok("save", "TODO: call the vendor")
    ok("tidy")
    assert notes() == ["TODO: call the vendor"]
    ok("tidy", "--include-mine")
    assert notes() == []


def test_near_the_limit_brings_the_scope_to_about_180(data):
    scope = resolve_project(None).scope
    subjects = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
    mems = []
    # 165 distinct subjects, and 30 memories that are 15 pairs about one subject each, said
    # differently enough that an ordinary tidy leaves them: 195 memories, within 10 of 200
    for i in range(165):
        mems.append(Memory(id="", note=f"Service {subjects[i % 10]}{i} listens on port {1000 + i}", author="learned"))
    for i in range(15):
        mems.append(Memory(id="", note=f"Worker queue q{i} retries failed jobs three times", author="learned"))
        mems.append(Memory(id="", note=f"Worker queue q{i} retries failed jobs five times, then pages the on-call engineer",
                           author="learned"))
    with scope.transaction() as txn:
        for mem in mems:
            txn.add(mem, check=False)
    assert scope.usage().memories == 195
    ok("tidy")
    assert scope.usage().memories == TIDY_TARGET
    # distinct subjects were never merged
    assert sum(1 for n in notes() if n.startswith("Service ")) == 165
    # away from the limit the same pairs stay as they are
    with scope.transaction() as txn:
        for mem_id in [m for m in txn.memories if m.startswith("service")][:100]:
            txn.forget(mem_id)
        for i in range(15, 20):
            txn.add(Memory(id="", note=f"Worker queue q{i} retries failed jobs three times", author="learned"))
            txn.add(Memory(id="", note=f"Worker queue q{i} retries failed jobs five times, then pages the on-call engineer",
                           author="learned"))
    before = scope.usage().memories
    ok("tidy")
    assert scope.usage().memories == before


def test_sentence_rules():
    today = dt.date(2026, 5, 10)
    assert stale_reason("WIP: porting the parser", today) == "task status or a to-do"
    assert stale_reason("p95 latency is 120 ms after the cache", today) is None
    assert stale_reason("Always run ruff before committing", today) is None
    assert stale_reason("Deadline was 2026-05-01", today) == "its dates have passed"
    assert dates_in("on May 3, 2026 and 2026-05-04 and 5 Jun 2026") == [
        dt.date(2026, 5, 4), dt.date(2026, 6, 5), dt.date(2026, 5, 3)]
    assert sentences("One. Two three! Then v1.2 stays") == ["One.", "Two three!", "Then v1.2 stays"]


def test_learning_rules():
    assert notes_in("# The API tests need Docker running") == [("here", "you", "The API tests need Docker running")]
    assert notes_in("#! I prefer small pull requests") == [("everywhere", "you", "I prefer small pull requests")]
    assert notes_in("#!no space works too") == [("everywhere", "you", "no space works too")]
    assert notes_in("## A heading") == []
    assert notes_in("#123 is broken") == []
    assert notes_in("# Plan\n\n1. do x\n2. do y") == []
    assert remembered_in("Please remember that the staging deploy needs the VPN. Now deploy.") == [
        "The staging deploy needs the VPN."]
    assert remembered_in("Fix the bug, and remember: tests need Docker") == ["Tests need Docker"]
    assert remembered_in("Remember to always squash merge") == ["Always squash merge"]
    assert remembered_in("Do you remember that bug?") == []
    assert remembered_in("I can't remember that command") == []
    assert remembered_in("remember when we used yarn") == []
    assert remembered_in("Remember to run the tests") == []


def test_learning_tidies_a_crowded_project_at_most_every_6_hours(data, monkeypatch, tmp_path):
    import io

    from test_memory_support import openai

    from lookout_cli.core.jsonl import read_records
    from lookout_cli.formats import Transcript, detect
    from lookout_cli.memory.tidy import learn_from_prompts

    monkeypatch.setenv("LOOKOUT_NOW", "2026-05-10T12:00:00Z")
    scope = resolve_project(None).scope
    with scope.transaction() as txn:
        for i in range(185):
            txn.add(Memory(id="", note=f"Service s{i} on port {2000 + i}", author="learned"), check=False)
        for i in range(5):
            txn.add(Memory(id="", note=f"TODO: rerun job {i}", author="learned"), check=False)

    def learn(prompts):
        records = list(read_records(io.BytesIO(openai(prompts))))
        view = Transcript(records, detect(records)).view()
        return learn_from_prompts(view, lambda kind: scope, source=None)

    result = learn(["# Deploys go through ArgoCD"])
    assert any(line.startswith("tidy: forget") for line in result.lines)
    assert scope.usage().memories == 186
    with scope.transaction() as txn:
        for i in range(5, 10):
            txn.add(Memory(id="", note=f"TODO: rerun job {i}", author="learned"), check=False)
    monkeypatch.setenv("LOOKOUT_NOW", "2026-05-10T17:00:00Z")
    assert not any(line.startswith("tidy:") for line in learn(["# Second note for now"]).lines)
    monkeypatch.setenv("LOOKOUT_NOW", "2026-05-10T18:00:01Z")
    assert any(line.startswith("tidy:") for line in learn(["# Third note for now"]).lines)
