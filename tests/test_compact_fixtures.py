"""Long sessions for the compact tests, generated in every writable format.

One neutral script (turns of prompts, tool calls with their outputs, replies) is written out
as a Claude Code session, a Codex rollout, an OpenAI message list and an Anthropic message
list, each in its own agent's shapes, so the same compaction can be checked in all four. The
tests at the bottom check that each adapter reads the generated file the way the script says.
"""

from __future__ import annotations

import io
import json
import random
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from lookout_cli.core.jsonl import RecordWriter, read_records
from lookout_cli.formats import Transcript, detect
from lookout_cli.tokens.tokenizer import estimate

FORMATS = ("claude-code", "codex", "openai", "anthropic")
FIRST_PROMPT = ("Port the CSV importer to the new storage API. Always run the tests with `pytest -q`; "
                "never touch the vendor/ folder.")
ERROR_LINE = "FAILED tests/test_io.py::test_read - AssertionError: expected 3 rows, got 2"
WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar "
         "papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu").split()


@dataclass
class Call:
    id: str
    kind: str  # "bash" | "read" | "edit"
    path: str | None
    command: str | None
    output: str
    error: bool = False


@dataclass
class Step:
    text: str
    calls: list[Call] = field(default_factory=list)


@dataclass
class Turn:
    prompt: str
    steps: list[Step]
    final: str


def output_text(rng: random.Random, chars: int, path: str) -> str:
    lines = []
    n = 0
    while sum(len(x) + 1 for x in lines) < chars:
        n += 1
        words = " ".join(rng.choice(WORDS) for _ in range(6))
        lines.append(f"{path}:{n}: def handle_{n}(row_{n % 97}): return {rng.randint(0, 99999)}  # {words}")
    return "\n".join(lines)


