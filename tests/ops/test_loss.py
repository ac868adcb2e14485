"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss against onnxruntime: the reductions,
weights (run-time input and initializer), ignore_index (in range, negative, above C), int32 and
int64 labels given at run time, SCE's log_prob output, several ranks, and the rejected cases."""

import numpy as np
import pytest
from onnx import helper
from opcheck import check, make_model, rand

import aotc
from aotc.errors import AotcError

# exp/log in the kernel and in onnxruntime may differ by an ulp or two; sums differ in order.
TOL = dict(atol=1e-5, rtol=2e-5)

OPS = ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"]
CASES = [  # (scores shape, ignore_index)
    ((4, 5), None),
    ((4, 5), 1),
    ((2, 3, 4), -1),
    ((2, 3, 2, 3), 1),
    ((1, 4, 6), None),
]


def _labels(shape, c, seed=0, ignore=None, dtype=np.int64):
    """Labels of scores ``shape`` in [0, c), about a third of them set to ``ignore``."""
    rng = np.random.default_rng(seed)
    t = rng.integers(0, c, (shape[0], *shape[2:]))
    if ignore is not None:
        t = np.where(rng.random(t.shape) < 0.35, ignore, t)
        t.reshape(-1)[0] = ignore
    return t.astype(dtype)


def _loss(op, shape, reduction, weight=None, ignore_index=None, opset=13, log_prob=False,
          label_dtype=np.int64, weight_init=False, seed=0, x=None):
    x = rand(*shape, seed=seed, lo=-3, hi=3) if x is None else x
    t = _labels(shape, shape[1], seed + 1, ignore_index, label_dtype)
    inputs = {"x": x, "t": t}
    inits = {}
    names = ["x", "t"]
    if weight is not None:
        (inits if weight_init else inputs)["w"] = weight
        names.append("w")
    attrs = {"reduction": reduction}
    if ignore_index is not None:
        attrs["ignore_index"] = ignore_index
    outs = ["y", "logp"] if log_prob else ["y"]
    out_shape = list(t.shape) if reduction == "none" else []
    decl = {"y": (np.float32, out_shape)}
    if log_prob:
        decl["logp"] = (np.float32, list(shape))
    m = make_model([helper.make_node(op, names, outs, **attrs)], inputs, decl, inits, opset)
    return check(m, inputs, **TOL)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weighted", [False, True], ids=["noweight", "weight"])
@pytest.mark.parametrize("shape,ignore_index", CASES, ids=[f"{s}-ii{i}" for s, i in CASES])
def test_loss(op, reduction, weighted, shape, ignore_index):
    w = rand(shape[1], seed=7, lo=0.1, hi=2.0) if weighted else None
    _loss(op, shape, reduction, w, ignore_index)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("shape", [(3, 4), (2, 4, 3, 2)], ids=str)
def test_sce_log_prob(reduction, shape):
    _loss("SoftmaxCrossEntropyLoss", shape, reduction, rand(shape[1], seed=2, lo=0.1, hi=1),
          ignore_index=0, log_prob=True)


@pytest.mark.parametrize("op", OPS)
def test_int32_labels(op):
    _loss(op, (3, 4, 5), "mean", rand(4, seed=3, lo=0.1, hi=1), label_dtype=np.int32)


@pytest.mark.parametrize("op", OPS)
def test_weight_initializer(op):
    _loss(op, (3, 6, 2), "mean", rand(6, seed=4, lo=0.1, hi=1), ignore_index=2, weight_init=True)


@pytest.mark.parametrize("op,opset", [(OPS[0], 12), (OPS[0], 13), (OPS[0], 22),
                                      (OPS[1], 12), (OPS[1], 13)])
def test_opsets(op, opset):
    _loss(op, (3, 5, 2), "mean", ignore_index=4, opset=opset)


@pytest.mark.parametrize("op", OPS)
def test_ignore_index_outside_classes(op):
    # An ignore_index above C (or far below 0) never collides with a class.
    _loss(op, (4, 3), "sum", rand(3, seed=5, lo=0.1, hi=1), ignore_index=10)
    _loss(op, (2, 3, 4), "none", ignore_index=-100)


