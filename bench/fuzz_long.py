"""The reliability suites, long form, with the figures RELIABILITY.md reports.

    python -m bench.fuzz_long              # long form (LOOKOUT_LONG_TESTS=1): minutes
    python -m bench.fuzz_long --ci         # the bounded form CI runs
    python -m bench.fuzz_long --json figures.json

Runs ``tests/test_reliability_*.py`` under pytest with ``LOOKOUT_RELIABILITY_STATS`` set, so
every test process appends what it tried (cases generated, fuzz inputs, command runs, kills,
concurrent writers, bad inputs, known failures met); then adds them up with pytest's own
outcome counts and prints a Markdown table. Exit status: pytest's.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIGURES = [
    ("cases generated", "generated transcripts run through a command's properties"),
    ("command runs", "lookout runs on generated transcripts (in process)"),
    ("fuzz inputs tried", "damaged transcripts fed to the reader, adapters and commands"),
    ("fuzz command runs", "command runs on damaged transcripts"),
    ("bad inputs tried", "other hostile inputs: bombs, traversals, secrets, full disks, endless lines"),
    ("kills survived", "SIGKILLs of real lookout processes, old or new state every time"),
    ("concurrent writers", "processes racing on the store, memory and token cache"),
    ("re-measures compared", "a changed file measured with its line memo and from scratch"),
    ("known failures met", "property violations pinned by a strict xfail in the regressions file"),
]


def run(long: bool, workers: str, extra: list[str], shrink: bool = False) -> tuple[int, dict, dict, float]:
    with tempfile.TemporaryDirectory() as tmp:
        stats = Path(tmp) / "stats.jsonl"
        env = {**os.environ, "LOOKOUT_RELIABILITY_STATS": str(stats)}
        env.pop("LOOKOUT_LONG_TESTS", None)
        if long:
            env["LOOKOUT_LONG_TESTS"] = "1"
        if not shrink:  # report a failing example as found (shrinking one can take minutes)
            env["LOOKOUT_NO_SHRINK"] = "1"
        tests = sorted(str(p) for p in (REPO / "tests").glob("test_reliability_*.py"))
        cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", workers, "-rfExX", *tests, *extra]
        started = time.monotonic()
        done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
        took = time.monotonic() - started
        totals: collections.Counter = collections.Counter()
        if stats.exists():
            for line in stats.read_text().splitlines():
                entry = json.loads(line)
                entry.pop("pid", None)
                totals.update(entry)
    outcome = {}
    summary = [line for line in done.stdout.splitlines() if re.search(r"\d+ (passed|failed)", line)]
    for count, what in re.findall(r"(\d+) (passed|failed|xfailed|xpassed|skipped|errors?)", summary[-1] if summary else ""):
        outcome[what] = int(count)
    if done.returncode:
        sys.stdout.write(done.stdout[-20000:])
        sys.stderr.write(done.stderr[-5000:])
    return done.returncode, dict(totals), outcome, took


def table(totals: dict, outcome: dict, took: float, long: bool) -> str:
    rows = ["| figure | count | what |", "|---|---:|---|"]
    for key, what in FIGURES:
        rows.append(f"| {key} | {totals.get(key, 0):,} | {what} |")
    tests = ", ".join(f"{n} {k}" for k, n in outcome.items())
    rows.append(f"| tests | {sum(v for k, v in outcome.items() if k in ('passed', 'xfailed')):,} | {tests} |")
    rows.append(f"| wall time | {took:.0f} s | {'long form' if long else 'CI form'} |")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ci", action="store_true", help="the bounded CI form instead of the long one")
    parser.add_argument("-n", "--workers", default="auto", help="pytest-xdist workers (default: auto)")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    parser.add_argument("--shrink", action="store_true", help="let hypothesis shrink failing examples")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args()
    code, totals, outcome, took = run(not args.ci, args.workers, args.pytest_args, args.shrink)
    print(table(totals, outcome, took, not args.ci))
    if args.json:
        Path(args.json).write_text(json.dumps({"long": not args.ci, "seconds": round(took, 1), "outcome": outcome,
                                               **totals}, indent=2) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
