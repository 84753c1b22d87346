"""The shared core: records keep their bytes, the store loses nothing, config layers, restore."""

from __future__ import annotations

import io
import json
import os
import stat
import sys

import orjson
import pytest
from conftest import real_transcripts, run_lookout

from lookout_cli.config import Config
from lookout_cli.core import jsonl
from lookout_cli.core.dataclass import dataclass
from lookout_cli.core.errors import LookoutError
from lookout_cli.core.fsutil import (
    atomic_write,
    raw_values,
    sealed_sections,
    sealed_values,
    sealed_writer,
    section_writer,
    sync_pending,
)
from lookout_cli.core.jsonl import (
    ORJSON,
    Record,
    RecordWriter,
    dumps,
    dumps_compact,
    loads_exact,
    read_as_orjson,
    read_records,
)
from lookout_cli.core.saved import MARKER, SavedStore, placeholder, restore_lines

TRICKY = (
    b'{"a":1}\n'
    b'{"big":123456789012345678901234567890,"e":"caf\\u00e9","s":"\\ud800"}\r\n'
    b"not json at all\n"
    b"\n"
    b'{"x": [1, 2.50 ,{}]}'  # no final newline
)


def _roundtrip(data: bytes) -> bytes:
    out = io.BytesIO()
    RecordWriter(out).write_all(read_records(io.BytesIO(data)))
    return out.getvalue()


def test_untouched_records_keep_their_bytes():
    assert _roundtrip(TRICKY) == TRICKY


def test_edited_record_keeps_big_integers_and_surrogates_and_line_ending():
    records = list(read_records(io.BytesIO(TRICKY)))
    obj = records[1].edit()
    obj["added"] = True
    data = records[1].to_bytes()
    assert data.endswith(b"\r\n")
    assert b"123456789012345678901234567890" in data
    assert b"\\ud800" in data and "café".encode() in data


def test_record_parsing_flags_non_json():
    records = list(read_records(io.BytesIO(TRICKY)))
    assert records[2].obj is None and records[2].error
    assert records[3].blank and records[3].error is None
    assert records[1].data["big"] == 123456789012345678901234567890 or isinstance(records[1].data["big"], float)


def test_record_size_is_bounded():
    with pytest.raises(LookoutError, match="longer than 100 bytes"):
        list(read_records(io.BytesIO(b"x" * 500), max_record_bytes=100))
    # a long line that does end within the bound is fine
    assert len(list(read_records(io.BytesIO(b"y" * 99 + b"\n"), max_record_bytes=100))) == 1


def test_lines_are_cut_the_same_whatever_the_chunks():
    """Lines are cut out of chunks: a line across two or many chunks, a CRLF split between two,
    an empty line, a last line without a newline come out as their bytes."""
    lines = [b'{"a":1}\n', b"\n", b"x" * 50 + b"\r\n", b"y" * 7 + b"\n", b'{"last":true}']
    data = b"".join(lines)
    for chunk in (1, 2, 3, 7, 8, 9, 64, 1 << 20):
        got = list(read_records(io.BytesIO(data), chunk=chunk))
        assert [r.raw for r in got] == lines, chunk
        assert [r.lineno for r in got] == [1, 2, 3, 4, 5]


def test_an_endless_line_stops_the_read_within_the_bound():
    """A stream that never ends its line is refused once it is over the bound, not read whole."""

    class Endless(io.RawIOBase):
        given = 0

        def readable(self):
            return True

        def readinto(self, buffer):
            buffer[:] = b"z" * len(buffer)
            self.given += len(buffer)
            return len(buffer)

    stream = Endless()
    with pytest.raises(LookoutError, match="line 2 is longer than 1,000 bytes"):
        list(read_records(stream, max_record_bytes=1000, lineno=1, chunk=256))
    assert stream.given <= 1000 + 2 + 256


def test_appending_after_a_line_without_newline_inserts_one():
    out = io.BytesIO()
    writer = RecordWriter(out)
    writer.write(Record(1, b'{"a":1}'))
    writer.write(Record.new({"b": 2}))
    assert out.getvalue() == b'{"a":1}\n{"b":2}\n'


