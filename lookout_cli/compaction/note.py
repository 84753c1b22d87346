"""The summary note ``compact`` writes in place of older turns, built without a model.

A note has the sections SPEC §4 names: goal; constraints and preferences (the user's messages
word for word); progress (done, in progress, blocked); key decisions (the user's answers to the
agent's questions first); files read and changed (collected from the tool calls' own arguments,
never guessed from prose); commands run with what they came to; facts from tool output that
later steps relied on; findings and errors; next steps. ``--instructions`` text and what it
names, in any kind of item, are kept in full. What is read out of single items is
``note_facts``.

``digest()`` collects these facts from the items being summarized, ``parse()`` reads them back
from an earlier lookout note so a second compaction *updates* the first one (``merge()``)
instead of summarizing a summary, and ``render()`` writes the note within a token budget,
trimming the least important lists first and saying what it left out. ``must_survive()`` lists
the facts a note of any summarizer must keep (user instructions, file paths, commands, error
strings, facts from tool output); ``missing()`` says which ones a note lost, ``pin()`` adds
them back to a model's note.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, ClassVar

from lookout_cli.compaction.note_facts import (  # noqa: F401  (the note's vocabulary, used by summarizers)
    ASK_TOOLS,
    DECISION_RE,
    ERROR_LINE,
    FINDING_RE,
    LINE,
    SHELL_TOOLS,
    TODO_TOOLS,
    arguments,
    call_label,
    current_work,
    error_line,
    excerpts,
    exit_code,
    failed,
    files_of_call,
    files_of_script,
    next_steps,
    one_line,
    outcome,
    question,
    referenced_lines,
    search_case_blind,
    sentences,
    settings_printed,
    shell_script,
    squash,
    suspicious,
    tool_key,
    unique,
    values,
)
from lookout_cli.core.dataclass import dataclass, field
from lookout_cli.formats.view import (
    IMAGE,
    NOTE_TITLE,
    NOTICE,
    SETUP,
    SUMMARY,
    TEXT,
    THINKING,
    TOOL_CALL,
    TOOL_RESULT,
    Item,
)

PREAMBLE = (
    "This session continues from an earlier conversation that was compacted. The summary below "
    "covers the earlier work; what follows it (the most recent turns, or the current request and "
    "its latest steps) is word for word. Treat it as what you know about the work so far."
)

# limits that keep the note readable; trimming below them is said in the note
COMMAND = 200  # a command's first line
OUTCOME_SEP = "  "  # between a command and its outcome in the note
MAX_DECISIONS = 15
MAX_FINDINGS = 25
MAX_FACTS = 120
CHOICE = "The user answered"  # how a user's choice starts under Key decisions
BLOCK_RE = re.compile(r"<(user-message|attached|keep|earlier-summary)( [^>]*)?>\n(.*?)\n</\1>", re.DOTALL)


# --- the digest: facts collected from the items being summarized ------------------------------

@dataclass
class Digest:
    goal: str = ""
    user_messages: list[str] = field(default_factory=list)  # word for word, oldest first
    done: list[str] = field(default_factory=list)
    in_progress: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    choices: list[str] = field(default_factory=list)  # the user's answers to the agent's questions
    decisions: list[str] = field(default_factory=list)
    files_read: dict[str, int] = field(default_factory=dict)  # path -> times
    files_changed: dict[str, int] = field(default_factory=dict)
    commands: list[str] = field(default_factory=list)  # "command  outcome"
    facts: list[str] = field(default_factory=list)  # tool output lines later steps relied on
    findings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # error strings, word for word
    next_steps: list[str] = field(default_factory=list)
    attached: list[tuple[str, str]] = field(default_factory=list)  # (label, text) as attached
    keep: list[str] = field(default_factory=list)  # --instructions, word for word
    keep_excerpts: list[str] = field(default_factory=list)  # what the instructions name, in full
    earlier: list[str] = field(default_factory=list)  # a summary lookout did not write, kept whole
    original: str = ""  # where the full context before this note is kept


def digest(items: Sequence[Item], text_of: Callable[[Item], str] | None = None,
           instructions: str | None = None) -> Digest:
    """Collect a note's facts from the items it replaces. ``text_of`` gives an item's text as
    the agent saw it (the engine resolves placeholders of cleared output from the store)."""
    from lookout_cli.core.errors import masked

    text_of = text_of or (lambda item: item.text)
    d = Digest()
    calls: dict[str, Item] = {}
    command_index: dict[str, int] = {}
    turns: dict[int, list[Item]] = {}
    first_prompt: Item | None = None
    saw_conversation = False
    todo: list[dict] | None = None
    mentions: dict[str, list[int]] = {}  # value -> where the agent mentions it (its words or calls)
    outputs: list[tuple[int, str]] = []  # tool outputs, for the values later steps relied on
    callers: dict[int, Item | None] = {}  # output index -> its call, named in the note when needed
    call_args: dict[str, dict] = {}
    replies: list[Item] = []  # the agent's words, oldest first
    asked: str | None = None  # a question the agent's latest words put to the user
    asks: dict[str, str] = {}  # call id -> the question a tool put to the user
    shown_outcomes: dict[int, str] = {}  # output index -> what its command's line already says
    printed: dict[int, list[str]] = {}  # output index -> the settings its command printed
    reads: set[str] = set()  # calls that read files
    messages_seen: set[str] = set()  # d.user_messages, for telling a new one fast
    said_by: dict[int, list[str]] = {}  # id of the agent's words -> their sentences (_progress)
    for index, item in enumerate(items):
        turns.setdefault(item.turn, []).append(item)
        if item.kind == SUMMARY:
            d.earlier.append(item.text)
            continue
        if item.kind == SETUP or item.setup in ("rules", "skills", "memory"):
            if saw_conversation:  # attached to a message, not part of the leading setup
                d.attached.append((item.setup or item.tool or "attachment", item.text))
            continue
        saw_conversation = True
        if item.role == "user" and item.kind == TEXT and item.prompt:
            text = item.text.strip()
            if text:
                first_prompt = first_prompt or item
                if text not in messages_seen:
                    messages_seen.add(text)
                    d.user_messages.append(text)
                if asked:
                    d.choices.append(f'{CHOICE} "{one_line(text, 400)}" to the agent\'s question "{asked}"')
            asked = None
        elif item.kind == TOOL_CALL:
            if item.call_id:
                calls[item.call_id] = item
            args = arguments(item)
            if item.call_id:
                call_args[item.call_id] = args
            read, changed = files_of_call(item, args)
            if read and item.call_id:
                reads.add(item.call_id)
            for path in read:
                d.files_read[path] = d.files_read.get(path, 0) + 1
            for path in changed:
                d.files_changed[path] = d.files_changed.get(path, 0) + 1
            for value in values(item.text[:2000]):  # a call's beginning: its command, not a file it writes
                mentions.setdefault(value, []).append(index)
            key = tool_key(item.tool)
            if key in TODO_TOOLS:
                todo = _todo_items(args) or todo
            elif key in ASK_TOOLS and item.call_id:
                asks[item.call_id] = _asked(args)
            elif key in SHELL_TOOLS or ("command" in args and not read and not changed and shell_script(args)):
                script = shell_script(args)
                if script:
                    command_index[item.call_id or str(id(item))] = len(d.commands)
                    d.commands.append(squash(one_line(script, COMMAND)))
        elif item.kind == TOOL_RESULT:
            text = text_of(item)
            if item.call_id in asks:
                answer = one_line(" ".join(text.split()), 400)
                if answer:
                    d.choices.append(f'{CHOICE} "{answer}" to the agent\'s question "{asks[item.call_id]}"')
                continue
            bad, code = failed(item, text)
            call = calls.get(item.call_id or "")
            idx = command_index.pop(item.call_id or "", None)
            if bad and code in (1, None) and idx is not None and _no_match(d.commands[idx], text):
                d.commands[idx] += f"{OUTCOME_SEP}→ no match"
            elif bad:
                where = call_label(call, call_args.get(call.call_id or "")) if call else (item.tool or "tool")
                err = error_line(text) or one_line(text, ERROR_LINE)
                if err and err not in d.errors:
                    d.errors.append(err)
                    d.findings.append(f"{where} failed: {err}")
                if idx is not None:
                    exit_text = f", exit {code}" if code not in (None, 0) else ""
                    d.commands[idx] += f"{OUTCOME_SEP}(failed{exit_text})" + (f": {err}" if err else "")
            elif idx is not None:
                said = outcome(text)
                if said:
                    d.commands[idx] += f"{OUTCOME_SEP}→ {said}"
                    shown_outcomes[index] = said
                elif item.call_id not in reads:  # a file's text is not settings a command printed
                    printed[index] = settings_printed(text)
            if text:
                outputs.append((index, text))
                callers[index] = call
        elif item.role == "assistant" and item.kind == TEXT:
            for value in values(item.text):
                mentions.setdefault(value, []).append(index)
            if item.text.strip():
                replies.append(item)
            said = said_by[id(item)] = sentences(item.text)
            asked = question(item.text, said)
            for s in said:
                if s.endswith("?"):
                    continue
                if search_case_blind(DECISION_RE, s) and s not in d.decisions:
                    d.decisions.append(s)
                elif search_case_blind(FINDING_RE, s) and s not in d.findings:
                    d.findings.append(s)
    if first_prompt is not None:
        d.goal = goal_of(first_prompt.text)
    referenced = referenced_lines(outputs, mentions)
    for index in sorted(set(referenced) | {i for i, lines in printed.items() if lines}):
        call = callers[index]
        label = call_label(call, call_args.get(call.call_id or "")) if call else "tool"
        lines = unique(referenced.get(index, []) + printed.get(index, []))
        d.facts += [f"{label}: {line}" for line in lines if line not in shown_outcomes.get(index, "")]
    d.facts = unique(d.facts)[-MAX_FACTS:]
    # what a command printed may hold a key: the secret gate masks it (once, over all of it)
    said = [n for n, c in enumerate(d.commands) if OUTCOME_SEP in c]
    shown = masked("\n".join(d.facts + [d.commands[n] for n in said])).split("\n")
    if len(shown) == len(d.facts) + len(said):
        d.facts = shown[:len(d.facts)]
        for n, text in zip(said, shown[len(d.facts):], strict=True):
            d.commands[n] = text
    _progress(d, turns, replies, said_by)
    if todo:
        _apply_todo(d, todo)
    if instructions:
        d.keep.append(instructions.strip())
        d.keep_excerpts = excerpts(items, instructions, text_of)
    d.decisions = d.decisions[-MAX_DECISIONS:]
    return d


SEARCHERS = ("grep ", "rg ", "egrep ", "fgrep ", "ag ", "git grep ")


def _no_match(command: str, text: str) -> bool:
    """A search that found nothing exits 1 with no output: no error."""
    return command.startswith(SEARCHERS) and not re.sub(r"(?i)exit code:? ?1|wall time:.*|output:", "", text).strip()


def _asked(args: dict) -> str:
    """The question an ask-the-user tool put (Claude Code's AskUserQuestion, Codex's
    request_user_input): its first question's text."""
    for key in ("questions", "question", "prompt", "message"):
        value = args.get(key)
        if isinstance(value, list) and value:
            value = value[0]
        if isinstance(value, dict):
            value = value.get("question") or value.get("text") or value.get("header")
        if isinstance(value, str) and value.strip():
            return one_line(value, 300)
    return "(a question)"


