"""TFLite int4 filters (TensorType INT4, two values a byte, low nibble first) of CONV_2D,
DEPTHWISE_CONV_2D and FULLY_CONNECTED with int8 activations: the graph of each case is
test_tflite_ops's, its float ranges from LiteRT, its weights quantised to [-8, 7] per channel
and packed as TFLite's converter writes them.

Reference: TensorFlow Lite Micro's Python interpreter, which runs these models (it unpacks the
filter with UnpackDenseInt4IntoInt8 and runs its int8 kernel). Tolerance: none, bit-exact. The
generated weights hold the packed bytes (half the int8 size) and no int8 copy of the filter.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as S
from test_tflite_ops import CASES, SHAPE
from tflite_builder import Net, interpret, interpret_tflm, options

import aotc
from aotc.errors import AotcError


def pack(q: np.ndarray) -> np.ndarray:
    """int4 values two to a byte, low nibble first (TFLite's layout), written here
    independently of aotc's packer."""
    f = [int(v) & 0xF for v in q.reshape(-1)] + ([0] if q.size % 2 else [])
    return np.array([f[i] | (f[i + 1] << 4) for i in range(0, len(f), 2)], np.uint8)


class Net4(Net):
    """tflite_builder.Net whose weights are int4: symmetric per-channel scales max|w| / 7."""

    def weight(self, arr: np.ndarray, axis: int | None = 0) -> int:
        if not self.quant:
            return super().weight(arr, axis)
        red = tuple(k for k in range(arr.ndim) if k != axis) if axis is not None else None
        scale = (np.maximum(np.abs(arr).max(axis=red), 1e-6) / 7).astype(np.float32)
        shape = [1] * arr.ndim
        if axis is not None:
            shape[axis] = -1
        q = np.clip(np.round(arr / scale.reshape(shape)), -8, 7).astype(np.int8)
        t = self._tensor(arr.shape, np.int8, f"w{len(self.tensors)}", q, scale,
                         np.zeros(np.size(scale), np.int64), axis or 0)
        self.tensors[t].type = S.TensorType.INT4
        self.buffers[self.tensors[t].buffer].data = pack(q)
        return t


def _odd_conv(net: Net, x: int, s: tuple[int, ...]) -> int:
    """3 filters of 3x3x1 over one channel: 27 int4 values, the last byte half used."""
    n, h, w, _ = s
    x1 = net.op("STRIDED_SLICE", [x, net.ints([0, 0, 0, 0]), net.ints([n, h, w, 1]),
                                  net.ints([1, 1, 1, 1])], (n, h, w, 1),
                options("StridedSliceOptions"))
    wt = net.weight(net.rng.normal(scale=0.5, size=(3, 3, 3, 1)))
    b = net.bias(net.rng.normal(scale=0.1, size=3), x1, wt)
    return net.op("CONV_2D", [x1, wt, b], (n, h, w, 3), options(
        "Conv2DOptions", padding=0, strideH=1, strideW=1, fusedActivationFunction=0))


SPECS: dict[str, Callable[[Net, int, tuple[int, ...]], int]] = {
    **{k: CASES[k] for k in ("CONV_2D", "CONV_2D_valid_stride2_dil", "CONV_2D_dilated",
                             "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")},
    "CONV_2D_odd": _odd_conv,
}


def int4_model(case: str, seed: int = 0) -> tuple[bytes, list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    xs = [rng.normal(size=SHAPE).astype(np.float32)]

    def spec(net: Net) -> list[int]:
        return [SPECS[case](net, net.input(SHAPE), SHAPE)]
    fnet = Net4(False, seed=seed)
    _, named = interpret(fnet.build(spec(fnet)), xs, all_tensors=True)
    ranges = {k: (float(v.min()), float(v.max())) for k, v in named.items()
              if v.dtype == np.float32 and v.size}
    qnet = Net4(True, ranges, seed=seed)
    model = qnet.build(spec(qnet))
    q = qnet.tensors[qnet.inputs[0]].quantization
    x = np.clip(np.round(xs[0] / q.scale[0]) + q.zeroPoint[0], -128, 127).astype(np.int8)
    return model, [x]


def _int4_sizes(model: bytes) -> list[int]:
    m = S.ModelT.InitFromPackedBuf(model, 0)
    return [int(np.prod(t.shape)) for t in m.subgraphs[0].tensors
            if t.type == S.TensorType.INT4]


def _compile(model: bytes, xs: Sequence[np.ndarray], tmp: Path, target: str | None
             ) -> tuple[np.ndarray, str]:
    (tmp / "m.tflite").write_bytes(model)
    bundle = aotc.compile(tmp / "m.tflite", tmp / "out", name="m", target=target)
    runner = bundle.load()
    got = runner.run({runner.meta["inputs"][0]["name"]: xs[0]})
    return got[runner.meta["outputs"][0]["name"]], (tmp / "out" / "m_weights.c").read_text()


@pytest.mark.parametrize("target", [None, "cortex-m4f"])
@pytest.mark.parametrize("case", list(SPECS))
def test_int4_filter(case, target, tmp_path):
    model, xs = int4_model(case)
    want = interpret_tflm(model, xs)[0]
    got, weights = _compile(model, xs, tmp_path, target)
    assert got.dtype == want.dtype and got.shape == want.shape
    diff = np.nonzero(got.ravel() != want.ravel())[0]
    assert diff.size == 0, f"{diff.size} of {want.size} differ from TFLM"
    # The filter is in flash packed: a uint8 array of ceil(n / 2) bytes, no int8 array of n.
    (n,) = _int4_sizes(model)
    arrays = {(m[1], int(m[3])) for m in re.finditer(
        r"const (u?int8)_t (\w+)\[(\d+)\]", weights)}
    assert ("uint8", (n + 1) // 2) in arrays, arrays
    assert ("int8", n) not in arrays, arrays


def test_int4_elsewhere_refused(tmp_path):
    """An int4 tensor that is not such a filter (here ADD's constant operand): one line."""
    net = Net4(True, {"input0": (-1.0, 1.0)})
    x = net.input(SHAPE)
    c = net.weight(np.linspace(-1, 1, SHAPE[3]).reshape(1, 1, 1, SHAPE[3]), axis=None)
    y = net.op("ADD", [x, c], SHAPE, options("AddOptions"))
    (tmp_path / "m.tflite").write_bytes(net.build([y]))
    # The importer's validation step refuses it first (ADD's operands differ in type); the
    # converter's own check ("is int4: TFLM reads int4 only as the filter ...") backs it up.
    with pytest.raises(AotcError, match="operator 0 ADD: inputs of types int8, int4"):
        aotc.compile(tmp_path / "m.tflite", tmp_path / "out", name="m")


def test_int4_bad_size(tmp_path):
    """A packed buffer of the wrong length: the tensor named, not a traceback."""
    model, _ = int4_model("FULLY_CONNECTED")
    m: Any = S.ModelT.InitFromPackedBuf(model, 0)
    t = next(t for t in m.subgraphs[0].tensors if t.type == S.TensorType.INT4)
    m.buffers[t.buffer].data = m.buffers[t.buffer].data[:-1]
    import flatbuffers

    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    (tmp_path / "m.tflite").write_bytes(bytes(b.Output()))
    with pytest.raises(AotcError, match="packed int4 values"):
        aotc.compile(tmp_path / "m.tflite", tmp_path / "out", name="m")
