// Benchmark support: evict the device's caches between timed calls.
//
// `evict_caches` reads a scratch buffer larger than the L2 cache (16-byte
// loads, every block striding over it), which replaces every cached line by
// a clean one of the scratch buffer: the next timed call finds its inputs in
// DRAM, as a training step that just ran other work would, and pays no
// write-back for lines an earlier call left dirty. It also keeps the device
// busy for a few tens of microseconds, so the host queues the timed call
// before the device reaches it and launch overhead is not timed.

#include <stdint.h>

extern "C" __global__ void evict_caches(const uint4* __restrict__ scratch, uint64_t count, uint32_t* sink) {
    uint32_t acc = 0;
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) {
        const uint4 v = scratch[i];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    // Never true in practice; keeps the loads from being optimised away.
    if (acc == 0x9E3779B9u && threadIdx.x == 0xFFFFu) sink[0] = acc;
}
