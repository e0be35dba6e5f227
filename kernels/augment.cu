// Per-sample augmentation of camera frames (the CPU reference:
// crates/robocache-augment/src/reference.rs, docs/semantics.md), fused into
// as few passes over the frames as the operations allow.
//
// Each window's operation list is cut into passes by the host
// (crates/robocache/src/cuda/augment.rs): a pass starts where an operation
// needs more than its own pixel of the previous result (a sharpness, an
// affine or a blur reads neighbours; a contrast reads the frame's mean), and
// every per-pixel operation after it (brightness, saturation, hue, gamma,
// noise) runs in the same pass, on values held in registers. The first pass
// also reads the frames (to float, each window's crop resized to its output);
// a window's last pass writes the output in its layout and dtype; a pass
// whose next one starts with a contrast sums the grey of what it writes.
// One launch per pass (`augment_pass`, the host passing `src` and `work`
// buffers in turn) over the frames whose windows have that pass (a list the
// host makes): a window with fewer passes than others costs nothing after.
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

// Channel `c` of pixel (`x`, `y`) of frame `frame` of the input frames, as a
// float level (u8 levels divided by 255): from the frame's own address where
// the host gives a table of them (u8, channels last: a frame cache's
// frames, the level as `gather_rgb` would have written it), else from the
// batch `frames_in`.
__device__ __forceinline__ float source_level(const AugmentArgs& a, uint64_t frame, uint32_t x, uint32_t y, int c) {
    if (a.sources != nullptr) {
        const uint8_t* pixel = (const uint8_t*)a.sources[frame] + ((uint64_t)y * a.in_width + x) * 3;
        return (float)pixel[c] / 255.0f;
    }
    const uint64_t pixels = (uint64_t)a.in_width * a.in_height;
    const uint64_t at = a.layout == LAYOUT_CHW ? (frame * 3 + c) * pixels + (uint64_t)y * a.in_width + x
                                               : (frame * pixels + (uint64_t)y * a.in_width + x) * 3 + c;
    if (a.in_dtype == DT_U8) {
        return (float)((const uint8_t*)a.frames_in)[at] / 255.0f;
    }
    return ((const float*)a.frames_in)[at];
}

