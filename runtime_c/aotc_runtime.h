/*
 * aotc runtime: the few definitions every generated bundle shares.
 * C99, no malloc, no global mutable state. Status codes, tensor descriptors, portability
 * macros and the optional per-kernel profiling hook.
 */
#ifndef AOTC_RUNTIME_H
#define AOTC_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes returned by <name>_run(). */
#define AOTC_OK 0
#define AOTC_ERR_NULL_POINTER 1
#define AOTC_ERR_ARENA_TOO_SMALL 2
#define AOTC_ERR_ARENA_MISALIGNED 3
#define AOTC_ERR_BACKEND 4 /* a BYOC-emitted kernel (e.g. CMSIS-NN) returned an error */

/* Element types of tensor descriptors (the ONNX TensorProto enum values). */
#define AOTC_FLOAT32 1
#define AOTC_UINT8 2
#define AOTC_INT8 3
#define AOTC_UINT16 4
#define AOTC_INT16 5
#define AOTC_INT32 6
#define AOTC_INT64 7
#define AOTC_BOOL 9
#define AOTC_UINT32 12
#define AOTC_UINT64 13

/* Describes one graph input or output (const data: lives in flash). */
typedef struct {
    const char *name;     /* the ONNX tensor name, sanitised */
    int32_t dtype;        /* AOTC_FLOAT32, ... */
    int32_t ndim;
    const int32_t *shape; /* ndim entries */
    size_t bytes;
} aotc_tensor_info;

/* A human-readable name for a status code. */
const char *aotc_status_str(int status);

#if defined(__GNUC__) || defined(__clang__)
#define AOTC_ALIGNED(n) __attribute__((aligned(n)))
#define AOTC_NOINLINE __attribute__((noinline))
#define AOTC_INLINE static inline __attribute__((always_inline))
#define AOTC_SECTION(s) __attribute__((section(s)))
#else
#define AOTC_ALIGNED(n)
#define AOTC_NOINLINE
#define AOTC_INLINE static inline
#define AOTC_SECTION(s)
#endif
/* Keeps gcc from cloning a hot outlined function for a constant argument (its interprocedural
   constant propagation): its pointers stay pointers. Identical functions still fold. */
#if defined(__GNUC__) && !defined(__clang__)
#define AOTC_NOCLONE __attribute__((noclone))
#else
#define AOTC_NOCLONE
#endif

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 199901L
#define AOTC_RESTRICT restrict
#else
#define AOTC_RESTRICT
#endif

/* Float min/max as inline functions, each argument evaluated once. A NaN operand gives NaN
 * (numpy's minimum/maximum, onnxruntime's Relu, Clip, Max, Min), unlike fminf/fmaxf, which
 * return the other operand: see docs/floating-point.md. */
static inline float aotc_minf(float a, float b) { return (a < b || a != a) ? a : b; }
static inline float aotc_maxf(float a, float b) { return (a > b || a != a) ? a : b; }
/* The same against a bound k that is not NaN (Relu, Clip with constant bounds), as C++'s
 * std::max(a, k) and std::min(a, k) (onnxruntime's Relu and Clip): one compare instead of two,
 * a NaN a stays NaN, and of two equal zeros a is kept (Relu(-0.0) is -0.0, as in onnxruntime;
 * aotc_maxf(-0.0, 0.0) gives +0.0). */
static inline float aotc_minfk(float a, float k) { return (k < a) ? k : a; }
static inline float aotc_maxfk(float a, float k) { return (a < k) ? k : a; }

/* BitCast: a float's bits and back (a union is C99's defined way to reinterpret them). */
static inline uint32_t aotc_f32_bits(float f)
{
    union { float f; uint32_t u; } v;
    v.f = f;
    return v.u;
}
static inline float aotc_bits_f32(uint32_t u)
{
    union { float f; uint32_t u; } v;
    v.u = u;
    return v.f;
}

