"""The per-file step of ``lookout report``: one transcript (a path or its bytes) to one row.

A row is plain values (str, int, float, None, lists and dicts of them), so it can be kept on
disk (``index``), sent between processes or shipped by a distributed engine. The file is
read whole (a large one a chunk at a time), each line is looked at with ``in`` for what it
records (usage, a compaction, the session, a tool's result), and only the lines that record
usage, a compaction, the model or the session are parsed, with orjson. The format is told by
the adapters' sniffers (``formats``), from the first line. Of a Claude Code response split over
consecutive lines only the last is parsed (the response id is read from the line's bytes):
the pass stays within a small factor of parsing the usage lines alone.

What a row holds (``row.ROW_VERSION`` changes when this does):

- ``sums``: the requests' count, input, cache write, cache read, output, dollars and the
  number unpriced; ``models``: how many requests each model served (``aggregate`` adds these
  when no request of the file was counted before).
- ``requests``: one entry per API request, ``[key, timestamp, model, input, cache_write,
  cache_read, output, cache_write_1h, usd]``. Claude Code writes a response split over several
  lines, each with the usage so far: a response counts once, with its last line's usage, and
  ``key`` (``message.id:requestId``) lets the aggregation count it once across files too (a
  resumed session copies earlier responses). Subagents' (sidechain) requests are spent tokens
  and count. Codex records a ``token_count`` event per request (written twice in a row at
  times: counted once); its ``input_tokens`` include the cached part, which is taken out.
  ``usd`` is the cost at API prices (``meter.cost.usage_cost``), None when the model's prices
  are unknown.
- ``peak``: the fullest request of the main conversation, ``[percent, tokens, timestamp,
  budget]``: its prompt (input + cache read + cache write) as a share of the model's budget.
- ``amber_s`` / ``red_s``: seconds the context spent at the meter's amber and red levels (the
  level of each request held until the next one; a gap over ``IDLE_CAP`` counts as that much).
- ``compactions``: compact boundaries (Claude Code; an ``isCompactSummary`` line without one,
  for older versions) or ``compacted`` records (Codex).
- ``reclaimable``: an estimate (``measure`` gives the exact figure): the tool results still in
  the context after the last compaction, all but the newest ``KEEP_RESULTS``, at
  ``BYTES_PER_TOKEN`` bytes of their JSON line a token (Claude Code keeps a second copy of a
  result in ``toolUseResult``: its lines count half), at most the last prompt.
- ``skipped``: why the file gives no figures (not a Claude Code session or Codex rollout,
  unreadable, empty), else None; ``broken``: the numbers of usage lines that are not JSON.
"""

from __future__ import annotations

import datetime as dt
import io
import os
from collections.abc import Iterator
from typing import IO, Any

from orjson import JSONDecodeError, loads

from lookout_cli.core.jsonl import DEFAULT_MAX_RECORD_BYTES, Record
from lookout_cli.core.times import parse_time
from lookout_cli.fleet.row import new_row, skipped_row
from lookout_cli.formats import ADAPTERS, load_adapter
from lookout_cli.formats.claude_chain import usage_of
from lookout_cli.formats.codex_scan import USAGE_KEYS
from lookout_cli.formats.view import Usage
from lookout_cli.meter.analysis import (
    DEFAULT_AMBER,
    Settings,
    budget_figures,
    lookup_model,
    meter_state,
)
from lookout_cli.meter.cost import usage_cost

FORMATS = ("claude-code", "codex")
KEEP_RESULTS = 3
BYTES_PER_TOKEN = 4
CLAUDE_BYTES_PER_TOKEN = 2 * BYTES_PER_TOKEN  # Claude Code writes a result twice: in the message and toolUseResult
SIDECHAIN_WITHIN = 256  # Claude Code writes isSidechain among a line's first keys
HEAD_WITHIN = 4096  # ... a line's type, a tool result's block type and a boundary's subtype soon after
TAIL_WITHIN = 1024  # ... and the flags after a message (isCompactSummary) at its end
RESPONSE_ID = b'"message":{"id":"'  # as Claude Code writes a response's line
TYPE_WITHIN = 512  # Codex writes a line's timestamp, type and payload type first
IDLE_CAP = 15 * 60
SNIFF = 1  # JSON lines the format is told from first (up to 50 when they do not settle it)
CHUNK = 1 << 20
WHOLE = 64 << 20  # files up to this size are read in one go
SNIFF_MORE = 50

