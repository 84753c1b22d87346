"""Where lookout keeps its files: XDG folders, with LOOKOUT_* variables taking precedence."""

from __future__ import annotations

import os
from pathlib import Path


def _xdg(kind: str) -> Path:
    import xdg_base_dirs

    return getattr(xdg_base_dirs, f"xdg_{kind}_home")()


def data_dir() -> Path:
    """``$LOOKOUT_DATA_DIR``, else ``$XDG_DATA_HOME/lookout``."""
    return Path(os.environ.get("LOOKOUT_DATA_DIR") or _xdg("data") / "lookout")


def config_dir() -> Path:
    return _xdg("config") / "lookout"


def cache_dir() -> Path:
    """``$LOOKOUT_CACHE_DIR``, else ``$XDG_CACHE_HOME/lookout``."""
    return Path(os.environ.get("LOOKOUT_CACHE_DIR") or _xdg("cache") / "lookout")


def save_dir(flag: str | os.PathLike | None = None) -> Path:
    """The saved-output store: ``--save-dir``, then ``$LOOKOUT_SAVE_DIR``, then the data folder."""
    if flag:
        return Path(flag)
    if os.environ.get("LOOKOUT_SAVE_DIR"):
        return Path(os.environ["LOOKOUT_SAVE_DIR"])
    return data_dir() / "saved"
