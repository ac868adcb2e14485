"""The knob table of docs/tuning.md, made from aotc.schedules.KNOBS (a test checks the doc holds
it): ``python -m aotc.tune.knobdoc docs/tuning.md`` rewrites the table between its markers."""

from __future__ import annotations

import sys
from pathlib import Path

from aotc.schedules import KNOBS, Context

BEGIN, END = "<!-- knobs:begin (python -m aotc.tune.knobdoc) -->", "<!-- knobs:end -->"
_CONTEXTS = {"MCU, integer": Context(frozenset(), True),
             "MCU with FPU, float": Context(frozenset({"fpu"}), False),
             "host, integer": Context(frozenset({"autovec"}), True),
             "host, float": Context(frozenset({"autovec", "fpu"}), False)}


def _v(v: object) -> str:
    return f"`{str(v).lower() if isinstance(v, bool) else v}`"


def table() -> str:
    heads = ["knob", "choices", *(f"default ({c})" for c in _CONTEXTS), "meaning"]
    lines = ["| " + " | ".join(heads) + " |", "|" + " --- |" * len(heads)]
    for k in sorted(KNOBS.values(), key=lambda k: k.name):
        cells = [f"`{k.name}`", ", ".join(_v(c) for c in k.choices),
                 *(_v(k.default(ctx)) for ctx in _CONTEXTS.values()), " ".join(k.doc.split())]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def rewrite(doc: Path) -> None:
    text = doc.read_text()
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    doc.write_text(f"{head}{BEGIN}\n{table()}\n{END}{tail}")


if __name__ == "__main__":
    rewrite(Path(sys.argv[1]))