/* Fixed-point primitives of integer requantisation (gemmlowp/TFLite semantics; aotc/qmath.py
 * holds the Python twins). Right shifts of negative values are arithmetic on every supported
 * compiler (gcc, clang, arm-none-eabi, riscv). Always inline: kernels requantise once per output
 * and a call costs more than the arithmetic; they cost no flash unless used.
 *
 * aotc_q_dhm: gemmlowp's SaturatingRoundingDoublingHighMul without its one saturating case
 * (a == b == INT32_MIN). SRDHM adds a nudge of 2^30 (product >= 0) or 1 - 2^30 (product < 0)
 * and divides by 2^31 toward zero. For a product p >= 0 that is floor((p + 2^30) / 2^31); for
 * p < 0, p + 1 - 2^30 < 0 and division toward zero is floor((p + 1 - 2^30 + 2^31 - 1) / 2^31)
 * = floor((p + 2^30) / 2^31) as well. So one 64-bit multiply-accumulate (SMLAL) and a shift,
 * exactly equal (tests/lower/test_fixedpoint.py checks edge values against qmath.srdhm). */
AOTC_INLINE int32_t aotc_q_dhm(int32_t a, int32_t b)
{
    return (int32_t)(((int64_t)a * (int64_t)b + ((int64_t)1 << 30)) >> 31);
}
AOTC_INLINE int32_t aotc_q_srdhm(int32_t a, int32_t b)
{
    return (a == INT32_MIN && b == INT32_MIN) ? INT32_MAX : aotc_q_dhm(a, b);
}
/* x / 2^exponent rounded to nearest, ties away from zero; exponent in [0, 31]. */
AOTC_INLINE int32_t aotc_q_rdbpot(int32_t x, int32_t exponent)
{
    int32_t mask = (int32_t)((1u << exponent) - 1u);
    int32_t threshold = (mask >> 1) + (int32_t)((uint32_t)x >> 31);
    return (x >> exponent) + ((x & mask) > threshold);
}
/* TFLite MultiplyByQuantizedMultiplier, x * m * 2^(shift - 31) rounded twice, with the shift
 * split at compile time (aotc/ops/quant.py Requant): left = max(shift, 0) in [0, 30],
 * right = max(-shift, 0) in [0, 31]; m != INT32_MIN (quantize_multiplier's significands are
 * in [2^30, 2^31) or 0). No branch: SMLAL, shifts and a compare, as CMSIS-NN's
 * arm_nn_requantize. x << left wraps as TFLite's x * (1 << left) does on every target. */
AOTC_INLINE int32_t aotc_q_requant(int32_t x, int32_t m, int32_t left, int32_t right)
{
    return aotc_q_rdbpot(aotc_q_dhm((int32_t)((uint32_t)x << left), m), right);
}
/* aotc_q_requant for right >= 1 (so left = 0) and m >= 0, both roundings in one: with
 * p = x * m, SRDHM gives y = floor((p + 2^30) / 2^31) and the rounding divide
 * floor((y + 2^(right-1) - [y < 0]) / 2^right); floor(floor(a) / n) = floor(a / n) merges
 * them into floor((p + 2^30 + 2^(30+right) - [y < 0] 2^31) / 2^(31+right)), and [y < 0] may
 * be replaced by [x < 0] (they differ only where y = 0, and then both give 0; m = 0 gives 0
 * for any right). round = 2^30 + 2^(30+right) and rshift = right - 1 come from compile
 * time: SMLAL, a 64-bit subtract and one shift of the high word. */
AOTC_INLINE int32_t aotc_q_requant_r(int32_t x, int32_t m, int64_t round, int32_t rshift)
{
    int64_t z = (int64_t)x * (int64_t)m + round - (int64_t)((uint32_t)x & 0x80000000u);
    return (int32_t)(z >> 32) >> rshift;
}
/* The high word of a * b + c * 2^32, rounded (2^31 added before the shift): SMMLAR on cores
 * with the DSP extension, its exact C twin elsewhere. */
