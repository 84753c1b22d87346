"""What the offline note reads out of single items: text helpers, the files and commands of
tool calls, and the facts in tool output a continuing agent needs.

- ``files_of_call`` / ``shell_script``: the files a call read or changed and the command line
  it ran, from the call's own arguments (never guessed from prose).
- ``error_line`` / ``outcome``: what a command's output says: a traceback's last line, the
  first line stating an error, a test run's summary line ("214 passed"), or a short output
  whole (a count, a hash, a version).
- ``values`` / ``referenced_lines``: lines of tool output holding a value (a port, a version, an
  id, a count, an ``ENV_NAME``) that the agent later quoted or used in a call: the facts later
  steps relied on.
- ``question`` / ``next_steps`` / ``current_work``: from the agent's words, the question a
  user's next message answers, and what the agent said it was doing and would do next.
- ``excerpts``: what ``--instructions`` names, found in every kind of item, tool output too.
- ``suspicious``: lines of a note that give the agent orders (prompt injection carried over
  from a web page or a file into the summary).
"""

from __future__ import annotations

import bisect
import json
import re
import shlex
import string
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache

from lookout_cli.core.saved import CLEARED_PREFIX
from lookout_cli.formats.view import SUMMARY, TEXT, TOOL_CALL, TOOL_RESULT, Item

# tools that read or change files, by the names the agents give them (lower case)
READ_TOOLS = {"read", "read_file", "readfile", "view", "view_file", "notebookread", "open_file", "cat"}
WRITE_TOOLS = {
    "edit", "multiedit", "write", "write_file", "writefile", "notebookedit", "create_file", "edit_file",
    "replace", "str_replace", "apply_patch", "applypatch", "delete_file", "insert", "patch",
}
SHELL_TOOLS = {"bash", "shell", "local_shell", "exec_command", "shell_command", "run_shell_command",
               "run_terminal_cmd", "execute_command", "terminal", "container.exec"}
TODO_TOOLS = {"todowrite", "update_plan", "todo_write", "write_todos"}
ASK_TOOLS = {"askuserquestion", "ask_user_question", "request_user_input", "ask_followup_question", "ask_user"}
PATH_KEYS = ("file_path", "path", "notebook_path", "filePath", "target_file", "filename", "file")
SHELL_READERS = {"cat", "head", "tail", "nl", "less", "more", "wc", "bat"}
SHELL_WRITERS = {"sed", "tee"}

LINE = 300  # one bullet
ERROR_LINE = 300
FACT_LINE = 240
SCAN = 16_000  # characters of one output searched for values (its beginning and end)

ERROR_RE = re.compile(
    r"(?i)\b(error|exception|traceback|failed|failure|fatal|denied|not found|no such file|"
    r"cannot|can't|could not|panic|segmentation fault|timed out|exit code [1-9]|exit status [1-9])\b"
)
# a traceback's last line, or an exception pytest prints (``E   ModuleNotFoundError: …``)
EXCEPTION_RE = re.compile(
    r"^[ \t]*(?:E[ \t]+)?((?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure|Fault)\b(?::[^\n]*)?)$",
    re.MULTILINE)
EXIT_RE = re.compile(r"(?:exit code|exit status|exited with(?: code)?|\"exit_code\"\s*:)\s*:?\s*(-?\d+)", re.IGNORECASE)
# the lines Codex puts before a command's output (shell_command, exec_command)
CODEX_HEAD_RE = re.compile(r"\A(?:(?:Chunk ID|Wall time|Exit code|Process exited|Original token count)\b[^\n]*\n)+"
                           r"Output:\n")
TEST_SUMMARY_RE = re.compile(
    r"(?i)(?:\b\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|deselected)\b|^test result:|^Tests?:\s+\d+|"
    r"^Ran \d+ tests?\b|^(?:OK|FAILED)(?: \(.*\))?$|^ok\s+\S+\s+[\d.]+s$|\b\d+ (?:tests?|examples?|specs?),? "
    r"\d+ (?:failures?|failed)\b)")
