"""Tokens and the limits they are held to: the tokenizer (tiktoken with the rank files shipped
in ``data``), the block cache on disk, pricing by a sample, the model catalogue (windows,
output limits, prices) and budgets. Imports only ``core`` and ``data``."""
