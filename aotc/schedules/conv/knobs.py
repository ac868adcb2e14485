"""Convolution knobs: the generic tiled schedule (schedules/conv/tiled.py) and the SIMD schedules
of cores with the DSP extension (schedules/conv/dsp.py, depthwise in
schedules/conv/depthwise_int.py) and Helium (schedules/conv/mve.py)."""

from aotc.schedules import Context, knob


def _scalar_tile(ctx: Context) -> int:
    # Integer kernels on MCUs: 4 accumulators per pixel, so they, the pointers and the
    # counters fit the 13 core registers of a Cortex-M (8 spill to the stack at -Os). Float
    # with an FPU: 4 channels x 4 pixels (_scalar_pixels), 16 of the FPU's 32 registers;
    # without one (not measured) 8, as before the pixel tiles. Host builds (autovec): 4 float
    # lanes x 4 pixels, 8 integer lanes x 4 pixels for the C compiler to vectorise.
    if "autovec" in ctx.features:
        return 8 if ctx.integer else 4
    return 4 if ctx.integer or "fpu" in ctx.features else 8


def _scalar_pixels(ctx: Context) -> int:
    # Measured, instructions per MAC (channels x pixels). Float on cortex-m4f (aotc bench,
    # -Os), 4 x 4 against 8 x 1 and 8 x 2: KWS 2.11 / 3.16 / 2.31, VWW 2.25 / 3.42 / 2.39,
    # ResNet-8 1.82 / 2.37 (8 x 4 spills: KWS 2.88). Int8 on the Cortex-M0+ (rp2040), 4 x 2
    # against 4 x 1: KWS 8.62 / 9.64, ResNet-8 6.90 / 7.47 (2 x 2 and 2 x 4 are slower); on
    # rv32imc KWS 4.36 / 5.28, ResNet-8 3.62 / 4.22 (4 x 4: 4.90, 3.61). On a Cortex-M4 without
    # --target (no DSP schedule) ResNet-8 loses (3.74 -> 4.00: gcc spills the 3x3 taps'
    # weights) while KWS and VWW gain (4.68 -> 4.18, 4.84 -> 4.33). Host
    # (callgrind, gcc -O2): float 4 x 4 against 8 x 1: KWS 1.82 / 2.26, ResNet-8 1.33 / 1.52
    # (wall time 27% and 32% less); int8 KWS 8 x 4 4.89 against 8 x 1 8.62. Float without an
    # FPU: not measured, one pixel.
    if ctx.integer and "autovec" not in ctx.features:
        return 2
    return 4 if "fpu" in ctx.features else 1


TILE = knob("conv.tile", (2, 4, 8), _scalar_tile,
            "output channels per register tile of the generic schedule (accumulators that "
            "share each input load); default 4 for float kernels on cores with an FPU and on "
            "the host, whose features the table's contexts leave out")
TILE_PIXELS = knob("conv.tile_pixels", (1, 2, 4, 6, 8), _scalar_pixels,
                   "output pixels per register tile of the generic schedule (along the output "
                   "axis with the most positions whose taps are all inside the input; a "
                   "pointwise conv's pixels flattened): they share each weight load, as the "
                   "tile's channels share each input load; default 4 with an FPU (float) and "
                   "on the host (board features fpu, autovec), 2 for integer kernels on MCUs; "
                   "8 for float depthwise convs with conv.vldm")
UNROLL = knob("conv.unroll", (True, False), lambda ctx: "autovec" not in ctx.features,
              "unroll a tile's accumulators into scalars (registers on MCUs) or keep a short "
              "loop over a local array (for a vectorising compiler)")
PATH = knob("conv.path", ("simd", "scalar"), "simd",
            "the target's SIMD schedule (DSP dual MAC or Helium) where it applies, or the "
            "generic scalar one")
# 2 x 2 int32 accumulators is CMSIS-NN's tile: the two activation pairs, the weight word's
# lanes and the pointers fit the core registers (measured on KWS, 2 x 4 and 4 x 2 spill).
PIXELS = knob("conv.pixels", (1, 2, 3, 4), 2,
              "output pixels whose im2col columns are built together and share each weight "
              "load (SIMD schedules); default 4 for 1x1 convs and flat columns (conv.column) "
              "on the DSP extension, 3 for column rows (4 with packed weights, "
              "conv.dsp_wide off) and for flat columns read a word at a time (channels-last "
              "int8 input, the first convs of VWW and ResNet-8)")


