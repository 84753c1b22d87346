"""``measure --jobs N`` counts the end of a large file in the worker processes while the file is
read (``count_ahead``): the spans give every line to exactly one worker, the texts counted
ahead are the ones the view counts, and the figures are those of a run without it."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
import subprocess
import sys
import time

import orjson
import pytest
from claude_code_helpers import add_turns
from conftest import REPO, lookout_exe, real_transcripts

from lookout_cli import options
from lookout_cli.core import forked
from lookout_cli.formats.claude_items import counted_texts
from lookout_cli.measure import measure_input
from lookout_cli.meter import count_ahead
from lookout_cli.meter.analysis import Settings
from lookout_cli.meter.report import to_dict
from lookout_cli.options import Run
from lookout_cli.tokens import tokenizer as tokens
from lookout_cli.tokens.cache import block_key

sys.path.insert(0, str(REPO))  # bench/ is a top-level folder of the repository, not installed
from bench.generate import generate  # noqa: E402


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    path = tmp_path_factory.mktemp("ahead") / "session.jsonl"
    generate(path, "claude-code", 0.6)
    return path


def lines_from(data: bytes, start: int) -> list[bytes]:
    """The lines of ``data`` that start at or after ``start``."""
    begin = 0 if start == 0 else data.find(b"\n", start - 1) + 1
    return [line for line in data[begin:].split(b"\n") if line]


@pytest.mark.parametrize("step", [1, 7, 100, 4096, 1 << 20])
@pytest.mark.parametrize("start", [0, 1, 50, 333])
def test_every_line_goes_to_the_one_span_it_starts_in(tmp_path, step, start):
    lines = [b"x" * n for n in (0, 1, 5, 300, 2, 0, 999, 17)] + [b"no newline at the end"]
    data = b"\n".join(lines)
    path = tmp_path / "lines"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        got = [line for lo in range(start, len(data), step)
               for line in count_ahead.line_block(fd, lo, min(lo + step, len(data))).split(b"\n") if line]
    finally:
        os.close(fd)
    assert got == lines_from(data, start)


def test_a_line_running_too_far_past_its_span_is_left_to_the_view(tmp_path, monkeypatch):
    monkeypatch.setattr(count_ahead, "MAX_LINE", 64)
    data = b"short\n" + b"y" * 1000 + b"\nafter\n"
    path = tmp_path / "long"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert count_ahead.line_block(fd, 0, 10) == b"short"  # the long line is not read whole
        assert count_ahead.line_block(fd, 10, len(data)) == b"after\n"
    finally:
        os.close(fd)


def view_texts(path) -> dict[int, set[str]]:
    """The texts of each line's items in the whole (not lean) view."""
    transcript = Run("measure", file=str(path), isolated=True).load(lean=False)
    texts: dict[int, set[str]] = {}
    for item in transcript.view().items:
        texts.setdefault(item.record.lineno, set()).add(item.text)
    return texts


@pytest.mark.parametrize("path", [p for p in real_transcripts() if p.parent.name == "claude-code"],
                         ids=lambda p: p.name)
def test_the_texts_counted_ahead_are_the_views(path, session):
    for source in (path, session):
        shown = view_texts(source)
        checked = 0
        for n, raw in enumerate(source.read_bytes().split(b"\n"), 1):
            if n in shown and raw.strip():
                ahead = set(counted_texts(orjson.loads(raw)))
                assert ahead <= shown[n], f"{source.name}:{n}"
                checked += len(ahead)
        assert checked, source.name  # not true of nothing


