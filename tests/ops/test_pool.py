"""MaxPool, AveragePool, GlobalMaxPool, GlobalAveragePool against onnxruntime: 1-D/2-D/3-D,
pads, strides, dilations, ceil_mode (incl. windows that start in the padding), auto_pad,
count_include_pad, opsets 11/13/18/19, epilogue fusion and the unsupported cases; MaxPool's
Indices output, LpPool, GlobalLpPool and MaxUnpool."""

import numpy as np
import onnx
import pytest
from onnx import helper
from opcheck import check, check_node, make_model, ort_run, rand

import aotc
from aotc.errors import AotcError

TOL = dict(atol=1e-5, rtol=1e-5)

# (input shape, attributes): shared by MaxPool and AveragePool.
WINDOWS = [
    ((1, 2, 9), dict(kernel_shape=[3])),
    ((2, 3, 10), dict(kernel_shape=[4], strides=[3], pads=[1, 2])),
    ((1, 2, 7), dict(kernel_shape=[3], strides=[2], ceil_mode=1)),
    # ceil_mode: the last window would start in the end padding and is dropped (5 -> 2 outputs)
    ((1, 2, 5), dict(kernel_shape=[2], strides=[3], pads=[0, 1], ceil_mode=1)),
    ((1, 3, 6, 6), dict(kernel_shape=[2, 2], strides=[2, 2])),
    ((2, 2, 7, 8), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ((1, 2, 7, 6), dict(kernel_shape=[3, 2], strides=[2, 2], pads=[1, 1, 1, 0], ceil_mode=1)),
    ((1, 2, 5, 5), dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)),
    ((1, 2, 5, 5), dict(kernel_shape=[3, 3], pads=[2, 2, 2, 2])),  # windows mostly in the pad
    ((1, 2, 6, 7), dict(kernel_shape=[3, 3], strides=[1, 2], pads=[0, 1, 2, 0])),
    ((1, 2, 6, 6), dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")),
    ((1, 2, 6, 6), dict(kernel_shape=[4, 4], strides=[2, 2], auto_pad="SAME_LOWER")),
    ((1, 2, 7, 5), dict(kernel_shape=[2, 3], strides=[3, 1], auto_pad="SAME_LOWER")),
    ((1, 2, 7, 7), dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="VALID")),
    ((1, 2, 6, 6), dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="VALID", ceil_mode=1)),
    ((1, 2, 5, 6, 4), dict(kernel_shape=[2, 2, 2])),
    ((1, 2, 5, 6, 5), dict(kernel_shape=[3, 2, 3], strides=[2, 2, 2], pads=[1, 0, 1, 1, 1, 0],
                           ceil_mode=1)),
]

# Dilated windows (MaxPool since opset 10, AveragePool since opset 19).
DILATED = [
    ((1, 2, 9), dict(kernel_shape=[2], dilations=[3])),
    ((1, 2, 7, 7), dict(kernel_shape=[3, 3], strides=[2, 2], dilations=[2, 2],
                        pads=[1, 1, 1, 1], ceil_mode=1)),
    ((1, 2, 8, 8), dict(kernel_shape=[2, 3], strides=[1, 2], dilations=[2, 1],
                        pads=[1, 2, 1, 2])),
    ((1, 1, 6, 6, 6), dict(kernel_shape=[2, 2, 2], strides=[2, 2, 2], dilations=[2, 2, 2],
                           ceil_mode=1)),
]


def _ids(cases):
    return [f"{len(s) - 2}d-" + "-".join(f"{k}{v}" for k, v in a.items()) for s, a in cases]


@pytest.mark.parametrize("shape,attrs", WINDOWS, ids=_ids(WINDOWS))
def test_maxpool(shape, attrs):
    check_node("MaxPool", {"x": rand(*shape)}, attrs, opset=13, **TOL)


@pytest.mark.parametrize("shape,attrs", DILATED, ids=_ids(DILATED))
def test_maxpool_dilations(shape, attrs):
    check_node("MaxPool", {"x": rand(*shape, seed=1)}, attrs, opset=11, **TOL)


@pytest.mark.parametrize("include_pad", [0, 1])
@pytest.mark.parametrize("shape,attrs", WINDOWS, ids=_ids(WINDOWS))
def test_averagepool(shape, attrs, include_pad):
    check_node("AveragePool", {"x": rand(*shape, seed=2)},
               {**attrs, "count_include_pad": include_pad}, opset=17, **TOL)


