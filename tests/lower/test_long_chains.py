"""Long chains of fused elementwise ops: the fuse pass puts the whole chain into one kernel's
epilogue, and the builder binds the running value to a local before each link, so the kernel
body grows linearly with the chain. Before that, an operand used twice (HardSwish, Elu) was
inlined as a copy of its whole expression (20 links did not compile in 60 s) and a few hundred
links of Add or Mul hit Python's recursion limit in the loop-IR walks.

Each chain is compiled (-Werror), timed, and compared with onnxruntime through the generated C
(host only; atol=rtol=1e-5). The time bound is generous for a shared 2-core machine; the
exponential version took minutes at 20 links.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from onnx import helper
from opcheck import compile_and_run, make_model, ort_run, rand

import aotc


def _chain(op: str, n: int):  # type: ignore[no-untyped-def]
    nodes, prev = [], "x"
    for i in range(n):
        out = f"t{i}" if i < n - 1 else "y"
        ins = [prev, "c"] if op in ("Add", "Mul") else [prev]
        nodes.append(helper.make_node(op, ins, [out], name=f"{op}_{i}"))
        prev = out
    inits = {"c": np.full((1,), 0.999 if op == "Mul" else 0.01, np.float32)} \
        if op in ("Add", "Mul") else {}
    return make_model(nodes, {"x": rand(2, 8)}, {"y": (np.float32, [2, 8])}, inits)


@pytest.mark.parametrize("n", [20, 50, 300])
@pytest.mark.parametrize("op", ["HardSwish", "Elu", "Add", "Mul"])
def test_long_fused_chain(op: str, n: int) -> None:
    model = _chain(op, n)
    x = rand(2, 8, seed=5, lo=-4, hi=4)
    want = ort_run(model, {"x": x})["y"]
    with tempfile.TemporaryDirectory(prefix="aotc_test_") as tmp:
        start = time.monotonic()
        got, bundle = compile_and_run(model, {"x": x}, Path(tmp) / "b")
        seconds = time.monotonic() - start
        assert len(bundle.kernels) == 1, "the chain should fuse into one kernel"
    assert seconds < 30, f"{n} x {op} took {seconds:.1f} s to compile and run"
    np.testing.assert_allclose(got["y"], want, atol=1e-5, rtol=1e-5)


def test_chain_kernel_size_is_linear() -> None:
    """The C of a 40-link HardSwish chain is about twice that of a 20-link one (it was 2**20
    times bigger)."""
    sizes = []
    for n in (20, 40):
        with tempfile.TemporaryDirectory(prefix="aotc_test_") as tmp:
            bundle = aotc.compile(_chain("HardSwish", n), tmp, name="m")
            sizes.append(sum(f.stat().st_size for f in Path(bundle.directory).glob("*.c")))
    assert sizes[1] < 2.5 * sizes[0], sizes
