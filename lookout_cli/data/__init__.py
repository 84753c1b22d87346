"""The files lookout ships: the tokenizers' rank tables and the models catalogue."""

from pathlib import Path

HERE = Path(__file__).parent


def read_bytes(name: str) -> bytes:
    """A shipped file's bytes. Read beside this module, not through importlib.resources, which
    imports tempfile, zipfile and more (15 ms of every command's start) for installs from zip
    files lookout does not support."""
    return (HERE / name).read_bytes()
