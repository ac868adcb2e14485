"""The TFLite builtin table of docs/frontends.md: every builtin TFLite Micro's
MicroMutableOpResolver registers (and every other one aotc converts), with the tensor types
aotc converts it for, from aotc.frontend.tflite.builtins (TYPES, ONNX_OPS), so the table cannot
drift from the converters. `python3 scripts/tflite_table.py` rewrites the table in place;
`--check` exits 1 if it is stale (tests/frontend/test_tflite_doc.py runs the same check)."""

from __future__ import annotations

import sys
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "frontends.md"
BEGIN, END = "<!-- tflite-builtins:begin -->", "<!-- tflite-builtins:end -->"

# The builtins tensorflow/tflite-micro's MicroMutableOpResolver registers (micro_mutable_op_
# resolver.h at 90b983c, August 2026), and its custom operators.
TFLM_BUILTINS = (
    "ABS ADD ADD_N ARG_MAX ARG_MIN ASSIGN_VARIABLE AVERAGE_POOL_2D BATCH_MATMUL "
    "BATCH_TO_SPACE_ND BROADCAST_ARGS BROADCAST_TO CALL_ONCE CAST CEIL CONCATENATION CONV_2D "
    "COS CUMSUM DEPTHWISE_CONV_2D DEPTH_TO_SPACE DEQUANTIZE DIV DYNAMIC_UPDATE_SLICE ELU "
    "EMBEDDING_LOOKUP EQUAL EXP EXPAND_DIMS FILL FLOOR FLOOR_DIV FLOOR_MOD FULLY_CONNECTED "
    "GATHER GATHER_ND GREATER GREATER_EQUAL HARD_SWISH IF L2_NORMALIZATION L2_POOL_2D "
    "LEAKY_RELU LESS LESS_EQUAL LOG LOGICAL_AND LOGICAL_NOT LOGICAL_OR LOGISTIC LOG_SOFTMAX "
    "MAXIMUM MAX_POOL_2D MEAN MINIMUM MIRROR_PAD MUL NEG NOT_EQUAL PACK PAD PADV2 PRELU "
    "QUANTIZE READ_VARIABLE REDUCE_ALL REDUCE_MAX REDUCE_MIN RELU RELU6 RESHAPE "
    "RESIZE_BILINEAR RESIZE_NEAREST_NEIGHBOR REVERSE_V2 ROUND RSQRT SELECT_V2 SHAPE SIN SLICE "
    "SOFTMAX SPACE_TO_BATCH_ND SPACE_TO_DEPTH SPLIT SPLIT_V SQRT SQUARE SQUARED_DIFFERENCE "
    "SQUEEZE STRIDED_SLICE SUB SUM SVDF TANH TRANSPOSE TRANSPOSE_CONV "
    "UNIDIRECTIONAL_SEQUENCE_LSTM UNPACK VAR_HANDLE WHILE ZEROS_LIKE").split()
TFLM_CUSTOM = ("ethos-u (refused: an NPU command stream)", "TFLM_DECODE (refused)",
               "TFLite_Detection_PostProcess (converted: float32 as TFLM, uint8 as LiteRT "
               "dequantises it; fast non-max suppression with max_classes_per_detection 1, "
               "and the regular one; aotc.DetectionPostProcess)")
# The Signal library's custom operators TFLM registers (custom_code "Signal<Op>").
TFLM_SIGNAL = ("Delay Energy FftAutoScale FilterBank FilterBankLog FilterBankSpectralSubtraction "
               "FilterBankSquareRoot Framer Irfft OverlapAdd PCAN Rfft Stacker Window").split()
SIGNAL_TYPES = ("int16", "int32", "float32", "uint32", "uint64")
COLUMNS = ("float32", "int8", "int16")
# Resource variables: no op, a slot of the caller's state buffer (docs/streaming.md).
STATE = ("VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE")
OTHER = ("uint8", "int32", "int64", "bool", "float16", "resource", "none")


def render() -> str:
    sys.path.insert(0, str(DOC.parent.parent))
    from aotc.frontend.tflite.builtins import ONNX_OPS, TYPES

    builtins = {n for n in TYPES if not n.startswith("CUSTOM:")}
    names = sorted(set(TFLM_BUILTINS) | builtins)
    rows = ["| builtin | in TFLM | float32 | int8 | int16 | other types | becomes |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for n in names:
        types = TYPES.get(n, ())
        cells = ["yes" if t in types else "no" for t in COLUMNS]
        other = ", ".join(t for t in OTHER if t in types) or "-"
        onnx = ", ".join(ONNX_OPS.get(n, ())) or (
            "state buffer" if n in STATE else "folded" if n in TYPES else "-")
        rows.append(f"| {n} | {'yes' if n in TFLM_BUILTINS else 'no'} | {' | '.join(cells)} "
                    f"| {other} | {onnx} |")
    counts = {t: sum(1 for n in TFLM_BUILTINS if t in TYPES.get(n, ())) for t in COLUMNS}
    any_type = sum(1 for n in TFLM_BUILTINS if n in TYPES)
    extra = sorted(builtins - set(TFLM_BUILTINS))
    signal = [f"CUSTOM:Signal{n}" for n in TFLM_SIGNAL]
    done = [n for n in signal if n in TYPES]
    srows = ["| custom operator | types | becomes |", "| --- | --- | --- |"]
    for n in signal:
        types = ", ".join(t for t in SIGNAL_TYPES if t in TYPES.get(n, ())) or "refused"
        srows.append(f"| {n[7:]} | {types} | {', '.join(ONNX_OPS.get(n, ())) or '-'} |")
    lines = [
        f"Of the {len(TFLM_BUILTINS)} builtins TFLM registers, aotc converts {any_type} "
        f"(float32: {counts['float32']}, int8: {counts['int8']}, int16: {counts['int16']}); "
        f"it also converts {len(extra)} that TFLM does not register ({', '.join(extra)}). "
        f"TFLM's custom operators: {'; '.join(TFLM_CUSTOM)}; of its Signal library's "
        f"{len(signal)}, aotc converts {len(done)} (the second table). A \"no\" is "
        "refused with the one-line error of the operator (never converted to a different "
        "answer); \"becomes\" names the ONNX ops of the import (\"folded\": computed at "
        "compile time).",
        "",
        *rows,
        "",
        "The Signal library (data operand types; the aotc ops are in "
        "aotc/ops/sequence/audio_*.py):",
        "",
        *srows,
    ]
    return "\n".join(lines) + "\n"


def _section(text: str) -> tuple[int, int]:
    i, j = text.find(BEGIN), text.find(END)
    if i < 0 or j < i:
        raise SystemExit(f"{DOC}: no {BEGIN} ... {END} section")
    return i + len(BEGIN) + 1, j


def current() -> str:
    text = DOC.read_text()
    i, j = _section(text)
    return text[i:j]


def main() -> int:
    table = render()
    if "--check" in sys.argv[1:]:
        if current() != table:
            print(f"{DOC} is stale: run python3 scripts/tflite_table.py", file=sys.stderr)
            return 1
        return 0
    text = DOC.read_text()
    i, j = _section(text)
    DOC.write_text(text[:i] + table + text[j:])
    print(f"wrote the builtin table of {DOC}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
