"""Memories kept between chats as Markdown: the store with its scopes and transactions
(``store``), which project a command works on (``project``), export, import and sync
(``exchange``) and learning from chats (``tidy``). Imports ``core``, ``tokens.tokenizer`` and
``formats``."""
