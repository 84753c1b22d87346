"""lookout: manage an AI coding agent's context window from its JSONL transcript."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("lookout")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0"