TEST_WORDS = ("passed", "failed", "skipped", "Ran ", "OK", "ok ", "Tests", "test result", "failures")
WORD_CHARS = frozenset(string.ascii_letters + string.digits + "_.-")
# a value a later step may rely on: a word holding a digit (a port, version, count, hash, id),
# or an environment variable's name
VALUE_RE = re.compile(r"(?<![\w.\-])(?:[A-Za-z_.\-]*\d(?:[\w.\-]*[A-Za-z0-9])?|[A-Z][A-Z0-9]*_[A-Z0-9_]*[A-Z0-9]\b)")
# Where VALUE_RE can match: it starts a run of [\w.\-] (a value at most per run) with letters,
# "_", "." or "-" up to a digit, or with an upper-case word up to "_". In the reversed text these
# read from the digit or "_" back to the run's start, and the engine skips to a digit or "_" fast
# (hence the one class in front), where VALUE_RE itself is tried at every position.
VALUE_START_REVERSED_RE = re.compile(r"[\d_](?:(?<=\d)[A-Za-z_.\-]*+|(?<=_)[A-Z0-9]*[A-Z])(?![\w.\-])")
DECISION_RE = re.compile(
    r"\b(decided|decide to|i'll use|we'll use|i will use|chose|choose to|going with|instead of|"
    r"the plan is|approach is|switch(?:ed)? to|let's use|we should use|prefer)\b", re.IGNORECASE
)
FINDING_RE = re.compile(
    r"\b(found|turns out|the (?:problem|issue|bug|cause|error) (?:is|was)|root cause|works now|"
    r"now passes|all tests pass|tests pass|fixed|is caused by)\b", re.IGNORECASE
)
# Case-blind patterns of lower-case words made case-sensitive: an ASCII text's lower case
# searched with them gives the same matches, in half the time (``search_case_blind``).
LOWER_CASE_TWIN = {pattern: re.compile(pattern.pattern, pattern.flags & ~re.IGNORECASE)
                   for pattern in (EXIT_RE, DECISION_RE, FINDING_RE)}
NEXT_RE = re.compile(
    r"(?i)(\bnext,? (?:i|we)\b|\bnext steps?\b|\bthen (?:i|we)(?:'ll| will)\b|\bremaining\b|"
    r"\bstill (?:need|have) to\b|\bTODO:|\b(?:i|we)(?:'ll| will) now\b|\bnow (?:i|we)(?:'ll| will)\b|"
    r"\bwhat's left\b|\bafter that\b|\bi'm going to\b|\bthe plan is to\b)")
CURRENT_RE = re.compile(
    r"(?i)(\bi'm (?:now )?[\w-]+ing\b|\bi am (?:now )?[\w-]+ing\b|\bcurrently\b|\bworking on\b|\bin progress\b|"
    r"\blet me\b|\bnow (?:i'm|running|checking|looking))")
SENTENCE_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(\[])")
FENCE_RE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
# orders addressed to the agent that have no place in a summary (prompt injection)
INJECTION_RE = re.compile(
    r"(?i)(\bignore (?:all |any |the )*(?:previous|prior|above|earlier|preceding|your) "
    r"(?:instructions|messages|prompts?|rules)\b|\bdisregard (?:all |any |the )*(?:previous|prior|above|earlier|your) |"
    r"\bforget (?:all |everything )?(?:previous|prior|your) (?:instructions|rules)\b|\byou (?:must|should|will) now\b|"
    r"\bnew instructions?:|\bfrom now on,? you\b|\bsystem prompt:|</?system>|\b(?:do not|don't) tell the user\b|"
    r"\bwithout telling the user\b|\b(?:curl|wget)\b[^|\n]*\|\s*(?:ba|z)?sh\b|\bassistant must\b)")
QUOTED_BLOCK_RE = re.compile(r"<(user-message|keep|attached)( [^>]*)?>\n.*?\n</\1>", re.DOTALL)


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


def search_case_blind(pattern: re.Pattern, text: str, lower: str | None = None) -> re.Match | None:
    """``pattern.search(text)`` for a pattern of ``LOWER_CASE_TWIN``, faster on ASCII text (its
    lower case, ``lower`` when already made, searched case-sensitively): the same span, but a
    group's letters in lower case."""
    if text.isascii():
        return LOWER_CASE_TWIN[pattern].search(text.lower() if lower is None else lower)
    return pattern.search(text)


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


def unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(v.strip() for v in values if v and v.strip()))


# --- tool calls: arguments, files, commands ------------------------------------------------------

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
            if len(value) >= 3 and value[1] in ("-lc", "-c", "/c", "-Command"):
                return value[2].strip()
            return shlex.join(value)
    return None


