"""`aotc verify` on a .tflite model, through the CLI: the reference is TFLM for a quantised model
and LiteRT where TFLM refuses the model (uint8), named in the output; 8 default vectors that
span each input type's range (its minimum, maximum, zero, then random over the whole range);
a mismatch names the first differing element (output, flat index, multi-index) and its
distance in LSB.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_tflite_uint8 import SPECS, to_uint8
from tflite_builder import float_and_int8

import aotc.verification.run as vrun
from aotc.cli import main as cli_main


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    ms = float_and_int8(*SPECS["kws_like"])
    paths = {"int8": d / "i8.tflite", "float": d / "f32.tflite", "uint8": d / "u8.tflite"}
    paths["int8"].write_bytes(ms["int8"][0])
    paths["float"].write_bytes(ms["float"][0])
    paths["uint8"].write_bytes(to_uint8(ms["int8"][0]))
    return paths


@pytest.mark.parametrize("kind, ref", [("int8", "vs TFLM,"), ("float", "vs LiteRT,"),
                                       ("uint8", "vs LiteRT (TFLM refused the model")])
def test_verify_names_its_reference(models, kind, ref, capsys):
    assert cli_main(["verify", str(models[kind]), "-q"]) == 0
    out = capsys.readouterr().out
    assert "verify OK on host: 8 vectors" in out and ref in out, out


def test_default_vectors_span_the_range():
    specs = [{"name": "a", "dtype": "int8", "shape": [3, 4]},
             {"name": "b", "dtype": "uint8", "shape": [50]},
             {"name": "c", "dtype": "float32", "shape": [2]}]
    vs = vrun.default_vectors(specs, None, 0, tflite=True)
    assert len(vs) == 8
    assert (vs[0]["a"] == -128).all() and (vs[1]["a"] == 127).all() and (vs[2]["a"] == 0).all()
    assert (vs[0]["b"] == 0).all() and (vs[1]["b"] == 255).all()
    rand = np.concatenate([v["b"] for v in vs[3:]])
    assert rand.min() < 20 and rand.max() > 235  # the whole range, not [-100, 100]
    assert all(v[k].dtype == np.dtype(s["dtype"]) for v in vs for k, s in zip("abc", specs))


def test_mismatch_names_the_first_differing_element(models, monkeypatch, capsys):
    """A reference that is off by 3 at one element of one output (a monkeypatched TFLM) makes
    verify fail naming that element."""
    real = vrun._tflm

    def off(data, xs, n):
        outs = real(data, xs, n)
        y = outs[1]  # conv_2d_0_0, [1, 10, 6, 8]
        y.reshape(-1)[77] = np.clip(int(y.reshape(-1)[77]) + 3, -128, 127) \
            if y.reshape(-1)[77] < 120 else y.reshape(-1)[77] - 3
        return outs

    monkeypatch.setattr(vrun, "_tflm", off)
    assert cli_main(["verify", str(models["int8"]), "-q"]) == 2
    err = capsys.readouterr().err
    assert "output 'conv_2d_0_0' (vector 1 of 8, reference TFLM)" in err, err
    assert "1 of 480 elements differ; the first is conv_2d_0_0[77] (index (0, 1, 3, 5))" in err
    assert "3 LSB" in err, err
