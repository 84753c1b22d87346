"""The files lookout ships: the tokenizers' rank tables and the models catalogue."""

import os

HERE = os.path.dirname(os.path.abspath(__file__))


def read_bytes(name: str) -> bytes:
    """A shipped file's bytes. Read beside this module, not through importlib.resources, which
    imports tempfile, zipfile and more (15 ms of every command's start) for installs from zip
    files lookout does not support."""
    with open(os.path.join(HERE, name), "rb") as handle:
        return handle.read()
