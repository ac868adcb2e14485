"""AotcError: the only exception type a user of aotc ever sees.

It names the node and op a problem belongs to (when there is one) so the CLI can print a single
line such as ``aotc: node 'conv1' (Conv): attribute 'foo' is not supported``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class AotcError(Exception):
    """A user-facing error: bad model, unsupported feature or failed verification."""

    def __init__(self, reason: str, node: str | None = None, op: str | None = None,
                 details: Sequence[str] = ()) -> None:
        self.reason = reason
        self.node = node
        self.op = op
        # One problem per item (every unsupported operator of a model, ...): the CLI prints
        # each on its own line after the reason.
        self.details = [" ".join(str(d).split()) for d in details]
        # What a failed verification had measured (aotc.verify(per_node=True) puts its rows
        # here), for a caller that wants to see where the error started.
        self.report: dict[str, Any] | None = None
        super().__init__(self.one_line())

    def one_line(self) -> str:
        where = ""
        if self.node is not None and self.op is not None:
            where = f"node {self.node!r} ({self.op}): "
        elif self.op is not None:
            where = f"op {self.op}: "
        elif self.node is not None:
            where = f"node {self.node!r}: "
        text = where + self.reason
        if self.details:
            text += ": " + "; ".join(self.details)
        # One line, always: a model can put newlines into names.
        return " ".join(text.split())

    def lines(self) -> list[str]:
        """The reason, then each detail on its own line (what the CLI prints)."""
        if not self.details:
            return [self.one_line()]
        head = AotcError(self.reason, self.node, self.op).one_line()
        return [head + ":"] + ["  " + d for d in self.details]
