"""Write docs/operators.md: per op, the dtypes, the ONNX node tests passing / in the static
subset, and the reasons for the rest (aotc.verification.coverage; `aotc ops` prints the same table).
Run after changing an op or aotc/data/onnx_node_exclusions.txt; a test checks it is current."""

from __future__ import annotations

from pathlib import Path

from aotc.verification.coverage import render_markdown

if __name__ == "__main__":
    out = Path(__file__).resolve().parent.parent / "docs" / "operators.md"
    out.write_text(render_markdown())
    print(f"wrote {out}")
