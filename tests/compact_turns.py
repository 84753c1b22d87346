"""Single long turns built from real sessions' steps, for the compaction tests.

A real agent runs out of context inside one long autonomous turn: one request, then dozens to
hundreds of tool calls. ``claude_turn`` and ``codex_turn`` build such a session from the steps of
the real transcripts in the shared folder (the Claude Code session's main chain, the Codex
rollout's calls), repeated with fresh ids until the conversation holds about ``tokens`` tokens,
with the provider's usage recorded after each response as the agent records it. The last line
is a tool result the agent has not read yet (the turn stopped for room). ``continue_turn``
appends more steps to such a session, as the agent would while it keeps working.
"""

from __future__ import annotations

import copy
import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from conftest import SHARED_TRANSCRIPTS

CLAUDE_SOURCE = "claude-code/ccviewer-fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
CODEX_SOURCE = "codex/rollout-2025-11-17T15-30-28-019a93b9-f380-7600-98ff-940e6b99603c.jsonl"
CHARS_PER_TOKEN = 4  # what the built session's recorded usage assumes (the provider's own count)


def _dumps(obj: dict) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"


def _stamp(start: datetime, n: int) -> str:
    t = start + timedelta(seconds=n)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


# --- Claude Code ----------------------------------------------------------------------------

def _claude_parts() -> tuple[list[dict], list[list[dict]]]:
    """The request lines and the steps (a response's lines and their results) of the source's
    main chain, each step with every call answered inside it."""
    lines = [json.loads(x) for x in (SHARED_TRANSCRIPTS / CLAUDE_SOURCE).read_text().splitlines()]
    main = [d for d in lines if d.get("type") in ("user", "assistant") and not d.get("isSidechain")]
    head = main[:2]  # the /orchestrator prompt and its expansion
    steps: list[list[dict]] = []
    current: list[dict] = []
    for d in main[2:]:
        content = d["message"].get("content")
        is_result = d["type"] == "user" and isinstance(content, list) and content \
            and content[0].get("type") == "tool_result"
        if d["type"] == "assistant" and current and current[-1]["type"] == "user":
            steps.append(current)
            current = []
        if d["type"] == "user" and not is_result:
            break  # the second prompt: the turn ends here
        current.append(d)
    if current:
        steps.append(current)
    whole = []
    for step in steps:
        calls = {b["id"] for d in step if d["type"] == "assistant" for b in d["message"]["content"]
                 if b.get("type") == "tool_use"}
        results = {b["tool_use_id"] for d in step if d["type"] == "user" for b in d["message"]["content"]
                   if b.get("type") == "tool_result"}
        if calls and calls == results:
            whole.append(step)
    return head, whole


def claude_turn(path: Path, tokens: int, unread: bool = True, cache_writes: bool = False) -> Path:
    """A Claude Code session of one request and about ``tokens`` tokens of steps; with
    ``cache_writes`` each response writes what the one before added to the prompt cache (in the
    5-minute tier), else it reads the whole prompt from the cache."""
    head, steps = _claude_parts()
    session = str(uuid.uuid4())
    start = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
    out: list[str] = []
    parent = None
    n = 0
    for d in head:
        d = copy.deepcopy(d)
        d.update(sessionId=session, uuid=str(uuid.uuid4()), parentUuid=parent, timestamp=_stamp(start, n))
        parent = d["uuid"]
        out.append(_dumps(d))
        n += 1
    state = {"parent": parent, "n": n, "chars": sum(len(_dumps(json.loads(x)["message"]["content"])) for x in out)
             + 15_000 * CHARS_PER_TOKEN, "round": 0,  # the system prompt and tools the source's first usage shows
             "cached": 0 if cache_writes else None}
    _claude_steps(out, steps, state, session, start, tokens * CHARS_PER_TOKEN, unread)
    path.write_text("".join(out))
    return path


