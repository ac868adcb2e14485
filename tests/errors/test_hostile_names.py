"""Model-controlled names (``*/``, quotes, newlines, ``??/`` trigraphs, backslashes, C keywords,
names of the bundle's own symbols) must compile to C that builds with -Werror, computes what
onnxruntime computes, and never carries the raw string into a comment or an identifier."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from opcheck import check, ort_run, rand

import aotc
from aotc.targets.host import Runner

REPO = Path(__file__).resolve().parents[2]

# Each string is dangerous in C in some way; none may reach a generated file verbatim.
EVIL_X = 'in*/put\n"x"'
EVIL_W = "w??/'eight'"
EVIL_MID = "mid\\dle */ int evil; /*"
EVIL_NODES = ["for */ node\n#define x 1", "int", 'q"?? /* */', "main\\"]
RAW = [EVIL_X, EVIL_W, EVIL_MID, EVIL_NODES[0], EVIL_NODES[2], EVIL_NODES[3], "graph */ name",
       "evil */ producer", "??/", "w??"]


def _generated(out: Path) -> list[Path]:
    return sorted(p for p in out.iterdir() if p.suffix in (".c", ".h", ".txt"))


def _strip_comments_and_strings(text: str) -> str:
    text = re.sub(r'"(?:[^"\\\n]|\\.)*"', '""', text)  # string literals first
    return re.sub(r"/\*.*?\*/", " ", text, flags=re.S)


def _assert_clean(out: Path) -> None:
    for f in _generated(out):
        text = f.read_text()
        for raw in RAW:
            assert raw not in text, f"{f.name} contains {raw!r}"
        assert "??" not in text, f"{f.name} contains a trigraph lead-in"
        assert "\\" not in text, f"{f.name} contains a backslash"
        for comment in re.findall(r"/\*(.*?)\*/", text, flags=re.S):
            assert "/*" not in comment, f"{f.name}: nested comment opener in {comment!r}"
        # Once comments and strings are gone, no stray terminator may be left in the code.
        code = _strip_comments_and_strings(text)
        assert "*/" not in code, f"{f.name}: comment terminator outside a comment"
        assert "evil" not in code, f"{f.name}: injected code"


def _evil_model() -> onnx.ModelProto:
    x, w, mid = EVIL_X, EVIL_W, EVIL_MID
    nodes = [
        helper.make_node("Gemm", [x, w, "int"], [mid], name=EVIL_NODES[0]),
        helper.make_node("Relu", [mid], ["for"], name=EVIL_NODES[1]),
        helper.make_node("Add", ["for", x], ["main"], name=EVIL_NODES[2]),
        # Inputs whose sanitised names collide with each other and with the bundle's symbols.
        helper.make_node("Add", ["a-b", "a_b"], ["s1"], name=EVIL_NODES[3]),
        helper.make_node("Add", ["s1", "k0_gemm_relu"], ["s2"], name="k2"),
        helper.make_node("Mul", ["s2", "m_w_int"], ["s3"], name="k3"),
        helper.make_node("Sub", ["s3", "uint8_t"], ["s4"], name="k4"),
        helper.make_node("Add", ["s4", "AOTC_OK"], ["s5"], name="k5"),
        helper.make_node("Add", ["s5", "M_ARENA_SIZE"], ["size_t"], name="k6"),
    ]
    four = [4, 4]
    odd = ["a-b", "a_b", "k0_gemm_relu", "m_w_int", "uint8_t", "AOTC_OK", "M_ARENA_SIZE"]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, four) for n in [x, *odd]]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, four)
               for n in ("main", "for", "size_t")]
    inits = [numpy_helper.from_array(rand(4, 4, seed=1), w),
             numpy_helper.from_array(rand(4, seed=2), "int")]
    g = helper.make_graph(nodes, "graph */ name\n", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=10,
                          producer_name="evil */ producer")
    onnx.checker.check_model(m)
    return m


def _feeds(m: onnx.ModelProto) -> dict[str, np.ndarray]:
    return {vi.name: rand(4, 4, seed=10 + k) for k, vi in enumerate(m.graph.input)}


def test_hostile_names_compile_run_and_match_onnxruntime(tmp_path: Path) -> None:
    m = _evil_model()
    # Different random values per input: a shadowed symbol would read the wrong array.
    check(m, _feeds(m), atol=1e-5, rtol=1e-5, out_dir=tmp_path, name="m")
    _assert_clean(tmp_path)


def test_hostile_names_in_c_identifiers_are_unique(tmp_path: Path) -> None:
    m = _evil_model()
    bundle = aotc.compile(m, tmp_path, name="m")
    meta = bundle.load().meta
    cnames = [t["c_name"] for t in meta["inputs"] + meta["outputs"]]
    assert len(set(cnames)) == len(cnames), cnames
    for c in cnames:
        assert re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", c), c
        assert c not in ("int", "for", "main", "size_t", "uint8_t", "AOTC_OK", "M_ARENA_SIZE",
                         "k0_gemm_relu", "m_w_int"), c
    assert [t["name"] for t in meta["inputs"]][0] == EVIL_X  # the descriptor keeps the key


def test_hostile_model_file_name_through_the_cli(tmp_path: Path) -> None:
    m = _evil_model()
    path = tmp_path / "ev*il \"q\" 'int' ??\\ */.onnx".replace("/", "")
    onnx.save(m, str(path))
    out = tmp_path / "out"
    res = subprocess.run([sys.executable, "-m", "aotc", "compile", str(path), "-o", str(out)],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    assert res.returncode == 0, res.stderr
    (c_file,) = [p for p in out.glob("*.c") if not p.name.endswith("_weights.c")]
    assert re.fullmatch(r"[a-z][a-z0-9_]*", c_file.stem), c_file.stem
    _assert_clean(out)
    feeds = _feeds(m)
    got = Runner(out).run(feeds)
    want = ort_run(m, feeds)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-5, err_msg=k)
