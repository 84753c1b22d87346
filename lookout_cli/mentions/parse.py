"""Find ``@`` mentions in the text of a user prompt.

The grammar (documented in ``lookout mentions --help`` and the man page):

- ``@path`` — a file or folder under the workspace root; ``@"path with spaces"`` (or single
  quotes) for names with spaces;
- a line range after the path: ``#L10-L40``, ``#L10-40``, ``#10-40``, ``:10-40``, or one line
  ``#L10`` / ``#10`` / ``:10``; a non-numeric fragment (``@README.md#installation``) names a
  Markdown heading;
- ``@folder/`` — a folder listing (a path that turns out to be a folder is listed as well);
- the keywords ``@workspace``, ``@git``, ``@selection``, ``@problems``, ``@editors``;
- ``@chat:FILE`` (or ``@chat:"FILE"``) — another transcript's summary.

Not mentions: an ``@`` preceded by a letter, digit or most other punctuation (``me@example.com``,
``create-next-app@latest``, ``https://x.org/@user``), anything inside a Markdown code span or
fenced code block, anything inside a URL, and a lone ``@``. A bare word with no ``/`` or ``.``
(``@alice``, ``@dataclass``) is only a mention when it names something that exists (the caller
passes ``exists``). Trailing sentence punctuation is dropped (``see @a.py.``), as is an
unbalanced closing bracket (``(see @a.py)``).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from lookout_cli.core.dataclass import dataclass

KEYWORDS = ("workspace", "git", "selection", "problems", "editors")

PATH = "path"
CHAT = "chat"
KINDS = (PATH, CHAT, *KEYWORDS)

# Characters that may come right before an "@" that starts a mention.
_BEFORE = set("([{\"'*,;>")  # ">": <command-args>@file</command-args> in slash commands
# Characters a bare (unquoted) path may contain.
_TOKEN = re.compile(r"""[^\s`"'<>|*]+""")
_TRAILING_PUNCT = ".,;:!?"
_CLOSERS = {")": "(", "]": "[", "}": "{"}

_RANGE = re.compile(r"^(?P<path>.*?)(?:#L?(?P<a>\d+)(?:-L?(?P<b>\d+))?|:(?P<c>\d+)(?:-(?P<d>\d+))?)$")
_FRAGMENT = re.compile(r"^(?P<path>[^#]+)#(?P<h>[^#\s]+)$")
_SUFFIX = re.compile(r"(?:#L?(?P<a>\d+)(?:-L?(?P<b>\d+))?|:(?P<c>\d+)(?:-(?P<d>\d+))?|#(?P<h>[A-Za-z][^\s#]*))")

_FENCE = re.compile(r"(?ms)^[ \t]{0,3}(?P<f>`{3,}|~{3,})[^\n]*\n.*?(?:^[ \t]{0,3}(?P=f)[`~]*[ \t]*$|\Z)")
_CODE_SPAN = re.compile(r"(?s)(?<!`)(?P<t>`+)(?!`).+?(?<!`)(?P=t)(?!`)")
_URL = re.compile(r"""(?i)\b(?:[a-z][a-z0-9+.\-]*://|www\.|mailto:)[^\s<>"'`]+""")


@dataclass(frozen=True, slots=True)
class Mention:
    """One mention as written."""

    kind: str  # one of KINDS
    raw: str  # the mention exactly as written, e.g. '@"My Doc.md"#L3-5'
    path: str | None = None  # the path as written (unquoted, without its range or fragment)
    start: int | None = None  # first line of a range (1-based)
    end: int | None = None  # last line of a range (inclusive)
    heading: str | None = None  # a non-numeric #fragment: a Markdown heading
    folder: bool = False  # written with a trailing slash
    quoted: bool = False
    offset: int = 0  # where the "@" is in the text

    @property
    def key(self) -> tuple:
        """Two mentions with the same key read the same thing (de-duplication)."""
        path = self.path.rstrip("/") if self.path else self.path
        if path and path.startswith("./"):
            path = path[2:]
        return (self.kind, path, self.start, self.end, self.heading)

    @property
    def has_range(self) -> bool:
        return self.start is not None

    @property
    def bare(self) -> bool:
        """A plain word like ``@alice``: a mention only if it names something that exists."""
        if self.kind != PATH or self.quoted or self.has_range or self.heading or self.folder:
            return False
        return "/" not in self.path and "." not in self.path and "~" not in self.path

    def describe_range(self) -> str | None:
        if self.start is None:
            return None
        return f"{self.start}" if self.end in (None, self.start) else f"{self.start}-{self.end}"


@dataclass(frozen=True, slots=True)
class Target:
    """A path with an optional range or heading, as given to ``--selection``."""

    path: str
    start: int | None = None
    end: int | None = None
    heading: str | None = None


def parse_target(text: str) -> Target:
    """Split ``FILE#L10-20`` / ``FILE:10-20`` / ``FILE#heading`` / ``FILE``."""
    m = _RANGE.match(text)
    if m and m.group("path"):
        a, b = (m.group("a"), m.group("b")) if m.group("a") else (m.group("c"), m.group("d"))
        start = int(a)
        return Target(m.group("path"), start, int(b) if b else start)
    m = _FRAGMENT.match(text)
    if m:
        return Target(m.group("path"), heading=m.group("h"))
    return Target(text)


def masked_spans(text: str) -> list[tuple[int, int]]:
    """Spans where an ``@`` is never a mention: fenced code, code spans, URLs."""
    spans: list[tuple[int, int]] = []
    for rx in (_FENCE, _CODE_SPAN, _URL):
        for m in rx.finditer(text):
            if not _inside(m.start(), spans):
                spans.append((m.start(), m.end()))
    spans.sort()
    return spans


def _inside(pos: int, spans: list[tuple[int, int]]) -> bool:
    return any(a <= pos < b for a, b in spans)


def _strip_trailing(token: str) -> str:
    """Drop sentence punctuation and unbalanced closing brackets from the end of a token."""
    while token:
        last = token[-1]
        if last in _TRAILING_PUNCT:
            token = token[:-1]
        elif last in _CLOSERS and token.count(last) > token.count(_CLOSERS[last]):
            token = token[:-1]
        else:
            break
    return token


def _mention_from_token(token: str, offset: int) -> Mention | None:
    token = _strip_trailing(token)  # "@a.py:10-40." and "@a.py:" end a sentence
    if not token:
        return None
    raw = "@" + token
    if token in KEYWORDS:
        return Mention(kind=token, raw=raw, offset=offset)
    if token.startswith("chat:"):
        path = token[5:]
        return Mention(kind=CHAT, raw=raw, path=path, offset=offset) if path else None
    target = parse_target(token)
    path = target.path
    folder = path.endswith("/") and path not in ("/",)
    return Mention(
        kind=PATH,
        raw=raw,
        path=path,
        start=target.start,
        end=target.end,
        heading=target.heading,
        folder=folder,
        offset=offset,
    )


def _quoted(text: str, i: int) -> tuple[str, int] | None:
    """A quoted path starting at ``text[i]`` (the quote): (path, index after the quote)."""
    quote = text[i]
    j = text.find(quote, i + 1)
    if j <= i + 1:
        return None
    inner = text[i + 1 : j]
    if "\n" in inner:
        return None
    return inner, j + 1


def find_mentions(text: str, exists: Callable[[str], bool] | None = None) -> list[Mention]:
    """All mentions in ``text``, in order, de-duplicated (the first spelling wins).

    ``exists(path)`` decides whether a bare word (``@alice``) names something; without it bare
    words are kept.
    """
    spans = masked_spans(text)
    found: list[Mention] = []
    seen: set[tuple] = set()
    i = text.find("@")
    while i != -1:
        mention, nxt = _mention_at(text, i, spans)
        if mention is not None and not (mention.bare and exists is not None and not exists(mention.path)):
            if mention.key not in seen:
                seen.add(mention.key)
                found.append(mention)
        i = text.find("@", max(nxt, i + 1))
    return found


def _mention_at(text: str, i: int, spans: list[tuple[int, int]]) -> tuple[Mention | None, int]:
    if i > 0 and not (text[i - 1].isspace() or text[i - 1] in _BEFORE):
        return None, i + 1
    if _inside(i, spans):
        return None, i + 1
    rest = i + 1
    if rest >= len(text):
        return None, rest
    # @chat:"file with spaces.jsonl"
    if text.startswith("chat:", rest) and rest + 5 < len(text) and text[rest + 5] in "\"'":
        q = _quoted(text, rest + 5)
        if q:
            path, after = q
            return Mention(kind=CHAT, raw=text[i:after], path=path, quoted=True, offset=i), after
        return None, rest
    if text[rest] in "\"'":
        q = _quoted(text, rest)
        if q is None:
            return None, rest
        path, after = q
        start = end = heading = None
        m = _SUFFIX.match(text, after)
        if m:
            if m.group("h"):
                heading = _strip_trailing(m.group("h"))
            else:
                a, b = (m.group("a"), m.group("b")) if m.group("a") else (m.group("c"), m.group("d"))
                start = int(a)
                end = int(b) if b else start
            after = m.end() if heading is None else after + 1 + len(heading)
        return (
            Mention(
                kind=PATH,
                raw=text[i:after],
                path=path,
                start=start,
                end=end,
                heading=heading,
                folder=path.endswith("/"),
                quoted=True,
                offset=i,
            ),
            after,
        )
    m = _TOKEN.match(text, rest)
    if not m:
        return None, rest
    return _mention_from_token(m.group(0), i), m.end()
