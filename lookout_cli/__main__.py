"""The ``lookout`` command (and ``python -m lookout_cli``): a quiet measure of a file unchanged
since the same run is replayed (lookout_cli.meter.replay) before the CLI is even loaded."""

import sys


def _load_orjson() -> None:
    """Import orjson with Ctrl-C held back: a KeyboardInterrupt raised while its extension
    initialises crashes the process (SIGSEGV, orjson 3.13); the signal is delivered right after."""
    import signal

    if not hasattr(signal, "pthread_sigmask"):  # Windows: no signal masks
        import orjson  # noqa: F401
        return
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        import orjson  # noqa: F401
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def main() -> None:
    # Ctrl-C while the command line is still loading (click and a command take 0.05-0.1 s to
    # import) gets the same line and status as later on, not a traceback.
    try:
        from lookout_cli.meter.replay import replay

        status = replay(sys.argv[1:])
        if status is not None:
            sys.exit(status)
        _load_orjson()
        from lookout_cli.cli import main as run

        run()
    except KeyboardInterrupt:
        sys.stderr.write("lookout: interrupted\n")
        sys.exit(130)


if __name__ == "__main__":
    main()
