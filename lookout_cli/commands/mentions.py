"""``lookout mentions``: expand @-mentions in user prompts into attachments."""

from __future__ import annotations

import os
from pathlib import Path

import click

from lookout_cli.flags import filter_options
from lookout_cli.formats.view import IMAGE, NOTICE, TEXT, Item, View
from lookout_cli.images.fit import DEFAULT_MAX_SIDE, PROVIDERS
from lookout_cli.mentions import resolve as mr
from lookout_cli.options import Run

# Which provider's image rules apply when --provider is not given.
FORMAT_PROVIDER = {"claude-code": "anthropic", "anthropic": "anthropic", "codex": "openai", "openai": "openai",
                   "gemini-cli": "gemini"}
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp")
MANY_IMAGES = 20  # Anthropic: a request with more than 20 images caps each side at 2000 px

EPILOG = """\b
Examples:
  lookout mentions chat.jsonl > next.jsonl
  lookout mentions < chat.jsonl | lookout clear-images | lookout measure > next.jsonl
  lookout mentions --root ~/src/app --selection src/app.ts#L10-40 -i session.jsonl
  lookout mentions --problems ruff.sarif --allow-secret .env.test --report r.json chat.jsonl
  lookout mentions --dry-run chat.jsonl > /dev/null     # what would be attached
  lookout mentions --check chat.jsonl || echo "mentions to expand"
"""


@click.command(epilog=EPILOG)
@filter_options(side_effects=True)
@click.option("--root", type=click.Path(file_okay=False, exists=True),
              help="Workspace root mentions resolve under (default: the transcript's recorded cwd "
                   "if it exists, else the current folder).")
@click.option("--allow-secret", "allow_secret", multiple=True, metavar="PATTERN",
              help="Attach secret-looking files matching this glob (path or name) or rule id. Repeatable.")
@click.option("--include-ignored", is_flag=True, help="Attach files the ignore files exclude.")
@click.option("--selection", metavar="FILE#L10-20", help="What @selection attaches (a path under the root).")
@click.option("--problems", type=click.Path(dir_okay=False), help="What @problems attaches: SARIF or path:line:col: lines.")
@click.option("--editors", type=click.Path(dir_okay=False), help="What @editors lists: a file of paths, one a line.")
@click.option("--provider", type=click.Choice(sorted(PROVIDERS)),
              help="Whose image limits and token formula apply (default: from the format).")
@click.option("--max-image-side", type=click.IntRange(16, 8000), default=None,
              help=f"Scale images down to this long side  [default: {DEFAULT_MAX_SIDE}].")
@click.option("--no-images", is_flag=True, help="The model reads no images: name them by path instead.")
@click.option("--all", "scope", flag_value="all",
              help="Expand every prompt not expanded yet, answered or not (default: only prompts the "
                   "agent has not answered yet).")
