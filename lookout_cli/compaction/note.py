"""The summary note ``compact`` writes in place of older turns, built without a model.

A note has the sections SPEC §4 names: goal; constraints and preferences (the user's messages
word for word); progress (done, in progress, blocked); key decisions; files read and changed
(collected from the tool calls' own arguments, never guessed from prose); commands run;
findings and errors; next steps. ``--instructions`` text and what it names are kept in full.

``digest()`` collects these facts from the items being summarized, ``parse()`` reads them back
from an earlier lookout note so a second compaction *updates* the first one (``merge()``)
instead of summarizing a summary, and ``render()`` writes the note within a token budget,
trimming the least important lists first and saying what it left out. ``must_survive()`` lists
the facts a note of any summarizer must keep (user instructions, file paths, commands, error
strings); ``missing()`` says which ones a note lost.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from lookout_cli.core.saved import CLEARED_PREFIX
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
    "covers the earlier turns; the most recent turns follow it word for word. Treat it as what "
    "you know about the work so far."
)

# tools that read or change files, by the names the agents give them (lower case)
READ_TOOLS = {"read", "read_file", "readfile", "view", "view_file", "notebookread", "open_file", "cat"}
WRITE_TOOLS = {
    "edit", "multiedit", "write", "write_file", "writefile", "notebookedit", "create_file", "edit_file",
    "replace", "str_replace", "apply_patch", "applypatch", "delete_file", "insert", "patch",
}
SHELL_TOOLS = {"bash", "shell", "local_shell", "exec_command", "shell_command", "run_shell_command",
               "run_terminal_cmd", "execute_command", "terminal", "container.exec"}
TODO_TOOLS = {"todowrite", "update_plan", "todo_write", "write_todos"}
PATH_KEYS = ("file_path", "path", "notebook_path", "filePath", "target_file", "filename", "file")
SHELL_READERS = {"cat", "head", "tail", "nl", "less", "more", "wc", "bat"}

# limits that keep the note readable; trimming below them is said in the note
LINE = 300  # one bullet
COMMAND = 200  # a command's first line
ERROR_LINE = 300
OUTCOME_SEP = "  "  # between a command and its outcome in the note
MAX_DECISIONS = 15
MAX_FINDINGS = 25

ERROR_RE = re.compile(
    r"(?i)\b(error|exception|traceback|failed|failure|fatal|denied|not found|no such file|"
    r"cannot|can't|could not|panic|segmentation fault|timed out|exit code [1-9]|exit status [1-9])\b"
)
DECISION_RE = re.compile(
    r"(?i)\b(decided|decide to|i'll use|we'll use|i will use|chose|choose to|going with|instead of|"
    r"the plan is|approach is|switch(?:ed)? to|let's use|we should use|prefer)\b"
)
FINDING_RE = re.compile(
    r"(?i)\b(found|turns out|the (?:problem|issue|bug|cause|error) (?:is|was)|root cause|works now|"
    r"now passes|all tests pass|tests pass|fixed|is caused by)\b"
)
NEXT_RE = re.compile(r"(?i)(\bnext,? i\b|\bnext steps?\b|\bthen i'll\b|\bremaining\b|\bstill (?:need|have) to\b|"
                     r"\bTODO:|\bi'll now\b|\bnext i\b|\bwhat's left\b)")
SENTENCE_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(\[])")
EXIT_RE = re.compile(r"(?i)(?:exit code|exit status|exited with|\"exit_code\"\s*:)\s*:?\s*(-?\d+)")
BLOCK_RE = re.compile(r"<(user-message|attached|keep|earlier-summary)( [^>]*)?>\n(.*?)\n</\1>", re.S)


# --- small text helpers --------------------------------------------------------------------

def one_line(text: str, limit: int = LINE) -> str:
    """The first non-empty line, stripped and cut at ``limit`` characters."""
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"
    return ""


def squash(text: str) -> str:
    """Whitespace collapsed, for comparing a fact with a note."""
    return " ".join(text.split())


FENCE_RE = re.compile(r"```.*?(?:```|\Z)", re.S)


def sentences(text: str) -> list[str]:
    """Prose sentences of a reply: code blocks, headings and tables left out."""
    out = []
    text = FENCE_RE.sub("\n\n", text)
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith(("#", "|")))
    for para in re.split(r"\n\s*\n|\n(?=\s*(?:[-*]|\d+\.) )", text):
        for s in SENTENCE_RE.split(" ".join(para.split())):
            s = s.strip(" -*")
            if 12 <= len(s) <= LINE:
                out.append(s)
    return out


def arguments(item: Item) -> dict:
    """A tool call's arguments as a dict (adapters keep them in ``extra`` or in the text)."""
    for key in ("input", "arguments", "args"):
        value = item.extra.get(key) if item.extra else None
        if isinstance(value, dict):
            return value
        if isinstance(value, str):
            parsed = _json_object(value)
            return parsed if parsed is not None else {"input": value}
    text = item.text or ""
    start = text.find("{")
    if start >= 0:
        parsed = _json_object(text[start:])
        if parsed is not None:
            return parsed
    # a free-form input (Codex's apply_patch custom tool): everything after the tool name
    name = item.tool or ""
    rest = text[len(name):].lstrip(" :\n") if text.startswith(name) else text
    return {"input": rest} if rest else {}


