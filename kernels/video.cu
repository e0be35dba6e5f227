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
// IEEE round-to-nearest division (LeRobot's `frames / 255` on the host).
//
// One thread per pixel. The grid is a whole number of frames' worth of
// blocks: block b covers pixels of frame slot b / blocks_per_frame, and each
// slot strides over the frames (the host sizes the grid, at most one slot
// per frame).

#include <stdint.h>

#include "abi.h"

__device__ __forceinline__ int mulhw(int a, int b) { return (a * b) >> 16; }

__device__ __forceinline__ int clamp_level(int v) { return v < 0 ? 0 : (v > 255 ? 255 : v); }

extern "C" __global__ void yuv420_to_rgb(FrameArgs args) {
    const uint32_t width = args.width, height = args.height;
    const uint32_t pixels = width * height;  // checked on the host to fit 32 bits
    const uint32_t blocks_per_frame = (pixels + blockDim.x - 1) / blockDim.x;
    const uint32_t slot = blockIdx.x / blocks_per_frame;
    const uint32_t slots = gridDim.x / blocks_per_frame;
    const uint32_t p = (blockIdx.x - slot * blocks_per_frame) * blockDim.x + threadIdx.x;
    if (p >= pixels) return;
    const uint32_t row = p / width, column = p - row * width;
    const uint32_t chroma_width = (width + 1) / 2, chroma_height = (height + 1) / 2;
    const uint32_t c = (row / 2) * chroma_width + column / 2;
    for (uint64_t frame = slot; frame < args.frames; frame += slots) {
        const uint8_t* planes = args.planes + frame * args.frame_bytes;
        const int y = mulhw((int)planes[p] * 8 - 128, 9539);
        const int u = (int)planes[pixels + c] * 8 - 1024;
        const int v = (int)planes[pixels + chroma_width * chroma_height + c] * 8 - 1024;
        const int rgb[3] = {
            clamp_level(y + mulhw(v, 13075)),
            clamp_level(y + mulhw(u, -3209) + mulhw(v, -6660)),
            clamp_level(y + mulhw(u, 16525)),
        };
        const uint64_t first = frame * 3 * (uint64_t)pixels;
        for (int channel = 0; channel < 3; ++channel) {
            const uint64_t at = first + (args.layout == LAYOUT_CHW ? (uint64_t)channel * pixels + p
                                                                  : (uint64_t)p * 3 + channel);
            if (args.dtype == DT_F32) {
                ((float*)args.out)[at] = __fdiv_rn((float)rgb[channel], 255.0f);
            } else {
                ((uint8_t*)args.out)[at] = (uint8_t)rgb[channel];
            }
        }
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
// One thread per output pixel, all three channels; a grid-stride loop over
// every output pixel of every frame.

#define RESIZE_PRECISION_BITS 22

__device__ __forceinline__ uint8_t resize_level(int sum) {
    return (uint8_t)clamp_level(sum >> RESIZE_PRECISION_BITS);
}

// Along rows: out[f][r][x] from src[f][first_row + r][first[x] ..].
extern "C" __global__ void resize_rows(ResizeArgs args) {
    const uint64_t per_frame = (uint64_t)args.out_rows * args.out_width;
    const uint64_t total = args.frames * per_frame;
    const int* first = args.table;
    const int* count = args.table + args.out_width;
    const int* weights = args.table + 2 * (uint64_t)args.out_width;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (uint64_t)gridDim.x * blockDim.x) {
        const uint64_t frame = i / per_frame;
        const uint32_t within = (uint32_t)(i - frame * per_frame);
        const uint32_t row = within / args.out_width, x = within - row * args.out_width;
        const uint8_t* line =
            args.src + ((frame * args.in_rows + args.first_row + row) * args.in_width + first[x]) * 3;
        const int* w = weights + (uint64_t)x * args.taps;
        int sum[3] = {1 << (RESIZE_PRECISION_BITS - 1), 1 << (RESIZE_PRECISION_BITS - 1),
                      1 << (RESIZE_PRECISION_BITS - 1)};
        for (int k = 0; k < count[x]; ++k) {
            sum[0] += (int)line[3 * k] * w[k];
            sum[1] += (int)line[3 * k + 1] * w[k];
            sum[2] += (int)line[3 * k + 2] * w[k];
        }
        uint8_t* out = (uint8_t*)args.out + i * 3;
        out[0] = resize_level(sum[0]);
        out[1] = resize_level(sum[1]);
        out[2] = resize_level(sum[2]);
    }
}

// Along columns: out[f][y][x] from src[f][first[y] ..][x], written in the
// output's layout and dtype (float: the level divided by 255, IEEE
// round-to-nearest).
extern "C" __global__ void resize_columns(ResizeArgs args) {
    const uint64_t per_frame = (uint64_t)args.out_rows * args.out_width;
    const uint64_t total = args.frames * per_frame;
    const int* first = args.table;
    const int* count = args.table + args.out_rows;
    const int* weights = args.table + 2 * (uint64_t)args.out_rows;
    const uint64_t row_bytes = (uint64_t)args.in_width * 3;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (uint64_t)gridDim.x * blockDim.x) {
        const uint64_t frame = i / per_frame;
        const uint32_t p = (uint32_t)(i - frame * per_frame);
        const uint32_t y = p / args.out_width, x = p - y * args.out_width;
        const uint8_t* column = args.src + (frame * args.in_rows + first[y]) * row_bytes + (uint64_t)x * 3;
        const int* w = weights + (uint64_t)y * args.taps;
        int sum[3] = {1 << (RESIZE_PRECISION_BITS - 1), 1 << (RESIZE_PRECISION_BITS - 1),
                      1 << (RESIZE_PRECISION_BITS - 1)};
        for (int k = 0; k < count[y]; ++k) {
            const uint8_t* pixel = column + k * row_bytes;
            sum[0] += (int)pixel[0] * w[k];
            sum[1] += (int)pixel[1] * w[k];
            sum[2] += (int)pixel[2] * w[k];
        }
        for (int channel = 0; channel < 3; ++channel) {
            const uint8_t level = resize_level(sum[channel]);
            const uint64_t at = frame * 3 * per_frame + (args.layout == LAYOUT_CHW ? (uint64_t)channel * per_frame + p
                                                                                   : (uint64_t)p * 3 + channel);
            if (args.dtype == DT_F32) {
                ((float*)args.out)[at] = __fdiv_rn((float)level, 255.0f);
            } else {
                ((uint8_t*)args.out)[at] = level;
            }
        }
    }
}
