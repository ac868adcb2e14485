"""The ONNX backend node-test suite (onnx 1.22.0, the last release shipping it on disk) run
through aotc's generated C: compile with ``aotc.compile`` (memory plan and fusion on, as for any
model), load the library through cffi, run the test's inputs and compare with its outputs at
ONNX's own tolerance (rtol 1e-3, atol 1e-7).

``aotc/data/onnx_node_suite-1.22.0.tsv`` lists every test with its op type and whether it is in
the static-numeric subset (../shared/research/onnx_conformance.md §4).
``aotc/data/onnx_node_exclusions.txt`` lists, with a one-line reason, every test that is not
expected to pass; such a test must be rejected with an AotcError (never compiled into a "pass"
with wrong numbers).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from aotc.verification.coverage import SuiteEntry, exclusion_reason, exclusions, suite  # noqa: F401

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
ONNX_VERSION = "1.22.0"
RTOL, ATOL = 1e-3, 1e-7
# Ops whose first input is a generator parameter (a shape, a length, range bounds) that an
# exported model holds as an initializer.
GENERATORS = {"ConstantOfShape", "Range", "HannWindow", "HammingWindow", "BlackmanWindow",
              "MelWeightMatrix", "EyeLike"}
# Parameter-like inputs (axes, shape, pads, scales, k, clip bounds) are frozen into
# initializers the way an exported model holds them: not input 0, rank <= 1, <= 16 elements.
PARAM_MAX_ELEMS = 16


def data_root() -> Path:
    """The suite's test dirs; fetched (pip download of the onnx wheel, no install) on first use.
    AOTC_ONNX_NODE_DATA points at an existing ``.../data/node`` directory instead."""
    env = os.environ.get("AOTC_ONNX_NODE_DATA")
    if env:
        return Path(env)
    cache = Path(os.environ.get("AOTC_CACHE_DIR") or REPO / ".aotc-cache")
    root = cache / f"onnx-{ONNX_VERSION}-node"
    node = root / "onnx" / "backend" / "test" / "data" / "node"
    if (root / "complete").exists():
        return node
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:  # xdist workers: one fetches, the others wait
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / "complete").exists():
            _fetch(root)
    return node


def _fetch(root: Path) -> None:
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        f"onnx=={ONNX_VERSION}", "--python-version", "3.11",
                        "--only-binary=:all:", "--platform", "manylinux_2_28_x86_64",
                        "-d", tmp], check=True)
        wheel = next(Path(tmp).glob("onnx-*.whl"))
        with zipfile.ZipFile(wheel) as z:
            names = [n for n in z.namelist() if n.startswith("onnx/backend/test/data/node/")]
            z.extractall(root, names)
    (root / "complete").write_text(ONNX_VERSION)


# ----------------------------------------------------------------------------- one test
def _load_tensor(path: Path) -> np.ndarray | None:
    """The tensor in a .pb file; None when it holds a sequence/optional/map (outside the subset:
    such a test is compiled without inputs and must be rejected)."""
    t = onnx.TensorProto()
    try:
        t.ParseFromString(path.read_bytes())
        return numpy_helper.to_array(t)
    except Exception:  # noqa: BLE001 - any non-tensor payload
        return None


def load_case(test_dir: Path
              ) -> tuple[onnx.ModelProto, list[np.ndarray | None], list[np.ndarray | None]]:
    model = onnx.load(str(test_dir / "model.onnx"))
    ds = test_dir / "test_data_set_0"
    ins = [_load_tensor(ds / f"input_{i}.pb") for i in range(len(list(ds.glob("input_*.pb"))))]
    outs = [_load_tensor(ds / f"output_{i}.pb") for i in range(len(list(ds.glob("output_*.pb"))))]
    return model, ins, outs


def freeze_parameters(model: onnx.ModelProto, inputs: list[np.ndarray | None], op_type: str
                      ) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Bind parameter-like graph inputs as initializers; return the model and remaining feeds."""
    g = model.graph
    init_names = {t.name for t in g.initializer}
    real = [vi for vi in g.input if vi.name not in init_names]
    feeds: dict[str, np.ndarray] = {}
    frozen: list[onnx.TensorProto] = []
    keep = []
    for i, (vi, arr) in enumerate(zip(real, inputs)):
        first_gen = i == 0 and op_type in GENERATORS
        if arr is None:
            keep.append(vi)  # not a tensor: left as a graph input for aotc to reject
        elif (i > 0 or first_gen) and arr.ndim <= 1 and arr.size <= PARAM_MAX_ELEMS:
            frozen.append(numpy_helper.from_array(arr, vi.name))
        else:
            feeds[vi.name] = arr
            keep.append(vi)
    if frozen:
        m = onnx.ModelProto()
        m.CopyFrom(model)
        del m.graph.input[:]
        m.graph.input.extend(keep)
        m.graph.initializer.extend(frozen)
        model = m
    return model, feeds


def build_dir(name: str) -> Path:
    cache = Path(os.environ.get("AOTC_CACHE_DIR") or REPO / ".aotc-cache")
    d = cache / "onnx-node-bundles" / name
    d.mkdir(parents=True, exist_ok=True)
    return d


def run_case(entry: SuiteEntry, test_dir: Path) -> dict[str, np.ndarray]:
    """Compile and run one test through the generated C; returns outputs by graph-output name.
    Raises AotcError for what aotc rejects."""
    import aotc

    model, inputs, _ = load_case(test_dir)
    model, feeds = freeze_parameters(model, inputs, entry.op_type)
    ident = hashlib.sha256(model.SerializeToString()).hexdigest()[:12]
    bundle = aotc.compile(model, build_dir(f"{entry.name}-{ident}"), name="m")
    return bundle.load().run(feeds)


def tolerance_exception(reason: str | None) -> float | None:
    """``[atol=1e-6] why`` -> 1e-6: the test runs and is compared at that tolerance."""
    if reason and reason.startswith("[atol="):
        return float(reason[len("[atol="):reason.index("]")])
    return None


def compare(model: onnx.ModelProto, got: dict[str, np.ndarray], want: list[np.ndarray],
            atol: float = ATOL) -> None:
    names = [o.name for o in model.graph.output]
    assert len(names) == len(want), (names, len(want))
    for name, w in zip(names, want):
        g = got[name]
        assert g.shape == w.shape, f"{name}: shape {g.shape}, expected {w.shape}"
        assert g.dtype == w.dtype, f"{name}: dtype {g.dtype}, expected {w.dtype}"
        if w.dtype.kind in "fc":
            np.testing.assert_allclose(g, w, rtol=RTOL, atol=atol, equal_nan=True, err_msg=name)
        else:
            np.testing.assert_array_equal(g, w, err_msg=name)
