"""Real-world .tflite files shipped in public packages (tests/fixtures/tflite_zoo: the source
package, version, path and licence of each are in zoo.json and README.md there).

Each fixture that compiles on main (``EXPECTED_TO_COMPILE``) is compiled with aotc, built for
the host and run on 8 input vectors spanning each input's dtype range (both ends, the zero
point, a checkerboard of the ends, 2 uniform draws and 2 narrower normal ones; for a float
input, the range its QUANTIZE represents, else [-1, 1]), then compared with the reference:
TensorFlow Lite Micro's Python interpreter, or LiteRT's reference kernels (BUILTIN_REF) where
TFLM refuses the model (uint8, float16 DEQUANTIZE, DENSIFY, ...). Integer outputs, and float
outputs dequantised from int8 (counted in steps of the DEQUANTIZE's scale): exact
(``KNOWN_LSB`` lists where main is not yet, with the measured distance). Other float outputs:
rtol 1e-4, atol 1e-5 (``FLOAT_ATOL``: 1e-4 for the deep face detectors). The first vector
also runs on the QEMU boards of AOTC_TEST_BOARDS against the host build, as every op test
does; the person detector and TFLM's keyword benchmark model (ON_CORTEX_M4F) run all 8
vectors on cortex-m4f in QEMU against TFLM. The keyword model's output is the same for every
input (scrambled weights saturate it), so each of its layers is compared too.

A fixture that does not compile on main is asserted to fail with one line
``aotc: error: ...`` on stderr (or the converter table's list: a heading and a line per
operator), exit status 2 and no traceback: when support for it lands, flip its entry in
``EXPECTED_TO_COMPILE`` (the test then fails until it is flipped).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as S
from ai_edge_litert.interpreter import Interpreter, OpResolverType
from opcheck import run_on_boards

import aotc

ZOO = Path(__file__).resolve().parents[1] / "fixtures" / "tflite_zoo"
META = {e["name"]: e for e in json.loads((ZOO / "zoo.json").read_text())}
ROOT = Path(__file__).resolve().parents[2]

# Status on main; the merger flips an entry when support for that model lands.
EXPECTED_TO_COMPILE = {
    "vww_mobilenet_v1_int8": True,
    "anomaly_detection_flatten_int8": True,      # SHAPE, PACK: folded
    "microwakeword_okay_nabu": True,             # resource variables, CALL_ONCE, SPLIT_V
    "face_detection_short_range_fp16": True,     # float16 weights behind DEQUANTIZE: folded
    "face_detection_full_range_sparse_fp16": True,  # DENSIFY, DEPTH_TO_SPACE, RESIZE_BILINEAR
    "hand_recrop_prelu_f32": True,               # PRELU
    "micro_speech_int8": True,
    "magic_wand_int8": True,
    "kws_mobilenetv2_mean_int8": True,
    "fingerprint_mean_int8": True,
    "kws_transfer_mean_softmax_int8": True,
    "mobilenet_v1_025_128_uint8": True,          # uint8 (TF1 post-training): vs LiteRT
    "mnist_lstm_int8": True,                     # integer LSTM, states in the state buffer
    "dtln_noise_suppression_lstm_int8": True,    # two integer LSTMs, states between calls
    "micro_speech_audio_preprocessor_int8": True,  # Signal ops (state), CAST int16
    "kws_ds_cnn_16x8": True,                     # 16x8: int16 activations, int8 weights
    "keyword_scrambled_svdf": True,              # SVDF states; SOFTMAX int8 -> int16 (zp -32768)
}

# Integer outputs where main is not bit-exact with the reference yet: the largest distance in
# LSB measured on the 8 vectors. Asserted as measured, so a fix shows: then drop the entry.
# (Empty since int8 MEAN computes as TFLM does: the fingerprint model was 1 LSB off and the
# KWS transfer model, MEAN then FULLY_CONNECTED and SOFTMAX, 5 LSB off when MEAN ran in float.)
KNOWN_LSB: dict[str, int] = {}

# Float outputs of deep float networks, summed in another order than LiteRT's: a larger
# absolute tolerance (the face detectors: 60 and 91 convolutions, box outputs up to about 30;
# measured at most 1.8e-5 off on 4 of 14,336 elements and 1.4e-5 on 1 of 36,864).
FLOAT_ATOL = {"face_detection_short_range_fp16": 1e-4,
              "face_detection_full_range_sparse_fp16": 1e-4}

N_VECTORS = 8


def test_metadata_matches_the_fixtures():
    files = {p.name for p in ZOO.glob("*.tflite")}
    assert files == {e["file"] for e in META.values()}
    assert set(EXPECTED_TO_COMPILE) == set(META)
    readme = (ZOO / "README.md").read_text()
    for e in META.values():
        data = (ZOO / e["file"]).read_bytes()
        assert len(data) == e["bytes"] and hashlib.sha256(data).hexdigest() == e["sha256"], e
        assert (ZOO / e["licence_file"]).is_file(), e["licence_file"]
        assert e["file"] in readme and e["sha256"] in readme, f"README.md lacks {e['file']}"
        assert len(data) <= 1_500_000, f"{e['file']} is over the 1.5 MB fixture limit"


# ------------------------------------------------------------------------------- vectors
def _quantize_ranges(model: bytes) -> dict[int, tuple[float, float]]:
    """For each graph input read by a QUANTIZE: the float range that op's output represents."""
    m = S.ModelT.InitFromPackedBuf(model, 0)
    sg = m.subgraphs[0]
    out: dict[int, tuple[float, float]] = {}
    for op in sg.operators or []:
        code = m.operatorCodes[op.opcodeIndex]
        if max(code.builtinCode, code.deprecatedBuiltinCode) != S.BuiltinOperator.QUANTIZE:
            continue
        src = int(op.inputs[0])
        if src not in list(sg.inputs):
            continue
        t = sg.tensors[op.outputs[0]]
        info = np.iinfo({S.TensorType.INT8: np.int8, S.TensorType.UINT8: np.uint8,
                         S.TensorType.INT16: np.int16}[t.type])
        scale, zp = float(t.quantization.scale[0]), int(t.quantization.zeroPoint[0])
        out[src] = (scale * (info.min - zp), scale * (info.max - zp))
    return out


