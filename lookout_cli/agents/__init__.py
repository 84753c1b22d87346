"""Inside running agents: answering Claude Code's and Codex's hook events in their own
protocols (``hooks``, with the events' shapes in ``events``), the one-line status line read
from a session's end (``status``), and the recipes that install both into an agent's
settings without clobbering them (``install``). Imports ``options`` and below: ``config``,
``compaction.note``, ``memory``, ``meter``, ``formats`` and ``core``."""
