"""Concurrency: many lookout processes at once on the saved-output store, the token cache and
memory lose nothing.

Every test starts real processes together (they wait on one start file, then race) and checks
afterwards: every saved file is whole, every manifest line is JSON, every output restores to
its input byte for byte, every memory is there exactly once, the token cache still counts
right. ``LOOKOUT_LONG_TESTS=1`` runs many more writers.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from strategies import Call, Conversation, Result, Step, Turn, png_base64, render
from test_reliability_crash import env_for, store_is_sound
from test_reliability_harness import LONG, environment, run_cli, tally, workdir

# Waits for the start file, then runs lookout (so every writer starts at the same moment).
GATE = r"""
import os, sys, time
while not os.path.exists(os.environ["START_FILE"]):
    time.sleep(0.002)
from lookout_cli.cli import main
main(sys.argv[1:])
"""


def race(commands: list[list[str]], env: dict, cwd: Path, start: Path) -> list[subprocess.CompletedProcess]:
    procs = [subprocess.Popen([sys.executable, "-c", GATE, *args], env={**env, "START_FILE": str(start)},
                              cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for args in commands]
    time.sleep(0.2)
    start.write_text("go")
    results = []
    for proc, args in zip(procs, commands):
        out, err = proc.communicate(timeout=600)
        results.append(subprocess.CompletedProcess(args, proc.returncode, out, err))
    tally("concurrent writers", len(commands))
    return results


def transcript(k: int, fmt: str | None = None) -> bytes:
    """Transcripts that share some images and outputs (the same saved file, written at once)
    and differ in others."""
    # large enough to be worth more tokens than a placeholder (clear-images keeps smaller ones)
    shared = png_base64(600, 600, (1, 2, 3))
    own = png_base64(600 + k % 20, 600, (k % 256, 0, 0))
    step = Step(None, "look", [Call("c1", "view_image", {}, Result(None, shared)),
                               Call("c2", "Read", {"path": "a"}, Result("shared output\n" * 200)),
                               Call("c3", "view_image", {}, Result(None, own))], [2, 0, 1])
    turns = [Turn(f"task {k}", own, [step], "seen"), Turn("next", shared, [], "ok")]
    conv = Conversation("claude-sonnet-4-5", "sys", turns, None, [], False, [0], False, True)
    return render(conv, fmt or ("anthropic", "claude-code", "openai", "codex")[k % 4])


def test_many_processes_share_the_saved_output_store(tmp_path):
    writers = 24 if LONG else 5
    env = env_for(tmp_path)
    inputs = []
    commands = []
    for k in range(writers):
        src = tmp_path / f"in{k}.jsonl"
        src.write_bytes(transcript(k))
        inputs.append(src)
        if k % 3 == 2:
            commands.append(["compact", "--stage", "clamp", "--max-tool-output-chars", "300", str(src),
                             "-o", str(tmp_path / f"out{k}.jsonl")])
        else:
            commands.append(["clear-images", "--budget", "1", "--keep-recent", "0", str(src),
                             "-o", str(tmp_path / f"out{k}.jsonl")])
    results = race(commands, env, tmp_path, tmp_path / "start")
    for done in results:
        assert done.returncode == 0, done.stderr.decode()
    store = tmp_path / "saved"
    store_is_sound(store)
    entries = [json.loads(line) for line in (store / "manifest.jsonl").read_bytes().splitlines()]
    changed = 0
    os.environ["LOOKOUT_SAVE_DIR"] = str(store)
    for k, src in enumerate(inputs):
        out = (tmp_path / f"out{k}.jsonl").read_bytes()
        changed += out != src.read_bytes()
        back = run_cli(["restore", "-q"], out)
        assert back.code == 0 and back.out == src.read_bytes(), f"writer {k} lost content"
    assert changed == writers
    assert len(entries) >= 2 * writers  # at least a content and a line per writer, none lost


def test_many_processes_save_memories_at_once(tmp_path):
    writers = 32 if LONG else 6
    env = env_for(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    notes = [f"Fact number {k}: the service on port {8000 + k} needs its own token file" for k in range(writers)]
    commands = []
    for k, note in enumerate(notes):
        scope = ["-E"] if k % 4 == 3 else ["-P", str(project)]
        commands.append(["memory", "save", "-q", *scope, "--details", f"Seen in run {k}.", note])
    results = race(commands, env, tmp_path, tmp_path / "start")
    for done in results:
        assert done.returncode == 0, done.stderr.decode()
    with environment(env), workdir(project):
        listed = run_cli(["memory", "list", "--all", "--json"])
    assert listed.code == 0, listed.err
    found = [json.loads(line)["note"] for line in listed.out.splitlines() if line.strip()]
    for note in notes:
        assert found.count(note) == 1, f"lost or doubled: {note}"


def test_memory_writers_and_transcript_filters_at_once(tmp_path):
    """``memory learn`` on several chats, ``memory save`` and ``memory inject`` in one scope at
    the same moment: every learned and saved note is there once; inject never fails."""
    writers = 12 if LONG else 2
    env = env_for(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    commands = []
    for k in range(writers):
        chat = tmp_path / f"chat{k}.jsonl"
        chat.write_bytes(json.dumps({"role": "user", "content": f"remember that build {k} uses the turbo flag"})
                         .encode() + b"\n" + json.dumps({"role": "assistant", "content": "Noted."}).encode() + b"\n")
        commands.append(["memory", "learn", "-q", str(chat), "-o", str(tmp_path / f"learned{k}.jsonl")])
        commands.append(["memory", "save", "-q", f"Service {k} restarts nightly at two"])
        commands.append(["memory", "inject", "-q", str(chat), "-o", str(tmp_path / f"injected{k}.jsonl")])
    results = race(commands, env, project, tmp_path / "start")
    for done in results:
        assert done.returncode == 0, done.stderr.decode()
    with environment(env), workdir(project):
        listed = run_cli(["memory", "list", "--json"])
    found = " | ".join(json.loads(line)["note"] for line in listed.out.splitlines() if line.strip()).lower()
    for k in range(writers):
        assert found.count(f"service {k} restarts nightly at two") == 1
        assert found.count(f"build {k} uses the turbo flag") == 1, found


def test_token_cache_under_concurrent_measures(tmp_path):
    """Several ``measure`` runs fill one token cache at once; the cache stays a sound sqlite
    file and later counts match a run without it. A damaged cache never fails a run."""
    writers = 8 if LONG else 3
    env = {**env_for(tmp_path), "LOOKOUT_CACHE_DIR": str(tmp_path / "cache")}
    commands = []
    for k in range(writers):
        src = tmp_path / f"in{k}.jsonl"
        src.write_bytes(transcript(k))
        commands.append(["measure", "--json", str(src)])
    results = race(commands, env, tmp_path, tmp_path / "start")
    reports = []
    for done in results:
        assert done.returncode == 0, done.stderr.decode()
        reports.append(json.loads(done.stdout)["total"])
    caches = list((tmp_path / "cache").rglob("*.sqlite3"))
    for cache in caches:
        with sqlite3.connect(cache) as db:
            assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    # the counts a warm cache serves equal the counts without it
    with environment(env):
        warm = run_cli(["measure", "--json", str(tmp_path / "in0.jsonl")])
        assert json.loads(warm.out)["total"] == reports[0]
        # a damaged cache: measure still works and counts the same
        for cache in caches:
            cache.write_bytes(b"this is not a sqlite database" * 100)
        damaged = run_cli(["measure", "--json", str(tmp_path / "in0.jsonl")])
    tally("bad inputs tried")
    assert damaged.code == 0, damaged.err
    assert json.loads(damaged.out)["total"] == reports[0]