def vectors(model: bytes, details: list[dict[str, Any]], seed: int = 0
            ) -> list[list[np.ndarray]]:
    """N_VECTORS input sets: all-min, all-max, the zero point (0.0 for float), a checkerboard
    of min and max, two uniform draws over [min, max] and two normal draws around the zero
    point (standard deviation 1/16 of the range, clipped)."""
    rng = np.random.default_rng(seed)
    qranges = _quantize_ranges(model)
    per_input = []
    for d in details:
        dt, shape = np.dtype(d["dtype"]), tuple(d["shape"])
        if dt.kind in "iu":
            lo, hi = np.iinfo(dt).min, np.iinfo(dt).max
            mid = int(d["quantization"][1]) if d["quantization"][0] else 0
        else:
            lo, hi = qranges.get(d["index"], (-1.0, 1.0))
            mid = 0.0
        # Two uniform draws over the whole range, two narrower ones around the zero point
        # (whole-range inputs saturate most classifiers' outputs).
        draw = [rng.uniform(lo, hi, size=shape) for _ in range(2)]
        draw += [np.clip(rng.normal(mid, (hi - lo) / 16, size=shape), lo, hi) for _ in range(2)]
        if dt.kind in "iu":
            draw = [np.round(v) for v in draw]
        board = np.where(np.indices(shape).sum(axis=0) % 2 == 0, lo, hi)
        vs = [np.full(shape, lo), np.full(shape, hi), np.full(shape, mid), board, *draw]
        per_input.append([v.astype(dt) for v in vs])
    return [list(k) for k in zip(*per_input)]


