"""Images in a transcript: headers, sizes and each provider's token costs and limits read
without decoding (``probe``), fitting an image within those limits (``fit``, pillow), and
``clear-images``' engines: the byte budget (``budget``) and repair (``repair``). Imports
``core``, ``tokens.tokenizer`` and ``formats``."""
