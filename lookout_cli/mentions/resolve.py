"""Resolve the mentions of one message into attachments, within limits, with reasons.

``Resolver.resolve_message(mentions)`` returns one ``Outcome`` per mention, in mention order:
*attached* (its text or image goes into the message), *named* (named by path only: over the
character budget, or an image for a model that reads none) or *refused* (with the reason).
``build_parts(outcomes)`` turns them into the neutral parts an adapter writes
(``{"type": "text", …}`` / ``{"type": "image", …}``), starting with a ``<lookout-mentions>``
header that tells the agent what was attached, named or refused — and marks the prompt as
expanded, so a second run adds nothing.

Limits (SPEC §4): 20 mentions a message; 60,000 characters of attached text together, in
mention order (a file past that, and every file after it, is named by path only; generated
text such as ``@git`` is cut to what is left); 20 images and 20 files a message; 10 MB an
attachment. Refused: paths outside the workspace root (``..``, absolute paths, symlinks that
leave it), ignored files (with the ignore file, line and pattern), common secret files (unless
``allow_secret``), binary files, special files. ``@chat:`` names a transcript under the root by
the same rules, and every secret the gate (``core/secrets.py``) finds in what it attaches is masked.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lookout_cli.core.dataclass import dataclass, field
from lookout_cli.mentions import parse as mp
from lookout_cli.mentions.ignore import IGNORE_FILES, GitError, IgnoreMatch, IgnoreRules, git

if TYPE_CHECKING:
    from lookout_cli.core.secrets import Finding

MARKER = "<lookout-mentions"  # starts the header part: a prompt that has it is expanded
ATTACHMENT_TAG = "lookout-attachment"

MAX_MENTIONS = 20
MAX_CHARS = 60_000
MAX_IMAGES = 20
MAX_FILES = 20
MAX_BYTES = 10 * 1024 * 1024  # 10 MB (MiB): one attachment's source size
WORKSPACE_ENTRIES = 400
FOLDER_ENTRIES = 400
WALK_CAP = 20_000  # entries counted for "N more" before giving up counting
SNIFF_BYTES = 8192
CHAT_PROMPT_CHARS = 300
CHAT_DIGEST_PROMPTS = 40
CHAT_DIGEST_CHARS = 8_000
MIN_CUT = 200  # generated text cut shorter than this is named only instead

ATTACHED = "attached"
NAMED = "named"
REFUSED = "refused"

# What the outcome is (Outcome.kind)
FILE = "file"
IMAGE = "image"
FOLDER = "folder"
WORKSPACE = "workspace"
GIT = "git"
SELECTION = "selection"
PROBLEMS = "problems"
EDITORS = "editors"
CHAT = "chat"
FILE_KINDS = (FILE, SELECTION)

MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdown", ".mkd", ".mdx", ".rst", ".txt")
_PRIVATE_KEY = re.compile(rb"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
_FENCE_LINE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
_PROBLEM_LINE = re.compile(r"^(?P<path>[^:\n]+?):(?P<line>\d+)(?::(?P<col>\d+))?:\s*(?P<msg>\S.*)$")

# --- secret files -----------------------------------------------------------------------------

ENV_TEMPLATE_SUFFIXES = (".example", ".sample", ".template", ".dist", ".defaults")
KEY_SUFFIXES = (".pem", ".key", ".p12", ".pfx", ".p8", ".ppk", ".jks", ".keystore", ".kdbx", ".gpg")
CREDENTIAL_NAMES = {
    "credentials", "credentials.json", "credentials.yml", "credentials.yaml", "credentials.toml",
    "credentials.xml", "credentials.ini", ".git-credentials", ".netrc", "_netrc", ".pgpass", ".npmrc",
    ".pypirc", ".htpasswd", ".dockercfg", "application_default_credentials.json", "service-account.json",
}
_SSH_KEY = re.compile(r"^id_(rsa|dsa|ecdsa|ed25519)(_sk)?$")
_SECRETS_FILE = re.compile(r"^(secrets?|.*[-_.]secrets?)\.(ya?ml|json|toml|ini|env|txt)$|^client_secrets?.*\.json$")
_CREDS_DATA = re.compile(r"^.*[-_.]credentials\.(json|ya?ml|toml|xml|ini)$")


def _is_env(name: str) -> bool:
    return name.startswith(".env") and not name.endswith(ENV_TEMPLATE_SUFFIXES)


SECRET_RULES: list[tuple[str, str, Callable[[str, tuple[str, ...]], bool]]] = [
    ("env-file", "an environment file (.env*)", lambda name, parts: _is_env(name)),
    ("ssh-dir", "a file under .ssh/", lambda name, parts: ".ssh" in parts),
    ("gnupg-dir", "a file under .gnupg/", lambda name, parts: ".gnupg" in parts),
    ("git-dir", "git's own files (.git/)", lambda name, parts: ".git" in parts),
    ("private-key", "a private key", lambda name, parts: bool(_SSH_KEY.match(name)) or name.endswith(KEY_SUFFIXES)),
    ("credentials", "a credentials file", lambda name, parts: name in CREDENTIAL_NAMES
        or bool(_CREDS_DATA.match(name)) or (".aws" in parts and name in ("credentials", "config"))),
    ("secrets-file", "a secrets file", lambda name, parts: bool(_SECRETS_FILE.match(name))),
]


def secret_rule(rel: str) -> tuple[str, str] | None:
    """(rule id, description) when a path looks like a secret file by its name."""
    parts = tuple(p for p in rel.replace("\\", "/").split("/") if p)
    if not parts:
        return None
    name = parts[-1]
    for rule_id, title, test in SECRET_RULES:
        if test(name, parts):
            return rule_id, title
    return None


def secret_allowed(rel: str, rule_id: str, patterns: tuple[str, ...]) -> bool:
    name = rel.rsplit("/", 1)[-1]
    return any(p == rule_id or fnmatch.fnmatchcase(rel, p) or fnmatch.fnmatchcase(name, p) for p in patterns)


# --- settings and outcomes --------------------------------------------------------------------

@dataclass(slots=True)
class Limits:
    max_mentions: int = MAX_MENTIONS
    max_chars: int = MAX_CHARS
    max_images: int = MAX_IMAGES
    max_files: int = MAX_FILES
    max_bytes: int = MAX_BYTES
    workspace_entries: int = WORKSPACE_ENTRIES
    folder_entries: int = FOLDER_ENTRIES


@dataclass(slots=True)
class Settings:
    root: Path
    limits: Limits = field(default_factory=Limits)
    provider: str = "anthropic"  # image limits and token formula
    max_image_side: int = 2048
    images: bool = True  # False: the model reads no images; name them by path
    many_images: bool = False  # the request carries more than 20 images (Anthropic: 2000 px)
    allow_secret: tuple[str, ...] = ()
    include_ignored: bool = False
    ignore_files: tuple[str, ...] = IGNORE_FILES
    use_git: bool | None = None  # None: ask git when the root is in a work tree
    selection: str | None = None  # FILE, FILE#L10-20, FILE:10-20
    problems: str | None = None  # a SARIF file or compiler-style "path:line:col: message" lines
    editors: str | None = None  # a file with one open editor's path per line
    cwd: Path = field(default_factory=Path.cwd)  # for the flags' relative paths
    count_tokens: Callable[[str], int] | None = None


@dataclass(slots=True)
class Outcome:
    """What became of one mention."""

    mention: mp.Mention
    status: str  # ATTACHED | NAMED | REFUSED
    kind: str  # FILE | IMAGE | FOLDER | WORKSPACE | GIT | SELECTION | PROBLEMS | EDITORS | CHAT
    reason: str | None = None  # why refused or named only
    path: str | None = None  # resolved path (relative to the root; absolute outside it)
    lines: tuple[int, int] | None = None  # the resolved line range (1-based, inclusive)
    total_lines: int | None = None
    heading: str | None = None
    sha256: str | None = None  # of the source (file bytes; generated text for the rest)
    bytes: int | None = None  # source size
    chars: int = 0  # characters attached
    tokens: int = 0  # estimated tokens attached
    text: str | None = None  # the attached text (not in the report)
    image: Any = None  # imaging.FittedImage
    truncated: bool = False
    ignore: IgnoreMatch | None = None
    rule: str | None = None  # the secret rule that refused it
    warnings: list[str] = field(default_factory=list)

    @property
    def is_file(self) -> bool:
        return self.kind in FILE_KINDS

    def describe(self) -> str:
        """What was (or would have been) attached, in a few words."""
        if self.kind in FILE_KINDS or self.kind == IMAGE:
            what = self.path or self.mention.raw
            if self.lines is not None:
                what += f" lines {self.range_text()}"
            if self.image is not None:
                what += f" (image {self.image.width}x{self.image.height})"
            return what
        name = os.path.basename(self.path) if self.path else ""
        return {
            FOLDER: f"listing of {self.path}",
            WORKSPACE: "the project tree",
            GIT: "git status, unstaged diff stat and staged diff",
            PROBLEMS: f"problems from {name}",
            EDITORS: f"open editors from {name}",
            CHAT: f"summary of chat {name}",
        }.get(self.kind, self.kind) + (" (cut short)" if self.truncated else "")

    def range_text(self) -> str | None:
        if self.lines is None:
            return None
        a, b = self.lines
        return f"{a}" if a == b else f"{a}-{b}"

    def as_dict(self) -> dict:
        out: dict[str, Any] = {
            "mention": self.mention.raw,
            "kind": self.kind,
            "status": self.status,
        }
        if self.reason:
            out["reason"] = self.reason
        if self.path is not None:
            out["path"] = self.path
        if self.lines is not None:
            out["lines"] = self.range_text()
            out["total_lines"] = self.total_lines
        if self.heading:
            out["heading"] = self.heading
        if self.sha256:
            out["sha256"] = self.sha256
        if self.bytes is not None:
            out["bytes"] = self.bytes
        if self.status == ATTACHED:
            out["chars"] = self.chars
            out["tokens"] = self.tokens
        elif self.kind in FILE_KINDS and self.status == NAMED:
            out["chars"] = self.chars
        if self.image is not None:
            im = self.image
            out["image"] = {
                "media_type": im.media_type,
                "width": im.width,
                "height": im.height,
                "bytes": im.nbytes,
                "base64_bytes": im.base64_len,
                "source_media_type": im.source_media_type,
                "source_width": im.source_width,
                "source_height": im.source_height,
                "resized": im.resized,
                "reencoded": im.reencoded,
                "notes": list(im.notes),
            }
        if self.truncated:
            out["truncated"] = True
        if self.ignore is not None:
            out["ignore"] = self.ignore.as_dict()
        if self.rule:
            out["rule"] = self.rule
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out


class Refused(Exception):
    def __init__(self, reason: str, kind: str = FILE, path: str | None = None, **extra: Any) -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind
        self.path = path
        self.extra = extra


@dataclass(slots=True)
class _Tally:
    """What one message has used so far."""

    chars: int = 0
    images: int = 0
    files: int = 0
    budget_closed: bool = False  # a file was named only: every later file is too


def _sha(data: bytes | str) -> str:
    return hashlib.sha256(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data).hexdigest()


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _fmt_bytes(n: int) -> str:
    for unit, size in (("GB", 1024**3), ("MB", 1024**2), ("KB", 1024)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def slug(text: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_~\[\]()]", "", text.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def heading_section(lines: list[str], fragment: str) -> tuple[int, int] | None:
    """The 1-based range of the Markdown section whose heading matches ``fragment``."""
    want = slug(fragment)
    in_fence = None
    found: tuple[int, int] | None = None  # (start line, level)
    for n, line in enumerate(lines, 1):
        fence = _FENCE_LINE.match(line)
        if fence:
            mark = fence.group(1)[0]
            in_fence = None if in_fence == mark else (in_fence or mark)
            continue
        if in_fence:
            continue
        m = _HEADING.match(line)
        if not m:
            continue
        level = len(m.group(1))
        if found is not None and level <= found[1]:
            return found[0], n - 1
        if found is None and (slug(m.group(2)) == want or m.group(2).strip().lower() == fragment.lower()):
            found = (n, level)
    if found is not None:
        return found[0], len(lines)
    return None


def split_lines(text: str) -> list[str]:
    """Lines without their endings; a final line ending does not start another line."""
    if not text:
        return []
    parts = text.split("\n")
    if parts[-1] == "":
        parts.pop()
    return parts


# --- the resolver -----------------------------------------------------------------------------

class Resolver:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.limits = settings.limits
        self.root = Path(os.path.abspath(settings.root))
        self.root_real = os.path.realpath(self.root)
        self._rules: IgnoreRules | None = None
        self._count = settings.count_tokens or (lambda text: (len(text) + 3) // 4)

    @property
    def rules(self) -> IgnoreRules:
        if self._rules is None:
            self._rules = IgnoreRules(self.root, files=self.settings.ignore_files, git=self.settings.use_git)
        return self._rules

    def exists(self, path: str) -> bool:
        """Whether a bare word (``@alice``) names an entry under the root."""
        return os.path.lexists(os.path.join(self.root, path))

    def find(self, text: str) -> list[mp.Mention]:
        return mp.find_mentions(text, exists=self.exists)

    # --- one message -------------------------------------------------------------------------
    def resolve_message(
        self, mentions: list[mp.Mention], *, images_present: int = 0, files_present: int = 0
    ) -> list[Outcome]:
        """Resolve a message's mentions in order, applying the per-message limits."""
        tally = _Tally(images=images_present, files=files_present)
        outcomes = []
        for n, mention in enumerate(mentions):
            if n >= self.limits.max_mentions:
                outcomes.append(
                    Outcome(
                        mention,
                        REFUSED,
                        _kind_of(mention),
                        reason=f"over the limit of {self.limits.max_mentions} mentions in one message",
                        path=mention.path,
                    )
                )
                continue
            try:
                outcome = self._resolve(mention, tally)
            except Refused as r:
                outcome = Outcome(mention, REFUSED, r.kind, reason=r.reason, path=r.path, **r.extra)
            outcomes.append(outcome)
        return outcomes

    def _resolve(self, m: mp.Mention, tally: _Tally) -> Outcome:
        kind = m.kind
        if kind == mp.PATH:
            return self._path(m, tally, m.path or "", m.start, m.end, m.heading, FILE)
        if kind == "selection":
            spec = self.settings.selection
            if not spec:
                raise Refused("no selection given (pass --selection FILE#L10-20)", SELECTION)
            t = mp.parse_target(spec)
            return self._path(m, tally, t.path, t.start, t.end, t.heading, SELECTION)
        if kind == "workspace":
            return self._text(m, tally, WORKSPACE, *self._workspace())
        if kind == "git":
            return self._text(m, tally, GIT, *self._git())
        if kind == "problems":
            return self._text(m, tally, PROBLEMS, *self._problems())
        if kind == "editors":
            return self._text(m, tally, EDITORS, *self._editors())
        if kind == mp.CHAT:
            text, rel, sha, size, masked = self._chat(m.path or "")
            return self._text(m, tally, CHAT, text, rel, sha, size, warnings=masked)
        raise Refused(f"unknown mention kind {kind}", kind)

    # --- limits for text ---------------------------------------------------------------------
    def _text(self, m: mp.Mention, tally: _Tally, kind: str, text: str, path: str | None, sha: str,
              size: int | None, cuttable: bool = True, **extra: Any) -> Outcome:
        """Attach generated text (listing, tree, git, problems, editors, chat) within the budget."""
        o = Outcome(m, ATTACHED, kind, path=path, sha256=sha, bytes=size, **extra)
        room = self.limits.max_chars - tally.chars
        if len(text) > room:
            if not cuttable or room < MIN_CUT:
                o.status = NAMED
                o.reason = f"over the {self.limits.max_chars:,}-character budget ({len(text):,} characters)"
                o.chars = len(text)
                return o
            text = _cut(text, room)
            o.truncated = True
            o.warnings.append(f"cut to the {room:,} characters left in the budget")
        o.text = text
        o.chars = len(text)
        o.tokens = self._count(text)
        tally.chars += o.chars
        return o

    # --- paths -------------------------------------------------------------------------------
    def locate(self, written: str, kind: str = FILE) -> tuple[str, str, str]:
        """(full path as written, real path, path relative to the root) or Refused."""
        if written.strip("/") in ("", ".") or written in ("./",):
            raise Refused("the workspace root itself: use @workspace for its tree", kind, written)
        expanded = os.path.expanduser(written)
        absolute = os.path.isabs(expanded)
        full = os.path.normpath(expanded if absolute else os.path.join(self.root, expanded))
        if not _within(full, str(self.root)):
            how = "an absolute path" if absolute else ("through .." if ".." in Path(expanded).parts else "a path")
            raise Refused(f"outside the workspace root ({how} leaving {self.root})", kind, written)
        if not os.path.lexists(full):
            raise Refused("not found", kind, os.path.relpath(full, self.root))
        real = os.path.realpath(full)
        if not _within(real, self.root_real):
            raise Refused(f"a symlink leads outside the workspace root (to {real})", kind,
                          os.path.relpath(full, self.root))
        rel = Path(os.path.relpath(real, self.root_real)).as_posix()
        return full, real, rel

    def _gate(self, written_rel: str, rel: str, is_dir: bool, kind: str) -> None:
        """Secret and ignore refusals, for the path as written and the path it resolves to."""
        for p in dict.fromkeys([written_rel, rel]):
            found = secret_rule(p)
            if found and not secret_allowed(p, found[0], self.settings.allow_secret):
                raise Refused(
                    f"{found[1]}: refused as a likely secret (allow it with --allow-secret '{p.rsplit('/', 1)[-1]}')",
                    kind, rel, rule=found[0],
                )
        if self.settings.include_ignored:
            return
        verdicts = self.rules.check_many(list(dict.fromkeys([written_rel, rel])), is_dir)
        for p, match in verdicts.items():
            if match is not None:
                raise Refused(f"ignored by {match}", kind, rel, ignore=match)

    def _admit(self, written: str, kind: str) -> tuple[str, str, os.stat_result]:
        """(real path, path relative to the root, its stat) of a mentioned path that stays under
        the root and passes the secret and ignore gates; else Refused."""
        full, real, rel = self.locate(written, kind)
        try:
            st = os.stat(real)
        except OSError as exc:
            raise Refused(f"cannot read: {exc.strerror}", kind, rel) from None
        is_dir = stat.S_ISDIR(st.st_mode)
        written_rel = Path(os.path.relpath(full, self.root)).as_posix()
        self._gate(written_rel, rel, is_dir, FOLDER if is_dir and kind in FILE_KINDS else kind)
        return real, rel, st

    def _path(self, m: mp.Mention, tally: _Tally, written: str, start: int | None, end: int | None,
              heading: str | None, kind: str) -> Outcome:
        real, rel, st = self._admit(written, kind)
        is_dir = stat.S_ISDIR(st.st_mode)
        if is_dir:
            if start is not None or heading:
                raise Refused("a folder has no lines or headings", FOLDER, rel)
            text, size = self._folder(rel)
            return self._text(m, tally, FOLDER, text, rel + "/", _sha(text), None)
        if m.folder:
            raise Refused("not a folder", kind, rel)
        if not stat.S_ISREG(st.st_mode):
            raise Refused("not a regular file", kind, rel)
        if st.st_size > self.limits.max_bytes:
            raise Refused(
                f"over the {_fmt_bytes(self.limits.max_bytes)} limit for one attachment ({st.st_size:,} bytes)",
                kind, rel, bytes=st.st_size,
            )
        try:
            with open(real, "rb") as handle:
                data = handle.read(self.limits.max_bytes + 1)
        except OSError as exc:
            raise Refused(f"cannot read: {exc.strerror}", kind, rel) from None
        if len(data) > self.limits.max_bytes:
            raise Refused(f"over the {_fmt_bytes(self.limits.max_bytes)} limit for one attachment", kind, rel)
        from lookout_cli.images.fit import sniff_media_type

        if sniff_media_type(data):
            return self._image(m, tally, data, rel, start, heading)
        return self._file(m, tally, data, rel, start, end, heading, kind)

    def _file(self, m: mp.Mention, tally: _Tally, data: bytes, rel: str, start: int | None, end: int | None,
              heading: str | None, kind: str) -> Outcome:
        sha = _sha(data)
        if b"\0" in data[:SNIFF_BYTES]:
            raise Refused("binary file", kind, rel, bytes=len(data), sha256=sha)
        if _PRIVATE_KEY.search(data):
            found = ("private-key", "holds a private key")
            if not secret_allowed(rel, found[0], self.settings.allow_secret):
                raise Refused(
                    f"{found[1]}: refused as a likely secret (allow it with --allow-secret '{rel.rsplit('/', 1)[-1]}')",
                    kind, rel, rule=found[0], bytes=len(data), sha256=sha,
                )
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise Refused("binary file (not UTF-8 text)", kind, rel, bytes=len(data), sha256=sha) from None
        text = text.removeprefix("\ufeff")
        lines = split_lines(text)
        total = len(lines)
        o = Outcome(m, ATTACHED, kind, path=rel, sha256=sha, bytes=len(data), total_lines=total)
        if heading:
            if not rel.lower().endswith(MARKDOWN_SUFFIXES):
                raise Refused(f"#{heading} is not a line range, and only Markdown files have headings", kind, rel,
                              bytes=len(data), sha256=sha)
            section = heading_section(lines, heading)
            if section is None:
                raise Refused(f"no heading matching #{heading}", kind, rel, bytes=len(data), sha256=sha)
            start, end = section
            o.heading = heading
        if start is not None:
            end = start if end is None else end
            if start < 1 or end < start:
                raise Refused(f"bad line range {start}-{end}", kind, rel, bytes=len(data), sha256=sha)
            if start > total:
                raise Refused(f"line {start} is past the end (the file has {total} lines)", kind, rel,
                              bytes=len(data), sha256=sha, total_lines=total)
            if end > total:
                o.warnings.append(f"lines {start}-{end} asked for; the file ends at line {total}")
                end = total
            o.lines = (start, end)
            body = "\n".join(lines[start - 1 : end])
            if end < total or text.endswith("\n"):
                body += "\n"
        else:
            body = text
        o.chars = len(body)
        # The files limit and the character budget, in mention order.
        if tally.files >= self.limits.max_files:
            raise Refused(f"over the limit of {self.limits.max_files} files in one message", kind, rel,
                          bytes=len(data), sha256=sha)
        tally.files += 1
        if tally.budget_closed or tally.chars + o.chars > self.limits.max_chars:
            tally.budget_closed = True
            o.status = NAMED
            o.reason = (
                f"over the {self.limits.max_chars:,}-character budget for one message "
                f"({tally.chars:,} used, this needs {o.chars:,})"
            )
            return o
        o.text = body
        o.tokens = self._count(body)
        tally.chars += o.chars
        return o

    def _image(self, m: mp.Mention, tally: _Tally, data: bytes, rel: str, start: int | None,
               heading: str | None) -> Outcome:
        from lookout_cli.images.fit import ImageError, fit_image, probe

        sha = _sha(data)
        o = Outcome(m, ATTACHED, IMAGE, path=rel, sha256=sha, bytes=len(data))
        if start is not None or heading:
            o.warnings.append("an image has no lines or headings: the whole image is attached")
        if tally.images >= self.limits.max_images:
            raise Refused(f"over the limit of {self.limits.max_images} images in one message", IMAGE, rel,
                          bytes=len(data), sha256=sha)
        if not self.settings.images:
            o.status = NAMED
            o.reason = "the model reads no images (--no-images)"
            head = probe(data)
            if head:
                o.warnings.append(f"{head[0]} {head[1]}x{head[2]}")
            return o
        try:
            fitted = fit_image(
                data,
                provider=self.settings.provider,
                max_side=self.settings.max_image_side,
                many_images=self.settings.many_images,
            )
        except ImageError as exc:
            raise Refused(str(exc), IMAGE, rel, bytes=len(data), sha256=sha) from None
        tally.images += 1
        o.image = fitted
        o.tokens = image_tokens(self.settings.provider, fitted.width, fitted.height)
        if fitted.resized:
            o.warnings.append(
                f"scaled down from {fitted.source_width}x{fitted.source_height} to {fitted.width}x{fitted.height}"
            )
        o.warnings.extend(fitted.notes)
        return o

    # --- generated text ----------------------------------------------------------------------
    def _folder(self, rel: str) -> tuple[str, int]:
        kept, dropped = self.rules.listdir(rel) if not self.settings.include_ignored else self._listdir_all(rel)
        limit = self.limits.folder_entries
        lines = [f"{rel}/ ({len(kept)} {'entry' if len(kept) == 1 else 'entries'})"]
        for e in kept[:limit]:
            name = e.name + ("/" if e.is_dir else "")
            kind = "folder" if e.is_dir else f"{e.size:,} bytes"
            if e.is_link:
                kind += ", symlink"
            lines.append(f"  {name}  ({kind})")
        if len(kept) > limit:
            lines.append(f"  … {len(kept) - limit:,} more entries not shown")
        if dropped:
            lines.append(f"  ({len(dropped)} ignored entries not shown)")
        text = "\n".join(lines) + "\n"
        return text, len(kept)

    def _listdir_all(self, rel: str):
        from lookout_cli.mentions.ignore import ALWAYS_SKIPPED, _entry

        folder = self.root / rel if rel else self.root
        with os.scandir(folder) as it:
            kept = [_entry(de, rel) for de in it if de.name not in ALWAYS_SKIPPED]
        kept.sort(key=lambda e: (not e.is_dir, e.name.lower(), e.name))
        return kept, []

    def _workspace(self) -> tuple:
        limit = self.limits.workspace_entries
        shown = []
        total = 0
        capped = False
        for entry in self.rules.walk("", limit=WALK_CAP):
            total += 1
            if len(shown) < limit:
                shown.append(entry)
        if total >= WALK_CAP:
            capped = True
        shown.sort(key=lambda e: e.path.split("/"))
        name = self.root.name or str(self.root)
        lines = [f"{name}/"]
        for e in shown:
            lines.append("  " * (e.depth + 1) + e.name + ("/" if e.is_dir else ""))
        if total > len(shown):
            more = f"more than {total - len(shown):,}" if capped else f"{total - len(shown):,}"
            lines.append(f"… {more} more entries not shown (the tree stops at {limit} entries)")
        text = "\n".join(lines) + "\n"
        return text, ".", _sha(text), None

    def _git(self) -> tuple:
        if not self.rules.in_git:
            raise Refused("not a git repository", GIT)
        sections = []
        for title, args in (
            ("git status --short --branch", ["status", "--short", "--branch"]),
            ("git diff --stat", ["diff", "--stat"]),
            ("git diff --cached", ["diff", "--cached"]),
        ):
            try:
                out = git(args, cwd=self.root).decode("utf-8", "replace")
            except (GitError, OSError) as exc:
                out = f"(failed: {exc})\n"
            sections.append(f"$ {title}\n{out if out.strip() else '(nothing)'}".rstrip("\n") + "\n")
        text = "\n".join(sections)
        return text, ".", _sha(text), None

    def _flag_file(self, value: str, what: str, flag: str, kind: str) -> tuple[Path, bytes]:
        path = Path(os.path.expanduser(value))
        if not path.is_absolute():
            path = self.settings.cwd / path
        try:
            size = path.stat().st_size
            if size > self.limits.max_bytes:
                raise Refused(f"the {what} file is over {_fmt_bytes(self.limits.max_bytes)}", kind, str(path))
            data = path.read_bytes()
        except OSError as exc:
            raise Refused(f"cannot read the {what} file given by {flag}: {exc.strerror}", kind, str(path)) from None
        return path, data

    def _problems(self) -> tuple:
        if not self.settings.problems:
            raise Refused("no problems given (pass --problems FILE: SARIF or path:line:col: message lines)", PROBLEMS)
        path, data = self._flag_file(self.settings.problems, "problems", "--problems", PROBLEMS)
        text = data.decode("utf-8", "replace")
        problems = parse_problems(text, self.root)
        if problems is None:
            raise Refused("the problems file is neither SARIF nor path:line:col: message lines", PROBLEMS, str(path))
        counts: dict[str, int] = {}
        for p in problems:
            counts[p["level"]] = counts.get(p["level"], 0) + 1
        summary = ", ".join(f"{n} {lvl}{'s' if n != 1 else ''}" for lvl, n in counts.items()) or "none"
        lines = [f"Problems ({len(problems)}: {summary}) from {path.name}:"]
        for p in problems:
            where = p["path"] + (f":{p['line']}" if p["line"] else "") + (f":{p['col']}" if p["col"] else "")
            rule = f" [{p['rule']}]" if p.get("rule") else ""
            lines.append(f"{where}: {p['level']}: {p['message']}{rule}")
        out = "\n".join(lines) + "\n"
        return out, str(path), _sha(data), len(data)

    def _editors(self) -> tuple:
        if not self.settings.editors:
            raise Refused("no open editors given (pass --editors FILE, one path per line)", EDITORS)
        path, data = self._flag_file(self.settings.editors, "editors", "--editors", EDITORS)
        names = [ln.strip() for ln in data.decode("utf-8", "replace").splitlines()]
        names = [n for n in names if n and not n.startswith("#")]
        lines = [f"Open editors ({len(names)}):"] + [f"- {n}" for n in names]
        out = "\n".join(lines) + "\n"
        return out, str(path), _sha(data), len(data)

    def _chat(self, written: str) -> tuple[str, str, str, int, list[str]]:
        """Another chat under the root, by the rules of any file mention: (text, path, sha256,
        size, notes on the secrets masked)."""
        if not written:
            raise Refused("no chat file named", CHAT)
        real, rel, st = self._admit(written, CHAT)
        if not stat.S_ISREG(st.st_mode):
            raise Refused("not a regular file", CHAT, rel)
        text, sha, size, found = chat_summary(Path(real))
        masked = []
        if found:
            kinds = ", ".join(dict.fromkeys(f"{f.title} (rule {f.rule})" for f in found))
            masked.append(f"masked {len(found)} secret{'s' if len(found) != 1 else ''} from the chat: {kinds}")
        return text, rel, sha, size, masked