def script(turns: int = 14, steps: int = 3, output_chars: int = 9_000, seed: int = 7,
           last_unread: bool = False) -> list[Turn]:
    """A session: each turn reads, edits and tests a file; the third turn hits an error.
    ``last_unread`` ends the session with a tool result the agent has not read yet."""
    rng = random.Random(seed)
    out = []
    serial = 0
    for t in range(turns):
        prompt = FIRST_PROMPT if t == 0 else f"Turn {t}: now handle module_{t}.py the same way, and keep the old API."
        if t == turns - 1:
            prompt = "Last step: update the changelog and tell me what is left."
        chosen = []
        for s in range(steps):
            serial += 1
            path = f"src/importer/module_{t}_{s}.py"
            kind = ("read", "edit", "bash")[s % 3]
            cid = f"call_{serial:04d}"
            if kind == "read":
                call = Call(cid, "read", path, None, output_text(rng, output_chars, path))
            elif kind == "edit":
                call = Call(cid, "edit", path, None, f"The file {path} has been updated.")
            else:
                error = t == 2
                cmd = f"pytest -q tests/test_module_{t}.py"
                text = output_text(rng, output_chars // 2, f"tests/test_module_{t}.py")
                if error:
                    text = text + "\n" + ERROR_LINE + "\n1 failed, 12 passed\nExit code: 1"
                call = Call(cid, "bash", None, cmd, text, error)
            chosen.append(Step(f"Step {s} of turn {t}: I'll look at {path} next.", [call]))
        final = (f"Done with turn {t}. I decided to keep the adapter layer instead of rewriting the reader. "
                 f"Next step: module_{t + 1}.py.")
        out.append(Turn(prompt, chosen, final))
    if last_unread:
        serial += 1
        path = "src/importer/late.py"
        out[-1].steps.append(Step("Reading one more file.", [Call(f"call_{serial:04d}", "read", path, None,
                                                                   output_text(rng, output_chars, path))]))
        out[-1].final = ""
    return out


def _stamp(n: int) -> str:
    return f"2025-10-01T{10 + n // 3600 % 10:02d}:{n // 60 % 60:02d}:{n % 60:02d}.000Z"


def _lines(objs: list[dict]) -> bytes:
    return b"".join(json.dumps(o, ensure_ascii=False, separators=(",", ":")).encode() + b"\n" for o in objs)


# --- Claude Code ------------------------------------------------------------------------------

def claude_code(turns: list[Turn], model: str = "claude-sonnet-4-5") -> bytes:
    env = {"isSidechain": False, "userType": "external", "cwd": "/w/app", "sessionId": "sess-compact",
           "version": "2.0.14", "gitBranch": "main"}
    objs: list[dict] = []
    parent = None
    clock = 0
    total = 3_000  # system prompt and tools, about

    def line(kind: str, message: dict, **extra) -> None:
        nonlocal parent, clock
        clock += 7
        uid = f"u{len(objs):05d}"
        objs.append({"parentUuid": parent, **env, "type": kind, "message": message, **extra, "uuid": uid,
                     "timestamp": _stamp(clock)})
        parent = uid

    def usage(text: str) -> dict:
        nonlocal total
        total += estimate(text)
        return {"input_tokens": 5, "cache_creation_input_tokens": 200, "cache_read_input_tokens": max(total - 205, 0),
                "output_tokens": 50}

    for n, turn in enumerate(turns):
        line("user", {"role": "user", "content": turn.prompt})
        total += estimate(turn.prompt)
        for s, step in enumerate(turn.steps):
            blocks = [{"type": "text", "text": step.text}]
            for call in step.calls:
                blocks.append({"type": "tool_use", "id": call.id, "name": _claude_tool(call), "input": _claude_args(call)})
            mid = f"msg_{n}_{s}"
            line("assistant", {"id": mid, "type": "message", "role": "assistant", "model": model, "content": blocks,
                               "stop_reason": "tool_use", "usage": usage(json.dumps(blocks))}, requestId=f"req_{n}_{s}")
            results = [{"type": "tool_result", "tool_use_id": c.id, "content": c.output, **({"is_error": True} if c.error else {})}
                       for c in step.calls]
            line("user", {"role": "user", "content": results}, toolUseResult={"stdout": "", "stderr": ""})
            total += sum(estimate(c.output) for c in step.calls)
        if turn.final:
            line("assistant", {"id": f"msg_{n}_end", "type": "message", "role": "assistant", "model": model,
                               "content": [{"type": "text", "text": turn.final}], "stop_reason": "end_turn",
                               "usage": usage(turn.final)}, requestId=f"req_{n}_end")
    return _lines(objs)


def _claude_tool(call: Call) -> str:
    return {"read": "Read", "edit": "Edit", "bash": "Bash"}[call.kind]


def _claude_args(call: Call) -> dict:
    if call.kind == "read":
        return {"file_path": f"/w/app/{call.path}"}
    if call.kind == "edit":
        return {"file_path": f"/w/app/{call.path}", "old_string": "old_api()", "new_string": "new_api()"}
    return {"command": call.command, "description": "Run the tests"}


# --- Codex ------------------------------------------------------------------------------------

def codex(turns: list[Turn], model: str = "gpt-5.1-codex") -> bytes:
    objs: list[dict] = []
    clock = 0
    total = 9_000

    def line(kind: str, payload: dict) -> None:
        nonlocal clock
        clock += 5
        objs.append({"timestamp": _stamp(clock), "type": kind, "payload": payload})

    def tokens(text: str) -> None:
        nonlocal total
        total += estimate(text)
        last = {"input_tokens": total, "cached_input_tokens": max(total - 500, 0), "output_tokens": 60,
                "reasoning_output_tokens": 0, "total_tokens": total + 60}
        line("event_msg", {"type": "token_count", "info": {"total_token_usage": last, "last_token_usage": last,
                                                           "model_context_window": 258_400}})

    line("session_meta", {"id": "sess-codex-compact", "timestamp": _stamp(0), "cwd": "/w/app",
                          "originator": "codex_cli_rs", "cli_version": "0.58.0", "instructions": None,
                          "source": "cli", "model_provider": "openai"})
    line("response_item", {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "<environment_context>\n  <cwd>/w/app</cwd>\n</environment_context>"}]})
    for n, turn in enumerate(turns):
        line("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": turn.prompt}]})
        line("event_msg", {"type": "user_message", "message": turn.prompt, "images": []})
        line("turn_context", {"cwd": "/w/app", "approval_policy": "never", "sandbox_policy": {"mode": "danger-full-access"},
                              "model": model, "effort": "high", "summary": "auto"})
        for step in turn.steps:
            line("response_item", {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": step.text}]})
            for call in step.calls:
                if call.kind == "edit":
                    patch = (f"*** Begin Patch\n*** Update File: {call.path}\n@@\n-old_api()\n+new_api()\n*** End Patch")
                    line("response_item", {"type": "custom_tool_call", "status": "completed", "call_id": call.id,
                                           "name": "apply_patch", "input": patch})
                    line("response_item", {"type": "custom_tool_call_output", "call_id": call.id,
                                           "output": json.dumps({"output": call.output, "metadata": {"exit_code": 0}})})
                else:
                    cmd = call.command if call.kind == "bash" else f"sed -n '1,400p' {call.path}"
                    line("response_item", {"type": "function_call", "name": "shell", "call_id": call.id,
                                           "arguments": json.dumps({"command": ["bash", "-lc", cmd], "workdir": "/w/app"})})
                    line("response_item", {"type": "function_call_output", "call_id": call.id,
                                           "output": json.dumps({"output": call.output,
                                                                 "metadata": {"exit_code": 1 if call.error else 0,
                                                                              "duration_seconds": 0.5}})})
            tokens(step.text + "".join(c.output for c in step.calls))
        if turn.final:
            line("response_item", {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": turn.final}]})
            tokens(turn.final)
    return _lines(objs)


# --- OpenAI and Anthropic message lists ---------------------------------------------------------

def openai(turns: list[Turn]) -> bytes:
    objs: list[dict] = [{"role": "system", "content": "You are a careful coding agent."}]
    for turn in turns:
        objs.append({"role": "user", "content": turn.prompt})
        for step in turn.steps:
            objs.append({"role": "assistant", "content": step.text, "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": _plain_tool(c), "arguments": json.dumps(_plain_args(c))}}
                for c in step.calls]})
            for c in step.calls:
                objs.append({"role": "tool", "tool_call_id": c.id, "content": c.output})
        if turn.final:
            objs.append({"role": "assistant", "content": turn.final})
    return _lines(objs)


def anthropic(turns: list[Turn]) -> bytes:
    objs: list[dict] = []
    for turn in turns:
        objs.append({"role": "user", "content": turn.prompt})
        for step in turn.steps:
            objs.append({"role": "assistant", "content": [{"type": "text", "text": step.text}] + [
                {"type": "tool_use", "id": c.id, "name": _plain_tool(c), "input": _plain_args(c)} for c in step.calls]})
            objs.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": c.id, "content": c.output, **({"is_error": True} if c.error else {})}
                for c in step.calls]})
        if turn.final:
            objs.append({"role": "assistant", "content": [{"type": "text", "text": turn.final}]})
    return _lines(objs)


