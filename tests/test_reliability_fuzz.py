"""Fuzzing the reader, every adapter and every command with broken transcripts.

Each input starts as a valid generated transcript and is then damaged: a line cut short (also
inside a UTF-8 sequence), invalid UTF-8, lone surrogates, NaN and infinities, deep nesting,
a wrong type in a known field (``message.content`` a number, ``payload`` a list, ``usage``
strings…), a huge line, duplicated and swapped lines, garbage, a byte-order mark, NUL bytes.

Whatever comes in, lookout gives a clear one-line error (exit 2) or warns and passes the line
through (exit 0): never a traceback, an "internal error", a hang or invalid JSON written out.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess

import orjson
import pytest
from conftest import lookout_exe
from hypothesis import given
from hypothesis import strategies as st
from strategies import transcripts
from test_reliability_harness import (
    LONG,
    assert_clean,
    assert_new_lines_are_json,
    bodies,
    clear_and_write,
    hsettings,
    known_error,
    records_of,
    run_cli,
    tally,
    workdir,
)

from lookout_cli.core.errors import LookoutError
from lookout_cli.formats import ADAPTERS, Transcript, load_adapter

NOW = "2026-01-02T12:00:00Z"

COMMANDS = [
    ["measure"],
    ["measure", "--json"],
    ["compact", "--force", "--max-tokens", "2k", "--max-tool-output-chars", "300", "--now", NOW],
    ["compact", "--stage", "prune", "--stage", "clamp", "--max-tool-output-chars", "100", "--now", NOW],
    ["clear-images", "--budget", "100", "--keep-recent", "0"],
    ["clear-images", "--repair"],
    ["mentions", "--all"],
    ["memory", "inject"],
    ["memory", "learn"],
    ["restore"],
    ["prepare-idle", "--now", NOW],
]

# Fields every format relies on: a wrong type here is the likeliest crash.
KNOWN_KEYS = {
    "message", "content", "payload", "usage", "type", "role", "tool_calls", "function", "arguments", "input",
    "source", "data", "image_url", "url", "messages", "choices", "toolUseResult", "compactMetadata",
    "replacement_history", "info", "total_token_usage", "last_token_usage", "input_tokens", "output_tokens",
    "cache_read_input_tokens", "cache_creation_input_tokens", "prompt_tokens", "text", "tool_use_id",
    "tool_call_id", "call_id", "id", "name", "output", "parentUuid", "uuid", "logicalParentUuid", "timestamp",
    "isCompactSummary", "subtype", "summary", "media_type", "system", "tools", "model", "model_context_window",
    "cached_input_tokens", "file", "base64", "is_error", "signature", "encrypted_content", "sessionId", "cwd",
}
WRONG_VALUES = [0, -1, 1.5, 10**30, "", "100", "str", [], [1, "a", None], {}, {"type": "text"}, None, True,
                [[[]]], {"content": 5}, "data:image/png;base64,!!!!", "\ud800"]


def _paths(obj, prefix=(), depth=0):
    """Every (path, key) inside a parsed line, down to a modest depth."""
    if depth > 12:
        return
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for key, value in items:
        yield (*prefix, key)
        yield from _paths(value, (*prefix, key), depth + 1)


def _set(obj, path, value):
    for key in path[:-1]:
        obj = obj[key]
    obj[path[-1]] = value


def _dump(obj) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "backslashreplace")


def _deep(depth: int, kind: str) -> bytes:
    return (b"[" * depth + b"]" * depth) if kind == "list" else (b'{"a":' * depth + b"1" + b"}" * depth)


@st.composite
def damage(draw, data: bytes) -> tuple[bytes, list[str]]:
    """Apply one to three kinds of damage to a transcript's lines; say which."""
    lines = data.splitlines(keepends=True) or [b"\n"]
    done = []
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(lines) - 1))
        line = lines[i]
        kind = draw(st.sampled_from([
            "truncate", "invalid-utf8", "surrogate", "nan", "deep", "deep-field", "wrong-type", "wrong-type",
            "wrong-type", "huge", "duplicate", "swap", "garbage", "bom", "nul", "top-level", "blank",
            "huge-number", "drop",
        ]))
        done.append(kind)
        if kind == "truncate":
            lines[i] = line[: draw(st.integers(0, max(0, len(line) - 1)))]
        elif kind == "invalid-utf8":
            at = draw(st.integers(0, len(line)))
            lines[i] = line[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
                                                         b"\xc0\xaf", b"\x80\x80"])) + line[at:]
        elif kind == "surrogate":
            lines[i] = line.replace(b'":"', draw(st.sampled_from([b'":"\\ud800', b'":"\\udfff\\ud800',
                                                                  b'":"\\uDBFF'])), 1)
        elif kind == "nan":
            lines[i] = line.replace(b":0", draw(st.sampled_from([b":NaN", b":Infinity", b":-Infinity"])), 1) \
                if b":0" in line else line.replace(b'":', b'":NaN,"x":', 1)
        elif kind == "deep":
            lines.insert(i, _deep(draw(st.sampled_from([100, 1000, 1023, 5000, 100_000])),
                                  draw(st.sampled_from(["list", "dict"]))) + b"\n")
        elif kind == "huge-number":
            lines[i] = line.replace(b":0", draw(st.sampled_from([b":1e400", b":-1e400", b":1" + b"0" * 5000])), 1)
        else:
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError:
                obj = None
            if kind == "deep-field" and isinstance(obj, dict):
                # valid JSON nested just under the parser's limit, in a field of a real record
                depth = draw(st.sampled_from([200, 900, 1000, 1020]))
                text = _dump(obj)
                lines[i] = text[:-1] + b',"x_deep":' + _deep(depth, "list") + b"}\n"
            elif kind == "wrong-type" and isinstance(obj, (dict, list)):
                paths = list(_paths(obj))
                known = [p for p in paths if p and p[-1] in KNOWN_KEYS]
                if paths:
                    pool = known if known and draw(st.integers(0, 9)) < 8 else paths
                    path = pool[draw(st.integers(0, len(pool) - 1))]
                    _set(obj, path, draw(st.sampled_from(WRONG_VALUES)))
                    lines[i] = _dump(obj) + b"\n"
            elif kind == "huge":
                lines.insert(i, b'{"type":"x","blob":"' + b"A" * draw(st.sampled_from([70_000, 2_000_000])) + b'"}\n')
            elif kind == "duplicate":
                lines.insert(i, line)
            elif kind == "swap" and len(lines) > 1:
                j = draw(st.integers(0, len(lines) - 1))
                lines[i], lines[j] = lines[j], lines[i]
            elif kind == "garbage":
                lines.insert(i, draw(st.sampled_from([b"not json\n", b"{\n", b"}\n", b"[1,2\n", b'{"a":}\n',
                                                      b"\x00\x01\x02\n", b'"just a string"\n', b"\r\n", b"\t \n"])))
            elif kind == "bom":
                lines[0] = b"\xef\xbb\xbf" + lines[0]
            elif kind == "nul":
                lines[i] = line.replace(b'"', b'"\x00', 1)
            elif kind == "top-level":
                lines.insert(i, draw(st.sampled_from([b"[1,2,3]\n", b"42\n", b"null\n", b"true\n", b'"s"\n',
                                                      b"[{\"role\":\"user\"}]\n"])))
            elif kind == "blank":
                lines.insert(i, b"\n")
            elif kind == "drop" and len(lines) > 1:
                del lines[i]
    return b"".join(lines), done


