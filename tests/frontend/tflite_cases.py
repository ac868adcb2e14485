"""The cases of test_tflite_ops.py for the builtins of aotc/frontend/tflite/math_ops.py and
tensor_ops.py: each a ``spec(net, x, shape) -> output tensor`` on a [1, 6, 6, 4] input (float32
and int8, on the graph input and after a 1x1 CONV_2D), and ``TYPED`` cases on int32/bool
inputs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from ai_edge_litert import schema_py_generated as S
from tflite_builder import Net, options

Spec = Callable[[Net, int, tuple[int, ...]], int]


def unary(code: str, pre: str | None = None, opts: Any = None) -> Spec:
    """``code`` on x (on ABS(x) + 0.1 for the functions of positive numbers)."""
    def spec(net: Net, x: int, s: tuple[int, ...]) -> int:
        if pre == "positive":
            x = net.op("ADD", [net.op("ABS", [x], s), net.const_like(
                np.full((1,), 0.1), x)], s, options("AddOptions"))
        return net.op(code, [x], s, opts)
    return spec


def binary(code: str, const: str = "like", opts: Any = None, positive: bool = False) -> Spec:
    """x ``code`` c: c a per-channel constant (``like``: with x's parameters in int8)."""
    def spec(net: Net, x: int, s: tuple[int, ...]) -> int:
        vals = net.rng.normal(size=s[-1:])
        if positive:
            vals = np.abs(vals) + 0.5
        c = net.const_like(vals, x) if const == "like" else net.const(vals)
        return net.op(code, [x, c], s, opts)
    return spec


def compare(code: str, other: str = "like") -> Spec:
    """x ``code`` c: c a per-channel constant with x's parameters (``like``), its own
    (``own``), or an activation of other parameters (``act``: x + c)."""
    def spec(net: Net, x: int, s: tuple[int, ...]) -> int:
        vals = net.rng.normal(size=s[-1:]).round(1)
        if other == "act":
            c = net.op("ADD", [x, net.const(vals * 0.3)], s, options("AddOptions"))
        else:
            c = net.const_like(vals, x) if other == "like" else net.const(vals * 3)
        return net.op(code, [x, c], s, dtype=np.bool_)
    return spec


def logical(code: str) -> Spec:
    def spec(net: Net, x: int, s: tuple[int, ...]) -> int:
        a = net.op("GREATER", [x, net.const_like(np.full((1,), -0.3), x)], s, dtype=np.bool_)
        if code == "LOGICAL_NOT":
            return net.op(code, [a], s, dtype=np.bool_)
        c = net.op("LESS", [x, net.const_like(np.full((1,), 0.5), x)], s, dtype=np.bool_)
        return net.op(code, [a, c], s, dtype=np.bool_)
    return spec


def reduce_bool(code: str) -> Spec:
    def spec(net: Net, x: int, s: tuple[int, ...]) -> int:
        a = net.op("GREATER", [x, net.const_like(np.full((1,), 0.0), x)], s, dtype=np.bool_)
        return net.op(code, [a, net.ints([-1])], s[:3], options("ReducerOptions"),
                      dtype=np.bool_)
    return spec


def select(net: Net, x: int, s: tuple[int, ...]) -> int:
    cond = net.op("GREATER", [x, net.const_like(np.full((1,), 0.2), x)], s, dtype=np.bool_)
    other = net.const_like(net.rng.normal(size=s[-1:]) * 0.5, x)
    return net.op("SELECT_V2", [cond, x, other], s)


def reduce(code: str, axes: list[int], keep: bool) -> Spec:
    def spec(net: Net, x: int, s: tuple[int, ...]) -> int:
        r = len(s)
        red = {a % r for a in axes}
        out = tuple(1 if k in red else d for k, d in enumerate(s)) if keep else tuple(
            d for k, d in enumerate(s) if k not in red)
        return net.op(code, [x, net.ints(axes)], out, options("ReducerOptions", keepDims=keep))
    return spec


def arg(code: str, axis: int, out_type: Any) -> Spec:
    def spec(net: Net, x: int, s: tuple[int, ...]) -> int:
        r = len(s)
        out = tuple(d for k, d in enumerate(s) if k != axis % r)
        cls = "ArgMaxOptions" if code == "ARG_MAX" else "ArgMinOptions"
        from ai_edge_litert import schema_py_generated as S
        t = S.TensorType.INT32 if out_type == np.int32 else S.TensorType.INT64
        return net.op(code, [x, net.ints([axis])], out, options(cls, outputType=t),
                      dtype=out_type)
    return spec


def cumsum(exclusive: bool, reverse: bool) -> Spec:
    return lambda net, x, s: net.op("CUMSUM", [x, net.ints(2)], s, options(
        "CumsumOptions", exclusive=exclusive, reverse=reverse))


def batch_matmul(adj_y: bool) -> Spec:
    def spec(net: Net, x: int, s: tuple[int, ...]) -> int:
        w = net.rng.normal(size=(3, s[-1]) if adj_y else (s[-1], 3))
        return net.op("BATCH_MATMUL", [x, net.const(w)], s[:3] + (3,),
                      options("BatchMatMulOptions", adjY=adj_y))
    return spec


def _fixed_int8_output(net: Net, y: int, scale: float, zero_point: int) -> int:
    """int8: the output parameters TFLite's converter writes (and TFLM or LiteRT require)."""
    q = net.tensors[y].quantization
    if q is not None and net.tensors[y].type == S.TensorType.INT8:
        q.scale, q.zeroPoint = np.array([scale], np.float32), np.array([zero_point], np.int64)
    return y


def l2norm(net: Net, x: int, s: tuple[int, ...]) -> int:
    return _fixed_int8_output(net, net.op("L2_NORMALIZATION", [x], s, options("L2NormOptions")),
                              1 / 128, 0)


def log_softmax(net: Net, x: int, s: tuple[int, ...]) -> int:
    return _fixed_int8_output(net, net.op("LOG_SOFTMAX", [x], s), 16 / 256, 127)


def prelu(net: Net, x: int, s: tuple[int, ...]) -> int:
    alpha = net.const(net.rng.uniform(0.05, 0.5, size=(1, 1, s[-1])))
    return net.op("PRELU", [x, alpha], s)


def add_n(net: Net, x: int, s: tuple[int, ...]) -> int:
    # int8: the constant has x's parameters (TFLM's ADD_N requires one scale and zero point)
    return net.op("ADD_N", [x, x, net.const_like(net.rng.normal(size=s), x)], s)


def pack(axis: int) -> Spec:
    def spec(net: Net, x: int, s: tuple[int, ...]) -> int:
        out = list(s)
        out.insert(axis % (len(s) + 1), 2)
        return net.op("PACK", [x, x], tuple(out), options("PackOptions", valuesCount=2,
                                                          axis=axis))
    return spec


def unpack(net: Net, x: int, s: tuple[int, ...]) -> int:
    outs = net.op("UNPACK", [x], s[:3], options("UnpackOptions", num=s[3], axis=-1),
                  n_out=s[3])
    return outs[1]


def expand_dims(net: Net, x: int, s: tuple[int, ...]) -> int:
    return net.op("EXPAND_DIMS", [x, net.ints([-2])], s[:3] + (1, s[3]))


def tile(net: Net, x: int, s: tuple[int, ...]) -> int:
    return net.op("TILE", [x, net.ints([1, 1, 2, 1])], (s[0], s[1], 2 * s[2], s[3]))


def broadcast_to(net: Net, x: int, s: tuple[int, ...]) -> int:
    return net.op("BROADCAST_TO", [x, net.ints((2,) + s[1:])], (2,) + s[1:])


def slice_(net: Net, x: int, s: tuple[int, ...]) -> int:
    return net.op("SLICE", [x, net.ints([0, 1, 0, 1]), net.ints([1, -1, 3, 2])],
                  (1, s[1] - 1, 3, 2))


def split_v(net: Net, x: int, s: tuple[int, ...]) -> int:
    outs = net.op("SPLIT_V", [x, net.ints([1, 2, -1]), net.ints(-3)],
                  [(1, 1, 6, 4), (1, 2, 6, 4), (1, 3, 6, 4)],
                  options("SplitVOptions", numSplits=3), n_out=3)
    return outs[2]


def padv2(net: Net, x: int, s: tuple[int, ...]) -> int:
    p = [[0, 0], [1, 2], [2, 0], [0, 1]]
    out = tuple(d + a + b for d, (a, b) in zip(s, p))
    return net.op("PADV2", [x, net.ints(p), net.const_like(np.array(0.25), x)], out)


def mirror_pad(mode: int) -> Spec:
    def spec(net: Net, x: int, s: tuple[int, ...]) -> int:
        p = [[0, 0], [2, 1], [0, 3 if mode == 1 else 2], [1, 0]]
        out = tuple(d + a + b for d, (a, b) in zip(s, p))
        return net.op("MIRROR_PAD", [x, net.ints(p)], out, options("MirrorPadOptions",
                                                                   mode=mode))
    return spec


def reverse(net: Net, x: int, s: tuple[int, ...]) -> int:
    return net.op("REVERSE_V2", [x, net.ints([1, -2])], s)  # LiteRT: contiguous axes


def gather(axis: int) -> Spec:
    def spec(net: Net, x: int, s: tuple[int, ...]) -> int:
        idx = [3, 0, 1] if axis % 4 == 3 else [5, 0, 2, 2]
        out = list(s)
        out[axis % 4] = len(idx)
        return net.op("GATHER", [x, net.ints(idx)], tuple(out), options("GatherOptions",
                                                                        axis=axis))
    return spec


def gather_nd(net: Net, x: int, s: tuple[int, ...]) -> int:
    return net.op("GATHER_ND", [x, net.ints([[0, 1], [0, 4], [0, 0]])], (3, s[2], s[3]))


def embedding_lookup(net: Net, x: int, s: tuple[int, ...]) -> int:
    return net.op("EMBEDDING_LOOKUP", [net.ints([0, 0, 0]), x], (3,) + s[1:])


def depth_to_space(net: Net, x: int, s: tuple[int, ...]) -> int:
    return net.op("DEPTH_TO_SPACE", [x], (1, 2 * s[1], 2 * s[2], s[3] // 4),
                  options("DepthToSpaceOptions", blockSize=2))


def space_to_depth(net: Net, x: int, s: tuple[int, ...]) -> int:
    return net.op("SPACE_TO_DEPTH", [x], (1, s[1] // 2, s[2] // 2, 4 * s[3]),
                  options("SpaceToDepthOptions", blockSize=2))


def space_batch(round_trip: bool, padded: bool = False) -> Spec:
    def spec(net: Net, x: int, s: tuple[int, ...]) -> int:
        pads = [[1, 1], [0, 2]] if padded else [[0, 0], [0, 0]]
        hw = (4, 4) if padded else (3, 3)
        y = net.op("SPACE_TO_BATCH_ND", [x, net.ints([2, 2]), net.ints(pads)], (4, *hw, 4))
        if not round_trip:
            return y
        return net.op("BATCH_TO_SPACE_ND", [y, net.ints([2, 2]), net.ints([[1, 0], [0, 1]])],
                      (1, 2 * hw[0] - 1, 2 * hw[1] - 1, 4))
    return spec


def resize(code: str, align: bool, half: bool, size: tuple[int, int] = (11, 9)) -> Spec:
    cls = "ResizeBilinearOptions" if code == "RESIZE_BILINEAR" else \
        "ResizeNearestNeighborOptions"
    return lambda net, x, s: net.op(code, [x, net.ints(list(size))], (1, *size, s[3]),
                                    options(cls, alignCorners=align, halfPixelCenters=half))


def cast(net: Net, x: int, s: tuple[int, ...]) -> int:
    return net.op("CAST", [x], s, dtype=np.int32)


def keras_flatten(net: Net, x: int, s: tuple[int, ...]) -> int:
    """SHAPE -> STRIDED_SLICE -> PACK -> RESHAPE, as Keras's Flatten exports: all folded."""
    shp = net.op("SHAPE", [x], (4,), options("ShapeOptions", outType=2), dtype=np.int32)
    n = net.op("STRIDED_SLICE", [shp, net.ints([0]), net.ints([1]), net.ints([1])], (),
               options("StridedSliceOptions", shrinkAxisMask=1), dtype=np.int32)
    packed = net.op("PACK", [n, net.ints(-1)], (2,), options("PackOptions", valuesCount=2),
                    dtype=np.int32)
    flat = (s[0], int(np.prod(s[1:])))
    return net.op("RESHAPE", [x, packed], flat)


def fill_add(net: Net, x: int, s: tuple[int, ...]) -> int:
    f = net.op("FILL", [net.ints(list(s)), net.const_like(np.array(0.5), x)], s)
    return net.op("MAXIMUM", [x, f], s)


def zeros_like_max(net: Net, x: int, s: tuple[int, ...]) -> int:
    z = net.op("ZEROS_LIKE", [x], s)
    if net.quant:  # ZEROS_LIKE writes integer zeros: the input's zero point would be 0
        return net.op("MAXIMUM", [x, net.const_like(np.zeros(1), x)], s)
    return net.op("MAXIMUM", [x, z], s)


def broadcast_args(net: Net, x: int, s: tuple[int, ...]) -> int:
    shp = net.op("BROADCAST_ARGS", [net.ints(list(s)), net.ints([2, 1, 1, 1])], (4,),
                 dtype=np.int32)
    return net.op("BROADCAST_TO", [x, shp], (2,) + s[1:])


def gelu(approx: bool) -> Spec:
    return lambda net, x, s: net.op("GELU", [x], s, options("GeluOptions", approximate=approx))


def densify(block: int) -> Spec:
    """x + DENSIFY(a pruned constant): the sparse weights become dense at compile time."""
    def spec(net: Net, x: int, s: tuple[int, ...]) -> int:
        w = net.rng.normal(size=(36, 4))
        w[np.abs(w) < 0.8] = 0
        d = net.op("DENSIFY", [net.sparse(w, block)], (36, 4))
        if net.quant:  # the int8 DENSIFY output keeps the sparse constant's parameters
            src = net.tensors[net.tensors.index(net.tensors[d]) - 1].quantization
            net.tensors[d].quantization = src
        r = net.op("RESHAPE", [d, net.ints(list(s))], s, options("ReshapeOptions",
                                                                   newShape=list(s)))
        if net.quant:
            net.tensors[r].quantization = net.tensors[d].quantization
        return net.op("ADD", [x, r], s, options("AddOptions"))
    return spec


def l2_pool(padding: int) -> Spec:
    def spec(net: Net, x: int, s: tuple[int, ...]) -> int:
        out = (1, 3, 3, s[3]) if padding == 0 else (1, 2, 2, s[3])
        return net.op("L2_POOL_2D", [x], out, options(
            "Pool2DOptions", padding=padding, strideH=2, strideW=2, filterHeight=3,
            filterWidth=3))
    return spec


def dynamic_update_slice(net: Net, x: int, s: tuple[int, ...]) -> int:
    upd = net.const_like(net.rng.normal(size=(1, 2, 3, s[3])), x)
    return net.op("DYNAMIC_UPDATE_SLICE", [x, upd, net.ints([0, 1, 5, 0])], s)  # clamped


CASES: dict[str, Spec] = {
    "L2_POOL_2D": l2_pool(0), "L2_POOL_2D_valid": l2_pool(1),
    "DYNAMIC_UPDATE_SLICE": dynamic_update_slice,
    "DENSIFY": densify(0), "DENSIFY_blocks": densify(2),
    "ABS": unary("ABS"), "NEG": unary("NEG"), "EXP": unary("EXP"),
    "LOG": unary("LOG", "positive"), "SQRT": unary("SQRT", "positive"),
    "RSQRT": unary("RSQRT", "positive"), "SQUARE": unary("SQUARE"), "SIN": unary("SIN"),
    "COS": unary("COS"), "FLOOR": unary("FLOOR"), "CEIL": unary("CEIL"),
    "ROUND": unary("ROUND"), "ELU": unary("ELU"), "RELU_N1_TO_1": unary("RELU_N1_TO_1"),
    "RELU_0_TO_1": unary("RELU_0_TO_1"), "SIGN": unary("SIGN"),
    "GELU": gelu(False), "GELU_tanh": gelu(True),
    "L2_NORMALIZATION": l2norm, "LOG_SOFTMAX": log_softmax, "PRELU": prelu,
    "ADD_N": add_n,
    "MAXIMUM": binary("MAXIMUM"), "MINIMUM": binary("MINIMUM"),
    "DIV": binary("DIV", "own", options("DivOptions"), positive=True),
    "DIV_relu": binary("DIV", "own", options("DivOptions", fusedActivationFunction=1),
                       positive=True),
    "SQUARED_DIFFERENCE": binary("SQUARED_DIFFERENCE", "own"),
    "FLOOR_DIV": binary("FLOOR_DIV", "own", positive=True),
    "FLOOR_MOD": binary("FLOOR_MOD", "own"),
    "POW": lambda net, x, s: net.op("POW", [net.op("ABS", [x], s), net.const(
        np.array([2.0, 0.5, 1.5, 3.0]))], s),
    "EQUAL": compare("EQUAL"), "NOT_EQUAL": compare("NOT_EQUAL"),
    "GREATER": compare("GREATER"), "GREATER_EQUAL": compare("GREATER_EQUAL"),
    "LESS": compare("LESS"), "LESS_EQUAL": compare("LESS_EQUAL"),
    "GREATER_own_scale": compare("GREATER", "own"), "EQUAL_own_scale": compare("EQUAL", "own"),
    "LESS_EQUAL_activations": compare("LESS_EQUAL", "act"),
    "NOT_EQUAL_activations": compare("NOT_EQUAL", "act"),
    "LOGICAL_AND": logical("LOGICAL_AND"), "LOGICAL_OR": logical("LOGICAL_OR"),
    "LOGICAL_NOT": logical("LOGICAL_NOT"),
    "REDUCE_ANY": reduce_bool("REDUCE_ANY"), "REDUCE_ALL": reduce_bool("REDUCE_ALL"),
    "SELECT_V2": select,
    "REDUCE_MAX": reduce("REDUCE_MAX", [1, 2], True),
    "REDUCE_MAX_neg_axis": reduce("REDUCE_MAX", [-1], False),
    "REDUCE_MIN": reduce("REDUCE_MIN", [-3], False),
    "REDUCE_PROD": reduce("REDUCE_PROD", [3], True),
    "SUM": reduce("SUM", [1, -2], False),
    "ARG_MAX": arg("ARG_MAX", -1, np.int32), "ARG_MIN": arg("ARG_MIN", 1, np.int64),
    "CUMSUM": cumsum(False, False), "CUMSUM_exclusive_reverse": cumsum(True, True),
    "BATCH_MATMUL": batch_matmul(False), "BATCH_MATMUL_adj_y": batch_matmul(True),
    "PACK": pack(0), "PACK_neg_axis": pack(-1), "UNPACK": unpack,
    "EXPAND_DIMS": expand_dims, "TILE": tile, "BROADCAST_TO": broadcast_to,
    "BROADCAST_ARGS": broadcast_args,
    "SLICE": slice_, "SPLIT_V": split_v, "PADV2": padv2,
    "MIRROR_PAD_reflect": mirror_pad(0), "MIRROR_PAD_symmetric": mirror_pad(1),
    "REVERSE_V2": reverse, "GATHER": gather(3), "GATHER_neg_axis": gather(-3),
    "GATHER_ND": gather_nd, "EMBEDDING_LOOKUP": embedding_lookup,
    "DEPTH_TO_SPACE": depth_to_space, "SPACE_TO_DEPTH": space_to_depth,
    "SPACE_TO_BATCH_ND": space_batch(False),
    "SPACE_TO_BATCH_ND_padded": space_batch(False, True),
    "BATCH_TO_SPACE_ND": space_batch(True),
    "RESIZE_BILINEAR": resize("RESIZE_BILINEAR", False, False),
    "RESIZE_BILINEAR_align": resize("RESIZE_BILINEAR", True, False),
    "RESIZE_BILINEAR_half_pixel": resize("RESIZE_BILINEAR", False, True),
    "RESIZE_BILINEAR_down_half_pixel": resize("RESIZE_BILINEAR", False, True, (4, 5)),
    "RESIZE_BILINEAR_down_align": resize("RESIZE_BILINEAR", True, False, (5, 3)),
    "RESIZE_NEAREST_NEIGHBOR": resize("RESIZE_NEAREST_NEIGHBOR", False, False),
    "RESIZE_NEAREST_NEIGHBOR_align": resize("RESIZE_NEAREST_NEIGHBOR", True, False),
    "RESIZE_NEAREST_NEIGHBOR_half_pixel": resize("RESIZE_NEAREST_NEIGHBOR", False, True),
    "CAST": cast, "SHAPE_keras_flatten": keras_flatten, "FILL": fill_add,
    "ZEROS_LIKE": zeros_like_max,
}
# float32 tolerance (rtol = atol) where it is not 1e-5: libm functions and sums in another
# order.
FLOAT_TOL = {k: 1e-4 for k in ("EXP", "LOG", "SIN", "COS", "RSQRT", "SQRT", "GELU", "ELU",
                               "LOG_SOFTMAX", "L2_NORMALIZATION", "POW", "RESIZE_BILINEAR",
                               "REDUCE_PROD", "SUM", "CUMSUM", "BATCH_MATMUL", "DIV",
                               "FLOOR_MOD", "ADD_N", "L2_POOL_2D")}


# ---------------------------------------------------------------------- int32 / bool inputs
def _typed_binary(code: str, out: Any = None) -> Callable[[Net], list[int]]:
    def spec(net: Net) -> list[int]:
        x = net.input((2, 3, 4), np.int32)
        c = net.ints(np.arange(-2, 2).reshape(1, 1, 4))
        return [net.op(code, [x, c], (2, 3, 4), dtype=out or np.int32)]
    return spec


def _typed(code: str, build: Callable[[Net, int], int], dtype: Any = np.int32
           ) -> Callable[[Net], list[int]]:
    def spec(net: Net) -> list[int]:
        return [build(net, net.input((2, 3, 4), dtype))]
    return spec


TYPED: dict[str, Callable[[Net], list[int]]] = {
    "ADD_int32": _typed_binary("ADD"), "SUB_int32": _typed_binary("SUB"),
    "MUL_int32": _typed_binary("MUL"), "MAXIMUM_int32": _typed_binary("MAXIMUM"),
    "MINIMUM_int32": _typed_binary("MINIMUM"),
    "GREATER_int32": _typed_binary("GREATER", np.bool_),
    "EQUAL_int32": _typed_binary("EQUAL", np.bool_),
    "GATHER_int32": _typed("GATHER", lambda n, x: n.op(
        "GATHER", [x, n.ints([2, 0])], (2, 3, 2), options("GatherOptions", axis=2),
        dtype=np.int32)),
    "REDUCE_MAX_int32": _typed("REDUCE_MAX", lambda n, x: n.op(
        "REDUCE_MAX", [x, n.ints([1])], (2, 4), options("ReducerOptions"), dtype=np.int32)),
    "CAST_int32_float": _typed("CAST", lambda n, x: n.op("CAST", [x], (2, 3, 4),
                                                         dtype=np.float32)),
    "PACK_int32": _typed("PACK", lambda n, x: n.op(
        "PACK", [x, x], (2, 2, 3, 4), options("PackOptions", valuesCount=2), dtype=np.int32)),
    "TRANSPOSE_int32": _typed("TRANSPOSE", lambda n, x: n.op(
        "TRANSPOSE", [x, n.ints([2, 0, 1])], (4, 2, 3), dtype=np.int32)),
    "LOGICAL_NOT_bool": _typed("LOGICAL_NOT", lambda n, x: n.op(
        "LOGICAL_NOT", [x], (2, 3, 4), dtype=np.bool_), np.bool_),
    "SELECT_V2_int32": lambda net: [net.op("SELECT_V2", [
        net.input((2, 3, 4), np.bool_), net.input((2, 3, 4), np.int32),
        net.ints(np.arange(4).reshape(1, 1, 4))], (2, 3, 4), dtype=np.int32)],
    "RESHAPE_bool": _typed("RESHAPE", lambda n, x: n.op(
        "RESHAPE", [x, n.ints([6, 4])], (6, 4), options("ReshapeOptions", newShape=[6, 4]),
        dtype=np.bool_), np.bool_),
}
