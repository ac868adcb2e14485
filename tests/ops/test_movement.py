"""Data-movement kernels (Transpose, Concat, Split, Slice, Gather, Pad) against onnxruntime,
over shapes, attributes, opset versions and dtypes; multi-output Split through the whole
pipeline (schedule, liveness, arena); and the AotcErrors for what is not supported.

Every element is copied, never computed, so every comparison is exact (atol = rtol = 0)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper
from opcheck import check, make_model, rand
from test_shape import EXACT, MOVE_DTYPES, check_node, data, expect_error, kernel_ops

I64 = np.int64
INT_MAX, INT_MIN = 2**63 - 1, -(2**63)


def i64(*v: int) -> np.ndarray:
    return np.array(v, I64)


# ----------------------------------------------------------------------------------- Transpose
@pytest.mark.parametrize("shape,perm", [
    ((2, 3, 4, 5), [0, 2, 3, 1]),  # NCHW -> NHWC
    ((2, 3, 4, 5), [0, 3, 1, 2]),  # NHWC -> NCHW
    ((2, 3, 4, 5), [3, 2, 1, 0]),
    ((2, 3, 4, 5), [1, 0, 2, 3]),
    ((2, 3, 4, 5), None),  # default: reversed
    ((1, 3, 1, 4), [2, 0, 3, 1]),  # unit dims dropped by the merge
    ((3, 7), [1, 0]),
    ((6,), None),
    ((2, 1, 3, 1, 2, 2), [5, 0, 3, 2, 1, 4]),
])
def test_transpose(shape, perm):
    attrs = {} if perm is None else {"perm": perm}
    check_node("Transpose", {"x": data(shape)}, attrs, **EXACT)


@pytest.mark.parametrize("dtype", [*MOVE_DTYPES, np.uint16, np.int32])
def test_transpose_dtypes(dtype):
    check_node("Transpose", {"x": data((2, 3, 4), dtype)}, {"perm": [2, 0, 1]}, **EXACT)


def test_transpose_bad_perm_is_an_error():
    node = helper.make_node("Transpose", ["x"], ["y"], perm=[0, 0, 1])
    m = make_model([node], {"x": data((2, 3, 4))}, {"y": (np.float32, None)})
    expect_error(m, r"perm=\[0, 0, 1\] is not a permutation")


# -------------------------------------------------------------------------------------- Concat
@pytest.mark.parametrize("shapes,axis", [
    ([(2, 3, 4), (2, 3, 4)], 0),
    ([(2, 3, 4), (2, 5, 4)], 1),
    ([(2, 3, 4), (2, 3, 1), (2, 3, 2)], -1),
    ([(1, 2, 3, 3), (1, 4, 3, 3)], 1),  # channel concat, N=1
    ([(3,), (4,), (1,)], 0),
    ([(2, 3), (2, 0), (2, 2)], 1),  # an empty input
])
def test_concat(shapes, axis):
    inputs = {f"x{k}": data(s, seed=k) for k, s in enumerate(shapes)}
    check_node("Concat", inputs, {"axis": axis}, **EXACT)


def test_concat_mixed_constant_and_activation_inputs():
    inputs = {"a": data((2, 3, 4)), "b": data((2, 1, 4), seed=1)}
    check_node("Concat", inputs, {"axis": 1}, initializers={"c": data((2, 2, 4), seed=2)},
               **EXACT)


def test_concat_same_input_twice():
    x = data((2, 3))
    node = helper.make_node("Concat", ["x", "x", "x"], ["y"], axis=1)
    m = make_model([node], {"x": x}, {"y": (np.float32, [2, 9])})
    check(m, {"x": x}, **EXACT)


@pytest.mark.parametrize("dtype", [*MOVE_DTYPES, np.uint64])
def test_concat_dtypes(dtype):
    inputs = {"a": data((2, 3), dtype), "b": data((1, 3), dtype, seed=1)}
    check_node("Concat", inputs, {"axis": 0}, **EXACT)


def test_concat_of_mixed_dtypes_is_an_error():
    node = helper.make_node("Concat", ["a", "b"], ["y"], axis=0)
    m = make_model([node], {"a": data((2, 3)), "b": data((2, 3), np.int8)},
                   {"y": (np.float32, None)})
    expect_error(m, "has type int8 but input 0")


# --------------------------------------------------------------------------------------- Split
SPLITS = [((2, 6, 3), 1, [1, 2, 3], 3), ((2, 6, 3), -1, [2, 1], 2),
          ((4, 5), 0, [4, 0], 2),  # an empty output
          ((10,), 0, [3, 3, 3, 1], 4)]
EVEN = [((2, 6, 3), 1, None, 3), ((8,), 0, None, 4)]  # opset 18 spells these num_outputs


@pytest.mark.parametrize("shape,axis,split,n,opset",
                         [(*c, o) for c in SPLITS for o in (11, 13, 18)] +
                         [(*c, o) for c in EVEN for o in (11, 13)])
def test_split(shape, axis, split, n, opset):
    x = data(shape)
    if split is None:
        check_node("Split", {"x": x}, {"axis": axis}, n_outputs=n, opset=opset, **EXACT)
    elif opset == 11:
        check_node("Split", {"x": x}, {"axis": axis, "split": split}, n_outputs=n, opset=11,
                   **EXACT)
    else:
        check_node("Split", {"x": x}, {"axis": axis}, initializers={"s": i64(*split)},
                   n_outputs=n, opset=opset, **EXACT)


@pytest.mark.parametrize("shape,axis,n", [((2, 7), 1, 4), ((5, 3), 0, 3), ((6, 2), 0, 3)])
def test_split_num_outputs(shape, axis, n):
    # Opset 18: the last chunk is the smaller one when the dim does not divide evenly.
    check_node("Split", {"x": data(shape)}, {"axis": axis, "num_outputs": n}, n_outputs=n,
               opset=18, **EXACT)


@pytest.mark.parametrize("dtype", MOVE_DTYPES)
def test_split_dtypes(dtype):
    check_node("Split", {"x": data((3, 4), dtype)}, {"axis": 1},
               initializers={"s": i64(1, 3)}, n_outputs=2, opset=13, **EXACT)


def test_split_outputs_feed_other_kernels_and_one_is_unused():
    # y0 -> Relu, y1 -> graph output directly, y2 -> Concat with y0's Relu, y3 unused.
    x = data((2, 8, 3), seed=4)
    nodes = [helper.make_node("Split", ["x", "s"], ["a", "b", "c", "d"], axis=1),
             helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Concat", ["c", "r"], ["cat"], axis=1),
             helper.make_node("Neg", ["cat"], ["out"])]
    m = make_model(nodes, {"x": x},
                   {"out": (np.float32, [2, 5, 3]), "b": (np.float32, [2, 1, 3])},
                   {"s": i64(2, 1, 3, 2)}, opset=13)
    bundle = check(m, {"x": x}, **EXACT)
    assert kernel_ops(bundle) == ["split", "relu", "concat", "neg"]
    plan = bundle.compilation.liveness
    # a and c live in the arena (b is the user's output buffer); d is read by nothing, so the
    # Split does not store it and it takes no arena bytes at all.
    names = {r.name: (r.first, r.last) for r in plan.reqs}
    assert "d" not in names and names["c"][1] == 2 and "b" not in names


def test_split_outputs_through_views_to_graph_outputs():
    x = data((4, 6), seed=5)
    nodes = [helper.make_node("Split", ["x"], ["a", "b"], axis=0, num_outputs=2),
             helper.make_node("Reshape", ["a", "s"], ["ya"]),
             helper.make_node("Identity", ["b"], ["yb"])]
    m = make_model(nodes, {"x": x}, {"ya": (np.float32, [12]), "yb": (np.float32, [2, 6])},
                   {"s": i64(-1)}, opset=18)
    bundle = check(m, {"x": x}, **EXACT)
    assert kernel_ops(bundle) == ["split"]
    assert bundle.arena_bytes == 0  # both outputs written straight into the user's buffers


@pytest.mark.parametrize("opset,attrs,inits,n,match", [
    (13, {"axis": 1}, {}, 4, "dim 6 does not split evenly into 4 outputs"),
    (13, {"axis": 1}, {"s": i64(2, 2)}, 2, r"split=\[2, 2\] does not split dim 6"),
    (11, {"axis": 2}, {}, 2, "axis=2 is out of range for rank 2"),
    (18, {"axis": 1, "num_outputs": 4}, {}, 4, "leaves the last output of dim 6 empty"),
])
def test_split_errors(opset, attrs, inits, n, match):
    outs = [f"y{k}" for k in range(n)]
    node = helper.make_node("Split", ["x", *inits], outs, **attrs)
    m = make_model([node], {"x": data((2, 6))}, {o: (np.float32, None) for o in outs}, inits,
                   opset)
    expect_error(m, match)


def test_split_sizes_must_be_constant():
    node = helper.make_node("Split", ["x", "s"], ["a", "b"], axis=1)
    m = make_model([node], {"x": data((2, 6)), "s": i64(3, 3)},
                   {"a": (np.float32, None), "b": (np.float32, None)}, opset=13)
    expect_error(m, "input 1 must be a compile-time constant")


# --------------------------------------------------------------------------------------- Slice
@pytest.mark.parametrize("shape,starts,ends,axes,steps", [
    ((5, 6), [1, 2], [4, 5], None, None),
    ((5, 6), [1], [3], [1], None),
    ((5, 6), [-3], [-1], [0], None),  # negative starts/ends count from the end
    ((5, 6), [0, 1], [5, 6], [0, 1], [2, 2]),
    ((5, 6), [-1], [INT_MIN], [1], [-1]),  # full reverse
    ((5, 6), [4, 10], [0, -10], [0, 1], [-2, -3]),  # negative steps, starts clamped
    ((5, 6), [2], [INT_MAX], [-1], None),  # INT_MAX end
    ((5, 6), [-100], [100], [0], None),  # clamped to the dim
    ((5, 6), [3], [1], [0], None),  # empty
    ((2, 3, 4, 5), [1, 0], [3, 2], [2, 1], None),  # whole trailing dims merge
    ((2, 3, 4, 5), [0, 4, 1], [2, 0, INT_MAX], [0, -1, 1], [1, -1, 2]),
    ((1, 8, 1), [6], [0], [1], [-3]),
])
@pytest.mark.parametrize("opset", [11, 13])
def test_slice(shape, starts, ends, axes, steps, opset):
    inits = {"starts": i64(*starts), "ends": i64(*ends)}
    if axes is not None or steps is not None:
        inits["axes"] = i64(*(axes if axes is not None else range(len(starts))))
    if steps is not None:
        inits["steps"] = i64(*steps)
    check_node("Slice", {"x": data(shape)}, initializers=inits, opset=opset, **EXACT)


def test_slice_int32_parameters():
    inits = {k: np.array(v, np.int32) for k, v in
             {"starts": [1], "ends": [-1], "axes": [-1], "steps": [2]}.items()}
    check_node("Slice", {"x": data((3, 7))}, initializers=inits, **EXACT)


@pytest.mark.parametrize("dtype", MOVE_DTYPES)
def test_slice_dtypes(dtype):
    check_node("Slice", {"x": data((4, 6), dtype)},
               initializers={"s": i64(3, 1), "e": i64(0, 6), "a": i64(0, 1), "st": i64(-1, 2)},
               **EXACT)


@pytest.mark.parametrize("inits,match", [
    ({"s": i64(0), "e": i64(2), "a": i64(0), "st": i64(0)}, "steps must be non-zero"),
    ({"s": i64(0, 0), "e": i64(2, 2), "a": i64(1, -1)}, "axis 1 is sliced twice"),
    ({"s": i64(0), "e": i64(2), "a": i64(3)}, "axes=3 is out of range for rank 2"),
])
def test_slice_errors(inits, match):
    node = helper.make_node("Slice", ["x", *inits], ["y"])
    m = make_model([node], {"x": data((4, 6))}, {"y": (np.float32, None)}, inits)
    expect_error(m, match)


def test_slice_starts_must_be_constant():
    node = helper.make_node("Slice", ["x", "s", "e"], ["y"])
    m = make_model([node], {"x": data((4, 6)), "s": i64(1)}, {"y": (np.float32, None)},
                   {"e": i64(3)})
    expect_error(m, "input 1 must be a compile-time constant")


# -------------------------------------------------------------------------------------- Gather
@pytest.mark.parametrize("shape,axis,indices", [
    ((5, 4), 0, [[0, 4], [2, 2]]),
    ((5, 4), 1, [3, 0, 1]),  # a permutation: read from a table
    ((5, 4), -1, [-1, -4]),  # negative indices
    ((2, 3, 4), 1, [0, 1, 2]),  # arithmetic progression: no table
    ((2, 3, 4), 2, [[3, 1], [2, 0]]),
    ((2, 3, 4), 0, [1]),
    ((2, 3, 4), 2, [3, 2, 1, 0, -1]),
    ((6,), 0, [[[5]], [[0]]]),
])
def test_gather(shape, axis, indices):
    check_node("Gather", {"x": data(shape)}, {"axis": axis},
               initializers={"i": i64(*np.array(indices).reshape(-1)).reshape(
                   np.array(indices).shape)}, **EXACT)


@pytest.mark.parametrize("axis,index", [(0, 2), (1, -1)])
def test_gather_scalar_index(axis, index):
    # A 0-d index drops the axis: [3, 4] -> [4] or [3].
    check_node("Gather", {"x": data((3, 4))}, {"axis": axis},
               initializers={"i": np.array(index, I64)}, **EXACT)


@pytest.mark.parametrize("dtype", MOVE_DTYPES)
def test_gather_dtypes(dtype):
    check_node("Gather", {"x": data((4, 3), dtype)}, {"axis": 0},
               initializers={"i": np.array([3, -4, 1], np.int32)}, **EXACT)


def test_gather_out_of_range_index_is_an_error():
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=1)
    m = make_model([node], {"x": data((2, 3))}, {"y": (np.float32, None)}, {"i": i64(0, 3)})
    expect_error(m, r"index 3 is out of range for dim 3 \(axis 1\)")


@pytest.mark.parametrize("shape,axis,indices", [
    ((5, 4), 0, [[0, 4], [2, -1]]),
    ((5, 4), 1, [3, 0, -4]),
    ((2, 3, 4), 1, [[2, -3], [1, 1]]),
    ((2, 3, 4), -1, [3, 2, 1, 0, -1]),
    ((6,), 0, 4),  # a 0-d index drops the axis
])
@pytest.mark.parametrize("idx_dtype", [np.int64, np.int32])
def test_gather_runtime_indices(shape, axis, indices, idx_dtype):
    check_node("Gather", {"x": data(shape), "i": np.array(indices, idx_dtype)}, {"axis": axis},
               **EXACT)


@pytest.mark.parametrize("opset", [1, 11, 13])
def test_gather_runtime_indices_opsets(opset):
    check_node("Gather", {"x": data((4, 3)), "i": i64(3, 0, 1, 1)}, {"axis": 0}, opset=opset,
               **EXACT)


@pytest.mark.parametrize("dtype", MOVE_DTYPES)
def test_gather_runtime_indices_dtypes(dtype):
    check_node("Gather", {"x": data((4, 3), dtype), "i": i64(3, -4, 1, 1)}, {"axis": 0}, **EXACT)


def test_gather_runtime_out_of_range_index_is_clamped():
    # ONNX leaves it undefined (onnxruntime raises): aotc clamps, never reads out of bounds.
    from opcheck import compile_and_run
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=1)
    x = data((2, 3))
    m = make_model([node], {"x": x, "i": i64(0, 3)}, {"y": (np.float32, None)})
    got, _ = compile_and_run(m, {"x": x, "i": i64(7, -9)})
    np.testing.assert_array_equal(got["y"], x[:, [2, 0]])


# ----------------------------------------------------------------------------------------- Pad
PADS = [
    ((2, 3, 4), [0, 1, 2, 0, 1, 1]),
    ((1, 2, 4, 4), [0, 0, 1, 1, 0, 0, 1, 1]),  # NCHW spatial padding
    ((3, 5), [2, 0, 1, 3]),
    ((3, 5), [0, -1, 2, 1]),  # a negative pad crops
    ((3, 5), [-1, 2, 0, -2]),
    ((4,), [3, 3]),
    ((3, 5), [0, 0, 0, 0]),
]


@pytest.mark.parametrize("shape,pads", PADS)
@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad(shape, pads, mode):
    check_node("Pad", {"x": data(shape)}, {"mode": mode}, initializers={"p": i64(*pads)},
               opset=13, **EXACT)


@pytest.mark.parametrize("shape,pads", PADS)
def test_pad_wrap(shape, pads):
    check_node("Pad", {"x": data(shape)}, {"mode": "wrap"}, initializers={"p": i64(*pads)},
               opset=19, **EXACT)


@pytest.mark.parametrize("opset", [11, 13, 18])
def test_pad_constant_value(opset):
    check_node("Pad", {"x": data((2, 3))}, initializers={"p": i64(1, 0, 0, 2),
                                                         "v": np.array(-7.5, np.float32)},
               opset=opset, **EXACT)


@pytest.mark.parametrize("axes,pads", [([1], [2, 1]), ([-1, 0], [1, 0, 0, 3]), ([2], [-1, 2])])
@pytest.mark.parametrize("mode", ["constant", "edge"])
def test_pad_axes(axes, pads, mode):
    # Opset 18: pads only for the listed axes; "" leaves constant_value out.
    x = data((2, 3, 4))
    node = helper.make_node("Pad", ["x", "p", "", "a"], ["y"], mode=mode)
    m = make_model([node], {"x": x}, {"y": (np.float32, None)},
                   {"p": i64(*pads), "a": i64(*axes)}, opset=18)
    m.graph.output[0].CopyFrom(onnx.shape_inference.infer_shapes(m).graph.output[0])
    check(m, {"x": x}, **EXACT)


@pytest.mark.parametrize("dtype,value", [(np.int8, -128), (np.int64, 2**40 + 3),
                                         (np.bool_, True), (np.uint8, 255)])
@pytest.mark.parametrize("mode", ["constant", "reflect"])
def test_pad_dtypes(dtype, value, mode):
    check_node("Pad", {"x": data((3, 4), dtype)}, {"mode": mode},
               initializers={"p": i64(1, 2, 1, 0), "v": np.array(value, dtype)}, **EXACT)


@pytest.mark.parametrize("mode,pads,opset,match", [
    ("reflect", [3, 0], 13, r"pads \(3, 0\) exceed dim 0 size - 1 \(2\)"),
    ("wrap", [1, 1], 18, "mode='wrap' is not supported at opset 18"),
    ("edge", [-2, -2], 13, "negative pads -2, -2 crop more than dim 0"),
    ("constant", [1, 1, 1], 13, "need 2 per axis"),
])
def test_pad_errors(mode, pads, opset, match):
    node = helper.make_node("Pad", ["x", "p"], ["y"], mode=mode)
    m = make_model([node], {"x": data((3,))}, {"y": (np.float32, None)}, {"p": i64(*pads)},
                   opset)
    expect_error(m, match)


def test_pad_pads_must_be_constant():
    node = helper.make_node("Pad", ["x", "p"], ["y"])
    m = make_model([node], {"x": data((3,)), "p": i64(1, 1)}, {"y": (np.float32, None)})
    expect_error(m, "input 1 must be a compile-time constant")


# ----------------------------------------------------------------------------- in a real graph
def test_movement_chain_with_conv():
    # NHWC input -> Transpose -> Pad -> Conv -> Slice -> Concat with a constant -> output.
    x = rand(1, 6, 6, 2)
    w = rand(3, 2, 3, 3, seed=1)
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 3, 1, 2]),
             helper.make_node("Pad", ["t", "p"], ["tp"], mode="reflect"),
             helper.make_node("Conv", ["tp", "w"], ["c"]),
             helper.make_node("Slice", ["c", "s", "e", "a"], ["cs"]),
             helper.make_node("Concat", ["cs", "k"], ["y"], axis=1)]
    inits = {"w": w, "p": i64(0, 0, 1, 1, 0, 0, 1, 1), "s": i64(1), "e": i64(INT_MAX),
             "a": i64(1), "k": rand(1, 1, 6, 6, seed=2)}
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [1, 3, 6, 6])}, inits, opset=13)
    bundle = check(m, {"x": x}, atol=1e-5, rtol=1e-5)
    assert kernel_ops(bundle) == ["transpose", "pad", "conv", "slice", "concat"]