def dsp_pixels_default(taps: int, flat: bool = False, rows: bool = False,
                       wide: bool = True, words: bool = False) -> int:
    # The DSP schedule (cortex-m4f, aotc bench -Os), KWS's four 64 -> 64 pointwise convs:
    # 2 pixels 3.79 M instructions, 4 pixels 3.27 M (the 4 x 2 tile's 8 accumulators, its
    # two weight lanes, the activation pair and 3 pointers just fit); KWS's 10x4 first conv
    # lost with 4 then (0.74 M -> 0.79 M; now, with its flat column: 545,196 -> 534,201).
    # Flat columns (odd channel counts: the first convs of KWS, 1 channel, and of VWW and
    # ResNet-8, 3), estimated cycles of that conv (bench/boards.py --int8 --verbose), 2 -> 4
    # pixels: cortex-m4f KWS 672,856 -> 594,819, VWW 1,803,915 -> 1,723,169, ResNet-8
    # 1,315,261 -> 1,219,062; cortex-m7 407,099 -> 414,041, 1,115,296 -> 1,089,234, 824,987
    # -> 768,113; cortex-m33 576,691 -> 547,796, 1,531,251 -> 1,528,193, 1,123,324 ->
    # 1,094,914 (the column's words shared by twice the pixels' MACs). 2 pixels x 4
    # channels a tile: m4f 633,145 / 1,695,843, m7 420,068 / 1,097,152 (KWS / VWW).
    # Column rows (conv.column=rows), ResNet-8's 3x3 convs, estimated cycles per inference
    # with 2 / 4 / 3 pixels a group (16 column words a step): cortex-m4f 21,122,084 /
    # 19,930,871 / 18,965,422, cortex-m7 13,100,000 / 13,404,720 / 11,971,934, cortex-m33
    # 19,007,283 / 18,181,124 / 17,912,737. A row's words are loaded once for the pixels that
    # overlap on them (3 pixels' 3 taps: 5 loads instead of 9); 4 pixels' 8 accumulators
    # leave too few registers (gcc spills the weight pointer and accumulators).
    # With the tiles inline (conv.outline) 4 pixels win with packed weights only (conv.dsp_wide
    # off; measured on the Cortex-M33 before its flash-aware wide default): 3 / 4 pixels
    # cortex-m33 16,014,644 / 15,877,223; with int16 weights cortex-m4f 17,383,990 /
    # 18,315,449, cortex-m7 10,526,720 / 12,325,730, cortex-m33 (wide since) 14,658,308 /
    # 15,673,305.
    # Flat columns read a word at a time (words: schedules/conv/dsp.py word_taps), the first
    # conv's estimated cycles with 2 / 3 / 4 pixels (int16 weights): VWW cortex-m4f 1,233,600
    # / 1,123,963 / 1,166,592, cortex-m7 785,051 / 734,170 / 819,618, cortex-m33 1,112,533 /
    # 1,001,447 / 1,042,514; ResNet-8 962,190 / 879,917 / 933,499, 607,093 / 586,324 /
    # 717,238, 853,593 / 771,530 / 868,284 (3 pixels x 2 channels: 6 accumulators, the three
    # column words and two weight lanes in registers; 4 pixels spill accumulators).
    if words:
        return 3
    if rows:
        return 3 if wide else 4
    return 4 if taps == 1 or flat else 2


SIMD_TILE = knob("conv.simd_tile", (2, 4), 2,
                 "output channels per tile of the SIMD schedules")
REQUANT = knob("conv.requant", ("vector", "scalar"), "vector",
               "Helium: requantise the int32 sums 4 per vector (VQRDMULH, VRSHL; channels of a "
               "pixel, or a depthwise channel's outputs through int32 scratch) or one at a "
               "time; int8 outputs of the tflite requantisation without a fused epilogue")
MVE_DEPTHWISE = knob("conv.mve_depthwise", ("pixels", "rows"), "pixels",
                     "Helium depthwise convs with stride 1 along rows: 4 outputs of a row per "
                     "int32x4_t, one VMLA of 4 widened inputs by each tap's weight (pixels; "
                     "with conv.requant=vector), or one VMLADAV per kernel row and output "
                     "(rows)")
