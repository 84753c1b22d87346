"""Re-measuring a file that changed gives what a measure from scratch gives, whatever happened to
it between the runs (the line memo, the settled values, the snapshot: ``meter/line_memo.py``).

A real-shaped Claude Code session or Codex rollout (``bench.generate``: they compact as the
agents do), cut at a random line, then changed a random step at a time: grown by the lines that
come next, by lines no agent writes as it should (not JSON, a null, a count past 64 bits, a
rollback, a compaction of either kind, an image with its UI event, another model, a branch),
rewritten by an atomic replace or by ``compact -i``, truncated. After each step the file is
measured with the memo, and from scratch (no memo, no value standing for the lines before the
last compaction: every line's node), in this process; the figures must be equal, but for the
note that says an unchanged file's figures were reused. ``LOOKOUT_LONG_TESTS=1`` tries many more
sequences.
"""

from __future__ import annotations

import base64
import datetime as dt
import io
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, lookout_exe
from test_reliability_harness import LONG, tally

from lookout_cli.formats import claude_code, codex
from lookout_cli.measure import measure_input
from lookout_cli.meter.analysis import Settings
from lookout_cli.meter.report import to_dict
from lookout_cli.options import Run

sys.path.insert(0, str(REPO))  # bench/ is a top-level folder of the repository, not installed
from bench.generate import generate  # noqa: E402

SEQUENCES = 40 if LONG else 3
STEPS = 25 if LONG else 8
REUSED = "unchanged since it was last measured"


def report(path: Path, cache: bool) -> dict:
    settings = Settings(now=dt.datetime(2026, 1, 1, tzinfo=dt.UTC), discover_rules=False)
    meter, _ = measure_input(Run("measure", file=str(path), isolated=True), settings, cache=cache)
    figures = to_dict(meter, str(path), None)
    figures["notes"] = [note for note in figures["notes"] if REUSED not in note]
    return figures


def from_scratch(path: Path) -> dict:
    with pytest.MonkeyPatch.context() as patch:
        for adapter in (claude_code.Adapter, codex.Adapter):
            patch.setattr(adapter, "settling", lambda self: None)
        return report(path, cache=False)


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, list[bytes]]:
    """Each format's real-shaped transcript, compacted twice at least, as lines."""
    folder = tmp_path_factory.mktemp("sources")
    out = {}
    for fmt, size in (("claude-code", 4.0), ("codex", 5.0)):
        path = folder / f"{fmt}.jsonl"
        generate(path, fmt, size, shape="real")
        out[fmt] = path.read_bytes().splitlines(keepends=True)
    return out


