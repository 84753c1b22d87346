"""Optional TOML configuration, in layers (last wins): the user's config file, the project's
``.lookout.toml`` found upward from the working folder, ``LOOKOUT_*`` variables, then flags.

Keys reuse the product's names, dotted by table: ``compaction.threshold_percent``,
``compaction.tail_turns``, ``model``, ``max_tool_output_chars``, ``models.<name>.context_window``…
A key's variable is ``LOOKOUT_`` plus the key in capitals with dots as underscores
(``LOOKOUT_COMPACTION_THRESHOLD_PERCENT=80``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from lookout_cli.core.errors import LookoutError
from lookout_cli.core.paths import config_dir

PROJECT_FILE = ".lookout.toml"


def _merge(base: dict, extra: dict) -> dict:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value
    return base


def _read(path: Path) -> dict:
    import tomllib  # here, not at the top: most runs find no config file (start-up time)

    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise LookoutError(f"{path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise LookoutError(f"{path}: {exc.strerror}") from None


def find_project_file(start: Path | None = None) -> Path | None:
    folder = (start or Path.cwd()).resolve()
    for candidate in (folder, *folder.parents):
        path = candidate / PROJECT_FILE
        if path.is_file():
            return path
    return None


def _scalar(text: str) -> Any:
    """Read a variable's value as a TOML scalar when it is one (80, 0.75, true), else text."""
    import tomllib

    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


class Config:
    """Merged settings. ``isolated`` ignores every file and variable (hermetic CI)."""

    def __init__(self, isolated: bool = False, values: dict | None = None) -> None:
        self.isolated = isolated
        self.files: list[Path] = []
        self.values: dict = {}
        if values is not None:
            self.values = values
            return
        if isolated or os.environ.get("LOOKOUT_NO_CONFIG"):
            self.isolated = True
            return
        user = Path(os.environ["LOOKOUT_CONFIG"]) if os.environ.get("LOOKOUT_CONFIG") else config_dir() / "config.toml"
        project = find_project_file()
        for path in (user, project):
            if path is not None and path.is_file():
                _merge(self.values, _read(path))
                self.files.append(path)

    def get(self, key: str, default: Any = None) -> Any:
        """A dotted key's value: its ``LOOKOUT_*`` variable, else the files, else ``default``."""
        if not self.isolated:
            env = os.environ.get("LOOKOUT_" + key.upper().replace(".", "_").replace("-", "_"))
            if env not in (None, ""):
                return _scalar(env)
        node: Any = self.values
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    def setting(self, key: str, flag: Any = None, default: Any = None) -> Any:
        """A flag wins over the config; the config over the default."""
        return flag if flag is not None else self.get(key, default)