# Measured on cortex-m55 (estimated cycles per inference, bench/boards.py --int8): compiler /
# ordered / pipelined, KWS 1,691,188 / 1,619,796 / 1,549,152, VWW 5,012,870 / 4,810,886 /
# 4,569,965, ResNet-8 5,010,556 / 4,634,748 / 4,190,620, streaming wakeword 379,498 /
# 356,455 / 337,327 (gemm.mve_order alike for AD: 99,799 / 99,767 / 89,183).
MVE_ORDER = knob("conv.mve_order", ("pipelined", "ordered", "compiler"), "pipelined",
                 "Helium: each VMLADAVA of the column tiles a scheduling barrier, so that "
                 "vector loads and multiply-accumulates alternate as the C source orders them "
                 "(the Cortex-M55 overlaps a load's beats with a MAC's): per 16-byte chunk "
                 "(ordered), or across chunks too, a column of up to 40 vectors unrolled with "
                 "the next chunk's first load before the last MAC (pipelined; longer columns "
                 "ordered); or the C compiler's own order (GCC hoists the loads into a run)")
GATHER = knob("conv.gather", (True, False), True,
              "Helium: an output pixel's im2col column gathered 8 bytes per VLDRB at "
              "compile-time 16-bit offsets (pixels whose taps all fall inside the input) or "
              "copied byte by byte")
DEPTHWISE = knob("conv.depthwise", ("pairs", "bytes"), "pairs",
                 "depthwise convs on cores with the DSP extension: the padded input plane in "
                 "int16 and two taps of a kernel row per SMLAD, or int8 taps one per multiply")
SPLIT_REQUANT = knob("conv.split_requant", (True, False), False,
                     "sum a block of outputs (the plane, or rows when it has over 256) into int32 "
                     "scratch, then requantise it in a loop of its own, or requantise each sum "
                     "as it is made (depthwise on the DSP extension)")
# Measured on cortex-m4f (aotc bench -Os), 3x3 depthwise convs, 1 -> 2 rows: KWS's four
# 1.34 M -> 1.16 M instructions, VWW's nine -9% to -17% each (14.23 M -> 13.75 M per inference).
DEPTHWISE_ROWS = knob("conv.depthwise_rows", (1, 2, 3, 4), 2,
                      "depthwise convs on tap pairs: output rows computed together (they share "
                      "the input rows they both read); default 3 for stride 1 along the rows' "
                      "axis and a multiple of 3 rows, 4 for stride 2 on the Cortex-M33, 2 "
                      "otherwise")


def depthwise_rows_default(stride: int, rows: int, cpu: str = "") -> int:
    # Estimated cycles (bench/boards.py --int8 --verbose), the outputs' taps interleaved, 2 ->
    # 3 -> 4 rows a step, cortex-m4f: VWW 14,811,324 -> 14,641,241 -> 14,852,584, KWS
    # 4,589,930 -> 4,583,336 -> 4,642,082; VWW's stride-1 k1 608,576 -> 550,032 -> 621,712,
    # its 6x6 k13 778,720 -> 732,000 -> 755,040, but its stride-2 k3 467,791 -> 478,719 ->
    # 483,535 (3 rows of stride 2 share no more input rows than 2). 3 for stride 1 along
    # the rows only, on cortex-m7 and m33 too: VWW 9,326,150 -> 9,290,590 and 12,983,111 ->
    # 12,756,216; KWS's 25 rows (8 steps and one row) gain nothing (m4f, m33) or lose (m7
    # 3,032,992 -> 3,044,536): 3 where it divides the rows. Stride 2 on cortex-m33 (loads
    # 1 cycle: no pipelining to lose), 2 -> 4 rows (Nov 28): VWW's k3 328,388 -> 321,268, k7
    # 161,214 -> 157,598, k11 87,023 -> 86,191, k23 52,934 -> 48,838 (stride 1 loses there:
    # k1 421,014 -> 470,062, k13 582,835 -> 595,635).
    if stride == 2 and cpu == "cortex-m33":
        return 4
    return 3 if stride == 1 and rows % 3 == 0 else 2


COLUMN = knob("conv.column", ("pairs", "flat", "rows"), "pairs",
              "the DSP schedule's im2col column: words of two input channels at one tap "
              "(pairs), or (channel, tap) flattened, any two neighbours a word (flat: no idle "
              "lane with an odd channel count), or, for 2-D kernels, the pair words of the "
              "kernel's input rows built once per output row with the padding as zero words, "
              "each pixel's column a window into them (rows: no column per pixel, no bounds "
              "check per tap, and neighbouring pixels share their overlapping words' loads); "
              "default flat for odd channel counts, rows for 2-D kernels of more than one tap, "
              "pairs otherwise")


