"""Run a lookout command while counting what it tokenizes (for B11: never re-tokenize).

    BENCH_TOKENIZED=stats.json python -m bench.instrument compact --max-tokens 100000 < FILE

Wraps ``tiktoken.Encoding.encode_ordinary`` and ``encode`` to add up the characters and
calls, then runs the lookout CLI; the totals are written to $BENCH_TOKENIZED at exit.
"""

from __future__ import annotations

import atexit
import json
import os
import sys


def main() -> None:
    import tiktoken

    seen = {"chars": 0, "calls": 0}
    for name in ("encode_ordinary", "encode"):
        original = getattr(tiktoken.Encoding, name)

        def wrapped(self, text, *a, _original=original, **kw):
            seen["chars"] += len(text)
            seen["calls"] += 1
            return _original(self, text, *a, **kw)

        setattr(tiktoken.Encoding, name, wrapped)

    def report() -> None:
        path = os.environ.get("BENCH_TOKENIZED")
        if path:
            with open(path, "w") as fh:
                json.dump(seen, fh)

    atexit.register(report)
    from lookout_cli.cli import main as cli

    sys.argv = ["lookout", *sys.argv[1:]]
    cli()


if __name__ == "__main__":
    main()