def test_sealed_values_read_back_what_was_put_tables_included_and_refuse_damage(tmp_path):
    import array

    path = tmp_path / "memo"
    starts = array.array("q", range(1000))
    values = [{"key": "x", "n": [1, 2]}, memoryview(starts)[:501], bytearray(b"digests"), b"", None]
    with sealed_writer(path) as put:
        for value in values:
            put(value)
    got = list(sealed_values(path))
    assert got == [values[0], starts[:501].tobytes(), b"digests", b"", None]  # tables come back as bytes
    data = bytearray(path.read_bytes())
    data[-3] ^= 1
    path.write_bytes(bytes(data))
    assert sealed_values(path) is None


def test_a_large_file_of_sections_is_mapped_and_read_alike(tmp_path, monkeypatch):
    """A file of sections from ``MAP_BYTES`` on is mapped, not read: the same values, a section
    appended after them, a damaged one refused, read where it cannot be mapped; and a head left
    blank (a run stopped before it sealed its section) ends what is read, as a torn section does."""
    import marshal
    import mmap

    from lookout_cli.core import fsutil

    path = tmp_path / "memo"
    table = bytes(range(256)) * (fsutil.MAP_BYTES // 256 + 1)
    with section_writer(path) as put:
        put({"first": 0})
        put(table)
    read = sealed_sections(path)
    assert isinstance(read.payloads[0].obj, mmap.mmap) and path.stat().st_size >= fsutil.MAP_BYTES
    assert [marshal.loads(v) for v in raw_values(read.payloads[0])] == [{"first": 0}, table]
    with section_writer(path, read) as put:
        put({"first": 1})
    assert [marshal.loads(next(raw_values(p))) for p in sealed_sections(path).payloads] == [{"first": 0}, {"first": 1}]
    whole = sealed_sections(path)
    with open(path, "ab") as fh:
        fh.write(bytes(12) + b"half a section")
    blank = sealed_sections(path)
    assert len(blank.payloads) == 2 and blank.end == whole.end < blank.size
    def unmappable(*args, **kwargs):
        raise OSError(19, "No such device")  # (mmap's error on a file system that maps no file)

    monkeypatch.setattr(mmap, "mmap", unmappable)
    read = sealed_sections(path)
    assert type(read.payloads[0].obj) is bytes and len(read.payloads) == 2 and read.end == whole.end
    monkeypatch.undo()
    data = bytearray(path.read_bytes())
    data[len(table) // 2] ^= 1
    path.write_bytes(bytes(data))
    assert sealed_sections(path).payloads == []


def test_sections_append_to_the_file_read_and_only_to_it(tmp_path):
    """An appendable sealed file: a section appended after the ones read, none when the file
    changed since (a concurrent writer's), and a torn last section passed over."""
    import marshal

    path = tmp_path / "memo"

    def values() -> list[list]:
        return [[marshal.loads(v) for v in raw_values(p)] for p in sealed_sections(path).payloads]

    with section_writer(path) as put:
        put({"first": 0})
        put(bytearray(b"table"))
    first = sealed_sections(path)
    with section_writer(path, first) as put:
        put({"first": 1})
    assert values() == [[{"first": 0}, b"table"], [{"first": 1}]]
    size = path.stat().st_size
    with section_writer(path, first) as put:  # read before the append above: not written
        put({"first": "stale"})
    assert path.stat().st_size == size and len(values()) == 2
    grown = sealed_sections(path)
    with open(path, "ab") as fh:
        fh.write(b"\x05" + bytes(50))  # a run killed while appending
    torn = sealed_sections(path)
    assert values() == [[{"first": 0}, b"table"], [{"first": 1}]] and torn.end == grown.end < torn.size
    with section_writer(path, torn) as put:  # never after what it cannot read
        put({"first": "after the tear"})
    assert path.stat().st_size == torn.size
    with section_writer(path) as put:  # written anew
        put({"first": 0})
    assert values() == [[{"first": 0}]]
    data = bytearray(path.read_bytes())
    data[-2] ^= 1
    path.write_bytes(bytes(data))
    assert sealed_sections(path).payloads == [] and sealed_sections(tmp_path / "none") is None


def test_dumps_compact_matches_agent_style():
    assert dumps_compact({"a": "é", "b": [1, None]}) == '{"a":"é","b":[1,null]}'.encode()


@pytest.mark.parametrize("line", [
    b'{"big":18446744073709551616,"neg":-9223372036854775809,"ok":9223372036854775807}',
    b'{"small":[1e-07,2.5e-05,0.0001,1.5e-5],"large":[1e16,1.2345678901234568e+17,1e+22]}',
    b'{"text":"uuid 3f5e-1a2b and 0.00001 in a string","n":[0.5,3.0,-0.0]}',
    b'{"lone":"\\ud800 then \\udfff","ctl":"\\u0000\\u001f\\b\\f\\n\\r\\t\\u007f\xe2\x80\xa8"}',
    b'{"digits":"12345678901234567890123","x":1}',
])
def test_edits_read_and_write_what_the_standard_library_does(line):
    """orjson reads big integers as floats and writes small and large floats in its own
    notation: an edited line must still come out as the standard library wrote it."""
    expected = json.loads(line)
    got = loads_exact(line)
    assert got == expected and repr(got) == repr(expected)  # 2**64 stays an int, -0.0 a float
    assert dumps_compact(got) == json.dumps(expected, ensure_ascii=False, separators=(",", ":")).encode(
        "utf-8", "backslashreplace")


READ_AS_ORJSON = [  # read by the standard library, as orjson reads them
    b'{"big":18446744073709551616,"neg":-9223372036854775809,"top":18446744073709551615,"low":-9223372036854775808}',
    b'[123456789012345678901234567890,-0,-0.0,1E2,1e-400,2.5e-05,0.1,1.7976931348623157e308]',
    b'{"id":"toolu_0000000000000000000a670a","n":1}', b'{"a":1,"a":2,"b":{"a":3}}', b'{"del":"\x7f"}',
    b' \t{"ws":true}\r\n', "[1, 2.5, \"\u2028\"]", b'{"pair":"\\ud83d\\ude00"}', b'{"esc":"\\\\ud800"}',
    b'{"code":"x = \\"\\\\uD800\\"","k\\ud83d\\ude00":[{"\\uDBFF\\uDFFF":1}]}',
]
LEFT_TO_ORJSON = [  # what orjson refuses (it raises), or what is left to it to be sure
    b'[1e400]', b'[-1e400]', b'{"lone":"\\ud800"}', b'NaN', b'[{"k":["\\ude00 low first"]}]',
    b'{"\\ud83d\\u0041":0}', b'{"high":"\\uD83D"}',
    b'[Infinity]', b'\xef\xbb\xbf{}', b'{"bad":"\xed\xa0\x80"}', b'{"bad":"\xff"}', b'{"tab":"a\tb"}', b'{"trail":1} x',
    b'', b'{"open":', b'[' * 1020 + b']' * 1020, b'[' * 1030 + b']' * 1030, "{\"text\":\"caf\u00e9 \ud800\"}",
]


@pytest.mark.parametrize("data", READ_AS_ORJSON + LEFT_TO_ORJSON, ids=range(len(READ_AS_ORJSON + LEFT_TO_ORJSON)))
def test_the_standard_library_reads_a_value_as_orjson_or_leaves_it_to_orjson(data):
    """``jsonl.loads`` reads with the standard library until orjson pays for its import: each
    value it reads there is orjson's (types, key order, -0.0 and all), and what orjson refuses
    it leaves to orjson (which raises)."""
    read = read_as_orjson(data)
    assert (read is not ORJSON) == (data in READ_AS_ORJSON)
    if read is not ORJSON:
        assert repr(read) == repr(orjson.loads(data))


def test_the_standard_library_reads_the_real_transcripts_lines_as_orjson():
    lines = [line for path in real_transcripts() for line in path.read_bytes().splitlines()]
    assert len(lines) > 500
    read = [read_as_orjson(line) for line in lines]
    assert [repr(v) for v in read if v is not ORJSON] == [repr(orjson.loads(line)) for v, line in zip(read, lines)
                                                          if v is not ORJSON]
    assert sum(v is ORJSON for v in read) <= len(lines) // 100  # (else a re-measure imports orjson)


def test_json_written_without_orjson_reads_back_as_orjson_writes_it(monkeypatch):
    monkeypatch.delitem(sys.modules, "orjson")  # as in a run that has not imported it (this test's has)
    monkeypatch.setattr(jsonl, "_orjson", None)
    monkeypatch.setattr(jsonl, "_standard_left", jsonl.STANDARD_READS)
    assert jsonl.fast_json() is None

    @dataclass(slots=True)
    class Part:
        name: str
        sizes: tuple = ()

    value = {"a": [Part("x", (1, 2.5e-05)), None, True], "é": "\u2028\n", "n": 18446744073709551615}
    assert orjson.loads(dumps(value)) == orjson.loads(orjson.dumps(value))
    for refused in ({"s": "\ud800"}, {"o": object()}, {"t": Part}, {"n": float("nan")}):  # (orjson: null)
        with pytest.raises(TypeError):
            dumps(refused)


def test_an_exact_read_without_orjson_is_the_standard_librarys_and_loads_no_orjson(monkeypatch):
    """``loads_exact`` in a run that has not imported orjson (an edit in a prompt's run): the
    value as with orjson loaded, big integers and lone surrogates exact, and orjson still not
    imported (a lone surrogate once made the read try orjson first)."""
    lines = [b'{"n": 123456789012345678901234567890, "s": "\\ud800 x", "f": 1.5}', b'[1, "\\u00e9", {"a": null}]',
             b'{"t": "\\ud83d\\ude00"}']
    with_orjson = [loads_exact(line) for line in lines]
    monkeypatch.delitem(sys.modules, "orjson")  # as in a run that has not imported it (this test's has)
    monkeypatch.setattr(jsonl, "_orjson", None)
    monkeypatch.setattr(jsonl, "_standard_left", jsonl.STANDARD_READS)
    without = [loads_exact(line) for line in lines]
    assert "orjson" not in sys.modules and jsonl.fast_json() is None
    assert [repr(v) for v in without] == [repr(v) for v in with_orjson]
    assert without[0]["n"] == 123456789012345678901234567890 and without[0]["s"] == "\ud800 x"
    with pytest.raises(ValueError):
        loads_exact(b'{"n": NaN}')


def test_store_is_content_addressed_and_idempotent(tmp_path):
    store = SavedStore(tmp_path / "s", command="test")
    one = store.put(b"hello", "text", tool="Bash")
    two = store.put(b"hello", "text", tool="Bash")
    assert one == two and one.path.read_bytes() == b"hello"
    assert one.path.parent.name == one.sha256[:2]
    assert not (tmp_path / "s" / "manifest.jsonl").exists()  # batched until the next sync
    sync_pending()  # as before a transcript is written, and at exit
    manifest = [orjson.loads(line) for line in (tmp_path / "s" / "manifest.jsonl").read_bytes().splitlines()]
    assert manifest[0]["sha256"] == one.sha256 and manifest[0]["command"] == "test"
    assert store.get(one.sha256) == b"hello"
    one.path.write_bytes(b"tampered")
    assert store.get(one.sha256) is None  # damaged content is never restored


def test_dry_run_store_writes_nothing(tmp_path):
    store = SavedStore(tmp_path / "s", dry_run=True)
    saved = store.put(b"data", "text")
    assert not saved.path.exists() and not (tmp_path / "s").exists()
    assert store.put_parts(iter([b"da", b"ta"]), "text") == saved and not (tmp_path / "s").exists()


def test_content_saved_a_piece_at_a_time_is_named_and_kept_as_if_saved_whole(tmp_path):
    store = SavedStore(tmp_path / "s", command="test")
    parts = [b"line %d\n" % n for n in range(10_000)]
    streamed = store.put_parts(iter(parts), "text", what="the context")
    assert streamed == store.put(b"".join(parts), "text")  # the same name, already there
    assert streamed.path.read_bytes() == b"".join(parts) and streamed.nbytes == len(b"".join(parts))
    again = store.put_parts(iter(parts), "text")  # saved before: the temporary copy goes
    assert again == streamed
    assert [p.name for p in (tmp_path / "s").iterdir() if p.name.startswith(".")] == []
    sync_pending()
    assert len((tmp_path / "s" / "manifest.jsonl").read_bytes().splitlines()) == 3

    def failing():
        yield b"half"
        raise OSError("the disk is full")

    with pytest.raises(OSError):
        store.put_parts(failing(), "text")
    assert [p.name for p in (tmp_path / "s").iterdir() if p.name.startswith(".")] == []  # no torn file left


def test_restore_lines_follows_nested_changes(tmp_path):
    store = SavedStore(tmp_path / "s")
    original = b'{"n":1}\n'
    first = store.put(original, "record")
    changed_once = f'{{"n":"{MARKER}{first.sha256}"}}\n'.encode()
    second = store.put(changed_once, "record")
    changed_twice = f'{{"n":"again {MARKER}{second.sha256}"}}\n'.encode()
    assert restore_lines(store, changed_twice) == [original]
    dropped = store.put(b'{"a":1}\n{"b":2}\n', "record")
    assert restore_lines(store, f'{{"s":"{MARKER}{dropped.sha256}"}}\n'.encode()) == [b'{"a":1}\n', b'{"b":2}\n']
    unknown = f'{{"s":"{MARKER}{"0" * 64}"}}\n'.encode()
    assert restore_lines(store, unknown) == [unknown]


def test_placeholder_names_size_file_lines_and_marker(tmp_path):
    store = SavedStore(tmp_path)
    content = store.put(b"x" * 2500, "text")
    original = store.put(b"{}\n", "record")
    text = placeholder("Bash output", content, original, tokens=600, lines=(1, 40))
    assert "2.5 KB" in text and "600 tokens" in text and str(content.path) in text
    assert "lines 1-40" in text and f"{MARKER}{original.sha256}" in text


def test_config_layers(tmp_path, monkeypatch):
    user = tmp_path / "config" / "lookout" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text('model = "user-model"\n[compaction]\nthreshold_percent = 70\ntail_turns = 3\n')
    project = tmp_path / "proj" / "sub"
    project.mkdir(parents=True)
    (tmp_path / "proj" / ".lookout.toml").write_text("[compaction]\ntail_turns = 4\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.chdir(project)
    config = Config()
    assert config.get("model") == "user-model"
    assert config.get("compaction.tail_turns") == 4  # project beats user
    monkeypatch.setenv("LOOKOUT_COMPACTION_THRESHOLD_PERCENT", "80")
    assert config.get("compaction.threshold_percent") == 80  # variable beats files
    assert config.setting("compaction.threshold_percent", 90) == 90  # flag beats all
    assert Config(isolated=True).get("compaction.tail_turns", 2) == 2


def test_bad_config_is_a_clear_error(tmp_path, monkeypatch):
    (tmp_path / ".lookout.toml").write_text("this is = = not toml")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LookoutError, match="not valid TOML"):
        Config()
    result = run_lookout("restore", input=b"{}\n", cwd=tmp_path)
    assert result.returncode == 2 and b"not valid TOML" in result.stderr
    assert run_lookout("restore", "--isolated", input=b"{}\n", cwd=tmp_path).returncode == 0


@pytest.mark.parametrize("word, on", [("yes", True), ("on", True), ("1", True), ("TRUE", True),
                                      ("no", False), ("off", False), ("0", False), ("false", False)])
def test_a_yes_no_setting_reads_the_same_words_in_every_command(session, word, on):
    """measure.estimate read any word but "false" as true ("no" turned the estimate on), and
    compaction.prune any unknown word as false: one reading for every yes/no setting now."""
    env = dict(os.environ, LOOKOUT_MEASURE_ESTIMATE=word)
    report = json.loads(run_lookout("measure", "--json", "--no-cache", str(session), env=env).stdout)
    assert report["model"]["counting"] == ("estimate" if on else "tokenizer")


@pytest.mark.parametrize("command, variable, value, message", [
    ("measure", "LOOKOUT_MEASURE_CACHE", "maybe", b"measure.cache: 'maybe' is not true or false"),
    ("compact", "LOOKOUT_COMPACTION_PRUNE", "sometimes", b"compaction.prune: 'sometimes' is not true or false"),
    ("compact", "LOOKOUT_COMPACTION_TAIL_TURNS", "2.5", b"compaction.tail_turns: 2.5 is not a whole number"),
    ("clear-images", "LOOKOUT_IMAGES_KEEP_RECENT", "lots", b"images.keep_recent: 'lots' is not a whole number"),
    ("mentions", "LOOKOUT_MENTIONS_MAX_FILES", "-1", b"mentions.max_files: -1 must be 0 or more"),
])
def test_a_setting_of_the_wrong_kind_is_one_line_and_exit_2(session, command, variable, value, message):
    done = run_lookout(command, "--force" if command == "compact" else "-q", str(session),
                       env=dict(os.environ, **{variable: value}))
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    # the variable is named too (it was not: issue 31)
    assert len(lines) == 1 and lines[0].startswith(b"lookout: error: " + variable.encode() + b": " + message)


def test_restore_is_an_exact_identity_filter_on_real_transcripts(tmp_path):
    from conftest import real_transcripts

    for path in real_transcripts():
        result = run_lookout("restore", str(path), cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert result.stdout == path.read_bytes(), path.name


def test_in_place_and_output_are_atomic_and_exclusive(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(TRICKY)
    result = run_lookout("restore", "-i", str(path), "-o", str(tmp_path / "x"))
    assert result.returncode == 2
    out = tmp_path / "out.jsonl"
    assert run_lookout("restore", str(path), "-o", str(out)).returncode == 0
    assert out.read_bytes() == TRICKY
    assert run_lookout("restore", "-i", input=b"{}\n").returncode == 2
    assert sorted(os.listdir(tmp_path)) == ["out.jsonl", "t.jsonl"]  # no temp files left


def test_hook_event_names_the_transcript(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"a":1}\n')
    event = orjson.dumps({"session_id": "s", "transcript_path": str(path), "hook_event_name": "Stop"})
    result = run_lookout("restore", "--from-hook", input=event)
    assert result.returncode == 0 and result.stdout == b'{"a":1}\n'
    bad = run_lookout("restore", "--from-hook", input=b"{}")
    assert bad.returncode == 2 and b"transcript_path" in bad.stderr


def test_restore_leaves_copies_of_a_changed_line_alone(tmp_path):
    """A compaction copies kept lines (placeholders included) under a new uuid or type;
    restoring such a copy would duplicate the original and break the chain."""
    store = SavedStore(tmp_path / "s")
    original = b'{"type":"user","uuid":"u1","message":{"content":"big output"}}\n'
    saved = store.put(original, "record")
    in_place = f'{{"type":"user","uuid":"u1","message":{{"content":"[cleared {MARKER}{saved.sha256}]"}}}}\n'.encode()
    copy = in_place.replace(b'"u1"', b'"u9"')
    wrapped = (b'{"type":"compacted","payload":{"replacement_history":[' + in_place.strip() + b"]}}\n")
    assert restore_lines(store, in_place) == [original]
    assert restore_lines(store, copy) == [copy]
    assert restore_lines(store, wrapped) == [wrapped]


def test_saved_outputs_are_durable_and_logged_before_the_transcript_that_names_them(tmp_path):
    """A batch of saved outputs is synced once, before -o writes the transcript; the manifest
    gets every line, in one locked write."""
    import subprocess
    import sys

    code = f"""
import os
from lookout_cli.core import fsutil
from lookout_cli.core.saved import SavedStore
calls = []
real_sync, real_fsync = os.sync, os.fsync
os.sync = lambda: calls.append("sync") or real_sync()
os.fsync = lambda fd: calls.append("fsync") or real_fsync(fd)
store = SavedStore(__import__("pathlib").Path({str(tmp_path / 's')!r}), command="test")
for n in range(100):
    store.put(str(n).encode(), "text")
assert calls == [], calls  # nothing synced one file at a time
with fsutil.atomic_writer({str(tmp_path / 'out.jsonl')!r}) as out:
    assert calls == ["sync"], calls  # the outputs are durable before the transcript is written
    out.write(b"{{}}\\n")
print(len(open({str(tmp_path / 's' / 'manifest.jsonl')!r}).read().splitlines()))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "100"


def test_the_command_list_says_what_each_command_says_of_itself():
    """``lookout --help`` lists the commands from cli.SUMMARIES without importing them."""
    import subprocess
    import sys

    import click

    from lookout_cli.cli import COMMANDS, SUMMARIES, cli

    ctx = click.Context(cli)
    assert list(SUMMARIES) == list(COMMANDS)
    for name in COMMANDS:
        assert SUMMARIES[name] == cli.get_command(ctx, name).get_short_help_str(10**6)
    # as the console script runs it; no command, and none of the heavy or C modules they load
    # (said by an exit handler: lookout leaves the process once they have run)
    code = ("import atexit, runpy, sys\nsys.argv = ['lookout', '--help']\n"
            "atexit.register(lambda: print(sorted(m for m in sys.modules if m.startswith('lookout_cli.commands.')\n"
            "                or m in ('tiktoken', 'PIL', 'orjson')), file=sys.stderr))\n"
            "runpy.run_module('lookout_cli', run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "Report what fills the model's context" in done.stdout
    assert done.stderr.strip() == "[]"


def test_output_to_a_pipe_or_a_link_keeps_it_what_it_is(tmp_path):
    """-o to a FIFO (or /dev/null) writes into it; a rename over it used to leave a regular file
    in its place (as root, `-o /dev/null` replaced the device). -i on a link updates the file
    the link names and keeps the link."""
    import subprocess
    import threading

    from conftest import lookout_exe

    data = b'{"role":"user","content":"hi"}\n'
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    done = subprocess.run([*lookout_exe(), "measure", "-q", "-o", str(fifo)], input=data, capture_output=True,
                          timeout=60)
    reader.join(60)
    assert done.returncode == 0, done.stderr
    assert got == [data] and stat.S_ISFIFO(os.stat(fifo).st_mode)

    target = tmp_path / "real.jsonl"
    target.write_bytes(b"old\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    atomic_write(link, b"new\n")
    assert link.is_symlink() and target.read_bytes() == b"new\n"


@pytest.mark.parametrize("block", [7, 64, 1 << 20])
def test_last_line_holding_finds_the_last_wanted_line_backwards(tmp_path, block):
    """The last line with the needle that is wanted, found from the end a block at a time:
    past a later line that only mentions the needle, a long line holding it (not looked into)
    and a later line that holds it but is not wanted; a needle across a block's edge is found."""
    from lookout_cli.core.jsonl import last_line_holding

    lines = [b'{"kind":"a"}', b'{"kind":"boundary","n":1}', b'{"kind":"a"}', b'{"kind":"boundary","n":2}',
             b'{"kind":"a","text":"the word boundary in a text"}',
             b'{"kind":"a","text":"' + b"x" * 500 + b' \\"kind\\":\\"boundary\\""}',
             b'{"kind":"boundary","n":3,"side":true}', b'{"kind":"a"}']
    data = b"\n".join(lines) + b"\n"
    path = tmp_path / "lines.jsonl"
    path.write_bytes(data)

    def wanted(line: bytes) -> bool:
        obj = json.loads(line)
        return obj.get("kind") == "boundary" and not obj.get("side")

    needle = b'"boundary"'
    with open(path, "rb") as fh:
        fd = fh.fileno()
        found = last_line_holding(fd, needle, 0, len(data), wanted, block=block, longest=200)
        assert found == data.index(lines[3])
        # from where a read starts, and up to where it ends
        assert last_line_holding(fd, needle, data.index(lines[4]), len(data), wanted, block=block) is None
        assert last_line_holding(fd, needle, 0, data.index(lines[3]), wanted, block=block) == data.index(lines[1])
        assert last_line_holding(fd, b'"nothing"', 0, len(data), wanted, block=block) is None


def test_a_run_told_it_will_hash_much_loads_openssl_at_once_and_digests_the_same():
    """``hashing.expect``: told a few kilobytes are coming, a process keeps Python's own sha256
    (a prompt's run loads no OpenSSL); told half a megabyte or more (a re-measure of a file that
    grew that much digests every new line), it loads OpenSSL's before the first byte, whose
    digests are the same."""
    import subprocess

    code = (
        "import sys\n"
        "from lookout_cli.core import hashing\n"
        "hashing.expect(64 << 10)\n"
        "few = hashing.sha256(b'line').hexdigest(), 'hashlib' in sys.modules\n"
        "hashing.expect(hashing.EXPECTED_BYTES)\n"
        "print(*few, 'hashlib' in sys.modules, hashing.sha256(b'line').hexdigest(), type(hashing.sha256()).__module__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    own, loaded_after_few, loaded_after_told, openssl, kind = done.stdout.split()
    assert (loaded_after_few, loaded_after_told, kind) == ("False", "True", "_hashlib")
    assert own == openssl == __import__("hashlib").sha256(b"line").hexdigest()