def column_default(channels: int, taps: int = 1, nd: int = 0) -> str:
    if channels % 2:
        return "flat"
    return "rows" if nd == 2 and taps > 1 else "pairs"
OUTLINE = knob("conv.outline", (True, False), True,
               "the DSP schedule's output-channel tiles each in a function of their own (its "
               "accumulators alone in the registers) or inline (no call per tile); default "
               "inline for columns of up to 32 words (128 on the Cortex-M4, M7 and M33) and "
               "column rows; also the generic "
               "schedule's float tiles with conv.vldm (default: outlined from 32 taps a "
               "tile)")


def outline_default(column_words: int) -> bool:
    """The generic schedule's float tiles with conv.vldm (column_words: taps / 4)."""
    return column_words >= 8


def dsp_outline_default(column_words: int, rows: bool = False, cpu: str = "") -> bool:
    # Measured (estimated cycles per inference, bench/boards.py --int8), outlined from 8 words
    # -> from 33: cortex-m4f KWS 5,413,578 -> 5,303,725, VWW 17,327,862 -> 16,765,151,
    # ResNet-8 25,247,750 -> 25,041,222, streaming wakeword 1,512,128 -> 1,493,345; cortex-m7
    # 3,520,589 -> 3,364,428, 11,100,720 -> 10,817,396, 14,610,777 -> 14,524,721, 963,412 ->
    # 954,724; cortex-m33 4,666,777 -> 4,512,544, 14,780,378 -> 14,271,770, 21,147,622 ->
    # 20,973,125, 1,261,554 -> 1,246,954 (a call, PUSH and POP per tile cost more than the
    # inline tiles' register pressure up to 32 words). Inline for all: streaming wakeword's
    # 64-word pointwise convs lose (m33 1,312,638), ResNet-8's 3x3 convs too (21,253,760).
    # Column rows (conv.column=rows, 3 pixels a group) are inline at any length: ResNet-8,
    # outlined -> inline, cortex-m4f 17,822,961 -> 17,383,990, cortex-m7 10,827,066 ->
    # 10,526,720, cortex-m33 16,257,336 -> 16,014,644 (flash +2.5 KB).
    # With conv.dsp_tile_requant (inline tiles requantise their own accumulators; Nov 28),
    # VWW's 64-, 128-word pointwise convs inline, estimated cycles per inference (outlined
    # from 33 / 65 / 129 words): cortex-m4f 13,391,220 / 13,051,696 / 12,988,998; cortex-m7
    # 8,376,962 / - / 8,390,982 (its 64-word k14 loses: 2,325,050 -> 2,365,245); cortex-m33
    # 11,735,803 / - / 12,154,316 (its 64-word k14 int16-weighted gains, 2,712,772 ->
    # 2,625,344; its packed k24 and k26 lose: 715,605 -> 912,618 for k26).
    # With conv.dsp_order=pipelined on the M7 (Nov 28), inline up to 128 words too: VWW
    # 6,865,692 -> 6,665,793 (k14..k22 1,822,495 -> 1,702,875, k26 411,721 -> 368,578, k24
    # 215,689 -> 194,370); streaming wakeword 667,840 -> 634,182 (its 15-pixel k5's rest of
    # 3 pixels then in the compiler's order: pipelined there it lost, 686,142). With the
    # tiles' column words loaded one pixel ahead on the M33 (conv.dsp_stagger, fewer
    # registers), its packed tiles gain inline too, up to 128 words (VWW 10,487,943 ->
    # 10,413,681: k22 663,718 -> 637,350, k24 366,485 -> 342,763, k26 676,053 -> 651,754;
    # flash +1.9 KB).
    if rows:
        return False
    if cpu in ("cortex-m4", "cortex-m7", "cortex-m33"):
        return column_words > 128
    return column_words > 32


DSP_UNROLL = knob("conv.dsp_unroll", (1, 2, 4, 8, 16, 32, 64), 8,
                  "column words per iteration of the DSP schedule's reduction loop (its "
                  "counter, compare and branch shared by that many steps, the rest after it; "
                  "at least the column's length: no loop; with conv.column=rows whole rows of "
                  "the kernel's width, as many as divide the column's rows); default 32, 64 "
                  "for column rows and on the Cortex-M33")