SLASH_RE = re.compile(r"<command-name>\s*/?([^<\s]+)\s*</command-name>")  # a Claude Code slash command
SLASH_ARGS_RE = re.compile(r"<command-args>(.*?)</command-args>", re.DOTALL)


def goal_of(text: str) -> str:
    """A request's first paragraph on one line: the note's goal (a slash command as typed)."""
    slash = SLASH_RE.search(text)
    if slash:
        args = SLASH_ARGS_RE.search(text)
        text = f"/{slash.group(1)} {args.group(1) if args else ''}"
    para = text.strip().split("\n\n", 1)[0]
    return one_line(" ".join(para.split()), 500)


def _todo_items(args: dict) -> list[dict] | None:
    for key in ("todos", "plan", "items"):
        value = args.get(key)
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            return value
    return None


def _apply_todo(d: Digest, todo: list[dict]) -> None:
    """The latest to-do list or plan the agent wrote is the best record of progress."""
    done, doing, pending = [], [], []
    for entry in todo:
        text = one_line(str(entry.get("content") or entry.get("step") or entry.get("text") or ""))
        status = str(entry.get("status", "")).lower()
        if not text:
            continue
        if status in ("completed", "done", "complete"):
            done.append(text)
        elif status in ("in_progress", "in progress", "active", "doing"):
            doing.append(text)
        else:
            pending.append(text)
    d.done = unique(d.done + [f"{t} (to-do list)" for t in done])
    d.in_progress = unique(doing + d.in_progress)
    d.next_steps = unique(d.next_steps + pending)