@pytest.mark.parametrize("include_pad", [0, 1])
@pytest.mark.parametrize("shape,attrs", DILATED, ids=_ids(DILATED))
def test_averagepool_dilations_opset19(shape, attrs, include_pad):
    check_node("AveragePool", {"x": rand(*shape, seed=3)},
               {**attrs, "count_include_pad": include_pad}, opset=19, **TOL)


@pytest.mark.parametrize("opset", [11, 13, 18, 19])
@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_pool_across_opsets(op, opset):
    attrs = dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 0, 1, 1], ceil_mode=1)
    check_node(op, {"x": rand(1, 3, 8, 7, seed=4)}, attrs, opset=opset, **TOL)


@pytest.mark.parametrize("dtype,lo,hi", [(np.int8, -128, -1), (np.uint8, 0, 255)])
def test_maxpool_8bit(dtype, lo, hi):
    # All-negative int8 data: padding must not act as a 0 element in the max.
    x = rand(1, 2, 6, 7, seed=5, dtype=dtype, lo=lo, hi=hi)
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                            pads=[1, 1, 1, 1])
    check(make_model([node], {"x": x}, {"y": (dtype, [1, 2, 3, 4])}, opset=13), {"x": x})


@pytest.mark.parametrize("shape", [(2, 3, 7), (1, 4, 5, 6), (1, 2, 3, 4, 5), (1, 8, 1, 1)])
@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("opset", [11, 17])
def test_global_pool(op, shape, opset):
    check_node(op, {"x": rand(*shape, seed=6)}, opset=opset, **TOL)


@pytest.mark.parametrize("pool,attrs,out_shape", [
    ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]), [1, 3, 4, 4]),
    ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1),
     [1, 3, 4, 4]),
    ("GlobalAveragePool", {}, [1, 3, 1, 1]),
])
def test_pool_fuses_with_relu(pool, attrs, out_shape):
    x = rand(1, 3, 7, 7, seed=7)
    nodes = [helper.make_node(pool, ["x"], ["p"], **attrs),
             helper.make_node("Relu", ["p"], ["y"])]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, out_shape)})
    bundle = check(m, {"x": x}, **TOL)
    assert len(bundle.kernels) == 1  # the Relu runs inside the pooling kernel


def test_maxpool_clip_add_chain_fuses():
    # A two-step epilogue including a residual operand read with the output index.
    x = rand(1, 2, 6, 6, seed=8)
    r = rand(1, 2, 3, 3, seed=9)
    nodes = [helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Add", ["p", "r"], ["a"]),
             helper.make_node("Clip", ["a", "lo", "hi"], ["y"])]
    m = make_model(nodes, {"x": x, "r": r}, {"y": (np.float32, [1, 2, 3, 3])},
                   {"lo": np.float32(-0.5), "hi": np.float32(0.5)})
    bundle = check(m, {"x": x, "r": r}, **TOL)
    assert len(bundle.kernels) == 1


def _ort_shape(op, attrs, c, opset):
    node = helper.make_node(op, ["c"], ["p"], **attrs)
    return ort_run(make_model([node], {"c": c}, {"p": (np.float32, None)}, opset=opset),
                   {"c": c})["p"].shape


FOLDED = [
    ("MaxPool", (1, 2, 7, 6), dict(kernel_shape=[3, 2], strides=[2, 2], pads=[1, 1, 1, 0],
                                   ceil_mode=1), 13),
    ("AveragePool", (1, 2, 5, 6), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                                       ceil_mode=1, count_include_pad=1), 13),
    ("AveragePool", (1, 2, 5, 6), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                                       ceil_mode=1), 13),
    ("AveragePool", (1, 2, 7, 7), dict(kernel_shape=[2, 2], dilations=[2, 2],
                                       pads=[1, 0, 1, 1]), 19),
    ("GlobalMaxPool", (1, 3, 4, 5), {}, 13),
    ("GlobalAveragePool", (2, 3, 4), {}, 13),
]


@pytest.mark.parametrize("op,shape,attrs,opset", FOLDED,
                         ids=[f"{o}-{a}" for o, _, a, _ in FOLDED])
