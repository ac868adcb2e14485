"""View ops (Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout) against onnxruntime: their
values, that they cost no kernel inside a graph, and the Copy the schedule inserts when a graph
output would otherwise share storage with a graph input or with another output.

Views move no arithmetic, so every comparison is exact (atol = rtol = 0)."""

from __future__ import annotations

import tempfile

import numpy as np
import onnx
import pytest
from onnx import helper
from opcheck import NP_TO_ONNX, check, make_model, rand

import aotc
from aotc.errors import AotcError

EXACT = {"atol": 0.0, "rtol": 0.0}
MOVE_DTYPES = [np.float32, np.int8, np.int64, np.bool_]


def data(shape: tuple[int, ...], dtype: type = np.float32, seed: int = 0) -> np.ndarray:
    """Random values; int64 ones beyond 32 bits so a narrowing copy would show."""
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype == np.int64:
        return rng.integers(-(2**40), 2**40, shape, dtype=np.int64)
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    return rand(*shape, seed=seed, dtype=dtype)


def check_node(op: str, inputs: dict[str, np.ndarray], attrs: dict | None = None,
               initializers: dict[str, np.ndarray] | None = None, n_outputs: int = 1,
               opset: int = 17, **tol: float) -> aotc.Bundle:
    """A one-node model whose outputs have the data input's dtype (opcheck.check_node declares
    float32 outputs, which strict shape inference rejects for other dtypes)."""
    dtype = next(iter(inputs.values())).dtype
    outs = [f"out{k}" for k in range(n_outputs)]
    node = helper.make_node(op, [*inputs, *(initializers or {})], outs, name="n", **(attrs or {}))
    m = make_model([node], inputs, {o: (dtype, None) for o in outs}, initializers, opset)
    inferred = {v.name: v for v in onnx.shape_inference.infer_shapes(m, strict_mode=True)
                .graph.output}
    for k, o in enumerate(outs):
        m.graph.output[k].CopyFrom(inferred[o])
    return check(m, inputs, **tol)


def kernel_ops(bundle: aotc.Bundle) -> list[str]:
    return [k.split("_", 1)[1] for k in bundle.kernels]


def expect_error(model, match: str) -> None:  # type: ignore[no-untyped-def]
    with tempfile.TemporaryDirectory() as d, pytest.raises(AotcError, match=match):
        aotc.compile(model, d, name="m")


# ------------------------------------------------------------------------------------- Reshape
@pytest.mark.parametrize("shape_in,target", [
    ((2, 3, 4), [6, 4]),
    ((2, 3, 4), [-1]),
    ((2, 3, 4), [0, -1]),
    ((2, 3, 4), [0, 0, 2, 2]),
    ((2, 3, 4), [4, -1, 3]),
    ((1, 12), [3, 1, 4]),
    ((5,), [1, 5, 1]),
])
@pytest.mark.parametrize("dtype", MOVE_DTYPES)
def test_reshape(shape_in, target, dtype):
    check_node("Reshape", {"x": data(shape_in, dtype)},
               initializers={"s": np.array(target, np.int64)}, **EXACT)


@pytest.mark.parametrize("shape_in,target", [((2, 3, 4), [4, 6]), ((2, 3, 4), [2, 12]),
                                             ((2, 0, 4), [0, 4, 0]), ((2, 0, 4), [2, 0])])
def test_reshape_allowzero(shape_in, target):
    # allowzero=1: a 0 in the shape is a literal zero dim, not "copy the input dim"
    check_node("Reshape", {"x": data(shape_in)}, {"allowzero": 1},
               initializers={"s": np.array(target, np.int64)}, opset=14, **EXACT)


def test_reshape_needs_a_constant_shape():
    node = helper.make_node("Reshape", ["x", "s"], ["y"])
    m = make_model([node], {"x": data((2, 3)), "s": np.array([6], np.int64)},
                   {"y": (np.float32, [6])})
    expect_error(m, "input 1 must be a compile-time constant")