def _plain_tool(call: Call) -> str:
    return {"read": "read_file", "edit": "write_file", "bash": "bash"}[call.kind]


def _plain_args(call: Call) -> dict:
    if call.kind == "read":
        return {"path": call.path}
    if call.kind == "edit":
        return {"path": call.path, "content": "new_api()\n"}
    return {"command": call.command}


WRITERS = {"claude-code": claude_code, "codex": codex, "openai": openai, "anthropic": anthropic}


def session(fmt: str, **kw) -> bytes:
    return WRITERS[fmt](script(**kw))


def parse(data: bytes) -> Transcript:
    records = list(read_records(io.BytesIO(data)))
    return Transcript(records, detect(records))


def dump(transcript: Transcript) -> bytes:
    out = io.BytesIO()
    RecordWriter(out).write_all(transcript.records)
    return out.getvalue()


def write(tmp_path: Path, fmt: str, **kw) -> Path:
    path = tmp_path / f"{fmt}.jsonl"
    path.write_bytes(session(fmt, **kw))
    return path


# --- the generated files read as the script says --------------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS)
def test_generated_session_reads_as_scripted(fmt):
    turns = script(turns=4, steps=3, output_chars=500)
    transcript = parse(WRITERS[fmt](turns))
    assert transcript.format == fmt
    view = transcript.view()
    prompts = [i.text for i in view.items if i.prompt]
    assert prompts == [t.prompt for t in turns]
    calls = [c for t in turns for s in t.steps for c in s.calls]
    assert sorted(view.calls()) == sorted(c.id for c in calls)
    assert sorted(view.results()) == sorted(c.id for c in calls)
    assert view.orphans() == []
    errors = {i.call_id for i in view.items if i.kind == "tool_result" and i.is_error}
    if fmt != "openai":  # Chat Completions tool messages cannot say they failed
        assert errors == {c.id for c in calls if c.error}


@pytest.mark.parametrize("fmt", FORMATS)
def test_unread_output_is_the_last_item(fmt):
    view = parse(session(fmt, turns=3, output_chars=300, last_unread=True)).view()
    assert view.items[-1].kind == "tool_result"
    assert view.items[-1].text.startswith("src/importer/late.py:1:")