def test_constant_input_folds_with_the_reference(op, shape, attrs, opset):
    # A pool of a constant is computed at compile time by the numpy reference: check that too.
    c = rand(*shape, seed=10)
    out_shape = list(_ort_shape(op, attrs, c, opset))
    x = rand(*out_shape, seed=11)
    nodes = [helper.make_node(op, ["c"], ["p"], **attrs),
             helper.make_node("Add", ["p", "x"], ["y"])]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, out_shape)}, {"c": c}, opset)
    bundle = check(m, {"x": x}, **TOL)
    assert len(bundle.kernels) == 1  # only the Add is left


# ------------------------------------------------------------------------------ unsupported
def _compile(tmp_path, op, shape, attrs, opset=13, n_out=1):
    x = rand(*shape)
    outs = ["y", "idx"][:n_out]
    node = helper.make_node(op, ["x"], outs, name="pool", **attrs)
    m = make_model([node], {"x": x}, {o: (np.float32, None) for o in outs}, opset=opset)
    return aotc.compile(m, tmp_path, name="m")


def test_same_padding_with_dilation_is_rejected(tmp_path):
    with pytest.raises(AotcError, match="auto_pad=SAME_UPPER with dilations"):
        _compile(tmp_path, "MaxPool", (1, 1, 7, 7),
                 dict(kernel_shape=[3, 3], dilations=[2, 2], auto_pad="SAME_UPPER"))


def test_averagepool_dilations_before_opset19_is_rejected(tmp_path):
    with pytest.raises(AotcError, match="attribute 'dilations'"):
        _compile(tmp_path, "AveragePool", (1, 1, 7, 7),
                 dict(kernel_shape=[3, 3], dilations=[2, 2]), opset=18)


def test_window_entirely_in_padding_is_rejected(tmp_path):
    with pytest.raises(AotcError, match="entirely in the padding"):
        _compile(tmp_path, "AveragePool", (1, 1, 4, 4), dict(kernel_shape=[2, 2],
                                                              pads=[2, 0, 0, 0]))


def test_missing_kernel_shape_is_rejected(tmp_path):
    with pytest.raises(AotcError, match="kernel_shape"):
        _compile(tmp_path, "MaxPool", (1, 1, 4, 4), {})


def test_pool_rank2_input_is_rejected(tmp_path):
    with pytest.raises(AotcError, match="rank >= 3"):
        _compile(tmp_path, "GlobalMaxPool", (3, 4), {})


# ------------------------------------------------------------------------- MaxPool with Indices
def _check_inferred(nodes, inputs, outputs, inits=None, opset=13, **tol):
    """check() a model whose output shapes onnx infers (multi-output models)."""
    m = make_model(nodes, inputs, {o: (dt, None) for o, dt in outputs.items()}, inits, opset)
    inferred = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    del m.graph.output[:]
    m.graph.output.extend(inferred.graph.output)
    return check(m, {k: v for k, v in inputs.items()}, **tol)


ARGMAX = [
    ((1, 2, 9), dict(kernel_shape=[3], strides=[2], pads=[1, 1])),
    ((2, 2, 7, 6), dict(kernel_shape=[3, 2], strides=[2, 2], pads=[1, 1, 1, 0], ceil_mode=1)),
    ((1, 2, 6, 6), dict(kernel_shape=[2, 2], dilations=[2, 2])),
    ((1, 2, 5, 4, 6), dict(kernel_shape=[2, 2, 3], strides=[2, 1, 2])),
]


@pytest.mark.parametrize("storage_order", [0, 1])
@pytest.mark.parametrize("shape,attrs", ARGMAX, ids=_ids(ARGMAX))
def test_maxpool_indices(shape, attrs, storage_order):
    x = rand(*shape, seed=12)
    node = helper.make_node("MaxPool", ["x"], ["y", "idx"], storage_order=storage_order, **attrs)
    _check_inferred([node], {"x": x}, {"y": np.float32, "idx": np.int64}, **TOL)


def test_maxpool_indices_ties_and_int8():
    # Repeated values: the first maximum in scan order wins.
    x = np.repeat(np.arange(4, dtype=np.int8), 8).reshape(1, 2, 4, 4)
    node = helper.make_node("MaxPool", ["x"], ["y", "idx"], kernel_shape=[2, 2], strides=[1, 1])
    _check_inferred([node], {"x": x}, {"y": np.int8, "idx": np.int64})