def test_reshape_of_a_bad_shape_is_an_error():
    node = helper.make_node("Reshape", ["x", "s"], ["y"])
    m = make_model([node], {"x": data((2, 3))}, {"y": (np.float32, None)},
                   {"s": np.array([4, -1], np.int64)})
    expect_error(m, "cannot infer output shape")


# ------------------------------------------------------------------------------------- Flatten
@pytest.mark.parametrize("shape_in", [(2, 3, 4, 5), (1, 3, 1, 2)])
@pytest.mark.parametrize("axis", [0, 1, 2, 4, -1, -3, -4])
def test_flatten(shape_in, axis):
    check_node("Flatten", {"x": data(shape_in)}, {"axis": axis}, **EXACT)


@pytest.mark.parametrize("dtype", MOVE_DTYPES)
def test_flatten_dtypes(dtype):
    check_node("Flatten", {"x": data((2, 3, 4), dtype)}, {"axis": 2}, **EXACT)


# ---------------------------------------------------------------------------- Squeeze/Unsqueeze
@pytest.mark.parametrize("shape_in,axes", [((1, 3, 1, 4), [0]), ((1, 3, 1, 4), [0, 2]),
                                           ((1, 3, 1, 4), [-2]), ((1, 3, 1, 4), None),
                                           ((1, 1), None)])
@pytest.mark.parametrize("opset", [11, 13])
def test_squeeze(shape_in, axes, opset):
    x = data(shape_in, seed=1)
    if axes is None:
        check_node("Squeeze", {"x": x}, opset=opset, **EXACT)
    elif opset == 11:
        check_node("Squeeze", {"x": x}, {"axes": axes}, opset=opset, **EXACT)
    else:
        check_node("Squeeze", {"x": x}, initializers={"a": np.array(axes, np.int64)},
                   opset=opset, **EXACT)


@pytest.mark.parametrize("shape_in,axes", [((3, 4), [0]), ((3, 4), [1, 3]), ((3, 4), [-1]),
                                           ((3, 4), [0, -1]), ((), [0])])
@pytest.mark.parametrize("opset", [11, 13])
def test_unsqueeze(shape_in, axes, opset):
    x = data(shape_in, seed=2) if shape_in else np.array(1.5, np.float32)
    if opset == 11:
        check_node("Unsqueeze", {"x": x}, {"axes": axes}, opset=opset, **EXACT)
    else:
        check_node("Unsqueeze", {"x": x}, initializers={"a": np.array(axes, np.int64)},
                   opset=opset, **EXACT)


@pytest.mark.parametrize("dtype", MOVE_DTYPES)
def test_squeeze_unsqueeze_dtypes(dtype):
    x = data((1, 3, 4), dtype)
    check_node("Squeeze", {"x": x}, initializers={"a": np.array([0], np.int64)}, **EXACT)
    check_node("Unsqueeze", {"x": x}, initializers={"a": np.array([-1], np.int64)}, **EXACT)


def test_squeeze_of_a_non_unit_dim_is_an_error():
    node = helper.make_node("Squeeze", ["x", "a"], ["y"])
    m = make_model([node], {"x": data((2, 3))}, {"y": (np.float32, None)},
                   {"a": np.array([1], np.int64)}, opset=13)
    expect_error(m, "Squeeze.*cannot infer output shape")


