"""``lookout memory``: what is kept between chats, as Markdown folders, and the two transcript
filters that use it (``inject`` and ``learn``)."""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from pathlib import Path

import click

from lookout_cli.config import Config
from lookout_cli.core.errors import CheckFailed, LookoutError
from lookout_cli.core.secrets import RULE_IDS
from lookout_cli.core.term import Reporter
from lookout_cli.core.times import parse_time
from lookout_cli.flags import common_options, filter_options
from lookout_cli.memory.project import agent_scope, everywhere_scope, resolve_project
from lookout_cli.memory.store import (
    AUTHORS,
    FORGOTTEN_DAYS,
    MAX_LIST_BYTES,
    MAX_MEMORIES,
    MAX_SCOPE_BYTES,
    NOTE_MAX,
    NOTE_MIN,
    SEND_BYTES,
    TIDY_TARGET,
    Memory,
    Scope,
    check_note,
    check_secrets,
    format_time,
    note_key,
    now,
    resolve_ref,
    sent_split,
    slugify,
    usage_of,
    utf8_safe,
)
from lookout_cli.options import Run

SCOPE_HELP = """\b
Scopes (default: the project of the working folder):
  -E, --everywhere     yours, in every project
  -P, --project DIR    the project holding DIR; a git repository's memory is
                       shared by its clones, worktrees, shallow clones and
                       moved copies (identity: root commit, else remote, else
                       path); a folder outside git has its own
  -A, --agent NAME     an agent's own memory"""

LIMITS_HELP = f"""\b
Limits: a note is {NOTE_MIN} to {NOTE_MAX} characters; a scope holds up to {MAX_MEMORIES} memories
in {MAX_LIST_BYTES // 1024} KB of list and {MAX_SCOPE_BYTES // 1024} KB with details, and refuses new ones
when full. A memory that looks like a password, key or token is refused (the
rule and a masked preview are shown). Forgotten memories are kept {FORGOTTEN_DAYS} days."""


# --- shared options --------------------------------------------------------------------------
def scope_options(all_flag: bool = False):
    def decorate(f):
        options = [
            click.option("-E", "--everywhere", is_flag=True, help="Everywhere: yours, in every project."),
            click.option("-P", "--project", "project_dir", type=click.Path(file_okay=False),
                         help="The project holding this folder (default: the working folder)."),
            click.option("-A", "--agent", "agent_name", metavar="NAME", help="An agent's own memory."),
        ]
        if all_flag:
            options.append(click.option("--all", "all_scopes", is_flag=True,
                                        help="Every scope: Everywhere, every project and every agent."))
        for option in reversed(options):
            f = option(f)
        return f

    return decorate


def write_options(f):
    for option in reversed([
        click.option("--dry-run", is_flag=True, help="Write nothing; say what would change."),
        click.option("--check", is_flag=True, help="Like --dry-run, and exit 1 if anything would change."),
    ]):
        f = option(f)
    return f


def by_option(f):
    return click.option(
        "--by", "by", default="you", show_default=True, metavar="WHO",
        help="Who is doing this: you, agent, agent:NAME or learned.")(f)


def allow_secret_option(f):
    return click.option(
        "--allow-secret", "allow_secret", multiple=True, type=click.Choice(RULE_IDS), metavar="RULE",
        help="Let one secret rule through, deliberately (repeatable).")(f)


class Ctx:
    """What every memory subcommand shares: messages, settings, the scope it works on."""

    def __init__(self, quiet=False, verbose=False, color="auto", isolated=False, dry_run=False, check=False):
        self.reporter = Reporter(quiet=quiet, verbose=verbose, color=color)
        self.config = Config(isolated=isolated)
        for warning in self.config.warnings:
            self.reporter.warn(warning)
        self.check = check
        self.dry_run = dry_run or check
        self.changes = 0

    def say(self, text: str) -> None:
        self.reporter.say(text)

    def warn(self, text: str) -> None:
        self.reporter.warn(text)

    def scope(self, everywhere=False, project_dir=None, agent_name=None, create=True) -> Scope:
        chosen = [x for x in (everywhere, project_dir is not None, agent_name is not None) if x]
        if len(chosen) > 1:
            raise click.UsageError("choose one scope: --everywhere, --project DIR or --agent NAME")
        if everywhere:
            return everywhere_scope()
        if agent_name is not None:
            return agent_scope(agent_name)
        return self.project(project_dir, create=create)

    def project(self, directory=None, create=True) -> Scope:
        res = resolve_project(directory, write=not self.dry_run, create=create)
        for line in res.merged:
            self.say(f"memory: {line}")
        return res.scope

    def all_scopes(self) -> list[Scope]:
        from lookout_cli.memory.project import known_scopes

        return known_scopes()

    def done(self, log: list[str], notices: list[str] = ()) -> None:
        for line in notices:
            self.say(f"memory: {'would notice: ' if self.dry_run else ''}{line}")
        for line in log:
            self.say(f"memory: {'would ' if self.dry_run else ''}{line}")
        self.changes += len(log)

    def finish(self) -> None:
        if self.check and self.changes:
            raise CheckFailed("memory: changes would be made")


