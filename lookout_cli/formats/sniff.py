"""How much each format recognizes a parsed record as its own (``formats.detect`` adds it up
over the first records and loads only the format it picks; each adapter's ``sniff`` is its
function here). Kept apart from the adapters because telling the format is every cold run's
first step, and importing every format's reader for it (OpenSSL's hashlib with Codex's) cost
more than the sniffing: 10 M instructions, a hundredth of a 1 MB session's cold measure."""

from __future__ import annotations

from collections.abc import Iterator

from lookout_cli.formats import type_of
from lookout_cli.formats.claude_chain import CONVERSATION_TYPES, ID_FIELDS, LINE_TYPES

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any

# Codex's record types (a rollout line's ``type``)
RECORD_TYPES = frozenset({
    "session_meta",
    "response_item",
    "event_msg",
    "turn_context",
    "compacted",
    "world_state",
    "inter_agent_communication",
    "inter_agent_communication_metadata",
})
GEMINI_MESSAGE_TYPES = frozenset({"user", "gemini", "info", "error", "warning"})

# What tells OpenAI's and Anthropic's message lists apart (each scores its own markers STRONG).
STRONG = 5
OPENAI_PARTS = {"image_url", "input_audio", "refusal", "file"}
ANTHROPIC_BLOCKS = {"tool_use", "tool_result", "thinking", "redacted_thinking", "image", "document",
                    "server_tool_use", "search_result", "container_upload", "compaction"}


def claude_code(obj: Any) -> int:
    if not isinstance(obj, dict):
        return 0
    kind = type_of(obj)
    if kind not in LINE_TYPES:
        return 0
    if kind in CONVERSATION_TYPES and isinstance(obj.get("uuid"), str) \
            and ("parentUuid" in obj or "sessionId" in obj):
        return 3
    if any(f in obj for f in ID_FIELDS):
        return 2
    return 0


def codex(obj: Any) -> int:
    if not isinstance(obj, dict) or "timestamp" not in obj or "payload" not in obj:
        return 0
    kind = type_of(obj)
    if kind in RECORD_TYPES:
        return 3
    if kind and isinstance(obj.get("payload"), dict):
        return 1
    return 0


def openai(obj: Any) -> int:
    if not isinstance(obj, dict):
        return 0
    if openai_response(obj):
        return STRONG
    if is_list_record(obj):
        if "system" in obj:  # a top-level system prompt is Anthropic's
            return 0
        return sum(_openai_message(m) for m in obj["messages"][:50])
    if is_bare_message(obj):
        return _openai_message(obj)
    return 0


def anthropic(obj: Any) -> int:
    if not isinstance(obj, dict):
        return 0
    if anthropic_response(obj):
        return STRONG + (3 if "stop_reason" in obj else 0)
    if is_list_record(obj):
        msgs = obj["messages"]
        score = sum(_anthropic_message(m) for m in msgs[:50])
        system_roles = any(isinstance(m, dict) and m.get("role") in ("system", "developer") for m in msgs)
        if "system" in obj or ("max_tokens" in obj and not system_roles):
            score += STRONG
        return score
    if is_bare_message(obj):
        return _anthropic_message(obj)
    return 0


def gemini_cli(obj: Any) -> int:
    if not isinstance(obj, dict):
        return 0
    if isinstance(obj.get("sessionId"), str) and isinstance(obj.get("projectHash"), str):
        return 3
    if isinstance(obj.get("$set"), dict) or isinstance(obj.get("$rewindTo"), str):
        return 3
    if (
        type_of(obj) in GEMINI_MESSAGE_TYPES
        and isinstance(obj.get("id"), str)
        and "content" in obj
        and not any(k in obj for k in ("uuid", "message", "role", "payload"))
    ):
        return 2
    return 0


SNIFFERS = {"claude-code": claude_code, "codex": codex, "openai": openai, "anthropic": anthropic,
            "gemini-cli": gemini_cli}  # by the names ``formats.ADAPTERS`` gives


# --- message lists ------------------------------------------------------------------------------

def openai_response(obj: dict) -> bool:
    return isinstance(obj.get("choices"), list) or obj.get("object") in ("chat.completion", "chat.completion.chunk")


def anthropic_response(obj: dict) -> bool:
    return obj.get("type") == "message" and obj.get("role") == "assistant"


def is_bare_message(obj: dict) -> bool:
    return isinstance(obj.get("role"), str) and "messages" not in obj


def is_list_record(obj: dict) -> bool:
    return isinstance(obj.get("messages"), list) and "role" not in obj


def iter_parts(content: Any) -> Iterator[tuple[int, dict]]:
    if isinstance(content, list):
        for i, part in enumerate(content):
            if isinstance(part, dict):
                yield i, part


def _openai_message(m: Any) -> int:
    if not isinstance(m, dict) or not isinstance(m.get("role"), str):
        return 0
    role = m["role"]
    if role in ("tool", "developer", "function") or m.get("tool_calls") or m.get("function_call"):
        return STRONG
    content = m.get("content")
    types = {type_of(p) for _, p in iter_parts(content)}
    if types & OPENAI_PARTS:
        return STRONG
    if types & ANTHROPIC_BLOCKS:
        return 0
    if role in ("system", "user", "assistant") and (content is None or isinstance(content, (str, list))):
        return 1
    return 0


def _anthropic_message(m: Any) -> int:
    if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
        return 0
    if m.get("tool_calls") or m.get("function_call"):
        return 0
    content = m.get("content")
    types = {type_of(p) for _, p in iter_parts(content)}
    if types & OPENAI_PARTS:
        return 0
    if types & ANTHROPIC_BLOCKS or any(isinstance(t, str) and t.endswith("_tool_result") for t in types):
        return STRONG
    return 1 if isinstance(content, (str, list)) else 0