# ------------------------------------------------------------------------- Identity and Dropout
@pytest.mark.parametrize("opset,dropout", [
    (11, helper.make_node("Dropout", ["r"], ["d"], ratio=0.3)),
    (12, helper.make_node("Dropout", ["r"], ["d"])),
    (13, helper.make_node("Dropout", ["r", "ratio", "train"], ["d"], seed=7)),
])
def test_identity_and_dropout_are_removed(opset, dropout):
    x = data((2, 8), seed=3)
    nodes = [helper.make_node("Relu", ["x"], ["r"]), dropout,
             helper.make_node("Identity", ["d"], ["i"]), helper.make_node("Neg", ["i"], ["y"])]
    inits = {"ratio": np.array(0.3, np.float32), "train": np.array(False)} if opset == 13 else {}
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [2, 8])}, inits, opset)
    bundle = check(m, {"x": x}, **EXACT)
    assert kernel_ops(bundle) == ["relu_neg"]  # nothing left between them to stop the fusion


@pytest.mark.parametrize("opset", [11, 13])
def test_dropout_as_graph_output(opset):
    check_node("Dropout", {"x": data((3, 5))}, opset=opset, **EXACT)


def test_dropout_in_training_mode_is_an_error():
    node = helper.make_node("Dropout", ["x", "ratio", "train"], ["y"])
    m = make_model([node], {"x": data((2, 3))}, {"y": (np.float32, None)},
                   {"ratio": np.array(0.5, np.float32), "train": np.array(True)}, opset=13)
    expect_error(m, "training_mode must be a constant false")


def test_dropout_mask_output_is_all_true():
    # Inference keeps every element: the mask is a constant, copied into the graph output.
    node = helper.make_node("Dropout", ["x"], ["y", "mask"])
    m = make_model([node], {"x": data((2, 3))},
                   {"y": (np.float32, [2, 3]), "mask": (np.bool_, [2, 3])}, opset=13)
    check(m, {"x": data((2, 3))}, **EXACT)


def test_dropout_mask_output_before_opset12_is_an_error():
    # onnxruntime's opset 10-11 Dropout returns an all-false mask, the ONNX reference all-true.
    node = helper.make_node("Dropout", ["x"], ["y", "mask"])
    m = make_model([node], {"x": data((2, 3))},
                   {"y": (np.float32, [2, 3]), "mask": (np.bool_, [2, 3])}, opset=11)
    expect_error(m, "mask output before opset 12")


def test_dropout_mask_feeds_a_consumer():
    nodes = [helper.make_node("Dropout", ["x"], ["d", "mask"]),
             helper.make_node("Where", ["mask", "d", "z"], ["y"])]
    m = make_model(nodes, {"x": data((2, 3))}, {"y": (np.float32, [2, 3])},
                   {"z": np.zeros((2, 3), np.float32)}, opset=13)
    check(m, {"x": data((2, 3))}, **EXACT)


# ------------------------------------------------------------- views at the edges of the graph
def test_view_of_a_kernel_result_is_the_graph_output():
    # Conv -> Reshape -> output: the Conv writes straight into the user's output buffer.
    x, w = rand(1, 2, 5, 5), rand(3, 2, 3, 3, seed=1)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Reshape", ["c", "s"], ["y"])]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [3, 25])},
                   {"w": w, "s": np.array([3, -1], np.int64)})
    bundle = check(m, {"x": x}, atol=1e-5, rtol=1e-5)
    assert kernel_ops(bundle) == ["conv"]
    assert bundle.arena_bytes == 0


@pytest.mark.parametrize("dtype", MOVE_DTYPES)
def test_graph_input_through_identity_to_output_gets_a_copy(dtype):
    x = data((2, 3, 4), dtype)
    m = make_model([helper.make_node("Identity", ["x"], ["y"])], {"x": x},
                   {"y": (dtype, [2, 3, 4])})
    bundle = check(m, {"x": x}, **EXACT)
    assert kernel_ops(bundle) == ["copy"]


def test_graph_input_through_a_chain_of_views_to_output():
    x = data((2, 6), seed=4)
    nodes = [helper.make_node("Identity", ["x"], ["a"]),
             helper.make_node("Reshape", ["a", "s"], ["b"]),
             helper.make_node("Unsqueeze", ["b", "u"], ["y"])]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [1, 3, 4])},
                   {"s": np.array([3, 4], np.int64), "u": np.array([0], np.int64)})
    bundle = check(m, {"x": x}, **EXACT)
    assert kernel_ops(bundle) == ["copy"]


