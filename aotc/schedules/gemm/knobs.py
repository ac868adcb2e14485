"""Gemm / MatMul knobs (ops/nn/gemm.py): the tiled dot product's column tile, generic and SIMD."""

from aotc.schedules import Context, knob


def _rows(ctx: Context) -> int:
    # Measured on a 16 x 64 x 64 MatMul, instructions per MAC (rows x columns). Float on
    # cortex-m4f (-Os): 2 x 8 1.98, 1 x 8 2.81, 4 x 8 2.01, 4 x 4 2.00. Int8 on the Cortex-M0+
    # (rp2040): 2 x 8 7.86, 1 x 8 9.10, 4 x 8 8.05; generic int8 on cortex-m4f: 2 x 8 4.15,
    # 1 x 8 4.17, 4 x 8 3.92. Host (callgrind, gcc -O2), float: 1 x 8 1.53, 2 x 8 1.96, 4 x 4
    # 1.33 (a change of gemm.tile too: left to the tuner). Float without an FPU: not measured.
    if "autovec" in ctx.features:
        return 1
    return 2 if ctx.integer or "fpu" in ctx.features else 1


TILE = knob("gemm.tile", (4, 8, 16), 8,
            "output columns computed together by the generic schedule (independent "
            "accumulators sharing each load of A)")
TILE_ROWS = knob("gemm.tile_rows", (1, 2, 4), _rows,
                 "rows of A computed together by the generic schedule (each load of B shared "
                 "by the rows, as each load of A is by the tile's columns); default 2 on MCUs "
                 "for integer kernels and float with an FPU, 1 on the host")
UNROLL = knob("gemm.unroll", (True, False), lambda ctx: "autovec" not in ctx.features,
              "unroll a tile's accumulators into scalars or keep a short loop over a local "
              "array (for a vectorising compiler)")
PATH = knob("gemm.path", ("simd", "scalar"), "simd",
            "the target's SIMD schedule (DSP dual MAC or Helium) where it applies, or the "
            "generic scalar one")
SIMD_TILE = knob("gemm.simd_tile", (2, 4, 8), 4,
                 "output columns per tile of the SIMD schedules; default 4, and 8 on the DSP "
                 "extension with gemm.dsp_k=2 for column counts that are multiples of 8")


def dsp_simd_tile_default(columns: int) -> int:
    # Measured on the DSP extension (estimated cycles per inference, bench/boards.py --int8),
    # AD (all MatMul of one row, 128, 640 or 8 columns: each activation pair shared by the
    # tile's columns), 4 -> 8 columns: cortex-m4f 828,034 -> 678,728, cortex-m7 550,872 ->
    # 486,320, cortex-m33 662,064 -> 578,742 (2 columns: m4f 1,219,356). The other models'
    # final matmuls: KWS (12 columns) 102-341 cycles fewer, ResNet-8 (10) 280 / 11,335 fewer
    # on m4f / m7 but 896 more on m33, VWW and streaming wakeword unchanged. Helium
    # (cortex-m55, AD) loses with 8: 89,183 -> 96,470.
    return 8 if columns % 8 == 0 else 4

# Measured on the DSP extension, AD (all one-row int8 matmuls, K 640 / 128 / 8), estimated
# cycles per inference (bench/boards.py --int8), k per step x columns per tile: cortex-m4f
# 2 x 8 (the pairs, before) 678,728; 4 x 4 597,022, 8 x 4 557,819, 16 x 4 532,419, 8 x 2
# 759,858, 16 x 2 661,180, 8 x 8 571,679, 4 x 8 556,031; cortex-m7 2 x 8 486,320, 8 x 4
# 331,156, 16 x 4 333,022, 4 x 8 386,651; cortex-m33 2 x 8 578,742, 8 x 4 466,007, 16 x 4
# 452,501, 4 x 8 513,542 (8 columns spill at -Os; 2 share each activation word less).
DSP_K = knob("gemm.dsp_k", (2, 4, 8, 16), 16,
             "k per loop step of the DSP extension's int8 matmul: 2 = words of two columns x "
             "two k (one SMLAD each, activations loaded a byte at a time), 4 / 8 / 16 = words "
             "of one column's four consecutive k against a word load of four activations (two "
             "SMLADs each), 1, 2 or 4 such words per column a step; signed 8-bit activations "
             "and K a multiple of 4, else 2")