@pytest.mark.parametrize("op", OPS)
def test_mean_of_all_ignored_is_nan(op):
    x = rand(2, 3, 2)
    t = np.full((2, 2), -1, np.int64)
    m = make_model([helper.make_node(op, ["x", "t"], ["y"], reduction="mean", ignore_index=-1)],
                   {"x": x, "t": t}, {"y": (np.float32, [])}, opset=13)
    check(m, {"x": x, "t": t}, **TOL)


def test_sce_large_scores_are_stable():
    x = np.array([[1000.0, 1001.0, 999.5, -1000.0], [3e4, 3e4, 3e4 - 2, -3e4]], np.float32)
    _loss("SoftmaxCrossEntropyLoss", x.shape, "none", x=x, log_prob=True)


def test_nll_after_log_softmax():
    # The usual training-graph pairing: LogSoftmax over C, then NLL on its output.
    x = rand(4, 5, 3, seed=9)
    t = _labels(x.shape, 5, seed=10)
    nodes = [helper.make_node("LogSoftmax", ["x"], ["lp"], axis=1),
             helper.make_node("NegativeLogLikelihoodLoss", ["lp", "t"], ["y"], reduction="sum")]
    m = make_model(nodes, {"x": x, "t": t}, {"y": (np.float32, [])}, opset=13)
    check(m, {"x": x, "t": t}, **TOL)


@pytest.mark.parametrize("case,match", [
    ("rank1", "scores need shape"),
    ("labels_shape", "labels shape"),
    ("float_labels", "has type float32; NegativeLogLikelihoodLoss-13 allows"),
    ("weight_shape", "weight shape"),
    ("reduction", "reduction='max'"),
])
def test_rejected(tmp_path, case, match):
    x, t = rand(3, 4), np.zeros(3, np.int64)
    inputs = {"x": x, "t": t}
    attrs = {"reduction": "max" if case == "reduction" else "mean"}
    names = ["x", "t"]
    if case == "rank1":
        inputs = {"x": rand(4), "t": np.zeros((), np.int64)}
    elif case == "labels_shape":
        inputs["t"] = np.zeros(4, np.int64)
    elif case == "float_labels":
        inputs["t"] = np.zeros(3, np.float32)
    elif case == "weight_shape":
        inputs["w"] = rand(3)
        names.append("w")
    node = helper.make_node("NegativeLogLikelihoodLoss", names, ["y"], **attrs)
    m = make_model([node], inputs, {"y": (np.float32, None)}, opset=13)
    with pytest.raises(AotcError, match=match):
        aotc.compile(m, tmp_path, name="m")


@pytest.mark.parametrize("op", OPS)
def test_int32_labels_from_arena(op):
    # Labels computed in the graph live in the arena, where the float loss (same shape and
    # size) may take their storage in place: each label must be read before its loss is stored.
    x = rand(3, 4, 5, seed=11)
    t = _labels(x.shape, 4, seed=12, ignore=2)
    nodes = [helper.make_node("Cast", ["t"], ["t32"], to=6),
             helper.make_node(op, ["x", "t32"], ["y"], reduction="none", ignore_index=2)]
    m = make_model(nodes, {"x": x, "t": t}, {"y": (np.float32, [3, 5])}, opset=13)
    check(m, {"x": x, "t": t}, **TOL)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_constant_inputs_fold(op, reduction):
    # All inputs constant: the node is folded with the numpy reference at compile time.
    x = rand(3, 4, 2, seed=13)
    t = _labels(x.shape, 4, seed=14, ignore=1)
    inits = {"x": x, "t": t, "w": rand(4, seed=15, lo=0.1, hi=1)}
    shape = [3, 2] if reduction == "none" else []
    nodes = [helper.make_node(op, ["x", "t", "w"], ["y"], reduction=reduction, ignore_index=1),
             helper.make_node("Add", ["y", "b"], ["z"])]
    b = rand(*shape, seed=16)
    m = make_model(nodes, {"b": b}, {"z": (np.float32, shape)}, inits, opset=13)
    check(m, {"b": b}, **TOL)
