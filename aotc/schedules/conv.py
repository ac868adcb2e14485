"""Convolution knobs: the generic tiled schedule (ops/conv.py) and the SIMD schedules of cores
with the DSP extension (ops/conv_dsp.py, depthwise in ops/conv_depthwise.py) and Helium
(ops/conv_mve.py)."""

from aotc.schedules import Context, knob


def _scalar_tile(ctx: Context) -> int:
    # Integer kernels on MCUs: 4 accumulators, so they, the pointers and the counters fit the
    # 13 core registers of a Cortex-M (8 spill to the stack at -Os). Float: 8 fit the FPU's
    # registers; host builds (autovec): 8 lanes for the C compiler to vectorise.
    return 4 if ctx.integer and "autovec" not in ctx.features else 8


TILE = knob("conv.tile", (2, 4, 8), _scalar_tile,
            "output channels per register tile of the generic schedule (accumulators that "
            "share each input load)")
TILE_PIXELS = knob("conv.tile_pixels", (1, 2, 4), 1,
                   "output pixels per register tile of the generic schedule (along the last "
                   "output axis, where no tap is padding; a pointwise conv's pixels flattened): "
                   "they share each weight load, as the tile's channels share each input load")
UNROLL = knob("conv.unroll", (True, False), lambda ctx: "autovec" not in ctx.features,
              "unroll a tile's accumulators into scalars (registers on MCUs) or keep a short "
              "loop over a local array (for a vectorising compiler)")
PATH = knob("conv.path", ("simd", "scalar"), "simd",
            "the target's SIMD schedule (DSP dual MAC or Helium) where it applies, or the "
            "generic scalar one")
# 2 x 2 int32 accumulators is CMSIS-NN's tile: the two activation pairs, the weight word's
# lanes and the pointers fit the core registers (measured on KWS, 2 x 4 and 4 x 2 spill).
PIXELS = knob("conv.pixels", (1, 2, 4), 2,
              "output pixels whose im2col columns are built together and share each weight "
              "load (SIMD schedules)")
SIMD_TILE = knob("conv.simd_tile", (2, 4), 2,
                 "output channels per tile of the SIMD schedules")
DEPTHWISE = knob("conv.depthwise", ("pairs", "bytes"), "pairs",
                 "depthwise convs on cores with the DSP extension: the padded input plane in "
                 "int16 and two taps of a kernel row per SMLAD, or int8 taps one per multiply")
SPLIT_REQUANT = knob("conv.split_requant", (True, False), False,
                     "sum a block of outputs (the plane, or rows when it has over 256) into int32 "
                     "scratch, then requantise it in a loop of its own, or requantise each sum "
                     "as it is made (depthwise on the DSP extension)")
COLUMN = knob("conv.column", ("pairs", "flat"), "pairs",
              "the DSP schedule's im2col column: words of two input channels at one tap "
              "(pairs), or (channel, tap) flattened, any two neighbours a word (flat: no idle "
              "lane with an odd channel count); default flat for odd channel counts")


def column_default(channels: int) -> str:
    return "flat" if channels % 2 else "pairs"
OUTLINE = knob("conv.outline", (True, False), True,
               "the DSP schedule's output-channel tiles each in a function of their own (its "
               "accumulators alone in the registers) or inline (no call per tile); default "
               "inline for columns of fewer than 8 words")


def outline_default(column_words: int) -> bool:
    return column_words >= 8