def dsp_unroll_default(column_words: int, rows: bool = False, cpu: str = "") -> int:
    # Measured on cortex-m4f (aotc bench -Os), instructions per inference. KWS (32-word
    # pointwise columns, the first conv's 20): 1 step 5.49 M, 2 5.35 M, 4 5.23 M, 8 5.09 M,
    # 32 (no loop) 4.94 M. VWW (pointwise columns of 4-128 words): 1 16.41 M, 4 15.56 M,
    # 8 15.13 M, no loop 15.18 M and 24 KB more flash. Without a loop the tile's pointers
    # take no counter and gcc -Os keeps all eight accumulators in registers. Longer columns,
    # 8 -> 16 words a step (estimated cycles, bench/boards.py --int8, after conv.outline's
    # inline tiles up to 32 words): cortex-m4f VWW 16,765,151 -> 16,587,727, ResNet-8
    # 25,041,222 -> 24,563,143, streaming wakeword 1,493,345 -> 1,468,689; cortex-m7
    # 10,817,396 -> 10,719,940, 14,524,721 -> 14,481,521, 954,724 -> 933,746; cortex-m33
    # 14,271,770 -> 14,130,257, 20,973,125 -> 20,617,823, 1,246,954 -> 1,221,850. 16 words a
    # step for 17-32-word columns too loses on KWS on cortex-m7 (3,364,428 -> 3,488,052).
    # Column rows (conv.column=rows; a step is whole rows of the kernel's width, as many as
    # divide the column's rows and fit in the words), ResNet-8 with 3 pixels a group, 64
    # words (rows of 3: 12 a step for 16 channels, 16 for 32 and 64) against 32 (8 rows):
    # cortex-m4f 18,365,194 / 18,546,470, cortex-m7 11,223,108 / 11,410,612, cortex-m33
    # 16,612,253 / 16,720,273 estimated cycles; 21 rows a step and a rest (a step of 64
    # words rounded down instead): 18,382,886, 11,500,740, 16,643,001 and 13 KB more flash;
    # before that, 16 -> 32 -> 64 words rounded down and every row unrolled, no loop:
    # cortex-m4f 18,965,422 -> 18,700,008 -> 18,520,750 (18,659,213), cortex-m7 11,971,934 ->
    # 11,612,120 -> 11,555,722 (11,720,542), cortex-m33 17,912,737 -> 17,412,513 ->
    # 16,744,593 (16,697,505).
    # Columns over 32 words, 16 -> 32 words a step (Nov 28, after conv.dsp_tile_requant and
    # the inline tiles up to 128 words on the M4): cortex-m4f VWW 12,828,290 -> 12,725,747,
    # streaming wakeword 1,242,392 -> 1,226,935; cortex-m7 8,348,532 -> 8,276,288, 811,714 ->
    # 798,290; cortex-m33 11,523,620 -> 11,434,595, 1,065,094 -> 1,049,033 (flash +3 KB);
    # 64 words: m4f 12,917,648 / 1,229,951, m7 8,278,800 / 809,138. On cortex-m33 64 words
    # win (Nov 28, with conv.dsp_stagger and its inline tiles up to 128 words): VWW
    # 10,448,513 -> 10,330,395 (k14..k20 2,371,904 -> 2,293,376, k22 637,350 -> 614,305;
    # text +9.3 KB), streaming wakeword 993,626 -> 970,574, KWS unchanged; 128 words: VWW
    # 10,474,646 (its text then pushes a layer out of the int16 weights of flash.py).
    if rows or cpu == "cortex-m33":
        return 64
    return 32


def _dsp_wide(ctx: Context) -> bool:
    # Measured (bench/boards.py --int8, estimated cycles per inference, the M4 model with
    # LDRD not pipelined), main -> on: cortex-m4f KWS 5,232,846 -> 4,862,392, VWW 16,553,635
    # -> 16,431,891, ResNet-8 24,483,309 -> 22,847,103, streaming wakeword 1,468,102 ->
    # 1,439,028; cortex-m7 (with gemm.dsp_wide; the flat columns too) KWS 3,370,831 ->
    # 3,210,906, VWW 10,682,646 -> 10,207,620, ResNet-8 14,430,277 -> 13,665,739, streaming
    # wakeword 936,190 -> 850,216 (without the flat columns, dsp_wide_default: KWS 3,181,290,
    # VWW 10,203,970, ResNet-8 13,652,939). Each tile's even lanes before its odd ones:
    # interleaved, gcc -Os reads a pair by one LDRD, which the M4 does not pipeline with the
    # loads around it (m4f KWS 5,023,059, VWW 16,723,551: worse than off). cortex-m33 gains
    # too (KWS 4,483,051 -> 4,151,672, ResNet-8 20,587,089 -> 19,370,097, streaming wakeword
    # 1,221,741 -> 1,189,682). On every core, which layers keep packed int8 weights on a part
    # whose flash they do not fit: aotc/schedules/flash.py (the compiler's choice by MACs per
    # extra byte; VWW would take 499 KB of the M33 part's 512 KB).
    return ctx.cpu in ("cortex-m4", "cortex-m7", "cortex-m33")


