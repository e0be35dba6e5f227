// Decoded camera frames to RGB on the device: the loader uploads each
// frame's YUV 4:2:0 planes (1.5 bytes a pixel) instead of RGB (3 bytes, or
// 12 as float32) and converts them into the batch here.
//
// The arithmetic is the CPU reference's (crates/robocache-video/src/yuv.rs,
// docs/semantics.md), which equals FFmpeg swscale's yuv420p -> rgb24 on
// x86-64 bit for bit: BT.601 limited range, chroma repeated over each 2x2
// block, 16-bit fixed point with every term `(value * 8 * coefficient) >> 16`
// (pmulhw), the sum clamped to 0..255. No term overflows 32 bits, and `>>`
// of a negative int is arithmetic in nvcc as in Rust, so the integers are
// the reference's exactly. Float32 output is the level divided by 255 with
// IEEE round-to-nearest division (LeRobot's `frames / 255` on the host),
// looked up in a per-block table of the 256 quotients.
//
// One thread per pixel. The grid is a whole number of frames' worth of
// blocks: block b covers pixels of frame slot b / blocks_per_frame, and each
// slot strides over the frames (the host sizes the grid, at most one slot
// per frame).

#include <stdint.h>

#include "abi.h"
#include "frame_slot.cuh"

__device__ __forceinline__ int mulhw(int a, int b) { return (a * b) >> 16; }

__device__ __forceinline__ int clamp_level(int v) { return v < 0 ? 0 : (v > 255 ? 255 : v); }

// Float32 levels: `level / 255` for each of the 256 levels, divided once
// per block into shared memory (IEEE round-to-nearest, `__fdiv_rn`), then
// looked up: a division per value costs more than the rest of the kernel.
__device__ __forceinline__ void fill_float_levels(float* levels) {
    for (int level = threadIdx.x; level < 256; level += blockDim.x) {
        levels[level] = __fdiv_rn((float)level, 255.0f);
    }
    __syncthreads();
}

// Writes pixel `p`'s three levels into frame `frame` of `out` (`pixels` a
// frame) in the layout and dtype asked for.
__device__ __forceinline__ void store_rgb(void* out, int layout, int dtype, uint64_t frame, uint32_t pixels,
                                          uint32_t p, const uint8_t rgb[3], const float* float_levels) {
    const uint64_t first = frame * 3 * (uint64_t)pixels;
    for (int channel = 0; channel < 3; ++channel) {
        const uint64_t at = first + (layout == LAYOUT_CHW ? (uint64_t)channel * pixels + p : (uint64_t)p * 3 + channel);
        if (dtype == DT_F32) {
            ((float*)out)[at] = float_levels[rgb[channel]];
        } else {
            ((uint8_t*)out)[at] = rgb[channel];
        }
    }
}

extern "C" __global__ void yuv420_to_rgb(FrameArgs args) {
    __shared__ float float_levels[256];
    if (args.dtype == DT_F32) fill_float_levels(float_levels);
    const uint32_t width = args.width, height = args.height;
    const uint32_t pixels = width * height;  // checked on the host to fit 32 bits
    const FrameSlot at = frame_slot(pixels);
    const uint32_t p = at.pixel;
    if (p >= pixels) return;
    const uint32_t row = p / width, column = p - row * width;
    const uint32_t chroma_width = (width + 1) / 2, chroma_height = (height + 1) / 2;
    const uint32_t c = (row / 2) * chroma_width + column / 2;
    for (uint64_t frame = at.slot; frame < args.frames; frame += at.slots) {
        const uint8_t* planes = args.planes + frame * args.frame_bytes;
        const int y = mulhw((int)planes[p] * 8 - 128, 9539);
        const int u = (int)planes[pixels + c] * 8 - 1024;
        const int v = (int)planes[pixels + chroma_width * chroma_height + c] * 8 - 1024;
        const uint8_t rgb[3] = {
            (uint8_t)clamp_level(y + mulhw(v, 13075)),
            (uint8_t)clamp_level(y + mulhw(u, -3209) + mulhw(v, -6660)),
            (uint8_t)clamp_level(y + mulhw(u, 16525)),
        };
        store_rgb(args.out, args.layout, args.dtype, frame, pixels, p, rgb, float_levels);
    }
}

// Crop and resize of 8-bit RGB frames (the CPU reference:
// crates/robocache-video/src/resize.rs): two passes, each output pixel the
// weighted sum of a run of source pixels along one axis, in 22-bit fixed
// point, summed in int from 2^21 and kept `>> 22` clamped to 0..255 (the
// reference's order: the sum of integer products is exact in any order, and
// below 2^31 since the host caps the taps). The host computes the weights
// (f64, as the reference) and passes them in `table`.
//
// One thread per output pixel, all three channels, over a grid of frame
// slots (`frame_slot`), so no index needs a 64-bit division.

