"""The context meter: what fills a transcript's model-visible context (``analysis``), its
readable and JSON report and plot, and what makes a repeated ``measure`` cheap: the
incremental state, the line memo, the snapshot and the replay of an unchanged run, counting
ahead with ``--jobs``. Imports ``core``, ``tokens.tokenizer``, ``formats`` and ``images.probe``."""
