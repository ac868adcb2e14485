"""aotc report: one self-contained HTML page showing what the compiler did to a model: the
summary, the kernels in schedule order (with a board, their instruction counts and code size),
the arena timeline, the graph after fusion (drawn by graphviz's dot) and the BYOC partition.

``collect`` gathers the data (inspect's dict, plus bench's numbers on a board); ``render_html``
draws it (templates/report.html.j2); ``write_report`` does both."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from aotc.api import ModelLike
from aotc.errors import AotcError
from aotc.report.collect import collect
from aotc.report.graph import require_dot
from aotc.report.html import render_html

__all__ = ["collect", "render_html", "require_dot", "write_report"]


def write_report(model: ModelLike, output: str | os.PathLike[str], board: str | None = None,
                 **options: Any) -> dict[str, Any]:
    """Write the report of ``model`` (compiled with ``options``) to ``output``; returns the
    data it shows."""
    require_dot()  # before compiling and benchmarking, which take a while
    data = collect(model, board=board, **options)
    html = render_html(data)
    try:
        Path(output).write_text(html, encoding="utf-8")
    except OSError as e:
        raise AotcError(f"cannot write the report to {output}: {e.strerror or e}") from None
    return data