// RGB frames laid out and typed without a resize: out[f] in the output's
// layout and dtype from src[f] ([in_rows, in_width, 3]); the table and the
// out_* sizes are unused.
// Pixels p..p+3 of frame `frame` (p a multiple of 4, `pixels` too) from
// `src` (4-byte aligned: their 12 bytes) into `out` (16-byte aligned) in the
// output's layout and dtype: three word loads, and per channel one 16-byte
// (f32) or 4-byte (u8) store channels first, or three such stores channels
// last. Every offset is a multiple of 4 pixels, so each access is aligned.
__device__ __forceinline__ void store_rgb4(const uint8_t* src, void* out, int layout, int dtype, uint64_t frame,
                                           uint32_t pixels, uint32_t p, const float* float_levels) {
    const uint32_t* words = (const uint32_t*)src;
    const uint32_t word[3] = {words[0], words[1], words[2]};
    uint8_t level[12];  // pixel k's channel c at 3k + c (little-endian words)
    for (int i = 0; i < 12; ++i) level[i] = (uint8_t)(word[i / 4] >> (8 * (i % 4)));
    const uint64_t first = frame * 3 * (uint64_t)pixels;
    if (layout == LAYOUT_CHW) {
        for (int c = 0; c < 3; ++c) {
            const uint64_t at = first + (uint64_t)c * pixels + p;
            if (dtype == DT_F32) {
                *(float4*)((float*)out + at) = make_float4(float_levels[level[c]], float_levels[level[3 + c]],
                                                           float_levels[level[6 + c]], float_levels[level[9 + c]]);
            } else {
                *(uint32_t*)((uint8_t*)out + at) = (uint32_t)level[c] | (uint32_t)level[3 + c] << 8 |
                                                   (uint32_t)level[6 + c] << 16 | (uint32_t)level[9 + c] << 24;
            }
        }
    } else {
        const uint64_t at = first + (uint64_t)p * 3;
        for (int k = 0; k < 3; ++k) {
            if (dtype == DT_F32) {
                *((float4*)((float*)out + at) + k) =
                    make_float4(float_levels[level[4 * k]], float_levels[level[4 * k + 1]],
                                float_levels[level[4 * k + 2]], float_levels[level[4 * k + 3]]);
            } else {
                *((uint32_t*)((uint8_t*)out + at) + k) = word[k];
            }
        }
    }
}

// RGB frames laid out and typed without a resize: out[f] in the output's
// layout and dtype from src[f] ([in_rows, in_width, 3]); the table and the
// out_* sizes are unused. `pixels_per_thread` 4 (the host checks the sizes
// and alignments) moves 4 pixels a thread with word accesses.
extern "C" __global__ void rgb_layout(ResizeArgs args) {
    __shared__ float float_levels[256];
    if (args.dtype == DT_F32) fill_float_levels(float_levels);
    const uint32_t pixels = args.in_rows * args.in_width;  // below 2^32 (checked on the host)
    const uint32_t per_thread = args.pixels_per_thread;
    const FrameSlot at = frame_slot(pixels / per_thread);
    if (at.pixel >= pixels / per_thread) return;
    const uint32_t p = at.pixel * per_thread;
    for (uint64_t frame = at.slot; frame < args.frames; frame += at.slots) {
        const uint8_t* pixel = args.src + (frame * pixels + p) * 3;
        if (per_thread == 4) {
            store_rgb4(pixel, args.out, args.layout, args.dtype, frame, pixels, p, float_levels);
        } else {
            const uint8_t rgb[3] = {pixel[0], pixel[1], pixel[2]};
            store_rgb(args.out, args.layout, args.dtype, frame, pixels, p, rgb, float_levels);
        }
    }
}

// Frames picked from anywhere on the device (the loader's frame cache and a
// batch's newly decoded frames) stacked into one batch: output frame f is
// the u8 [H, W, 3] frame at sources[f], written in the output's layout and
// dtype, 4 pixels a thread where the host says (`pixels_per_thread`).
extern "C" __global__ void gather_rgb(GatherArgs args) {
    __shared__ float float_levels[256];
    if (args.dtype == DT_F32) fill_float_levels(float_levels);
    const uint32_t per_thread = args.pixels_per_thread;
    const FrameSlot at = frame_slot(args.pixels / per_thread);
    if (at.pixel >= args.pixels / per_thread) return;
    const uint32_t p = at.pixel * per_thread;
    for (uint64_t frame = at.slot; frame < args.frames; frame += at.slots) {
        const uint8_t* pixel = (const uint8_t*)args.sources[frame] + (uint64_t)p * 3;
        if (per_thread == 4) {
            store_rgb4(pixel, args.out, args.layout, args.dtype, frame, args.pixels, p, float_levels);
        } else {
            const uint8_t rgb[3] = {pixel[0], pixel[1], pixel[2]};
            store_rgb(args.out, args.layout, args.dtype, frame, args.pixels, p, rgb, float_levels);
        }
    }
}