_LEVELS: dict[tuple, tuple[int, float, float]] = {}  # (model, window, amber, red) -> budget, amber, red
_PRICES: dict[str | None, Any] = {}  # model name -> models.Model, or None when unknown


def scan(source: str | os.PathLike | bytes, *, path: str | None = None, amber: float | None = None,
         red: float | None = None) -> dict:
    """The report row of one transcript: ``source`` is its path or its bytes (``path`` then
    names it in the row). ``amber`` and ``red`` are the meter's levels in percent (default:
    75% and each model's summary point, as ``measure``'s meter). Never raises for what the
    file holds: a file that cannot be read or is in another format gives a row with
    ``skipped`` set."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        return _scan(io.BytesIO(data), data, path, amber, red)
    path = os.fspath(source) if path is None else path
    try:
        with open(source, "rb", buffering=0) as handle:
            # a file of usual size in one read (sized by its stat: no growing buffer), a larger
            # one a chunk at a time
            whole = os.fstat(handle.fileno()).st_size <= WHOLE
            return _scan(handle, handle.readall() if whole else None, path, amber, red)
    except OSError as exc:
        return skipped_row(path, exc.strerror or str(exc))


def scan_many(sources: list, amber: float | None = None, red: float | None = None) -> list[dict]:
    """The rows of ``sources`` (paths or bytes), in order: one task of a distributed engine,
    which imports only this installed module to run it."""
    return [scan(source, amber=amber, red=red) for source in sources]


_ADAPTERS: list = []
_SHAPES: dict[tuple, Any] = {}  # a sample's shape -> the adapter detected for it
NAMING_KEYS = frozenset(("type", "subtype", "role", "kind", "object"))


def prepare() -> None:
    """Load what every file needs (the adapters, the models file) before workers are forked."""
    if not _ADAPTERS:
        _ADAPTERS.extend(load_adapter(name) for name in ADAPTERS)
    _model(None)


def _detect(sample: list[Record]):
    """``formats.detect``: the adapter whose sniffer scores the records highest (the adapters
    loaded once). Sniffers read which keys a record has, their values' kinds and the words
    that name what it is (``type``, ``role``...): records alike in those get the same answer,
    so files of one agent are told apart once."""
    shape = tuple(_shape(record.data) for record in sample)
    if shape in _SHAPES:
        return _SHAPES[shape]
    if not _ADAPTERS:
        _ADAPTERS.extend(load_adapter(name) for name in ADAPTERS)
    best, best_score = None, 0
    for adapter in _ADAPTERS:
        score = sum(adapter.sniff(record.data) for record in sample)
        if score > best_score:
            best, best_score = adapter, score
    if len(_SHAPES) < 1024:
        _SHAPES[shape] = best
    return best


def _shape(obj: Any) -> Any:
    """What the sniffers read of a record: its keys, each value's kind, the words that name
    it, and the keys of an object inside it."""
    if type(obj) is not dict:
        return type(obj)
    shape = []
    for key, value in obj.items():
        kind = type(value)
        shape.append((key, value if kind is str and key in NAMING_KEYS else tuple(value) if kind is dict else kind))
    return tuple(shape)


def _sample(head: bytes, limit: int, complete: bool) -> list[Record]:
    """The first ``limit`` JSON lines of ``head`` (``complete``: the whole file), parsed."""
    sample: list[Record] = []
    pos = number = 0
    while len(sample) < limit and pos < len(head):
        end = head.find(b"\n", pos)
        if end < 0:
            if not complete:
                break  # cut short
            end = len(head)
        number += 1
        record = Record(number, head[pos:end])
        if record.data is not None:
            sample.append(record)
        pos = end + 1
    return sample


class LineTooLong(Exception):
    """A line over the size bound (``core.jsonl``'s), at this offset."""


def _blocks(read, head: bytes, complete: bool, limit: int = DEFAULT_MAX_RECORD_BYTES
            ) -> Iterator[tuple[int, bytes]]:
    """(offset, whole lines without their last newline) of ``head`` and what ``read`` gives
    after it, a block at a time (a line over ``limit`` raises LineTooLong)."""
    offset = 0  # of the block in the file
    block, ended = head, complete
    while True:
        if not ended:
            more = read(CHUNK)
            ended = not more
            block += more
        if ended:
            body, block = block, b""
        else:
            cut = block.rfind(b"\n") + 1
            if not cut:
                if len(block) > limit + 2:
                    raise LineTooLong(offset)
                continue
            body, block = block[:cut - 1], block[cut:]
        yield offset, body
        offset += len(body) + 1
        if ended:
            return


def _scan(handle: IO[bytes], whole: bytes | None, path: str | None, amber: float | None,
          red: float | None) -> dict:
    read = handle.read
    head, done = (whole, True) if whole is not None else (read(CHUNK), False)
    while True:
        sample = _sample(head, SNIFF, done)
        if len(sample) < SNIFF and not done and len(head) < 8 * CHUNK:
            more = read(CHUNK)
            done, head = not more, head + more
            continue
        adapter = _detect(sample)
        if (adapter is None or adapter.name not in FORMATS) and len(sample) == SNIFF:
            adapter = _detect(_sample(head, SNIFF_MORE, done))  # the first lines do not settle it
        break
    if not head or head.isspace():
        return skipped_row(path, "empty")
    if adapter is None or adapter.name not in FORMATS:
        found = f"format {adapter.name}" if adapter is not None else "no known transcript format"
        row = skipped_row(path, f"{found}: report reads Claude Code sessions and Codex rollouts")
        row["format"] = adapter.name if adapter is not None else None
        return row
    row = new_row(path, adapter.name)
    reader = _Claude if adapter.name == "claude-code" else _Codex
    state = reader(row)
    try:
        for offset, body in _blocks(read, head, done):
            state.feed(offset, body, DEFAULT_MAX_RECORD_BYTES + 1)
    except LineTooLong as exc:
        row["skipped"] = f"line {_numbers(handle, [exc.args[0]])[0]} is over the size bound " \
                         f"({DEFAULT_MAX_RECORD_BYTES >> 20} MiB)"
        return row
    if state.broken:
        row["broken"] = _numbers(handle, state.broken)
    state.finish(amber, red)
    return row


def _numbers(handle: IO[bytes], offsets: list[int]) -> list[int]:
    """The line numbers of the lines starting at ``offsets`` (in order): the file is read again
    from the start, which only a file with a broken line pays."""
    handle.seek(0)
    numbers, lineno, at = [], 1, 0
    for offset in offsets:
        while at < offset:
            data = handle.read(min(CHUNK, offset - at))
            if not data:
                break
            lineno += data.count(b"\n")
            at += len(data)
        numbers.append(lineno)
    return numbers


class _Reader:
    """What a file's lines give, read in order."""

    def __init__(self, row: dict) -> None:
        self.row = row
        # request key (else its line's offset) -> its entry; a later line of the same response
        # replaces the entry in its place
        self.requests: dict[Any, list] = {}
        self.main: dict[Any, tuple] = {}  # the main conversation's: key -> (time, prompt, model, window)
        self.results: list[int] = []  # estimated tokens of each tool result since the last compaction
        self.first, self.last = "~", ""  # the oldest and newest line times seen
        self.broken: list[int] = []  # offsets of usage lines that are not JSON

    def parse(self, offset: int, raw: bytes) -> Any:
        """A line's object (None when it is not one), its time noted."""
        try:
            obj = loads(raw)
        except JSONDecodeError:
            if raw.strip():
                self.broken.append(offset)
            return None
        if type(obj) is not dict:
            return None
        ts = obj.get("timestamp")
        if type(ts) is str and ts[:4].isdigit():  # an ISO time (fixtures write other words)
            self.last = max(self.last, ts)
            self.first = min(self.first, ts)
        return obj

    def compaction(self) -> None:
        self.row["compactions"] += 1
        self.results = []

    def finish(self, amber: float | None, red: float | None) -> None:
        row = self.row
        row["first"] = self.first if self.first != "~" else None
        row["last"] = self.last or None
        requests = row["requests"] = list(self.requests.values())
        models = row["models"]
        inp = write = read = out = unpriced = 0
        dollars = 0.0
        for entry in requests:
            entry[8] = usd = _cost(entry)
            inp += entry[3]
            write += entry[4]
            read += entry[5]
            out += entry[6]
            if usd is None:
                unpriced += 1
            else:
                dollars += usd
            model = entry[2] or "unknown"
            models[model] = models.get(model, 0) + 1
        row["sums"] = [len(requests), inp, write, read, out, dollars, unpriced]
        peak, amber_s, red_s = None, 0.0, 0.0
        previous = None  # (time, level) of the request before: its level holds until this one
        levels = {}  # (model, window) -> budget, amber and red levels
        for ts, prompt, model, window in self.main.values():
            figures = levels.get((model, window))
            if figures is None:
                figures = levels[model, window] = _levels(model, window, amber, red)
            budget, amber_at, red_at = figures
            percent = 100 * prompt / budget if budget else 0.0
            if peak is None or percent > peak[0]:
                peak = [round(percent, 3), prompt, ts, budget]
            if previous is not None and previous[1] is not None:  # times read only when amber or red
                since, when = _time(previous[0]), _time(ts)
                if since is not None and when is not None:
                    gap = min(max((when - since).total_seconds(), 0.0), IDLE_CAP)
                    if previous[1] == "red":
                        red_s += gap
                    else:
                        amber_s += gap
            level = meter_state(percent, amber_at, red_at)
            level = level if level in ("red", "amber") else None
            previous = (ts or (previous[0] if previous else None), level)
        row["peak"], row["amber_s"], row["red_s"] = peak, round(amber_s, 3), round(red_s, 3)
        older = self.results[:-KEEP_RESULTS] if KEEP_RESULTS else self.results
        last_prompt = peak and next(reversed(self.main.values()))[1]
        row["reclaimable"] = min(sum(older), last_prompt or 0)


class _Claude(_Reader):
    def __init__(self, row: dict) -> None:
        super().__init__(row)
        self.boundary = False  # the last compaction line was a boundary (its summary follows)
        self.named = False
        # the last usage line read and its response's id: parsed once the next usage line
        # belongs to another response (a response split over lines counts its last line)
        self.pending: tuple[int, bytes, bytes] | None = None

    def feed(self, offset: int, body: bytes, limit: int) -> None:
        """Read a block of lines: each is looked at where Claude Code writes what it holds (a
        response's usage near its end, a tool result's type and a boundary's subtype near its
        start, a compact summary's flag near its end), and only usage and compaction lines
        are parsed."""
        for raw in body.split(b"\n"):
            size = len(raw)
            if size > limit:
                raise LineTooLong(offset)
            if raw.rfind(b'"usage"') >= 0:
                self.usage(offset, raw)
            else:
                start = raw[:HEAD_WITHIN]
                if b'"tool_result"' in start:  # its size is all the report needs
                    if b'"isSidechain":true' not in raw[:SIDECHAIN_WITHIN]:
                        self.results.append(size // CLAUDE_BYTES_PER_TOKEN)
                elif b'"compact_boundary"' in start or b'"isCompactSummary":true' in raw[-TAIL_WITHIN:]:
                    if self.pending is not None:
                        self.flush()
                    self.read(offset, raw)
            offset += size + 1

    def usage(self, offset: int, raw: bytes) -> None:
        at = raw.find(RESPONSE_ID)
        if at < 0:
            if self.pending is not None:
                self.flush()
            self.read(offset, raw)
            return
        at += len(RESPONSE_ID)
        response = raw[at:raw.find(b'"', at)]
        pending = self.pending
        self.pending = (offset, raw, response)
        if pending is not None:
            if pending[2] != response:
                self.read(pending[0], pending[1])
            elif not pending[1].rstrip(b"\r").endswith(b"}"):
                self.broken.append(pending[0])  # cut short: not JSON, though the next line tells more

    def flush(self) -> None:
        offset, raw, _ = self.pending
        self.pending = None
        self.read(offset, raw)

    def finish(self, amber: float | None, red: float | None) -> None:
        if self.pending is not None:
            self.flush()
        super().finish(amber, red)

    def read(self, offset: int, raw: bytes) -> None:
        obj = self.parse(offset, raw)
        if obj is None:
            return
        if not self.named:
            self.name(obj)
        kind = obj.get("type")
        if kind is None and "lookoutMoved" in obj:  # a response a compaction moved left its usage here
            kind = "assistant"
        if kind != "assistant" or obj.get("isApiErrorMessage") is True:
            if kind == "system" and obj.get("subtype") == "compact_boundary":
                self.compaction()
                self.boundary = True
            elif obj.get("isCompactSummary") is True:
                if not self.boundary:
                    self.compaction()  # an older Claude Code writes the summary alone
                self.boundary = False
            elif b'"tool_result"' in raw and obj.get("isSidechain") is not True:
                self.results.append(len(raw) // CLAUDE_BYTES_PER_TOKEN)
            return
        usage = usage_of(obj)
        if usage is None or usage[0] == "<synthetic>":
            return
        model, uncached, write, read, output, write_1h = usage[0], *map(_int, usage[1:])
        if not (uncached or write or read or output):
            return
        self.boundary = False
        mid, rid = obj["message"].get("id"), obj.get("requestId")
        key = f"{mid}:{rid if type(rid) is str else ''}" if type(mid) is str and mid else offset
        ts = obj.get("timestamp")
        ts = ts if type(ts) is str else None
        model = model if type(model) is str and model else None
        self.requests[key] = [key if type(key) is str else None, ts, model, uncached, write, read, output,
                              write_1h, None]
        if obj.get("isSidechain") is not True:
            self.main[key] = (ts, uncached + write + read, model, None)

    def name(self, obj: dict) -> None:
        row = self.row
        sid, cwd = obj.get("sessionId"), obj.get("cwd")
        if type(cwd) is str and cwd:
            row["project"] = cwd
            self.named = True
        if row["session"] is None and type(sid) is str and sid:  # bytes: no file name
            row["session"] = sid


_INPUT, _CACHED, _WRITTEN, _OUTPUT = (USAGE_KEYS.index(k) for k in
                                      ("input_tokens", "cached_input_tokens", "cache_write_input_tokens",
                                       "output_tokens"))


class _Codex(_Reader):
    def __init__(self, row: dict) -> None:
        super().__init__(row)
        self.model: str | None = None
        self.named = False
        self.previous: Any = None  # the last token_count's figures (Codex writes some twice)

    def feed(self, offset: int, body: bytes, limit: int) -> None:
        """Read a block of lines: Codex writes a line's type (and its payload's) first, so only
        the start of a line is looked at, and only the lines that record usage, the model, the
        session or a compaction are parsed."""
        for raw in body.split(b"\n"):
            size = len(raw)
            if size > limit:
                raise LineTooLong(offset)
            start = raw[:TYPE_WITHIN]
            if b'_call_output"' in start:  # a tool's output: its size is all the report needs
                self.results.append(size // BYTES_PER_TOKEN)
            elif (b'"token_count"' in start or b'"turn_context"' in start or b'"compacted"' in start
                  or b'"session_meta"' in start):
                self.read(offset, raw)
            offset += size + 1

    def read(self, offset: int, raw: bytes) -> None:
        obj = self.parse(offset, raw)
        if obj is None:
            return
        kind, payload = obj.get("type"), obj.get("payload")
        if type(payload) is not dict:
            return
        row = self.row
        if kind == "event_msg" and payload.get("type") == "token_count":
            info = payload.get("info")
            if type(info) is not dict:
                return
            total, last = info.get("total_token_usage"), info.get("last_token_usage")
            if (total, last) == self.previous:
                return
            self.previous = (total, last)
            if type(last) is not dict:
                return
            values = [_int(last.get(k)) for k in USAGE_KEYS]
            inp, cached, written, out = values[_INPUT], values[_CACHED], values[_WRITTEN], values[_OUTPUT]
            if not (inp or cached or written or out):
                return
            window = _int(info.get("model_context_window")) or None
            ts = obj.get("timestamp")
            ts = ts if type(ts) is str else None
            uncached = max(inp - cached - written, 0)
            self.requests[offset] = [None, ts, self.model, uncached, written, cached, out, 0, None]
            self.main[offset] = (ts, uncached + written + cached, self.model, window)
        elif kind == "session_meta":  # the first is the rollout's own (a fork's carries its parents')
            sid, cwd = payload.get("id"), payload.get("cwd")
            if type(sid) is str and sid and not self.named:
                row["session"] = sid
                self.named = True
            if type(cwd) is str and cwd and row["project"] is None:
                row["project"] = cwd
        elif kind == "turn_context":
            model, cwd = payload.get("model"), payload.get("cwd")
            if type(model) is str and model:
                self.model = model
            if type(cwd) is str and cwd and row["project"] is None:
                row["project"] = cwd
        elif kind == "compacted":
            self.compaction()


def _time(ts: str | None) -> dt.datetime | None:
    """``core.times.parse_time``, quicker for the times agents write (ISO with a zone)."""
    try:
        when = dt.datetime.fromisoformat(ts)
    except (TypeError, ValueError):
        return parse_time(ts)
    return when if when.tzinfo is not None else parse_time(ts)


def _int(value: Any) -> int:
    return value if type(value) is int and value > 0 else 0  # not a bool


def _model(name: str | None):
    if name not in _PRICES:
        model = lookup_model(name)
        _PRICES[name] = model if getattr(model, "known", True) else None
    return _PRICES[name]


def _cost(entry: list) -> float | None:
    """``meter.cost.usage_cost`` of a request, summed: under its model's long-context threshold
    from the price of one token of each kind, which that function gives (worked out once a
    model); None when a kind of token it holds has no price."""
    model = _model(entry[2])
    if model is None:
        return None
    inp, write, read, out, write_1h = entry[3:8]
    threshold = model.long_context_threshold
    if threshold is not None and inp + write + read > threshold:
        parts = usage_cost(Usage(None, inp, write, read, out, write_1h), model)
        return None if parts is None else sum(parts.values())
    one_hour = min(write_1h, write)
    usd = 0.0
    for tokens, price in zip((inp, write - one_hour, one_hour, read, out), _unit_prices(model)):
        if tokens:
            if price is None:
                return None
            usd += tokens * price
    return usd


_UNIT: dict[str, tuple] = {}


def _unit_prices(model) -> tuple:
    """Dollars a token of input, 5-minute and 1-hour cache write, cache read and output (None:
    no price)."""
    if model.name not in _UNIT:
        units = []
        for figures in ((1, 0, 0, 0, 0), (0, 1, 0, 0, 0), (0, 1, 0, 0, 1), (0, 0, 1, 0, 0), (0, 0, 0, 1, 0)):
            parts = usage_cost(Usage(None, *figures), model)
            units.append(None if parts is None else sum(parts.values()))
        _UNIT[model.name] = tuple(units)
    return _UNIT[model.name]


def _levels(model: str | None, window: int | None, amber: float | None, red: float | None) -> tuple[int, float, float]:
    """The budget a prompt is a share of, and the meter's amber and red levels, as measure's
    meter has them for ``model`` (a window the transcript records replaces the model's)."""
    key = (model, window, amber, red)
    if key not in _LEVELS:
        figures = budget_figures(lookup_model(model), window, Settings(), 0)
        budget = figures.budget
        red_at = red if red is not None else (round(100 * figures.summary_point / budget, 3) if budget else 100.0)
        _LEVELS[key] = (budget, amber if amber is not None else DEFAULT_AMBER, red_at)
    return _LEVELS[key]
