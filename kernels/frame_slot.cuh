// Shared by the frame kernels (video.cu, augment.cu).
#pragma once

#include <stdint.h>

// A thread's place in a grid of whole frames' worth of blocks (`per_frame`
// threads a frame): block b covers pixels of frame slot b / blocks_per_frame,
// and each slot strides over the frames by `slots` (the host sizes the grid,
// at most one slot per frame). `pixel` may be past the frame's last.
struct FrameSlot {
    uint32_t slot, slots, pixel;
};

__device__ __forceinline__ FrameSlot frame_slot(uint32_t per_frame) {
    const uint32_t blocks_per_frame = (per_frame + blockDim.x - 1) / blockDim.x;
    const uint32_t slot = blockIdx.x / blocks_per_frame;
    return {slot, gridDim.x / blocks_per_frame, (blockIdx.x - slot * blocks_per_frame) * blockDim.x + threadIdx.x};
}