def _cut(text: str, room: int) -> str:
    """Keep the beginning of ``text`` within ``room`` characters, on a line boundary, with a note."""
    lines = text.split("\n")
    note_room = 80
    kept: list[str] = []
    used = 0
    for line in lines:
        if used + len(line) + 1 > room - note_room:
            break
        kept.append(line)
        used += len(line) + 1
    rest = len(lines) - len(kept)
    note = f"… {rest:,} more lines not shown (over the character budget)\n"
    out = "\n".join(kept) + "\n" + note
    return out[:room]


def _kind_of(m: mp.Mention) -> str:
    return {
        mp.PATH: FOLDER if m.folder else FILE,
        mp.CHAT: CHAT,
    }.get(m.kind, m.kind)


def image_tokens(provider: str, width: int, height: int) -> int:
    """Tokens an image costs on ``provider``, by the provider's own formula (lookout_cli.images.costs)."""
    from lookout_cli.images.costs import image_tokens as tokens_for

    return int(tokens_for(provider, width, height))


# --- problems -----------------------------------------------------------------------------

def parse_problems(text: str, root: Path | None = None) -> list[dict] | None:
    """Problems from SARIF JSON or ``path:line[:col]: message`` lines; None when it is neither."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        import json

        try:
            doc = json.loads(text)
        except ValueError:
            return None
        if not isinstance(doc, dict) or not isinstance(doc.get("runs"), list):
            return None
        return _sarif(doc, root)
    problems = []
    for line in text.splitlines():
        m = _PROBLEM_LINE.match(line.strip())
        if not m:
            continue
        msg = m.group("msg")
        level = "problem"
        lm = re.match(r"(?i)(error|warning|note|info|hint)\b[:\s]*", msg)
        if lm:
            level = lm.group(1).lower()
            msg = msg[lm.end():]
        problems.append({
            "path": m.group("path"), "line": int(m.group("line")),
            "col": int(m.group("col")) if m.group("col") else None,
            "level": level, "message": msg.strip(), "rule": None,
        })
    if not problems and text.strip():
        return None
    return problems


def _sarif(doc: dict, root: Path | None) -> list[dict]:
    out = []
    for run in doc.get("runs") or []:
        if not isinstance(run, dict):
            continue
        for res in run.get("results") or []:
            if not isinstance(res, dict):
                continue
            msg = res.get("message") or {}
            text = msg.get("text") or msg.get("markdown") or res.get("ruleId") or ""
            path, line, col = "?", None, None
            locs = res.get("locations") or []
            if locs and isinstance(locs[0], dict):
                phys = locs[0].get("physicalLocation") or {}
                uri = (phys.get("artifactLocation") or {}).get("uri") or "?"
                uri = uri.removeprefix("file://")
                if root is not None and os.path.isabs(uri) and _within(uri, str(root)):
                    uri = os.path.relpath(uri, root)
                path = uri
                region = phys.get("region") or {}
                line, col = region.get("startLine"), region.get("startColumn")
            out.append({
                "path": path, "line": line, "col": col, "level": res.get("level") or "warning",
                "message": " ".join(str(text).split()), "rule": res.get("ruleId"),
            })
    return out


# --- chats --------------------------------------------------------------------------------

def chat_summary(path: Path) -> tuple[str, str, int, list[Finding]]:
    """(text, sha256 of the file, size, secrets masked): the transcript's latest compaction
    summary, else a short digest of its prompts. Another chat's words are the user's own, secrets
    included, so everything taken from it goes through the secret gate and each secret found is
    replaced by its masked preview."""
    # Imported here: its rule table takes a while to compile, and few runs mention a chat.
    from lookout_cli.core import secrets
    from lookout_cli.core.jsonl import read_records
    from lookout_cli.formats import Transcript, detect
    from lookout_cli.formats.view import SUMMARY

    digest = hashlib.sha256()
    size = 0
    try:
        with open(path, "rb") as handle:
            records = list(read_records(handle))
        for r in records:
            digest.update(r.raw or b"")
            size += len(r.raw or b"")
        adapter = detect(records)
        if adapter is None:
            raise Refused("not a transcript lookout can read", CHAT, str(path))
        view = adapter.view(Transcript(records, adapter, str(path)))
    except Refused:
        raise
    except Exception as exc:  # any reader failure: refuse, naming it
        raise Refused(f"cannot read the chat: {exc}", CHAT, str(path)) from None
    summaries = [i for i in view.items if i.kind == SUMMARY and i.text.strip()]
    name = path.name
    if summaries:
        summary, found = secrets.redact(summaries[-1].text.strip())
        text = f"Summary of chat {name} ({view.format}; its latest compaction summary):\n\n{summary}\n"
        return text, digest.hexdigest(), size, found
    prompts = [i.text for i in view.items if i.prompt and i.text.strip()]
    lines = [f"Digest of chat {name} ({view.format}; no compaction summary recorded): {len(prompts)} prompts."]
    picked: list[tuple[int, str]] = list(enumerate(prompts, 1))
    if len(picked) > CHAT_DIGEST_PROMPTS:
        head = CHAT_DIGEST_PROMPTS // 4
        picked = picked[:head] + [(0, "")] + picked[-(CHAT_DIGEST_PROMPTS - head):]
    found: list[Finding] = []
    for n, p in picked:
        if n == 0:
            lines.append(f"… {len(prompts) - CHAT_DIGEST_PROMPTS:,} prompts not shown …")
            continue
        # Masked whole before it is cut short, so that a cut never leaves half a secret unseen.
        p, in_prompt = secrets.redact(p)
        found += in_prompt
        p = " ".join(p.split())
        if len(p) > CHAT_PROMPT_CHARS:
            p = p[: CHAT_PROMPT_CHARS - 1] + "…"
        lines.append(f"{n}. {p}")
    text = "\n".join(lines) + "\n"
    if len(text) > CHAT_DIGEST_CHARS:
        text = text[: CHAT_DIGEST_CHARS - 2] + "…\n"
    return text, digest.hexdigest(), size, found


# --- parts --------------------------------------------------------------------------------

def _attr(value: Any) -> str:
    return str(value).replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")


def _tag(o: Outcome, close: bool) -> str:
    attrs: list[tuple[str, Any]] = [("mention", o.mention.raw), ("kind", o.kind)]
    if o.path is not None:
        attrs.append(("path", o.path))
    if o.lines is not None:
        attrs.append(("lines", o.range_text()))
        attrs.append(("of", o.total_lines))
    if o.heading:
        attrs.append(("heading", o.heading))
    if o.image is not None:
        im = o.image
        attrs += [("media-type", im.media_type), ("size", f"{im.width}x{im.height}")]
        if im.resized:
            attrs.append(("source-size", f"{im.source_width}x{im.source_height}"))
    if o.sha256:
        attrs.append(("sha256", o.sha256))
    if o.truncated:
        attrs.append(("truncated", "true"))
    inner = " ".join(f'{k}="{_attr(v)}"' for k, v in attrs)
    return f"<{ATTACHMENT_TAG} {inner}{'/' if close else ''}>"


def header_text(outcomes: list[Outcome]) -> str:
    """The first part: what was attached, named only and refused, for the agent to read."""
    attached = [o for o in outcomes if o.status == ATTACHED]
    named = [o for o in outcomes if o.status == NAMED]
    refused = [o for o in outcomes if o.status == REFUSED]
    lines = ['<lookout-mentions v="1">']
    if attached:
        lines.append("Attached below (read when the message was sent):")
        for o in attached:
            lines.append(f"- {o.mention.raw}: {o.describe()}")
    if named:
        lines.append("Named only (not attached; read them with your tools if you need them):")
        for o in named:
            lines.append(f"- {o.mention.raw}: {o.describe()} — {o.reason}")
    if refused:
        lines.append("Not attached:")
        for o in refused:
            lines.append(f"- {o.mention.raw}: {o.reason}")
    lines.append("</lookout-mentions>")
    return "\n".join(lines)


def build_parts(outcomes: list[Outcome]) -> list[dict]:
    """The neutral parts for ``adapter.add_parts``: the header, then each attachment."""
    if not outcomes:
        return []
    parts: list[dict] = [{"type": "text", "text": header_text(outcomes)}]
    for o in outcomes:
        if o.status != ATTACHED:
            continue
        if o.image is not None:
            parts.append({"type": "text", "text": _tag(o, close=True)})
            parts.append({"type": "image", "media_type": o.image.media_type, "data": o.image.b64()})
            continue
        body = o.text or ""
        if body and not body.endswith("\n"):
            body += "\n"
        parts.append({"type": "text", "text": f"{_tag(o, close=False)}\n{body}</{ATTACHMENT_TAG}>"})
    return parts


def is_expanded_text(text: str) -> bool:
    """Whether a text holds lookout's mention header (the prompt was expanded already)."""
    return MARKER in text