PATCH_FILE_RE = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (.+?)\s*$", re.MULTILINE)
PATCH_MOVE_RE = re.compile(r"^\*\*\* Move to: (.+?)\s*$", re.MULTILINE)
DIFF_FILE_RE = re.compile(r"^\+\+\+ (?:b/)?(\S+)", re.MULTILINE)
SCRIPT_SPLIT_RE = re.compile(r"&&|\|\||;|\||\n")


def files_of_call(item: Item, args: dict | None = None) -> tuple[list[str], list[str]]:
    """(files read, files changed) named in one tool call's arguments."""
    args = arguments(item) if args is None else args
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
            r, c = files_of_script(script)
            read += r
            changed += c
    return unique(read), unique(changed)


@lru_cache(maxsize=4096)  # agents run the same commands again and again
def files_of_script(script: str) -> tuple[list[str], list[str]]:
    """Files a shell script names as readers' arguments, ``sed -i`` targets or redirections.
    Only the parts that read, write or redirect are split the way the shell would (shlex is
    slow, and most commands are neither)."""
    read: list[str] = []
    changed: list[str] = []
    if "*** Begin Patch" in script:
        changed += PATCH_FILE_RE.findall(script) + PATCH_MOVE_RE.findall(script)
        return read, changed
    for part in SCRIPT_SPLIT_RE.split(script):
        head = part.split(None, 1)
        if not head or (">" not in part and head[0].rsplit("/", 1)[-1] not in SHELL_READERS | SHELL_WRITERS):
            continue
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
    if word in ("/dev/null", "/dev/stdout", "/dev/stderr") or word.isdigit():
        return False
    return "/" in word or bool(re.search(r"\.[A-Za-z0-9]{1,8}$", word))


def call_label(call: Item, args: dict | None = None) -> str:  # args: the call's, when already parsed
    """A call as a note names it: its command line, else its tool and file."""
    args = arguments(call) if args is None else args
    script = shell_script(args)
    if script:
        return f"`{one_line(script, 80)}`"
    read, changed = files_of_call(call, args)
    paths = changed or read
    return f"{call.tool} {paths[0]}" if paths else (call.tool or "tool")


# --- tool output: errors, outcomes, values --------------------------------------------------------

def error_line(text: str) -> str | None:
    """What a failed output says went wrong, word for word: a traceback's last line (the
    exception), else the first line that states an error."""
    scan = text if len(text) <= 4 * SCAN else text[:SCAN] + "\n" + text[-3 * SCAN:]
    last = None
    for match in EXCEPTION_RE.finditer(scan):
        last = match
    if last is not None:
        return one_line(last.group(1), ERROR_LINE)
    for line in scan.splitlines():
        stripped = line.strip()
        if stripped and ERROR_RE.search(stripped) and not stripped.startswith(CLEARED_PREFIX):
            return one_line(stripped, ERROR_LINE)
    return None


def exit_code(text: str) -> int | None:
    """The exit status an output reports near its start or its end, if any."""
    for part in (text[:2000], text[-2000:]) if len(text) > 2000 else (text,):  # a short one once
        # most outputs say no "exit": the case-blind regex alone tries every position of both ends
        lower = part.lower()
        match = search_case_blind(EXIT_RE, part, lower) if "exit" in lower else None
        if match:
            return int(match.group(1))
    return None


def failed(item: Item, text: str) -> tuple[bool, int | None]:
    """Whether a tool result reports a failure (its flag, a non-zero exit or a traceback)."""
    code = exit_code(text)
    bad = item.is_error or (code is not None and code != 0) or "Traceback (most recent call last)" in text[-SCAN:]
    return bad, code


def outcome(text: str) -> str | None:
    """What a successful command's output comes to in one line: a test run's summary, else
    the whole output when it is short (a count, a hash, a version, a status)."""
    if text.startswith(("Chunk ID", "Wall time", "Exit code", "Process exited")):
        text = CODEX_HEAD_RE.sub("", text, count=1)
    tail = text[-2000:]
    if any(word in tail for word in TEST_WORDS):
        lines = [line.strip(" =") for line in tail.splitlines()[-40:]]
        for line in reversed(lines):
            if line and len(line) <= 200 and TEST_SUMMARY_RE.search(line):
                return line
    if len(text) <= 240 and not text.startswith(CLEARED_PREFIX) and not INJECTION_RE.search(text):
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if 0 < len(lines) <= 3:
            return " / ".join(lines)
    return None


