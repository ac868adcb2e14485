"""Progress on long work: one tqdm bar per command on a terminal, nothing in pipes, in CI or with
``--quiet``.

A command knows its stages up front (compile, build, one per vector, ...): it makes a
``Progress`` with their count and wraps each in ``stage(label)``. Work inside a stage that has
its own steps (lowering kernel after kernel) reports them with ``detail(text)``, which only
changes the label. Library functions take a ``Progress`` and default to ``QUIET``, which does
nothing, so the Python API never draws.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO


def wanted(quiet: bool = False, stream: TextIO | None = None) -> bool:
    """A bar is drawn on a terminal only: not with --quiet, not when stderr is a pipe or a file,
    not under CI (the CI variable set) and not with AOTC_PROGRESS=0."""
    stream = sys.stderr if stream is None else stream
    if quiet or os.environ.get("CI") or os.environ.get("AOTC_PROGRESS", "1") == "0":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or unusual stream
        return False


def _delay() -> float:
    """Seconds of work before the bar appears (AOTC_PROGRESS_DELAY, default 1): a command that
    finishes sooner draws nothing."""
    try:
        return max(0.0, float(os.environ.get("AOTC_PROGRESS_DELAY", "1")))
    except ValueError:
        return 1.0


class Progress:
    """A bar over ``total`` stages with the current stage's label beside it."""

    def __init__(self, desc: str, total: int, *, quiet: bool = False) -> None:
        self._bar = None
        self._label = ""
        self._shown_after = time.monotonic() + _delay()
        if wanted(quiet):
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=f"aotc {desc}", file=sys.stderr, leave=False,
                             dynamic_ncols=True, mininterval=0.1, delay=_delay(),
                             bar_format="{desc}: {percentage:3.0f}%|{bar}| "
                                        "{n_fmt}/{total_fmt} [{elapsed}]{postfix}")

    @contextmanager
    def stage(self, label: str) -> Iterator[None]:
        self._label = label
        self.detail("")
        yield
        if self._bar is not None:
            self._bar.update(1)

    def set_total(self, total: int) -> None:
        """When the stage count is known only later (vectors read from a file)."""
        if self._bar is not None:
            self._bar.total = total
            self._refresh()

    def detail(self, text: str) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(f"{self._label} {text}".strip(), refresh=False)
            self._refresh()

    def write(self, line: str) -> None:
        """A result line on stderr (printed even when quiet), above the bar when one is drawn."""
        if self._bar is not None:
            self._bar.write(line, file=sys.stderr)
        else:
            print(line, file=sys.stderr)

    def _refresh(self) -> None:
        if self._bar is not None and time.monotonic() >= self._shown_after:
            self._bar.refresh()  # tqdm's own refresh ignores its delay

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


QUIET = Progress("", 0, quiet=True)
