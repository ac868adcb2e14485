"""docs/tuning.md lists every schedule knob, with its choices and defaults, as generated from
aotc.schedules.KNOBS (regenerate: python -m aotc.tune.knobdoc docs/tuning.md)."""

from __future__ import annotations

from pathlib import Path

from aotc.schedules import KNOBS
from aotc.tune.knobdoc import BEGIN, END, table

DOC = Path(__file__).resolve().parents[2] / "docs" / "tuning.md"


def test_the_knob_table_is_current() -> None:
    text = DOC.read_text()
    block = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert block == table(), "run: python -m aotc.tune.knobdoc docs/tuning.md"
    for name in KNOBS:
        assert f"| `{name}` |" in block