@st.composite
def broken_transcripts(draw):
    fmt, data, _conv = draw(transcripts(max_turns=3))
    bad, kinds = draw(damage(data))
    return fmt, data, bad, kinds


def _check_output(outcome, bad: bytes) -> None:
    """What a command writes is valid: each line is JSON lookout wrote or a line it was given."""
    given_lines = set(bodies(bad))
    for record in records_of(outcome.out):
        if record.body in given_lines or not record.body.strip():
            continue
        try:
            orjson.loads(record.body)
        except orjson.JSONDecodeError as exc:
            try:  # lone surrogates are escaped JSON that orjson refuses but JSON allows
                json.loads(record.body, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
            except ValueError:
                raise AssertionError(f"wrote a line that is not JSON ({exc}): {record.body[:200]!r}") from None


@hsettings(8, long=400)
@given(case=broken_transcripts(), which=st.lists(st.integers(0, len(COMMANDS) - 1), min_size=3, max_size=5,
                                                 unique=True), forced=st.sampled_from([None, *ADAPTERS]))
def test_commands_survive_broken_transcripts(case, which, forced, tmp_path_factory):
    fmt, _data, bad, kinds = case
    tally("fuzz inputs tried")
    ws = tmp_path_factory.mktemp("ws")
    with workdir(ws):
        for n in which:
            args = [*COMMANDS[n], "-q"]
            if forced and n % 2:
                args += ["--format", forced]
            outcome = run_cli(args, bad)
            tally("fuzz command runs")
            assert_clean(outcome, args)
            if outcome.code == 0 and not args[:2] == ["measure", "--json"]:
                _check_output(outcome, bad)
            strict = run_cli([*args, "--strict"], bad) if n == 0 else None
            if strict is not None:
                tally("fuzz command runs")
                assert_clean(strict, args + ["--strict"])


@hsettings(25, long=2000)
@given(case=broken_transcripts(), forced=st.sampled_from(list(ADAPTERS)))
def test_every_adapter_reads_and_edits_broken_transcripts(case, forced):
    """Straight to each adapter (forced, whatever the input): build the view, clear every tool
    result and image, write the records out. Only a LookoutError may stop it."""

    _fmt, _data, bad, _kinds = case
    tally("fuzz inputs tried")
    records = records_of(bad)
    for record in records:
        record.obj  # parse every line (errors are recorded on the record, never raised)
    transcript = Transcript(records, load_adapter(forced))
    try:
        written = clear_and_write(transcript, 5)
    except LookoutError:
        return
    except TypeError as exc:  # a known failure is counted (see KNOWN_ERRORS), others fail
        if known_error([], f"{type(exc).__name__}: {exc}"):
            return
        raise
    assert_new_lines_are_json(set(bodies(bad)), written)  # an edited line is still JSON


@pytest.mark.parametrize("fmt", ["claude-code", "codex", "openai", "anthropic"])
@pytest.mark.parametrize("field,value", [
    ("message.content", 5), ("message", []), ("payload", [1, 2]), ("usage", "lots"),
    ("message.usage.input_tokens", "100"), ("payload.info.last_token_usage.input_tokens", "9"),
    ("content", {"type": "text"}), ("tool_calls", "call"), ("messages", {"role": "user"}),
    ("toolUseResult", "x"), ("message.content.0.source.data", 7), ("content.0.image_url", "x"),
])
def test_wrong_field_types_in_known_records(fmt, field, value):
    """Each listed field, given the wrong type, in every record that has it."""
    from strategies import Call, Conversation, Result, Step, Turn, png_base64, render

    image = png_base64(2, 2, (9, 9, 9))
    conv = Conversation("claude-sonnet-4-5", "sys", [
        Turn("first @notes.txt", image, [Step("t", "x", [Call("c1", "Read", {"path": "a"}, Result("out " * 300)),
                                                         Call("c2", "view_image", {}, Result(None, image))],
                                              [1, 0])], "done"),
        Turn("remember that tabs win", None, [], "ok")], None, [], False, [0], False, True)
    lines = []
    hit = 0
    for line in render(conv, fmt).splitlines():
        obj = json.loads(line)
        node, keys = obj, field.split(".")
        try:
            for key in keys[:-1]:
                node = node[int(key)] if isinstance(node, list) else node[key]
            if isinstance(node, dict) and keys[-1] in node:
                node[keys[-1]] = value
                hit += 1
        except (KeyError, IndexError, TypeError, ValueError):
            pass
        lines.append(_dump(obj))
    bad = b"\n".join(lines) + b"\n"
    # every command in the long form; in CI measure and one writer, a different one per case
    writer = (2, 4, 8, 6)[sum(map(ord, field + fmt)) % 4]
    for args in COMMANDS if LONG else [COMMANDS[0], COMMANDS[writer]]:
        outcome = run_cli([*args, "-q"], bad)
        tally("bad inputs tried")
        assert_clean(outcome, args)
        if outcome.code == 0 and args[:2] != ["measure", "--json"]:
            _check_output(outcome, bad)


# --- resources: huge and endless lines -------------------------------------------------------
def _run_measured(cmd: list[str], stdin, env=None) -> tuple[int, bytes, int]:
    """Run a process; return its exit status, standard error and peak memory (KiB)."""
    proc = subprocess.Popen(cmd, stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    err = proc.stderr.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, err, usage.ru_maxrss


def test_endless_line_from_dev_zero_fails_fast_with_bounded_memory(tmp_path):
    """``head -c 300M /dev/zero | lookout measure --max-record-bytes 1M``: exit 2, one line,
    and it stops reading long before the end (head is cut off by a closed pipe)."""
    head = subprocess.Popen(["head", "-c", "300M", "/dev/zero"], stdout=subprocess.PIPE)
    code, err, peak_kib = _run_measured([*lookout_exe(), "measure", "--max-record-bytes", "1M"], head.stdout)
    head.stdout.close()
    head_status = head.wait(timeout=60)
    tally("bad inputs tried")
    assert code == 2, err
    lines = err.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lookout: error: line 1 is longer than 1,048,576 bytes"), err
    assert head_status == -signal.SIGPIPE  # lookout stopped reading: head could not write it all
    # the interpreter and its libraries take ~100-220 MB on their own; reading all 300 MB would not fit
    assert peak_kib - _baseline_kib() < 300 * 1024, f"peak memory {peak_kib} KiB for a 1 MiB bound"


def test_endless_stream_without_newline(tmp_path):
    """/dev/zero itself, which never ends, into a command that reads the whole transcript."""
    with open("/dev/zero", "rb") as zero:
        code, err, peak_kib = _run_measured([*lookout_exe(), "compact", "--force", "--max-record-bytes", "2M"], zero)
    tally("bad inputs tried")
    assert code == 2 and b"longer than 2,097,152 bytes" in err, err
    assert peak_kib - _baseline_kib() < 300 * 1024  # an unbounded read of /dev/zero would grow without end


def test_line_just_over_the_bound_with_crlf_is_refused_cleanly():
    for body in (b"x" * 1023, b"x" * 1024, b"x" * 1025):
        for ending in (b"\n", b"\r\n", b""):
            outcome = run_cli(["measure", "--max-record-bytes", "1K", "-q"], body + ending)
            tally("bad inputs tried")
            assert_clean(outcome, ["measure"])
            if len(body) > 1024:
                assert outcome.code == 2 and "longer than 1,024 bytes" in outcome.err
            else:  # within the bound: read, then refused as no transcript (not as too long)
                assert outcome.code == 2 and "not a transcript lookout reads" in outcome.err, outcome.err


@pytest.mark.parametrize("command", [["measure"], ["compact", "--force"], ["restore"], ["clear-images"]])
def test_deeply_nested_lines_pass_through(command):
    """100,000 nested arrays, and JSON nested just below the parser's limit inside a real
    record: a warning or a clean pass, never a crash."""
    real = (b'{"role":"user","content":"hello"}\n{"role":"assistant","content":"hi","x":' + _deep(1020, "list")
            + b"}\n")
    for data in (_deep(100_000, "list") + b"\n", b'{"a":' * 50_000 + b"\n", real):
        outcome = run_cli([*command, "-q"], data)
        tally("bad inputs tried")
        assert_clean(outcome, command)
        if outcome.code == 0:
            assert outcome.out == data


def test_non_finite_numbers_are_never_written():
    """1e400 parses as infinity in Python; an edited record holding one must not be written
    as ``Infinity`` (which is not JSON). The line passes through untouched instead."""
    from strategies import png_base64

    image = png_base64(2, 2, (1, 2, 3))
    line = ('{"role":"user","x":1e400,"content":[{"type":"image","source":{"type":"base64",'
            f'"media_type":"image/png","data":"{image}"}}}},{{"type":"text","text":"see"}}]}}\n').encode()
    data = b'{"role":"user","content":"hi"}\n{"role":"assistant","content":"ok"}\n' + line
    outcome = run_cli(["clear-images", "--budget", "1", "--keep-recent", "0", "--format", "anthropic", "-q"], data)
    assert_clean(outcome, ["clear-images"])
    assert b"Infinity" not in outcome.out
    assert line in outcome.out  # passed through as it came


def _baseline_kib() -> int:
    """The peak a bare ``lookout --version`` reports from here. Linux carries the parent's
    high-water mark across fork and exec, so peaks are compared with this, not with zero."""
    proc = subprocess.Popen([*lookout_exe(), "--version"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _pid, _status, usage = os.wait4(proc.pid, 0)
    return usage.ru_maxrss
