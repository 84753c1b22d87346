"""Reference passes: the minimum work a pass over a transcript must do (research/performance.md §5, §7).

    python -m bench.reference measure  < FILE   # orjson every line, encode_ordinary every text block shown
    python -m bench.reference estimate < FILE   # the same walk, chars/4 instead of a tokenizer
    python -m bench.reference usage    < FILE   # usage figures only: lines with "usage", deduplicated
    python -m bench.reference tail FILE         # tail-only state: parse only lines appended since the last run
    python -m bench.reference cached FILE       # every line, counts from the sqlite block cache (warm after one run)
    python -m bench.reference report DIR...     # usage only over every *.jsonl under DIR, summed (lookout report)

The walk counts what lookout's views count as text, with the same conventions (a tool call
is its name followed by its compact JSON input; a tool result's text parts are joined by a
newline; base64 images are never tokenized), so exact counts can be compared. It does not
build a chain or deduplicate split lines (the generated transcripts need neither); it skips
a Claude Code line marked ``isSidechain`` (a subagent's, which the real shape has), and
counts only the texts after the last ``compact_boundary`` or Codex ``compacted`` record, the
latter's summary with them (what the model sees: a compacted session's earlier segments are
parsed, and their texts let go at the next boundary; the prompts Codex carries over a
compaction are not counted). It
imports nothing from lookout except the shipped rank files, loaded the way lookout must load
them (no network).

Prints one JSON line to stdout: {"tokens": N, "blocks": N, "chars": N, ...}.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable

import orjson


def _encoder():
    """o200k built from lookout's shipped rank file (the only offline source on this machine)."""
    from lookout_cli.tokens.tokenizer import get_encoding

    return get_encoding("o200k_base").encode_ordinary


def _dumps(value) -> str:
    return orjson.dumps(value).decode()


def _result_text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text"
                         and isinstance(b.get("text"), str))
    return ""


def texts(obj) -> list[str]:
    """The countable texts of one parsed line, in any of the generated formats."""
    out: list[str] = []
    if not isinstance(obj, dict):
        return out
    kind = obj.get("type")
    if kind in ("user", "assistant") and isinstance(obj.get("message"), dict):  # claude-code
        if obj.get("isSidechain") is True:  # a subagent's lines: not in the main context
            return out
        content = obj["message"].get("content")
    elif kind == "compacted":  # codex: what the model sees starts again, with the summary
        p = obj.get("payload") or {}
        out = [p["message"]] if isinstance(p.get("message"), str) and p["message"] else []
        for item in p.get("replacement_history") or ():
            out += texts({"type": "response_item", "payload": item})
        return out
    elif kind == "response_item":  # codex
        p = obj.get("payload") or {}
        pt = p.get("type")
        if pt == "message":
            content = p.get("content")
            return [c["text"] for c in content or () if isinstance(c, dict) and isinstance(c.get("text"), str)]
        if pt == "reasoning":
            return [s["text"] for s in p.get("summary") or () if isinstance(s, dict) and isinstance(s.get("text"), str)]
        if pt == "function_call":
            return [p.get("name", "") + p.get("arguments", "")]
        if pt == "function_call_output":
            return [p.get("output", "")]
        return out
    elif "role" in obj:  # openai / anthropic message lists
        content = obj.get("content")
        for call in obj.get("tool_calls") or ():
            f = call.get("function") or {}
            out.append(f.get("name", "") + f.get("arguments", ""))
    else:
        return out
    if isinstance(content, str):
        out.append(content)
        return out
    for b in content or ():
        if not isinstance(b, dict):
            continue
        t = b.get("type")
        if t == "text":
            out.append(b.get("text") or "")
        elif t == "thinking":
            out.append(b.get("thinking") or "")
        elif t == "tool_use":
            out.append(b.get("name", "") + _dumps(b.get("input", {})))
        elif t == "tool_result":
            out.append(_result_text(b.get("content")))
    return out


def is_boundary(obj) -> bool:
    """A Claude Code compaction of the main conversation, or a Codex one: what the model sees
    starts there."""
    return isinstance(obj, dict) and (obj.get("type") == "compacted" and isinstance(obj.get("payload"), dict) or (
        obj.get("subtype") == "compact_boundary" and obj.get("type") == "system" and obj.get("isSidechain") is not True))


def last_boundary(stream) -> int | None:
    """Where the last compaction's line starts in a seekable file (-1: none; None: not a file),
    found from the end (a compacted session's texts before it are not counted)."""
    import mmap

    try:
        st = os.fstat(stream.fileno())
        if not stat.S_ISREG(st.st_mode):
            return None
        size = st.st_size
        if not size:
            return -1
        view = mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError, AttributeError):
        return None
    found = -1
    with view:
        for needle in (b'"compact_boundary"', b'"compacted"'):
            end = size
            while (at := view.rfind(needle, found + 1, end)) >= 0:
                start = view.rfind(b"\n", 0, at) + 1
                stop = view.find(b"\n", at)
                try:
                    if is_boundary(orjson.loads(view[start:stop if stop >= 0 else size])):
                        found = start
                        break
                except orjson.JSONDecodeError:
                    pass
                end = start
    return found


def visible_texts(stream, each: Callable[[list[str]], None]) -> tuple[int, bool]:
    """Every line parsed, ``each`` called with the texts of each line after the last
    compaction; the lines read, and whether a compaction was among them. In a file the last
    boundary is found first; elsewhere (a pipe, a list of lines) the texts wait until the end,
    let go at each boundary."""
    lines, compacted = 0, False
    loads = orjson.loads
    start = last_boundary(stream)
    offset = stream.tell() if start is not None else 0
    shown: list[str] = []  # (not in a file)
    for line in stream:
        lines += 1
        at, offset = offset, offset + len(line)
        try:
            obj = loads(line)
        except orjson.JSONDecodeError:
            continue
        if start is not None:
            if at >= start:  # (a Claude Code boundary has no text; a Codex one its summary)
                each(texts(obj))
            compacted = compacted or at == start
        elif is_boundary(obj):
            shown, compacted = texts(obj), True
        else:
            shown += texts(obj)
    each(shown)
    return lines, compacted


