"""``@``-mentions: finding them in a prompt (``parse``), the ignore rules that keep secrets
and build output out (``ignore``), and turning each into an attachment (``resolve``).
Imports ``core``, ``tokens.tokenizer``, ``formats`` and ``images.probe``."""
