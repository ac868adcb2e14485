"""Linear algebra: Det (LU with partial pivoting) and Einsum (compile-time parsed equation).

Det copies each matrix into scratch and eliminates in place, so the input is never written.
Einsum lowers to one loop per output index around one loop per summed index, with the
product of the operand elements accumulated in a local: no intermediate tensors.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from typing import Any

import numpy as np

from aotc.errors import AotcError
from aotc.ir.graph import Node, TensorType, Value
from aotc.loops.builder import BufRef
from aotc.loops.loop_ir import INDEX, Const, Expr, Var, call, cmp, select
from aotc.ops import OpDef, register


# -------------------------------------------------------------------------------------- Det
@register
class Det(OpDef):
    name = "Det"
    since = 11
    onnx_tests = ("test_det_*",)

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        x = ins[0]
        assert x is not None
        s = x.type.shape
        if len(s) < 2 or s[-1] != s[-2]:
            raise AotcError(f"input shape {s} is not [..., M, M]", node.name, node.op)

    def reference(self, X: np.ndarray) -> np.ndarray:  # noqa: N803
        return np.asarray(np.linalg.det(X.astype(np.float64))).astype(X.dtype)

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        x = ins[0]
        assert x is not None
        return [TensorType(x.type.shape[:-2], x.type.dtype)]

    def lower(self, node: Node, kb: Any) -> None:
        X: BufRef = kb.inputs[0]
        f32 = X.dtype
        m = X.shape[-1]
        batch = int(np.prod(X.shape[:-2], dtype=np.int64))
        xin = BufRef(X.buf, (batch, m, m))
        if m == 1:
            with kb.loop(batch, "b") as b:
                kb.store_output([], xin[b, 0, 0], flat=b)
            return
        A = kb.scratch_buffer("lu", f32, (m, m))
        zero, one = Const(0.0, f32), Const(1.0, f32)
        with kb.loop(batch, "b") as b:
            with kb.loops((m, m), ("r", "c")) as (r, c):
                kb.store(A, [r, c], xin[b, r, c])
            det = kb.local(one, "det", f32)
            with kb.loop(m, "k") as k:
                # Partial pivoting: the row with the largest |A[i, k]| for i >= k.
                p = kb.local(k, "p", INDEX)
                best = kb.local(call("abs", A[k, k]), "best", f32)
                with kb.loop(m, "i", start=k + 1) as i:
                    v = kb.local(call("abs", A[i, k]), "v", f32)
                    gt = kb.local(cmp("gt", v, best), "gt", INDEX)
                    kb.assign(p, select(cmp("ne", gt, 0), i, p, INDEX))
                    kb.assign(best, select(cmp("ne", gt, 0), v, best, f32))
                with kb.if_(cmp("ne", p, k)):
                    with kb.loop(m, "j") as j:
                        t = kb.local(A[k, j], "t", f32)
                        kb.store(A, [k, j], A[p, j])
                        kb.store(A, [p, j], t)
                    kb.assign(det, -det)
                piv = kb.local(A[k, k], "piv", f32)
                kb.assign(det, det * piv)
                with kb.if_(cmp("ne", piv, zero)):
                    with kb.loop(m, "i", start=k + 1) as i:
                        fct = kb.local(A[i, k] / piv, "f", f32)
                        with kb.loop(m, "j", start=k + 1) as j:
                            kb.store(A, [i, j], A[i, j] - fct * A[k, j])
            kb.store_output([], det, flat=b)


@register
class Det22(Det):
    since = 22


# ----------------------------------------------------------------------------------- Einsum
def parse_einsum(equation: str, ranks: Sequence[int]) -> tuple[list[str], str]:
    """Operand subscripts and output subscripts with '...' expanded to fresh letters.
    Raises ValueError on a malformed equation."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ValueError(f"{len(terms)} operand terms for {len(ranks)} inputs")
    used = set(c for c in eq if c.isalpha())
    spare = [c for c in string.ascii_letters if c not in used]
    n_ell = 0
    for t, r in zip(terms, ranks):
        if "..." in t:
            n_ell = max(n_ell, r - len(t.replace("...", "")))
    if n_ell > len(spare):
        raise ValueError("too many broadcast dims")
    ell = "".join(spare[:n_ell])
    out_terms = []
    for t, r in zip(terms, ranks):
        if t.count("...") > 1:
            raise ValueError(f"term {t!r} has more than one ellipsis")
        k = r - len(t.replace("...", "")) if "..." in t else 0
        t = t.replace("...", ell[n_ell - k:] if k else "")
        if len(t) != r or not all(c.isalpha() for c in t):
            raise ValueError(f"term {t!r} does not match an input of rank {r}")
        out_terms.append(t)
    if arrow:
        if rhs.count("...") > 1:
            raise ValueError("the output has more than one ellipsis")
        out = rhs.replace("...", ell)
        if not all(c.isalpha() for c in out) or len(set(out)) != len(out):
            raise ValueError(f"bad output term {rhs!r}")
        if any(c not in "".join(out_terms) for c in out):
            raise ValueError(f"output term {rhs!r} names a letter no input has")
    else:
        joined = "".join(out_terms)
        out = ell + "".join(sorted(c for c in set(joined) if joined.count(c) == 1
                                   and c not in ell))
    return out_terms, out


