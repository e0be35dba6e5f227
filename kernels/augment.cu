// Per-sample augmentation of camera frames (the CPU reference:
// crates/robocache-augment/src/reference.rs, docs/semantics.md): the frames
// to float RGB channels last, each window's crop resized to its output
// (`augment_load`), then one launch per slot of the windows' operation
// lists (`augment_op`, `src` to `out`, the host swapping the two buffers;
// `augment_mean` first when a window's slot is a contrast), then the
// output's layout and dtype (`augment_store`).
//
// Every value is computed by the reference's f32 operations in its order,
// unfused (`--fmad=false`), with weights, matrices and Gaussian kernels the
// host computes, so that CPU and GPU agree bit for bit; `powf` (gamma) and
// the noise's `log`/`cos` are the device's and may differ from the host's in
// the last place. A contrast's mean is summed in 32-bit fixed point with
// integer atomics: the same in every order.
//
// One thread per output pixel, all three channels, over a grid of frame
// slots (`frame_slot`).

#include <stdint.h>

#include "abi.h"
#include "frame_slot.cuh"

__device__ __forceinline__ float clamp01(float v) { return v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v); }

// torchvision's grey: r * 0.2989 + g * 0.587 + b * 0.114, left to right.
__device__ __forceinline__ float grey_of(const float* p) { return p[0] * 0.2989f + p[1] * 0.587f + p[2] * 0.114f; }

// Channel `c` of pixel (`x`, `y`) of frame `frame` of the loaded frames, as a
// float level (u8 levels divided by 255).
__device__ __forceinline__ float source_level(const AugmentArgs& a, uint64_t frame, uint32_t x, uint32_t y, int c) {
    const uint64_t pixels = (uint64_t)a.in_width * a.in_height;
    const uint64_t at = a.layout == LAYOUT_CHW ? (frame * 3 + c) * pixels + (uint64_t)y * a.in_width + x
                                               : (frame * pixels + (uint64_t)y * a.in_width + x) * 3 + c;
    if (a.dtype == DT_U8) {
        return (float)((const uint8_t*)a.src)[at] / 255.0f;
    }
    return ((const float*)a.src)[at];
}

extern "C" __global__ void augment_load(AugmentArgs a) {
    const uint32_t pixels = a.width * a.height;
    const FrameSlot at = frame_slot(pixels);
    if (at.pixel >= pixels) {
        return;
    }
    const uint32_t x = at.pixel % a.width, y = at.pixel / a.width;
    for (uint64_t frame = at.slot; frame < a.frames; frame += at.slots) {
        float* out = (float*)a.out + (frame * pixels + at.pixel) * 3;
        const AugmentCrop* crop = a.crops ? &a.crops[frame / a.steps] : nullptr;
        if (crop == nullptr || crop->width == 0) {
            for (int c = 0; c < 3; ++c) {
                out[c] = source_level(a, frame, x, y, c);
            }
            continue;
        }
        // The reference's two passes: each row of the crop resized along x
        // (a sum from 0 in tap order), then those rows along y.
        const uint32_t first_y = a.firsts[2 * (crop->y_table + y)], count_y = a.firsts[2 * (crop->y_table + y) + 1];
        const uint32_t first_x = a.firsts[2 * (crop->x_table + x)], count_x = a.firsts[2 * (crop->x_table + x) + 1];
        const float* wy = a.weights + crop->y_weights + (uint64_t)y * crop->y_taps;
        const float* wx = a.weights + crop->x_weights + (uint64_t)x * crop->x_taps;
        for (int c = 0; c < 3; ++c) {
            float sum = 0.0f;
            for (uint32_t k = 0; k < count_y; ++k) {
                float row = 0.0f;
                for (uint32_t j = 0; j < count_x; ++j) {
                    row += source_level(a, frame, crop->left + first_x + j, crop->top + first_y + k, c) * wx[j];
                }
                sum += row * wy[k];
            }
            out[c] = sum;
        }
    }
}