def _dsp_wide(ctx: Context) -> bool:
    # Measured on AD (all one-row int8 matmuls, gemm.dsp_k 16), estimated cycles per
    # inference (bench/boards.py --int8; the M4 model with LDRD not pipelined), off (4
    # columns a tile) -> on (8, each tile's even lanes before its odd ones): cortex-m4f
    # 535,203 -> 461,925 (2.03 -> 1.75 per MAC), cortex-m7 333,022 -> 299,275 (1.26 ->
    # 1.13). Lanes interleaved (gcc -Os reads a pair by one LDRD), 4 columns: m4f 506,743,
    # m7 376,210. Flash: twice the quads' weights. cortex-m33: AD's weights (265 KB -> 530
    # KB) do not fit its part's 512 KB of flash; which layers stay packed on a small part:
    # aotc/schedules/flash.py (by MACs per extra byte, within 75% of the part's flash).
    return ctx.cpu in ("cortex-m4", "cortex-m7", "cortex-m33")


DSP_WIDE = knob("gemm.dsp_wide", (False, True), _dsp_wide,
                "gemm.dsp_k's quads with the weights pre-extended to int16 at compile time "
                "(two words per column and 4 k, no SXTB16 on them): twice the weights' flash; "
                "default on the Cortex-M4, M7 and M33 (board.toml cpu) for the layers of most "
                "MACs per extra byte that fit 75% of the part's flash (docs/tuning.md), off "
                "elsewhere")


def dsp_quads_tile_default(columns: int, wide: bool = False) -> int:
    # 4 columns a tile with gemm.dsp_k's quads (measured with it, above): 8 columns' eight
    # accumulators, two activation pairs and the step's pointers spill at -Os. With
    # gemm.dsp_wide (no SXTB16 of the weights: two registers fewer), 8: AD on cortex-m4f
    # (estimated cycles, the M4 model with LDRD not pipelined) 2 columns 553,315, 4 490,861,
    # 8 461,925 (16 k a step; 4 columns with 8 k 518,595, 4 k 533,484).
    return 8 if wide else 4


MVE_ORDER = knob("gemm.mve_order", ("pipelined", "ordered", "compiler"), "pipelined",
                 "Helium: each VMLADAVA of the SIMD tiles a scheduling barrier (vector loads "
                 "and multiply-accumulates alternate as the C source orders them; pipelined: "
                 "rows of up to 40 vectors unrolled, loads one ahead across chunks), or the C "
                 "compiler's own order; see conv.mve_order")

def _unroll_k(ctx: Context) -> int:
    # Measured on cortex-m4f (-Os), float AD (all Gemm with one row, tile 8): 1 step 2.75
    # instructions per MAC, 2 steps 2.90 (gcc's addressing), 4 steps 2.44. Integer kernels,
    # the host and float without an FPU: not measured, 1.
    return 4 if not ctx.integer and "fpu" in ctx.features and "autovec" not in ctx.features \
        else 1


UNROLL_K = knob("gemm.unroll_k", (1, 2, 4), _unroll_k,
                "steps of k per iteration of the generic schedule's k loop (the loop's "
                "counter, compare and branch shared by that many steps; unrolled tiles only); "
                "default 4 for float with an FPU, 1 otherwise")


def _vldm(ctx: Context) -> bool:
    # Measured on cortex-m4f (-Os), float AD (one-row matmuls, 8 columns, 4 k steps): 1.42
    # instructions per MAC on, 2.44 off. Only float kernels on cores with an FPU ask for it.
    return "fpu" in ctx.features and not ctx.integer and "autovec" not in ctx.features


VLDM = knob("gemm.vldm", (True, False), _vldm,
            "float matmuls of the generic schedule on cores with an FPU: a tile's weights of "
            "one k (consecutive in B's rows) and a row's unrolled k steps of A each loaded by "
            "one VLDM instead of one VLDR per value; default on")
