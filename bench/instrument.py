"""Run a lookout command while counting what it tokenizes (for B11: never re-tokenize).

    BENCH_TOKENIZED=stats.json python -m bench.instrument compact --max-tokens 100000 < FILE

Wraps lookout's count function (``tokens.tokenizer.exact_length``: it reads counts off tiktoken's core,
not through ``Encoding``) and ``tiktoken.Encoding.encode_ordinary`` and ``encode`` (for any other
caller) to add up the characters and calls, each text once; then runs the lookout CLI. The
totals are written to $BENCH_TOKENIZED at exit.
"""

from __future__ import annotations

import atexit
import json
import os
import sys


def main() -> None:
    import tiktoken

    from lookout_cli.tokens import tokenizer as tokens

    seen = {"chars": 0, "calls": 0}
    counting = [False]  # inside lookout's count function (whose fallback is encode_ordinary)

    def seen_text(text: str) -> None:
        if not counting[0]:
            seen["chars"] += len(text)
            seen["calls"] += 1

    for name in ("encode_ordinary", "encode"):
        original = getattr(tiktoken.Encoding, name)

        def wrapped(self, text, *a, _original=original, **kw):
            seen_text(text)
            return _original(self, text, *a, **kw)

        setattr(tiktoken.Encoding, name, wrapped)

    exact_length = tokens.exact_length

    def counted_length(name: str = tokens.DEFAULT_ENCODING):
        counting[0] = True  # its probes are not the input's text
        try:
            length = exact_length(name)
        finally:
            counting[0] = False

        def counted(text: str) -> int:
            seen_text(text)
            counting[0] = True
            try:
                return length(text)
            finally:
                counting[0] = False

        return counted

    tokens.exact_length = counted_length

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