// Output pixel (`x`, `y`) of frame `frame` as read by the first pass: the
// frame's own pixel, or its window's crop resized (the reference's two
// passes: each row of the crop resized along x, a sum from 0 in tap order,
// then those rows along y).
__device__ __forceinline__ void load_pixel(const AugmentArgs& a, uint64_t frame, uint32_t x, uint32_t y, float* v) {
    const AugmentCrop* crop = a.crops ? &a.crops[frame / a.steps] : nullptr;
    if (crop == nullptr || crop->width == 0) {
        for (int c = 0; c < 3; ++c) {
            v[c] = source_level(a, frame, x, y, c);
        }
        return;
    }
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
        v[c] = sum;
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
__device__ __forceinline__ void shift_hue(const float* in, float shift, float* out) {
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
    // torchvision's table {{v, t, p}, {q, v, p}, {p, v, t}, {p, q, v}, {t, p, v}, {v, p, q}}, by
    // branches: an indexed local array would live in local memory.
    switch (sector) {
        case 0: out[0] = v; out[1] = t; out[2] = p; break;
        case 1: out[0] = q; out[1] = v; out[2] = p; break;
        case 2: out[0] = p; out[1] = v; out[2] = t; break;
        case 3: out[0] = p; out[1] = q; out[2] = v; break;
        case 4: out[0] = t; out[1] = p; out[2] = v; break;
        default: out[0] = v; out[1] = p; out[2] = q; break;
    }
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

// A per-pixel operation on `v` (pixel `pixel` of frame `frame`); a contrast
// with the frame's mean `mean`.
__device__ __forceinline__ void apply_pointwise(const AugmentOp& op, float mean, uint64_t frame, uint32_t steps,
                                                uint32_t pixels, uint32_t pixel, float* v) {
    switch (op.kind) {
        case AUG_BRIGHTNESS:
            for (int c = 0; c < 3; ++c) {
                v[c] = clamp01(v[c] * op.values[0]);
            }
            break;
        case AUG_CONTRAST:
            for (int c = 0; c < 3; ++c) {
                v[c] = clamp01(v[c] * op.values[0] + mean * op.values[1]);
            }
            break;
        case AUG_SATURATION: {
            const float grey = grey_of(v);
            for (int c = 0; c < 3; ++c) {
                v[c] = clamp01(v[c] * op.values[0] + grey * op.values[1]);
            }
            break;
        }
        case AUG_HUE: {
            const float in[3] = {v[0], v[1], v[2]};
            shift_hue(in, op.values[0], v);
            break;
        }
        case AUG_GAMMA:
            for (int c = 0; c < 3; ++c) {
                v[c] = powf(v[c], op.values[0]);
            }
            break;
        case AUG_NOISE: {
            const uint64_t first = (frame % steps) * (uint64_t)pixels * 3 + (uint64_t)pixel * 3;
            for (int c = 0; c < 3; ++c) {
                const float n = standard_normal(op.key, first + c);
                v[c] = clamp01(v[c] + (op.values[0] + n * op.values[1]));
            }
            break;
        }
        default:
            break;
    }
}

// The first operation of a later pass at pixel (`x`, `y`): those that read
// neighbours of the previous pass's frame `src` (`width` x `height`, float
// RGB channels last), the others on its own pixel.
__device__ __forceinline__ void apply_first(const AugmentArgs& a, const AugmentOp& op, const float* src, float mean, uint64_t frame,
                            uint32_t x, uint32_t y, float* v) {
    const uint32_t pixels = a.width * a.height, pixel = y * a.width + x;
    const float* in = src + (uint64_t)pixel * 3;
    switch (op.kind) {
        case AUG_SHARPNESS: {
            const bool border = x == 0 || y == 0 || x + 1 >= a.width || y + 1 >= a.height;
            if (a.width <= 2 || a.height <= 2) {
                for (int c = 0; c < 3; ++c) {
                    v[c] = in[c];
                }
                return;
            }
            const float wa = 1.0f / 13.0f, wb = 5.0f / 13.0f;
            for (int c = 0; c < 3; ++c) {
                if (border) {
                    v[c] = clamp01(in[c]);
                    continue;
                }
                float blurred = 0.0f;
                for (int dy = 0; dy < 3; ++dy) {
                    for (int dx = 0; dx < 3; ++dx) {
                        const float w = dx == 1 && dy == 1 ? wb : wa;
                        blurred += src[((uint64_t)(y + dy - 1) * a.width + (x + dx - 1)) * 3 + c] * w;
                    }
                }
                v[c] = clamp01(in[c] + (blurred - in[c]) * op.values[0]);
            }
            return;
        }
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
                    v[c] = level(px, py, c);
                }
                return;
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
                float sum = 0.0f;
                for (int k = 0; k < 4; ++k) {
                    sum += level(tx[k], ty[k], c) * weights[k];
                }
                v[c] = sum * mask;
            }
            return;
        }
        case AUG_BLUR_ROWS:
        case AUG_BLUR_COLUMNS: {
            const bool rows = op.kind == AUG_BLUR_ROWS;
            const int64_t half = op.taps / 2;
            for (int c = 0; c < 3; ++c) {
                float sum = 0.0f;
                for (uint32_t k = 0; k < op.taps; ++k) {
                    const float weight = a.weights[op.key + k];
                    const uint64_t p = rows ? (uint64_t)y * a.width + reflect((int64_t)x + k - half, a.width)
                                            : (uint64_t)reflect((int64_t)y + k - half, a.height) * a.width + x;
                    sum += src[p * 3 + c] * weight;
                }
                v[c] = sum;
            }
            return;
        }
        default:
            for (int c = 0; c < 3; ++c) {
                v[c] = in[c];
            }
            apply_pointwise(op, mean, frame, a.steps, pixels, pixel, v);
    }
}

// A pass's fixed-point grey sums of frame `frame` (`value`, each thread's
// pixels' own), summed by warp shuffles and shared memory, then one atomic
// per block into the pass's sums (every thread of a block is on the same
// frame).
__device__ __forceinline__ void sum_grey(const AugmentArgs& a, uint64_t frame, unsigned long long value,
                                         unsigned long long* warp_sums) {
    const uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
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
            atomicAdd(&a.sums[(uint64_t)a.pass * a.frames + frame], value);
        }
    }
}