AOTC_INLINE int32_t aotc_q_smmlar(int32_t a, int32_t b, int32_t c)
{
#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP
    int32_t t;
    __asm__("smmlar %0, %1, %2, %3" : "=r"(t) : "r"(a), "r"(b), "r"(c));
    return t;
#else
    return (int32_t)(((int64_t)a * (int64_t)b + (int64_t)c * 4294967296LL + 0x80000000LL) >> 32);
#endif
}
/* aotc_q_requant_r + zp for |x| < 2^30 (a bound the lowering proves), with x doubled: 2z =
 * 2p + 2^31 + 2^(31+right) - [x < 0] 2^32, and floor(2z / 2^32) = floor((2p + 2^31) / 2^32)
 * + 2^(right-1) - [x < 0], the first term the rounded high word of 2x * m. c = 2^(right-1) +
 * (zp << right) from compile time (the output zero point added before the shift: a multiple
 * of 2^right), |c| < 2^30; c * 2^32 added to the product before the rounding adds c to the
 * high word exactly: one SMMLAR on cores with the DSP extension (an SMMULR and an add). */
AOTC_INLINE int32_t aotc_q_requant_h(int32_t x, int32_t m, int32_t c, int32_t right)
{
    int32_t t = aotc_q_smmlar((int32_t)((uint32_t)x << 1), m, c);
    return (t + (x >> 31)) >> right;
}
/* aotc_q_requant_h of an accumulator the kernel summed already doubled (x2 = x << 1: weights
 * and bias doubled at compile time, in the depthwise convs and the DSP conv tiles), one shift
 * fewer per output. The sign of x2 is x's where |x| < 2^30; a channel of m = 0 (a constant
 * result, whose accumulator may be larger) gives (1 + 2K - [x2 < 0]) >> 1 = K either way. */
AOTC_INLINE int32_t aotc_q_requant_hd(int32_t x2, int32_t m, int32_t c, int32_t right)
{
    int32_t t = aotc_q_smmlar(x2, m, c);
    return (t + (x2 >> 31)) >> right;
}
/* The same with the shift as one signed number and any m (SRDHM's saturating case kept). */
AOTC_INLINE int32_t aotc_q_mbqm(int32_t x, int32_t m, int32_t shift)
{
    int32_t left = shift > 0 ? shift : 0;
    int32_t right = shift > 0 ? 0 : -shift;
    return aotc_q_rdbpot(aotc_q_srdhm((int32_t)((uint32_t)x << left), m), right);
}
static inline int32_t aotc_q_sat_shl(int32_t x, int32_t exponent)
{
    int32_t threshold = (int32_t)(((int64_t)1 << (31 - exponent)) - 1);
    if (x > threshold) {
        return INT32_MAX;
    }
    if (x < -threshold) {
        return INT32_MIN;
    }
    return (int32_t)((uint32_t)x << exponent);
}
/* Leading zeros of a 32-bit value (32 for 0). */
static inline int32_t aotc_q_clz(int32_t v)
{
    uint32_t x = (uint32_t)v;
    int32_t n = 0;
    if (x == 0u) {
        return 32;
    }
    while ((x & 0x80000000u) == 0u) {
        x <<= 1;
        ++n;
    }
    return n;
}
/* 1 / (1 + a) for a in [0, 1), Q0.31 (gemmlowp one_over_one_plus_x_for_x_in_0_1). */
static inline int32_t aotc_q_one_over_one_plus_x(int32_t a)
{
    int64_t sum = (int64_t)a + INT32_MAX;
    int32_t half_den = (int32_t)((sum + (sum >= 0 ? 1 : -1)) / 2);
    int32_t x = (int32_t)(1515870810 + aotc_q_srdhm(half_den, -1010580540));
    int i;
    for (i = 0; i < 3; ++i) {
        int32_t one_minus = (int32_t)((1 << 29) - aotc_q_srdhm(half_den, x));
        x = (int32_t)((uint32_t)x + (uint32_t)aotc_q_sat_shl(aotc_q_srdhm(x, one_minus), 2));
    }
    return aotc_q_sat_shl(x, 1);
}
/* The reciprocal of a softmax row's sum of exps (Q12.19), as TFLite GetReciprocal computes it:
 * num_bits_over_unit (TFLite GetReciprocal). which=0: the scale; which=1: num_bits_over_unit. */