@pytest.mark.parametrize("cached", [False, True])
def test_counts_made_ahead_are_exact_cover_the_last_quarter_and_are_keyed_as_the_counter_keys(
        session, cached, monkeypatch):
    monkeypatch.setattr(count_ahead, "MIN_BYTES", 0)
    ahead = count_ahead.start(str(session), None, "o200k_base", 2, cached)  # the file closed at once
    assert ahead is not None
    counts = ahead.counts()
    ahead.close()
    data = session.read_bytes()
    assert ahead.start == len(data) - len(data) // count_ahead.SHARE
    texts = {t for line in lines_from(data, ahead.start) for t in counted_texts(orjson.loads(line)) if t}
    key = (lambda t: block_key("o200k_base", t)) if cached else tokens.memo_key
    assert counts == {key(t): tokens.count(t) for t in texts}


def test_a_compacted_session_is_counted_ahead_from_its_last_boundary_in_one_worker_that_loads_the_encoding(
        tmp_path, monkeypatch):
    """The model sees a compacted session from its last boundary on: the texts before it are
    not worth a worker's time. A part after it too small to be worth workers (a real long
    session: --jobs 2 ran slower than one job) is counted by one process (from the lite table, or
    with the encoding it loads itself), while this process reads the lines before it (and loads none)."""
    path = tmp_path / "compacted.jsonl"
    generate(path, "claude-code", 4, shape="real")
    data = path.read_bytes()
    boundary = data.rfind(b"\n", 0, data.rindex(b'"subtype":"compact_boundary"')) + 1
    # (the generator draws its text from the repository's sources: its last segment's length
    # moves with them; a real long session's is short)
    data = data[:data.index(b"\n", min(len(data) - 1, boundary + len(data) // 10)) + 1]
    path.write_bytes(data)
    tail = len(data) - boundary
    assert tail < len(data) // count_ahead.SHARE  # the last quarter would start before it
    monkeypatch.setattr(count_ahead, "MIN_BYTES", 0)
    ahead = count_ahead.start(str(path), None, "o200k_base", 2, False)
    assert ahead is not None and ahead.start == boundary
    counts = ahead.counts()
    ahead.close()
    texts = {t for line in lines_from(data, boundary) for t in counted_texts(orjson.loads(line)) if t}
    assert counts == {tokens.memo_key(t): tokens.count(t) for t in texts}
    assert ahead.workers is not None
    monkeypatch.setattr(count_ahead, "MIN_BYTES", count_ahead.SHARE * (tail + 1))
    assert len(data) >= count_ahead.MIN_BYTES  # large enough, but what is shown is not
    monkeypatch.delitem(tokens._loaded, "cl100k_base", raising=False)
    ahead = count_ahead.start(str(path), None, "cl100k_base", 2, False)
    assert ahead is not None and ahead.start == boundary
    assert ahead.workers is None  # no pool: one forked process
    counts = ahead.counts()
    ahead.close()
    assert not tokens.is_loaded("cl100k_base")  # the worker loaded its encoding, this process did not
    assert counts == {tokens.memo_key(t): tokens.count(t, "cl100k_base") for t in texts}
    # lines before the boundary read in two processes (``split_from`` bytes or more): no third
    # one; this process counts the end while it waits for the other (``EarlyItems.work``)
    ahead = count_ahead.start(str(path), None, "o200k_base", 2, False, split_from=boundary)
    assert ahead is not None and ahead.workers is None and type(ahead.pending) is count_ahead.Idle
    assert ahead.idle_bytes() == len(data) - boundary and not ahead.pending.ready()
    ahead.work()
    assert ahead.pending.ready() and ahead.pending.span[0] == -1  # counted, its file closed
    assert ahead.counts() == {tokens.memo_key(t): tokens.count(t) for t in texts}
    ahead.close()
    ahead = count_ahead.start(str(path), None, "o200k_base", 2, False, split_from=boundary + 1)
    assert type(ahead.pending) is forked.Forked  # lines before it too few to split: a forked counter
    ahead.close()


def test_no_counting_ahead_for_small_inputs_pipes_or_formats_that_cannot_tell(tmp_path, session, monkeypatch):
    def begin(path_or_fd, jobs: int = 2) -> bool:
        fd = os.open(path_or_fd, os.O_RDONLY) if not isinstance(path_or_fd, int) else path_or_fd
        try:
            ahead = count_ahead.Ahead.begin(fd, None, "o200k_base", jobs)
            if ahead is not None:
                ahead.close()
            return ahead is not None
        finally:
            os.close(fd)

    assert not begin(session)  # under MIN_BYTES
    monkeypatch.setattr(count_ahead, "MIN_BYTES", 0)
    read, write = os.pipe()
    os.write(write, session.read_bytes()[:4096])
    os.close(write)
    assert not begin(read)  # a pipe cannot be read at an offset
    other = tmp_path / "openai.jsonl"
    generate(other, "openai", 0.2)
    assert not begin(other)  # the message lists do not say which texts a line holds
    assert not begin(session, jobs=1)
    assert begin(session)  # and what none of these stops is counted ahead


@pytest.mark.parametrize("cache", [False, True])
def test_measure_with_jobs_counts_the_end_ahead_to_the_same_figures(session, cache, tmp_path, monkeypatch):
    monkeypatch.setenv("LOOKOUT_CACHE_DIR", str(tmp_path / "cache"))
    settings = Settings(discover_rules=False, now=dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc))

    def report(jobs: int) -> dict:
        meter, _ = measure_input(Run("measure", file=str(session), isolated=True), settings, jobs, cache=cache)
        return to_dict(meter, str(session), None)

    serial = report(1)
    monkeypatch.setattr(count_ahead, "MIN_BYTES", 0)
    taken = []
    counts = count_ahead.Ahead.counts
    monkeypatch.setattr(count_ahead.Ahead, "counts", lambda self: taken.append(counts(self)) or taken[-1])
    if cache:  # a cold cache, as the serial run left none behind with its own folder
        monkeypatch.setenv("LOOKOUT_CACHE_DIR", str(tmp_path / "cold"))
    assert report(2) == serial
    assert taken and taken[0]  # the view took the counts made ahead


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    path = tmp_path_factory.mktemp("large") / "large.jsonl"
    generate(path, "claude-code", count_ahead.MIN_BYTES / (1 << 20) + 1)
    return path


def measure_jobs(path, jobs: str, **kw) -> subprocess.Popen:
    stdin = open(path, "rb")  # standard input a regular file: read at offsets
    proc = subprocess.Popen([*lookout_exe(), "measure", "--json", "--no-cache", "--no-discover",
                             "--now", "2026-01-01T00:00:00Z", "--jobs", jobs],
                            stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    stdin.close()
    return proc


def reports_by_jobs(path) -> list[dict]:
    """The JSON reports of ``measure --jobs 1`` and ``--jobs 2`` of ``path`` on standard input."""
    reports = []
    for jobs in ("1", "2"):
        out, err = measure_jobs(path, jobs).communicate(timeout=300)
        assert err == b"", err.decode()
        reports.append(json.loads(out))
    return reports


def test_standard_input_from_a_large_file_counts_ahead_to_the_same_report(large):
    one, two = reports_by_jobs(large)
    assert one == two


def test_ctrl_c_while_the_workers_count_stops_at_once_with_130(large):
    """Ctrl-C reaches the whole process group: a worker it stopped mid-task left the pool's
    queues locked and the run waited forever; and each worker printed its traceback."""
    proc = measure_jobs(large, "2", start_new_session=True)
    deadline = time.monotonic() + 60
    while len(children(proc.pid)) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    time.sleep(0.2)  # past the workers' first steps, as a person's Ctrl-C would be
    assert proc.poll() is None, "the run ended before its workers were seen"
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert err.strip() == b"lookout: interrupted"
    assert not children(proc.pid)


def children(pid: int) -> list[int]:
    """The other live processes of the process group ``pid`` leads (from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != pid:
            try:
                stat = open(f"/proc/{entry}/stat").read()
            except OSError:
                continue
            fields = stat.rpartition(")")[2].split()  # after the command's name: state, ppid, pgrp
            if fields[0] != "Z" and int(fields[2]) == pid:
                found.append(int(entry))
    return found


@pytest.fixture(scope="module")
def long_compacted(tmp_path_factory):
    """A real-shaped session long enough that ``--jobs 2`` reads its older lines in two
    processes (``options.APART_BYTES``), compacted every 1.6 MB as Claude Code compacts."""
    path = tmp_path_factory.mktemp("compacted") / "session.jsonl"
    generate(path, "claude-code", options.APART_BYTES / (1 << 20) + 2, shape="real")
    add_turns(path, 3)  # (the generator's last segment may hold a single turn: none for compact to split on)
    return path


def test_a_long_compacted_session_measured_with_jobs_gives_the_report_of_one_job(long_compacted, tmp_path):
    """``--jobs 2`` on a long compacted session: the lines before its last compaction are read
    in two processes, the first of which counts its end while it waits for the second. The report is
    that of one job, from standard input and from FILE; and the line memo the split run leaves
    measures the grown file as a cold run of it does."""
    one, two = reports_by_jobs(long_compacted)
    assert one == two
    assert len(one["compactions"]) > 5  # (what is split is the older segments)
    grown = tmp_path / "grown.jsonl"
    grown.write_bytes(long_compacted.read_bytes())

    def measure(jobs: str, cache: str) -> dict:
        env = {**os.environ, "LOOKOUT_CACHE_DIR": str(tmp_path / cache)}
        done = subprocess.run([*lookout_exe(), "measure", "--json", "--no-discover", "--now", "2026-01-01T00:00:00Z",
                               "--jobs", jobs, str(grown)], capture_output=True, env=env, timeout=300, check=False)
        assert done.returncode == 0 and done.stderr == b"", done.stderr.decode()
        return json.loads(done.stdout)

    assert measure("2", "warm") == one | {"source": str(grown)}
    last = orjson.loads(grown.read_bytes().splitlines()[-1])
    prompt = {**last, "type": "user", "uuid": "00000000-0000-4000-8000-00000000abcd", "parentUuid": last["uuid"],
              "message": {"role": "user", "content": "one more prompt after the split run"}}
    prompt.pop("requestId", None)
    grown.write_bytes(grown.read_bytes() + orjson.dumps(prompt) + b"\n")
    assert measure("1", "warm") == measure("1", "cold")


def test_a_long_compacted_session_compacted_with_jobs_is_the_transcript_of_one_job(long_compacted, tmp_path):
    """``compact --jobs 2`` reads the lines before the last compaction in two processes as
    ``measure`` does: the transcript it writes and its report are those of one job (the uuids
    and times of the lines it adds are new in every run: named by their order)."""
    fresh = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|"
                       rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z")
    known = set(fresh.findall(long_compacted.read_bytes()))

    def named(out: bytes) -> bytes:
        new: dict[bytes, bytes] = {}
        return fresh.sub(lambda m: m[0] if m[0] in known else new.setdefault(m[0], b"new-%d" % len(new)), out)

    written = []
    for jobs in ("1", "2"):
        report = tmp_path / f"report-{jobs}.json"
        env = {**os.environ, "LOOKOUT_CACHE_DIR": str(tmp_path / f"cache-{jobs}"),
               "XDG_DATA_HOME": str(tmp_path / f"data-{jobs}")}
        done = subprocess.run([*lookout_exe(), "compact", "--force", "-q", "--now", "2026-01-01T00:00:00Z",
                               "--jobs", jobs, "--report", str(report), str(long_compacted)],
                              capture_output=True, env=env, timeout=300, check=False)
        assert done.returncode == 0, done.stderr.decode()
        figures = json.loads(report.read_text())
        written.append((named(done.stdout), {k: figures[k] for k in ("before", "after", "stages") if k in figures}))
    assert written[0] == written[1]
    assert len(written[0][0]) > len(long_compacted.read_bytes())  # (a boundary and a summary added)