// Operations a block keeps in shared memory (a window's longer run is read
// from global memory).
#define SHARED_OPS 8

// Pixels a thread of `augment_pass` takes (the host sizes the grid by it:
// `AUGMENT_PIXELS_PER_THREAD` in abi.h).

// Pass `pass` of every window that has one (see the top of the file). At
// most 64 registers a thread, so that four blocks share a multiprocessor:
// the pass waits on memory, and more warps hide more of it.
extern "C" __global__ void __launch_bounds__(256, 4) augment_pass(AugmentArgs a) {
    __shared__ unsigned long long warp_sums[32];
    __shared__ AugmentOp shared_ops[SHARED_OPS];
    const uint32_t pixels = a.width * a.height;
    // Each thread takes AUGMENT_PIXELS_PER_THREAD pixels of its frame, a
    // frame's threads apart: a block's table reads and barriers serve more
    // pixels.
    const uint32_t threads = (pixels + AUGMENT_PIXELS_PER_THREAD - 1) / AUGMENT_PIXELS_PER_THREAD;
    const FrameSlot at = frame_slot(threads);
    for (uint64_t listed = at.slot; listed < a.listed; listed += at.slots) {
        const uint64_t frame = a.frame_list[listed];
        const uint64_t window = frame / a.steps;
        const AugmentStage stage = a.stages[window * a.passes + a.pass];
        if (!stage.active) {
            continue;  // never listed; the same for the whole block
        }
        const AugmentOp* ops = a.ops + window * a.slots + stage.first;
        if (stage.count <= SHARED_OPS) {
            // Every thread of the block is on this frame: its operations are
            // read once, not once a thread.
            if (threadIdx.x < stage.count) {
                shared_ops[threadIdx.x] = ops[threadIdx.x];
            }
            __syncthreads();
            ops = shared_ops;
        }
        unsigned long long grey_sum = 0;
        for (uint32_t j = 0; j < AUGMENT_PIXELS_PER_THREAD; ++j) {
            const uint32_t pixel = at.pixel + j * threads;
            if (at.pixel >= threads || pixel >= pixels) {
                break;
            }
            const uint32_t x = pixel % a.width, y = pixel / a.width;
            float v[3] = {0.0f, 0.0f, 0.0f};
            uint32_t k = 0;
            if (a.pass == 0) {
                load_pixel(a, frame, x, y, v);
            } else {
                // Only a later pass's first operation can be a contrast.
                const float mean =
                    ops[0].kind == AUG_CONTRAST
                        ? (float)((double)a.sums[(uint64_t)(a.pass - 1) * a.frames + frame] / 4294967296.0 / (double)pixels)
                        : 0.0f;
                apply_first(a, ops[0], a.src + frame * pixels * 3, mean, frame, x, y, v);
                k = 1;
            }
            for (; k < stage.count; ++k) {
                apply_pointwise(ops[k], 0.0f, frame, a.steps, pixels, pixel, v);
            }
            if (stage.last) {
                for (int c = 0; c < 3; ++c) {
                    const uint64_t to = a.layout == LAYOUT_CHW ? (frame * 3 + c) * pixels + pixel
                                                               : (frame * pixels + pixel) * 3 + c;
                    if (a.out_dtype == DT_U8) {
                        // The reference's `(x * 255.999) as u8`: truncated, saturated.
                        const uint32_t level = __float2uint_rz(v[c] * 255.999f);
                        ((uint8_t*)a.out)[to] = (uint8_t)(level > 255u ? 255u : level);
                    } else {
                        ((float*)a.out)[to] = v[c];
                    }
                }
            } else {
                float* out = a.work + (frame * pixels + pixel) * 3;
                for (int c = 0; c < 3; ++c) {
                    out[c] = v[c];
                }
            }
            if (stage.sums_next) {
                grey_sum += (unsigned long long)(grey_of(v) * 4294967296.0f);
            }
        }
        if (stage.sums_next) {
            sum_grey(a, frame, grey_sum, warp_sums);
        }
        // The next frame's operations go where this one's are read.
        __syncthreads();
    }
}