def _details(model: bytes, which: str) -> list[dict[str, Any]]:
    """The main subgraph's inputs or outputs as LiteRT's get_input_details() gives them
    (index, dtype, shape, (scale, zero point)), read from the flatbuffer: LiteRT cannot load
    a model with TFLM's custom Signal operators."""
    m = S.ModelT.InitFromPackedBuf(model, 0)
    sg = m.subgraphs[0]
    types = {v: k for k, v in vars(S.TensorType).items() if not k.startswith("_")}
    out = []
    for i in getattr(sg, which):
        t = sg.tensors[int(i)]
        q = t.quantization
        quant = (float(q.scale[0]), int(q.zeroPoint[0])) if q is not None and \
            q.scale is not None and len(q.scale) else (0.0, 0)
        out.append({"index": int(i), "dtype": np.dtype(types[t.type].lower()),
                    "shape": [int(d) for d in t.shape], "quantization": quant})
    return out


# ---------------------------------------------------------------------------- references
def _litert(model: bytes) -> Interpreter:
    it = Interpreter(model_content=model,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    return it


def _run_litert(it: Interpreter, xs: list[np.ndarray]) -> list[np.ndarray]:
    for d, x in zip(it.get_input_details(), xs):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]


def reference(model: bytes, sets: list[list[np.ndarray]], n_out: int
              ) -> tuple[str, list[list[np.ndarray]]]:
    """TFLM's outputs for each input set, or LiteRT's where TFLM refuses the model."""
    try:
        from tflite_micro.python.tflite_micro import runtime

        tflm = runtime.Interpreter.from_bytes(model, arena_size=8 << 20)
    except (RuntimeError, ValueError):
        tflm = None
    if tflm is None:
        it = _litert(model)
        return "LiteRT", [_run_litert(it, xs) for xs in sets]
    outs = []
    for xs in sets:
        for k, x in enumerate(xs):
            tflm.set_input(x, k)
        tflm.invoke()
        outs.append([tflm.get_output(k).copy() for k in range(n_out)])
    return "TFLM", outs


def _dequantize_steps(model: bytes) -> dict[int, float]:
    """Graph outputs written by a DEQUANTIZE: the scale of its input (one output LSB)."""
    m = S.ModelT.InitFromPackedBuf(model, 0)
    sg = m.subgraphs[0]
    steps = {}
    for op in sg.operators or []:
        code = m.operatorCodes[op.opcodeIndex]
        if max(code.builtinCode, code.deprecatedBuiltinCode) == S.BuiltinOperator.DEQUANTIZE:
            q = sg.tensors[op.inputs[0]].quantization
            if q is not None and q.scale is not None and int(op.outputs[0]) in list(sg.outputs):
                steps[int(op.outputs[0])] = float(q.scale[0])
    return steps


def _compare(name: str, label: str, got: list[np.ndarray], want: list[np.ndarray],
             out_details: list[dict[str, Any]], steps: dict[int, float], ref_name: str) -> int:
    """Asserts aotc's outputs against the reference's; returns the largest distance in LSB
    (integer outputs and outputs dequantised from integers)."""
    worst = 0
    for k, (g, w) in enumerate(zip(got, want)):
        where = f"{name} {label} output {k} vs {ref_name}"
        assert g.dtype == w.dtype and g.shape == w.shape, (where, g.dtype, g.shape,
                                                           w.dtype, w.shape)
        if w.dtype.kind in "iu" or out_details[k]["index"] in steps:
            step = steps.get(out_details[k]["index"], 1.0)
            lsb = np.abs(g.astype(np.float64) - w.astype(np.float64)) / step
            diff = int(np.ceil(lsb.max() - 1e-3))
            worst = max(worst, diff)
            first = np.unravel_index(int(np.argmax(lsb)), lsb.shape)
            assert diff <= KNOWN_LSB.get(name, 0), (
                f"{where}: {diff} LSB at {first} (aotc {g[first]}, {ref_name} {w[first]})")
        else:
            atol = FLOAT_ATOL.get(name, 1e-5)
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=atol, err_msg=where)
    return worst


