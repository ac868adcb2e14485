/* Kernels a user brings: the example BYOC backend (backend.py) hands aotc's MaxPool and Relu
 * kernels to these functions. Plain C99, float32, NCHW. */
#ifndef USER_KERNELS_H
#define USER_KERNELS_H

#include <stdint.h>

/* 2-D max pooling over each of n * c planes of h x w; pads are top, left, bottom, right;
 * a window entirely in the padding gives -INFINITY; relu != 0 clamps the result at 0. */
int user_maxpool2d_f32(const float *x, float *y, int32_t n, int32_t c, int32_t h, int32_t w,
                       int32_t kh, int32_t kw, int32_t sh, int32_t sw, int32_t pad_top,
                       int32_t pad_left, int32_t oh, int32_t ow, int32_t relu);

/* y[i] = max(x[i], 0) for i < count (NaN stays NaN). */
int user_relu_f32(const float *x, float *y, int32_t count);

#endif
