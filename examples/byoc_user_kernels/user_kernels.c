#include "user_kernels.h"

#include <math.h>

int user_maxpool2d_f32(const float *x, float *y, int32_t n, int32_t c, int32_t h, int32_t w,
                       int32_t kh, int32_t kw, int32_t sh, int32_t sw, int32_t pad_top,
                       int32_t pad_left, int32_t oh, int32_t ow, int32_t relu)
{
    int32_t p, oy, ox, ky, kx;
    if (kh <= 0 || kw <= 0 || sh <= 0 || sw <= 0) {
        return -1;
    }
    for (p = 0; p < n * c; ++p) {
        const float *plane = x + (int64_t)p * h * w;
        for (oy = 0; oy < oh; ++oy) {
            for (ox = 0; ox < ow; ++ox) {
                float best = -INFINITY;
                for (ky = 0; ky < kh; ++ky) {
                    int32_t iy = oy * sh - pad_top + ky;
                    if (iy < 0 || iy >= h) {
                        continue;
                    }
                    for (kx = 0; kx < kw; ++kx) {
                        int32_t ix = ox * sw - pad_left + kx;
                        float v;
                        if (ix < 0 || ix >= w) {
                            continue;
                        }
                        v = plane[iy * w + ix];
                        if (v > best || v != v) {
                            best = v;
                        }
                    }
                }
                if (relu && best < 0.0f) {
                    best = 0.0f;
                }
                y[((int64_t)p * oh + oy) * ow + ox] = best;
            }
        }
    }
    return 0;
}

int user_relu_f32(const float *x, float *y, int32_t count)
{
    int32_t i;
    for (i = 0; i < count; ++i) {
        y[i] = x[i] < 0.0f ? 0.0f : x[i];
    }
    return 0;
}
