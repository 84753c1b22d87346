"""A hook event as Claude Code and Codex send it, and an answer in each one's protocol.

Both agents pass one JSON object on standard input (``session_id``, ``transcript_path``,
``cwd``, ``hook_event_name`` and the event's own fields) and read what the hook prints, with
exit status 0. What each does with the output, as checked against Claude Code 2.1.328 and
Codex CLI 0.171.0 on a loopback model (research/agent-hooks.md):

- SessionStart and UserPromptSubmit: JSON ``hookSpecificOutput.additionalContext`` reaches the
  model (Claude Code: a system message; Codex: a developer message); ``systemMessage`` is
  shown to the user; ``decision: "block"`` with a ``reason`` stops a prompt before any turn.
- PreCompact, Claude Code: what the hook prints *as plain text* is appended to its compaction
  prompt under "Additional Instructions:" (cut at 10,000 characters); JSON with a
  ``hookSpecificOutput`` for PreCompact fails its schema and lands in the conversation as an
  error. Codex runs PreCompact but puts nothing it prints into its compaction request.
- After a compaction both run SessionStart with source ``compact``, whose context reaches the
  next request (Codex's PostCompact context does not).
"""

from __future__ import annotations

import json
import os

CLAUDE = "claude"
CODEX = "codex"
AGENTS = (CLAUDE, CODEX)
PRE_COMPACT_LIMIT = 10_000  # Claude Code cuts a PreCompact hook's output here
CONTEXT_EVENTS = ("SessionStart", "UserPromptSubmit")


class Event:
    """One hook event: its JSON and which agent sent it (plain classes here: dataclasses'
    import, with inspect, cost every prompt 40 ms)."""

    def __init__(self, data: dict, agent: str) -> None:
        self.data = data
        self.agent = agent

    def _text(self, key: str) -> str | None:
        value = self.data.get(key)
        return value if isinstance(value, str) and value else None

    @property
    def name(self) -> str:
        return self._text("hook_event_name") or ""

    # the event's text fields: a non-empty string, else None
    source = property(lambda self: self._text("source"))
    transcript = property(lambda self: self._text("transcript_path"))
    cwd = property(lambda self: self._text("cwd"))
    session_id = property(lambda self: self._text("session_id"))
    prompt = property(lambda self: self._text("prompt"))


def agent_of(data: dict) -> str:
    """Which agent sent ``data``: Codex names its transcripts ``rollout-*.jsonl`` and gives its
    turn events a ``turn_id``; everything else is read as Claude Code."""
    path = data.get("transcript_path")
    if isinstance(path, str) and os.path.basename(path).startswith("rollout-"):
        return CODEX
    return CODEX if "turn_id" in data else CLAUDE


def read_event(raw: bytes, agent: str | None = None) -> Event:
    """The event in ``raw`` (ValueError when it is no JSON, TypeError when not an object)."""
    data = json.loads(raw) if raw.strip() else {}  # not orjson: its import costs a prompt 30 ms
    if not isinstance(data, dict):
        raise TypeError("the hook event is not a JSON object")
    return Event(data, agent or agent_of(data))


class Answer:
    """What a hook has to say: context for the model, a line for the user, instructions for
    the agent's compaction, or a prompt stopped (with the reason the user sees)."""

    def __init__(self, context: str | None = None, message: str | None = None, instructions: str | None = None,
                 block: str | None = None) -> None:
        self.context = context
        self.message = message
        self.instructions = instructions
        self.block = block


def render(answer: Answer, event: Event) -> bytes:
    """``answer`` as ``event``'s agent reads it on the hook's standard output."""
    if event.name == "PreCompact":
        # plain text only: Claude Code appends it to its compaction prompt; Codex ignores it
        if event.agent == CLAUDE and answer.instructions:
            return answer.instructions[:PRE_COMPACT_LIMIT].encode("utf-8", "replace") + b"\n"
        return b""
    out: dict = {}
    if answer.block and event.name == "UserPromptSubmit":
        out.update(decision="block", reason=answer.block)
    elif answer.context and event.name in CONTEXT_EVENTS:
        out["hookSpecificOutput"] = {"hookEventName": event.name, "additionalContext": answer.context}
    if answer.message:
        out["systemMessage"] = answer.message
    return json.dumps(out, ensure_ascii=False).encode("utf-8", "surrogatepass") + b"\n" if out else b""