# settings a command printed: a version, a port, a branch, an environment variable
SETTING_RE = re.compile(
    r"^[ \t]*(?:(?i:name|version|port|host|url|branch|commit|revision)[ \t]*:[ \t]*[^\s][^\n]{0,120}|"
    r"[A-Z][A-Z0-9]*_[A-Z0-9_]+=[^\s][^\n]{0,120})$", re.MULTILINE)


def settings_printed(text: str, limit: int = 4) -> list[str]:
    """``key: value`` and ``ENV_NAME=value`` lines of a short command output (``pip show``,
    ``env | grep``, ``git config``): what a later step is likely to need."""
    if len(text) > 6_000 or text.count("\n") > 60:
        return []
    out = []
    for match in SETTING_RE.finditer(text):
        line = one_line(match.group(), FACT_LINE)
        if line and not INJECTION_RE.search(line):
            out.append(line)
            if len(out) >= limit:
                break
    return out


def values(text: str) -> list[str]:
    """The values a text mentions (words holding a digit, environment variable names), of 3
    characters or more (not ``1`` or ``v2``), once each, in order (the note must not depend on
    a set's order)."""
    size = len(text)
    starts = [size - match.end() for match in VALUE_START_REVERSED_RE.finditer(text[::-1])]
    found = (VALUE_RE.match(text, start) for start in reversed(starts))  # VALUE_RE.findall(text)
    return [v for v in dict.fromkeys(match.group() for match in found if match) if len(v) >= 3]


