"""The recipes that put ``lookout hook`` and ``lookout statusline`` into an agent's settings,
and merging them into a user's own settings without clobbering anything.

Claude Code reads hooks and ``statusLine`` from ``settings.json`` (``~/.claude/`` for the user,
``.claude/`` in a project); Codex reads ``hooks.json`` next to its config (``$CODEX_HOME``,
default ``~/.codex/``, or a project's ``.codex/``). Both nest event → matcher groups → handlers.
A merge adds lookout's handler to each event where no ``lookout hook`` runs yet, takes out the
recipes of earlier lookout versions that did not reach the model (``--from-hook -i`` filters),
leaves every other hook and a status line of the user's own alone, and keeps a backup of the
file it replaces. Running it again changes nothing.
"""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path

from lookout_cli.agents.events import CLAUDE

HOOK = "lookout hook"
STATUS = "lookout statusline"
# The recipes of earlier versions: transcript filters run from a hook, whose edits a running
# agent never reads (research/agent-hooks.md).
OLD_RECIPE = re.compile(r"^lookout (memory inject|memory learn|compact|measure|clear-images)\b.*--from-hook")
# The events lookout answers (both agents send all four), with Claude Code's timeout in
# seconds: PreCompact and Stop read the whole transcript; the others are quick
TIMEOUTS = {"SessionStart": 30, "UserPromptSubmit": 10, "PreCompact": 120, "Stop": 60}


def recipe(agent: str) -> dict:
    """The settings (Claude Code) or hooks.json (Codex) that run lookout inside ``agent``."""
    hooks = {}
    for event, timeout in TIMEOUTS.items():
        handler = {"type": "command", "command": HOOK}
        if agent == CLAUDE:
            handler["timeout"] = timeout
        hooks[event] = [{"hooks": [handler]}]
    out: dict = {"hooks": hooks}
    if agent == CLAUDE:
        out["statusLine"] = {"type": "command", "command": STATUS, "padding": 0}
    return out


def settings_path(agent: str, scope: str, project: str | os.PathLike | None = None) -> Path:
    """Where ``agent`` reads the settings of ``scope`` (user or project)."""
    base = Path(project or os.getcwd())
    if agent == CLAUDE:
        return (Path.home() / ".claude" if scope == "user" else base / ".claude") / "settings.json"
    home = Path(os.environ["CODEX_HOME"]) if os.environ.get("CODEX_HOME") else Path.home() / ".codex"
    return (home if scope == "user" else base / ".codex") / "hooks.json"


def _ours(handler) -> bool:
    command = handler.get("command") if isinstance(handler, dict) else None
    return isinstance(command, str) and (command.strip() == HOOK or command.strip().startswith(HOOK + " "))


def _old(handler) -> bool:
    command = handler.get("command") if isinstance(handler, dict) else None
    return isinstance(command, str) and OLD_RECIPE.match(command.strip()) is not None


def merge(current: dict, agent: str) -> tuple[dict, list[str], list[str]]:
    """``current`` settings with lookout's recipe merged in, what changed (empty: nothing) and
    what was left as the user had it."""
    if not isinstance(current, dict):
        raise TypeError("the settings file does not hold a JSON object")
    merged = copy.deepcopy(current)
    changes: list[str] = []
    notes: list[str] = []
    hooks = merged.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise TypeError('its "hooks" is not a JSON object')
    for event, groups in list(hooks.items()):
        if not isinstance(groups, list):
            continue
        kept_groups = []
        for group in groups:
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if isinstance(handlers, list) and any(_old(h) for h in handlers):
                group = dict(group, hooks=[h for h in handlers if not _old(h)])
                changes.append(f"{event}: removed an earlier lookout recipe that did not reach the model")
                if not group["hooks"]:
                    continue
            kept_groups.append(group)
        hooks[event] = kept_groups
        if not kept_groups:
            del hooks[event]
    for event, groups in recipe(agent)["hooks"].items():
        present = hooks.get(event, [])
        if not isinstance(present, list):
            raise TypeError(f'its "hooks.{event}" is not a list')
        if any(_ours(h) for g in present if isinstance(g, dict) for h in (g.get("hooks") or [])):
            continue
        hooks[event] = present + copy.deepcopy(groups)
        changes.append(f"{event}: added {HOOK}")
    if agent == CLAUDE:
        line = merged.get("statusLine")
        wanted = recipe(agent)["statusLine"]
        if line is None:
            merged["statusLine"] = wanted
            changes.append(f"statusLine: {STATUS}")
        elif not (isinstance(line, dict) and isinstance(line.get("command"), str)
                  and line["command"].strip().startswith(STATUS)):
            notes.append(f"statusLine: kept your own (to use lookout's, set its command to {STATUS!r})")
    return merged, changes, notes


def read_settings(path: Path) -> dict:
    """The settings in ``path`` ({} when there is no file or it is empty)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    return json.loads(text) if text.strip() else {}


def install(path: Path, agent: str, dry_run: bool = False) -> tuple[dict, list[str], list[str], Path | None]:
    """Merge the recipe into ``path``: the merged settings, what changed, what was left as it
    was, and the backup made of the file it replaced (None: nothing was replaced)."""
    from lookout_cli.core.fsutil import atomic_write

    current = read_settings(path)
    merged, changes, notes = merge(current, agent)
    backup = None
    if changes and not dry_run:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            backup = path.with_name(path.name + ".lookout-backup")
            atomic_write(backup, path.read_bytes())
        atomic_write(path, (json.dumps(merged, indent=2, ensure_ascii=False) + "\n").encode())
    return merged, changes, notes, backup