def test_two_outputs_are_views_of_the_same_tensor():
    x = data((2, 3, 4), seed=5)
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Reshape", ["r", "s"], ["y1"]),
             helper.make_node("Flatten", ["r"], ["y2"], axis=2)]
    m = make_model(nodes, {"x": x}, {"y1": (np.float32, [24]), "y2": (np.float32, [6, 4])},
                   {"s": np.array([-1], np.int64)})
    bundle = check(m, {"x": x}, **EXACT)
    # One output takes Relu's buffer; the other needs its own copy.
    assert sorted(kernel_ops(bundle)) == ["copy", "relu"]


def test_tensor_and_its_view_are_both_outputs():
    x = data((2, 3), seed=6)
    nodes = [helper.make_node("Neg", ["x"], ["n"]),
             helper.make_node("Reshape", ["n", "s"], ["v"])]
    m = make_model(nodes, {"x": x}, {"n": (np.float32, [2, 3]), "v": (np.float32, [3, 2])},
                   {"s": np.array([3, 2], np.int64)})
    check(m, {"x": x}, **EXACT)


# ------------------------------------------------------------------------- Expand and Tile
def check_typed(op: str, inputs: dict[str, np.ndarray], inits: dict[str, np.ndarray],
                out_dtype: type, opset: int = 17, **attrs: object) -> aotc.Bundle:
    """Against onnxruntime, or (type combinations it lacks, opsets it does not know yet)
    against ONNX's reference evaluator; data movement is exact either way."""
    import onnxruntime as ort
    from onnx.reference import ReferenceEvaluator
    from opcheck import compile_and_run

    node = helper.make_node(op, [*inputs, *inits], ["y"], name="n", **attrs)
    m = make_model([node], inputs, {"y": (out_dtype, None)}, inits, opset)
    (want,) = ReferenceEvaluator(m).run(None, inputs)
    m = make_model([node], inputs, {"y": (out_dtype, list(np.shape(want)))}, inits, opset)
    try:
        return check(m, inputs, **EXACT)
    except (ort.capi.onnxruntime_pybind11_state.NotImplemented,
            ort.capi.onnxruntime_pybind11_state.InvalidGraph,
            ort.capi.onnxruntime_pybind11_state.Fail):
        pass
    with tempfile.TemporaryDirectory() as d:
        got, bundle = compile_and_run(m, inputs, d)
    want = np.asarray(want)
    assert got["y"].dtype == want.dtype and got["y"].shape == want.shape
    np.testing.assert_array_equal(got["y"].view(np.uint8), want.view(np.uint8))
    return bundle


@pytest.mark.parametrize("shape_in,shape", [
    ((3, 1), [2, 1, 6]),
    ((3, 1), [3, 4]),
    ((2, 3), [1, 3]),  # a 1 in shape keeps the input's dim
    ((1, 4, 1), [2, 1, 1, 5]),
    ((5,), [5]),
    ((), [2, 3]),
])
@pytest.mark.parametrize("dtype", MOVE_DTYPES)
def test_expand(shape_in, shape, dtype):
    x = np.asarray(data(shape_in, dtype))
    check_typed("Expand", {"x": x}, {"shape": np.array(shape, np.int64)}, dtype)


def test_expand_of_a_bad_shape_is_an_error():
    node = helper.make_node("Expand", ["x", "s"], ["y"], name="n")
    m = make_model([node], {"x": rand(3, 2)}, {"y": (np.float32, None)},
                   {"s": np.array([4, 3], np.int64)})
    expect_error(m, "does not broadcast")


