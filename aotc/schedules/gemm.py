"""Gemm / MatMul knobs (ops/gemm.py): the tiled dot product's column tile, generic and SIMD."""

from aotc.schedules import knob

TILE = knob("gemm.tile", (4, 8, 16), 8,
            "output columns computed together by the generic schedule (independent "
            "accumulators sharing each load of A)")
TILE_ROWS = knob("gemm.tile_rows", (1, 2, 4), 1,
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