#define RESIZE_PRECISION_BITS 22
#define RESIZE_HALF (1 << (RESIZE_PRECISION_BITS - 1))

__device__ __forceinline__ uint8_t resize_level(int sum) {
    return (uint8_t)clamp_level(sum >> RESIZE_PRECISION_BITS);
}

// One output pixel's taps in a resize table (`table`: `outputs` first
// input indices, `outputs` tap counts, then `taps` weights per output).
struct ResizeTaps {
    int first;
    int count;
    const int* weights;
};

__device__ __forceinline__ ResizeTaps resize_taps_of(const int* table, uint32_t outputs, uint32_t taps, uint32_t i) {
    ResizeTaps at;
    at.first = table[i];
    at.count = table[outputs + i];
    at.weights = table + 2 * (uint64_t)outputs + (uint64_t)i * taps;
    return at;
}

// The RGB levels of the weighted sum of `at.count` pixels `stride` bytes
// apart from `pixel` (fixed point, rounded, clamped): one pass of a resize.
__device__ __forceinline__ void resize_pixel(const uint8_t* pixel, uint64_t stride, ResizeTaps at, uint8_t rgb[3]) {
    int sum0 = RESIZE_HALF, sum1 = RESIZE_HALF, sum2 = RESIZE_HALF;
    for (int k = 0; k < at.count; ++k) {
        const uint8_t* q = pixel + k * stride;
        const int weight = at.weights[k];
        sum0 += (int)q[0] * weight;
        sum1 += (int)q[1] * weight;
        sum2 += (int)q[2] * weight;
    }
    rgb[0] = resize_level(sum0);
    rgb[1] = resize_level(sum1);
    rgb[2] = resize_level(sum2);
}

// Where a thread of a resize pass writes: its frame slot and its output
// pixel, as row and column of the pass's `out_rows` x `out_width` output.
// False for a thread past the frame's pixels.
struct ResizeAt {
    FrameSlot at;
    uint32_t per_frame, row, x;
};

__device__ __forceinline__ bool resize_at(const ResizeArgs& args, ResizeAt* here) {
    here->per_frame = args.out_rows * args.out_width;  // below 2^32 (checked on the host)
    here->at = frame_slot(here->per_frame);
    if (here->at.pixel >= here->per_frame) return false;
    here->row = here->at.pixel / args.out_width;
    here->x = here->at.pixel - here->row * args.out_width;
    return true;
}

// Along rows: out[f][r][x] from src[f][first_row + r][first[x] ..].
extern "C" __global__ void resize_rows(ResizeArgs args) {
    ResizeAt here;
    if (!resize_at(args, &here)) return;
    const ResizeTaps taps = resize_taps_of(args.table, args.out_width, args.taps, here.x);
    for (uint64_t frame = here.at.slot; frame < args.frames; frame += here.at.slots) {
        const uint8_t* line =
            args.src + ((frame * args.in_rows + args.first_row + here.row) * args.in_width + taps.first) * 3;
        resize_pixel(line, 3, taps, (uint8_t*)args.out + (frame * here.per_frame + here.at.pixel) * 3);
    }
}

// Along columns: out[f][y][x] from src[f][first[y] ..][x], written in the
// output's layout and dtype (float: the level divided by 255, IEEE
// round-to-nearest, from the block's table).
extern "C" __global__ void resize_columns(ResizeArgs args) {
    __shared__ float float_levels[256];
    if (args.dtype == DT_F32) fill_float_levels(float_levels);
    ResizeAt here;
    if (!resize_at(args, &here)) return;
    const ResizeTaps taps = resize_taps_of(args.table, args.out_rows, args.taps, here.row);
    const uint64_t row_bytes = (uint64_t)args.in_width * 3;
    for (uint64_t frame = here.at.slot; frame < args.frames; frame += here.at.slots) {
        const uint8_t* column =
            args.src + (frame * args.in_rows + taps.first) * row_bytes + (uint64_t)here.x * 3;
        uint8_t rgb[3];
        resize_pixel(column, row_bytes, taps, rgb);
        store_rgb(args.out, args.layout, args.dtype, frame, here.per_frame, here.at.pixel, rgb, float_levels);
    }
}
