"""Per-channel quantisation parameters as TFLite files write them: a 1-D bias whose
quantized_dimension says 3 (TFLM reads a 1-D tensor along its only axis: the model is valid,
and aotc used to crash in constant folding with an IndexError naming no cause) compiles and is
bit-exact with TFLM; a quantized_dimension outside a weight's shape, or a scale count that is
not the channel count, is a one-line error naming the tensor."""

from __future__ import annotations

import numpy as np
import pytest
from tflite_builder import Net, interpret_tflm, options

import aotc


def _conv_model(edit) -> bytes:
    net = Net(True, seed=3)
    x = net.input((1, 6, 6, 3))
    w = net.weight(net.rng.normal(scale=0.5, size=(4, 3, 3, 3)))  # per-channel, axis 0
    b = net.bias(net.rng.normal(scale=0.1, size=4), x, w)
    edit(net, w, b)
    y = net.op("CONV_2D", [x, w, b], (1, 6, 6, 4),
               options("Conv2DOptions", padding=0, strideH=1, strideW=1))
    return net.build([y])


def _compile(model: bytes, tmp_path):
    path = tmp_path / "m.tflite"
    path.write_bytes(model)
    return aotc.compile(path, tmp_path / "out", name="m")


def test_bias_quantized_dimension_3_is_read_along_its_axis(tmp_path):
    def edit(net, w, b):
        net.tensors[b].quantization.quantizedDimension = 3
    model = _conv_model(edit)
    runner = _compile(model, tmp_path).load()
    rng = np.random.default_rng(0)
    for _ in range(4):
        x = rng.integers(-128, 128, (1, 6, 6, 3), dtype=np.int8)
        got = runner.run({runner.meta["inputs"][0]["name"]: x})
        np.testing.assert_array_equal(got[runner.meta["outputs"][0]["name"]],
                                      interpret_tflm(model, [x])[0])


@pytest.mark.parametrize("what, match", [
    ("axis", r"quantized_dimension 5 is not an axis of its shape \[4, 3, 3, 3\]"),
    ("count", r"3 per-channel scales for 4 channels along axis 0")])
def test_bad_per_channel_parameters_are_one_line_errors(what, match, tmp_path):
    def edit(net, w, b):
        q = net.tensors[w].quantization
        if what == "axis":
            q.quantizedDimension = 5
        else:
            q.scale, q.zeroPoint = q.scale[:3], q.zeroPoint[:3]
    with pytest.raises(aotc.AotcError, match=match) as e:
        _compile(_conv_model(edit), tmp_path)
    assert "\n" not in str(e.value)


def test_zero_point_outside_the_type_is_an_error(tmp_path):
    def edit(net, w, b):
        net.tensors[net.inputs[0]].quantization.zeroPoint = np.array([-129], np.int64)
    with pytest.raises(aotc.AotcError, match="zero point -129 is outside int8's range"):
        _compile(_conv_model(edit), tmp_path)
