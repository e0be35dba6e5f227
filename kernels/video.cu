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
