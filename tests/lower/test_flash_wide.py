"""The flash-aware default of the int16-widened weights (aotc/schedules/flash.py): on a part
whose flash they fit, every candidate layer widened; on a smaller one the layer of most MACs
per extra byte only; on a tiny one none, unless a schedule sets the knob. Every choice gives
the generic build's bytes (host, and cortex-m4f in QEMU for the mixed one)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import aotc
from aotc.schedules.flash import APP_MARGIN, Candidate, choose_wide, flash_limit
from aotc.targets import boards, budget

BOARD = "cortex-m4f"
WIDE = "conv.dsp_wide"


def test_choose_wide_most_macs_per_byte_first():
    cands = [Candidate("a", 100, 10), Candidate("b", 1000, 50), Candidate("c", 50, 100)]
    # b (20 MACs a byte), then a (10), then c (0.5).
    assert choose_wide(cands, 0, 1000) == {"a", "b", "c"}
    assert choose_wide(cands, 0, 60) == {"a", "b"}
    assert choose_wide(cands, 0, 55) == {"b"}  # a does not fit in the 5 left
    assert choose_wide(cands, 40, 100) == {"b", "a"}
    assert choose_wide(cands, 0, 49) == {"a"}  # b skipped, a still fits
    assert choose_wide(cands, 10, 9) == set()
    # Equal MACs per byte: by node name, whatever the order given.
    tied = [Candidate("y", 20, 10), Candidate("x", 20, 10)]
    assert choose_wide(tied, 0, 10) == {"x"} == choose_wide(tied[::-1], 0, 10)
    assert flash_limit(400) == int(400 * (1 - APP_MARGIN)) == 300


def _two_convs(seed=0):
    """x [1, 8, 8, 8] -> 3x3 conv 8 -> 8 (576 weight bytes, 36,864 MACs) -> 8x8 conv 8 -> 64
    (32,768 weight bytes, 32,768 MACs): the first gains far more per extra flash byte."""
    rng = np.random.default_rng(seed)
    q = TensorProto.INT8
    inits = {"s": np.float32(0.05), "z": np.int8(3), "ys": np.float32(0.1), "yz": np.int8(-28)}
    nodes = []
    for k, (cin, m, kern, pad) in enumerate([(8, 8, 3, 1), (8, 64, 8, 0)]):
        inits |= {f"w{k}": rng.integers(-128, 128, (m, cin, kern, kern)).astype(np.int8),
                  f"ws{k}": rng.uniform(0.002, 0.02, m).astype(np.float32),
                  f"wz{k}": np.zeros(m, np.int8),
                  f"b{k}": rng.integers(-500, 500, m).astype(np.int32)}
        x, y = ("x", "h") if k == 0 else ("h", "y")
        scale, zp = ("s", "z") if k == 0 else ("ys", "yz")
        nodes.append(helper.make_node(
            "QLinearConv", [x, scale, zp, f"w{k}", f"ws{k}", f"wz{k}", "ys", "yz", f"b{k}"],
            [y], name=f"conv{k}", pads=[pad] * 4, kernel_shape=[kern, kern]))
    g = helper.make_graph(nodes, "q", [helper.make_tensor_value_info("x", q, [1, 8, 8, 8])],
                          [helper.make_tensor_value_info("y", q, None)],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    return model, rng.integers(-128, 128, (1, 8, 8, 8)).astype(np.int8)


def _on_part(monkeypatch, flash_bytes):
    """cortex-m4f with a part of ``flash_bytes`` of flash."""
    real = boards.load_board

    def load(name):
        b = real(name)
        return dataclasses.replace(b, flash_bytes=flash_bytes) if b.name == BOARD else b

    monkeypatch.setattr(boards, "load_board", load)


def _wide(bundle):
    return {ls.step.node.name: ls.knobs.get(WIDE) for ls in bundle.compilation.lowered
            if WIDE in ls.knobs}


@pytest.fixture(scope="module")
def two_convs():
    return _two_convs()


def test_flash_decides_which_layers_widen(two_convs, tmp_path, monkeypatch):
    model, x = two_convs
    want = aotc.compile(model, tmp_path / "generic", name="m").load().run({"x": x})["y"]

    def build(part, sub, **kw):
        with monkeypatch.context() as m:
            _on_part(m, part)
            b = aotc.compile(model, tmp_path / sub, name="m", target=BOARD, **kw)
            est = budget.estimate(b.compilation, BOARD).flash
        np.testing.assert_array_equal(b.load().run({"x": x})["y"], want)
        return b, est

    big, big_est = build(2 << 20, "big")  # fits: both widened, as on the real part
    assert _wide(big) == {"conv0": True, "conv1": True}
    tiny, packed_est = build(4096, "tiny")  # nothing fits: both packed
    assert _wide(tiny) == {"conv0": False, "conv1": False}
    assert big_est - packed_est > 32768  # conv1's int16 weights: twice its 32 KB
    # Room for conv0's widened weights (576 bytes more) and not conv1's (32 KB more).
    part = math.ceil((packed_est + 4096) / (1 - APP_MARGIN))
    mixed, mixed_est = build(part, "mixed")
    assert _wide(mixed) == {"conv0": True, "conv1": False}
    assert packed_est < mixed_est <= flash_limit(part)
    np.testing.assert_array_equal(mixed.load(BOARD).run({"x": x})["y"], want)
    # A schedule (a tuning log) still wins: conv1 widened on the tiny part.
    key = next(ls.workload for ls in tiny.compilation.lowered if ls.step.node.name == "conv1")
    forced, _ = build(4096, "forced", schedules={key: {WIDE: True}})
    assert _wide(forced) == {"conv0": False, "conv1": True}
