"""The one place that picks a convolution's schedule, in this order: in place by line
(line.py), the integer depthwise schedule of the DSP extension (depthwise_int.py), the float
depthwise plane (depthwise_float.py), and for constant weights the column schedules of
Helium (mve.py) and of the DSP extension (dsp.py), else the generic register tiles
(tiled.py). Conv.lower states the computation (aotc/ops/nn/conv.py) and writes the plain loop
nest when no schedule applies. The order of the knob questions is part of the kernel's
schedule space (bundle.json "workloads"): keep it.
"""

from __future__ import annotations

from typing import Any

from aotc.schedules.conv import knobs as CONV
from aotc.schedules.conv.depthwise_float import float_depthwise_ok, lower_float_depthwise
from aotc.schedules.conv.depthwise_int import depthwise_ok, lower_depthwise
from aotc.schedules.conv.dsp import lower_conv_dsp
from aotc.schedules.conv.line import lower_line
from aotc.schedules.conv.mve import lower_conv_mve, mve_conv_ok
from aotc.schedules.conv.tiled import lower_tiled


def run_schedule(conv: Any, node: Any, kb: Any, X: Any, W: Any, B: Any, arith: Any,
                 pads: tuple[list[int], list[int]], s: list[int], d: list[int]) -> bool:
    """Lower the conv ``node`` (``conv``: its OpDef, for the window helpers the schedules
    share) with the schedule that applies; False when none does."""
    inplace = node.attrs.get("_inplace")  # aotc/steps/inplace.py conv_inplace_modes
    # 16x8 (int16 inputs): the tiled schedule (IntArith's int64 or int32 sums) and the DSP
    # one where IntArith.dsp_ok allows it; the depthwise, Helium and in-place schedules read
    # 8-bit inputs.
    x16 = not arith.acc.is_float and X.dtype.itemsize > 1
    if x16 and inplace is not None:
        return False
    m_per_g = kb.outputs[0].shape[1] // node.attrs["group"]
    if inplace == "line":  # in place through a ring of output rows
        lower_line(conv, node, kb, X, B, arith, pads, s, d)
        return True
    if (inplace is None and not x16 and depthwise_ok(node, kb, arith, pads)
            and kb.knob(CONV.PATH) == "simd"):  # writes Y directly
        lower_depthwise(node, kb, X, B, arith, pads, s, d)
        return True
    if inplace is None and float_depthwise_ok(node, kb, arith, pads):  # writes Y directly
        lower_float_depthwise(node, kb, X, B, arith, pads, s, d)
        return True
    if kb.input_const(1) is None or not (
            m_per_g >= 2 or inplace == "pixel"
            or (inplace is None and kb.knob(CONV.TILE_PIXELS,
                                            integer=not arith.acc.is_float) > 1)):
        return False
    by_pixel = inplace == "pixel"
    if m_per_g > 1 and not by_pixel:  # the SIMD schedules write Y directly
        # Helium: needs the input zero point folded into the bias.
        if mve_conv_ok(node, kb, arith) and not arith.x_zp:
            lower_conv_mve(conv, node, kb, X, B, arith, pads, s, d)
            return True
        if ("dsp" in kb.features and kb.unroll_tiles and arith.dsp_ok(kb.input_const(1))
                and kb.knob(CONV.PATH) == "simd"):
            lower_conv_dsp(conv, node, kb, X, B, arith, pads, s, d)
            return True
    # Depthwise (one output channel per group) too when pixels share weight loads.
    lower_tiled(conv, node, kb, X, W, B, arith, pads, s, d, by_pixel=by_pixel)
    return True