def _progress(d: Digest, turns: dict[int, list[Item]], replies: list[Item], said_by: dict[int, list[str]]) -> None:
    """One line per earlier turn (what was asked and how the agent's reply ended); the work in
    progress and the next steps from the agent's latest words (``said_by``: the sentences of
    the agent's words digest split, by the item's id)."""
    numbered = [t for t in sorted(turns) if any(i.prompt for i in turns[t])]
    for n in numbered:
        group = turns[n]
        prompt = next(i for i in group if i.prompt)
        said = [i for i in group if i.role == "assistant" and i.kind == TEXT and i.text.strip()]
        calls = [i for i in group if i.kind == TOOL_CALL]
        last = next((i for i in reversed(group) if i.kind in (TEXT, TOOL_CALL, TOOL_RESULT)), None)
        asked = one_line(prompt.text, 120)
        ended = one_line(" ".join(_sentences_of(said[-1], said_by)[:2]) or said[-1].text, 200) if said else ""
        line = f"Asked: \"{asked}\""
        if calls:
            line += f" ({len(calls)} tool call{'s' if len(calls) != 1 else ''})"
        if ended:
            line += f" → {ended}"
        if last is not None and last.kind == TOOL_RESULT and last.is_error:
            d.blocked.append(line + " (its last tool call failed)")
        elif n == numbered[-1] and last is not None and last.kind != TEXT:
            d.in_progress.append(line)
        else:
            d.done.append(line)
    # the agent's latest words that say what comes next (its final words may be only "Done.")
    for item in reversed(replies[-3:]):
        steps = next_steps(item.text)
        if steps:
            d.next_steps = steps
            break
        if len(sentences(item.text)) > 2:  # words of substance that name no next step: none is stale
            break
    if replies:
        now = [f"{s} (the agent's latest words)" for s in current_work(replies[-1].text)
               if s not in d.next_steps]
        d.in_progress += now[:2]


