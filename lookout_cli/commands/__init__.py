"""lookout's subcommands. This folder installs as ``lookout_cli.commands``: one module per
command, named after it (``clear_images.py`` holds ``clear-images``)."""