# --------------------------------------------------------------------------------- tests
UNSUPPORTED = sorted(n for n, ok in EXPECTED_TO_COMPILE.items() if not ok)

if UNSUPPORTED:  # (none today: every fixture compiles; a new one that does not goes here)
    @pytest.mark.parametrize("name", UNSUPPORTED)
    def test_unsupported_fixture_fails_with_one_line(name, tmp_path):
        """Not supported on main: `aotc compile` exits 2 with one line naming the reason."""
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        cp = subprocess.run([sys.executable, "-m", "aotc", "compile", str(ZOO / META[name]["file"]),
                             "-o", str(tmp_path / "out"), "-q"], capture_output=True, text=True,
                            env=env, timeout=600)
        lines = cp.stderr.strip().splitlines()
        assert cp.returncode == 2, (cp.returncode, cp.stderr[-2000:])
        assert "Traceback" not in cp.stderr, cp.stderr[-2000:]
        # one line, or the operators the converter table refuses: a heading and one line each
        assert lines and all(ln.startswith("aotc: error: ") for ln in lines), cp.stderr[-2000:]
        assert len(lines) == 1 or "cannot be converted" in lines[0], cp.stderr[-2000:]


@pytest.mark.parametrize("name", sorted(n for n, ok in EXPECTED_TO_COMPILE.items() if ok))
def test_fixture_matches_reference(name, tmp_path):
    path = ZOO / META[name]["file"]
    model = path.read_bytes()
    in_details, out_details = _details(model, "inputs"), _details(model, "outputs")
    sets = vectors(model, in_details)
    ref_name, refs = reference(model, sets, len(out_details))
    steps = _dequantize_steps(model)

    bundle = aotc.compile(path, tmp_path / "out", name="m")
    runner = bundle.load()
    in_names = [t["name"] for t in runner.meta["inputs"]]
    out_names = [t["name"] for t in runner.meta["outputs"]]
    assert len(in_names) == len(in_details) and len(out_names) == len(out_details)
    worst = 0
    for v, (xs, want) in enumerate(zip(sets, refs)):
        feeds = dict(zip(in_names, xs))
        got = runner.run(feeds)
        if v == 0:
            run_on_boards(bundle, feeds, got, tmp_path / "fw")
        worst = max(worst, _compare(name, f"vector {v}", [got[o] for o in out_names], want,
                                    out_details, steps, ref_name))
    assert worst == KNOWN_LSB.get(name, 0), (
        f"{name}: now {worst} LSB from {ref_name}, KNOWN_LSB says {KNOWN_LSB.get(name, 0)}: "
        "update KNOWN_LSB")


# Run on cortex-m4f in QEMU on all 8 vectors against TFLM (the host test above runs only the
# first vector on the boards, against the host build): the int8 MobileNet person detector,
# TFLM's keyword benchmark model (its SVDF states carried from vector to vector, as in TFLM), and
# the 16x8 KWS DS-CNN (int16 activations through every layer).
ON_CORTEX_M4F = ["vww_mobilenet_v1_int8", "keyword_scrambled_svdf", "kws_ds_cnn_16x8"]


