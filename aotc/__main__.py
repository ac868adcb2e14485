"""python -m aotc -> the command-line interface."""

from aotc.cli import main

raise SystemExit(main())
