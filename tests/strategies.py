"""Hypothesis generators of valid transcripts in every writable format.

One format-neutral conversation (``Conversation``: turns of a prompt, assistant steps with
thinking, text and parallel tool calls, results answered in any order, images, an optional
recorded compaction, unknown records and unknown fields) is drawn once and rendered as a
``claude-code`` session, a ``codex`` rollout, or an ``openai`` / ``anthropic`` message list
(one message per line, or one request body per line). The bytes vary the way real files do:
spacing, ``\\u`` escapes, 30-digit integers, CRLF line endings, a missing final newline.

Images are real PNGs drawn by pillow. Long tool outputs are built by repeating a drawn chunk,
so hypothesis stays fast while commands still have something worth clearing.

Used by ``tests/test_reliability_*.py`` and ``bench/fuzz_long.py``.
"""

from __future__ import annotations

import base64
import functools
import io
import json
from dataclasses import dataclass, field

from hypothesis import strategies as st

FORMATS = ("claude-code", "codex", "openai", "anthropic")

# --- text ------------------------------------------------------------------------------------
# Printable ASCII, quotes and backslashes, accented and wide letters, an emoji, control
# characters JSON must escape, and newlines: everything a tool output really holds.
_ALPHABET = st.characters(
    codec="utf-8",
    categories=("L", "N", "P", "S", "Zs", "Cc"),
    exclude_characters="\x00",
)
WORDS = st.sampled_from(["pytest", "src/app.py", "error:", "def main():", "ok", "Traceback", "café",
                         "中文", "🙂", "\\n", '"quoted"', "\t", "line\n", "$HOME", "</tag>", "0x1F"])


