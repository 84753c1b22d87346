"""The fields of a Codex rollout line that tell whether the lines before its last compaction
give the view anything (``codex_scan.Settling``), decoded by msgspec without the rest.

Most of a long rollout's lines are tool calls, their outputs, reasoning, the model's messages
and events, of which the view reads, before the last compaction, only the time, and token
counts, of which it reads a few numbers: msgspec passes over the rest checking its JSON but
making nothing of it, where orjson makes a Python object of every value. It checks less
than orjson in what it passes over (``claude_fields`` says what): a line that is not ASCII is
checked by the caller, and a line it refuses, or one that gives the view more than its time
(a user's message, a compaction...), is read by orjson.

Imported only for a long read (``Settling.reader``): msgspec loads ``typing`` and more.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

# A count as orjson reads one (a whole number of 64 bits, here signed: a bool, a fraction,
# a null, a larger number is another value): ``Counts`` decodes a token count's figures only
# when each is one, else the line is read by orjson.
Count = Annotated[int, msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]


class Counts(msgspec.Struct, forbid_unknown_fields=True):
    """A token count's totals or last usage, its fields in the order of their names: equal
    when the objects are (no field but these, each there or not, a number), and encoded as
    orjson writes the object with its keys sorted (``codex_scan``'s key of an event)."""

    cache_write_input_tokens: Count | msgspec.UnsetType = msgspec.UNSET
    cached_input_tokens: Count | msgspec.UnsetType = msgspec.UNSET
    input_tokens: Count | msgspec.UnsetType = msgspec.UNSET
    output_tokens: Count | msgspec.UnsetType = msgspec.UNSET
    reasoning_output_tokens: Count | msgspec.UnsetType = msgspec.UNSET
    total_tokens: Count | msgspec.UnsetType = msgspec.UNSET


class Info(msgspec.Struct):
    total_token_usage: Counts | None = None
    last_token_usage: Counts | None = None
    model_context_window: object = None


class Payload(msgspec.Struct):
    type: object = None
    role: object = None  # a message's
    images: object = None  # a user_message event's
    info: Info | None = None  # a token_count event's


class Line(msgspec.Struct):
    timestamp: object = None
    type: object = None
    payload: Payload | None = None


decode = msgspec.json.Decoder(Line).decode
encode = msgspec.json.encode
REFUSED = (msgspec.DecodeError, RecursionError)  # (msgspec nests as deep as Python's recursion limit)