# --------------------------------------------------------------------------- LpPool, GlobalLpPool
LP_WINDOWS = [
    ((1, 2, 9), dict(kernel_shape=[3], strides=[2], pads=[1, 1])),
    ((1, 3, 6, 7), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ((1, 2, 6, 6), dict(kernel_shape=[2, 2], auto_pad="SAME_UPPER", strides=[2, 2])),
    ((1, 2, 4, 5, 4), dict(kernel_shape=[2, 2, 2])),
]


@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("shape,attrs", LP_WINDOWS, ids=_ids(LP_WINDOWS))
def test_lppool(shape, attrs, p):
    check_node("LpPool", {"x": rand(*shape, seed=13)}, {**attrs, "p": p}, opset=13, atol=1e-4,
               rtol=1e-4)


@pytest.mark.parametrize("attrs", [dict(kernel_shape=[3, 3], dilations=[2, 2], strides=[1, 2]),
                                   dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)])
def test_lppool_opset18(attrs):
    check_node("LpPool", {"x": rand(1, 2, 7, 7, seed=14)}, attrs, opset=18, atol=1e-4,
               rtol=1e-4)


@pytest.mark.parametrize("p", [1, 2, 3])
def test_global_lppool(p):
    check_node("GlobalLpPool", {"x": rand(2, 3, 4, 5, seed=15)}, {"p": p}, opset=13, atol=1e-4,
               rtol=1e-4)


# ------------------------------------------------------------------------------------ MaxUnpool
@pytest.mark.parametrize("shape,attrs", [
    ((1, 2, 6, 6), dict(kernel_shape=[2, 2], strides=[2, 2])),
    ((2, 2, 7, 5), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ((1, 3, 8), dict(kernel_shape=[2], strides=[2])),
])
def test_maxpool_then_maxunpool(shape, attrs):
    x = rand(*shape, seed=16)
    nodes = [helper.make_node("MaxPool", ["x"], ["p", "idx"], **attrs),
             helper.make_node("MaxUnpool", ["p", "idx"], ["y"], **attrs)]
    _check_inferred(nodes, {"x": x}, {"y": np.float32}, **TOL)


def test_maxunpool_output_shape_equal_to_inferred():
    x = rand(1, 1, 4, 4, seed=17)
    nodes = [helper.make_node("MaxPool", ["x"], ["p", "idx"], kernel_shape=[2, 2],
                              strides=[2, 2]),
             helper.make_node("MaxUnpool", ["p", "idx", "shape"], ["y"], kernel_shape=[2, 2],
                              strides=[2, 2])]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [1, 1, 4, 4])},
                   {"shape": np.array([1, 1, 4, 4], np.int64)}, opset=13)
    check(m, {"x": x}, **TOL)


def test_maxunpool_other_output_shape_is_rejected(tmp_path):
    # ONNX pads the inferred result at the end of each dim; onnxruntime scatters into the given
    # shape directly: no single answer.
    x = rand(1, 1, 2, 2)
    node = helper.make_node("MaxUnpool", ["x", "i", "shape"], ["y"], kernel_shape=[2, 2],
                            strides=[2, 2])
    m = make_model([node], {"x": x, "i": np.zeros((1, 1, 2, 2), np.int64)},
                   {"y": (np.float32, None)}, {"shape": np.array([1, 1, 5, 5], np.int64)},
                   opset=13)
    with pytest.raises(AotcError, match="output_shape"):
        aotc.compile(m, tmp_path, name="m")


@pytest.mark.parametrize("storage_order", [0, 1])
def test_maxpool_indices_of_a_constant_fold(storage_order):
    # The numpy reference's argmax (constant folding) against onnxruntime.
    c = rand(2, 2, 5, 6, seed=18)
    x = rand(2, 2, 3, 3, seed=19)
    nodes = [helper.make_node("MaxPool", ["c"], ["p", "idx"], kernel_shape=[3, 2],
                              strides=[2, 2], pads=[1, 0, 1, 0], storage_order=storage_order),
             helper.make_node("Add", ["p", "x"], ["y"])]
    m = make_model(nodes, {"x": x}, {"y": (np.float32, [2, 2, 3, 3]),
                                     "idx": (np.int64, [2, 2, 3, 3])}, {"c": c}, opset=13)
    bundle = check(m, {"x": x}, **TOL)
    assert [k.split("_", 1)[1] for k in bundle.kernels if "maxpool" in k] == []
