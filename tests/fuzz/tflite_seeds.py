"""Seed models of the .tflite fuzzer: small models built with tests/frontend/tflite_builder.py
(float32, int8 and 16x8 versions of many builtins), resource-variable and SVDF models with
variable tensors (tests/frontend/stateful_tflite.py), and the small public fixtures of
tests/fixtures/tflite_zoo. Every seed compiles with aotc and matches TFLM unmutated
(tests/fuzz/test_fuzz_tflite.py checks it).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
for _p in (TESTS / "frontend", TESTS):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

ZOO = TESTS / "fixtures" / "tflite_zoo"
ZOO_SEEDS = ("fingerprint_mean_int8", "magic_wand_int8", "micro_speech_int8")
# 1x1 CONV_2D, then one builtin of tests/frontend/tflite_cases.py (float32 and int8).
OP_CASES = ("MAXIMUM", "DIV", "REDUCE_MAX", "PACK", "GATHER", "RESIZE_BILINEAR", "SPLIT_V",
            "BATCH_MATMUL", "STRIDED_SLICE_shrink", "MEAN", "CONCATENATION_h", "PAD", "LOGISTIC",
            "HARD_SWISH", "SQUEEZE", "MUL")
# float32 only: aotc or TFLM has no int8 version (PRELU, L2_POOL_2D, LOG_SOFTMAX; TILE: TFLM
# has none, LiteRT is the reference), or the int8 version differs from TFLM by 1 LSB on
# full-range inputs (TRANSPOSE_CONV, LEAKY_RELU: open, see the fuzz report in issue 23).
FLOAT_CASES = ("PRELU", "L2_POOL_2D", "LOG_SOFTMAX", "TILE", "TRANSPOSE_CONV", "LEAKY_RELU")
# int16 activations, int8 weights (tests/frontend/test_tflite_int16.py).
INT16_CASES = ("CONV_2D", "FULLY_CONNECTED", "ADD", "AVERAGE_POOL_2D", "TRANSPOSE")


def _uint8_spec(name: str, kind: str) -> bytes:
    from test_tflite_uint8 import SPECS
    from tflite_builder import float_and_int8

    spec, shapes = SPECS[name]
    return float_and_int8(spec, shapes)[kind][0]


def _op_case(name: str, kind: str) -> bytes:
    from test_tflite_ops import CASES, SHAPE, _conv
    from tflite_builder import float_and_int8

    def spec(net):  # type: ignore[no-untyped-def]
        x, s = _conv(net, net.input(SHAPE), SHAPE, 4, k=1)
        return [CASES[name](net, x, s)]
    return float_and_int8(spec, [SHAPE])[kind][0]


def _int16_case(name: str) -> bytes:
    from test_tflite_int16 import _spec, float_and_int16

    return float_and_int16(_spec(name, False))[0]


def _stateful(name: str) -> bytes:
    import stateful_tflite as st

    return {"accumulator_int8": lambda: st.accumulator(True),
            "accumulator_f32": lambda: st.accumulator(False),
            "svdf_int8": lambda: st.svdf(True),
            "svdf_f32": lambda: st.svdf(False)}[name]()


def _builders() -> dict[str, Callable[[], bytes]]:
    out: dict[str, Callable[[], bytes]] = {}
    for name in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "pools_softmax",
                 "kws_like"):
        for kind in ("float", "int8"):
            out[f"{name.lower()}_{kind}"] = functools.partial(_uint8_spec, name, kind)
    for name in OP_CASES:
        for kind in ("float", "int8"):
            out[f"op_{name.lower()}_{kind}"] = functools.partial(_op_case, name, kind)
    for name in FLOAT_CASES:
        out[f"op_{name.lower()}_float"] = functools.partial(_op_case, name, "float")
    for name in INT16_CASES:
        out[f"{name.lower()}_int16"] = functools.partial(_int16_case, name)
    for name in ("accumulator_int8", "accumulator_f32", "svdf_int8", "svdf_f32"):
        out[name] = functools.partial(_stateful, name)
    for name in ZOO_SEEDS:
        out[f"zoo_{name}"] = functools.partial((ZOO / f"{name}.tflite").read_bytes)
    return out


SEEDS = _builders()


@functools.cache
def seed_bytes(name: str) -> bytes:
    return SEEDS[name]()