def dsp_wide_default(cpu: str, flat: bool, words: bool = False) -> bool:
    # The flat columns (the first convs) lose on the M7: KWS's first conv 414,041 ->
    # 445,306, VWW's 1,089,234 -> 1,096,722, ResNet-8's 768,113 -> 786,497 estimated cycles
    # (on m4f 599,779 -> 613,541, 1,727,777 -> 1,700,129, 1,223,158 -> 1,198,582: kept).
    # Flat columns read a word at a time (words), 3 pixels a group, win on the M7 too: VWW
    # 785,562 -> 734,170, ResNet-8 628,338 -> 586,324.
    return _dsp_wide(Context(cpu=cpu)) and not (flat and not words and cpu == "cortex-m7")


DSP_WIDE = knob("conv.dsp_wide", (False, True), _dsp_wide,
                "the DSP schedule's weights pre-extended to int16 at compile time (two words "
                "per packed word, no SXTB16 on them): twice the weights' flash; default on "
                "the Cortex-M4, M7 and M33 (board.toml cpu; on the M7 not for flat columns "
                "built tap by tap) "
                "for the layers of most MACs per extra byte that fit 75% of the part's flash "
                "(docs/tuning.md), off elsewhere; see gemm.dsp_wide")


DSP_BIAS_TILE = knob("conv.dsp_bias_tile", (True, False), True,
                     "the DSP schedule's tile accumulators start from the bias (one load a "
                     "channel, shared by the pixels) instead of the requantisation adding it "
                     "to each sum (the same int32 sums); default on for inline tiles "
                     "(conv.outline off), off for outlined ones")


def dsp_bias_tile_default(outlined: bool) -> bool:
    # Measured (bench/boards.py --int8, estimated cycles per inference): the requantisation
    # loop keeps one pointer (the bias table) and an add per output fewer, the tiles load a
    # bias word per channel once per pixel group. KWS off -> on: cortex-m4f 4,863,465 ->
    # 4,796,383, cortex-m7 3,181,290 -> 3,190,173 (with conv.dsp_requant interleaved:
    # 3,167,435 -> 3,120,344), cortex-m33 4,151,672 -> 4,123,020. Outlined tiles (the
    # function's extra argument and register) lose: ResNet-8 on m4f 22,848,539 -> 23,054,004
    # with all tiles, 22,819,409 with the inline ones only; m7 (interleaved) VWW 10,079,354
    # -> 10,091,668 but streaming wakeword 848,584 -> 844,098 with the inline ones only
    # (10,265,204 / 873,801 with all).
    return not outlined


DSP_TILE_REQUANT = knob("conv.dsp_tile_requant", (True, False), True,
                        "the DSP schedule's inline tiles (conv.outline off, with "
                        "conv.dsp_bias_tile) requantise their accumulators and store the "
                        "outputs themselves, each channel's constants loaded once for the "
                        "tile's pixels, instead of writing int32 sums that a loop of their own "
                        "reloads and requantises; default on, but off on the Cortex-M7 and M33 "
                        "for convs with a fused epilogue (a residual add)")


def dsp_tile_requant_default(epilogue: bool, cpu: str = "") -> bool:
    # Measured (bench/boards.py --int8, estimated cycles per inference; docs/performance.md,
    # "Pointwise convs"). ResNet-8's convs with a fused residual add (k2, k5, k8) lose with it
    # on the M7 and M33 (the tile then holds the add's operands too; m33 k2 3,051,299 ->
    # 3,084,758, k5 2,594,648 -> 2,663,555, k8 2,370,071 -> 2,436,045) and gain on the M4:
    # ResNet-8 all on / on without them: cortex-m4f 16,474,346 / 16,835,330, cortex-m7
    # 10,459,512 / 10,209,156, cortex-m33 14,528,128 / 14,360,503 (main 17,093,737 /
    # 10,457,204 / 14,503,527).
    return not epilogue or cpu == "cortex-m4"


