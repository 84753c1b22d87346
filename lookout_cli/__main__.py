"""Run lookout as ``python -m lookout_cli``."""

from lookout_cli.cli import main

if __name__ == "__main__":
    main()