def _sizes(terms: Sequence[str], shapes: Sequence[Sequence[int]]) -> dict[str, int]:
    """Letter -> extent; a 1 broadcasts against a larger extent."""
    size: dict[str, int] = {}
    for t, s in zip(terms, shapes):
        for c, d in zip(t, s):
            old = size.get(c, 1)
            if d != 1 and old != 1 and d != old:
                raise ValueError(f"index {c!r} has extents {old} and {d}")
            size[c] = max(old, int(d))
    return size


@register
class Einsum(OpDef):
    name = "Einsum"
    since = 12
    dtypes = ("float32", "int32", "int64")
    onnx_tests = ("test_einsum_*",)

    def _plan(self, node: Node, shapes: Sequence[Sequence[int]]
              ) -> tuple[list[str], str, dict[str, int]]:
        try:
            terms, out = parse_einsum(str(node.attrs["equation"]), [len(s) for s in shapes])
            return terms, out, _sizes(terms, shapes)
        except ValueError as e:
            raise AotcError(f"equation {node.attrs['equation']!r}: {e}", node.name,
                            node.op) from None

    def check(self, node: Node, ins: Sequence[Value | None]) -> None:
        super().check(node, ins)
        if not ins or any(v is None for v in ins):
            raise AotcError("needs at least one input and no omitted inputs", node.name, node.op)
        types = {v.type.dtype.name for v in ins if v is not None}
        if len(types) > 1:
            raise AotcError(f"inputs mix dtypes {sorted(types)}", node.name, node.op)
        self._plan(node, [v.type.shape for v in ins if v is not None])

    def infer(self, node: Node, ins: Sequence[Value | None]) -> list[TensorType]:
        vals = [v for v in ins if v is not None]
        _, out, size = self._plan(node, [v.type.shape for v in vals])
        return [TensorType(tuple(size[c] for c in out), vals[0].type.dtype)]

    def reference(self, *inputs: np.ndarray, equation: str) -> np.ndarray:
        return np.asarray(np.einsum(equation, *inputs))

    def lower(self, node: Node, kb: Any) -> None:
        ins: list[BufRef] = list(kb.inputs)
        dt = ins[0].dtype
        terms, out, size = self._plan(node, [r.shape for r in ins])
        summed = sorted({c for t in terms for c in t if c not in out})
        idx: dict[str, Expr] = {}
        out_ext = [size[c] for c in out]
        with kb.loops(out_ext, [f"i_{c}" for c in out]) as ov:
            idx.update(zip(out, ov))
            acc: Var = kb.local(Const(0, dt) if not dt.is_float else Const(0.0, dt), "acc", dt)
            with kb.loops([size[c] for c in summed], [f"s_{c}" for c in summed]) as sv:
                idx.update(zip(summed, sv))
                prod: Expr | None = None
                for r, t in zip(ins, terms):
                    v = r[[Const(0) if d == 1 else idx[c] for c, d in zip(t, r.shape)]]
                    prod = v if prod is None else prod * v
                assert prod is not None
                kb.assign(acc, acc + prod)
            kb.store_output(list(ov), acc)
