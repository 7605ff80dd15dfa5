"""Command-line entry points: `controllerd` (the daemon) and its config (`cli.config`)."""