@pytest.mark.parametrize("shape_in,reps", [
    ((2, 3), [2, 2]),
    ((2, 3, 4), [1, 3, 2]),
    ((3,), [4]),
    ((2, 1, 2), [2, 5, 1]),
    ((2, 3), [0, 2]),  # zero-size output: no kernel
])
@pytest.mark.parametrize("dtype", MOVE_DTYPES)
def test_tile(shape_in, reps, dtype):
    check_typed("Tile", {"x": data(shape_in, dtype)}, {"r": np.array(reps, np.int64)}, dtype)


def test_tile_of_a_constant_stays_a_kernel():
    # Folding would put 256x the input in flash: the kernel reads the small constant instead.
    c = rand(4, 4, seed=5)
    x = rand(64, 64, seed=6)
    nodes = [helper.make_node("Tile", ["c", "r"], ["t"]),
             helper.make_node("Add", ["x", "t"], ["y"])]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [64, 64])},
                   {"c": c, "r": np.array([16, 16], np.int64)})
    bundle = check(m, {"x": x}, **EXACT)
    assert bundle.weights_bytes < 1024


def test_tile_repeats_must_match_the_rank():
    node = helper.make_node("Tile", ["x", "r"], ["y"], name="n")
    m = make_model([node], {"x": rand(3, 2)}, {"y": (np.float32, None)},
                   {"r": np.array([2], np.int64)})
    expect_error(m, "one per dim")


# ------------------------------------------------------------------ DepthToSpace, SpaceToDepth
@pytest.mark.parametrize("shape,b", [((1, 8, 2, 3), 2), ((2, 18, 2, 2), 3), ((1, 4, 1, 1), 2),
                                     ((1, 3, 2, 2), 1)])
@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize("dtype", [np.float32, np.int8])
def test_depth_to_space(shape, b, mode, dtype):
    check_typed("DepthToSpace", {"x": data(shape, dtype)}, {}, dtype, opset=13, blocksize=b,
                mode=mode)


def test_depth_to_space_opset_1_has_no_mode():
    check_typed("DepthToSpace", {"x": data((1, 8, 2, 3))}, {}, np.float32, opset=9,
                blocksize=2)


