"""tile / unroll / reorder keep a kernel's results bit for bit.

Three kernels (matmul, a zero-padded 3x3 stencil with an If guard, an elementwise op) are built
with KernelBuilder, transformed, printed with CPrinter, compiled with -Werror and run through
cffi. Every variant must equal the untransformed kernel AND numpy exactly: the numpy references
accumulate in the kernels' order in float32 and the C is built with -ffp-contract=off.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from kernel_harness import build

from aotc import dtypes
from aotc.loops.builder import BufRef, KernelBuilder
from aotc.loops.loop_ir import Assign, Block, Buffer, If, Kernel, Loop, Stmt, Store, cmp, land
from aotc.loops.transforms import ScheduleError, reorder, tile, unroll

F32 = dtypes.float32
M, K, N = 5, 7, 6      # none divides the tile factors used below: remainders everywhere
H, W = 7, 9


def _ref(name: str, shape: tuple[int, ...], role: str) -> BufRef:
    return BufRef(Buffer(name, F32, int(np.prod(shape)), role), shape)


def matmul() -> Kernel:
    a, b, c = _ref("a", (M, K), "in"), _ref("b", (K, N), "in"), _ref("c", (M, N), "out")
    kb = KernelBuilder("matmul", "matmul", [a, b], [c])
    with kb.loop(M, "m") as m, kb.loop(N, "n") as n:
        acc = kb.local(0.0, "acc", F32)
        with kb.loop(K, "k") as k:
            kb.assign(acc, acc + a[m, k] * b[k, n])
        kb.store_output([m, n], acc)
    return kb.build()


def stencil() -> Kernel:
    x, w, y = _ref("x", (H, W), "in"), _ref("w", (3, 3), "in"), _ref("y", (H, W), "out")
    kb = KernelBuilder("stencil", "stencil", [x, w], [y])
    with kb.loop(H, "i") as i, kb.loop(W, "j") as j:
        acc = kb.local(0.0, "acc", F32)
        with kb.loop(3, "di") as di, kb.loop(3, "dj") as dj:
            r, c = i + di - 1, j + dj - 1
            with kb.if_(land(cmp("ge", r, 0), cmp("lt", r, H), cmp("ge", c, 0),
                             cmp("lt", c, W))):
                kb.assign(acc, acc + x[r, c] * w[di, dj])
        kb.store_output([i, j], acc)
    return kb.build()


def elementwise() -> Kernel:
    x, y = _ref("x", (4, 10), "in"), _ref("y", (4, 10), "out")
    kb = KernelBuilder("axpb", "y = 2.5 x + 1", [x], [y])
    with kb.loops([4, 10]) as (i0, i1):
        kb.store_output([i0, i1], x[i0, i1] * 2.5 + 1.0)
    return kb.build()


# ------------------------------------------------------------------ numpy, in kernel order
def np_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    acc = np.zeros((M, N), np.float32)
    for k in range(K):
        acc = acc + a[:, k:k + 1] * b[k:k + 1, :]
    return acc


def np_stencil(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    xp = np.pad(x, 1)
    acc = np.zeros((H, W), np.float32)
    for di in range(3):
        for dj in range(3):
            acc = acc + xp[di:di + H, dj:dj + W] * w[di, dj]
    return acc


# ------------------------------------------------------------------ IR inspection
def loops(body: tuple[Stmt, ...]) -> Counter[str]:
    out: Counter[str] = Counter()
    for s in body:
        if isinstance(s, Loop):
            out[s.var] += 1
            out += loops(s.body)
        elif isinstance(s, If):
            out += loops(s.then) + loops(s.orelse)
        elif isinstance(s, Block):
            out += loops(s.body)
    return out


def count(body: tuple[Stmt, ...], kind: type) -> int:
    n = 0
    for s in body:
        n += isinstance(s, kind)
        if isinstance(s, (Loop, Block)):
            n += count(s.body, kind)
        elif isinstance(s, If):
            n += count(s.then, kind) + count(s.orelse, kind)
    return n


Transform = Callable[[Kernel], Kernel]

MATMUL: dict[str, tuple[Transform, Callable[[Kernel], bool]]] = {
    "tile_m2": (lambda k: tile(k, "m", 2),
                lambda k: {"m_o", "m_i"} <= set(loops(k.body)) and "m" not in loops(k.body)),
    "tile_n3_exact": (lambda k: tile(k, "n", 3),
                      lambda k: {"n_o", "n_i"} <= set(loops(k.body))),
    "unroll_k_full": (lambda k: unroll(k, "k"),
                      lambda k: "k" not in loops(k.body) and count(k.body, Assign) == K),
    "unroll_k_by3": (lambda k: unroll(k, "k", 3),  # 7 = 2 * 3 + 1
                     lambda k: loops(k.body)["k_o"] == 1 and count(k.body, Assign) == 3 + 1),
    "unroll_k_by7": (lambda k: unroll(k, "k", 7),
                     lambda k: "k_o" not in loops(k.body) and count(k.body, Assign) == K),
    "reorder_nm": (lambda k: reorder(k, ["n", "m"]),
                   lambda k: isinstance(k.body[0], Loop) and k.body[0].var == "n"),
    "tile_tile_reorder": (
        lambda k: reorder(tile(tile(k, "m", 2), "n", 4), ["m_o", "n_o", "m_i", "n_i"]),
        lambda k: [lp.var for lp in _band(k)] == ["m_o", "n_o", "m_i", "n_i"]),
    "unroll_m_then_tile_n": (lambda k: tile(unroll(k, "m"), "n", 4),
                             lambda k: loops(k.body)["n_o"] == M),
    "tile_n_unroll_inner": (lambda k: unroll(tile(k, "n", 3), "n_i", 2),  # 3 = 2 + 1
                            # n_i_o runs once, so simplify leaves just the 3 copies
                            lambda k: not {"n_i", "n_i_o"} & set(loops(k.body))
                            and count(k.body, Store) == 3),
}


def _band(k: Kernel) -> list[Loop]:
    out, body = [], k.body
    while len(body) == 1 and isinstance(body[0], Loop):
        out.append(body[0])
        body = body[0].body
    return out


STENCIL: dict[str, tuple[Transform, Callable[[Kernel], bool]]] = {
    "tile_i3_j4": (lambda k: tile(tile(k, "i", 3), "j", 4),
                   lambda k: {"i_o", "i_i", "j_o", "j_i"} <= set(loops(k.body))),
    "unroll_taps": (lambda k: unroll(unroll(k, "di"), "dj"),
                    lambda k: not {"di", "dj"} & set(loops(k.body)) and count(k.body, If) == 9),
    "reorder_ji": (lambda k: reorder(k, ["j", "i"]),
                   lambda k: k.body[0].var == "j"),  # type: ignore[attr-defined]
    "unroll_dj_by2": (lambda k: unroll(k, "dj", 2),  # dj_o runs once: only copies remain
                      lambda k: not {"dj", "dj_o"} & set(loops(k.body))
                      and count(k.body, If) == 3),
    "everything": (lambda k: unroll(reorder(tile(k, "j", 4), ["j_o", "i", "j_i"]), "dj"),
                   lambda k: [lp.var for lp in _band(k)] == ["j_o", "i", "j_i"]),
}

ELEMENTWISE: dict[str, tuple[Transform, Callable[[Kernel], bool]]] = {
    "unroll_i1_by4": (lambda k: unroll(k, "i1", 4),  # 10 = 2 * 4 + 2
                      lambda k: count(k.body, Store) == 6 and loops(k.body)["i1_o"] == 1),
    "tile_i0_3": (lambda k: tile(k, "i0", 3), lambda k: "i0_i" in loops(k.body)),
    "reorder": (lambda k: reorder(k, ["i1", "i0"]), lambda k: _band(k)[0].var == "i1"),
    "unroll_all": (lambda k: unroll(unroll(k, "i0"), "i1"),
                   lambda k: not loops(k.body) and count(k.body, Store) == 40),
    "tile_exact_unroll_inner": (lambda k: unroll(tile(k, "i0", 4), "i0_i"),
                                # i0_o runs once: simplify turns it into its body
                                lambda k: not {"i0", "i0_o", "i0_i"} & set(loops(k.body))),
}


def _variants(base: Kernel, table: dict[str, tuple[Transform, Callable[[Kernel], bool]]]
              ) -> dict[str, Kernel]:
    out = {"base": base}
    for name, (fn, shape_ok) in table.items():
        k = fn(base)
        assert shape_ok(k), f"{name}: the transformation did not do what it says"
        assert k != base, name
        out[name] = k
    return out


def _run_all(tmp_path: Path, base: Kernel, table: dict, inputs: dict[str, np.ndarray],
             out_name: str, out_shape: tuple[int, ...], want: np.ndarray) -> None:
    variants = _variants(base, table)
    lib = build(variants, tmp_path)
    results = {}
    for name in variants:
        out = np.full(out_shape, np.nan, np.float32)
        lib.run(name, {**inputs, out_name: out})
        results[name] = out
    np.testing.assert_array_equal(results["base"], want)
    for name, got in results.items():
        np.testing.assert_array_equal(got, results["base"], err_msg=name)


def test_matmul_transforms(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    _run_all(tmp_path, matmul(), MATMUL, {"a": a, "b": b}, "c", (M, N), np_matmul(a, b))


def test_stencil_transforms(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((H, W)).astype(np.float32)
    w = rng.standard_normal((3, 3)).astype(np.float32)
    _run_all(tmp_path, stencil(), STENCIL, {"x": x, "w": w}, "y", (H, W), np_stencil(x, w))


def test_elementwise_transforms(tmp_path: Path) -> None:
    x = np.random.default_rng(2).standard_normal((4, 10)).astype(np.float32)
    want = x * np.float32(2.5) + np.float32(1.0)
    _run_all(tmp_path, elementwise(), ELEMENTWISE, {"x": x}, "y", (4, 10), want)


def test_unroll_by_a_factor_larger_than_the_extent_is_a_full_unroll() -> None:
    assert unroll(matmul(), "k", 100) == unroll(matmul(), "k")


# ------------------------------------------------------------------ invalid transformations
@pytest.mark.parametrize("bad", [
    lambda k: reorder(k, ["m", "n", "k"]),          # acc is declared between n and k
    lambda k: reorder(k, ["m", "k"]),               # not one nest
    lambda k: reorder(k, ["zz"]),                   # unknown loop
    lambda k: tile(k, "zz", 2),
    lambda k: unroll(k, "zz"),
    lambda k: tile(k, "m", 0),
    lambda k: unroll(k, "m", 0),
    lambda k: unroll(tile(k, "m", 2), "m_i"),       # remainder tile: no constant extent
    lambda k: reorder(tile(k, "m", 2), ["m_i", "m_o"]),  # m_i's bound reads m_o
])
def test_invalid_transforms_raise(bad: Transform) -> None:
    with pytest.raises(ScheduleError):
        bad(matmul())


def test_reorder_moving_a_tile_loop_outward_past_its_dependent_is_allowed() -> None:
    # m_i's bound reads m_o; m_o stays outside m_i, so this order is valid.
    k = reorder(tile(tile(matmul(), "m", 2), "n", 4), ["m_o", "n_o", "m_i", "n_i"])
    assert [lp.var for lp in _band(k)] == ["m_o", "n_o", "m_i", "n_i"]
