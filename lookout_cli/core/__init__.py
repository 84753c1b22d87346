"""The shared core every other package stands on: errors and exit codes, JSONL records kept as
their original bytes, files written atomically, where lookout keeps things, configuration,
the terminal reporter, saved outputs and the secret gate. It imports nothing else of
lookout (``data`` aside)."""
