"""The fields of a Claude Code line that the lines before its last compaction give the view
(``claude_settled.Settling``), decoded by msgspec without the rest of the line.

A long session's older segments are most of its bytes (tool results, file contents, thinking)
and the view reads of each line a uuid, its parent, a type, a time and a response's usage.
orjson makes a Python object of every value of a line; msgspec, given the fields wanted,
passes over the others checking their JSON but making nothing of them: 0.12 s where orjson
takes 0.22 s at 100 MB of real-shaped lines, and an attribute is read faster than a dict's
key. It checks less than orjson in what it passes over: the UTF-8 of a text (the caller
checks a line that is not ASCII) and a number past a double's range (orjson refuses the
line as not JSON; ``JSON.parse``, as Claude Code reads the file, takes it as Infinity, and
no line Claude Code writes holds one). A line it refuses, or that holds what these fields
cannot say (a value of another type where an object or a count is wanted), is read by orjson.

Imported only for a long read (``Settling.reader``): msgspec loads ``typing`` and more
(25 ms), which a short one would not win back.
"""

from __future__ import annotations

import msgspec


# A response's counts are whole numbers or none: any other value (a bool, a fraction, text)
# makes the line one these fields cannot say, read by orjson (``Settling.reader``).
class Creation(msgspec.Struct):
    ephemeral_1h_input_tokens: int | None = 0


class Usage(msgspec.Struct):
    input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    output_tokens: int | None = None
    cache_creation: Creation | None = None


class Message(msgspec.Struct):
    usage: Usage | None = None
    model: object = None
    id: object = None


class Line(msgspec.Struct):
    type: object = None
    uuid: object = None
    parentUuid: object = None
    isSidechain: object = None
    timestamp: object = None
    isApiErrorMessage: object = None
    message: Message | None = None


decode = msgspec.json.Decoder(Line).decode
REFUSED = (msgspec.DecodeError, RecursionError)  # (msgspec nests as deep as Python's recursion limit)
