"""What lookout answers to each hook event of a running agent (``lookout hook``).

- SessionStart (startup, resume, clear): the memory lists, as ``memory inject`` builds them, as
  context for the model; also for a session whose file does not exist yet. On resume a block
  the session already holds unchanged is not sent again (Claude Code resends the context hooks
  gave before, with the rest of the conversation).
- PreCompact: a copy of the conversation goes to the saved-output store, and (Claude Code)
  instructions for the agent's own summary naming what must survive: the user's instructions
  word for word, open tasks, files changed, errors; lookout reads them from the transcript
  (``compaction.note.digest``), as its own offline note does.
- SessionStart after a compaction: what the agent's summary tends to lose, from the same
  reading of the conversation before it, and the path of the saved copy to search.
- UserPromptSubmit: ``#`` and ``#!`` notes and "remember that ..." are saved (a prompt that is
  only a note starts no turn); the user sees one line when the meter turns amber or red or
  compaction is due (once per level, read from the transcript's end as the status line does).
- Stop: ``memory learn`` over the session, at most once every 10 minutes a session.

Whatever goes wrong becomes one short line for the user; a hook never fails its agent.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable

from lookout_cli.agents import status
from lookout_cli.agents.events import (
    AGENTS,
    CLAUDE,
    PRE_COMPACT_LIMIT,
    Answer,
    Event,
    read_event,
    render,
)

LEARN_EVERY = 600  # seconds: Stop learns at most this often in a chat (the seed's 10 minutes)
CONTEXT_LIMIT = 9_000  # characters of post-compaction context (Claude Code cuts hook output at 10,000)
USER_MESSAGE_CHARS = 800  # one instruction, word for word up to here
LEVELS = {"hidden": 0, "normal": 0, "amber": 1, "red": 2}
NOTE_WORDS = ("remember", "keep in mind", "forget", "future")  # memory.tidy.REMEMBER_RE's words

MemoryBlock = Callable[[str | None], "str | None"]  # the memory lists for a working folder


# --- state kept between a session's hooks --------------------------------------------------------

def _state_path(event: Event) -> str:
    from lookout_cli.core.paths import cache_folder

    name = "".join(c if c.isalnum() or c in "-_" else "_" for c in (event.session_id or "unknown"))[:80]
    return os.path.join(cache_folder(), "state", f"hook-{event.agent}-{name}.json")


def _state(event: Event) -> dict:
    try:
        with open(_state_path(event), "rb") as handle:
            data = json.loads(handle.read())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _keep(event: Event, state: dict) -> None:
    from lookout_cli.core.fsutil import atomic_write

    atomic_write(_state_path(event), json.dumps(state).encode(), cache=True)  # (its folder made as needed)


# --- reading the transcript -----------------------------------------------------------------------

def load(path: str):
    """The transcript at ``path`` (``formats.Transcript``), read whole."""
    from lookout_cli.core.jsonl import read_records
    from lookout_cli.formats import Transcript, detect

    with open(path, "rb") as handle:
        records = list(read_records(handle))
    return Transcript(records, detect(records), path)


def before_last_compaction(transcript):
    """The conversation as it was before its last compaction (the whole one if none)."""
    from lookout_cli.formats import Transcript

    view = transcript.view()
    if not view.compactions:
        return transcript
    cut = max(c.record.lineno for c in view.compactions)
    records = [r for r in transcript.records if r.lineno < cut]
    return Transcript(records, transcript.adapter, transcript.source)


def facts(transcript):
    """lookout's deterministic reading of a conversation (``compaction.note.Digest``)."""
    from lookout_cli.compaction.note import digest

    return digest(transcript.view().items)