@click.option("--last", "scope", flag_value="last", help="Expand only the latest user prompt.")
@click.option("--estimate", is_flag=True, help="Estimate tokens without the tokenizer (faster).")
def mentions(run: Run, root: str | None, allow_secret: tuple[str, ...], include_ignored: bool,
             selection: str | None, problems: str | None, editors: str | None, provider: str | None,
             max_image_side: int | None, no_images: bool, scope: str | None, estimate: bool) -> None:
    """Attach what the user @-mentions: files, ranges, folders, git, chats.

    Expands the @ mentions of the user prompts the agent has not answered yet (--all: every
    prompt; --last: the latest) in the transcript (FILE or standard input) into attachments in
    the same message, in the format's own shape, and writes the transcript to standard output.
    Everything else passes through byte for byte. The report on standard error (and --report
    FILE as JSON) lists what was attached, named by path only, or refused and why, with sizes,
    tokens, the resolved range and a sha256 of each attachment. Paths resolve under the
    workspace root: --root, else the transcript's recorded cwd when it exists, else the current
    folder.

    \b
    Mentions:
      @path  @"path with spaces"   a file (text, or a PNG/JPEG/GIF/WebP image)
      @path#L10-L40  #L10-40  #10-40  :10-40  #L10  :10
                                   lines of a file (1-based, inclusive)
      @README.md#installation      the section under a Markdown heading
      @folder/                     a listing of the folder (ignored entries left out)
      @workspace                   the project tree (400 entries at most)
      @git                         git status, unstaged diff stat, staged diff
      @selection                   --selection FILE#L10-20 (or the whole FILE)
      @problems                    --problems FILE (SARIF or path:line:col: message)
      @editors                     --editors FILE (one open editor's path per line)
      @chat:FILE                   another transcript under the root: its latest
                                   compaction summary, else a digest of its prompts,
                                   with every secret in them masked

    Not mentions: an @ inside a word (me@example.com, pkg@latest), in a URL, in a code
    span or fenced code block; a bare word (@alice) that names nothing under the root.

    Limits, per message: 20 mentions; 60,000 characters of text together, in mention order
    (a file past that, and every file after it, is named by path only; generated text such as
    @git is cut to what is left); 20 images; 20 files; 10 MB an attachment. Images are scaled
    down past 2048 px on the long side (--max-image-side) and kept within the provider's hard
    limits (Anthropic: 5 MB of base64 per image, 2000 px when the request carries more than 20
    images); their token cost is reported. Config keys mentions.max_mentions,
    mentions.max_chars, mentions.max_images, mentions.max_files, mentions.max_bytes and
    mentions.workspace_entries change the limits.

    Refused, with the reason: paths outside the root (.., absolute paths, symlinks that leave
    it); files excluded by .gitignore, .lookoutignore or .cursorignore, naming the ignore file,
    line and pattern (inside git, git is asked, so .git/info/exclude and core.excludesFile count
    too; --include-ignored overrides); secret files (.env* but not .env.example, private keys,
    .ssh/, credentials, secrets files) unless --allow-secret; binary files; files over 10 MB.

    A mention is read once: the attachments start with a <lookout-mentions> header, and a
    prompt whose message has one is never expanded again. Text the agent itself already
    attached to the turn is not attached twice.
    """
    transcript = run.load()
    report: dict = {"command": "mentions", "dry_run": run.dry_run, "messages": []}
    adapter = transcript.adapter
    if adapter is None:
        run.finish(transcript, report, changes=0)
        return
    view = transcript.view()
    report["format"] = adapter.name
    targets = _targets(view, scope or "pending")
    index = _Index(view)
    pending = [(t, text) for t, text in targets if not index.expanded(t)]
    report["already_expanded"] = len(targets) - len(pending)

    settings = _settings(run, view, root, allow_secret, include_ignored, selection, problems, editors,
                         provider or FORMAT_PROVIDER.get(adapter.name, "anthropic"), max_image_side, no_images,
                         estimate)
    resolver = mr.Resolver(settings)
    report["root"] = str(resolver.root)
    report["provider"] = settings.provider

    work = []
    for item, text in pending:
        found = resolver.find(text)
        if found:
            work.append((item, found))
    if not work:
        run.finish(transcript, report, changes=0, tell=lambda: _say_summary(run, report, []))
        return
    present = sum(1 for i in view.items if i.kind == IMAGE)
    coming = sum(1 for _, found in work for m in found if (m.path or "").lower().endswith(IMAGE_SUFFIXES))
    settings.many_images = present + coming > MANY_IMAGES

    if not adapter.can_write:
        run.warn(f"the {adapter.name} format is read-only here: mentions in {len(work)} prompt(s) left as they are")
        run.finish(transcript, report, changes=0)
        return

    results = []
    for item, found in work:
        outcomes = resolver.resolve_message(found, images_present=index.images.get(item.message, 0))
        index.skip_present(item, outcomes)
        results.append((item, outcomes))
    # Write from the last message back, so an edit never moves a message still to be edited.
    changed = 0
    for item, outcomes in reversed(results):
        parts = mr.build_parts(outcomes)
        if parts and not run.dry_run:
            adapter.add_parts(transcript, _current(transcript, item), parts)
        changed += bool(parts)
    for item, outcomes in results:
        report["messages"].append(_message_report(item, outcomes))
    run.finish(transcript, report, changes=changed, tell=lambda: _say_summary(run, report, results))


