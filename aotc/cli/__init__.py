"""aotc's command line (commands.py: one cmd_* per command, the parser, main); the options the
compiling commands share (options.py); `aotc tune` (tune.py)."""

from aotc.cli.commands import main

__all__ = ["main"]