DSP_SPLIT = knob("conv.dsp_split", (True, False), False,
                 "the DSP schedule's inline tiles of 4 pixels load a column word's pixels two "
                 "at a time, each pair just before its MACs (two runs of loads: the weight "
                 "lanes and two pixels' words, then the other two), instead of all four "
                 "before the first MAC; on by default on the Cortex-M4 for columns of 8 words "
                 "or more and pixel counts that are multiples of 4, off elsewhere")


def dsp_split_default(cpu: str, column_words: int, pixels: int = 0) -> bool:
    # Measured (bench/boards.py --int8 --verbose, estimated cycles): with all four pixels'
    # words loaded first, gcc -Os on the M4 has no register left for the weight pointer (8
    # accumulators, 4 words, 2 lanes) and reloads it from the stack every column word, and
    # its scheduler splits the six loads around the MACs (17 cycles a word for 16 MACs).
    # Two pixels at a time: VWW on cortex-m4f 12,120,579 -> 11,857,078 (k6 920,907 ->
    # 844,731, k10 810,855 -> 725,571, k8 449,703 -> 409,347, k14..k22 3,578,230 ->
    # 3,552,265), but its 4-word k2 loses (720,027 -> 747,675), hence 8 words or more.
    # KWS's 64 -> 64 pointwise convs on 125 pixels (31 groups and a rest) lose (2,579,488 ->
    # 2,937,120: gcc spills accumulators there; VWW's 9-pixel k24 / k26 about even), hence
    # only pixel counts that are multiples of 4: ResNet-8 16,302,140 -> 16,284,158,
    # streaming wakeword 1,218,543 -> 1,197,416, KWS unchanged. The M7 and M33 are not
    # measured with it (off).
    return cpu == "cortex-m4" and column_words >= 8 and pixels % 4 == 0


DSP_STAGGER = knob("conv.dsp_stagger", (False, True), False,
                   "the DSP schedule's tiles of two channels (pair and 1x1 columns) load each "
                   "pixel's column word one pixel ahead of its two MACs (no load's result "
                   "read by the next instruction, two words live) instead of all the "
                   "pixels' words first; default on the Cortex-M33 (board.toml cpu) except "
                   "for columns of 32 words, off elsewhere")


def dsp_stagger_default(cpu: str, column_words: int) -> bool:
    # Measured on cortex-m33 (bench/boards.py --int8, estimated cycles per inference; its
    # cycle model stalls a load's result read by the next instruction; Nov 28): off -> on
    # for all columns, VWW 10,830,236 -> 10,487,943 (k14..k20 2,523,968 -> 2,371,904, k6
    # 771,868 -> 745,804, k10 663,580 -> 629,992, k22 694,246 -> 663,718; the old order
    # spilled the weight pointer of the 64-word tiles). With the M33's inline tiles up to 128
    # words (dsp_outline_default), all columns / all but 32-word ones: VWW 10,413,681 /
    # 10,464,017, KWS 3,523,898 / 3,506,578 (off: 3,506,578; its 32-word pointwise convs
    # lose: gcc -Os then moves an accumulator each step), streaming wakeword 993,626 /
    # 993,626. Each word loaded at its MACs instead (fewer instructions, a stall each): VWW
    # 11,631,722.
    return cpu == "cortex-m33" and column_words != 32


def _dsp_requant(ctx: Context) -> str:
    # Measured on KWS (bench/boards.py --int8, estimated cycles per inference, with
    # conv.dsp_bias_tile), serial -> interleaved: cortex-m7 3,190,173 -> 3,120,344 (1.20 ->
    # 1.17 per MAC: the second issue slot takes the other pixels' chains), cortex-m4f
    # 4,796,383 -> 4,802,844, cortex-m33 4,123,020 -> 4,116,095 (single issue: no gain).
    return "interleaved" if ctx.cpu == "cortex-m7" else "serial"


DSP_REQUANT = knob("conv.dsp_requant", ("serial", "interleaved"), _dsp_requant,
                   "the DSP schedule's requantisation of a pixel group: each output's chain "
                   "(SMMULR, add, shift, SSAT, store) after the last, or the group's sums of a "
                   "channel loaded first, then requantised side by side into locals, then "
                   "stored (dual issue: the second slot takes the other chains); default "
                   "interleaved on the Cortex-M7 (board.toml cpu), serial elsewhere")


def _dsp_order(ctx: Context) -> str:
    return "pipelined" if ctx.cpu == "cortex-m7" else "compiler"