def _settings(run: Run, view: View, root: str | None, allow_secret, include_ignored, selection, problems, editors,
              provider, max_image_side, no_images, estimate) -> mr.Settings:
    cwd = Path.cwd()
    chosen = root or run.setting("mentions.root")
    if not chosen and view.cwd and os.path.isdir(view.cwd):
        chosen = view.cwd
    if not chosen and run.hook_event and isinstance(run.hook_event.get("cwd"), str) and os.path.isdir(run.hook_event["cwd"]):
        chosen = run.hook_event["cwd"]
    limits = mr.Limits(
        max_mentions=run.number("mentions.max_mentions", None, mr.MAX_MENTIONS, int, minimum=0),
        max_chars=run.number("mentions.max_chars", None, mr.MAX_CHARS, int, minimum=0),
        max_images=run.number("mentions.max_images", None, mr.MAX_IMAGES, int, minimum=0),
        max_files=run.number("mentions.max_files", None, mr.MAX_FILES, int, minimum=0),
        max_bytes=run.number("mentions.max_bytes", None, mr.MAX_BYTES, int, minimum=0),
        workspace_entries=run.number("mentions.workspace_entries", None, mr.WORKSPACE_ENTRIES, int, minimum=0),
    )
    configured = run.setting("mentions.allow_secret", None, ()) or ()
    if isinstance(configured, str):
        configured = [p for p in configured.split(",") if p.strip()]
    allowed = tuple(allow_secret) + tuple(str(p).strip() for p in configured)
    return mr.Settings(
        root=Path(os.path.expanduser(str(chosen))) if chosen else cwd,
        limits=limits,
        provider=provider,
        max_image_side=run.number("mentions.max_image_side", max_image_side, DEFAULT_MAX_SIDE, int, minimum=0),
        images=not no_images,
        allow_secret=allowed,
        include_ignored=include_ignored,
        selection=selection,
        problems=problems,
        editors=editors,
        cwd=cwd,
        count_tokens=_counter(estimate),
    )


def _counter(estimate: bool):
    from lookout_cli.tokens import tokenizer as tokens

    return tokens.estimate if estimate else tokens.count


def _targets(view: View, scope: str) -> list[tuple[Item, str]]:
    """The first prompt item of each user prompt message, with the message's prompt text.

    scope "pending": prompts the agent has not answered yet (no assistant item after them);
    "all": every prompt in the model-visible context; "last": the latest prompt only.
    """
    firsts: dict[int, Item] = {}
    texts: dict[int, list[str]] = {}
    answered: set[int] = set()
    for item in view.items:
        if item.prompt and item.role == "user" and item.kind == TEXT:
            firsts.setdefault(item.message, item)
            texts.setdefault(item.message, []).append(item.text)
        elif item.role == "assistant":
            answered.update(firsts)
    out = [(firsts[k], "\n".join(texts[k])) for k in sorted(firsts)]
    if scope == "last":
        return out[-1:]
    if scope == "pending":
        return [(i, t) for i, t in out if i.message not in answered]
    return out