def _json_object(text: str) -> dict | None:
    try:
        value = json.loads(text)
    except ValueError:
        try:
            value, _ = json.JSONDecoder().raw_decode(text)
        except ValueError:
            return None
    if isinstance(value, str):  # arguments double-encoded as a JSON string
        return _json_object(value) if value.lstrip().startswith("{") else None
    return value if isinstance(value, dict) else None


def tool_key(name: str | None) -> str:
    """A tool's name, lower case, without an MCP or namespace prefix."""
    name = (name or "").lower()
    return name.rsplit("__", 1)[-1].rsplit(".", 1)[-1] if name not in SHELL_TOOLS else name


def shell_script(args: dict) -> str | None:
    """The command line a shell tool ran (Codex passes ``["bash", "-lc", script]``)."""
    for key in ("command", "cmd", "script", "commandLine"):
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            if len(value) >= 3 and value[1] in ("-lc", "-c", "/c", "-Command") :
                return value[2].strip()
            return shlex.join(value)
    return None


PATCH_FILE_RE = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (.+?)\s*$", re.M)
PATCH_MOVE_RE = re.compile(r"^\*\*\* Move to: (.+?)\s*$", re.M)
DIFF_FILE_RE = re.compile(r"^\+\+\+ (?:b/)?(\S+)", re.M)


def files_of_call(item: Item) -> tuple[list[str], list[str]]:
    """(files read, files changed) named in one tool call's arguments."""
    args = arguments(item)
    key = tool_key(item.tool)
    read: list[str] = []
    changed: list[str] = []
    paths = [args[k] for k in PATH_KEYS if isinstance(args.get(k), str) and args.get(k)]
    paths += [p for k in ("paths", "file_paths", "files") if isinstance(args.get(k), list)
              for p in args[k] if isinstance(p, str)]
    patch = next((v for k in ("input", "patch", "diff") if isinstance(v := args.get(k), str) and v), None)
    if key in READ_TOOLS or (key == "view" and paths):
        read += paths
    elif key == "str_replace_based_edit_tool" or key == "str_replace_editor":
        (read if args.get("command") == "view" else changed).extend(paths)
    elif key in WRITE_TOOLS or patch and PATCH_FILE_RE.search(patch):
        changed += paths
        if patch:
            changed += PATCH_FILE_RE.findall(patch) + PATCH_MOVE_RE.findall(patch)
            if not PATCH_FILE_RE.search(patch):
                changed += DIFF_FILE_RE.findall(patch)
    elif key in SHELL_TOOLS or "command" in args and key not in TODO_TOOLS:
        script = shell_script(args)
        if script:
            r, c = _files_of_script(script)
            read += r
            changed += c
    return _unique(read), _unique(changed)