def parse_by(value: str) -> tuple[str, str | None]:
    value = (value or "you").strip()
    who, _, name = value.partition(":")
    if who not in AUTHORS:
        raise click.BadParameter(f"{value!r}: use you, agent, agent:NAME or learned", param_hint="--by")
    if name and who != "agent":
        raise click.BadParameter("only an agent has a name (agent:NAME)", param_hint="--by")
    return who, (name or None)


def everywhere_policy(ctx: Ctx) -> str:
    policy = str(ctx.config.get("memory.save_everywhere", "ask")).lower().replace("_", "-")
    if policy not in ("ask", "only-me", "agents"):
        raise LookoutError(f"memory.save_everywhere = {policy!r}: use ask, only-me or agents")
    return policy


def _interactive() -> bool:
    return bool(sys.stdin and sys.stdin.isatty() and sys.stderr.isatty())


def read_text_arg(words: tuple[str, ...], what: str = "note") -> str:
    if words == ("-",):
        if sys.stdin is None or sys.stdin.isatty():
            raise click.UsageError(f"'-' reads the {what} from standard input, which is a terminal")
        return sys.stdin.read()
    return " ".join(words)


def read_details(details: str | None, details_file: str | None) -> str | None:
    if details is not None and details_file is not None:
        raise click.UsageError("use --details or --details-file, not both")
    if details_file is not None:
        if details_file == "-":
            return sys.stdin.read()
        try:
            return Path(details_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise LookoutError(f"{details_file}: {getattr(exc, 'strerror', None) or exc}") from None
    return None if details is None else utf8_safe(details)  # an argument may hold undecodable bytes


def emit(text: str = "") -> None:
    click.echo(text)


# --- the group ------------------------------------------------------------------------------
@click.group(epilog=f"""{SCOPE_HELP}

{LIMITS_HELP}

\b
Settings (config file, or LOOKOUT_MEMORY_* variables):
  memory.save_everywhere = "ask"   who may save to Everywhere: ask (an agent's
                                   save needs you at a terminal), only-me (an
                                   agent's save goes to the project), agents
  memory.read_everywhere = true    false keeps Everywhere out of inject

\b
Examples:
  lookout memory save "The API tests need Docker running"
  lookout memory save -E "I prefer small pull requests"
  lookout memory list --author learned --search docker
  lookout memory forget api-tests-need-docker-running
  lookout memory inject < chat.jsonl | lookout measure > next.jsonl
  lookout memory learn -i session.jsonl      # save '# notes' and 'remember that ...'
  lookout memory export --all -o memories.zip
  lookout memory sync ~/Dropbox/lookout-memory
""")
def memory() -> None:
    """Keep memories between chats, as Markdown, per scope.

    Each scope is a folder under $XDG_DATA_HOME/lookout/memory (or $LOOKOUT_DATA_DIR/memory):
    MEMORY.md, the list a chat is sent (newest first), and one Markdown file per memory with
    who wrote it (you, the agent, learned), the chat it came from and its dates. Forgotten
    memories stay restorable for 30 days. Writes are atomic and locked, so any number of
    processes can save at once.
    """


# --- save --------------------------------------------------------------------------------------
@memory.command(epilog="""\b
Examples:
  lookout memory save "The staging deploy needs the VPN"
  lookout memory save -E "I prefer small pull requests"
  lookout memory save --topic package-manager "We use pnpm, not yarn"
  lookout memory save --by agent:reviewer -A reviewer "Review for security first"
  echo "Builds need Node 20" | lookout memory save -
  lookout memory save --details-file notes.md "Release checklist"
""")
@click.argument("note", nargs=-1, required=True)
@click.option("--details", help="Longer details, kept in the memory's file (not in the list).")
@click.option("--details-file", type=click.Path(dir_okay=False, allow_dash=True), help="Read the details from a file.")
@click.option("--topic", help="Name the memory's topic; a memory with this topic is replaced (the old text goes to Forgotten).")
@click.option("--source", help="The chat it came from (a transcript path or session id).")
@by_option
@allow_secret_option
@scope_options()
@write_options
@common_options
def save(note, details, details_file, topic, source, by, allow_secret, everywhere, project_dir, agent_name,
         dry_run, check, **common):
    """Remember a note (3 to 400 characters) in a scope.

    The same note twice is remembered once. With --topic, a memory on that topic is replaced
    and its old text kept in Forgotten. A note, or details, that look like a password, key
    or token are refused: save where the secret lives instead (the name of its variable).
    A full scope refuses new memories until some are forgotten.
    """
    ctx = Ctx(dry_run=dry_run, check=check, **common)
    author, by_name = parse_by(by)
    text = check_note(read_text_arg(note))
    more = read_details(details, details_file)
    check_secrets(text + ("\n\n" + more if more else ""), allow_secret)
    if everywhere and author != "you":
        policy = everywhere_policy(ctx)
        if author == "learned":
            raise LookoutError("learned memories stay in their chat's project or agent, never Everywhere")
        if policy == "only-me":
            ctx.say("memory: only you save Everywhere (memory.save_everywhere = only-me); saving to the project")
            everywhere = False
        elif policy == "ask":
            if not _interactive():
                raise LookoutError(
                    "an agent's save to Everywhere needs your approval: run it yourself (--by you), "
                    "or set memory.save_everywhere = \"agents\""
                )
            choice = click.prompt("Save everywhere, to this project, or don't save?",
                                  type=click.Choice(["everywhere", "project", "no"]), default="no", err=True)
            if choice == "no":
                ctx.say("memory: not saved")
                return
            everywhere = choice == "everywhere"
    scope = ctx.scope(everywhere, project_dir, agent_name)
    with scope.transaction(dry_run=ctx.dry_run) as txn:
        topic_id = None
        if topic:
            topic_id = slugify(topic, max_words=12, max_len=64)
            topic_id = "memory-note" if topic_id == "memory" else topic_id
        existing = txn.find_note(text)
        if existing is not None and topic_id and existing.id != topic_id:
            raise LookoutError(f"{existing.id} in {scope.label} already says that; forget it first or edit it")
        target_id = topic_id or (existing.id if existing is not None else None)
        mem = Memory(id="", note=text, details=(more or "").strip("\n"), author=author, by=by_name,
                     source=source, topic=topic_id or "")
        if target_id is not None and target_id in txn.memories:
            old = txn.memories[target_id]
            if old.key == note_key(text) and (more is None or more.strip() == old.details.strip()):
                ctx.say(f"memory: already remembered in {scope.label}: {old.id}")
                ctx.done([], txn.notices)
                return
            if old.author == "you" and author != "you":
                raise LookoutError(f"{target_id} was written by you; {by} may not replace it (save under another topic)")
            if more is None and old.key == note_key(text):
                mem.details = old.details
            before = txn.usage()
            stamp = format_time(txn.stamp())
            mem.id, mem.topic = target_id, old.topic or target_id
            mem.created = old.created
            mem.updated = mem.verified = stamp
            if old.author != author and author != "you":
                mem.edited_by = "lookout" if author == "learned" else (by_name or "agent")
            txn.replace_memory(target_id, mem, by=by, reason="replaced by a newer version of its topic")
            txn.check_room(before, adding=False)
            txn.log.append(f"replace {scope.label}: {target_id} (the old version is in Forgotten)")
        else:
            if topic_id:
                mem.id = topic_id
            txn.add(mem)
            txn.log.append(f"save {scope.label}: {mem.id}")
    ctx.done(txn.log, txn.notices)
    ctx.finish()


# --- list ---------------------------------------------------------------------------------------
SORTS = {
    "newest": (lambda m: m.sort_key, True),
    "oldest": (lambda m: m.sort_key, False),
    "created": (lambda m: (parse_time(m.created) or m.updated_at, m.id), True),
    "verified": (lambda m: (parse_time(m.verified) or m.updated_at, m.id), False),
    "topic": (lambda m: (m.topic or m.id), False),
    "author": (lambda m: (AUTHORS.index(m.author) if m.author in AUTHORS else 9, m.sort_key), False),
    "size": (lambda m: (len(m.text().encode()), m.id), True),
}


@memory.command(name="list", epilog="""\b
Examples:
  lookout memory list
  lookout memory list -E --author you
  lookout memory list --all --search docker --sort oldest
  lookout memory list --json | jq -r .note
""")
@click.option("--author", type=click.Choice(AUTHORS), help="Only what was written by you, by the agent, or learned.")
@click.option("-s", "--search", help="Only memories whose note, details or topic contain this (any case).")
@click.option("--sort", type=click.Choice(list(SORTS)), default="newest", show_default=True, help="Order.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per memory (JSON Lines).")
@scope_options(all_flag=True)
@common_options
def list_(author, search, sort, as_json, everywhere, project_dir, agent_name, all_scopes, **common):
    """List memories, with how full each scope is.

    A memory past what a new chat is sent (each list newest first, up to 6 KB) is marked
    "not sent": the agent reaches it only by opening MEMORY.md or its file.
    """
    ctx = Ctx(**common)
    scopes = ctx.all_scopes() if all_scopes else [ctx.scope(everywhere, project_dir, agent_name, create=False)]
    key, reverse = SORTS[sort]
    for scope in scopes:
        mems = scope.memories()
        sent, not_sent = sent_split(mems)
        unsent = {m.id for m in not_sent}
        shown = [m for m in mems if _matches(m, author, search)]
        shown.sort(key=key, reverse=reverse)
        if as_json:
            for m in shown:
                emit(json.dumps(_as_dict(m, scope, m.id not in unsent), ensure_ascii=False))
            continue
        emit(f"{scope.label}: {usage_of(mems).describe()} ({scope.path})")
        for m in shown:
            mark = "  (not sent)" if m.id in unsent else ""
            edited = f", edited by {m.edited_by}" if m.edited_by else ""
            emit(f"  {m.id}  {m.updated[:10]}  {m.author_label}{edited}{mark}")
            emit(f"      {m.note}")
        if not shown:
            emit("  (no memories)" if not mems else "  (none match)")


def _matches(m: Memory, author: str | None, search: str | None) -> bool:
    if author and m.author != author:
        return False
    if search:
        needle = search.casefold()
        if needle not in (m.note + "\n" + m.details + "\n" + (m.topic or "")).casefold():
            return False
    return True


def _as_dict(m: Memory, scope: Scope, sent: bool | None = None) -> dict:
    out = {
        "scope": scope.kind, "scope_name": scope.name, "id": m.id, "topic": m.topic or m.id,
        "note": m.note, "details": m.details, "author": m.author, "by": m.by, "source": m.source,
        "created": m.created, "updated": m.updated, "verified": m.verified, "edited_by": m.edited_by,
        "path": str(scope.path / f"{m.id}.md"),
    }
    if sent is not None:
        out["sent"] = sent
    if m.forgotten:
        out.update(forgotten=m.forgotten, forgotten_by=m.forgotten_by, reason=m.reason, entry=m.entry,
                   path=str(scope.path / ".forgotten" / f"{m.entry}.md"))
    return out


# --- show / path --------------------------------------------------------------------------------
@memory.command(epilog="""\b
Examples:
  lookout memory show staging-deploy
  lookout memory show 1            # the newest memory
  lookout memory show -E 3 --json
""")
@click.argument("ref")
@click.option("--json", "as_json", is_flag=True, help="As a JSON object.")
@scope_options()
@common_options
def show(ref, as_json, everywhere, project_dir, agent_name, **common):
    """Show one memory: its note, details, author, source chat and dates.

    REF is a memory's id (its file name without .md), a unique start of it, or its
    position in the list (1 is the newest).
    """
    ctx = Ctx(**common)
    scope = ctx.scope(everywhere, project_dir, agent_name, create=False)
    mems = {m.id: m for m in scope.memories()}
    m = mems[resolve_ref(ref, mems, scope.label)]
    if as_json:
        emit(json.dumps(_as_dict(m, scope), ensure_ascii=False, indent=2))
        return
    emit(m.note)
    if m.details:
        emit("")
        emit(m.details)
    emit("")
    emit(f"id: {m.id}   scope: {scope.label}   {m.author_label}" + (f", edited by {m.edited_by}" if m.edited_by else ""))
    if m.source:
        emit(f"source: {m.source}")
    emit(f"created {m.created}   updated {m.updated}   verified {m.verified}")
    emit(f"file: {scope.path / (m.id + '.md')}")


@memory.command(epilog="""\b
Examples:
  lookout memory path              # the project's memory folder
  cd "$(lookout memory path -E)"
""")
@scope_options()
@common_options
def path(everywhere, project_dir, agent_name, **common):
    """Print a scope's folder (it may not exist until something is saved)."""
    ctx = Ctx(**common)
    emit(str(ctx.scope(everywhere, project_dir, agent_name, create=False).path))


# --- edit ---------------------------------------------------------------------------------------
@memory.command(epilog="""\b
Examples:
  lookout memory edit staging-deploy "The staging deploy needs the VPN and 2FA"
  lookout memory edit 1 --details-file notes.md
  lookout memory edit 2 --verified          # still true: mark it checked today
  lookout memory edit staging-deploy        # opens $EDITOR
""")
@click.argument("ref")
@click.argument("note", nargs=-1)
@click.option("--details", help="New details (replace the old ones).")
@click.option("--details-file", type=click.Path(dir_okay=False, allow_dash=True), help="Read new details from a file.")
@click.option("--no-details", is_flag=True, help="Remove the details.")
@click.option("--verified", is_flag=True, help="Mark the memory checked today, text unchanged.")
@by_option
@allow_secret_option
@scope_options()
@write_options
@common_options
def edit(ref, note, details, details_file, no_details, verified, by, allow_secret, everywhere, project_dir,
         agent_name, dry_run, check, **common):
    """Change a memory's note or details; the text it replaces goes to Forgotten.

    With no new text, opens the memory file in $EDITOR. Its date moves to now. The same
    secret check and limits as save apply.
    """
    ctx = Ctx(dry_run=dry_run, check=check, **common)
    author, by_name = parse_by(by)
    new_note = check_note(read_text_arg(note)) if note else None
    new_details = read_details(details, details_file)
    if no_details:
        if new_details is not None:
            raise click.UsageError("--no-details and new details contradict each other")
        new_details = ""
    scope = ctx.scope(everywhere, project_dir, agent_name)
    with scope.transaction(dry_run=ctx.dry_run) as txn:
        mem_id = txn.resolve(ref)
        old = txn.memories[mem_id]
        if author != "you" and old.author == "you" and (new_note is not None or new_details is not None):
            if author == "learned":
                raise LookoutError(f"{mem_id} was written by you; learning may not change it")
        if new_note is None and new_details is None and not verified:
            if not _interactive():
                raise click.UsageError("give a new NOTE, --details, --no-details or --verified (or run it on a terminal)")
            edited = click.edit(old.to_markdown(), extension=".md", require_save=True)
            if edited is None:
                ctx.say("memory: unchanged")
                return
            from lookout_cli.memory.store import parse_memory

            parsed = parse_memory(edited, mem_id)
            new_note = check_note(parsed.note)
            new_details = parsed.details
        from dataclasses import replace as dc_replace

        mem = dc_replace(old, extra=dict(old.extra))
        changed = False
        if new_note is not None and new_note != old.note:
            mem.note, changed = new_note, True
        if new_details is not None and new_details.strip("\n") != old.details.strip("\n"):
            mem.details, changed = new_details.strip("\n"), True
        if not changed and not verified:
            ctx.say(f"memory: {mem_id} unchanged")
            ctx.done([], txn.notices)
            return
        if changed:
            check_secrets(mem.text(), allow_secret)
            other = txn.find_note(mem.note)
            if other is not None and other.id != mem_id:
                raise LookoutError(f"{other.id} already says that; forget one of them instead")
            before = txn.usage()
            stamp = format_time(txn.stamp())
            mem.updated = mem.verified = stamp
            mem.edited_by = None if author == "you" else ("lookout" if author == "learned" else by_name or "agent")
            txn.replace_memory(mem_id, mem, by=by, reason="replaced by an edit")
            txn.check_room(before, adding=False)
            txn.log.append(f"edit {scope.label}: {mem_id} (the old text is in Forgotten)")
        else:
            mem.verified = format_time(txn.stamp())
            txn.memories[mem_id] = mem
            txn.log.append(f"mark {scope.label}: {mem_id} verified")
    ctx.done(txn.log, txn.notices)
    ctx.finish()


# --- forget / forgotten / restore ------------------------------------------------------------
@memory.command(epilog="""\b
Examples:
  lookout memory forget staging-deploy
  lookout memory forget 1 2 3
  lookout memory forget --purge leaked-token     # gone for good, not kept in Forgotten
""")
@click.argument("refs", nargs=-1, required=True)
@click.option("--purge", is_flag=True, help="Delete for good (also from Forgotten), e.g. a secret saved by mistake.")
@click.option("--reason", default=None, help="Why (shown in Forgotten).")
@by_option
@scope_options()
@write_options
@common_options
def forget(refs, purge, reason, by, everywhere, project_dir, agent_name, dry_run, check, **common):
    """Forget memories; they stay in Forgotten for 30 days and can be restored.

    REF is an id, a unique start of one, or a list position (1 is the newest). With
    --purge the memory and every Forgotten copy of it are deleted for good.
    """
    ctx = Ctx(dry_run=dry_run, check=check, **common)
    author, _ = parse_by(by)
    if everywhere and author != "you":
        policy = everywhere_policy(ctx)
        if policy == "only-me" or author == "learned":
            raise LookoutError("only you forget Everywhere memories (memory.save_everywhere)")
        if policy == "ask" and not _interactive():
            raise LookoutError("an agent's forget of an Everywhere memory needs your approval: run it yourself")
    scope = ctx.scope(everywhere, project_dir, agent_name)
    with scope.transaction(dry_run=ctx.dry_run) as txn:
        ids = []
        for ref in refs:
            if purge:
                try:
                    ids.append(txn.resolve(ref))
                except LookoutError:
                    if not any(m.id == ref for m in scope.forgotten(include_expired=True)):
                        raise
                    ids.append(ref)
            else:
                ids.append(txn.resolve(ref))
        if everywhere and author != "you" and _interactive():
            for mem_id in ids:
                emit(f"  {txn.memories[mem_id].note}")
            if not click.confirm("Forget everywhere?", err=True):
                ctx.say("memory: kept")
                return
        for mem_id in dict.fromkeys(ids):
            m = txn.memories.get(mem_id)
            if m is not None and author == "learned" and m.author == "you":
                raise LookoutError(f"{mem_id} was written by you; learning may not forget it")
            if purge:
                if m is not None:
                    txn.memories.pop(mem_id)
                for f in scope.forgotten(include_expired=True):
                    if f.id == mem_id and f.entry:
                        txn.purged.append(f.entry)
                txn.log.append(f"purge {scope.label}: {mem_id} (deleted for good)")
            else:
                txn.forget(mem_id, by=by, reason=reason or f"forgotten by {by}")
    ctx.done(txn.log, txn.notices)
    ctx.finish()


@memory.command(epilog="""\b
Examples:
  lookout memory forgotten
  lookout memory forgotten --all --json
""")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per entry (JSON Lines).")
@scope_options(all_flag=True)
@common_options
def forgotten(as_json, everywhere, project_dir, agent_name, all_scopes, **common):
    """List forgotten memories (kept 30 days), newest first, with who forgot them and why."""
    ctx = Ctx(**common)
    scopes = ctx.all_scopes() if all_scopes else [ctx.scope(everywhere, project_dir, agent_name, create=False)]
    current = now()
    for scope in scopes:
        entries = scope.forgotten()
        if as_json:
            for m in entries:
                emit(json.dumps(_as_dict(m, scope), ensure_ascii=False))
            continue
        emit(f"{scope.label}: forgotten, kept {FORGOTTEN_DAYS} days ({scope.path / '.forgotten'})")
        for m in entries:
            when = parse_time(m.forgotten) or current
            left = (when + dt.timedelta(days=FORGOTTEN_DAYS) - current).days
            emit(f"  {m.entry}  {m.forgotten[:10]}  by {m.forgotten_by or 'you'}  ({max(left, 0)} days left)")
            emit(f"      {m.note}")
            if m.reason:
                emit(f"      why: {m.reason}")
        if not entries:
            emit("  (nothing forgotten)")


@memory.command(name="restore", epilog="""\b
Examples:
  lookout memory restore staging-deploy           # its newest forgotten version
  lookout memory restore staging-deploy~20260501T120000000
""")
@click.argument("refs", nargs=-1, required=True)
@scope_options()
@write_options
@common_options
def restore_(refs, everywhere, project_dir, agent_name, dry_run, check, **common):
    """Put forgotten memories back where they were.

    REF is a memory's id (its newest forgotten version) or an entry from `forgotten`. If the
    memory exists again meanwhile, the restored version takes its place and the current one
    goes to Forgotten, so nothing is lost.
    """
    ctx = Ctx(dry_run=dry_run, check=check, **common)
    scope = ctx.scope(everywhere, project_dir, agent_name)
    entries = scope.forgotten()
    with scope.transaction(dry_run=ctx.dry_run) as txn:
        for ref in refs:
            ref = ref.removesuffix(".md")
            match = next((m for m in entries if m.entry == ref), None) or \
                next((m for m in entries if m.id == ref), None)
            if match is None:
                prefix = [m for m in entries if (m.entry or "").startswith(ref)]
                if len({m.id for m in prefix}) == 1:
                    match = prefix[0]
            if match is None:
                raise LookoutError(f"nothing called {ref!r} in {scope.label}'s Forgotten (see lookout memory forgotten)")
            entries.remove(match)
            from dataclasses import replace as dc_replace

            mem = dc_replace(match, forgotten=None, forgotten_by=None, reason=None, entry=None,
                             extra=dict(match.extra))
            before = txn.usage()
            same = txn.find_note(mem.note)
            if same is not None and same.id != mem.id:
                ctx.say(f"memory: {same.id} already says that; {match.entry} stays in Forgotten")
                continue
            if mem.id in txn.memories:
                txn.replace_memory(mem.id, mem, by="you", reason="replaced by a restored version")
                txn.check_room(before, adding=False)
            else:
                txn.memories[mem.id] = mem
                txn.check_room(before)
            txn.purged.append(match.entry)
            txn.log.append(f"restore {scope.label}: {mem.id}")
    ctx.done(txn.log, txn.notices)
    ctx.finish()


# --- tidy ---------------------------------------------------------------------------------------
@memory.command(epilog=f"""\b
What it does:
  merges memories about one subject (the merged one keeps the newest date);
  forgets task status, to-dos and memories whose dates have passed, and
  what a newer memory contradicts; a memory that also holds a decision or a
  measured result is rewritten without the rest instead of forgotten;
  within 10 of the {MAX_MEMORIES} limit it merges more, to about {TIDY_TARGET}.
  It never lumps different subjects together. What it takes is in Forgotten.
\b
Examples:
  lookout memory tidy --dry-run
  lookout memory tidy -A reviewer
  lookout memory tidy --include-mine     # also your own memories
""")
@click.option("--include-mine", is_flag=True, help="Also tidy memories you wrote yourself (left alone by default).")
@scope_options()
@write_options
@common_options
def tidy(include_mine, everywhere, project_dir, agent_name, dry_run, check, **common):
    """Merge, rewrite and forget stale memories in a scope."""
    from lookout_cli.memory.tidy import plan_tidy

    ctx = Ctx(dry_run=dry_run, check=check, **common)
    if everywhere and not include_mine:
        ctx.say("memory: Everywhere holds your own memories; tidy leaves them alone without --include-mine")
    scope = ctx.scope(everywhere, project_dir, agent_name)
    with scope.transaction(dry_run=ctx.dry_run, actor="tidy") as txn:
        plan_tidy(txn, today=now(), include_mine=include_mine)
    ctx.done(txn.log, txn.notices)
    ctx.say(f"memory: {scope.label} now holds {usage_of(txn.memories.values()).describe()}")
    ctx.finish()


# --- export / import / sync -----------------------------------------------------------------
@memory.command(epilog="""\b
Examples:
  lookout memory export -o project-memory.zip
  lookout memory export --all -o all-memories.zip
  lookout memory export -E --git -o everywhere.zip   # each folder a git repository
  lookout memory export --all --git -o ~/memory-repos  # a folder, not a zip
""")
@click.option("-o", "--output", type=click.Path(), help="A .zip file, or a folder (default: lookout-memory-DATE.zip here).")
@click.option("--git", "as_git", is_flag=True, help="Make each scope folder a git repository, ready to push.")
@click.option("--with-forgotten", is_flag=True, help="Include what is in Forgotten.")
@scope_options(all_flag=True)
@write_options
@common_options
def export(output, as_git, with_forgotten, everywhere, project_dir, agent_name, all_scopes, dry_run, check,
           **common):
    """Save memory folders to a .zip (or a folder): the scope in view, or --all.

    The zip holds lookout-memory/manifest.json and one folder per scope (everywhere/,
    projects/NAME/, agents/NAME/), each with MEMORY.md and its memory files, ready for
    lookout memory import on another machine.
    """
    from lookout_cli.memory.exchange import export_scopes

    ctx = Ctx(dry_run=dry_run, check=check, **common)
    scopes = ctx.all_scopes() if all_scopes else [ctx.scope(everywhere, project_dir, agent_name, create=False)]
    scopes = [s for s in scopes if s.exists()]
    if not scopes:
        raise LookoutError("no memories to export")
    if output is None:
        output = f"lookout-memory-{now().strftime('%Y%m%d-%H%M%S')}.zip"
    if ctx.dry_run:
        count = sum(len(s.memories()) for s in scopes)
        ctx.done([f"export {count} memories from {len(scopes)} scope(s) to {output}"])
        ctx.finish()
        return
    result = export_scopes(scopes, Path(output), as_git=as_git, with_forgotten=with_forgotten)
    ctx.say(f"memory: exported {result['memories']} memories from {len(scopes)} scope(s) to {output}")
    emit(str(Path(output).resolve()))


@memory.command(name="import", epilog="""\b
Examples:
  lookout memory import ~/old-agent/memory          # a folder with MEMORY.md
  lookout memory import memories.zip                 # an export
  lookout memory import -E --dry-run prefs.zip
""")
@click.argument("source", type=click.Path(exists=True))
@allow_secret_option
@scope_options()
@write_options
@common_options
def import_(source, allow_secret, everywhere, project_dir, agent_name, dry_run, check, **common):
    """Add memories from a folder with a MEMORY.md, or from an export .zip.

    A memory already here is skipped; of two versions of one topic the newer stays (the
    older goes to Forgotten). What looks like a secret, and what does not fit the scope's
    limits, is left out. The result says what came in and what was left out. An export of
    several scopes puts each agent's memory back into that agent only, Everywhere into
    Everywhere and each project into its project. A zip with paths outside itself, links, or
    entries too large to be memories is refused without writing anything.
    """
    from lookout_cli.memory.exchange import import_source

    ctx = Ctx(dry_run=dry_run, check=check, **common)
    chosen = everywhere or project_dir is not None or agent_name is not None

    def target() -> Scope:
        return ctx.scope(everywhere, project_dir, agent_name)

    report = import_source(Path(source), target, chosen, dry_run=ctx.dry_run, allow=allow_secret)
    for line in report.lines(ctx.dry_run):
        ctx.say(f"memory: {line}")
    ctx.changes += report.changes
    ctx.finish()


@memory.command(epilog="""\b
Examples:
  lookout memory sync ~/Dropbox/lookout-memory        # Everywhere and this project
  lookout memory sync -E /mnt/shared/memory
  lookout memory sync --dry-run ~/Dropbox/lookout-memory
\b
Each machine remembers what the shared folder held when it last synced (a
sha256 per memory). A change on one side only is copied over, checked
against that hash first; a memory changed on both sides keeps the newer
version on both and puts the older in Forgotten here and, as a copy, in the
shared folder's conflicts/ folder. A forget travels as a tombstone and
lands in Forgotten on the other machine. Nothing is lost silently.
""")
@click.argument("folder", type=click.Path(file_okay=False))
@allow_secret_option
@scope_options()
@write_options
@common_options
def sync(folder, allow_secret, everywhere, project_dir, agent_name, dry_run, check, **common):
    """Sync memories with another machine through a shared folder.

    Without a scope option it syncs Everywhere and the project of the working folder (a
    project must be a git repository: a folder outside git stays on its machine). The
    secret check runs on everything that comes in.
    """
    from lookout_cli.memory.exchange import sync_scope

    ctx = Ctx(dry_run=dry_run, check=check, **common)
    if everywhere or project_dir is not None or agent_name is not None:
        scopes = [ctx.scope(everywhere, project_dir, agent_name)]
    else:
        scopes = [everywhere_scope()]
        res = resolve_project(None, write=not ctx.dry_run)
        if res.identity.in_git:
            scopes.append(res.scope)
        else:
            ctx.say("memory: the working folder is not in git; its project memory stays on this machine")
    for scope in scopes:
        if scope.kind == "project":
            from lookout_cli.memory.project import identify

            ident = identify(project_dir)
            if not ident.in_git:
                raise LookoutError(f"{scope.label} is a folder outside git; its memory stays on this machine")
        report = sync_scope(scope, Path(folder), dry_run=ctx.dry_run, allow=allow_secret)
        for line in report.lines(ctx.dry_run):
            ctx.say(f"memory: {line}")
        ctx.changes += report.changes
    ctx.finish()


# --- transcript filters: inject and learn --------------------------------------------------
def _project_dir_for(run: Run, project_dir: str | None, view_cwd: str | None) -> str | None:
    if project_dir:
        return project_dir
    if view_cwd and os.path.isdir(view_cwd):
        return view_cwd
    return None


def render_memory_block(scopes: list[tuple[str, Scope]]) -> tuple[str | None, dict]:
    """The text a chat is sent: each list newest first up to 6 KB; the rest marked not sent."""
    parts = []
    report = {}
    for heading, scope in scopes:
        mems = scope.memories()
        sent, rest = sent_split(mems, SEND_BYTES)
        report[scope.label] = {"sent": len(sent), "not_sent": len(rest), "folder": str(scope.path)}
        if not mems:
            continue
        lines = [f"## {heading}", f"Folder: {scope.path}"]
        lines += [m.list_line() for m in sent]
        if rest:
            lines.append(f"- ({len(rest)} older memor{'y' if len(rest) == 1 else 'ies'} not sent: "
                         f"read {scope.path / 'MEMORY.md'} for them)")
        parts.append("\n".join(lines))
    if not parts:
        return None, report
    head = ("# Memory\n\nWhat was kept from earlier chats (lookout memory). Each list is newest first; "
            "a memory with details links its file in the folder named: read it when it matters.")
    return head + "\n\n" + "\n\n".join(parts) + "\n", report


@memory.command(epilog="""\b
Examples:
  lookout memory inject chat.jsonl > next.jsonl
  lookout memory inject -A reviewer < agent-chat.jsonl > next.jsonl
  lookout memory inject --no-everywhere -i session.jsonl
\b
The project is the one holding --project DIR, else the transcript's own
working folder when it exists here, else the working folder. Running it
again with unchanged memories changes nothing; with changed memories it
replaces the block it put in before. An empty memory removes the block.
""")
@filter_options(side_effects=True)
@click.option("-P", "--project", "project_dir", type=click.Path(file_okay=False), help="Use this folder's project memory.")
@click.option("-A", "--agent", "agent_name", metavar="NAME", help="An agent's chat: its own memory instead of the project's.")
@click.option("--no-everywhere", is_flag=True, help="Keep Everywhere memories out (memory.read_everywhere = false).")
def inject(run: Run, project_dir, agent_name, no_everywhere):
    """Put the memory lists into the transcript's setup, newest first, up to 6 KB each.

    Everywhere and the project's (or, with --agent, the agent's) lists are sent; a memory
    past 6 KB of its list is marked not sent, and the agent reaches it by opening the file.
    """
    transcript = run.load()
    if transcript.adapter is None:
        run.finish(transcript, {"command": "memory inject", "injected": False})
        return
    view = transcript.view()
    ctx = Ctx(dry_run=run.dry_run)
    ctx.reporter = run.reporter
    scopes: list[tuple[str, Scope]] = []
    if not no_everywhere and run.flag("memory.read_everywhere", default=True):
        scopes.append(("Everywhere (your preferences, in every project)", everywhere_scope()))
    if agent_name:
        scope = agent_scope(agent_name)
        scopes.append((f"Agent {agent_name} (this agent's own)", scope))
    else:
        scope = ctx.project(_project_dir_for(run, project_dir, view.cwd), create=False)
        scopes.append((f"Project {scope.name}", scope))
    text, report = render_memory_block(scopes)
    try:
        transcript.adapter.set_setup(transcript, "memory", text)
    except LookoutError as exc:
        if not transcript.adapter.can_write:
            run.warn(f"memory not injected: {exc}")
        else:
            raise
    sent = sum(r["sent"] for r in report.values())
    unsent = sum(r["not_sent"] for r in report.values())
    verb = "would inject" if run.dry_run else "injected"
    noun = "memory" if sent == 1 else "memories"
    said = f"memory inject: {verb} {sent} {noun}" + (f" ({unsent} not sent: past 6 KB)" if unsent else "")
    run.finish(transcript, {"command": "memory inject", "scopes": report, "changed": transcript.changed},
               tell=lambda: transcript.changed and run.say(said))  # once the transcript is written


@memory.command(epilog="""\b
What it saves, from real user prompts it has not learned from yet:
  # The API tests need Docker running      a note for the project, word for word
  #! I prefer small pull requests          a note for Everywhere
  ... remember that staging needs the VPN  learned, in the project
In an agent's chat (--agent NAME) '#' notes and what is learned go to that
agent's own memory. A note with a secret is refused (and reported); a full
scope refuses new memories.
\b
Examples:
  lookout memory learn session.jsonl > /dev/null
  lookout memory learn < chat.jsonl | lookout memory inject > next.jsonl
  lookout memory learn --dry-run chat.jsonl > /dev/null
""")
@filter_options(side_effects=True)
@click.option("-P", "--project", "project_dir", type=click.Path(file_okay=False), help="Save to this folder's project memory.")
@click.option("-A", "--agent", "agent_name", metavar="NAME", help="An agent's chat: save to its own memory.")
def learn(run: Run, project_dir, agent_name):
    """Save what the user asked to remember, and '#' notes, from the transcript.

    The transcript passes through unchanged. Each prompt is learned from once (running it
    again saves nothing), so it is safe in a hook that runs after every turn.
    """
    from lookout_cli.memory.tidy import learn_from_prompts

    transcript = run.load()
    if transcript.adapter is None:
        run.finish(transcript, {"command": "memory learn", "saved": 0}, changes=0)
        return
    view = transcript.view()
    ctx = Ctx(dry_run=run.dry_run)
    ctx.reporter = run.reporter
    source = run.source or (f"session {view.session_id}" if view.session_id else None)
    directory = _project_dir_for(run, project_dir, view.cwd)

    def scope_for(kind: str) -> Scope:
        if kind == "everywhere":
            return everywhere_scope()
        if agent_name:
            return agent_scope(agent_name)
        return ctx.project(directory)

    result = learn_from_prompts(view, scope_for, source=source, dry_run=run.dry_run)
    for line in result.lines:
        run.say(f"memory learn: {'would ' if run.dry_run else ''}{line}")
    for line in result.warnings:
        run.warn(line)
    run.finish(transcript, {"command": "memory learn", "saved": result.saved, "skipped": result.skipped},
               changes=result.saved)
