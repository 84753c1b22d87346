"""Optional TOML configuration, in layers (last wins): the user's config file, the project's
``.lookout.toml`` found upward from the working folder, ``LOOKOUT_*`` variables, then flags.

Keys reuse the product's names, dotted by table: ``compaction.threshold_percent``,
``compaction.tail_turns``, ``model``, ``max_tool_output_chars``, ``models.<name>.context_window``…
A key's variable is ``LOOKOUT_`` plus the key in capitals with dots as underscores
(``LOOKOUT_COMPACTION_THRESHOLD_PERCENT=80``).

Every layer is checked when it is loaded, against ``settings``: an unknown key in a file,
or a value its flag would refuse, stops the run with one line naming the key and the file or
variable it came from. An unknown ``LOOKOUT_*`` variable is a warning, not an error: the
environment is shared with every other program (and prepare-idle's hooks), so a name lookout
does not know may well be meant for something else.
"""

from __future__ import annotations

import os

from lookout_cli.core.errors import LookoutError, quoted
from lookout_cli.core.paths import user_config_file
from lookout_cli.settings import (
    OTHER_VARIABLES,
    SETTINGS,
    TABLES,
    VARIABLES,
    key_spellings,
    nearest,
    variable,
    variable_spellings,
    yes_no,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from typing import Any

PROJECT_FILE = ".lookout.toml"


def _merge(base: dict, extra: dict) -> dict:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value
    return base


def _read(path: str) -> dict:
    import tomllib  # here, not at the top: most runs find no config file (start-up time)

    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise LookoutError(f"{path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise LookoutError(f"{path}: {exc.strerror}") from None


def find_project_file(start: str | os.PathLike | None = None) -> str | None:
    """``.lookout.toml`` in ``start`` (the working folder) or the nearest folder above it."""
    folder = os.path.realpath(start or os.getcwd())
    while True:
        path = os.path.join(folder, PROJECT_FILE)
        if os.path.isfile(path):
            return path
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def _scalar(text: str) -> Any:
    """Read a variable's value as a TOML scalar when it is one (80, 0.75, true), else text."""
    import tomllib

    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def _check(values: dict, where: str, table: str = "") -> None:
    """Refuse an unknown key or a value its setting refuses, in a file's ``values``."""
    for name, value in values.items():
        key = table + name
        setting = SETTINGS.get(key)
        if setting is not None:
            try:
                setting.check(value)
            except (ValueError, LookoutError) as exc:
                raise LookoutError(f"{where}: {key}: {exc}") from None
        elif isinstance(value, dict) and (value or key in TABLES):
            _check(value, where, key + ".")  # a table, known or not: its keys say what is wrong
        elif key in TABLES:
            raise LookoutError(f"{where}: {key}: {quoted(value)} is not a table of settings")
        else:
            raise LookoutError(f"{where}: unknown key {key!r}{nearest(key, key_spellings())}")


def _from_variable(key: str, name: str, text: str) -> Any:
    """Variable ``name``'s value for ``key``, checked as in a file."""
    setting = SETTINGS.get(key)
    if setting is None:  # a key missing from the table: read as before (test_config checks there is none)
        return _scalar(text)
    value = text if setting.text else _scalar(text)
    try:
        setting.check(value)
    except (ValueError, LookoutError) as exc:
        raise LookoutError(f"{name}: {key}: {exc}") from None
    return value


def _no_config() -> bool:
    """``LOOKOUT_NO_CONFIG``, a yes/no setting (unset or empty: no)."""
    text = os.environ.get("LOOKOUT_NO_CONFIG", "")
    try:
        return bool(text.strip()) and yes_no(text)
    except ValueError as exc:
        raise LookoutError(f"LOOKOUT_NO_CONFIG: {exc}") from None


def _user_file() -> str | None:
    """``$LOOKOUT_CONFIG``, which must be there; else the user's config file, if any."""
    path = user_config_file()
    if not os.environ.get("LOOKOUT_CONFIG"):
        return path if os.path.isfile(path) else None
    if not os.path.exists(path):
        raise LookoutError(f"LOOKOUT_CONFIG: {path}: no such file")
    return path


class Config:
    """Merged settings. ``isolated`` ignores every file and variable (hermetic CI).
    ``warnings``: what the caller should say (the unknown ``LOOKOUT_*`` variables)."""

    def __init__(self, isolated: bool = False, values: dict | None = None) -> None:
        self.isolated = isolated
        self.files: list[str] = []
        self.values: dict = {}
        self.warnings: list[str] = []
        if values is not None:
            self.values = values
            return
        if isolated or _no_config():
            self.isolated = True
            return
        for path in (_user_file(), find_project_file()):
            if path is not None:
                values = _read(path)
                _check(values, path)
                _merge(self.values, values)
                self.files.append(path)
        for name, text in os.environ.items():
            if not name.startswith("LOOKOUT_") or name in OTHER_VARIABLES or text == "":
                continue
            if name in VARIABLES:
                _from_variable(VARIABLES[name], name, text)
            else:
                hint = nearest(name.removeprefix("LOOKOUT_"), variable_spellings())
                self.warnings.append(f"{name} is not a lookout setting: ignored{hint}")

    def get(self, key: str, default: Any = None) -> Any:
        """A dotted key's value: its ``LOOKOUT_*`` variable, else the files, else ``default``."""
        setting = SETTINGS.get(key)
        if not self.isolated and (setting is None or setting.variable):
            name = variable(key)
            env = os.environ.get(name)
            if env not in (None, ""):
                return _from_variable(key, name, env)
        node: Any = self.values
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    def setting(self, key: str, flag: Any = None, default: Any = None) -> Any:
        """A flag wins over the config; the config over the default."""
        return flag if flag is not None else self.get(key, default)
