"""The reliability suites' shared harness, and tests that the generators themselves are sound.

``run_cli`` runs ``lookout`` in this process exactly as the console script does (``cli.main``
with its exit-code mapping), with the given bytes on standard input, so a property test can
afford hundreds of runs; the crash, concurrency and resource tests use real subprocesses.

``LOOKOUT_LONG_TESTS=1`` turns the bounded CI form into the long form (more examples, more
kills, more writers). ``LOOKOUT_RELIABILITY_STATS=FILE`` makes every process append what it
tried (cases generated, fuzz inputs, kills, writers, bad inputs) to FILE as JSON lines;
``bench/fuzz_long.py`` adds them up for RELIABILITY.md.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import fcntl
import io
import json
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from lookout_cli.core.jsonl import Record, read_records
from lookout_cli.formats import Transcript, detect, load_adapter

sys.path.insert(0, str(Path(__file__).resolve().parent))
from strategies import FORMATS, render, transcripts  # noqa: E402

LONG = bool(os.environ.get("LOOKOUT_LONG_TESTS"))


def examples(ci: int, long: int | None = None) -> int:
    """How many hypothesis examples: bounded in CI, many more with LOOKOUT_LONG_TESTS=1."""
    return (long or ci * 25) if LONG else ci


def hsettings(ci: int, long: int | None = None, **kwargs) -> settings:
    """Bounded, reproducible settings (derandomized in CI). LOOKOUT_NO_SHRINK=1 reports a
    failure at once instead of shrinking it (shrinking a transcript can take minutes)."""
    if os.environ.get("LOOKOUT_NO_SHRINK"):
        kwargs.setdefault("phases", [Phase.explicit, Phase.reuse, Phase.generate])
    return settings(max_examples=examples(ci, long), deadline=None, derandomize=not LONG,
                    suppress_health_check=list(HealthCheck), database=None, **kwargs)


# --- figures for RELIABILITY.md ---------------------------------------------------------------
STATS: collections.Counter = collections.Counter()


def tally(key: str, n: int = 1) -> None:
    STATS[key] += n


@atexit.register
def _write_stats() -> None:
    target = os.environ.get("LOOKOUT_RELIABILITY_STATS")
    if not target or not STATS:
        return
    with open(target, "a", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.write(json.dumps({"pid": os.getpid(), **STATS}) + "\n")


# --- running lookout in this process ----------------------------------------------------------
@dataclass
class Outcome:
    code: int
    out: bytes
    err: str

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.startswith("lookout: error")]


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang()


def run_cli(args: list[str], data: bytes = b"", guard: int = 120) -> Outcome:
    """Run ``lookout ARGS`` in this process with ``data`` on standard input.

    ``guard`` seconds is a hang detector, not a timing assertion: a run that has not ended by
    then fails the test instead of stopping the suite."""
    from click.testing import CliRunner

    from lookout_cli.cli import main

    code = 0
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(guard)
    try:
        with CliRunner().isolation(input=data) as (out, err, _mixed):
            try:
                main(list(args))
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
            return Outcome(code, out.getvalue(), err.getvalue().decode("utf-8", "replace"))
    except _Hang:
        pytest.fail(f"lookout {' '.join(args)} still running after {guard}s: a hang")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# Internal errors found in modules other engineers own, each pinned by a strict xfail test in
# test_reliability_regressions.py: (command words, text of the error) -> that test. The fuzz
# suites count them instead of failing, so they keep guarding everything else;
# LOOKOUT_STRICT_PROPERTIES=1 fails on them too. Remove an entry when its test XPASSes.
KNOWN_ERRORS: list[tuple[tuple[str, ...], str, str]] = []
STRICT = bool(os.environ.get("LOOKOUT_STRICT_PROPERTIES"))


def known_error(args: list[str], text: str) -> str | None:
    """The regression test that pins this failure, if it is a known one (and not strict)."""
    if STRICT:
        return None
    for words, needle, test in KNOWN_ERRORS:
        if needle in text and list(args[: len(words)]) == list(words):
            tally("known failures met")
            return test
    return None


def assert_clean(outcome: Outcome, args: list[str]) -> None:
    """Exit 0, 1 or 2; never a traceback or an 'internal error'; an error is one clear line."""
    what = f"lookout {' '.join(args)}"
    if outcome.code == 2 and "internal error" in outcome.err and known_error(args, outcome.err):
        return
    assert outcome.code in (0, 1, 2), f"{what}: exit {outcome.code}\n{outcome.err}"
    assert "Traceback" not in outcome.err, f"{what}: traceback\n{outcome.err}"
    assert "internal error" not in outcome.err, f"{what}: {outcome.err}"
    if outcome.code == 2:
        errors = outcome.error_lines or [line for line in outcome.err.splitlines() if line.startswith(("Error:", "Usage:"))]
        assert errors, f"{what}: exit 2 without an error line\n{outcome.err}"


@contextlib.contextmanager
def environment(env: dict):
    """This process's environment set to ``env``'s lookout and XDG variables for a while."""
    keys = [k for k in set(env) | set(os.environ) if k.startswith(("LOOKOUT_", "XDG_"))]
    saved = {k: os.environ.get(k) for k in keys}
    try:
        for key in keys:
            if key in env:
                os.environ[key] = env[key]
            else:
                os.environ.pop(key, None)
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def clear_and_write(transcript: Transcript, rounds: int) -> bytes:
    """Build the view and check its pairs, clear up to ``rounds`` tool results and images one at
    a time from a fresh view (as commands do: an image may sit inside a result just cleared),
    and write the transcript. A ``LookoutError`` (a refusal) passes up."""
    from lookout_cli.core.jsonl import RecordWriter
    from lookout_cli.formats.view import IMAGE, TOOL_RESULT

    transcript.view().orphans()
    for _ in range(rounds if transcript.adapter.can_write else 0):
        left = [i for i in transcript.view().items if i.kind in (TOOL_RESULT, IMAGE) and i.text != "[cleared]"]
        if not left:
            break
        transcript.adapter.replace_content(transcript, left[0], "[cleared]")
    out = io.BytesIO()
    RecordWriter(out).write_all(transcript.records)
    return out.getvalue()


def assert_new_lines_are_json(given: set[bytes], written: bytes) -> None:
    """Every line the run wrote that was not in its input is JSON."""
    for record in records_of(written):
        if record.body not in given and record.body.strip():
            json.loads(record.body)


# --- reading results --------------------------------------------------------------------------
def records_of(data: bytes) -> list[Record]:
    return list(read_records(io.BytesIO(data)))


def transcript_of(data: bytes, fmt: str | None = None) -> Transcript:
    records = records_of(data)
    adapter = load_adapter(fmt) if fmt else detect(records)
    return Transcript(records, adapter)


def bodies(data: bytes) -> list[bytes]:
    return [r.body for r in records_of(data)]


def orphan_count(data: bytes, fmt: str) -> int:
    return len(transcript_of(data, fmt).view().orphans())


def context_tokens(data: bytes, fmt: str) -> int:
    """Tokens the model would be sent: every item of the view, images by their provider formula."""
    from lookout_cli.images.costs import image_provider
    from lookout_cli.meter.analysis import item_tokens
    from lookout_cli.tokens.tokenizer import TokenCounter

    view = transcript_of(data, fmt).view()
    counter = TokenCounter.for_model(view.model, exact=True)
    return sum(item_tokens(view, counter, image_provider(view.model, view.format)))


def canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=True)


def fidelity_violations(before: bytes, after: bytes) -> list[str]:
    """Output lines that hold an input record's value but not its bytes (re-serialised), and
    non-JSON lines that did not come from the input."""
    known: dict[str, set[bytes]] = collections.defaultdict(set)
    plain: set[bytes] = set()
    for record in records_of(before):
        if record.obj is not None:
            known[canonical(record.obj)].add(record.body)
        else:
            plain.add(record.body)
    problems = []
    for record in records_of(after):
        if record.obj is None:
            if record.body not in plain and record.body.strip():
                problems.append(f"line {record.lineno}: a non-JSON line lookout did not get: {record.body[:80]!r}")
            continue
        key = canonical(record.obj)
        if key in known and record.body not in known[key]:
            problems.append(f"line {record.lineno}: an unchanged record was re-serialised: {record.body[:120]!r}")
    return problems


def is_subsequence(needles: list[bytes], haystack: list[bytes]) -> bool:
    it = iter(haystack)
    return all(any(n == h for h in it) for n in needles)


def missing_lines(needles: list[bytes], haystack: list[bytes]) -> list[bytes]:
    """The needles not found, in order, in haystack (empty when it is a subsequence)."""
    missing, at = [], 0
    for n in needles:
        try:
            at = haystack.index(n, at) + 1
        except ValueError:
            missing.append(n)
    return missing


@contextlib.contextmanager
def workdir(path: Path):
    old = os.getcwd()
    os.chdir(path)
    try:
        yield path
    finally:
        os.chdir(old)


# --- the generators are sound -----------------------------------------------------------------
@hsettings(8)
@given(transcripts())
def test_generated_transcripts_are_valid_in_their_format(case):
    """Every generated line is JSON, the format is detected, and every call has its result."""
    fmt, data, _conv = case
    tally("cases generated")
    records = records_of(data)
    assert all(r.obj is not None for r in records if not r.blank)
    transcript = transcript_of(data)
    assert transcript.format == fmt
    view = transcript.view()
    assert view.orphans() == []
    # a recorded compaction hides the turns before it (agent formats keep them on disk only)
    first = _conv.compaction[0] if _conv.compaction and fmt in ("claude-code", "codex") else 0
    calls = sum(len(s.calls) for t in _conv.turns[first:] for s in t.steps)
    assert len(view.calls()) == calls


@pytest.mark.parametrize("fmt", FORMATS)
def test_generator_covers_the_shapes_it_promises(fmt):
    """Parallel calls answered out of order, images, a compaction, unknown records and fields."""
    from strategies import Call, Conversation, Result, Step, Turn, png_base64

    image = png_base64(3, 2, (255, 0, 0))
    step = Step("think", "two at once", [Call("c1", "Read", {"path": "a"}, Result("A" * 50)),
                                         Call("c2", "view_image", {"path": "b.png"}, Result(None, image))], [1, 0])
    conv = Conversation("claude-sonnet-4-5", "sys", [Turn("first", image, [step], "done"),
                                                     Turn("second", None, [], "ok")],
                        None, [(2, {"n": 10**30})], True, [0, 1], False, True)
    data = render(conv, fmt)
    view = transcript_of(data).view()
    assert view.format == fmt
    assert {"c1", "c2"} <= set(view.calls()) and view.orphans() == []
    assert b"1000000000000000000000000000000" in data
    kinds = {i.kind for i in view.items}
    assert "image" in kinds
    with_results = [i for i in view.items if i.kind == "tool_result"]
    assert [i.call_id for i in with_results][:2] == ["c2", "c1"]  # answered out of order