def _sentences_of(item: Item, said_by: dict[int, list[str]]) -> list[str]:
    known = said_by.get(id(item))  # not split when digest skipped the item (attached rules)
    return sentences(item.text) if known is None else known


def merge(old: Digest, new: Digest) -> Digest:
    """Update an earlier note with what happened since: lasting facts accumulate, the state of
    the work (in progress, blocked, next steps) is replaced by the newer one."""
    merged = Digest(goal=old.goal or new.goal)
    merged.user_messages = _unique_keep(old.user_messages + new.user_messages)
    merged.done = _unique_keep(old.done + old.in_progress + new.done)
    merged.in_progress = new.in_progress or ([] if new.done else old.in_progress)
    merged.blocked = new.blocked
    merged.choices = _unique_keep(old.choices + new.choices)
    merged.decisions = _unique_keep(old.decisions + new.decisions)[-MAX_DECISIONS * 2:]
    merged.files_read = dict(old.files_read)
    for path, n in new.files_read.items():
        merged.files_read[path] = merged.files_read.get(path, 0) + n
    merged.files_changed = dict(old.files_changed)
    for path, n in new.files_changed.items():
        merged.files_changed[path] = merged.files_changed.get(path, 0) + n
    merged.commands = old.commands + new.commands
    merged.facts = _unique_keep(old.facts + new.facts)[-MAX_FACTS * 2:]
    merged.findings = _unique_keep(old.findings + new.findings)
    merged.errors = _unique_keep(old.errors + new.errors)
    merged.next_steps = new.next_steps or old.next_steps
    merged.attached = old.attached + [a for a in new.attached if a not in old.attached]
    merged.keep = _unique_keep(old.keep + new.keep)
    merged.keep_excerpts = _unique_keep(old.keep_excerpts + new.keep_excerpts)
    merged.earlier = old.earlier + new.earlier
    merged.original = new.original or old.original
    return merged


