"""How long ``lookout statusline`` takes on a long session (issue 28: at most 0.1 s, p50).

Generates a Claude Code session of --size MB (bench.generate, seeded) in a temporary folder,
then runs the installed ``lookout statusline`` the way Claude Code does (its statusLine JSON on
standard input) --runs times on the unchanged file, and --runs times each after one more
exchange (a prompt and a reply with its usage) was appended. Prints the medians, the median of
a bare ``python -c pass`` of the same interpreter interleaved with them (the floor on this
host), and the line shown after the last exchange.

    python -m bench.statusline --size 100 --runs 21
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench.generate import generate


def lookout() -> str:
    return shutil.which("lookout", path=os.path.dirname(sys.executable)) or "lookout"


def exchange(n: int, prompt_tokens: int) -> bytes:
    """One prompt and its reply as Claude Code appends them (the reply records its usage)."""
    user, reply = str(uuid.uuid4()), str(uuid.uuid4())
    now = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
    lines = [
        {"parentUuid": None, "isSidechain": False, "type": "user", "uuid": user, "timestamp": now,
         "sessionId": "bench", "message": {"role": "user", "content": f"step {n}: go on"}},
        {"parentUuid": user, "isSidechain": False, "type": "assistant", "uuid": reply, "timestamp": now,
         "sessionId": "bench", "message": {"id": f"msg_bench_{n}", "type": "message", "role": "assistant",
                                           "model": "claude-sonnet-4-5-20250929",
                                           "content": [{"type": "text", "text": f"done with step {n}"}],
                                           "usage": {"input_tokens": 3, "cache_creation_input_tokens": 200,
                                                     "cache_read_input_tokens": prompt_tokens, "output_tokens": 20}}},
    ]
    return b"".join(json.dumps(x).encode() + b"\n" for x in lines)


def timed(argv: list[str], payload: bytes) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(argv, input=payload, capture_output=True, check=True)
    return time.perf_counter() - start, done.stdout.decode().strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=float, default=100, help="session size in MB (default 100)")
    parser.add_argument("--runs", type=int, default=21, help="runs per case (default 21)")
    parser.add_argument("--file", help="time this session instead of generating one (it is copied)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="lookout-statusline-") as tmp:
        session = Path(tmp) / "session.jsonl"
        started = time.perf_counter()
        if args.file:
            shutil.copyfile(args.file, session)
        else:
            generate(session, "claude-code", args.size)
        made = time.perf_counter() - started
        payload = json.dumps({"session_id": "bench", "transcript_path": str(session), "cwd": tmp,
                              "model": {"id": "claude-sonnet-4-5", "display_name": "Sonnet 4.5"},
                              "cost": {"total_cost_usd": 1.25}}).encode()
        argv_ = [lookout(), "statusline", "--color", "never"]
        timed(argv_, payload)  # the figures for the model are worked out once and kept
        unchanged, python = [], []
        for _ in range(args.runs):  # interleaved: the host's load weighs on both alike
            unchanged.append(timed(argv_, payload)[0])
            python.append(timed([sys.executable, "-c", "pass"], b"")[0])
        grown, shown = [], ""
        for n in range(args.runs):
            with open(session, "ab") as handle:
                handle.write(exchange(n, 120_000 + 500 * n))
            seconds, shown = timed(argv_, payload)
            grown.append(seconds)
        size = session.stat().st_size
    result = {"bytes": size, "generated_s": round(made, 1), "runs": args.runs,
              "python_startup_p50_s": round(statistics.median(python), 4),
              "unchanged_p50_s": round(statistics.median(unchanged), 4),
              "unchanged_max_s": round(max(unchanged), 4),
              "grown_p50_s": round(statistics.median(grown), 4), "grown_max_s": round(max(grown), 4),
              "last_line": shown}
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
