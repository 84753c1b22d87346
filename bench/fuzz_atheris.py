"""Coverage-guided fuzzing of the reader, every adapter and two commands, with atheris.

    pip install atheris                       # optional; not a lookout dependency
    python -m bench.fuzz_atheris -max_total_time=300 -print_final_stats=1 [CORPUS_DIR]

Each input is a transcript's bytes. For every adapter (forced, whatever the input looks like)
the view is built, the first tool results and images are cleared through ``replace_content``
and the records are written back; then ``measure --estimate`` and ``clear-images`` run on it
in this process. Only ``LookoutError`` (a clear one-line error) may stop any of them; an edited
line must still be JSON. Anything else is a crash that atheris reports, with the input saved.

The seed corpus (used when no CORPUS_DIR is given, or added to an empty one) is the format
fixtures under tests/data and the first 64 KB of each real transcript.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import atheris

REPO = Path(__file__).resolve().parent.parent

with atheris.instrument_imports(include=["lookout_cli"]):
    from lookout_cli.core.errors import LookoutError
    from lookout_cli.core.jsonl import read_records
    from lookout_cli.formats import ADAPTERS, Transcript, load_adapter

sys.path.insert(0, str(REPO / "tests"))
from test_reliability_harness import assert_new_lines_are_json, clear_and_write  # noqa: E402


def _cli(args: list[str], data: bytes) -> None:
    from click.testing import CliRunner

    from lookout_cli.cli import main

    with CliRunner().isolation(input=data) as (_out, err, _mixed):
        try:
            main(args)
        except SystemExit as exc:
            text = err.getvalue().decode("utf-8", "replace")
            if exc.code not in (0, 1, 2) or "internal error" in text or "Traceback" in text:
                raise RuntimeError(f"lookout {' '.join(args)}: exit {exc.code}: {text}") from None


def one_input(data: bytes) -> None:
    records = list(read_records(io.BytesIO(data), 1 << 20)) if data.count(b"\n") < 2000 else []
    given = {r.body for r in records}
    for name in ADAPTERS:
        fresh = [type(r)(r.lineno, r.raw) for r in records]
        try:
            written = clear_and_write(Transcript(fresh, load_adapter(name)), 3)
        except LookoutError:
            continue
        assert_new_lines_are_json(given, written)
    for args in (["measure", "--estimate", "-q"], ["clear-images", "--budget", "1", "--keep-recent", "0", "-q"]):
        _cli(args, data)


def seeds() -> list[bytes]:
    found = [p.read_bytes() for p in sorted((REPO / "tests" / "data").rglob("*.jsonl"))]
    shared = REPO.parent / "shared" / "transcripts"
    found += [p.read_bytes()[:65536] for p in sorted(shared.rglob("*.jsonl"))] if shared.is_dir() else []
    return found


def main() -> None:
    import os
    import tempfile

    os.environ.setdefault("LOOKOUT_SAVE_DIR", tempfile.mkdtemp(prefix="lookout-fuzz-saved-"))
    os.environ.setdefault("XDG_DATA_HOME", tempfile.mkdtemp(prefix="lookout-fuzz-data-"))
    argv = list(sys.argv)
    corpus = [a for a in argv[1:] if not a.startswith("-")]
    if not corpus:
        corpus_dir = tempfile.mkdtemp(prefix="lookout-fuzz-corpus-")
        argv.append(corpus_dir)
        corpus = [corpus_dir]
    if not any(a.startswith("-artifact_prefix=") for a in argv):  # crashes go beside the corpus
        argv.insert(1, f"-artifact_prefix={Path(corpus[0]).resolve().parent}/")
    folder = Path(corpus[0])
    folder.mkdir(parents=True, exist_ok=True)
    if not any(folder.iterdir()):
        for n, seed in enumerate(seeds()):
            (folder / f"seed-{n:03d}.jsonl").write_bytes(seed)
    atheris.Setup(argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