static inline int32_t aotc_q_softmax_scale(int32_t sum, int32_t which)
{
    int32_t headroom = aotc_q_clz(sum);
    if (which) {
        return 12 - headroom;
    }
    return aotc_q_one_over_one_plus_x(
        (int32_t)(((uint32_t)sum << headroom) - ((uint32_t)1 << 31)));
}

#define AOTC_MIN(a, b) ((a) < (b) ? (a) : (b))
#define AOTC_MAX(a, b) ((a) > (b) ? (a) : (b))
#define AOTC_ABS(a) ((a) < 0 ? -(a) : (a))

/*
 * Integer results the C standard leaves undefined, defined (docs/operators.md, "Defined
 * results"). The printer (aotc/codegen/c.py) emits these where an operand comes from tensor
 * data; index arithmetic on loop counters stays plain C. Signed add, sub, mul and negation
 * wrap around: they are computed in the unsigned type and converted back (the conversion is
 * modulo 2^N on every compiler aotc supports, as gcc and clang document).
 *
 * Division and remainder by zero give 0 (numpy's integer result; onnxruntime refuses the
 * run). INT_MIN / -1 wraps to INT_MIN (numpy; onnxruntime dies of SIGFPE on x86) and
 * INT_MIN % -1 is 0 (both). int8/int16/uint8/uint16 use the int32 versions (C promotes them).
 */
static inline int32_t aotc_div_i32(int32_t a, int32_t b)
{
    return b == 0 ? 0 : (b == -1 ? (int32_t)(0u - (uint32_t)a) : a / b);
}
static inline int32_t aotc_mod_i32(int32_t a, int32_t b)
{
    return (b == 0 || b == -1) ? 0 : a % b;
}
static inline int64_t aotc_div_i64(int64_t a, int64_t b)
{
    return b == 0 ? 0 : (b == -1 ? (int64_t)((uint64_t)0 - (uint64_t)a) : a / b);
}
static inline int64_t aotc_mod_i64(int64_t a, int64_t b)
{
    return (b == 0 || b == -1) ? 0 : a % b;
}
static inline uint32_t aotc_div_u32(uint32_t a, uint32_t b) { return b == 0u ? 0u : a / b; }
static inline uint32_t aotc_mod_u32(uint32_t a, uint32_t b) { return b == 0u ? 0u : a % b; }
static inline uint64_t aotc_div_u64(uint64_t a, uint64_t b) { return b == 0u ? 0u : a / b; }
static inline uint64_t aotc_mod_u64(uint64_t a, uint64_t b) { return b == 0u ? 0u : a % b; }
/* |INT_MIN| wraps to INT_MIN, as onnxruntime's Abs does. */
static inline int32_t aotc_abs_i32(int32_t a) { return a < 0 ? (int32_t)(0u - (uint32_t)a) : a; }
static inline int64_t aotc_abs_i64(int64_t a)
{
    return a < 0 ? (int64_t)((uint64_t)0 - (uint64_t)a) : a;
}
/* Shifts by the bit width or more give 0 (onnxruntime's BitShift). */
static inline uint32_t aotc_shl_u32(uint32_t a, uint32_t b) { return b < 32u ? a << b : 0u; }
static inline uint32_t aotc_shr_u32(uint32_t a, uint32_t b) { return b < 32u ? a >> b : 0u; }
static inline uint64_t aotc_shl_u64(uint64_t a, uint64_t b) { return b < 64u ? a << b : 0u; }
static inline uint64_t aotc_shr_u64(uint64_t a, uint64_t b) { return b < 64u ? a >> b : 0u; }

