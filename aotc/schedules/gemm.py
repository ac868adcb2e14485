"""Gemm / MatMul knobs (ops/gemm.py): the tiled dot product's column tile, generic and SIMD."""

from aotc.schedules import Context, knob


def _rows(ctx: Context) -> int:
    # Float on cortex-m4f (a 16 x 64 x 64 MatMul, -Os): 2 rows x 8 columns 1.98 instructions
    # per MAC, 1 x 8 2.81, 4 x 8 2.01, 4 x 4 2.00. Integer, host builds and float without an
    # FPU: not measured, one row.
    return 2 if "fpu" in ctx.features and not ctx.integer and "autovec" not in ctx.features \
        else 1

TILE = knob("gemm.tile", (4, 8, 16), 8,
            "output columns computed together by the generic schedule (independent "
            "accumulators sharing each load of A)")
TILE_ROWS = knob("gemm.tile_rows", (1, 2, 4), _rows,
                 "rows of A computed together by the generic schedule (each load of B shared "
                 "by the rows, as each load of A is by the tile's columns)")
UNROLL = knob("gemm.unroll", (True, False), lambda ctx: "autovec" not in ctx.features,
              "unroll a tile's accumulators into scalars or keep a short loop over a local "
              "array (for a vectorising compiler)")
PATH = knob("gemm.path", ("simd", "scalar"), "simd",
            "the target's SIMD schedule (DSP dual MAC or Helium) where it applies, or the "
            "generic scalar one")
SIMD_TILE = knob("gemm.simd_tile", (2, 4, 8), 4,
                 "output columns per tile of the SIMD schedules")