def _claude_steps(out: list[str], steps: list[list[dict]], state: dict, session: str, start: datetime,
                  until_chars: int, unread: bool) -> None:
    while True:
        state["round"] += 1
        for step in steps:
            last_round = state["chars"] >= until_chars
            tag = f"r{state['round']}x{state['n']}"
            ids: dict[str, str] = {}
            for d in step:
                d = copy.deepcopy(d)
                d.update(sessionId=session, uuid=str(uuid.uuid4()), parentUuid=state["parent"],
                         timestamp=_stamp(start, state["n"]))
                d.pop("requestId", None)
                msg = d["message"]
                for b in msg["content"] if isinstance(msg["content"], list) else ():
                    if b.get("type") == "tool_use":
                        b["id"] = ids.setdefault(b["id"], f"{b['id']}_{tag}")
                    elif b.get("type") == "tool_result":
                        b["tool_use_id"] = ids.setdefault(b["tool_use_id"], f"{b['tool_use_id']}_{tag}")
                if d["type"] == "assistant":
                    msg["id"] = f"{msg['id']}_{tag}"
                    d["requestId"] = f"req_{tag}"
                    prompt = state["chars"] // CHARS_PER_TOKEN
                    cached = prompt if state.get("cached") is None else state["cached"]
                    written = prompt - cached
                    if state.get("cached") is not None:
                        state["cached"] = prompt
                    msg["usage"] = {"input_tokens": 3, "cache_creation_input_tokens": written,
                                    "cache_read_input_tokens": cached, "output_tokens": 200,
                                    "cache_creation": {"ephemeral_5m_input_tokens": written,
                                                       "ephemeral_1h_input_tokens": 0},
                                    "service_tier": "standard"}
                d.pop("toolUseResult", None)
                line = _dumps(d)
                out.append(line)
                state["chars"] += len(_dumps(msg["content"]))  # what the model reads of it
                state["parent"] = d["uuid"]
                state["n"] += 1
            if last_round:
                if not unread:  # the agent's last reply read the results
                    d = {"parentUuid": state["parent"], "isSidechain": False, "type": "assistant",
                         "sessionId": session, "uuid": str(uuid.uuid4()), "timestamp": _stamp(start, state["n"]),
                         "message": {"id": f"msg_end_{state['n']}", "type": "message", "role": "assistant",
                                     "model": "claude-sonnet-4-20250514",
                                     "content": [{"type": "text", "text": "Done for now."}],
                                     "usage": {"input_tokens": 3, "cache_read_input_tokens":
                                               state["chars"] // CHARS_PER_TOKEN, "output_tokens": 5}}}
                    out.append(_dumps(d))
                    state["parent"] = d["uuid"]
                    state["n"] += 1
                return


def claude_continue(path: Path, calls: int, prompt_tokens: int) -> None:
    """Append ``calls`` more steps to a session ``claude_turn`` built (or lookout compacted),
    chained to its newest line; the first response's prompt counts ``prompt_tokens`` (after a
    compaction, what the provider would count for the compacted context)."""
    _head, steps = _claude_parts()
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    chain = [d for d in lines if d.get("type") in ("user", "assistant", "system") and "uuid" in d]
    newest = max(chain, key=lambda d: d["timestamp"])
    start = datetime.strptime(newest["timestamp"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    state = {"parent": newest["uuid"], "n": 1, "chars": prompt_tokens * CHARS_PER_TOKEN, "round": 1000 + len(lines)}
    out: list[str] = []
    chosen = (steps * (calls // len(steps) + 1))[:calls]
    _claude_steps(out, chosen, state, newest["sessionId"], start, 0, unread=True)
    with open(path, "a") as fh:
        fh.write("".join(out))


# --- Codex ----------------------------------------------------------------------------------

def _codex_parts() -> tuple[list[dict], list[list[dict]]]:
    lines = [json.loads(x) for x in (SHARED_TRANSCRIPTS / CODEX_SOURCE).read_text().splitlines()]
    first = next(i for i, d in enumerate(lines) if d["payload"].get("type") in ("reasoning", "function_call"))
    head = [d for d in lines[:first] if d["type"] != "event_msg" or d["payload"].get("type") == "user_message"]
    steps, current = [], []
    for d in lines[first:]:
        kind = d["payload"].get("type")
        if d["type"] != "response_item":
            continue
        if kind in ("reasoning", "function_call") and current and current[-1]["payload"].get("type") == \
                "function_call_output":
            steps.append(current)
            current = []
        current.append(d)
    if current:
        steps.append(current)
    return head, steps


def codex_turn(path: Path, tokens: int, window: int = 200_000, unread: bool = True) -> Path:
    """A Codex rollout of one request and about ``tokens`` tokens of calls, recording
    ``window`` as the model's context window."""
    head, steps = _codex_parts()
    sid = str(uuid.uuid4())
    out = []
    for d in head:
        d = copy.deepcopy(d)
        if d["type"] == "session_meta":
            d["payload"]["id"] = sid
        out.append(_dumps(d))
    state = {"chars": sum(len(x) for x in out), "total": 0, "round": 0, "n": 0}
    _codex_steps(out, steps, state, tokens * CHARS_PER_TOKEN, window, unread, stop_after=None)
    path.write_text("".join(out))
    return path


def _codex_steps(out: list[str], steps: list[list[dict]], state: dict, until_chars: int, window: int,
                 unread: bool, stop_after: int | None) -> None:
    start = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
    done = 0
    while True:
        state["round"] += 1
        for step in steps:
            last = state["chars"] >= until_chars if stop_after is None else done + 1 >= stop_after
            tag = f"r{state['round']}x{state['n']}"
            for d in step:
                d = copy.deepcopy(d)
                d["timestamp"] = _stamp(start, state["n"])
                p = d["payload"]
                if "call_id" in p:
                    p["call_id"] = f"{p['call_id']}_{tag}"
                if p.get("type") == "function_call_output" and out:  # the response before it
                    prompt = state["chars"] // CHARS_PER_TOKEN
                    state["total"] += prompt
                    usage = {"input_tokens": prompt, "cached_input_tokens": max(0, prompt - 2000),
                             "output_tokens": 150, "reasoning_output_tokens": 50, "total_tokens": prompt + 150}
                    event = {"timestamp": d["timestamp"], "type": "event_msg",
                             "payload": {"type": "token_count", "info": {
                                 "total_token_usage": dict(usage, input_tokens=state["total"]),
                                 "last_token_usage": usage, "model_context_window": window},
                                 "rate_limits": None}}
                    out.append(_dumps(event))
                line = _dumps(d)
                out.append(line)
                state["chars"] += len(_dumps(p))
                state["n"] += 1
            done += 1
            if last:
                if not unread:
                    msg = {"timestamp": _stamp(start, state["n"]), "type": "response_item",
                           "payload": {"type": "message", "role": "assistant",
                                       "content": [{"type": "output_text", "text": "Done for now."}]}}
                    out.append(_dumps(msg))
                return


def codex_continue(path: Path, calls: int, prompt_tokens: int, window: int = 200_000) -> None:
    """Append ``calls`` more calls to a rollout ``codex_turn`` built (or lookout compacted); the
    first response's prompt counts ``prompt_tokens``."""
    _head, steps = _codex_parts()
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    counts = [d for d in lines if d["type"] == "event_msg" and d["payload"].get("type") == "token_count"
              and d["payload"].get("info")]
    last = counts[-1]["payload"]["info"] if counts else None
    state = {"chars": prompt_tokens * CHARS_PER_TOKEN, "total": last["total_token_usage"]["input_tokens"] if last else 0,
             "round": 1000 + len(lines), "n": len(lines)}
    out: list[str] = []
    _codex_steps(out, steps, state, 0, window, True, stop_after=calls)
    with open(path, "a") as fh:
        fh.write("".join(out))
