"""The ``lookout`` command (and ``python -m lookout_cli``): a quiet measure of a file unchanged
since the same run is replayed (lookout_cli.meter.replay) before the CLI is even loaded."""

import sys


def main() -> None:
    # Ctrl-C while the command line is still loading (click and a command take 0.05-0.1 s to
    # import) gets the same line and status as later on, not a traceback.
    try:
        from lookout_cli.meter.replay import replay

        status = replay(sys.argv[1:])
        if status is not None:
            sys.exit(status)
        if sys.argv[1:2] == ["statusline"]:  # runs after every agent message: no click
            from lookout_cli.agents.status import main as status_line

            status = status_line(sys.argv[2:])
            if status is not None:
                sys.exit(status)
        if sys.argv[1:2] == ["hook"]:  # runs on every prompt: click only for what needs it
            from lookout_cli.agents.hooks import main as hook

            status = hook(sys.argv[2:])
            if status is not None:
                sys.exit(status)
        from lookout_cli.cli import main as run

        run()
    except KeyboardInterrupt:
        sys.stderr.write("lookout: interrupted\n")
        sys.exit(130)


if __name__ == "__main__":
    main()