/*
 * float -> integer conversion that saturates: NaN gives 0, values beyond the type give its
 * minimum or maximum, the rest truncate toward zero as C does (C leaves the out-of-range cases
 * undefined; onnxruntime gives whatever the CPU's conversion instruction gives). The range
 * test is one integer compare on the float's bits: |x| < 2^K (LIM is the bits of 2^K, K = 7,
 * 8, 15, 16, 31, 32, 63, 64); for unsigned types the sign bit must be clear too.
 */
#define AOTC_DEF_SAT_SIGNED(sfx, T, LIM, TMIN, TMAX)                                        \
    static inline T aotc_sat_##sfx(float x)                                                 \
    {                                                                                       \
        if ((aotc_f32_bits(x) & 0x7fffffffu) < (LIM)) {                                     \
            return (T)x;                                                                    \
        }                                                                                   \
        return x != x ? (T)0 : (x < 0.0f ? (TMIN) : (TMAX));                                \
    }
#define AOTC_DEF_SAT_UNSIGNED(sfx, T, LIM, TMAX)                                            \
    static inline T aotc_sat_##sfx(float x)                                                 \
    {                                                                                       \
        if (aotc_f32_bits(x) < (LIM)) {                                                     \
            return (T)x;                                                                    \
        }                                                                                   \
        return x > 0.0f ? (TMAX) : (T)0; /* NaN, -0 and negatives give 0 */                 \
    }
AOTC_DEF_SAT_SIGNED(i8, int8_t, 0x43000000u, INT8_MIN, INT8_MAX)
AOTC_DEF_SAT_SIGNED(i16, int16_t, 0x47000000u, INT16_MIN, INT16_MAX)
AOTC_DEF_SAT_SIGNED(i32, int32_t, 0x4f000000u, INT32_MIN, INT32_MAX)
AOTC_DEF_SAT_SIGNED(i64, int64_t, 0x5f000000u, INT64_MIN, INT64_MAX)
AOTC_DEF_SAT_UNSIGNED(u8, uint8_t, 0x43800000u, UINT8_MAX)
AOTC_DEF_SAT_UNSIGNED(u16, uint16_t, 0x47800000u, UINT16_MAX)
AOTC_DEF_SAT_UNSIGNED(u32, uint32_t, 0x4f800000u, UINT32_MAX)
AOTC_DEF_SAT_UNSIGNED(u64, uint64_t, 0x5f800000u, UINT64_MAX)

/* Integer power by squaring (Pow on integer tensors), wrapping on overflow like unsigned
 * arithmetic instead of undefined signed overflow. A negative exponent truncates the real
 * result: 0 unless |b| == 1. */
static inline int64_t aotc_ipow(int64_t b, int64_t e)
{
    uint64_t r = 1u, x = (uint64_t)b;
    if (e < 0) {
        return b == 1 ? 1 : (b == -1 ? ((e & 1) ? -1 : 1) : 0);
    }
    while (e > 0) {
        if (e & 1) {
            r *= x;
        }
        x *= x;
        e >>= 1;
    }
    return (int64_t)r;
}

/*
 * Optional per-kernel profiling: build with -DAOTC_ENABLE_PROFILING and provide these two
 * functions (e.g. reading a cycle counter). Otherwise the markers compile to nothing.
 */
#ifdef AOTC_ENABLE_PROFILING
void aotc_profile_begin(int32_t index, const char *name);
void aotc_profile_end(int32_t index);
#define AOTC_PROFILE_BEGIN(i, name) aotc_profile_begin((i), (name))
#define AOTC_PROFILE_END(i) aotc_profile_end((i))
#else
#define AOTC_PROFILE_BEGIN(i, name) ((void)0)
#define AOTC_PROFILE_END(i) ((void)0)
#endif

#ifdef __cplusplus
}
#endif

#endif /* AOTC_RUNTIME_H */