def _quote(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= USER_MESSAGE_CHARS else text[: USER_MESSAGE_CHARS - 1] + "…"


def _listing(title: str, values, limit: int = 30) -> list[str]:
    values = list(values)
    if not values:
        return []
    lines = [f"{title}:"] + [f"- {v}" for v in values[-limit:]]
    if len(values) > limit:
        lines.insert(1, f"- ({len(values) - limit} earlier ones left out)")
    return lines


def _sections(d, saved: str | None) -> list[list[str]]:
    """The facts a summary must keep, most important first (trimmed from the end)."""
    open_tasks = list(d.in_progress) + [f"blocked: {b}" for b in d.blocked] + list(d.next_steps)
    return [
        _listing("The user's instructions, word for word (oldest first)", (f'"{_quote(m)}"' for m in d.user_messages)),
        _listing("Open tasks", open_tasks),
        _listing("Files changed", d.files_changed),
        _listing("Errors seen", d.errors, 15),
        _listing("Commands run", (c for c in d.commands), 15),
        _listing("Files read", d.files_read, 20),
        [(f"The whole conversation before this compaction is saved at {saved} (JSONL, one record a line): "
          "search it when a detail is missing.")] if saved else [],
    ]


def _fit(head: str, sections: list[list[str]], limit: int) -> str:
    """``head`` and as many whole sections as fit in ``limit`` characters (the saved copy's
    line, last, always: it is how the rest is found again)."""
    tail = sections[-1]
    body = [head]
    size = len(head) + sum(len(x) + 1 for x in tail)
    for section in sections[:-1]:
        if not section:
            continue
        text = "\n".join(section)
        if size + len(text) + 2 > limit:
            title, items = section[0], section[1:]
            while items and size + len(title) + sum(len(x) + 1 for x in items) + 40 > limit:
                items = items[1:]  # the oldest go first
            if items:
                body.append("\n".join([title, "- (earlier ones left out)", *items]))
            break
        body.append(text)
        size += len(text) + 2
    if tail:
        body.append("\n".join(tail))
    return "\n\n".join(body)


def instructions(d, saved: str | None) -> str:
    """Instructions for the agent's own compaction: what its summary must keep."""
    head = ("lookout read this conversation from its transcript. The summary must keep what follows: "
            "the user's instructions word for word, the open tasks, every file changed and the errors "
            "still relevant.")
    return _fit(head, _sections(d, saved), PRE_COMPACT_LIMIT - 200)


def after_compaction(d, saved: str | None) -> str:
    """Context for the turn after a compaction: what a summary tends to lose."""
    head = ("lookout: the conversation was just compacted. What the summary may have left out, read "
            "from the conversation before it (word for word where quoted):")
    return _fit(head, _sections(d, saved), CONTEXT_LIMIT)


# --- the events ---------------------------------------------------------------------------------------

def session_start(event: Event, memory_block: MemoryBlock) -> Answer:
    if event.source == "compact":
        return compacted(event)
    text = memory_block(event.cwd)
    if not text:
        return Answer()
    if event.source == "resume" and event.agent == CLAUDE and _holds(event.transcript, text):
        return Answer()  # the resumed conversation carries this very block already
    return Answer(context=text)


def _holds(path: str | None, text: str) -> bool:
    """Whether the session at ``path`` holds ``text`` (as JSON) after its last compaction."""
    import mmap

    import orjson

    if not path:
        return False
    needle = orjson.dumps(text)[1:-1]
    try:
        with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            cut = max(data.rfind(needle) for needle in status.COMPACTION_NEEDLES)
            return data.find(needle, max(cut, 0)) >= 0
    except (OSError, ValueError):  # missing, or empty (mmap of nothing)
        return False


def pre_compact(event: Event) -> Answer:
    """Save the conversation, and tell the agent's compaction what to keep."""
    if not event.transcript or not os.path.exists(event.transcript):
        return Answer()
    saved = save_copy(event.transcript)
    transcript = load(event.transcript)
    d = facts(transcript)
    state = _state(event)
    state["compaction"] = {"saved": saved, "context": after_compaction(d, saved), "at": time.time()}
    _keep(event, state)
    return Answer(instructions=instructions(d, saved))


def save_copy(path: str) -> str:
    """The transcript copied into the saved-output store; the copy's path."""
    from lookout_cli.config import Config
    from lookout_cli.core.paths import save_dir
    from lookout_cli.core.saved import SavedStore

    store = SavedStore(save_dir(Config().get("save_dir")), command="hook PreCompact", transcript=path)

    def chunks():
        with open(path, "rb") as handle:
            while block := handle.read(1 << 20):
                yield block

    return str(store.put_parts(chunks(), kind="record").path)


def compacted(event: Event) -> Answer:
    """After the agent compacted: what PreCompact worked out, else a reading of the conversation
    before the last compaction the file records."""
    state = _state(event)
    kept = state.pop("compaction", None)
    if isinstance(kept, dict) and isinstance(kept.get("context"), str):
        _keep(event, state)
        return Answer(context=kept["context"])
    if not event.transcript or not os.path.exists(event.transcript):
        return Answer()
    transcript = load(event.transcript)
    if transcript.adapter is None:
        return Answer()
    earlier = before_last_compaction(transcript)
    saved = save_copy(event.transcript)
    return Answer(context=after_compaction(facts(earlier), saved))


def prompt_submit(event: Event, scope_for: Callable[[str], object]) -> Answer:
    answer = Answer()
    prompt = event.prompt or ""
    saved, note_only, problems = save_notes(prompt, scope_for, event)
    if note_only and (saved or problems):
        answer.block = "; ".join(saved + problems)
        return answer
    lines = saved + problems
    warning = meter_warning(event)
    if warning:
        lines.append(warning)
    if lines:
        answer.message = "lookout: " + "; ".join(lines)
    return answer


def save_notes(prompt: str, scope_for: Callable[[str], object], event: Event) -> tuple[list[str], bool, list[str]]:
    """Save the ``#`` / ``#!`` note or "remember that ..." in ``prompt`` (``memory learn``'s
    rules); what was saved, whether the prompt is only a note, and what was refused."""
    lower = prompt.lower()
    if not (prompt.lstrip().startswith("#") or any(word in lower for word in NOTE_WORDS)):
        return [], False, []  # most prompts: the memory modules are not even loaded
    from lookout_cli.core.errors import LookoutError
    from lookout_cli.memory.store import Memory, check_note, check_secrets
    from lookout_cli.memory.tidy import notes_in

    found = notes_in(prompt)
    said, problems = [], []
    source = event.transcript or (f"session {event.session_id}" if event.session_id else None)
    for kind, author, note in found:
        try:
            note = check_note(note)
            check_secrets(note, what="the note")
            scope = scope_for(kind)
            with scope.transaction(actor="learn") as txn:
                if txn.find_note(note) is not None:
                    said.append(f"already remembered in {scope.label}")
                    continue
                mem = txn.add(Memory(id="", note=note, author=author, source=source))
            said.append(f"saved to {scope.label} memory as {mem.id}")
        except LookoutError as exc:
            problems.append(f"not saved: {exc}")
    note_only = bool(found) and found[0][1] == "you"  # a '#' note is the whole prompt
    return said, note_only, problems


def meter_warning(event: Event) -> str | None:
    """One line when the meter turned amber or red, or compaction became due, since the last
    warning of this session (the level is kept; it drops again after a compaction)."""
    if not event.transcript:
        return None
    try:
        tail = status.read_tail(event.transcript)
    except OSError:
        return None
    if not tail.known:
        return None
    model = event.data.get("model") if isinstance(event.data.get("model"), str) else None
    fig = status.figures(tail.model or model, tail.window)
    r = status.reading(tail, fig)
    level = max(LEVELS[r["state"]], 3 if r["due"] else 0)
    state = _state(event)
    warned = state.get("warned", 0)
    if level != warned:
        state["warned"] = level
        _keep(event, state)
    if level <= warned:
        return None
    where = f"{r['percent']:.0f}% of the context ({status.tokens(r['used'])} of {status.tokens(fig['budget'])})"
    if r["due"]:
        return f"{where}: compaction is due (/compact now, or lookout compact -i on a stopped session)"
    if r["state"] == "red":
        return f"{where}: at the summary point ({status.tokens(fig['summary_point'])}), the agent compacts soon"
    return f"{where}: amber, the summary point is at {status.tokens(fig['summary_point'])}"


def stop(event: Event, scope_for: Callable[[str], object]) -> Answer:
    """Learn from the session (``memory learn``), at most every LEARN_EVERY seconds."""
    if not event.transcript or not os.path.exists(event.transcript):
        return Answer()
    state = _state(event)
    now = time.time()
    if now - float(state.get("learned", 0) or 0) < LEARN_EVERY:
        return Answer()  # (most turns end here: nothing of the memory store is imported)
    from lookout_cli.memory.tidy import learn_from_prompts

    state["learned"] = now
    _keep(event, state)
    transcript = load(event.transcript)
    if transcript.adapter is None:
        return Answer()
    view = transcript.view()
    result = learn_from_prompts(view, scope_for, source=event.transcript)
    if result.saved:
        return Answer(message=f"lookout: learned {result.saved} memor{'y' if result.saved == 1 else 'ies'} "
                              "from this chat")
    return Answer()


def answer(event: Event, memory_block: MemoryBlock, scope_for: Callable[[str], object]) -> Answer:
    """The answer to ``event`` (an event lookout has nothing for gets an empty one)."""
    if event.name == "SessionStart":
        return session_start(event, memory_block)
    if event.name == "PreCompact":
        return pre_compact(event)
    if event.name == "UserPromptSubmit":
        return prompt_submit(event, scope_for)
    if event.name == "Stop":
        return stop(event, scope_for)
    return Answer()


def scopes_for(cwd: str | None) -> Callable[[str], object]:
    """Where a note of a chat in ``cwd`` goes: Everywhere (``#!``) or the project's memory."""
    def scope_for(kind: str):
        from lookout_cli.memory.project import everywhere_scope, resolve_project

        if kind == "everywhere":
            return everywhere_scope()
        return resolve_project(cwd if cwd and os.path.isdir(cwd) else None).scope

    return scope_for


def respond(raw: bytes, agent: str | None, memory_block: MemoryBlock | None) -> tuple[bytes, bytes]:
    """(standard output, standard error) of ``lookout hook`` for the event in ``raw``. With no
    ``memory_block`` an event that needs one raises NeedsMemory."""
    if not raw.strip():
        return b"", b"lookout hook: no event on standard input (the agent passes one: see lookout hook --help)\n"
    try:
        event = read_event(raw, agent)
    except (ValueError, TypeError) as exc:
        return b"", f"lookout hook: not a hook event: {exc}\n".encode()
    if memory_block is None and event.name == "SessionStart" and event.source != "compact":
        raise NeedsMemory
    try:
        return render(answer(event, memory_block, scopes_for(event.cwd)), event), b""
    except Exception as exc:  # noqa: BLE001 - a hook never fails its agent: one line instead
        line = f"lookout hook: {event.name or 'event'}: {type(exc).__name__}: {exc}"[:300]
        if event.name == "PreCompact":  # plain text there would become compaction instructions
            return b"", line.encode() + b"\n"
        return render(Answer(message=line), event), b""


class NeedsMemory(Exception):
    """The event needs the memory lists, which the full command builds."""


pending: bytes | None = None  # an event read by ``main`` and left for the full command


def main(args: list[str]) -> int | None:
    """``lookout hook [--agent NAME]`` before the command line loads (it runs on every prompt);
    None when the full command is needed: other arguments, or an event that needs the memory
    lists (the event read is then kept in ``pending``)."""
    global pending
    if args and not (len(args) == 2 and args[0] == "--agent" and args[1] in AGENTS):
        return None
    import sys

    raw = b"" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.buffer.read(16 << 20)
    try:
        out, err = respond(raw, args[1] if args else None, None)
    except NeedsMemory:
        pending = raw
        return None
    for fd, data in ((1, out), (2, err)):
        try:
            if data:
                os.write(fd, data)
        except OSError:
            pass
    return 0
