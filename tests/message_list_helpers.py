"""Helpers shared by the ``openai`` and ``anthropic`` adapter tests: load a fixture, write it
back and read it again, a ``save`` callable backed by the real saved-output store, and the
model-visible summary of a view that the assertions compare."""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path

from lookout_cli.core.jsonl import Record, RecordWriter, read_records
from lookout_cli.core.saved import MARKER, Restorer, SavedStore
from lookout_cli.formats import Transcript, detect, load_adapter
from lookout_cli.formats.view import View

DATA = Path(__file__).resolve().parent / "data"


def parse(data: bytes, fmt: str | None = None) -> Transcript:
    records = list(read_records(io.BytesIO(data)))
    adapter = load_adapter(fmt) if fmt else detect(records)
    return Transcript(records, adapter)


def load(name: str, fmt: str | None = None) -> Transcript:
    return parse((DATA / name).read_bytes(), fmt)


def dump(transcript: Transcript) -> bytes:
    out = io.BytesIO()
    RecordWriter(out).write_all(transcript.records)
    return out.getvalue()


def reread(transcript: Transcript) -> Transcript:
    """Write the transcript out and parse it again, as the next command in a pipe would."""
    return parse(dump(transcript), transcript.format)


def lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def kinds(view: View) -> Counter:
    return Counter(item.kind for item in view.items)


def visible(view: View, start: int = 0) -> list[tuple]:
    """What the model sees from item ``start`` on: role, kind, text, ids, image bytes."""
    return [(i.role, i.kind, i.text, i.call_id, i.tool, i.is_error, i.image and i.image.data)
            for i in view.items[start:]]


def prompts(view: View) -> list:
    return [i for i in view.items if i.prompt]


class Saver:
    """``metadata["save"]`` as the compact command provides it: the records' original lines go
    to the saved-output store, and the marker names them for ``lookout restore``."""

    def __init__(self, root: Path) -> None:
        self.store = SavedStore(root, command="compact")
        self.calls: list[list[Record]] = []

    def __call__(self, records: list[Record]) -> str:
        self.calls.append(list(records))
        data = b"".join(r.raw if r.raw.endswith(b"\n") else r.raw + b"\n" for r in records)
        return MARKER + self.store.put(data, kind="record").sha256

    def restore(self, data: bytes) -> bytes:
        """What ``lookout restore`` writes for ``data``."""
        restorer = Restorer(self.store)
        return b"".join(out for line in lines(data) for out in restorer.lines(line))


def check_compact_everywhere(name: str, tmp_path: Path) -> None:
    """Compact at every prompt (and with nothing kept), with a summary and as a truncation: the
    re-read view shows the setup, then the summary, then the kept tail word for word, with no
    orphan, and a second identical compaction changes nothing."""
    view = load(name).view()
    setup = [i for i in view.items if i.kind == "setup"]
    for k in [*range(len(prompts(view))), None]:
        for summary in ("Earlier work, summarized.", None):
            transcript = load(name)
            keep = prompts(transcript.view())[k] if k is not None else None
            items = transcript.view().items
            tail = visible(transcript.view(), items.index(keep)) if keep is not None else []
            transcript.adapter.compact(transcript, summary, keep, {"save": Saver(tmp_path)})
            again = reread(transcript)
            got = again.view()
            assert visible(got)[: len(setup)] == visible(View("x", setup)), (k, summary)
            start = len(got.items) - len(tail)
            note = got.items[start - 1]
            assert note.kind in ("summary", "notice") and visible(got, start) == tail, (k, summary)
            assert (summary or "[lookout dropped ") in note.text, (k, summary)
            assert [i.kind for i in got.items[len(setup):start]] == [note.kind], (k, summary)
            assert got.orphans() == [], (k, summary)
            out = dump(again)
            keep2 = prompts(got)[0] if k is not None else None
            assert again.adapter.compact(again, summary, keep2, {"save": Saver(tmp_path)}) == []
            assert dump(again) == out