@st.composite
def texts(draw, min_size: int = 1, max_size: int = 40, surrogates: bool = False) -> str:
    """Short text: drawn characters and a few familiar words; rarely a lone surrogate."""
    parts = draw(st.lists(st.one_of(WORDS, st.text(_ALPHABET, min_size=1, max_size=12)),
                          min_size=1, max_size=max(1, max_size // 6)))
    text = " ".join(parts)[:max_size]
    if surrogates and draw(st.integers(0, 9)) == 0:
        text += "\ud800"
    if len(text.strip()) < min_size:
        text = "text " + text
    return text


@st.composite
def long_texts(draw, surrogates: bool = False) -> str:
    """A tool output: a drawn chunk of a few lines repeated up to a few thousand characters."""
    chunk = "\n".join(draw(st.lists(texts(max_size=60, surrogates=surrogates), min_size=1, max_size=4)))
    repeat = draw(st.sampled_from([1, 1, 2, 5, 20, 60]))
    return "\n".join(f"{i}: {chunk}" for i in range(repeat))


# --- images ----------------------------------------------------------------------------------
@functools.lru_cache(maxsize=256)
def png_base64(width: int, height: int, rgb: tuple[int, int, int]) -> str:
    """A real PNG drawn by pillow, base64-encoded."""
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (width, height), rgb).save(out, format="PNG")
    return base64.b64encode(out.getvalue()).decode("ascii")


images = st.builds(
    png_base64,
    st.integers(1, 48),
    st.integers(1, 48),
    st.tuples(st.integers(0, 255), st.integers(0, 255), st.integers(0, 255)),
)


# --- the neutral conversation ----------------------------------------------------------------
@dataclass
class Result:
    text: str | None  # a text output, or
    image: str | None = None  # a PNG (base64) the tool returned
    is_error: bool = False


@dataclass
class Call:
    id: str
    name: str
    args: dict
    result: Result


@dataclass
class Step:
    """One assistant response: optional thinking and text, then parallel tool calls."""

    thinking: str | None
    text: str | None
    calls: list[Call]
    order: list[int]  # the order the results come back in (pairing is by id, never position)


@dataclass
class Turn:
    prompt: str
    image: str | None
    steps: list[Step]
    reply: str


@dataclass
class Conversation:
    model: str
    system: str
    turns: list[Turn]
    compaction: tuple[int, str] | None  # (turn index it precedes, summary text)
    unknown: list[tuple[int, dict]]  # (position among the rendered lines, record)
    unknown_fields: bool
    styles: list[int]  # per-line serialisation style (cycled)
    crlf: bool
    final_newline: bool
    layout: str = "lines"  # openai/anthropic: "lines" (one message a line) or "bodies"
    extra: dict = field(default_factory=dict)


TOOLS = ["Bash", "Read", "Grep", "shell", "read_file", "view_image"]


@st.composite
def steps(draw, turn: int, index: int, surrogates: bool, with_images: bool) -> Step:
    ncalls = draw(st.integers(0, 3))
    calls = []
    for k in range(ncalls):
        image = draw(images) if with_images and draw(st.integers(0, 4)) == 0 else None
        result = Result(None if image else draw(long_texts(surrogates=surrogates)), image,
                        draw(st.integers(0, 7)) == 0)
        name = "view_image" if image else draw(st.sampled_from(TOOLS[:5]))
        args = {"command": draw(texts(max_size=30))} if name in ("Bash", "shell") else {"path": f"src/f{turn}_{k}.py"}
        calls.append(Call(f"call_{turn}_{index}_{k}", name, args, result))
    order = draw(st.permutations(list(range(ncalls))))
    thinking = draw(st.one_of(st.none(), texts(max_size=60, surrogates=surrogates)))
    text = draw(st.one_of(st.none(), texts(max_size=80, surrogates=surrogates)))
    if not calls and text is None:
        text = "Working on it."
    return Step(thinking, text, calls, list(order))


@st.composite
def conversations(draw, surrogates: bool = True, with_images: bool = True, max_turns: int = 4,
                  prompts: st.SearchStrategy | None = None) -> Conversation:
    """A valid conversation; ``prompts`` (optional) draws the user's prompt texts."""
    nturns = draw(st.integers(1, max_turns))
    turns = []
    for t in range(nturns):
        prompt = draw(prompts) if prompts is not None else draw(texts(max_size=80, surrogates=surrogates))
        image = draw(images) if with_images and draw(st.integers(0, 3)) == 0 else None
        nsteps = draw(st.integers(0, 3))
        turn_steps = [draw(steps(t, i, surrogates, with_images)) for i in range(nsteps)]
        turns.append(Turn(prompt, image, turn_steps, draw(texts(max_size=80, surrogates=surrogates))))
    compaction = None
    if nturns > 1 and draw(st.booleans()):
        compaction = (draw(st.integers(1, nturns - 1)), "Summary of earlier work: " + draw(texts(max_size=60)))
    unknown = []
    for n in range(draw(st.integers(0, 3))):
        payload = {"n": 123456789012345678901234567890 + n, "note": draw(texts(max_size=20)),
                   "nested": {"list": [1, 2.5, None, True]}}
        unknown.append((draw(st.integers(0, 200)), payload))
    return Conversation(
        model=draw(st.sampled_from(["claude-sonnet-4-5", "claude-opus-4-1", "gpt-5.1-codex", "gpt-4.1", "o3"])),
        system=draw(texts(max_size=60)),
        turns=turns,
        compaction=compaction,
        unknown=unknown,
        unknown_fields=draw(st.booleans()),
        styles=draw(st.lists(st.integers(0, 3), min_size=1, max_size=5)),
        crlf=draw(st.integers(0, 5)) == 0,
        final_newline=draw(st.integers(0, 5)) != 0,
        layout=draw(st.sampled_from(["lines", "lines", "bodies"])),
    )


# --- serialisation ---------------------------------------------------------------------------
def dump(obj, style: int) -> bytes:
    """One JSON line in one of the ways real writers spell JSON (never orjson's canonical)."""
    if style == 0:  # JSON.stringify / serde: compact, non-ASCII as is
        text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    elif style == 1:  # Python's default: spaces, \u escapes
        text = json.dumps(obj)
    elif style == 2:  # compact with \u escapes
        text = json.dumps(obj, separators=(",", ":"))
    else:  # spaces, non-ASCII as is
        text = json.dumps(obj, ensure_ascii=False)
    # A lone surrogate (only inside a string) becomes its JSON escape, as JSON.stringify writes it.
    return text.encode("utf-8", "backslashreplace")


def join_lines(conv: Conversation, objs: list[dict], unknown_shape) -> bytes:
    """Insert the unknown records, serialise each line in a style, and end the lines."""
    lines = list(objs)
    for position, payload in conv.unknown:
        lines.insert(min(position, len(lines)), unknown_shape(payload))
    ending = b"\r\n" if conv.crlf else b"\n"
    out = [dump(obj, conv.styles[i % len(conv.styles)]) for i, obj in enumerate(lines)]
    data = ending.join(out)
    return data + ending if conv.final_newline and data else data


def render(conv: Conversation, fmt: str) -> bytes:
    return RENDERERS[fmt](conv)


# --- claude-code -----------------------------------------------------------------------------
def _claude_code(conv: Conversation) -> bytes:
    session = "5e3c0b7e-0000-4000-8000-000000000001"
    clock = [0]
    counter = [0]
    parent = [None]
    lines: list[dict] = [{"type": "permission-mode", "permissionMode": "default", "sessionId": session}]

    def stamp() -> str:
        clock[0] += 1
        return f"2026-01-02T10:{clock[0] // 60 % 60:02d}:{clock[0] % 60:02d}.000Z"

    def envelope(kind: str, **rest) -> dict:
        counter[0] += 1
        uid = f"00000000-0000-4000-8000-{counter[0]:012d}"
        obj = {"parentUuid": parent[0], "isSidechain": False, "userType": "external", "cwd": "/w/app",
               "sessionId": session, "version": "2.1.150", "gitBranch": "main", "type": kind}
        obj.update(rest)
        obj.update(uuid=uid, timestamp=stamp())
        if conv.unknown_fields:
            obj["futureField"] = {"n": 123456789012345678901234567890}
        parent[0] = uid
        lines.append(obj)
        return obj

    used = [len(conv.system) // 4 + 3000]

    def usage(out: int) -> dict:
        return {"input_tokens": 5, "cache_creation_input_tokens": 100, "cache_read_input_tokens": used[0],
                "output_tokens": out}

    responses = [0]
    for t, turn in enumerate(conv.turns):
        if conv.compaction and conv.compaction[0] == t:
            last = parent[0]
            parent[0] = None
            envelope("system", subtype="compact_boundary", content="Conversation compacted", isMeta=False,
                     level="info", logicalParentUuid=last,
                     compactMetadata={"trigger": "auto", "preTokens": used[0], "postTokens": 800})
            envelope("user", message={"role": "user", "content": "This session is being continued from a previous "
                                      "conversation that ran out of context. " + conv.compaction[1]},
                     isVisibleInTranscriptOnly=True, isCompactSummary=True)
        content = turn.prompt
        if turn.image:
            content = [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": turn.image}},
                       {"type": "text", "text": turn.prompt}]
        envelope("user", message={"role": "user", "content": content})
        used[0] += len(turn.prompt) // 4
        for step in [*turn.steps, Step(None, turn.reply, [], [])]:
            responses[0] += 1
            mid, req = f"msg_{responses[0]:04d}", f"req_{responses[0]:04d}"
            blocks = []
            if step.thinking is not None:
                blocks.append({"type": "thinking", "thinking": step.thinking, "signature": "c2lnbmF0dXJl"})
            if step.text is not None:
                blocks.append({"type": "text", "text": step.text})
            blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.args} for c in step.calls]
            tool_line: dict[str, str] = {}
            for i, block in enumerate(blocks):
                stop = ("tool_use" if step.calls else "end_turn") if i == len(blocks) - 1 else None
                line = envelope("assistant", requestId=req, message={
                    "id": mid, "type": "message", "role": "assistant", "model": conv.model, "content": [block],
                    "stop_reason": stop, "usage": usage(10 * (i + 1))})
                if block["type"] == "tool_use":
                    tool_line[block["id"]] = line["uuid"]
            for k in step.order:
                call = step.calls[k]
                result = call.result
                if result.image:
                    inner = [{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                          "data": result.image}}]
                    extra = {"type": "image", "file": {"base64": result.image, "type": "image/png",
                                                       "originalSize": len(result.image) * 3 // 4}}
                    used[0] += 100
                else:
                    inner = result.text
                    extra = {"stdout": result.text, "stderr": "", "interrupted": False, "isImage": False}
                    used[0] += len(result.text) // 4
                block = {"tool_use_id": call.id, "type": "tool_result", "content": inner}
                if result.is_error:
                    block["is_error"] = True
                envelope("user", message={"role": "user", "content": [block]}, toolUseResult=extra,
                         sourceToolAssistantUUID=tool_line[call.id])
    lines.append({"type": "summary", "summary": "Generated session", "leafUuid": parent[0]})

    def unknown(payload: dict) -> dict:
        return {"type": "lookout-future", "uuid": "ffffffff-0000-4000-8000-000000000000", "payload": payload}

    return join_lines(conv, lines, unknown)


# --- codex -----------------------------------------------------------------------------------
def _codex(conv: Conversation) -> bytes:
    clock = [0]
    lines: list[dict] = []

    def rec(kind: str, payload: dict) -> None:
        clock[0] += 1
        obj = {"timestamp": f"2025-11-20T10:{clock[0] // 60 % 60:02d}:{clock[0] % 60:02d}.000Z", "type": kind,
               "payload": payload}
        if conv.unknown_fields and kind == "response_item":
            payload["x_future"] = {"n": 123456789012345678901234567890}
        lines.append(obj)

    used = [2000]

    def token_count() -> None:
        usage = {"input_tokens": used[0], "cached_input_tokens": used[0] // 2, "output_tokens": 50,
                 "reasoning_output_tokens": 10, "total_tokens": used[0] + 50}
        rec("event_msg", {"type": "token_count", "info": {"total_token_usage": usage, "last_token_usage": usage,
                                                          "model_context_window": 272000}, "rate_limits": None})

    rec("session_meta", {"id": "sess-gen", "timestamp": "2025-11-20T10:00:00.000Z", "cwd": "/w/app",
                         "originator": "codex_cli_rs", "cli_version": "0.58.0", "instructions": conv.system,
                         "source": "cli", "model_provider": "openai"})
    rec("response_item", {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "<environment_context>\n  <cwd>/w/app</cwd>\n</environment_context>"}]})
    for t, turn in enumerate(conv.turns):
        if conv.compaction and conv.compaction[0] == t:
            rec("compacted", {"message": conv.compaction[1]})
            rec("event_msg", {"type": "context_compacted"})
        rec("turn_context", {"cwd": "/w/app", "approval_policy": "never", "sandbox_policy": {"mode": "workspace-write"},
                             "model": conv.model, "summary": "auto"})
        content = [{"type": "input_text", "text": turn.prompt}]
        images = []
        if turn.image:
            images = [f"data:image/png;base64,{turn.image}"]
            content.append({"type": "input_image", "image_url": images[0]})
        rec("response_item", {"type": "message", "role": "user", "content": content})
        rec("event_msg", {"type": "user_message", "message": turn.prompt, "images": images})
        used[0] += len(turn.prompt) // 4
        for step in turn.steps:
            if step.thinking is not None:
                rec("response_item", {"type": "reasoning", "summary": [{"type": "summary_text", "text": step.thinking}],
                                      "content": None, "encrypted_content": "gAAAA" + "x" * 40})
            if step.text is not None:
                rec("response_item", {"type": "message", "role": "assistant",
                                      "content": [{"type": "output_text", "text": step.text}]})
            for call in step.calls:
                rec("response_item", {"type": "function_call", "name": call.name,
                                      "arguments": json.dumps(call.args), "call_id": call.id})
            token_count()
            for k in step.order:
                call = step.calls[k]
                text = call.result.text if call.result.text is not None else "[image omitted]"
                used[0] += len(text) // 4
                rec("response_item", {"type": "function_call_output", "call_id": call.id, "output": text})
        rec("response_item", {"type": "message", "role": "assistant",
                              "content": [{"type": "output_text", "text": turn.reply}]})
        token_count()

    def unknown(payload: dict) -> dict:
        return {"timestamp": "2025-11-20T10:00:00.000Z", "type": "future_record", "payload": payload}

    return join_lines(conv, lines, unknown)