def _files_of_script(script: str) -> tuple[list[str], list[str]]:
    """Files a shell script names as readers' arguments, ``sed -i`` targets or redirections."""
    read: list[str] = []
    changed: list[str] = []
    if "*** Begin Patch" in script:
        changed += PATCH_FILE_RE.findall(script) + PATCH_MOVE_RE.findall(script)
        return read, changed
    for part in re.split(r"&&|\|\||;|\||\n", script):
        try:
            words = shlex.split(part, comments=True)
        except ValueError:
            continue
        if not words:
            continue
        for i, word in enumerate(words):
            if word in (">", ">>") and i + 1 < len(words) and _pathlike(words[i + 1]):
                changed.append(words[i + 1])
            elif word.startswith(">") and len(word) > 1 and word[1:].lstrip(">") and _pathlike(word.lstrip(">")):
                changed.append(word.lstrip(">"))
        cmd = words[0].rsplit("/", 1)[-1]
        args = [w for w in words[1:] if not w.startswith("-") and w not in (">", ">>")]
        if cmd in SHELL_READERS:
            read += [w for w in args if _pathlike(w)]
        elif cmd == "sed":
            files = [w for w in args[1:] if _pathlike(w)]
            (changed if any(w.startswith("-i") for w in words[1:]) else read).extend(files)
        elif cmd == "tee":
            changed += [w for w in args if _pathlike(w)]
    return read, changed


def _pathlike(word: str) -> bool:
    if not word or word.startswith(("$", "-", "<", "&")) or "=" in word or len(word) > 300:
        return False
    if word in ("/dev/null", "/dev/stdout", "/dev/stderr") or re.fullmatch(r"\d+", word):
        return False
    return "/" in word or bool(re.search(r"\.[A-Za-z0-9]{1,8}$", word))


def _unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(v.strip() for v in values if v and v.strip()))


def error_line(text: str) -> str | None:
    """The first line of a tool output that states an error, word for word."""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and ERROR_RE.search(stripped) and not stripped.startswith(CLEARED_PREFIX):
            return one_line(stripped, ERROR_LINE)
    return None


def exit_code(text: str) -> int | None:
    """The exit status an output reports near its start or its end, if any."""
    for part in (text[:2000], text[-2000:]):
        # most outputs say no "exit": the case-blind regex alone tries every position of both ends
        match = EXIT_RE.search(part) if "exit" in part.lower() else None
        if match:
            return int(match.group(1))
    return None


# --- the digest: facts collected from the items being summarized ------------------------------

@dataclass
class Digest:
    goal: str = ""
    user_messages: list[str] = field(default_factory=list)  # word for word, oldest first
    done: list[str] = field(default_factory=list)
    in_progress: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    files_read: dict[str, int] = field(default_factory=dict)  # path -> times
    files_changed: dict[str, int] = field(default_factory=dict)
    commands: list[str] = field(default_factory=list)
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
    text_of = text_of or (lambda item: item.text)
    d = Digest()
    calls: dict[str, Item] = {}
    command_index: dict[str, int] = {}
    turns: dict[int, list[Item]] = {}
    first_prompt: Item | None = None
    saw_conversation = False
    todo: list[dict] | None = None
    for item in items:
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
                if text not in d.user_messages:
                    d.user_messages.append(text)
        elif item.kind == TOOL_CALL:
            if item.call_id:
                calls[item.call_id] = item
            read, changed = files_of_call(item)
            for path in read:
                d.files_read[path] = d.files_read.get(path, 0) + 1
            for path in changed:
                d.files_changed[path] = d.files_changed.get(path, 0) + 1
            key = tool_key(item.tool)
            args = arguments(item)
            if key in TODO_TOOLS:
                todo = _todo_items(args) or todo
            elif key in SHELL_TOOLS or ("command" in args and not read and not changed and shell_script(args)):
                script = shell_script(args)
                if script:
                    line = squash(one_line(script, COMMAND))
                    command_index[item.call_id or str(id(item))] = len(d.commands)
                    d.commands.append(line)
        elif item.kind == TOOL_RESULT:
            text = text_of(item)
            code = exit_code(text)
            failed = item.is_error or (code is not None and code != 0)
            err = error_line(text) if failed or item.is_error else None
            if failed:
                call = calls.get(item.call_id or "")
                where = _call_label(call) if call else (item.tool or "tool")
                err = err or one_line(text, ERROR_LINE)
                if err and err not in d.errors:
                    d.errors.append(err)
                    d.findings.append(f"{where} failed: {err}")
                idx = command_index.pop(item.call_id or "", None)
                if idx is not None:
                    d.commands[idx] += f"{OUTCOME_SEP}(failed{f', exit {code}' if code not in (None, 0) else ''})"
        elif item.role == "assistant" and item.kind == TEXT:
            for s in sentences(item.text):
                if DECISION_RE.search(s) and s not in d.decisions:
                    d.decisions.append(s)
                elif FINDING_RE.search(s) and s not in d.findings:
                    d.findings.append(s)
    if first_prompt is not None:
        d.goal = _goal(first_prompt.text)
    _progress(d, turns)
    if todo:
        _apply_todo(d, todo)
    if instructions:
        d.keep.append(instructions.strip())
        d.keep_excerpts = _excerpts(items, instructions)
    d.decisions = d.decisions[-MAX_DECISIONS:]
    return d


