"""A tree of agent sessions built from real transcripts, for ``lookout report`` (tests and B16).

    python -m bench.tree OUT --sessions 2000 --size 50000 --samples ../shared/transcripts

Each session is a slice of a real Claude Code session or Codex rollout (the samples folder's
``claude-code/*.jsonl`` and ``codex/*.jsonl``), of about ``size`` bytes of whole lines, with
fresh ids: a new session id (and file name), new message and request ids (one new id per old
one within the file, so a response split over lines stays one response), and its times moved
by a whole number of days. A Codex slice starts with the rollout's ``session_meta`` line and
at a ``turn_context`` (the model of its requests). Some Claude Code sessions also get a
subagent's file (``SESSION/subagents/agent-ID.jsonl``) made of sidechain lines. The layout is
the agents' own: ``claude/projects/PROJECT/SESSION.jsonl`` and ``codex/sessions/YYYY/MM/DD/
rollout-....jsonl``, so ``CLAUDE_CONFIG_DIR=OUT/claude`` and ``CODEX_HOME=OUT/codex`` point
ccusage at it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import re
import uuid
from pathlib import Path

_MSG = re.compile(rb'"(msg_[A-Za-z0-9_]+)"')
_REQ = re.compile(rb'"(req_[A-Za-z0-9_]+)"')
_TIME = re.compile(rb'"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)"')
_UUID = re.compile(rb'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}')
PROJECTS = ["-w-app", "-w-api", "-home-dev-site", "-srv-tools"]


class Samples:
    """The real transcripts' lines, read once."""

    def __init__(self, folder: Path) -> None:
        self.claude = [p.read_bytes().splitlines(keepends=True) for p in sorted((folder / "claude-code").glob("*.jsonl"))
                       if p.stat().st_size > 100_000]  # the real sessions, not the trimmed fixtures
        self.codex = [p.read_bytes().splitlines(keepends=True) for p in sorted((folder / "codex").glob("*.jsonl"))
                      if p.stat().st_size > 100_000]
        # a plain rollout (one session, no forks) whose id is a real one (a fixture's may be a
        # placeholder every copy would share)
        self.codex = [lines for lines in self.codex if lines and _UUID.fullmatch(_session_id(lines[0]).encode())
                      and sum(b'"type":"session_meta"' in line for line in lines) == 1]
        if not self.claude or not self.codex:
            raise FileNotFoundError(f"{folder}: no real Claude Code session or Codex rollout over 100 KB")
        self.sidechain = [line for lines in self.claude for line in lines if b'"isSidechain":true' in line]


def _session_id(line: bytes) -> str:
    obj = json.loads(line)
    payload = obj.get("payload") if isinstance(obj, dict) else None
    sid = payload.get("id") if obj.get("type") == "session_meta" and isinstance(payload, dict) else None
    return sid if isinstance(sid, str) else ""


def _fresh(data: bytes, rng: random.Random, days: int) -> bytes:
    """``data`` with new message, request and session ids, its times moved by ``days``."""
    ids: dict[bytes, bytes] = {}

    def new(prefix: bytes):
        def swap(match: re.Match) -> bytes:
            old = match.group(1)
            if old not in ids:
                ids[old] = prefix + b"%024x" % rng.getrandbits(96)
            return b'"' + ids[old] + b'"'
        return swap

    def uuid_swap(match: re.Match) -> bytes:
        old = match.group(0)
        if old not in ids:
            ids[old] = str(uuid.UUID(int=rng.getrandbits(128), version=4)).encode()
        return ids[old]

    def moved(match: re.Match) -> bytes:
        text = match.group(1).decode()
        when = dt.datetime.fromisoformat(text) + dt.timedelta(days=days)
        ms = text[19:-1]
        return b'"' + (when.strftime("%Y-%m-%dT%H:%M:%S") + ms + "Z").encode() + b'"'

    data = _MSG.sub(new(b"msg_"), data)
    data = _REQ.sub(new(b"req_"), data)
    data = _UUID.sub(uuid_swap, data)
    return _TIME.sub(moved, data)


def _slice(lines: list[bytes], size: int, rng: random.Random, starts: list[int] | None = None) -> list[bytes]:
    start = rng.choice(starts) if starts else rng.randrange(max(1, len(lines) - 1))
    out, total = [], 0
    for line in lines[start:] + lines[:start]:
        if total >= size:
            break
        out.append(line if line.endswith(b"\n") else line + b"\n")
        total += len(line)
    return out


def build(out: Path, samples: Path | Samples, sessions: int, size: int = 50_000, seed: int = 30,
          codex_share: float = 0.25, subagent_share: float = 0.1) -> dict:
    """Write ``sessions`` sessions under ``out``; returns how many of each kind and their bytes."""
    rng = random.Random(seed)
    samples = samples if isinstance(samples, Samples) else Samples(Path(samples))
    counts = {"claude-code": 0, "codex": 0, "subagents": 0, "bytes": 0}
    for n in range(sessions):
        days = rng.randrange(0, 60)
        if rng.random() < codex_share:
            lines = rng.choice(samples.codex)
            turns = [i for i, line in enumerate(lines) if b'"type":"turn_context"' in line]
            body = [lines[0]] + _slice(lines, size - len(lines[0]), rng, turns)
            data = _fresh(b"".join(body), rng, days)
            sid = _UUID.search(data.split(b"\n", 1)[0]).group(0).decode()
            day = dt.date(2025, 11, 17) + dt.timedelta(days=days)
            path = out / "codex" / "sessions" / f"{day:%Y/%m/%d}" / f"rollout-{day}T12-00-00-{sid}.jsonl"
            counts["codex"] += 1
        else:
            data = _fresh(b"".join(_slice(rng.choice(samples.claude), size, rng)), rng, days)
            sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            data = re.sub(rb'"sessionId":"[^"]*"', b'"sessionId":"' + sid.encode() + b'"', data)
            path = out / "claude" / "projects" / PROJECTS[n % len(PROJECTS)] / f"{sid}.jsonl"
            counts["claude-code"] += 1
            if samples.sidechain and rng.random() < subagent_share:
                agent = b"".join(_slice(samples.sidechain, size // 5, rng))
                agent = _fresh(agent, rng, days)
                agent = re.sub(rb'"sessionId":"[^"]*"', b'"sessionId":"' + sid.encode() + b'"', agent)
                sub = path.with_suffix("") / "subagents" / f"agent-{rng.getrandbits(64):016x}.jsonl"
                sub.parent.mkdir(parents=True, exist_ok=True)
                sub.write_bytes(agent)
                counts["subagents"] += 1
                counts["bytes"] += len(agent)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        counts["bytes"] += len(data)
    return counts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.tree", description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--samples", required=True, help="the shared transcripts folder")
    ap.add_argument("--sessions", type=int, default=2000)
    ap.add_argument("--size", type=int, default=50_000)
    ap.add_argument("--seed", type=int, default=30)
    args = ap.parse_args(argv)
    print(build(Path(args.out), Path(args.samples), args.sessions, args.size, args.seed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
