"""The ``lookout`` command (and ``python -m lookout_cli``): a quiet measure of a file unchanged
since the same run is replayed (lookout_cli.meter.replay) before the CLI is even loaded."""

import sys


def main() -> None:
    from lookout_cli.meter.replay import replay

    status = replay(sys.argv[1:])
    if status is not None:
        sys.exit(status)
    from lookout_cli.cli import main as run

    run()


if __name__ == "__main__":
    main()