// The fixed-point grey sums of the frames whose slot `slot` is a contrast:
// each block's values summed by warp shuffles and shared memory, then one
// atomic per block (every thread of a block is on the same frame).
extern "C" __global__ void augment_mean(AugmentArgs a) {
    __shared__ unsigned long long warp_sums[32];
    const uint32_t pixels = a.width * a.height;
    const FrameSlot at = frame_slot(pixels);
    const uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
    for (uint64_t frame = at.slot; frame < a.frames; frame += at.slots) {
        if (a.ops[(frame / a.steps) * a.slots + a.slot].kind != AUG_CONTRAST) {
            continue;  // the same for the whole block
        }
        unsigned long long value = 0;
        if (at.pixel < pixels) {
            const float grey = grey_of((const float*)a.src + (frame * pixels + at.pixel) * 3);
            value = (unsigned long long)(grey * 4294967296.0f);
        }
        for (int offset = 16; offset > 0; offset /= 2) {
            value += __shfl_down_sync(0xffffffffu, value, offset);
        }
        if (lane == 0) {
            warp_sums[warp] = value;
        }
        __syncthreads();
        if (warp == 0) {
            value = lane < warps ? warp_sums[lane] : 0;
            for (int offset = 16; offset > 0; offset /= 2) {
                value += __shfl_down_sync(0xffffffffu, value, offset);
            }
            if (lane == 0) {
                atomicAdd(&a.sums[frame], value);
            }
        }
        __syncthreads();
    }
}