@pytest.mark.parametrize("name", ON_CORTEX_M4F)
def test_fixture_on_cortex_m4f(name, tmp_path):
    """A fixture of ON_CORTEX_M4F on cortex-m4f in QEMU: all 8 vectors, against TFLM."""
    from opcheck import hook_boards

    from aotc.targets.runner import BoardRunner

    if "cortex-m4f" not in hook_boards():
        pytest.skip("cortex-m4f not in AOTC_TEST_BOARDS")
    path = ZOO / META[name]["file"]
    model = path.read_bytes()
    it = _litert(model)
    out_details = it.get_output_details()
    sets = vectors(model, it.get_input_details())
    ref_name, refs = reference(model, sets, len(out_details))
    assert ref_name == "TFLM"
    bundle = aotc.compile(path, tmp_path / "out", name="m")
    board = BoardRunner(bundle.directory, "cortex-m4f", build_dir=tmp_path / "fw")
    in_names = [t["name"] for t in board.meta["inputs"]]
    out_names = [t["name"] for t in board.meta["outputs"]]
    for v, (xs, want) in enumerate(zip(sets, refs)):
        got = board.run(dict(zip(in_names, xs)))
        assert _compare(name, f"cortex-m4f vector {v}", [got[o] for o in out_names], want,
                        out_details, _dequantize_steps(model), ref_name) == 0


def test_tflite_ops_script_agrees_with_litert():
    """scripts/tflite_ops.py's builtin histogram equals the operators LiteRT's interpreter
    lists, for each single-subgraph fixture; its sizes and hashes equal zoo.json's."""
    from collections import Counter

    files = [ZOO / e["file"] for e in META.values()]
    cp = subprocess.run([sys.executable, str(ROOT / "scripts" / "tflite_ops.py"), "--json",
                         *map(str, files)], capture_output=True, text=True, timeout=300,
                        check=True)
    for d, path in zip(json.loads(cp.stdout), files):
        e = META[path.stem]
        assert (d["bytes"], d["sha256"]) == (e["bytes"], e["sha256"]), path.name
        if d["subgraphs"] != 1 or any(k.startswith("CUSTOM:Signal") for k in d["builtins"]):
            continue  # (LiteRT cannot load TFLM's Signal operators)
        it = Interpreter(model_path=str(path))
        want = Counter(op["op_name"] for op in it._get_ops_details())
        assert d["builtins"] == dict(want), path.name


def test_keyword_svdf_every_layer_matches_tflm(tmp_path):
    """TFLM's keyword benchmark model saturates to the same output (two equal classes) for
    every input, so its graph output alone would hide an SVDF or FULLY_CONNECTED difference:
    here every operator's output is made a graph output too (the same file otherwise), and
    each is compared bit-exact with TFLM over the 8 vectors, states carried between calls."""
    import flatbuffers

    name = "keyword_scrambled_svdf"
    m = S.ModelT.InitFromPackedBuf((ZOO / META[name]["file"]).read_bytes(), 0)
    sg = m.subgraphs[0]
    outs = [int(t) for op in sg.operators for t in op.outputs]
    assert len(outs) == len(sg.operators) == 15
    sg.outputs = np.array(outs, np.int32)
    fb = flatbuffers.Builder(1 << 16)
    fb.Finish(m.Pack(fb), file_identifier=b"TFL3")
    model = bytes(fb.Output())
    path = tmp_path / "kws_all.tflite"
    path.write_bytes(model)
    it = _litert(model)
    out_details = it.get_output_details()
    sets = vectors(model, it.get_input_details())
    ref_name, refs = reference(model, sets, len(out_details))
    assert ref_name == "TFLM"
    # not all saturated: the layers do see distinct values
    assert len({r.tobytes() for want in refs for r in want[:-3]}) > 50
    bundle = aotc.compile(path, tmp_path / "out", name="m")
    runner = bundle.load()
    out_names = [t["name"] for t in runner.meta["outputs"]]
    in_name = runner.meta["inputs"][0]["name"]
    assert len(out_names) == len(outs)
    for v, (xs, want) in enumerate(zip(sets, refs)):
        got = runner.run({in_name: xs[0]})
        assert _compare(name, f"vector {v}", [got[o] for o in out_names], want, out_details,
                        {}, ref_name) == 0
