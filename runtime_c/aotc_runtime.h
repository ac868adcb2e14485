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
#define AOTC_SECTION(s) __attribute__((section(s)))
#else
#define AOTC_ALIGNED(n)
#define AOTC_NOINLINE
#define AOTC_SECTION(s)
#endif

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 199901L
#define AOTC_RESTRICT restrict
#else
#define AOTC_RESTRICT
#endif

/* Float min/max as inline functions: unlike fminf/fmaxf they compile to one instruction
 * without -ffast-math, and each argument is evaluated once. */
static inline float aotc_minf(float a, float b) { return a < b ? a : b; }
static inline float aotc_maxf(float a, float b) { return a > b ? a : b; }

#define AOTC_MIN(a, b) ((a) < (b) ? (a) : (b))
#define AOTC_MAX(a, b) ((a) > (b) ? (a) : (b))
#define AOTC_ABS(a) ((a) < 0 ? -(a) : (a))

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
