"""More pooling ops: LpPool and GlobalLpPool (the window code of pool.py with |x|^p sums), and
MaxUnpool (a scatter of X into a zeroed output at the MaxPool indices)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from aotc import dtypes
from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops.loop_ir import INDEX, Cast, Const, cmp, land
from aotc.ops import OpDef, register
from aotc.ops.nn.pool import _Pool


class _LpPool(_Pool):
    name = "LpPool"
    mode = "lp"
    onnx_tests = ("test_lppool_*",)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        if int(node.attrs.get("p", 2)) < 1:
            raise AotcError(f"p={node.attrs['p']} must be >= 1", node.name, node.op)


@register
class LpPool2(_LpPool):
    since = 2

    def reference(self, X: np.ndarray, *, auto_pad: str = "NOTSET",
                  kernel_shape: Sequence[int], p: int = 2, pads: Sequence[int] = (),
                  strides: Sequence[int] = ()) -> np.ndarray:
        return self._reference(X, dict(auto_pad=auto_pad, kernel_shape=kernel_shape, p=p,
                                       pads=pads, strides=strides))


@register
class LpPool18(_LpPool):
    """Opset 18 adds ceil_mode and dilations."""

    since = 18

    def reference(self, X: np.ndarray, *, auto_pad: str = "NOTSET", ceil_mode: int = 0,
                  dilations: Sequence[int] = (), kernel_shape: Sequence[int], p: int = 2,
                  pads: Sequence[int] = (), strides: Sequence[int] = ()) -> np.ndarray:
        return self._reference(X, dict(auto_pad=auto_pad, ceil_mode=ceil_mode,
                                       dilations=dilations, kernel_shape=kernel_shape, p=p,
                                       pads=pads, strides=strides))


@register
class GlobalLpPool(_LpPool):
    name = "GlobalLpPool"
    since = 2
    is_global = True
    onnx_tests = ()  # the node suite has no GlobalLpPool test

    def reference(self, X: np.ndarray, *, p: int = 2) -> np.ndarray:
        return self._reference(X, dict(p=p))


# ------------------------------------------------------------------------------------ MaxUnpool
@register
class MaxUnpool(OpDef):
    name = "MaxUnpool"
    since = 9
    const_inputs = (2,)
    defined = "a run-time index outside the output is skipped (nothing is written)"
    onnx_tests = ("test_maxunpool_*",)

    def _out_shape(self, node: Node, x_shape: Sequence[int],
                   output_shape: np.ndarray | None) -> tuple[int, ...]:
        nd = len(x_shape) - 2
        k = [int(v) for v in node.attrs["kernel_shape"]]
        s = [int(v) for v in node.attrs.get("strides") or [1] * nd]
        pads = [int(v) for v in node.attrs.get("pads") or [0] * (2 * nd)]
        if len(k) != nd or len(s) != nd or len(pads) != 2 * nd:
            raise AotcError(f"kernel_shape {k}, strides {s} and pads {pads} do not match the "
                            f"{nd} spatial dims", node.name, node.op)
        sp = [(n - 1) * st + kk - pads[i] - pads[i + nd]
              for i, (n, st, kk) in enumerate(zip(x_shape[2:], s, k))]
        if min(sp, default=1) < 1:
            raise AotcError(f"output would be empty (spatial {sp})", node.name, node.op)
        inferred = (*x_shape[:2], *sp)
        if output_shape is not None:
            shape = tuple(int(d) for d in np.asarray(output_shape).reshape(-1))
            if shape != inferred:
                # The ONNX reference scatters into the inferred shape and pads that at the end
                # of each dim; onnxruntime indexes the output_shape tensor directly.
                raise AotcError(f"output_shape {list(shape)} differs from the shape the "
                                f"attributes give, {list(inferred)} (ONNX and onnxruntime "
                                f"disagree on its meaning)", node.name, node.op)
        return inferred

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, [ins[0], None, *ins[2:]])
        x, ind = ins[0], ins[1]
        assert x is not None and ind is not None
        if len(x.type.shape) < 3:
            raise AotcError(f"expects X of rank >= 3 (N, C, spatial...), got {x.type.shape}",
                            node.name, node.op)
        if ind.type.dtype != dtypes.int64 or ind.type.shape != x.type.shape:
            raise AotcError(f"I must be int64 of X's shape {x.type.shape}, got "
                            f"{ind.type.dtype.name} {ind.type.shape}", node.name, node.op)
        self._out_shape(node, x.type.shape, self._const_shape(ins))

    @staticmethod
    def _const_shape(ins: Sequence[Value | None]) -> np.ndarray | None:
        v = ins[2] if len(ins) > 2 else None
        return v.const if v is not None else None

    def reference(self, X: np.ndarray, I: np.ndarray,  # noqa: E741
                  output_shape: np.ndarray | None = None, *, kernel_shape: Sequence[int],
                  pads: Sequence[int] = (), strides: Sequence[int] = ()) -> np.ndarray:
        node = Node(self.name, "reference", (), (),
                    dict(kernel_shape=kernel_shape, pads=pads, strides=strides))
        y = np.zeros(self._out_shape(node, X.shape, output_shape), X.dtype)
        flat = y.reshape(-1)
        for v, i in zip(X.reshape(-1), I.reshape(-1)):
            if 0 <= i < flat.size:
                flat[i] = v
        return y

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        x = ins[0]
        assert x is not None
        return [TensorType(self._out_shape(node, x.type.shape, self._const_shape(ins)),
                           x.type.dtype)]

    def lower(self, node: Node, kb: Any) -> None:
        X, ind, Y = kb.inputs[0], kb.inputs[1], kb.outputs[0]
        with kb.loop(Y.numel, "i") as i:
            kb.store_output([], Const(0.0, Y.dtype), flat=i)
        # Indices are flat over the whole output; one outside it is skipped, not written.
        with kb.loop(X.numel, "j") as j:
            at = kb.local(ind.flat(j), "at", dtypes.int64)
            with kb.if_(land(cmp("ge", at, 0), cmp("lt", at, math.prod(Y.shape)))):
                kb.store_output([], X.flat(j), flat=Cast(at, INDEX))
