"""Several memory pools (--pool NAME:BYTES[:SECTION]): the planner with pools (properties:
no two simultaneously live bytes share an address within a pool, every pool's size respected),
the one-line shortfall error, and compiled models on the host: the pooled bundle's outputs are
bit-identical to the one-arena bundle's (int8 also to TFLM's, float within tolerance of
onnxruntime). The QEMU test with a two-pool board is tests/boards/test_pools_board.py."""

from __future__ import annotations

import itertools
import json
import random

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pool_models import conv_model

import aotc
from aotc.cli import main as cli_main
from aotc.memory import BufferReq, Plan, check_no_overlap, lower_bound, plan
from aotc.memory.pools import Pool, PoolsDoNotFit, parse_pool, parse_size, plan_pools

# --------------------------------------------------------------------------------- the planner


@st.composite
def requests_and_pools(draw):  # type: ignore[no-untyped-def]
    n = draw(st.integers(1, 24))
    reqs = []
    for i in range(n):
        first = draw(st.integers(0, 20))
        size = draw(st.integers(1, 600))
        align = draw(st.sampled_from([1, 4, 16]))
        reqs.append(BufferReq(f"b{i}", size, align, first, first + draw(st.integers(0, 6))))
    pools = [Pool(f"p{k}", draw(st.integers(16, 2500))) for k in range(draw(st.integers(1, 3)))]
    return reqs, pools


def _check_pool_plan(reqs: list[BufferReq], pools: list[Pool], p) -> None:  # type: ignore[no-untyped-def]
    check_no_overlap(reqs, p)  # live-together buffers of one pool never share a byte
    assert list(p.pool_sizes) == [q.name for q in pools]
    for q in pools:
        assert p.pool_sizes[q.name] <= q.size, (q, p.pool_sizes)
        mine = [r for r in reqs if p.pool_of[r.name] == q.name]
        ends = [p.offsets[r.name] + r.size for r in mine]
        assert max(ends, default=0) <= p.pool_sizes[q.name]
        # Brute force, byte by byte: no two buffers live at the same step share an address.
        for step in {r.first for r in mine}:
            owner: dict[int, str] = {}
            for r in mine:
                if r.first <= step <= r.last:
                    for byte in range(p.offsets[r.name], p.offsets[r.name] + r.size):
                        assert byte not in owner, (step, byte, owner.get(byte), r.name)
                        owner[byte] = r.name
    assert p.size == sum(p.pool_sizes.values())


@settings(max_examples=300, deadline=None)
@given(requests_and_pools(), st.sampled_from(["best", "greedy_size", "ping_pong", "linear"]))
def test_pool_plans_are_valid_or_say_why_not(case, algorithm) -> None:  # type: ignore[no-untyped-def]
    reqs, pools = case
    whole = plan(reqs, algorithm)
    try:
        p = plan_pools(reqs, pools, algorithm)
    except PoolsDoNotFit as e:
        msg = str(e)
        assert "\n" not in msg and "B more" in msg
        # The first pool alone would have held the one-arena plan: then it never fails.
        assert whole.size > pools[0].size
        return
    _check_pool_plan(reqs, pools, p)
    if whole.size <= pools[0].size:  # everything in the fastest pool
        assert set(p.pool_of.values()) == {pools[0].name}
    # What does not fit the pools together cannot have been planned.
    assert lower_bound(reqs) <= sum(q.size for q in pools)