def _png() -> str:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (64, 48), (200, 90, 20)).save(buffer, "PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def _codex(kind: str, payload: dict) -> bytes:
    return (json.dumps({"timestamp": "2025-10-23T23:40:00.000Z", "type": kind, "payload": payload}) + "\n").encode()


def codex_oddity(rng: random.Random, png: str) -> bytes:
    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": f"look {rng.random()}"}]}
    return rng.choice([
        lambda: _codex("event_msg", {"type": "thread_rolled_back", "num_turns": rng.randrange(3)}),
        lambda: _codex("compacted", {"message": f"Summary {rng.random()}"}),
        lambda: _codex("compacted", {"message": "", "replacement_history": [user, {
            "type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}]}),
        lambda: _codex("response_item", {**user, "content": [*user["content"], {
            "type": "input_image", "image_url": f"data:image/png;base64,{png}"}]})
        + _codex("event_msg", {"type": "user_message", "message": "look", "images": [f"data:image/png;base64,{png}"]}),
        lambda: _codex("event_msg", {"type": "token_count", "info": {
            "total_token_usage": {"input_tokens": rng.randrange(10**6), "output_tokens": 7, "total_tokens": 9},
            "last_token_usage": {"input_tokens": rng.choice([0, 900, 1 << 70]), "cached_input_tokens": 3,
                                 "output_tokens": 4, "total_tokens": 9},
            "model_context_window": rng.choice([None, 128000, 272000])}}),
        lambda: _codex("turn_context", {"model": rng.choice(["gpt-5.1-codex", "gpt-4.1"]), "cwd": "/w/app"}),
        lambda: _codex("response_item", {"type": "function_call_output", "call_id": "call_x", "output": [
            {"type": "input_image", "image_url": f"data:image/png;base64,{png}"}]}),
    ])()


def claude_oddity(rng: random.Random, png: str, lines: list[bytes]) -> bytes:
    """A line that follows the session's last one, or another (a branch), or a compaction."""
    uuids = [obj["uuid"] for raw in lines[-40:] if (obj := _object(raw)) and isinstance(obj.get("uuid"), str)]
    parent = rng.choice(uuids) if uuids else None
    uid = f"odd-{rng.random()}"
    base = {"parentUuid": parent, "isSidechain": False, "sessionId": "S", "cwd": "/w/app", "uuid": uid,
            "timestamp": "2025-10-23T23:40:00.000Z"}
    usage = {"input_tokens": rng.choice([5, 1 << 70]), "cache_read_input_tokens": 40_000, "output_tokens": 9}
    kind = rng.randrange(4)
    if kind == 0:  # a compaction, as Claude Code writes it: a boundary, then its summary
        boundary = {**base, "parentUuid": None, "logicalParentUuid": parent, "type": "system",
                    "subtype": "compact_boundary", "content": "Conversation compacted",
                    "compactMetadata": {"trigger": "auto", "preTokens": 150_000}}
        summary = {**base, "parentUuid": uid, "uuid": uid + "s", "type": "user", "isCompactSummary": True,
                   "message": {"role": "user", "content": f"Summary {rng.random()}"}}
        return (json.dumps(boundary) + "\n" + json.dumps(summary) + "\n").encode()
    if kind == 1:
        message = {"role": "user", "content": [{"type": "text", "text": "look"}, {
            "type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}}]}
        return (json.dumps({**base, "type": "user", "message": message}) + "\n").encode()
    model = rng.choice(["claude-sonnet-4-5", "claude-opus-4-1"])
    message = {"id": f"msg-{rng.randrange(3)}", "model": model, "role": "assistant", "usage": usage,
               "content": [{"type": "text", "text": f"Done {rng.random()}"}]}
    return (json.dumps({**base, "type": "assistant", "isSidechain": kind == 3, "message": message}) + "\n").encode()


def _object(raw: bytes) -> dict | None:
    try:
        obj = json.loads(raw)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def _replace(path: Path, data: bytes) -> None:
    """Write ``data`` as editors and lookout do: a new file renamed over the old one."""
    temporary = path.with_suffix(".new")
    temporary.write_bytes(data)
    os.replace(temporary, path)


@pytest.mark.parametrize("seed", range(SEQUENCES))
@pytest.mark.parametrize("fmt", ["claude-code", "codex"])
def test_a_file_changed_at_random_is_measured_again_as_from_scratch(sources, fmt, seed, tmp_path, monkeypatch):
    monkeypatch.setenv("LOOKOUT_CACHE_DIR", str(tmp_path / "cache"))
    rng = random.Random(seed)
    source = sources[fmt]
    png = _png()
    path = tmp_path / "transcript.jsonl"
    at = rng.randrange(200, len(source) - 600)
    path.write_bytes(b"".join(source[:at]))
    done = []
    for _ in range(STEPS):
        data = path.read_bytes()
        lines = data.splitlines(keepends=True)
        step = rng.choices(["grow", "oddity", "garbage", "edit", "truncate", "compact"], [8, 4, 1, 1, 1, 1])[0]
        if step == "grow":
            count = rng.randrange(1, 200)
            with open(path, "ab") as handle:
                handle.write(b"".join(source[at:at + count]))
            at += count
        elif step == "oddity":
            with open(path, "ab") as handle:
                handle.write(codex_oddity(rng, png) if fmt == "codex" else claude_oddity(rng, png, lines))
        elif step == "garbage":
            with open(path, "ab") as handle:
                handle.write(rng.choice([b"garbage\n", b"null\n", b"[1, 2]\n", b"\n"]))
        elif step == "edit":  # a line of the middle changed (longer: RELIABILITY.md, Limits), written anew
            n = rng.randrange(len(lines))
            lines[n] = lines[n].replace(b"e", b"EE", 1)
            _replace(path, b"".join(lines))
        elif step == "truncate":
            _replace(path, b"".join(lines[:rng.randrange(50, len(lines))]))
        else:
            result = subprocess.run([*lookout_exe(), "compact", "-i", "-q", "--force", str(path)],
                                    capture_output=True, env=os.environ, timeout=300)
            # (a context that cannot fit even summarized is refused, the file left as it was)
            assert result.returncode == 0 or b"left as it was" in result.stderr, result.stderr.decode()
        done.append(step)
        assert report(path, cache=True) == from_scratch(path), f"after {done}"
        tally("re-measures compared")