def pass_measure(stream, exact: bool = True) -> dict:
    encode = _encoder() if exact else None
    tokens = blocks = chars = 0

    def count(found: list[str]) -> None:
        nonlocal tokens, blocks, chars
        for text in found:
            if not text:
                continue
            blocks += 1
            chars += len(text)
            tokens += len(encode(text)) if exact else len(text) // 4

    lines, compacted = visible_texts(stream, count)
    return {"tokens": tokens, "blocks": blocks, "chars": chars, "lines": lines, "compacted": compacted}


def pass_tail(path: str) -> dict:
    """The incremental reference: lookout_cli.meter.state's offset, guard and running totals;
    the encoding loads only when new text must be counted."""
    from lookout_cli.meter import state as ms

    key = "bench-reference-o200k"
    plan = ms.plan(path, key)
    totals = dict(plan.state.totals) if plan.state else {"tokens": 0, "blocks": 0, "chars": 0, "lines": 0}
    if plan.kind == ms.UNCHANGED:
        return {**totals, "plan": plan.kind}
    lines, end = ms.read_lines(path, plan.start)
    new = pass_measure(lines) if lines else {"tokens": 0, "blocks": 0, "chars": 0, "lines": 0, "compacted": False}
    for k in totals:  # a compaction among the new lines: what came before it is no longer seen
        totals[k] = new[k] + (totals[k] if k == "lines" or not new["compacted"] else 0)
    ms.commit(path, key, end, totals)
    return {**totals, "plan": plan.kind}


def pass_cached(stream) -> dict:
    """Every line parsed, every block looked up in lookout_cli.tokens.cache before tokenizing."""
    from lookout_cli.tokens.cache import TokenCache

    encode = None
    tokens = blocks = chars = 0
    with TokenCache("o200k_base") as cache:
        def count(found: list[str]) -> None:
            nonlocal encode, tokens, blocks, chars
            for text in found:
                if not text:
                    continue
                blocks += 1
                chars += len(text)
                key = cache.key(text)
                n = cache.get(text, key)
                if n is None:
                    encode = encode or _encoder()
                    n = len(encode(text))
                    cache.put(text, n, key)
                tokens += n

        lines, _ = visible_texts(stream, count)
    return {"tokens": tokens, "blocks": blocks, "chars": chars, "lines": lines}


def pass_usage(stream) -> dict:
    seen = set()
    totals = {"input": 0, "cache_write": 0, "cache_read": 0, "output": 0}
    lines = 0
    for line in stream:
        lines += 1
        if b'"usage"' not in line and b'"token_count"' not in line:
            continue
        obj = orjson.loads(line)
        msg = obj.get("message") if isinstance(obj, dict) else None
        if isinstance(msg, dict) and isinstance(msg.get("usage"), dict):
            key = (msg.get("id"), obj.get("requestId"))
            if key in seen:
                continue
            seen.add(key)
            u = msg["usage"]
            totals["input"] += u.get("input_tokens", 0)
            totals["cache_write"] += u.get("cache_creation_input_tokens", 0)
            totals["cache_read"] += u.get("cache_read_input_tokens", 0)
            totals["output"] += u.get("output_tokens", 0)
        elif isinstance(obj, dict) and obj.get("type") == "event_msg":
            info = (obj.get("payload") or {}).get("info") or {}
            last = info.get("last_token_usage") or {}
            totals["input"] += last.get("input_tokens", 0) - last.get("cached_input_tokens", 0)
            totals["cache_read"] += last.get("cached_input_tokens", 0)
            totals["output"] += last.get("output_tokens", 0)
    totals["lines"] = lines
    totals["responses"] = len(seen)
    return totals


def pass_report(roots: list[str]) -> dict:
    """``pass_usage`` over every ``*.jsonl`` file under ``roots``, one after the other in this
    process: the files opened and read line by line, the lines that record usage parsed with
    orjson and summed (a Claude Code response once per message and request id)."""
    import os

    totals: dict[str, int] = {}
    files = 0
    for root in roots:
        for folder, _, names in os.walk(root):
            for name in names:
                if not name.endswith(".jsonl"):
                    continue
                files += 1
                with open(os.path.join(folder, name), "rb") as stream:
                    for key, value in pass_usage(stream).items():
                        totals[key] = totals.get(key, 0) + value
    totals["files"] = files
    return totals


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    mode = argv[0] if argv else "measure"
    if mode == "report":
        sys.stdout.write(orjson.dumps(pass_report(argv[1:])).decode() + "\n")
        return 0
    if mode == "tail":
        sys.stdout.write(orjson.dumps(pass_tail(argv[1])).decode() + "\n")
        return 0
    stream = open(argv[1], "rb", buffering=1 << 20) if len(argv) > 1 else open(0, "rb", buffering=1 << 20)
    with stream:
        if mode == "measure":
            result = pass_measure(stream)
        elif mode == "estimate":
            result = pass_measure(stream, exact=False)
        elif mode == "usage":
            result = pass_usage(stream)
        elif mode == "cached":
            result = pass_cached(stream)
        else:
            print(f"unknown mode {mode!r} (measure, estimate, usage)", file=sys.stderr)
            return 2
    sys.stdout.write(orjson.dumps(result).decode() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