class _Index:
    """What the view holds per message and turn, gathered once."""

    def __init__(self, view: View) -> None:
        self.marked_messages: set[int] = set()
        self.marked_turns: set[int] = set()
        self.images: dict[int, int] = {}
        self.user_texts: dict[int, set[str]] = {}  # turn -> texts of user-side parts not prompts
        for item in view.items:
            if item.kind == IMAGE:
                self.images[item.message] = self.images.get(item.message, 0) + 1
            if item.role != "user" or item.kind not in (TEXT, NOTICE):
                continue
            if mr.is_expanded_text(item.text):
                self.marked_messages.add(item.message)
                if not item.prompt:
                    self.marked_turns.add(item.turn)
            if not item.prompt and item.text.strip():
                self.user_texts.setdefault(item.turn, set()).add(item.text.strip())

    def expanded(self, prompt: Item) -> bool:
        """A prompt is expanded when its message, or its turn's user-side text, has the header."""
        return prompt.message in self.marked_messages or prompt.turn in self.marked_turns

    def skip_present(self, prompt: Item, outcomes: list[mr.Outcome]) -> None:
        """Text the agent itself already attached to this turn (Claude Code expands @file on
        send) is not attached twice: it is named instead."""
        present = self.user_texts.get(prompt.turn, set())
        for o in outcomes:
            if o.status == mr.ATTACHED and o.text and o.text.strip() in present:
                o.status = mr.NAMED
                o.reason = "already in this message (the agent attached it)"
                o.text = None


def _current(transcript, item: Item) -> Item:
    """The same prompt in the transcript's current view (an earlier edit rebuilt it)."""
    for candidate in transcript.view().items:
        if candidate.record is item.record and candidate.path == item.path and candidate.prompt:
            return candidate
    return item


def _message_report(item: Item, outcomes: list[mr.Outcome]) -> dict:
    preview = " ".join(item.text.split())
    return {
        "line": item.record.lineno,
        "message": item.message,
        "prompt": preview[:80] + ("…" if len(preview) > 80 else ""),
        "mentions": [o.as_dict() for o in outcomes],
        "chars": sum(o.chars for o in outcomes if o.status == mr.ATTACHED),
        "tokens": sum(o.tokens for o in outcomes if o.status == mr.ATTACHED),
    }


def _say_summary(run: Run, report: dict, results) -> None:
    totals = {"attached": 0, "named": 0, "refused": 0, "chars": 0, "tokens": 0, "images": 0, "image_tokens": 0}
    for item, outcomes in results:
        where = f"line {item.record.lineno}" if item.record.lineno else f"message {item.message}"
        for o in outcomes:
            totals[o.status] += 1
            if o.status == mr.ATTACHED:
                if o.image is not None:
                    totals["images"] += 1
                    totals["image_tokens"] += o.tokens
                    im = o.image
                    size = f"{im.media_type} {im.width}x{im.height}, {im.nbytes:,} bytes"
                    what = f"{o.path} ({size}, ~{o.tokens:,} tokens)"
                else:
                    totals["chars"] += o.chars
                    totals["tokens"] += o.tokens
                    rng = f" lines {o.range_text()}" if o.lines else ""
                    what = f"{o.path or o.kind}{rng} ({o.chars:,} chars, ~{o.tokens:,} tokens)"
                run.say(f"mentions: {where}: attached {o.mention.raw}: {what}")
            elif o.status == mr.NAMED:
                run.say(f"mentions: {where}: named only {o.mention.raw}: {o.reason}")
            else:
                run.say(f"mentions: {where}: refused {o.mention.raw}: {o.reason}")
            for w in o.warnings:
                run.say(f"mentions: {where}:   note: {w}")
    report["totals"] = totals
    if not results:
        already = report.get("already_expanded", 0)
        run.say("mentions: nothing to expand" + (f" ({already} prompt(s) already expanded)" if already else ""))
        return
    verb = "would attach" if run.dry_run else "attached"
    images = f"; {totals['images']} image(s), ~{totals['image_tokens']:,} tokens" if totals["images"] else ""
    already = report.get("already_expanded", 0)
    tail = f"; {already} other prompt(s) already expanded" if already else ""
    run.say(
        f"mentions: {verb} {totals['attached']} ({totals['chars']:,} chars, ~{totals['tokens']:,} tokens{images}), "
        f"named {totals['named']}, refused {totals['refused']} in {len(results)} message(s){tail}"
    )
