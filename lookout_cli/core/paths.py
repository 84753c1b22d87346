"""Where lookout keeps its files: XDG folders, with LOOKOUT_* variables taking precedence.

As ``Path`` objects (``cache_dir``…, through xdg_base_dirs), and as text (``cache_folder``,
``user_config_file``) for what runs on every prompt: a hook's measure, the status line and the
replay open a few files there and load neither xdg_base_dirs nor pathlib (which imports
urllib.parse and ipaddress: 5% of a prompt's re-measure). tests/test_measure_replay.py holds
the text forms to xdg_base_dirs' folders."""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from pathlib import Path


def _xdg(kind: str) -> Path:
    import xdg_base_dirs

    return getattr(xdg_base_dirs, f"xdg_{kind}_home")()


def _xdg_home(variable: str, default: str) -> str:
    """``xdg_base_dirs``' folder as text: the variable when it names an absolute path."""
    value = os.environ.get(variable, "")
    return value if os.path.isabs(value) else os.path.join(os.path.expanduser("~"), default)


def cache_folder() -> str:
    """``cache_dir()`` as text."""
    return os.environ.get("LOOKOUT_CACHE_DIR") or os.path.join(_xdg_home("XDG_CACHE_HOME", ".cache"), "lookout")


def user_config_file() -> str:
    """The user's config file: ``$LOOKOUT_CONFIG``, else ``$XDG_CONFIG_HOME/lookout/config.toml``."""
    return os.environ.get("LOOKOUT_CONFIG") or os.path.join(_xdg_home("XDG_CONFIG_HOME", ".config"), "lookout",
                                                            "config.toml")


def data_dir() -> Path:
    """``$LOOKOUT_DATA_DIR``, else ``$XDG_DATA_HOME/lookout``."""
    from pathlib import Path

    return Path(os.environ.get("LOOKOUT_DATA_DIR") or _xdg("data") / "lookout")


def cache_dir() -> Path:
    """``$LOOKOUT_CACHE_DIR``, else ``$XDG_CACHE_HOME/lookout``."""
    from pathlib import Path

    return Path(os.environ.get("LOOKOUT_CACHE_DIR") or _xdg("cache") / "lookout")


def save_dir(flag: str | os.PathLike | None = None) -> Path:
    """The saved-output store: ``--save-dir``, then ``$LOOKOUT_SAVE_DIR``, then the data folder."""
    from pathlib import Path

    if flag:
        return Path(flag)
    if os.environ.get("LOOKOUT_SAVE_DIR"):
        return Path(os.environ["LOOKOUT_SAVE_DIR"])
    return data_dir() / "saved"