@pytest.mark.parametrize("shape,b", [((1, 1, 4, 6), 2), ((2, 2, 6, 6), 3), ((1, 3, 2, 2), 2),
                                     ((1, 2, 3, 3), 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_space_to_depth(shape, b, dtype):
    check_typed("SpaceToDepth", {"x": data(shape, dtype)}, {}, dtype, opset=13, blocksize=b)


@pytest.mark.parametrize("op,shape,match", [
    ("DepthToSpace", (1, 6, 2, 2), "not a multiple of blocksize"),
    ("SpaceToDepth", (1, 2, 5, 4), "not multiples of blocksize"),
    ("DepthToSpace", (8, 2, 2), "must be 4-D"),
])
def test_blocks_errors(op, shape, match):
    node = helper.make_node(op, ["x"], ["y"], name="n", blocksize=2)
    m = make_model([node], {"x": rand(*shape)}, {"y": (np.float32, None)}, opset=13)
    expect_error(m, match)


# ------------------------------------------------------------------------------ ReverseSequence
@pytest.mark.parametrize("shape,batch_axis,time_axis,lens", [
    ((4, 4), 0, 1, [1, 2, 3, 4]),
    ((4, 4), 1, 0, [4, 3, 2, 1]),
    ((5, 3, 2), 1, 0, [0, 5, 2]),
    ((2, 6, 3), 0, 1, [6, 1]),
])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_reverse_sequence(shape, batch_axis, time_axis, lens, dtype):
    check_typed("ReverseSequence", {"x": data(shape, dtype)},
                {"lens": np.array(lens, np.int64)}, dtype, opset=10, batch_axis=batch_axis,
                time_axis=time_axis)


def test_reverse_sequence_with_runtime_lengths():
    x = data((3, 5, 2), seed=7)
    lens = np.array([5, 0, 3], np.int64)
    check_typed("ReverseSequence", {"x": x, "lens": lens}, {}, np.float32, opset=10,
                batch_axis=0, time_axis=1)


def test_reverse_sequence_length_beyond_time_is_an_error():
    node = helper.make_node("ReverseSequence", ["x", "l"], ["y"], name="n")
    m = make_model([node], {"x": rand(4, 2)}, {"y": (np.float32, None)},
                   {"l": np.array([5, 1], np.int64)}, opset=10)
    expect_error(m, "outside")


# -------------------------------------------------------------------------------------- BitCast
BITCASTS = [  # (input dtype, output dtype)
    (np.float32, np.int32), (np.int32, np.float32), (np.float32, np.uint32),
    (np.uint32, np.float32), (np.int8, np.uint8), (np.uint16, np.int16), (np.int64, np.uint64),
    (np.bool_, np.uint8), (np.uint8, np.int8), (np.int32, np.uint32),
]


@pytest.mark.parametrize("src,dst", BITCASTS,
                         ids=[f"{np.dtype(a).name}-{np.dtype(b).name}" for a, b in BITCASTS])
@pytest.mark.parametrize("shape", [(2, 3), ()])
def test_bitcast(src, dst, shape):
    x = data(shape, src, seed=8)
    if src == np.float32 and shape:
        x.reshape(-1)[:3] = [-0.0, np.inf, -1.5e-40]  # sign, infinity and a subnormal survive
    to = NP_TO_ONNX[np.dtype(dst)]
    check_typed("BitCast", {"x": x}, {}, dst, opset=26, to=to)


def test_bitcast_of_different_sizes_is_an_error():
    node = helper.make_node("BitCast", ["x"], ["y"], name="n", to=onnx.TensorProto.INT64)
    m = make_model([node], {"x": rand(3)}, {"y": (np.int64, None)}, opset=26)
    expect_error(m, "equal sizes")


def test_bitcast_of_an_arena_value():
    x = rand(2, 4, seed=9)
    nodes = [helper.make_node("Add", ["x", "x"], ["s"]),
             helper.make_node("BitCast", ["s"], ["y"], to=onnx.TensorProto.INT32)]
    m = make_model(nodes, {"x": x}, {"y": (np.int32, [2, 4])}, opset=26)
    with tempfile.TemporaryDirectory() as d:
        from opcheck import compile_and_run

        got, _ = compile_and_run(m, {"x": x}, d)
    np.testing.assert_array_equal(got["y"], (x + x).view(np.int32))


# ----------------------------------------------------------------------- Identity, zero-size
def test_identity_of_a_constant_is_copied_to_the_output():
    # The graph has no inputs: the constant lands in the output buffer through a Copy.
    c = data((2, 3), np.int32, seed=10)
    node = helper.make_node("Identity", ["c"], ["y"])
    m = make_model([node], {}, {"y": (np.int32, [2, 3])}, {"c": c})
    check(m, {}, **EXACT)


@pytest.mark.parametrize("op", ["Identity", "Relu"])
def test_zero_size_output_needs_no_kernel(op):
    x = np.zeros((3, 0), np.float32)
    node = helper.make_node(op, ["x"], ["y"])
    m = make_model([node], {"x": x}, {"y": (np.float32, [3, 0])})
    bundle = check(m, {"x": x}, **EXACT)
    assert bundle.arena_bytes == 0


def test_empty_slice_concatenated_with_a_tensor():
    # Slice yields an empty (2, 0) tensor (no kernel, no arena bytes); Concat copies x alone.
    x = rand(2, 3, seed=11)
    one = np.array([1], np.int64)
    nodes = [helper.make_node("Slice", ["x", "s", "e", "ax"], ["empty"]),
             helper.make_node("Concat", ["empty", "x"], ["y"], axis=1)]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [2, 3])},
                   {"s": one, "e": one, "ax": one}, opset=13)
    check(m, {"x": x}, **EXACT)
