"""Clearing a part of the context without losing it: save first, then leave a placeholder.

``compact`` (prune, clamp, shorten) and ``clear-images`` both go through here, so every cleared
part is saved the same way and ``lookout restore`` can put every one of them back.
"""

from __future__ import annotations

from collections.abc import Callable

from lookout_cli.core.dataclass import dataclass
from lookout_cli.core.saved import (
    CLEARED_PREFIX,
    EXTENSIONS,
    MARKER,
    ORIGINAL_SIZE_RE,
    Saved,
    SavedStore,
    placeholder,
)
from lookout_cli.formats import Transcript
from lookout_cli.formats.view import IMAGE, Item
from lookout_cli.tokens.tokenizer import estimate


@dataclass(slots=True)
class Cleared:
    item: Item
    content: Saved  # the cleared content, for the agent to read again
    text: str  # the placeholder now in its place
    nbytes: int  # bytes removed from the context


# Clamp a middle only when it is clearly larger than the placeholder left in its place.
CLAMP_WORTH = 1.25


# The most a sha256 hex digest can cost, whatever counts it: a token a character.
HASH_TOKENS = 64


def _stand_in(store: SavedStore, nbytes: int, kind: str, sha: str = "0" * 64) -> Saved:
    """A saved file's name as long as the real one, with a fixed hash (nothing is written)."""
    return Saved(sha, store.real_path(sha, EXTENSIONS.get(kind, ".bin")), nbytes)


def is_cleared(item: Item) -> bool:
    """True when a part already holds a lookout placeholder (clearing it again changes nothing)."""
    return MARKER in item.text or item.text.startswith(CLEARED_PREFIX)


def cleared_sign(text: str) -> str:
    """The part of a cleared text that makes ``is_cleared`` say so (the rest can go)."""
    at = text.find(MARKER)
    if at < 0:
        return text[:len(CLEARED_PREFIX)]
    size = ORIGINAL_SIZE_RE.search(text, 0, at)  # the original's size: the meter's calibration reads it
    return text[at:at + len(MARKER)] + (f" {size.group(0)}" if size else "")


def save_record(store: SavedStore, item: Item) -> Saved | None:
    """Save the original line the item lives in (once per line), for ``lookout restore``."""
    raw = item.record.raw
    if raw is None:  # a line lookout itself added in this run has nothing to restore
        return None
    return store.put(raw, "record", call_id=item.call_id, tool=item.tool)


def _content(item: Item) -> tuple[bytes, str]:
    """What clearing an item saves (an image's bytes, else its text) and of what kind."""
    if item.kind == IMAGE and item.image is not None and item.image.data:
        import base64  # (here: a measure, which clears nothing, imports this module too)
        import binascii

        try:
            data = base64.b64decode(item.image.data, validate=False)
        except (binascii.Error, ValueError):
            data = item.image.data.encode()
        return data, item.image.media_type or "image/png"
    return item.text.encode("utf-8", "surrogatepass"), "text"


def _note(item: Item, what: str, content: Saved, original: Saved | None, kind: str, tokens: int | None) -> str:
    """The placeholder that clears an item (a text's names the lines to read)."""
    lines = (1, item.text.count("\n") + 1) if kind == "text" else None
    return placeholder(what, content, original, tokens=tokens, lines=lines)


def clear_item(store: SavedStore, transcript: Transcript, item: Item, what: str, tokens: int | None = None) -> Cleared:
    """Save an item's content and its original line, then replace the content with a placeholder."""
    original = save_record(store, item)
    for copy in transcript.adapter.copies(item):  # other lines the adapter blanks with it
        store.put(copy.raw, "record", call_id=item.call_id, tool=item.tool)
    data, kind = _content(item)
    meta = {"tokens": tokens} if kind == "text" else {}
    content = store.put(data, kind, tool=item.tool, call_id=item.call_id, **meta)
    text = _note(item, what, content, original, kind, tokens)
    nbytes = len(item.image.data) if kind != "text" else len(data)
    transcript.adapter.replace_content(transcript, item, text)
    return Cleared(item, content, text, nbytes)


def clear_cost(store: SavedStore, item: Item, what: str, count: Callable[[str], int],
               tokens: int | None = None) -> int:
    """The most the placeholder ``clear_item`` would leave can cost, counted with ``count``.
    Its hashes are left out and priced at their most, so an item gets the same answer on every
    run (the line's hash changes with the rest of the line; real hashes cost 27 to 49 tokens)."""
    data, kind = _content(item)
    original = None if item.record.raw is None else _stand_in(store, 0, "record", sha="")
    text = _note(item, what, _stand_in(store, len(data), kind, sha=""), original, kind, tokens)
    return count(text) + HASH_TOKENS * (1 if original is None else 2)


def clamp_item(store: SavedStore, transcript: Transcript, item: Item, head: int, tail: int,
               what: str = "the middle of this output") -> Cleared | None:
    """Keep the first ``head`` and last ``tail`` characters (whole lines where possible) and
    save the middle; the placeholder names the line numbers to read. None if it already fits."""
    text = item.text
    if len(text) <= head + tail or is_cleared(item):
        return None
    cut_start = text.rfind("\n", 0, head) + 1 or head
    cut_end = text.find("\n", len(text) - tail)
    cut_end = len(text) - tail if cut_end == -1 else cut_end + 1
    if cut_end <= cut_start:
        return None
    middle = text[cut_start:cut_end]
    first_line = text.count("\n", 0, cut_start) + 1
    last_line = first_line + middle.count("\n") - (1 if middle.endswith("\n") else 0)
    data = text.encode("utf-8", "surrogatepass")
    # Work out the placeholder before saving anything: a middle no larger than the note that
    # would replace it stays (clamping it would grow the context, not shrink it). The note is
    # sized with a stand-in hash, so the same output gets the same answer on every run.
    would_be = placeholder(f"{what}, lines {first_line}-{last_line}", _stand_in(store, len(data), "text"),
                           None if item.record.raw is None else _stand_in(store, 0, "record"),
                           lines=(first_line, last_line))
    if estimate(middle) <= CLAMP_WORTH * estimate(would_be + "\n"):
        return None
    original = save_record(store, item)
    full = store.put(data, "text", tool=item.tool, call_id=item.call_id)
    note = placeholder(f"{what}, lines {first_line}-{last_line}", full, original,
                       lines=(first_line, last_line))
    new_text = text[:cut_start] + note + "\n" + text[cut_end:]
    transcript.adapter.replace_content(transcript, item, new_text)
    return Cleared(item, full, new_text, len(middle.encode("utf-8", "surrogatepass")))
