"""Small helpers for the claude-code format tests."""

from __future__ import annotations

import datetime as dt
import io
import json
from collections import Counter
from pathlib import Path

from lookout_cli.core.jsonl import RecordWriter, read_records
from lookout_cli.formats import Transcript, detect

DATA = Path(__file__).resolve().parent / "data" / "claude-code"
REAL = DATA / "real"


def load_bytes(data: bytes) -> Transcript:
    """Parse bytes, detect the format (it must be claude-code) and wrap them in a Transcript."""
    records = list(read_records(io.BytesIO(data)))
    adapter = detect(records)
    assert adapter is not None and adapter.name == "claude-code", adapter and adapter.name
    return Transcript(records, adapter)


def load(name: str) -> tuple[bytes, Transcript]:
    data = (DATA / name).read_bytes()
    return data, load_bytes(data)


def dump(transcript: Transcript) -> bytes:
    out = io.BytesIO()
    RecordWriter(out).write_all(transcript.records)
    return out.getvalue()


def reread(transcript: Transcript) -> tuple[bytes, Transcript]:
    """Write the transcript out and read it back, as the next command in a pipe would."""
    data = dump(transcript)
    return data, load_bytes(data)


def kinds(view) -> dict:
    return dict(Counter(item.kind for item in view.items))


def raw_lines(data: bytes) -> list[bytes]:
    return [r.raw for r in read_records(io.BytesIO(data))]


def obj_of(line: bytes) -> dict:
    return json.loads(line)


def usage_sums(view) -> tuple[int, int, int, int, int]:
    return (sum(u.input for u in view.usages), sum(u.cache_write for u in view.usages),
            sum(u.cache_read for u in view.usages), sum(u.output for u in view.usages),
            sum(u.cache_write_1h for u in view.usages))


def chain_ok(data: bytes) -> None:
    """Every parentUuid / logicalParentUuid of a conversation line names a line written before it."""
    seen: set[str] = set()
    for record in read_records(io.BytesIO(data)):
        obj = record.data
        if not obj:
            continue
        for field in ("parentUuid", "logicalParentUuid"):
            ref = obj.get(field)
            assert ref is None or ref in seen, f"line {record.lineno}: {field} {ref} is not earlier"
        if isinstance(obj.get("uuid"), str):
            seen.add(obj["uuid"])


def compacted_session(path: Path, compactions: int = 2, size: float = 4.0, **options) -> Path:
    """A real-shaped session from the benchmark's generator with ``compactions`` compactions
    or more: where they fall moves with its corpus (the repository's own text), so the session
    is made longer until it holds them."""
    # (bench/ is on the path of the tests that use this)
    from bench.generate import generate

    while size < 64:
        generate(path, "claude-code", size, shape="real", **options)
        if path.read_bytes().count(b'"subtype":"compact_boundary"') >= compactions:
            return path
        size *= 1.5
    raise AssertionError(f"fewer than {compactions} compactions in {size / 1.5:.0f} MB")


def add_turns(path: Path, turns: int) -> None:
    """Append ``turns`` prompts, each answered, to the Claude Code session at ``path``, chained
    to its last line and written as that line is (its session, folder and version)."""
    last = json.loads(path.read_bytes().splitlines()[-1])
    parent, when = last["uuid"], dt.datetime.fromisoformat(last["timestamp"])
    kept = {k: last[k] for k in ("isSidechain", "userType", "cwd", "sessionId", "version", "gitBranch") if k in last}
    with open(path, "a") as fh:
        for n in range(2 * turns):
            when += dt.timedelta(seconds=30)
            role = "assistant" if n % 2 else "user"
            message = {"role": role, "content": [{"type": "text", "text": f"turn {n // 2}: " + "more work " * 300}]}
            if role == "assistant":
                message.update(id=f"msg_added_{n}", type="message", model=last["message"].get("model"),
                               usage={"input_tokens": 20_000 + n, "output_tokens": 700})
            uid = f"00000000-0000-4000-8000-{n:012d}"
            fh.write(json.dumps({**kept, "parentUuid": parent, "type": role, "message": message, "uuid": uid,
                                 "timestamp": when.isoformat().replace("+00:00", "Z")}) + "\n")
            parent = uid
