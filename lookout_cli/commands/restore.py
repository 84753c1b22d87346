"""``lookout restore``: put back everything lookout cleared, from the saved-output store."""

from __future__ import annotations

import click

from lookout_cli.core.jsonl import Record
from lookout_cli.core.saved import MARKER, Restorer
from lookout_cli.flags import filter_options
from lookout_cli.options import Run


@click.command(epilog="""\b
Examples:
  lookout compact session.jsonl | lookout restore > original.jsonl
  lookout restore -i session.jsonl          # undo clearing in place
  lookout restore --check session.jsonl     # exit 1 if anything could be restored

Streams line by line. A line that a lookout command changed carries a marker naming its
original bytes in the store; restore writes those bytes back (following nested changes), and
drops the lines a compaction added (their marker names nothing), so a compacted Claude Code
session or Codex rollout comes back byte for byte.
With nothing to restore, restore is an exact identity filter.
""")
@filter_options(side_effects=True)
def restore(run: Run) -> None:
    """Put cleared tool output, images and dropped turns back from the saved files."""
    marker = MARKER.encode()
    restored = missing = removed = 0
    output: list[Record] = []
    restorer = Restorer(run.store)
    with run.writer() if not run.in_place else _collect(output) as writer:
        for record in run.records():
            lines = restorer.lines(record.raw)
            if lines == [record.raw]:
                missing += marker in record.raw
                writer.write(record)
                continue
            if lines:
                restored += 1
            else:  # a line a compaction added, or a copy the line before put back in place
                removed += 1
            if run.dry_run:
                writer.write(record)
                continue
            for line in lines:
                writer.write(Record(record.lineno, line))
    if run.in_place and (restored or removed) and not run.dry_run:
        with run.writer() as writer:
            writer.write_all(output)
    if missing:
        run.warn(f"{missing} line(s) name saved content that is not in {run.store.root}")
    would = "would be " if run.dry_run else ""
    run.say(f"restore: {restored} line(s) {would}restored" + (f", {removed} added line(s) {would}removed" if removed else ""))
    run.write_report({"command": "restore", "restored": restored, "removed": removed, "missing": missing})
    if run.check and (restored or removed):
        from lookout_cli.core.errors import CheckFailed

        raise CheckFailed("restore: lines would be restored")


class _collect:
    """A writer that keeps records in memory, for -i (the input is still being read)."""

    def __init__(self, sink: list[Record]) -> None:
        self.sink = sink

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def write(self, record: Record) -> None:
        self.sink.append(record)