def referenced_lines(outputs: Sequence[tuple[int, str]], mentions: dict[str, list[int]],
                     per_output: int = 4, reach: int = 6) -> dict[int, list[str]]:
    """For each output (index, text), the lines holding a value the agent mentioned after it
    (``mentions``: value -> indexes of the items mentioning it, in order), one line per value,
    at most ``per_output`` lines per output. A mention is looked for in the ``reach`` outputs
    before it (since the mention before), nearest first, in the beginning and end of each: a
    substring search per value, as tokenizing every output costs far more."""
    indices = [index for index, _ in outputs]
    scans: dict[int, str] = {}
    found: dict[int, list[str]] = {}
    for value, said in mentions.items():
        before = -1
        for at in said:
            high = bisect.bisect_left(indices, at)
            low = max(bisect.bisect_right(indices, before), high - reach)
            line = None
            for k in range(high - 1, low - 1, -1):
                scan = scans.get(k)
                if scan is None:
                    text = outputs[k][1]
                    scan = scans[k] = text if len(text) <= SCAN else text[: SCAN * 3 // 4] + "\n" + text[-SCAN // 4:]
                line = _line_holding(scan, value)
                if line is not None:
                    kept = found.setdefault(indices[k], [])
                    if line not in kept and len(kept) < per_output and not INJECTION_RE.search(line):
                        kept.append(line)
                    break
            if line is not None:
                break  # one line per value
            before = at
    return {index: found[index] for index in sorted(found) if found[index]}


def _line_holding(text: str, value: str) -> str | None:
    """The line of ``text`` where ``value`` stands as a word of its own, if any."""
    at = text.find(value)
    tries = 0
    while at >= 0 and tries < 8:
        end = at + len(value)
        if (at == 0 or text[at - 1] not in WORD_CHARS) and (end == len(text) or text[end] not in WORD_CHARS
                                                              or text[end] in ".-" and not text[end + 1:end + 2].isalnum()):
            start = text.rfind("\n", 0, at) + 1
            stop = text.find("\n", end)
            line = one_line(text[start:stop if stop >= 0 else len(text)], FACT_LINE)
            return None if not line or line.startswith(CLEARED_PREFIX) else line
        at = text.find(value, end)
        tries += 1
    return None


# --- the agent's words: questions, current work, next steps ----------------------------------------

def question(text: str, said: list[str] | None = None) -> str | None:
    """The last question an agent's reply asks the user, if it asks one (``said``: its
    sentences, when already split)."""
    if "?" not in text:
        return None
    said = sentences(text) if said is None else said
    asked = [n for n, s in enumerate(said) if s.endswith("?")]
    if not asked:
        tail = one_line("\n".join(reversed(text.strip().splitlines())), LINE)
        return tail if tail.endswith("?") else None
    n = asked[-1]
    if len(said[n]) < 60 and n > 0:  # "Which do you prefer?" says little without what it chooses between
        return one_line(f"{said[n - 1]} {said[n]}", 2 * LINE)
    return said[n]


def next_steps(text: str) -> list[str]:
    """The sentences of the agent's latest words that say what comes next."""
    return [s for s in sentences(text) if NEXT_RE.search(s) and not s.endswith("?")]


def current_work(text: str) -> list[str]:
    """The sentences of the agent's latest words that say what it is doing."""
    return [s for s in sentences(text) if CURRENT_RE.search(s) and not NEXT_RE.search(s) and not s.endswith("?")]


# --- --instructions ------------------------------------------------------------------------------

STOPWORDS = set("""a an the and or of to in on for with that this these those is are be it its keep kept
full fully detail details detailed all any about from into please make sure summary summarize summarise
what which who how when where every each must should would could not no do does did as at by also plus
our my their them we you i me""".split())
EXCERPT = 3000  # characters of one tool output kept whole; past it, the lines that name the thing


def clauses(instructions: str) -> list[list[str]]:
    """The things ``--instructions`` names, each as its words ("the staging port and the
    django version" -> [staging, port], [django, version])."""
    out = []
    for part in re.split(r"(?i)[,;\n]|\band\b|\bplus\b|\bas well as\b", instructions):
        words = [_stem(w) for w in re.findall(r"[A-Za-z0-9_./-]{3,}", part.lower()) if w not in STOPWORDS]
        if words:
            out.append(words)
    return out


def _stem(word: str) -> str:
    return word[:-1] if len(word) > 4 and word.endswith("s") and not word.endswith("ss") else word


def excerpts(items: Sequence[Item], instructions: str, text_of: Callable[[Item], str]) -> list[str]:
    """What ``--instructions`` names, kept whole: messages, tool calls and tool outputs (with
    the call that made them) that hold every word of one thing it names."""
    wanted = clauses(instructions)
    if not wanted:
        return []
    starts = {w: re.compile(r"(?<![a-z0-9])" + re.escape(w)) for words in wanted for w in words}  # port, not import
    calls: dict[str, Item] = {}
    found: list[str] = []
    for item in items:
        if item.kind == TOOL_CALL and item.call_id:
            calls[item.call_id] = item
        if item.kind not in (TEXT, SUMMARY, TOOL_RESULT):
            continue
        text = text_of(item) if item.kind == TOOL_RESULT else item.text
        if not text.strip():
            continue
        call = calls.get(item.call_id or "") if item.kind == TOOL_RESULT else None
        label = call_label(call) if call is not None else ""
        low = (label + "\n" + text).lower() if len(text) <= 20 * EXCERPT else (label + "\n" + text[:20 * EXCERPT]).lower()
        hits = [words for words in wanted  # all its words, or all but one in three ("decision" vs "decided")
                if sum(1 for w in words if w in low and starts[w].search(low)) >= len(words) - len(words) // 3]
        if not hits:
            continue
        if item.kind != TOOL_RESULT:
            kept = text.strip()
        else:
            kept = f"{label or item.tool or 'tool'} output:\n" + _lines_naming(text, [starts[w] for h in hits for w in h])
        if kept not in found:
            found.append(kept)
    return found


def _lines_naming(text: str, words: list[re.Pattern]) -> str:
    """A tool output whole when short, else the lines naming ``words`` with two lines around."""
    text = text.strip("\n")
    if len(text) <= EXCERPT:
        return text
    lines = text.splitlines()
    keep: set[int] = set()
    for n, line in enumerate(lines):
        low = line.lower()
        if any(w.search(low) for w in words):
            keep.update(range(max(0, n - 2), min(len(lines), n + 3)))
    out, size, previous = [], 0, -2
    for n in sorted(keep):
        if n != previous + 1:
            out.append("…")
        out.append(lines[n])
        size += len(lines[n]) + 1
        previous = n
        if size > 2 * EXCERPT:
            out.append("…")
            break
    return "\n".join(out)


# --- prompt injection ------------------------------------------------------------------------------

def suspicious(note: str, limit: int = 5) -> list[str]:
    """Lines of a note that give the agent orders, outside the user's own words (their
    messages, ``--instructions`` and attached rules are theirs to give)."""
    theirs = " ".join(m.group().lower() for m in QUOTED_BLOCK_RE.finditer(note))
    text = QUOTED_BLOCK_RE.sub("", note)
    out = []
    for line in text.splitlines():
        found = INJECTION_RE.search(line)
        if found and found.group().lower() not in theirs:  # not the user's words quoted elsewhere (goal, progress)
            out.append(one_line(line, 160))
            if len(out) >= limit:
                break
    return out