# --- openai and anthropic message lists ------------------------------------------------------
def _openai_messages(conv: Conversation) -> list[list[dict]]:
    """The messages, grouped by turn (a compaction summary opens the turn it precedes)."""
    groups: list[list[dict]] = [[{"role": "system", "content": conv.system}]]
    for t, turn in enumerate(conv.turns):
        group: list[dict] = []
        if conv.compaction and conv.compaction[0] == t:
            group.append({"role": "user", "content": "Summary of the earlier conversation:\n\n" + conv.compaction[1]})
        content = turn.prompt
        if turn.image:
            content = [{"type": "text", "text": turn.prompt},
                       {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{turn.image}"}}]
        group.append({"role": "user", "content": content})
        for step in turn.steps:
            msg: dict = {"role": "assistant", "content": step.text}
            if step.calls:
                msg["tool_calls"] = [{"id": c.id, "type": "function",
                                      "function": {"name": c.name, "arguments": json.dumps(c.args)}}
                                     for c in step.calls]
            if conv.unknown_fields:
                msg["x_unknown_field"] = {"n": 123456789012345678901234567890}
            group.append(msg)
            for k in step.order:
                call = step.calls[k]
                text = call.result.text if call.result.text is not None else "(an image was shown)"
                group.append({"role": "tool", "tool_call_id": call.id, "content": text})
        group.append({"role": "assistant", "content": turn.reply})
        groups.append(group)
    return groups


def _anthropic_messages(conv: Conversation) -> list[list[dict]]:
    groups: list[list[dict]] = [[]]
    for t, turn in enumerate(conv.turns):
        group: list[dict] = []
        prompt: list[dict] = []
        if conv.compaction and conv.compaction[0] == t:
            prompt.append({"type": "text", "text": "Summary of the earlier conversation:\n\n" + conv.compaction[1]})
        if turn.image:
            prompt.append({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": turn.image}})
        prompt.append({"type": "text", "text": turn.prompt})
        group.append({"role": "user", "content": prompt if len(prompt) > 1 else turn.prompt})
        for step in turn.steps:
            blocks: list[dict] = []
            if step.thinking is not None:
                blocks.append({"type": "thinking", "thinking": step.thinking, "signature": "EqQBCkgIBxABGAIiQL1Y=="})
            if step.text is not None:
                blocks.append({"type": "text", "text": step.text})
            blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.args} for c in step.calls]
            msg: dict = {"role": "assistant", "content": blocks}
            if conv.unknown_fields:
                msg["x_unknown"] = 123456789012345678901234567890
            group.append(msg)
            if step.calls:
                results = []
                for k in step.order:
                    call = step.calls[k]
                    if call.result.image:
                        inner: object = [{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                      "data": call.result.image}}]
                    else:
                        inner = call.result.text
                    block = {"type": "tool_result", "tool_use_id": call.id, "content": inner}
                    if call.result.is_error:
                        block["is_error"] = True
                    results.append(block)
                group.append({"role": "user", "content": results})
        group.append({"role": "assistant", "content": [{"type": "text", "text": turn.reply}]})
        groups.append(group)
    return groups


def _openai(conv: Conversation) -> bytes:
    groups = _openai_messages(conv)
    lines: list[dict] = []
    history: list[dict] = []
    for n, group in enumerate(groups):
        if conv.layout == "bodies" and n > 0:
            *asked, reply = group
            history += asked
            lines.append({"model": conv.model, "messages": list(history)})
            lines.append({"id": f"chatcmpl-{n}", "object": "chat.completion", "created": 1767225600 + n,
                          "model": conv.model, "choices": [{"index": 0, "message": reply, "finish_reason": "stop"}],
                          "usage": {"prompt_tokens": 1000 * n, "completion_tokens": 20, "total_tokens": 1000 * n + 20}})
            history.append(reply)
        elif conv.layout == "bodies":
            history += group
        else:
            lines += group
    return join_lines(conv, lines, lambda payload: {"type": "lookout-test-unknown", "payload": payload})


def _anthropic(conv: Conversation) -> bytes:
    groups = _anthropic_messages(conv)
    lines: list[dict] = []
    history: list[dict] = []
    for n, group in enumerate(groups[1:], 1):
        *asked, reply = group
        if conv.layout == "bodies":
            history += asked
            lines.append({"model": conv.model, "max_tokens": 4096, "system": conv.system, "messages": list(history)})
            history.append(reply)
        else:
            lines += asked
        lines.append({"id": f"msg_{n:04d}", "type": "message", "role": "assistant", "model": conv.model,
                      "content": reply["content"], "stop_reason": "end_turn", "stop_sequence": None,
                      "usage": {"input_tokens": 50, "cache_creation_input_tokens": 200,
                                "cache_read_input_tokens": 1000 * n, "output_tokens": 20}})
    return join_lines(conv, lines, lambda payload: {"type": "lookout-test-unknown", "payload": payload})


RENDERERS = {"claude-code": _claude_code, "codex": _codex, "openai": _openai, "anthropic": _anthropic}


@st.composite
def transcripts(draw, fmt: str | None = None, **kwargs) -> tuple[str, bytes, Conversation]:
    """(format, bytes, conversation) for a drawn conversation in a drawn (or given) format."""
    fmt = fmt or draw(st.sampled_from(FORMATS))
    conv = draw(conversations(**kwargs))
    return fmt, render(conv, fmt), conv