def _call_label(call: Item) -> str:
    args = arguments(call)
    script = shell_script(args)
    if script:
        return f"`{one_line(script, 80)}`"
    read, changed = files_of_call(call)
    paths = changed or read
    return f"{call.tool} {paths[0]}" if paths else (call.tool or "tool")


def _goal(text: str) -> str:
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
    d.done = _unique(d.done + [f"{t} (to-do list)" for t in done])
    d.in_progress = _unique(doing + d.in_progress)
    d.next_steps = _unique(pending + d.next_steps)


def _progress(d: Digest, turns: dict[int, list[Item]]) -> None:
    """One line per earlier turn: what was asked and how the agent's reply ended."""
    numbered = [t for t in sorted(turns) if any(i.prompt for i in turns[t])]
    for n in numbered:
        group = turns[n]
        prompt = next(i for i in group if i.prompt)
        replies = [i for i in group if i.role == "assistant" and i.kind == TEXT and i.text.strip()]
        calls = [i for i in group if i.kind == TOOL_CALL]
        last = next((i for i in reversed(group) if i.kind in (TEXT, TOOL_CALL, TOOL_RESULT)), None)
        asked = one_line(prompt.text, 120)
        outcome = one_line(" ".join(sentences(replies[-1].text)[:2]) or replies[-1].text, 200) if replies else ""
        line = f"Asked: \"{asked}\""
        if calls:
            line += f" ({len(calls)} tool call{'s' if len(calls) != 1 else ''})"
        if outcome:
            line += f" → {outcome}"
        if last is not None and last.kind == TOOL_RESULT and last.is_error:
            d.blocked.append(line + " (its last tool call failed)")
        elif n == numbered[-1] and last is not None and last.kind != TEXT:
            d.in_progress.append(line)
        else:
            d.done.append(line)
        if n == numbered[-1] and replies:
            for s in sentences(replies[-1].text):
                if NEXT_RE.search(s):
                    d.next_steps.append(s)


STOPWORDS = set("""a an the and or of to in on for with that this these those is are be it its keep kept
full fully detail details detailed all any about from into please make sure summary summarize summarise
what which who how when where every each must should would could not no do does did as at by""".split())