@settings(max_examples=150, deadline=None)
@given(requests_and_pools())
def test_too_small_pools_fail_with_the_shortfall(case) -> None:  # type: ignore[no-untyped-def]
    reqs, pools = case
    total = sum(q.size for q in pools)
    need = lower_bound(reqs)
    if need <= total:
        # Shrink the pools below the largest live set: no assignment can exist.
        pools = [Pool(q.name, max(1, (need - 1) // len(pools))) for q in pools]
        total = sum(q.size for q in pools)
        assume(total < need)
    with pytest.raises(PoolsDoNotFit) as err:
        plan_pools(reqs, pools)
    assert f"buffers need {need - total:,} B more than the pools hold" in str(err.value)


def test_spill_and_order() -> None:
    """A chain of 100 B buffers (one of 110 B) with a 120 B fast pool: the fast pool takes
    every other one, the largest first, the slow pool the rest; the plan is valid."""
    reqs = [BufferReq(f"t{i}", 100 + (i == 2) * 10, 1, i, i + 1) for i in range(5)]
    pools = [Pool("fast", 120), Pool("slow", 1000)]
    p = plan_pools(reqs, pools)
    _check_pool_plan(reqs, pools, p)
    assert p.pool_of["t2"] == "fast"  # the largest buffer goes first, to the fastest pool
    assert p.pool_of["t1"] == p.pool_of["t3"] == "slow"  # live with t2, apart from each other
    assert p.pool_of["t0"] == p.pool_of["t4"] == "fast"  # not live with t2
    assert p.pool_sizes == {"fast": 110, "slow": 100}


def test_a_buffer_larger_than_every_pool() -> None:
    reqs = [BufferReq("big", 300, 1, 0, 0), BufferReq("small", 10, 1, 1, 1)]
    with pytest.raises(PoolsDoNotFit, match=r"^buffer 'big' \(300 B, written by step 0 \(kernel "
                                            r"0\)\) needs 100 B more than the largest pool "
                                            r"holds \(fast 50 B, mid 100 B, slow 200 B\)$"):
        plan_pools(reqs, [Pool("fast", 50), Pool("mid", 100), Pool("slow", 200)],
                   label=lambda k: f"kernel {k}")


def _fits(reqs: list[BufferReq], pools: list[Pool], assign: tuple[int, ...]) -> bool:
    """Buffer i in pool assign[i]: does each pool's exact plan fit it?"""
    for k, p in enumerate(pools):
        mine = [r for r, a in zip(reqs, assign) if a == k]
        if mine and plan(mine, "exact").size > p.size:
            return False
    return True


def test_assignment_against_exhaustive_search() -> None:
    """Random small cases (2-7 buffers, two pools): whenever some assignment of the buffers to
    the pools fits (every one tried, each pool planned exactly), plan_pools finds one."""
    rng = random.Random(0)
    feasible = 0
    for _ in range(600):
        n = rng.randint(2, 7)
        firsts = [rng.randint(0, 6) for _ in range(n)]
        reqs = [BufferReq(f"b{i}", rng.choice([16, 32, 48, 64, 96, 128]), 16, f,
                          f + rng.randint(0, 3)) for i, f in enumerate(firsts)]
        pools = [Pool("p0", rng.choice([32, 64, 96, 128])),
                 Pool("p1", rng.choice([64, 96, 128, 192]))]

        if not any(_fits(reqs, pools, a) for a in itertools.product((0, 1), repeat=n)):
            with pytest.raises(PoolsDoNotFit):
                plan_pools(reqs, pools)
            continue
        feasible += 1
        _check_pool_plan(reqs, pools, plan_pools(reqs, pools))
    assert feasible > 250  # the sizes make both outcomes common


def test_check_no_overlap_with_pools() -> None:
    """Two buffers live together may share offsets in different pools, not in one; each must
    end inside its own pool."""
    a, b = BufferReq("a", 64, 16, 0, 1), BufferReq("b", 64, 16, 1, 2)
    apart = Plan({"a": 0, "b": 0}, 128, "t", {"a": "fast", "b": "slow"}, {"fast": 64, "slow": 64})
    check_no_overlap([a, b], apart)
    same = Plan({"a": 0, "b": 0}, 128, "t", {"a": "fast", "b": "fast"}, {"fast": 64, "slow": 64})
    with pytest.raises(ValueError, match="overlap in memory"):
        check_no_overlap([a, b], same)
    small = Plan({"a": 0, "b": 0}, 112, "t", {"a": "fast", "b": "slow"}, {"fast": 64, "slow": 48})
    with pytest.raises(ValueError, match="beyond pool 'slow' size 48"):
        check_no_overlap([a, b], small)


def test_parse_pool() -> None:
    assert parse_pool("dtcm:16K:.dtcm") == Pool("dtcm", 16384, ".dtcm")
    assert parse_pool("sram:0x100") == Pool("sram", 256)
    assert parse_size("1MiB") == 1 << 20
    for bad in ("dtcm", "dtcm:12Q", "dtcm:0", "int:4K", "k1:4K", "aotc_x:1K", "d:1K:a b"):
        with pytest.raises(ValueError):
            parse_pool(bad)


# ---------------------------------------------------------------------------- compiled models


def _used(c) -> dict[str, int]:  # type: ignore[no-untyped-def]
    return {k: v for k, v in c.plan.pool_sizes.items() if v}


@pytest.mark.parametrize("opts", [{}, {"io_in_arena": True}, {"inplace": False}])
def test_float_model_two_pools_matches_one_arena(opts, tmp_path) -> None:  # type: ignore[no-untyped-def]
    model = conv_model()
    x = np.random.default_rng(1).normal(size=(1, 3, 16, 16)).astype(np.float32)
    one = aotc.compile(model, tmp_path / "one", name="m", **opts)
    two = aotc.compile(model, tmp_path / "two", name="m", pools=("dtcm:16K:.dtcm", "sram:64K"),
                       **opts)
    c = two.compilation
    assert one.arena_bytes > 16384 and len(_used(c)) == 2  # it spills to the slow pool
    assert c.plan.pool_sizes["dtcm"] <= 16384 and c.plan.pool_sizes["sram"] <= 65536
    got, want = two.load().run({"x": x})["y"], one.load().run({"x": x})["y"]
    np.testing.assert_array_equal(got, want)  # same kernels, other addresses
    ref = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, ref, atol=1e-5, rtol=1e-5)
    header = (tmp_path / "two" / "m.h").read_text()
    params = "void *dtcm, size_t dtcm_size, void *sram, size_t sram_size"
    assert f"int m_run({'' if opts.get('io_in_arena') else 'const float *x, float *y, '}" \
           f"{params});" in header
    assert f"#define M_POOL_DTCM_SIZE {c.plan.pool_sizes['dtcm']}\n" in header
    meta = json.loads((tmp_path / "two" / "bundle.json").read_text())
    assert [p["name"] for p in meta["pools"]] == ["dtcm", "sram"]
    assert meta["pools"][0]["section"] == ".dtcm" and meta["pools"][1]["section"] is None


@pytest.mark.parametrize("stem,pools", [
    ("kws_ref_model_int8_qdq", ("fast:8000", "slow:32K")),
    ("ad01_int8_qdq", ("fast:128", "mid:128", "slow:4K")),
    ("vww_96_int8_qdq", ("fast:27648", "slow:64K")),
    ("pretrainedResnet_int8_qdq", ("fast:16K", "slow:64K")),
    ("str_ww_ref_model_int8_qdq", ("fast:3328", "slow:16K")),
])
@pytest.mark.parametrize("inplace_conv", [False, True])
def test_int8_bit_exact_with_pools(stem, pools, inplace_conv, mlperf_dir, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """MLPerf int8 models planned over pools smaller than their arena: bit-identical to the
    one-arena plan and to TFLM."""
    vec = np.load(mlperf_dir / "vectors" / f"{stem}.npz")
    path = mlperf_dir / f"{stem}.onnx"
    one = aotc.compile(path, tmp_path / "one", name="m", inplace_conv=inplace_conv)
    two = aotc.compile(path, tmp_path / "two", name="m", pools=pools, inplace_conv=inplace_conv)
    c = two.compilation
    capacity = [parse_pool(p).size for p in pools]
    assert one.arena_bytes > capacity[0] and len(_used(c)) >= 2
    assert all(c.plan.pool_sizes[parse_pool(p).name] <= n for p, n in zip(pools, capacity))
    r1, r2 = one.load(), two.load()
    name = r1.meta["inputs"][0]["name"]
    out = r1.meta["outputs"][0]["name"]
    for x, want in zip(vec["input"][:4], vec["output_tflm"][:4]):
        got = r2.run({name: x})[out]
        np.testing.assert_array_equal(got, r1.run({name: x})[out])
        np.testing.assert_array_equal(got.reshape(want.shape), want)


def test_cli_pools_error_is_one_line(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "m.onnx"
    onnx.save(conv_model(), path)
    rc = cli_main(["compile", str(path), "-o", str(tmp_path / "b"), "-q",
                   "--pool", "dtcm:8K", "--pool", "sram:8K"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, err
    # Two 12,288 B feature maps are live at the residual Add of conv1: 24,576 B > 16,384 B.
    assert ("aotc: error: buffers need 8,192 B more than the pools hold (dtcm 8,192 B, sram "
            "8,192 B): the largest live set, at step 1 (k1_conv_relu_add: Conv 'conv1'), is "
            "24,576 B") in err
    for bad in ("dtcm", "dtcm:1K:not a section", "while:1K"):
        assert cli_main(["compile", str(path), "-o", str(tmp_path / "b"), "-q", "--pool",
                         bad]) == 2
        assert capsys.readouterr().err.startswith("aotc: error: ")


def test_cli_inspect_shows_pools(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "m.onnx"
    onnx.save(conv_model(), path)
    assert cli_main(["inspect", str(path), "--pool", "dtcm:16K:.dtcm", "--pool", "sram:64K"]) == 0
    text = capsys.readouterr().out
    assert "pools (fastest first): dtcm 12,288 of 16,384 B (.dtcm), sram 12,288 of 65,536 B" \
        in text
    assert "pool dtcm: arena 12288 B" in text and "pool sram: arena 12288 B" in text
    assert cli_main(["inspect", str(path), "--json", "--pool", "dtcm:16K", "--pool",
                     "sram:64K"]) == 0
    mem = json.loads(capsys.readouterr().out)["memory"]
    assert [(p["name"], p["bytes"], p["capacity"]) for p in mem["pools"]] == \
        [("dtcm", 12288, 16384), ("sram", 12288, 65536)]
    assert {b["pool"] for b in mem["buffers"]} == {"dtcm", "sram"}
    # The HTML report stacks the pools in its memory timeline, a line at the top of each.
    assert cli_main(["report", str(path), "-o", str(tmp_path / "r.html"), "-q", "--pool",
                     "dtcm:16K", "--pool", "sram:64K"]) == 0
    assert "pool dtcm 12,288 B" in (tmp_path / "r.html").read_text()