def _unique_keep(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


# --- the note as text ------------------------------------------------------------------------

SECTIONS = (
    "Goal", "Constraints and preferences", "Progress", "Key decisions", "Files",
    "Commands run", "Facts from tool output", "Findings and errors", "Next steps", "Keep in full detail", "Earlier summary",
    "Rules and skills as attached", "Original context",
)


@dataclass
class Trim:
    """How many entries of each list the rendered note left out."""

    left_out: dict[str, int] = field(default_factory=dict)


def render(d: Digest, budget: int | None = None, count: Callable[[str], int] | None = None) -> str:
    """The note as Markdown, within ``budget`` tokens when it can be: lists lose their oldest
    (or least used) entries first, user messages and kept instructions last, and the note says
    how many entries it left out."""
    lines = _Lines(d)
    text = _render(d, {}, lines)
    if not budget or count is None:
        return text
    from lookout_cli.tokens.tokenizer import estimate

    about = estimate(text)
    if about <= 2 * budget and count(text) <= budget:
        return text
    # The note of a long session can be many times the budget: find the cut with the fast
    # estimate's tokens per character of the whole note (aiming a little under), then finish
    # with exact counts of a note near the budget, so what is tokenized stays about the
    # budget's size rather than the session's.
    per_char = about / len(text)
    for _ in range(2):  # the note's mix changes as it is cut: once more with the cut note's ratio
        cut = _trim(d, {}, lambda note: len(note) * per_char <= 0.9 * budget, lines)
        note = _render(d, cut, lines)
        per_char = estimate(note) / len(note)
    return _render(d, _trim(d, cut, lambda note: count(note) <= budget, lines), lines)


def _trim(d: Digest, cut: dict[str, int], fits: Callable[[str], bool], lines: _Lines) -> dict[str, int]:
    """Cut more of the note's lists, least useful first, until ``fits`` says it fits
    (``lines``: the digest's lines, formatted once for every cut tried)."""
    cut = dict(cut)
    # what goes first: the least useful for continuing the work
    order = ["decisions", "done", "findings", "files_read", "commands", "facts", "attached", "earlier",
             "choices", "errors", "keep_excerpts", "files_changed", "user_messages"]
    for name in order:
        fit = fits(_render(d, cut, lines))  # each cut is rendered and sized once: a long session's note is large
        while not fit:
            total = len(_list(d, name))
            kept = total - cut.get(name, 0)
            floor = 1 if name in ("user_messages", "errors", "files_changed") else 0
            if kept <= floor:
                break
            short = cut.get(name, 0)  # a cut that does not fit
            cut[name] = short + max(1, (kept - floor + 1) // 2)
            fit = fits(_render(d, cut, lines))
            if fit:  # halving may have cut up to twice what was needed: take back what fits
                cut[name] = _least_cut(d, cut, name, short, fits, lines)
        if fit:
            break
    return cut


def _least_cut(d: Digest, cut: dict[str, int], name: str, short: int, fits: Callable[[str], bool],
               lines: _Lines) -> int:
    """The fewest entries of list ``name`` to leave out, between ``short`` (too few) and
    ``cut[name]`` (enough), with the other lists cut as ``cut`` says (binary search)."""
    enough = cut[name]
    while enough - short > 1:
        middle = (short + enough) // 2
        if fits(_render(d, {**cut, name: middle}, lines)):
            enough = middle
        else:
            short = middle
    return enough


def _list(d: Digest, name: str) -> list:
    value = getattr(d, name)
    return list(value.items()) if isinstance(value, dict) else value


def _kept(d: Digest, name: str, cut: dict[str, int]) -> list:
    return _left(name, _in_order(d, name), cut)


def _in_order(d: Digest, name: str) -> list:
    values = _list(d, name)
    return sorted(values, key=lambda kv: -kv[1]) if name == "files_read" else values


def _left(name: str, values: list, cut: dict[str, int]) -> list:
    """What ``cut`` leaves of ``values``, list ``name`` in the note's order."""
    n = cut.get(name, 0)
    if name == "files_read":  # keep the most read files
        return values[: len(values) - n] if n else values
    return values[n:]  # drop the oldest


def _more(name: str, cut: dict[str, int], what: str = "entries") -> list[str]:
    n = cut.get(name, 0)
    return [f"- ({n} earlier {what} left out; the original context has them)"] if n else []


NO_GOAL = "(no request recorded)"


def _render(d: Digest, cut: dict[str, int], lines: _Lines) -> str:
    kept = lines.kept
    out = [NOTE_TITLE, "", PREAMBLE, ""]
    out += ["## Goal", d.goal or NO_GOAL, ""]

    out += ["## Constraints and preferences",
            "The user's messages so far, word for word (oldest first); follow their instructions:"]
    out += _more("user_messages", cut, "messages") + kept("user_messages", cut)
    if not d.user_messages:
        out.append("(none in the part this note covers)")
    out.append("")

    out += ["## Progress", "### Done"]
    out += _more("done", cut) + (kept("done", cut) or ["- (nothing recorded)"])
    out += ["### In progress"] + ([f"- {x}" for x in d.in_progress] or ["- (nothing recorded)"])
    out += ["### Blocked"] + ([f"- {x}" for x in d.blocked] or ["- (nothing)"])
    out.append("")

    out += ["## Key decisions"]
    decided = _more("choices", cut, "answers") + kept("choices", cut)
    decided += _more("decisions", cut) + kept("decisions", cut)
    out += decided or ["- (none recorded)"]
    out.append("")

    out += ["## Files", "### Changed"]
    out += _more("files_changed", cut, "files") + (kept("files_changed", cut) or ["- (none)"])
    out += ["### Read"]
    out += (kept("files_read", cut) or ["- (none)"]) + _more("files_read", cut, "files")
    out.append("")

    out += ["## Commands run"]
    out += _more("commands", cut, "commands") + (kept("commands", cut) or ["- (none)"])
    out.append("")

    if d.facts:
        out += ["## Facts from tool output",
                "Lines of output that later steps relied on, and settings commands printed, word for word:"]
        out += _more("facts", cut, "facts") + kept("facts", cut)
        out.append("")

    out += ["## Findings and errors"]
    findings = _kept(d, "findings", cut)[-MAX_FINDINGS:]
    out += _more("findings", cut) + [f"- {x}" for x in findings]
    errors = [e for e in _kept(d, "errors", cut) if not any(e in f for f in findings)]
    out += _more("errors", cut, "errors") + [f"- Error: {e}" for e in errors]
    if not findings and not errors:
        out.append("- (none recorded)")
    out.append("")

    out += ["## Next steps"] + ([f"- {x}" for x in d.next_steps] or
                                ["- Continue with the user's latest request, which follows word for word."])
    out.append("")

    if d.keep or d.keep_excerpts:
        out += ["## Keep in full detail"]
        for text in d.keep:
            out += ["<keep>", text, "</keep>"]
        out += _more("keep_excerpts", cut, "passages") + kept("keep_excerpts", cut)
        out.append("")
    if d.earlier:
        out += ["## Earlier summary"] + _more("earlier", cut, "summaries") + kept("earlier", cut)
        out.append("")
    if d.attached:
        out += ["## Rules and skills as attached"] + _more("attached", cut, "attachments") + kept("attached", cut)
        out.append("")
    if d.original:
        out += ["## Original context", d.original, ""]
    return "\n".join(out).rstrip() + "\n"


def _command_line(command: str) -> str:
    line, sep, said = command.partition(OUTCOME_SEP)
    return f"- `{line}`" + (f"{OUTCOME_SEP}{said}" if sep else "")


def _file_line(path: str, n: int, what: str) -> str:
    return f"- {path}" + (f" ({n} {what}s)" if n > 1 else "")


# how an entry of each list reads in the note (findings and errors are rendered together)
ENTRY_LINES: dict[str, Callable[[Any], str]] = {
    "user_messages": lambda text: f"<user-message>\n{text}\n</user-message>",
    "done": "- {}".format, "choices": "- {}".format, "decisions": "- {}".format, "facts": "- {}".format,
    "files_changed": lambda entry: _file_line(*entry, "change"),
    "files_read": lambda entry: _file_line(*entry, "read"),
    "commands": _command_line,
    "keep_excerpts": lambda text: f"<keep>\n{text}\n</keep>",
    "earlier": lambda text: f"<earlier-summary>\n{text.strip()}\n</earlier-summary>",
    "attached": lambda entry: f'<attached name="{entry[0]}">\n{entry[1]}\n</attached>',
}


class _Lines:
    """The note's lines for each list of a digest, formatted once: trimming renders the note
    again for every cut it tries, dozens of times for a long session."""

    def __init__(self, d: Digest):
        self.d = d
        self.formatted: dict[str, list[str]] = {}

    def kept(self, name: str, cut: dict[str, int]) -> list[str]:
        """The lines of what ``cut`` keeps of list ``name``."""
        lines = self.formatted.get(name)
        if lines is None:
            lines = self.formatted[name] = [ENTRY_LINES[name](entry) for entry in _in_order(self.d, name)]
        return _left(name, lines, cut)


# --- reading an earlier note back -------------------------------------------------------------

def parse(text: str) -> Digest | None:
    """The facts of an earlier lookout note (None when ``text`` is not one)."""
    start = text.find(NOTE_TITLE)
    if start < 0:
        return None
    body = text[start:]
    d = Digest()
    blocks: dict[str, list[tuple[str, str]]] = {}
    for match in BLOCK_RE.finditer(body):
        attrs = match.group(2) or ""
        name = re.search(r'name="([^"]*)"', attrs)
        blocks.setdefault(match.group(1), []).append((name.group(1) if name else "", match.group(3)))
    flat = BLOCK_RE.sub("", body)
    sections = _sections(flat)
    d.goal = "\n".join(sections.get("Goal", [])).strip().removeprefix(NO_GOAL)
    d.user_messages = [t for _, t in blocks.get("user-message", [])]
    progress = _subsections(sections.get("Progress", []))
    d.done = _bullets(progress.get("Done", []))
    d.in_progress = _bullets(progress.get("In progress", []))
    d.blocked = _bullets(progress.get("Blocked", []))
    decided = _bullets(sections.get("Key decisions", []))
    d.choices = [x for x in decided if x.startswith(CHOICE)]
    d.decisions = [x for x in decided if not x.startswith(CHOICE)]
    d.facts = _bullets(sections.get("Facts from tool output", []))
    files = _subsections(sections.get("Files", []))
    d.files_changed = _files(files.get("Changed", []))
    d.files_read = _files(files.get("Read", []))
    d.commands = [_command(b) for b in _bullets(sections.get("Commands run", []))]
    findings = _bullets(sections.get("Findings and errors", []))
    d.errors = [f[len("Error: "):] for f in findings if f.startswith("Error: ")]
    d.findings = [f for f in findings if not f.startswith("Error: ")]
    for f in d.findings:
        if " failed: " in f:
            d.errors.append(f.split(" failed: ", 1)[1])
    d.next_steps = [s for s in _bullets(sections.get("Next steps", []))
                    if not s.startswith("Continue with the user's latest request")]
    keeps = [t for _, t in blocks.get("keep", [])]
    d.keep = keeps[:1] if keeps else []
    d.keep_excerpts = keeps[1:]
    d.earlier = [t for _, t in blocks.get("earlier-summary", [])]
    d.attached = [(n, t) for n, t in blocks.get("attached", [])]
    return d


def _sections(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("## "):
            current = line[3:].strip()
            out[current] = []
        elif current is not None:
            out[current].append(line)
    return out


def _subsections(lines: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current = None
    for line in lines:
        if line.startswith("### "):
            current = line[4:].strip()
            out[current] = []
        elif current is not None:
            out[current].append(line)
    return out


def _bullets(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        if line.startswith("- ") and not re.match(r"- \((?:\d+ earlier .* left out|nothing|none)", line):
            out.append(line[2:])
    return out


def _files(lines: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for bullet in _bullets(lines):
        match = re.match(r"(.*?)(?: \((\d+) (?:reads|changes)\))?$", bullet)
        out[match.group(1)] = int(match.group(2) or 1)
    return out


def _command(bullet: str) -> str:
    if not bullet.startswith("`"):
        return bullet
    line, sep, said = bullet[1:].partition("`" + OUTCOME_SEP)
    if sep:
        return line + OUTCOME_SEP + said
    return line.removesuffix("`")


# --- facts that must survive -------------------------------------------------------------------

@dataclass
class Facts:
    instructions: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    values: list[str] = field(default_factory=list)  # lines of tool output later steps relied on

    KINDS: ClassVar[dict[str, str]] = {"instruction": "instructions", "file": "files", "command": "commands", "error": "errors",
             "value": "values"}

    def all(self) -> list[tuple[str, str]]:
        return [(kind, x) for kind, name in self.KINDS.items() for x in getattr(self, name)]

    def __len__(self) -> int:
        return len(self.all())

    def as_dict(self) -> dict[str, list[str]]:
        return {name: getattr(self, name) for name in self.KINDS.values()}


def must_survive(d: Digest) -> Facts:
    """What any note must still say: the user's instructions (their messages and
    ``--instructions``), the files touched, the commands run, the error strings seen and the
    values of tool output that later steps relied on."""
    return Facts(
        instructions=_unique_keep(d.user_messages + d.keep),
        files=_unique_keep(list(d.files_changed) + list(d.files_read)),
        commands=_unique_keep(c.partition(OUTCOME_SEP)[0] for c in d.commands),
        errors=_unique_keep(d.errors),
        values=_unique_keep(d.facts),
    )


def missing(note: str, facts: Facts) -> Facts:
    """The facts a note does not contain (compared with whitespace collapsed; a line of tool
    output counts as kept when every value it holds is in the note, in any wording)."""
    flat = squash(note)
    lost = Facts()
    for kind, fact in facts.all():
        if kind == "value":
            line = fact.partition(": ")[2] or fact
            held = values(line) or [squash(line)]
            kept = any(v in flat for v in held)  # the line holds the value a later step used
        else:
            kept = squash(fact) in flat
        if not kept:
            getattr(lost, Facts.KINDS[kind]).append(fact)
    return lost


def pin(note: str, d: Digest) -> str:
    """Add to a note (from any summarizer) what it lost of the user's messages, the files, the
    error strings, the facts from tool output and what ``--instructions`` named, word for word:
    those are pinned outside the summarizer's judgement."""
    facts = must_survive(d)
    lost = missing(note, Facts(instructions=facts.instructions, files=facts.files, errors=facts.errors,
                               values=facts.values))
    extra = []
    if lost.instructions:
        extra += ["## The user's messages, word for word",
                  *[part for t in lost.instructions for part in ("<user-message>", t, "</user-message>")], ""]
    if lost.files:
        changed = [p for p in lost.files if p in d.files_changed]
        read = [p for p in lost.files if p not in d.files_changed]
        extra += ["## Files (from the tool calls)"]
        extra += (["### Changed"] + [f"- {p}" for p in changed] if changed else [])
        extra += (["### Read"] + [f"- {p}" for p in read] if read else [])
        extra.append("")
    if lost.errors or lost.values:
        extra += ["## Errors and facts from tool output, word for word"]
        extra += [f"- Error: {e}" for e in lost.errors] + [f"- {v}" for v in lost.values]
        extra.append("")
    flat = squash(note)
    kept = [e for e in d.keep_excerpts if not all(v in flat for v in values(e) or [squash(e)])]
    if kept:  # what --instructions named, in full, wherever the transcript had it
        extra += ["## Keep in full detail, as asked"] + [part for e in kept for part in ("<keep>", e, "</keep>")]
        extra.append("")
    if not extra:
        return note
    return note.rstrip() + "\n\n" + "\n".join(extra).rstrip() + "\n"


# --- the transcript as text, for a model that writes the summary ---------------------------------

def transcript_text(items: Sequence[Item], text_of: Callable[[Item], str] | None = None,
                    limit: int = 2000) -> str:
    """The items as plain text for a summarizing model: tool outputs cut to ``limit``
    characters (beginning and end), images and thinking named, not included."""
    return "".join(transcript_parts(items, text_of, limit))


def transcript_parts(items: Sequence[Item], text_of: Callable[[Item], str] | None = None,
                     limit: int = 2000) -> Iterator[str]:
    """``transcript_text`` an item at a time (a whole conversation can be large to hold)."""
    first = True
    for part in _item_texts(items, text_of or (lambda item: item.text), limit):
        yield part if first else "\n\n" + part
        first = False


def _item_texts(items: Sequence[Item], text_of: Callable[[Item], str], limit: int) -> Iterator[str]:
    for item in items:
        if item.kind == IMAGE:
            yield f"[{item.role}: image {item.image.media_type if item.image else ''}]".rstrip()
        elif item.kind in (SUMMARY, THINKING):
            continue
        elif item.kind == TOOL_CALL:
            yield f"[assistant called {item.tool} ({item.call_id})]\n{_cut(item.text, limit)}"
        elif item.kind == TOOL_RESULT:
            flag = " (error)" if item.is_error else ""
            yield f"[result of {item.tool or 'tool'} ({item.call_id}){flag}]\n{_cut(text_of(item), limit)}"
        elif item.kind == SETUP:
            yield f"[{item.setup or 'setup'}]\n{_cut(item.text, limit)}"
        elif item.kind == NOTICE:
            yield f"[notice]\n{_cut(item.text, limit // 2)}"
        else:
            yield f"[{item.role}]\n{item.text if item.role == 'user' else _cut(item.text, limit * 2)}"


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n… [{len(text) - 2 * half:,} characters left out] …\n{text[-half:]}"
