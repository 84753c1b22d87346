"""The filter contract as shared code (SPEC §1): ``Run``, the object a command uses to read its
transcript, save what it clears, report and write, made from the flags every command takes
(``lookout_cli.flags``). It does not load click: a quiet measure of a grown file runs without
it (``lookout_cli.meter.replay``)."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
import time
from collections.abc import Callable, Iterator

from lookout_cli.core import forked, hashing, progress
from lookout_cli.config import Config
from lookout_cli.core.errors import CheckFailed, LookoutError, PipeClosed
from lookout_cli.core.fsutil import atomic_writer, sync_pending
from lookout_cli.core.jsonl import (
    DEFAULT_MAX_RECORD_BYTES,
    LeanRecord,
    LineIndex,
    Lines,
    NullStream,
    PositionalReader,
    Record,
    RecordWriter,
    fast_json,
    is_dev_null,
    lean_index,
    lines_holding,
    loads,
    next_line_start,
    read_indexed_lines,
    read_line_blocks,
    read_records,
)
from lookout_cli.core.paths import save_dir
from lookout_cli.settings import as_number, yes_no
from lookout_cli.core.term import Reporter
from lookout_cli.formats import ADAPTERS, SNIFF_RECORDS, Adapter, Transcript, detect, load_adapter
from lookout_cli.meter.replay import CLOSED_STDOUT

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:  # pragma: no cover
    from typing import IO, Any

    from lookout_cli.core.saved import SavedStore
    from lookout_cli.formats.early import EarlyItems
    from lookout_cli.meter.line_memo import LineMemo

MAX_WARNED_LINES = 10
SNIFF_BYTES = 8 << 20  # a usage-only load tells the format from the lines in this much at most
APART_BYTES = 16 << 20  # with --jobs, the lines before the one shown are read in two processes from this much
COUNT_WEIGHT = 30  # a byte of lines counted costs about as much as this many read before the one shown


def _settle_span(fd: int, begin: int, end: int, make: Callable[..., Any], max_record_bytes: int,
                 size: int) -> tuple | None:
    """In a forked process (``Run._settle``): the lines of the file open as ``fd`` from offset
    ``begin`` to ``end`` (where lines start) read into a new reader ``make(follows=True)``, as
    one that reads ``size`` bytes would (``reader``); (the reader, where each line ends). None
    at a line that is no JSON value, which the parent reads with a record as its own lines (and
    an error, such as a line too long, fails it too)."""
    index = LineIndex(fd, begin)
    settling = make(follows=True)
    read = settling.reader(size)
    for _, block in read_line_blocks(PositionalReader(fd), index, end, max_record_bytes):
        for raw in block:
            if not read(raw):
                return None
    return settling, index.starts[1:]


def _keep_lean(adapter: Adapter | None, record: LeanRecord, early: EarlyItems | None = None) -> None:
    """Keep of a lean record what its adapter needs without its parsed value (and, for a
    measure, the items it gives on its own, counted)."""
    data = record.data
    if adapter is not None and adapter.lean:
        if early is None or not early.settles(record, data):
            record.node = adapter.node(data) if data is not None else None
            if early is not None and data is not None:
                early.read(record, data)
        record.release()
    else:
        record.release(keep_value=True)


def _resume(memo: LineMemo, handle: IO[bytes], adapter: Adapter | None) -> tuple[Lines | None, Adapter | None]:
    """The records of the lines ``memo`` measured before when ``handle`` is that file, grown
    or unchanged (else None: none), and the adapter."""
    memo.sniffed = 0 if adapter is not None else None
    if memo.format:
        known = adapter or load_adapter(memo.format)
        lines = memo.resume(handle, known)
        if lines is not None:
            return lines, known
    return None, adapter


def _settling(early: EarlyItems | None, lines: Lines) -> tuple[Any, int]:
    """(``early``'s reader of the lines before the one shown, where that line starts), when
    the lines read so far are all before it (they are then held, not kept: ``Lines.hold``);
    else (None, 0)."""
    settling = early.before if early is not None else None
    if settling is None or not lines.fold(early.skip_to):
        return None, 0
    return settling, early.skip_to


def usage_error(message: str) -> Exception:
    """click's usage error (its usage line, exit 2), click loaded only then."""
    import click

    return click.UsageError(message)


def write_stdout(data: bytes) -> None:
    """``data`` (a report) to standard output: a reader gone away ends the run with 141, an
    output closed from the start with one line."""
    if sys.stdout is None:
        raise LookoutError(CLOSED_STDOUT)
    try:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    except BrokenPipeError:
        raise PipeClosed() from None


def report_json(report: Any) -> bytes:
    """A report as indented JSON and a line end, as orjson writes it (keys that are not text
    made text, values it does not know as their ``str``); the standard library's when orjson
    refuses it (an integer past 64 bits, which a transcript may record)."""
    import orjson

    try:
        return orjson.dumps(report, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS, default=str) + b"\n"
    except TypeError:
        return (json.dumps(report, indent=2, ensure_ascii=False, default=str) + "\n").encode("utf-8", "surrogatepass")


def _looks_like(sample: list) -> str:
    """A few words on what JSON records hold, for the error that says lookout cannot read them."""
    first = sample[0]
    if not isinstance(first, dict):
        return f"its records are JSON {type(first).__name__}s, not objects"
    keys = sorted({k for obj in sample[:SNIFF_RECORDS] if isinstance(obj, dict) for k in obj})
    shown = ", ".join(repr(k) for k in keys[:8]) + (", …" if len(keys) > 8 else "")
    return f"its records are objects with the keys {shown}" if keys else "its records are empty objects"


# the filter contract's flags, as click names them (``lookout_cli.flags``)
RUN_FLAGS = ("file", "output", "in_place", "format_name", "report_path", "strict", "max_record_bytes", "dry_run",
             "check", "save_dir", "from_hook", "quiet", "verbose", "color", "isolated")


class Run:
    """One invocation of a filter: its input, output, settings, saved-output store and report."""

    @classmethod
    def from_flags(cls, command: str, flags: dict[str, Any], side_effects: bool = False) -> Run:
        """The run of ``command`` with the filter contract's flags taken out of ``flags`` (what
        click read; the command's own are left there)."""
        given = dict(flags)
        run = cls(command, **{name: flags.pop(name) for name in RUN_FLAGS if name in flags})
        run.flags = given
        if run.to_terminal and side_effects and not run.dry_run:
            # gzip's rule: data meant for a program is not printed on a terminal
            raise LookoutError(f"{run.command}: standard output is a terminal: send the transcript to a file "
                               "(-o FILE), back into FILE (-i) or a pipe")
        return run

    def __init__(self, command: str, file: str | None = None, output: str | None = None, in_place: bool = False,
                 format_name: str | None = None, report_path: str | None = None, strict: bool = False,
                 max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES, dry_run: bool = False, check: bool = False,
                 save_dir: str | None = None, from_hook: bool = False, quiet: bool = False,
                 verbose: bool = False, color: str = "auto", isolated: bool = False) -> None:
        self.command = command
        self.output = output
        self.in_place = in_place
        # no transcript is printed on a terminal: measure shows its report there, --dry-run and
        # --check theirs, and the other commands refuse to start
        self.to_terminal = (not in_place and output in (None, "-") and sys.stdout is not None
                            and sys.stdout.isatty())
        self.format_name = format_name
        self.report_path = report_path
        self.strict = strict
        self.max_record_bytes = max_record_bytes
        self.check = check
        self.dry_run = dry_run or check
        self.save_dir_flag = save_dir
        self.verbose = verbose
        self.reporter = Reporter(quiet=quiet, verbose=verbose, color=color)
        self.config = Config(isolated=isolated)
        for warning in self.config.warnings:
            self.reporter.warn(warning)
        self.hook_event: dict | None = None
        self.file = self._hook_transcript() if from_hook else file
        if in_place and (self.file in (None, "-")):
            raise usage_error("--in-place needs a FILE")
        if in_place and output:
            raise usage_error("--in-place and --output cannot be used together")
        self._store: SavedStore | None = None
        self._bad_lines = 0
        self.flags: dict[str, Any] = {}  # every flag click read, the command's too (``from_flags``)

    # --- settings ---------------------------------------------------------------------------
    def setting(self, key: str, flag: Any = None, default: Any = None) -> Any:
        return self.config.setting(key, flag, default)

    def number(self, key: str, flag: Any = None, default: Any = None, kind: type = float,
               minimum: float | None = None) -> Any:
        """A numeric setting (the flag, else ``key`` in the config, else ``default``) as
        ``kind``, refused with a one-line error when it is not one or is under ``minimum``."""
        try:
            return as_number(self.setting(key, flag, default), kind, minimum)
        except ValueError as exc:
            raise LookoutError(f"{key}: {exc}") from None

    def flag(self, key: str, flag: bool | None = None, default: bool = False) -> bool:
        """A yes/no setting (the flag, else ``key`` in the config, else ``default``): true/false,
        yes/no, on/off or 1/0 in a variable or a file; anything else is refused with a one-line
        error rather than read as one or the other."""
        try:
            return yes_no(self.setting(key, flag, default))
        except ValueError as exc:
            raise LookoutError(f"{key}: {exc}") from None

    @property
    def source(self) -> str | None:
        """The input's path, or None for standard input."""
        return None if self.file in (None, "-") else os.path.abspath(self.file)

    @property
    def store(self) -> SavedStore:
        if self._store is None:
            from lookout_cli.core.saved import SavedStore  # not imported by a run that saves nothing

            root = save_dir(self.save_dir_flag or self.config.get("save_dir"))
            self._store = SavedStore(root, dry_run=self.dry_run, command=self.command, transcript=self.source)
        return self._store

    # --- input ------------------------------------------------------------------------------
    def _hook_transcript(self) -> str:
        """An agent hook passes a JSON event on standard input; take its transcript_path."""
        data = sys.stdin.buffer.read(16 * 1024 * 1024)
        try:
            event = loads(data)
            self.hook_event = event
            path = event["transcript_path"]
        except (ValueError, KeyError, TypeError):
            raise LookoutError("--from-hook expects a hook event (JSON with transcript_path) on standard input")
        if not isinstance(path, str) or not path:
            raise LookoutError("the hook event's transcript_path is empty")
        return os.path.expanduser(path)

    def _open(self) -> IO[bytes]:
        """FILE opened for reading, or standard input (never a terminal)."""
        if self.file in (None, "-"):
            if sys.stdin is None or sys.stdin.isatty():
                raise usage_error("no FILE given and standard input is a terminal (pipe a transcript in)")
            return sys.stdin.buffer
        try:
            return open(self.file, "rb")
        except OSError as exc:
            raise LookoutError(f"{self.file}: {exc.strerror or exc}") from None

    @contextlib.contextmanager
    def _input(self) -> Iterator[IO[bytes]]:
        if self.file in (None, "-"):
            yield self._open()  # standard input stays open
            return
        with self._open() as stream:
            yield stream

    def _seekable_input(self) -> tuple[IO[bytes] | None, IO[bytes] | None]:
        """The input, and where a lean load keeps its lines: the input itself when it is a
        regular file (standard input from where it stands), else an unnamed temporary file the
        lines are copied to as they are read (so a line over the bound still stops the read at
        once). (None, None) when no temporary file can be made."""
        stream = self._open()
        try:
            if stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
                return stream, None
        except (AttributeError, OSError, ValueError):
            pass
        import tempfile  # lazily: only standard input from a pipe needs it (6 ms)

        try:  # a pipe, a FIFO, <(process substitution): keep what is read
            return stream, tempfile.TemporaryFile(prefix="lookout-")
        except OSError:
            if self.file not in (None, "-"):
                stream.close()
            return None, None  # the caller reads it into memory instead

    def start_progress(self) -> None:
        """Let a long run show its progress on standard error (core/progress.py): on a
        terminal, not with -q nor under --from-hook."""
        progress.start(not self.reporter.quiet and self.hook_event is None)

    def _reading(self, handle: IO[bytes], spool: IO[bytes] | None):
        """The progress stage of reading ``handle``: how far of its size (a pipe's copy in
        ``spool``: how much so far)."""
        total = os.fstat(handle.fileno()).st_size if spool is None else None
        return progress.stage("reading", total, "bytes", (spool or handle).tell)

    def records(self) -> Iterator[Record]:
        """Stream the input's records, warning about (or, with --strict, refusing) non-JSON lines."""
        with self._input() as stream:
            yield from self._checked(read_records(stream, self.max_record_bytes))

    def _checked(self, records: Iterator[Record]) -> Iterator[Record]:
        for record in records:
            self._check(record)
            yield record
        self._warn_total()

    def _check(self, record: Record) -> None:
        if not record.blank and record.obj is None:
            self._bad_line(record)

    def _warn_total(self) -> None:
        if self._bad_lines > MAX_WARNED_LINES:
            self.warn(f"{self._bad_lines} lines in all were not JSON and passed through unchanged")

    def _bad_line(self, record: Record) -> None:
        where = f"{self.file if self.source else '<stdin>'}:{record.lineno}"
        if self.strict:
            raise LookoutError(f"{where}: not JSON ({record.error})")
        self._bad_lines += 1
        if self._bad_lines <= MAX_WARNED_LINES:
            progress.erase()  # the warning gets a line of its own
            self.warn(f"{where}: not JSON, passed through unchanged ({record.error})")

    def load(self, lean: bool = True, memo: LineMemo | None = None, early: EarlyItems | None = None,
             jobs: int = 1) -> Transcript:
        """Read the whole transcript and find its format (for commands that need all of it).

        ``lean`` (every command): the records keep their offsets in the input instead of their
        bytes, and of each line only what the adapter's ``node`` keeps (all of it when the
        adapter has none); a line is read again when its value is asked for, and an unchanged
        transcript is written back from the input. Not lean, every line is kept parsed.
        With a ``memo`` of FILE (``line_memo``), lines measured before are not read again when
        the file only grew, and not parsed again when it was rewritten. A lean load builds each
        line's items as it reads it, when its format can say them from the line alone
        (``Adapter.line_items``), for the view to take: ``early`` (measure's) counts them too.
        ``jobs``: processes that may read a long session's older lines (``_settle``)."""
        self.start_progress()
        if lean:
            handle, spool = self._seekable_input()
            if handle is not None:
                if early is None:
                    from lookout_cli.formats.early import EarlyItems

                    early = EarlyItems()
                with self._reading(handle, spool):
                    return self._load_lean(handle, spool, memo, early, jobs)
            # no temporary file can be made: keep the lines in memory
        records = list(self.records())
        return Transcript(records, self._adapter_for(records), self.source)

    def load_usage(self) -> tuple[Transcript, list[Record]]:
        """What ``measure --usage-only`` reads: the transcript, which writes the input back
        unchanged, and the records of the lines holding one of its format's ``usage_needles``
        (their nodes kept, not their bytes): no other line is parsed. A format without needles,
        --strict, or no temporary file for a pipe: every line is read (``load``)."""
        if self.strict:
            transcript = self.load()
            return transcript, transcript.records
        self.start_progress()
        handle, spool = self._seekable_input()
        if handle is None:
            transcript = self.load(lean=False)
            return transcript, transcript.records
        import gc

        # what is loaded so far (the modules) lives to the end of the run: the collector, which
        # the kept lines set off again and again, need not walk it each time (3% of the run)
        gc.freeze()
        with self._reading(handle, spool):
            return self._load_usage(handle, spool)

    def _load_usage(self, handle: IO[bytes], spool: IO[bytes] | None) -> tuple[Transcript, list[Record]]:
        start = 0 if spool is not None else handle.tell()
        read = getattr(handle, "read1", handle.read)
        head, sample, looked = b"", [], 0  # looked: the lines of ``head`` read so far
        while not self.format_name:  # read until the format can be told (each line parsed once)
            data = read(1 << 20)
            if spool is not None:
                spool.write(data)
            head += data
            lines = head.split(b"\n")
            if data:
                lines.pop()  # the last may be cut short
            while looked < len(lines) and len(sample) < SNIFF_RECORDS:
                record = Record(looked + 1, lines[looked])
                looked += 1
                if record.data is not None:
                    sample.append(record)
            if not data or len(sample) >= SNIFF_RECORDS or len(head) >= SNIFF_BYTES:
                break
        adapter = self._adapter_for(sample)
        needles = adapter.usage_needles if adapter is not None else ()  # unknown: no usage to find
        if needles is None:  # every line read, from the start (a pipe's whole input in its copy)
            if spool is not None:
                while data := read(1 << 20):
                    spool.write(data)
                spool.flush()
            source = spool if spool is not None else handle
            source.seek(start)
            transcript = self._load_lean(source, None, None)
            return transcript, transcript.records
        import orjson  # (a cold read: the standard library would be slower)

        kept = []
        loads, usage_node, update = orjson.loads, adapter.usage_node, progress.update  # a step per line
        for lineno, raw in lines_holding(handle, needles, head, spool, self.max_record_bytes):
            update()
            try:
                obj = loads(raw)  # as ``Record.obj`` parses it first
            except orjson.JSONDecodeError:
                obj = None
            if obj is None:  # what orjson refuses: a ``Record`` reads it, and warns when it is not JSON
                record = Record(lineno, raw)
                self._check(record)
                obj = record.obj
            if type(obj) is dict:
                node = usage_node(obj)
                if node is not None:  # None: the line records nothing the view reads
                    line = Record(lineno, b"")  # the bytes stay in the input, written back whole
                    line.node = node
                    kept.append(line)
        self._warn_total()
        if spool is not None:
            spool.flush()
        transcript = Transcript([], adapter, self.source)
        transcript.spool = spool or handle
        transcript.spool_span = (start, (spool or handle).tell())
        return transcript, kept

    def _load_lean(self, handle: IO[bytes], spool: IO[bytes] | None, memo: LineMemo | None,
                   early: EarlyItems | None = None, jobs: int = 1) -> Transcript:
        start = 0 if spool is not None else handle.tell()
        lines: Lines | None = None
        sample: list[Record] = []  # records read before the format is known
        parsed = 0  # JSON records among them
        adapter = load_adapter(self.format_name) if self.format_name else None
        if spool is not None or (adapter is not None and not adapter.remembers_items):
            memo = None  # a pipe is not the file the memo knows; not every adapter uses one
        fd = handle.fileno() if spool is None else None  # a regular file
        if fd is None:
            # a pipe's end cannot be looked at first: a compacted session's earlier lines would
            # be counted for nothing (the view reads the lines it shows, as it always did)
            early = None
        if memo is not None:
            lines, adapter = _resume(memo, handle, adapter)
            if early is not None and adapter is not None:
                early = early.start(adapter, fd, handle.tell())
        elif adapter is not None:
            adapter = None  # a forced format is checked against the first records, as a detected one
        if lines is None:
            lines = Lines(lean_index(handle, spool))
        index = lines.spans
        # the lines before the one shown, of which the adapter keeps what they give (``settles``):
        # parsed here, no record made (``Lines``), as long as none after them was read
        settling, shown_at = _settling(early, lines)
        starts = index.starts
        if fd is not None:  # what is left to read: a cold read's megabytes are orjson's to parse
            left = os.fstat(fd).st_size - handle.tell()
            fast_json(left)
            if memo is not None:
                hashing.expect(left)  # (the memo keeps a digest of every line read)
        try:
            while True:
                if settling is not None:
                    self._settle(handle, lines, settling, shown_at, memo, adapter, early, jobs)
                    settling = None
                for lineno, raw in read_indexed_lines(handle, index, self.max_record_bytes, spool):
                    progress.update()
                    record = LeanRecord(lineno, index, raw)
                    lines.append(record)
                    if memo is not None:
                        if early is not None and early.before_shown(record):
                            memo.note_settled()  # what the line gives is kept, not the line
                        else:
                            memo.note(record)
                            node = memo.node(adapter) if adapter is not None else None
                            if node is not None:  # a line measured before (so JSON): not parsed again
                                record.node = node
                                record.release()
                                continue
                    self._check(record)
                    if adapter is not None:
                        _keep_lean(adapter, record, early)
                        continue
                    sample.append(record)
                    parsed += record.data is not None
                    if parsed >= SNIFF_RECORDS:
                        adapter = self._adapter_for(sample)
                        if memo is not None:
                            memo.sniffed = record.lineno
                            memo = memo if adapter is not None and adapter.remembers_items else None
                        early = early.start(adapter, fd, start) if early is not None else None
                        for held in sample:
                            _keep_lean(adapter, held, early)
                        sample = []
                        settling, shown_at = _settling(early, lines)
                        if settling is not None and starts[-1] < shown_at:
                            break  # on to the lines before the one shown
                else:
                    break
            self._warn_total()
            if memo is not None:
                memo.read()
        except OSError as exc:
            where = "the temporary copy of standard input" if spool is not None else self.file or "standard input"
            raise LookoutError(f"{where}: {exc.strerror or exc}") from None
        if adapter is None:
            adapter = self._adapter_for(sample)
            early = early.start(adapter, fd, start) if early is not None else None
            for held in sample:
                _keep_lean(adapter, held, early)
        transcript = Transcript(lines, adapter, self.source)
        transcript.memo = memo if adapter is not None and adapter.remembers_items else None
        transcript.early = early
        if early is not None:
            transcript.settled = early.settled(lines)
        # what was read, and only that, is written back (an agent may append meanwhile)
        transcript.spool, transcript.spool_span = spool or handle, (start, index.starts[-1])
        return transcript

    def _settle(self, handle: IO[bytes], lines: Lines, settling, end: int, memo: LineMemo | None,
                adapter: Adapter, early: EarlyItems, jobs: int = 1) -> None:
        """The lines of ``handle`` up to offset ``end`` (the shown one's start), each parsed and
        handed to ``settling`` with no record made (``Lines.hold``): a block at a time, a long
        session's every line but its last segment's. A line that is no JSON value (blank, not
        JSON, a null, what only the standard library reads) gets a record, read as any. With
        ``jobs`` > 1 and many lines, the second half is read at the same time by a forked
        process into a reader of its own, joined to this one's (``Settling.join``)."""
        apart, half = None, end
        begin = lines.spans.starts[-1]
        read = settling.reader(end - begin)  # (before the fork: what it loads, the child has)
        if jobs > 1 and end - begin >= APART_BYTES and hasattr(settling, "join") and forked.available():
            # this process also counts the last segment while the other reads (``EarlyItems.work``):
            # it reads that much less, so that the two end together
            share = max(0.2, (end - begin - COUNT_WEIGHT * early.idle_bytes()) / (2 * (end - begin)))
            half = next_line_start(handle.fileno(), begin + int(share * (end - begin)), end) or end
            if half < end:
                apart = forked.Forked(_settle_span, handle.fileno(), half, end, type(settling),
                                      self.max_record_bytes, end - begin)
        try:
            self._settle_blocks(handle, lines, read, half, memo, adapter, early)
            if apart is not None:
                early.work()  # (what the other process reads meanwhile)
        except BaseException:  # (Ctrl-C too: the other process goes with this one)
            if apart is not None:
                apart.cancel()
            raise
        if apart is None:
            return
        taken = apart.result()
        if not taken or not taken[1]:  # the child failed (a line it does not read, one too long): read them here
            self._settle_blocks(handle, lines, read, end, memo, adapter, early)
            return
        later, starts = taken
        settling.join(later)
        lines.spans.starts.extend(starts)
        lines.hold(count=len(starts))
        if memo is not None:
            memo.note_settled(len(starts))
        handle.seek(starts[-1])
        progress.update()

    def _settle_blocks(self, handle: IO[bytes], lines: Lines, read: Callable[[bytes], bool], end: int,
                       memo: LineMemo | None, adapter: Adapter, early: EarlyItems) -> None:
        """``_settle``'s lines up to ``end``, read here (by the reader's ``read``)."""
        index, hold = lines.spans, lines.hold
        for first, block in read_line_blocks(handle, index, end, self.max_record_bytes):
            unmade = 0
            for lineno, raw in enumerate(block, first):
                if read(raw):
                    unmade += 1
                    continue
                hold(count=unmade)
                unmade = 0
                record = LeanRecord(lineno, index, raw)
                hold(record)
                self._check(record)
                _keep_lean(adapter, record, early)
            hold(count=unmade)
            if memo is not None:
                memo.note_settled(len(block))
            progress.update()

    def _adapter_for(self, records: list[Record]) -> Adapter | None:
        """The format's adapter; an error, not a silent pass-through, when the JSON records are
        no transcript lookout reads or not the ``--format`` asked for (a 0% meter would pass
        ``--fail-at`` in CI)."""
        sample = [r.data for r in records if r.data is not None]
        if self.format_name:
            forced = load_adapter(self.format_name)
            if sample and not any(forced.sniff(obj) for obj in sample):  # only then load every adapter
                detected = detect(records)
                if detected is not None and detected.name != forced.name:
                    raise LookoutError(f"{self.file or 'standard input'} is not in the {forced.name} format: it looks "
                                       f"like {detected.name} (drop --format, or use --format {detected.name})")
            return forced
        detected = detect(records)
        if detected is None and records:
            looks = _looks_like(sample) if sample else f"none of its first {len(records):,} lines is a JSON object"
            raise LookoutError(f"{self.file or 'standard input'} is not a transcript lookout reads: {looks}; "
                               f"it reads {', '.join(ADAPTERS)} (--format forces one)")
        return detected

    # --- reporting --------------------------------------------------------------------------
    def say(self, text: str = "") -> None:
        self.reporter.say(text)

    def warn(self, text: str) -> None:
        self.reporter.warn(text)

    def write_report(self, report: dict) -> None:
        if not self.report_path:
            return
        data = report_json(report)
        if self.report_path == "-":
            sys.stderr.buffer.write(data)
            sys.stderr.flush()
        else:
            with atomic_writer(self.report_path) as handle:
                handle.write(data)

    # --- output -----------------------------------------------------------------------------
    @contextlib.contextmanager
    def writer(self) -> Iterator[RecordWriter]:
        """Where the transcript goes: standard output, -o FILE or FILE itself (-i), atomically."""
        target = self.file if self.in_place else (None if self.output in (None, "-") else self.output)
        if target is None:
            if sys.stdout is None:  # started with it closed (>&-)
                raise LookoutError(CLOSED_STDOUT)
            sync_pending()  # the saved outputs the transcript names are on disk before it leaves
            quiet = self.to_terminal or is_dev_null(sys.stdout)
            writer = RecordWriter(NullStream() if quiet else sys.stdout.buffer)
            try:
                yield writer
                writer.flush()
            except OSError as exc:  # > FILE on a full disk (a closed pipe is PipeClosed)
                raise LookoutError(f"cannot write standard output: {exc.strerror or exc}") from None
            return
        try:
            with atomic_writer(target) as handle:
                writer = RecordWriter(handle)
                yield writer
        except PipeClosed:
            raise
        except OSError as exc:  # "cannot write TARGET: why" (fsutil names the file)
            raise LookoutError(exc.strerror or str(exc)) from None

    def pass_through(self, report: dict | None = None) -> None:
        """Copy the input file to the output unchanged without parsing it, then the report."""
        if not self.in_place:
            try:
                source = open(self.file, "rb")
            except OSError as exc:
                raise LookoutError(f"{self.file}: {exc.strerror or exc}") from None
            with source, self.writer() as writer:
                writer.copy_from(source)
        self.write_report(report or {})

    def _replaces_input(self) -> bool:
        """Whether the output replaces FILE itself (-i, or -o naming FILE)."""
        if self.in_place:
            return True
        if self.file in (None, "-") or self.output in (None, "-"):
            return False
        try:
            return os.path.samefile(self.file, self.output)
        except OSError:
            return False

    def _carry_appended(self, transcript: Transcript, writer: RecordWriter,
                        stack: contextlib.ExitStack) -> Callable[[], None]:
        """Lines an agent appended to FILE while this run worked go after the result, so that
        replacing the file loses none; when they cannot follow it (a Claude Code chain this run
        ended with lines of its own: they would continue the conversation from before them), or
        FILE changed otherwise, the run stops and leaves FILE as it is. Returns what to run once
        the file is replaced: a line appended between the last look and the rename went to the
        old file, and is appended to the new one then. (A writer that keeps the old file open
        and writes on is beyond reach: the old file is no longer FILE.)"""
        end = transcript.spool_span[1] if transcript.spool is not None else sum(r.size for r in transcript.original)
        carried = 0
        now = stack.enter_context(open(self.file, "rb"))
        for _ in range(50):  # until the file stops growing
            size = os.fstat(now.fileno()).st_size
            if transcript.spool is not None and os.fstat(now.fileno())[1:3] != os.fstat(transcript.spool.fileno())[1:3]:
                raise LookoutError(f"{self.file} was replaced while lookout worked; left as it is (run again)")
            if size < end:
                raise LookoutError(f"{self.file} shrank while lookout worked; left as it is (run again)")
            if size == end:
                break
            now.seek(end)
            grown = now.read(size - end)
            whole = grown[: grown.rfind(b"\n") + 1]
            if not whole:  # a line still being written: wait for its end
                time.sleep(0.05)
                continue
            if not carried and not self._may_follow(transcript):
                lines = whole.count(b"\n")
                raise LookoutError(f"{self.file} grew by {lines} line(s) while lookout worked, and they continue the "
                                   "conversation from before this run's changes; left as it is (run again)")
            writer.write_raw(whole)
            carried += whole.count(b"\n")
            end += len(whole)
        else:
            raise LookoutError(f"{self.file} kept changing while lookout worked; left as it is (run again)")

        def late() -> None:
            size = os.fstat(now.fileno()).st_size
            late_lines = b""
            if size > end:
                now.seek(end)
                late_lines = now.read(size - end)
                with open(self.file, "ab") as new:
                    new.write(late_lines)
            total = carried + late_lines.count(b"\n")
            if total:
                self.warn(f"carried over {total} line(s) appended to {self.file} while lookout worked")

        return late

    @staticmethod
    def _may_follow(transcript: Transcript) -> bool:
        """Whether lines appended to the input can follow this run's output: where the file's
        order is the history, always; where a line names its parent (``Adapter.linked``), only
        when the output still ends with the input's last line."""
        if transcript.adapter is None or not transcript.adapter.linked or not transcript.original:
            return True
        return bool(transcript.lines) and transcript.lines[-1].lineno == transcript.original[-1].lineno != 0

    @property
    def clean(self) -> bool:
        """Every line read so far was JSON (nothing was warned about)."""
        return self._bad_lines == 0

    def finish(self, transcript: Transcript, report: dict | None = None, changes: int | None = None,
               tell: Callable[[], None] | None = None) -> None:
        """Write the transcript (the input, untouched, under --dry-run/--check), then the report.
        ``changes`` counts what the command changed or would change (default: edited records);
        ``tell`` says what it did, once that is written (a full disk must not leave a report of
        work that never reached the file)."""
        changed = transcript.changed if changes is None else changes > 0
        write = not (self.in_place and (self.dry_run or not changed))  # else leave the file alone: nothing to write
        if write:
            with contextlib.ExitStack() as stack:
                with self.writer() as writer:
                    if transcript.spool is not None and not changed:
                        writer.copy_from(transcript.spool, *transcript.spool_span)
                    elif self.dry_run:
                        writer.write_all([r for r in transcript.original if r.raw is not None], original=True)
                    else:
                        writer.write_all(transcript.lines)
                    late = self._carry_appended(transcript, writer, stack) if self._replaces_input() else None
                if late is not None:
                    late()
        if tell is not None:
            tell()
        self.write_report(report or {})
        if self.check and changed:
            raise CheckFailed(f"{self.command}: changes would be made")