def dsp_order_default(cpu: str, column_words: int) -> str:
    # Measured on cortex-m7 (bench/boards.py --int8 --verbose, estimated cycles; Nov 28; see
    # docs/performance.md "Pointwise convs on the M7: pipelined tiles"). gcc -Os's own order
    # hoists a step's six loads into runs (two loads pair with each other, an SMLAD only with
    # what follows it) and spills the weight pointer or accumulators: about 10 cycles per 8
    # SMLADs; pipelined about 8.4. VWW, compiler -> pipelined: k14..k22 (outlined 64-word
    # tiles) 2,258,810 -> 1,825,375, k6 (16 words, inline) 572,273 -> 461,105, k10 486,954
    # -> 378,521, k26 (128 words) 466,377 -> 410,441; 4-word columns lose (k2 525,329 ->
    # 540,881: the unrolled column's first and last steps pair less). The first convs' word
    # columns (3 pixels x 2 channels): VWW's k0 613,857 -> 549,724, KWS 2,507,600 ->
    # 2,259,939 whole. Pipelined on the other
    # cores (main's defaults otherwise): cortex-m4f VWW 12,120,579 -> 12,844,152, KWS
    # 4,113,393 -> 4,247,277 (an M4 load after a MAC is not free); cortex-m33 VWW 10,830,236
    # -> 10,553,463 but KWS 3,506,578 -> 3,511,994: left to the M33's own defaults.
    return _dsp_order(Context(cpu=cpu)) if column_words >= 8 else "compiler"


DSP_ORDER = knob("conv.dsp_order", ("compiler", "pipelined"), _dsp_order,
                 "the DSP schedule's tiles of 3 or 4 pixels x 2 channels with int16 weights "
                 "(conv.dsp_wide; pair columns and word-read flat ones, not column rows): the "
                 "C compiler's "
                 "instruction order, or software-pipelined, "
                 "the column unrolled (no loop, conv.dsp_unroll ignored) and each load of the "
                 "next pixel's column word or the next step's weight lanes placed right after "
                 "an SMLAD, each SMLAD a scheduling barrier (the pair dual-issues on the "
                 "Cortex-M7, and four operand registers suffice); default pipelined on the "
                 "Cortex-M7 (board.toml cpu) for columns of 8 words or more, compiler "
                 "elsewhere")


def _float_depthwise(ctx: Context) -> str:
    # Measured on cortex-m4f (aotc bench, -Os), KWS's 3x3 depthwise convs on 25x5 maps, 4 of
    # them: tiled 1.01 M instructions, plane1 1.12 M, plane2 0.97 M, plane4 0.77 M (plane8:
    # the same code after gcc's CSE). Strided convs keep the generic schedule by default
    # (schedules/conv/depthwise_float.py), and so do rows of 12 or more outputs, whose tiled
    # schedule takes 8 pixels per step from one VLDM per tap (VWW's 48-, 24-, 12-wide maps on
    # m4f: 12%, 12%, 11% fewer instructions than plane4). Without an FPU and on the host: not
    # measured, tiled.
    return "plane4" if "fpu" in ctx.features and "autovec" not in ctx.features else "tiled"


FLOAT_DEPTHWISE = knob("conv.float_depthwise", ("plane1", "plane2", "plane4", "plane8", "tiled"),
                       _float_depthwise,
                       "float depthwise convs: the channel's plane copied into scratch with a 0 "
                       "border (no bounds check per tap), its weights in locals (FPU "
                       "registers), 1, 2, 4 or 8 outputs along a row per step sharing the row's "
                       "input loads; or the generic tiled schedule; default plane4 with an FPU "
                       "for stride 1 and rows of fewer than 12 outputs, tiled otherwise")


def _vldm(ctx: Context) -> bool:
    # Measured on cortex-m4f (aotc bench, -Os), instructions per MAC, on / off (tiles of 32+
    # taps outlined, conv.outline): VWW 1.80 / 2.20, KWS 1.75 / 2.00, ResNet-8 1.44 / 1.83 (a
    # pointwise 4 x 4 tile: 21 instructions per input channel instead of 32). Only float
    # kernels on cores with an FPU ask for it (not the host: its compiler vectorises).
    return "fpu" in ctx.features and not ctx.integer and "autovec" not in ctx.features


VLDM = knob("conv.vldm", (True, False), _vldm,
            "float kernels of the generic schedule on cores with an FPU: a register tile's "
            "weights (consecutive, packed in tile order) and its pixels' inputs (when "
            "consecutive) each loaded by one VLDM instead of one VLDR per value (gcc does not "
            "combine them); default on")
