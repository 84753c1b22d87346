"""lookout: manage an AI coding agent's context window from its JSONL transcript."""

# Written here, not read with importlib.metadata: that import alone costs every run ~70 ms.
# pyproject.toml takes the package version from this line.
__version__ = "0.1.0"