def _excerpts(items: Sequence[Item], instructions: str) -> list[str]:
    """Messages that mention what ``--instructions`` names, kept whole."""
    words = [w for w in re.findall(r"[A-Za-z0-9_./-]{3,}", instructions.lower()) if w not in STOPWORDS]
    if not words:
        return []
    found = []
    for item in items:
        if item.kind not in (TEXT, SUMMARY) or not item.text.strip():
            continue
        low = item.text.lower()
        hits = sum(1 for w in words if w in low)
        if hits >= max(1, (len(words) + 1) // 2) and item.text.strip() not in found:
            found.append(item.text.strip())
    return found


def merge(old: Digest, new: Digest) -> Digest:
    """Update an earlier note with what happened since: lasting facts accumulate, the state of
    the work (in progress, blocked, next steps) is replaced by the newer one."""
    merged = Digest(goal=old.goal or new.goal)
    merged.user_messages = _unique_keep(old.user_messages + new.user_messages)
    merged.done = _unique_keep(old.done + old.in_progress + new.done)
    merged.in_progress = new.in_progress or ([] if new.done else old.in_progress)
    merged.blocked = new.blocked
    merged.decisions = _unique_keep(old.decisions + new.decisions)[-MAX_DECISIONS * 2:]
    merged.files_read = dict(old.files_read)
    for path, n in new.files_read.items():
        merged.files_read[path] = merged.files_read.get(path, 0) + n
    merged.files_changed = dict(old.files_changed)
    for path, n in new.files_changed.items():
        merged.files_changed[path] = merged.files_changed.get(path, 0) + n
    merged.commands = old.commands + new.commands
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
    "Commands run", "Findings and errors", "Next steps", "Keep in full detail", "Earlier summary",
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
    text = _render(d, {})
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
        cut = _trim(d, {}, lambda note: len(note) * per_char <= 0.9 * budget)
        note = _render(d, cut)
        per_char = estimate(note) / len(note)
    return _render(d, _trim(d, cut, lambda note: count(note) <= budget))


def _trim(d: Digest, cut: dict[str, int], fits: Callable[[str], bool]) -> dict[str, int]:
    """Cut more of the note's lists, least useful first, until ``fits`` says it fits."""
    cut = dict(cut)
    # what goes first: the least useful for continuing the work
    order = ["decisions", "done", "findings", "files_read", "commands", "keep_excerpts", "attached",
             "earlier", "errors", "files_changed", "user_messages"]
    for name in order:
        fit = fits(_render(d, cut))  # each cut is rendered and sized once: a long session's note is large
        while not fit:
            total = len(_list(d, name))
            kept = total - cut.get(name, 0)
            floor = 1 if name in ("user_messages", "errors", "files_changed") else 0
            if kept <= floor:
                break
            short = cut.get(name, 0)  # a cut that does not fit
            cut[name] = short + max(1, (kept - floor + 1) // 2)
            fit = fits(_render(d, cut))
            if fit:  # halving may have cut up to twice what was needed: take back what fits
                cut[name] = _least_cut(d, cut, name, short, fits)
        if fit:
            break
    return cut


def _least_cut(d: Digest, cut: dict[str, int], name: str, short: int, fits: Callable[[str], bool]) -> int:
    """The fewest entries of list ``name`` to leave out, between ``short`` (too few) and
    ``cut[name]`` (enough), with the other lists cut as ``cut`` says (binary search)."""
    enough = cut[name]
    while enough - short > 1:
        middle = (short + enough) // 2
        if fits(_render(d, {**cut, name: middle})):
            enough = middle
        else:
            short = middle
    return enough


def _list(d: Digest, name: str) -> list:
    value = getattr(d, name)
    return list(value.items()) if isinstance(value, dict) else value


def _kept(d: Digest, name: str, cut: dict[str, int]) -> list:
    values = _list(d, name)
    n = cut.get(name, 0)
    if name in ("files_read",):  # keep the most read files
        values = sorted(values, key=lambda kv: -kv[1])
        return values[: len(values) - n] if n else values
    return values[n:]  # drop the oldest


def _more(name: str, cut: dict[str, int], what: str = "entries") -> list[str]:
    n = cut.get(name, 0)
    return [f"- ({n} earlier {what} left out; the original context has them)"] if n else []


def _render(d: Digest, cut: dict[str, int]) -> str:
    out = [NOTE_TITLE, "", PREAMBLE, ""]
    out += ["## Goal", d.goal or "(no request recorded)", ""]

    out += ["## Constraints and preferences",
            "The user's messages so far, word for word (oldest first); follow their instructions:"]
    out += _more("user_messages", cut, "messages")
    for i, text in enumerate(_kept(d, "user_messages", cut)):
        out += ["<user-message>", text, "</user-message>"]
    out.append("")

    out += ["## Progress", "### Done"]
    out += _more("done", cut) + ([f"- {x}" for x in _kept(d, "done", cut)] or ["- (nothing recorded)"])
    out += ["### In progress"] + ([f"- {x}" for x in d.in_progress] or ["- (nothing recorded)"])
    out += ["### Blocked"] + ([f"- {x}" for x in d.blocked] or ["- (nothing)"])
    out.append("")

    out += ["## Key decisions"]
    out += _more("decisions", cut) + ([f"- {x}" for x in _kept(d, "decisions", cut)] or ["- (none recorded)"])
    out.append("")

    out += ["## Files", "### Changed"]
    changed = _kept(d, "files_changed", cut)
    out += _more("files_changed", cut, "files") + ([_file_line(p, n, "change") for p, n in changed] or ["- (none)"])
    out += ["### Read"]
    read = _kept(d, "files_read", cut)
    out += ([_file_line(p, n, "read") for p, n in read] or ["- (none)"]) + _more("files_read", cut, "files")
    out.append("")

    out += ["## Commands run"]
    out += _more("commands", cut, "commands") + ([_command_line(c) for c in _kept(d, "commands", cut)]
                                                 or ["- (none)"])
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
        out += _more("keep_excerpts", cut, "passages")
        for text in _kept(d, "keep_excerpts", cut):
            out += ["<keep>", text, "</keep>"]
        out.append("")
    if d.earlier:
        out += ["## Earlier summary"] + _more("earlier", cut, "summaries")
        for text in _kept(d, "earlier", cut):
            out += ["<earlier-summary>", text.strip(), "</earlier-summary>"]
        out.append("")
    if d.attached:
        out += ["## Rules and skills as attached"] + _more("attached", cut, "attachments")
        for label, text in _kept(d, "attached", cut):
            out += [f'<attached name="{label}">', text, "</attached>"]
        out.append("")
    if d.original:
        out += ["## Original context", d.original, ""]
    return "\n".join(out).rstrip() + "\n"


def _command_line(command: str) -> str:
    line, sep, outcome = command.partition(OUTCOME_SEP)
    return f"- `{line}`" + (f"{OUTCOME_SEP}{outcome}" if sep else "")


def _file_line(path: str, n: int, what: str) -> str:
    return f"- {path}" + (f" ({n} {what}s)" if n > 1 else "")


# --- reading an earlier note back -------------------------------------------------------------

def is_note(text: str) -> bool:
    return NOTE_TITLE in text


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
    d.goal = "\n".join(sections.get("Goal", [])).strip()
    d.user_messages = [t for _, t in blocks.get("user-message", [])]
    progress = _subsections(sections.get("Progress", []))
    d.done = _bullets(progress.get("Done", []))
    d.in_progress = _bullets(progress.get("In progress", []))
    d.blocked = _bullets(progress.get("Blocked", []))
    d.decisions = _bullets(sections.get("Key decisions", []))
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
    match = re.match(r"`(.*)`(?:  (\(.*\)))?$", bullet)
    if not match:
        return bullet
    return match.group(1) + (f"{OUTCOME_SEP}{match.group(2)}" if match.group(2) else "")


# --- facts that must survive -------------------------------------------------------------------

@dataclass
class Facts:
    instructions: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def all(self) -> list[tuple[str, str]]:
        return ([("instruction", x) for x in self.instructions] + [("file", x) for x in self.files]
                + [("command", x) for x in self.commands] + [("error", x) for x in self.errors])

    def __len__(self) -> int:
        return len(self.all())

    def as_dict(self) -> dict[str, list[str]]:
        return {"instructions": self.instructions, "files": self.files,
                "commands": self.commands, "errors": self.errors}


def must_survive(d: Digest) -> Facts:
    """What any note must still say: the user's instructions (their messages and
    ``--instructions``), the files touched, the commands run and the error strings seen."""
    return Facts(
        instructions=_unique_keep(d.user_messages + d.keep),
        files=_unique_keep(list(d.files_changed) + list(d.files_read)),
        commands=_unique_keep(c.partition(OUTCOME_SEP)[0] for c in d.commands),
        errors=_unique_keep(d.errors),
    )


def missing(note: str, facts: Facts) -> Facts:
    """The facts a note does not contain (compared with whitespace collapsed)."""
    flat = squash(note)
    lost = Facts()
    for kind, fact in facts.all():
        if squash(fact) not in flat:
            getattr(lost, {"instruction": "instructions", "file": "files", "command": "commands",
                           "error": "errors"}[kind]).append(fact)
    return lost


def pin(note: str, d: Digest) -> str:
    """Add to a note (from any summarizer) the user messages and file lists it lost, word for
    word: those facts are pinned outside the summarizer's judgement."""
    facts = must_survive(d)
    lost = missing(note, Facts(instructions=facts.instructions, files=facts.files))
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
