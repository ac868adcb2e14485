"""The flash-aware default of the int16-widened weights (conv.dsp_wide, gemm.dsp_wide).

Widened weights take twice the flash of the packed int8 ones (1.4-1.9x a whole MLPerf Tiny
model's) for fewer cycles. Where a core prefers them (the knobs' per-core defaults), the
compiler (aotc/compiler.py) estimates the bundle's flash with every candidate layer packed,
then widens the layers with the most MACs per extra flash byte first while the estimate stays
within the part's flash less APP_MARGIN (board.toml [part] flash_bytes); the other layers keep
packed int8 weights. A knob a schedule sets (a tuning log) is not a candidate: its value wins.
The choice is deterministic: ties go to the node name."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

WIDE_KNOBS = ("conv.dsp_wide", "gemm.dsp_wide")
# The share of the part's flash left to the application (its own code, libc, the runtime's
# driver and data): the bundle's estimated flash stays within the rest.
APP_MARGIN = 0.25


def flash_limit(part_flash: int) -> int:
    """Bytes of flash the bundle may take on a part of ``part_flash`` bytes (0: no limit)."""
    return int(part_flash * (1 - APP_MARGIN))


@dataclass(frozen=True)
class Candidate:
    node: str  # the step's node name
    macs: int  # MACs of one run of the layer
    extra: int  # flash bytes its widened weights take beyond its packed ones


def choose_wide(candidates: Iterable[Candidate], packed_flash: int, limit: int) -> set[str]:
    """The nodes to widen: the most MACs per extra byte first, each while the estimate
    (``packed_flash``: the bundle with every candidate packed) stays within ``limit``; a
    layer that does not fit is skipped and smaller ones after it may still be taken."""
    room = limit - packed_flash
    chosen: set[str] = set()
    order = sorted(candidates, key=lambda c: (-(c.macs / c.extra) if c.extra > 0
                                              else float("-inf"), c.node))
    for c in order:
        if c.extra <= room:
            chosen.add(c.node)
            room -= max(c.extra, 0)
    return chosen