// SplitMix64's finaliser.
__device__ __forceinline__ uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// The reference's standard normal value `index` of generator `key`.
__device__ __forceinline__ float standard_normal(uint64_t key, uint64_t index) {
    const uint64_t bits = mix64(key ^ mix64(index + 0x9e3779b97f4a7c15ull));
    const double u1 = (double)((bits >> 38) + 1) * (1.0 / 67108864.0);
    const double u2 = (double)(bits & ((1ull << 26) - 1)) * (1.0 / 67108864.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

// torchvision's hue shift of one pixel (the reference's `shift_hue`).
__device__ void shift_hue(const float* in, float shift, float* out) {
    const float r = in[0], g = in[1], b = in[2];
    const float maxc = fmaxf(fmaxf(r, g), b);
    const float minc = fminf(fminf(r, g), b);
    const bool eqc = maxc == minc;
    const float range = maxc - minc;
    const float s = range / (eqc ? 1.0f : maxc);
    const float divisor = eqc ? 1.0f : range;
    const float rc = (maxc - r) / divisor, gc = (maxc - g) / divisor, bc = (maxc - b) / divisor;
    float h;
    if (maxc == r) {
        h = bc - gc;
    } else if (maxc == g) {
        h = (rc + 2.0f) - bc;
    } else {
        h = (gc + 4.0f) - rc;
    }
    h = fmodf(h * (1.0f / 6.0f) + 1.0f, 1.0f);
    h = fmodf(h + shift, 1.0f);
    if (h < 0.0f) {
        h += 1.0f;
    }
    const float v = maxc;
    const float h6 = h * 6.0f;
    const float i = floorf(h6);
    const float f = h6 - i;
    const float sxf = s * f;
    const float one_minus_s = 1.0f - s;
    const float q = clamp01((1.0f - sxf) * v);
    const float t = clamp01((sxf + one_minus_s) * v);
    const float p = clamp01(one_minus_s * v);
    int sector = (int)i % 6;
    if (sector < 0) {
        sector += 6;
    }
    const float rgb[6][3] = {{v, t, p}, {q, v, p}, {p, v, t}, {p, q, v}, {t, p, v}, {v, p, q}};
    out[0] = rgb[sector][0];
    out[1] = rgb[sector][1];
    out[2] = rgb[sector][2];
}

// `torch.linspace((1 - n) / 2, (n - 1) / 2, n)[i]` in f32, as the reference.
__device__ __forceinline__ float linspace_at(uint32_t n, uint32_t i) {
    const float start = (1.0f - (float)n) * 0.5f;
    const float end = ((float)n - 1.0f) * 0.5f;
    if (n <= 1) {
        return start;
    }
    const float step = (end - start) / (float)(n - 1);
    return i < n / 2 ? start + step * (float)i : end - step * (float)(n - 1 - i);
}

// Index `i` reflected into 0..n (the edge not repeated).
__device__ __forceinline__ uint32_t reflect(int64_t i, uint32_t n) {
    if (n == 1) {
        return 0;
    }
    const int64_t period = 2 * ((int64_t)n - 1);
    int64_t r = i % period;
    if (r < 0) {
        r += period;
    }
    return (uint32_t)(r >= (int64_t)n ? period - r : r);
}

extern "C" __global__ void augment_op(AugmentArgs a) {
    const uint32_t pixels = a.width * a.height;
    const FrameSlot at = frame_slot(pixels);
    if (at.pixel >= pixels) {
        return;
    }
    const uint32_t x = at.pixel % a.width, y = at.pixel / a.width;
    for (uint64_t frame = at.slot; frame < a.frames; frame += at.slots) {
        const AugmentOp op = a.ops[(frame / a.steps) * a.slots + a.slot];
        const float* src = (const float*)a.src + frame * pixels * 3;
        const float* in = src + (uint64_t)at.pixel * 3;
        float* out = (float*)a.out + (frame * pixels + at.pixel) * 3;
        switch (op.kind) {
            case AUG_BRIGHTNESS:
                for (int c = 0; c < 3; ++c) {
                    out[c] = clamp01(in[c] * op.values[0]);
                }
                break;
            case AUG_CONTRAST: {
                const float mean = (float)((double)a.sums[frame] / 4294967296.0 / (double)pixels);
                for (int c = 0; c < 3; ++c) {
                    out[c] = clamp01(in[c] * op.values[0] + mean * op.values[1]);
                }
                break;
            }
            case AUG_SATURATION: {
                const float grey = grey_of(in);
                for (int c = 0; c < 3; ++c) {
                    out[c] = clamp01(in[c] * op.values[0] + grey * op.values[1]);
                }
                break;
            }
            case AUG_HUE:
                shift_hue(in, op.values[0], out);
                break;
            case AUG_SHARPNESS: {
                const bool border = x == 0 || y == 0 || x + 1 >= a.width || y + 1 >= a.height;
                if (a.width <= 2 || a.height <= 2) {
                    for (int c = 0; c < 3; ++c) {
                        out[c] = in[c];
                    }
                    break;
                }
                const float wa = 1.0f / 13.0f, wb = 5.0f / 13.0f;
                for (int c = 0; c < 3; ++c) {
                    if (border) {
                        out[c] = clamp01(in[c]);
                        continue;
                    }
                    float blurred = 0.0f;
                    for (int dy = 0; dy < 3; ++dy) {
                        for (int dx = 0; dx < 3; ++dx) {
                            const float w = dx == 1 && dy == 1 ? wb : wa;
                            blurred += src[((uint64_t)(y + dy - 1) * a.width + (x + dx - 1)) * 3 + c] * w;
                        }
                    }
                    out[c] = clamp01(in[c] + (blurred - in[c]) * op.values[0]);
                }
                break;
            }
            case AUG_GAMMA:
                for (int c = 0; c < 3; ++c) {
                    out[c] = powf(in[c], op.values[0]);
                }
                break;
            case AUG_AFFINE_NEAREST:
            case AUG_AFFINE_BILINEAR: {
                const float* theta = op.values;
                const float w = (float)a.width, h = (float)a.height;
                const float gx_base = linspace_at(a.width, x), gy_base = linspace_at(a.height, y);
                const float gx = gx_base * theta[0] + gy_base * theta[1] + theta[2];
                const float gy = gx_base * theta[3] + gy_base * theta[4] + theta[5];
                const float ix = ((gx + 1.0f) * w - 1.0f) / 2.0f;
                const float iy = ((gy + 1.0f) * h - 1.0f) / 2.0f;
                auto inside = [&](int64_t px, int64_t py) {
                    return px >= 0 && py >= 0 && px < (int64_t)a.width && py < (int64_t)a.height;
                };
                auto level = [&](int64_t px, int64_t py, int c) {
                    return inside(px, py) ? src[((uint64_t)py * a.width + (uint64_t)px) * 3 + c] : 0.0f;
                };
                if (op.kind == AUG_AFFINE_NEAREST) {
                    const int64_t px = (int64_t)rintf(ix), py = (int64_t)rintf(iy);
                    for (int c = 0; c < 3; ++c) {
                        out[c] = level(px, py, c);
                    }
                    break;
                }
                const float x0f = floorf(ix), y0f = floorf(iy);
                const float fx = ix - x0f, fy = iy - y0f;
                const int64_t x0 = (int64_t)x0f, y0 = (int64_t)y0f;
                const float weights[4] = {(1.0f - fx) * (1.0f - fy), fx * (1.0f - fy), (1.0f - fx) * fy, fx * fy};
                const int64_t tx[4] = {x0, x0 + 1, x0, x0 + 1};
                const int64_t ty[4] = {y0, y0, y0 + 1, y0 + 1};
                float mask = 0.0f;
                for (int k = 0; k < 4; ++k) {
                    mask += (inside(tx[k], ty[k]) ? 1.0f : 0.0f) * weights[k];
                }
                for (int c = 0; c < 3; ++c) {
                    float v = 0.0f;
                    for (int k = 0; k < 4; ++k) {
                        v += level(tx[k], ty[k], c) * weights[k];
                    }
                    out[c] = v * mask;
                }
                break;
            }
            case AUG_NOISE: {
                const uint64_t per_frame = (uint64_t)pixels * 3;
                const uint64_t first = (frame % a.steps) * per_frame + (uint64_t)at.pixel * 3;
                for (int c = 0; c < 3; ++c) {
                    const float n = standard_normal(op.key, first + c);
                    out[c] = clamp01(in[c] + (op.values[0] + n * op.values[1]));
                }
                break;
            }
            case AUG_BLUR_ROWS:
            case AUG_BLUR_COLUMNS: {
                const bool rows = op.kind == AUG_BLUR_ROWS;
                const int64_t half = op.taps / 2;
                for (int c = 0; c < 3; ++c) {
                    float sum = 0.0f;
                    for (uint32_t k = 0; k < op.taps; ++k) {
                        const float w = a.weights[op.key + k];
                        const uint64_t p = rows ? (uint64_t)y * a.width + reflect((int64_t)x + k - half, a.width)
                                                : (uint64_t)reflect((int64_t)y + k - half, a.height) * a.width + x;
                        sum += src[p * 3 + c] * w;
                    }
                    out[c] = sum;
                }
                break;
            }
            default:
                for (int c = 0; c < 3; ++c) {
                    out[c] = in[c];
                }
        }
    }
}

extern "C" __global__ void augment_store(AugmentArgs a) {
    const uint32_t pixels = a.width * a.height;
    const FrameSlot at = frame_slot(pixels);
    if (at.pixel >= pixels) {
        return;
    }
    for (uint64_t frame = at.slot; frame < a.frames; frame += at.slots) {
        const float* in = (const float*)a.src + (frame * pixels + at.pixel) * 3;
        for (int c = 0; c < 3; ++c) {
            const uint64_t to = a.layout == LAYOUT_CHW ? (frame * 3 + c) * pixels + at.pixel
                                                       : (frame * pixels + at.pixel) * 3 + c;
            if (a.dtype == DT_U8) {
                // The reference's `(x * 255.999) as u8`: truncated, saturated.
                const uint32_t level = __float2uint_rz(in[c] * 255.999f);
                ((uint8_t*)a.out)[to] = (uint8_t)(level > 255u ? 255u : level);
            } else {
                ((float*)a.out)[to] = in[c];
            }
        }
    }
}
