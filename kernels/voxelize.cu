// Voxelization kernels. Every mode is deterministic and equal to the CPU
// reference (crates/robocache-cpu/src/voxelize.rs):
// - occupancy, count and the dropped-point count use integer atomics, whose
//   result does not depend on their order;
// - max uses atomicMax on an order-preserving integer encoding of the float
//   (NaN ignored, +0 above -0), also order-independent;
// - mean reproduces the reference's order, so it equals the CPU bit for bit:
//   counts (integer atomics), an exclusive scan of the counts into segment
//   starts (tiles of 4096 voxels, three passes), each point's index placed
//   into its voxel's segment by an atomic cursor (so the order inside a
//   segment varies from run to run), then per voxel the segment is sorted
//   back into ascending point order and summed in that order in f64: one
//   thread per voxel for up to 16 points (insertion sort in registers), one
//   block per voxel with a bitonic sort in shared memory up to 8192 points,
//   and beyond that one block walking all points in order.
// The voxel of a point is floor((p - origin) / size) in f32 with IEEE
// division, inside when 0 <= v < dim on every axis.

#include <stdint.h>

enum Mode { MODE_OCCUPANCY = 0, MODE_COUNT = 1, MODE_MEAN = 2, MODE_MAX = 3 };
enum CloudType { CLOUDS_NONE = 0, CLOUDS_U32 = 1, CLOUDS_U64 = 2, CLOUDS_I32 = 3, CLOUDS_I64 = 4 };

#define OUTSIDE 0xFFFFFFFFFFFFFFFFull

struct VoxelArgs {
    float origin[3];
    float size[3];
    uint64_t dims[3];
    uint64_t points;
    uint64_t per_cloud;  // X * Y * Z
    uint64_t clouds;
    const void* cloud_index;
    int cloud_type;
    int mode;
    uint64_t feature_len;
};

// The cloud of point i as a signed 64-bit value (-1 for an unsigned value
// that does not fit, which the check reports as out of range).
__device__ __forceinline__ long long cloud_of(const VoxelArgs& a, uint64_t i) {
    switch (a.cloud_type) {
        case CLOUDS_U32: return ((const uint32_t*)a.cloud_index)[i];
        case CLOUDS_U64: {
            uint64_t v = ((const uint64_t*)a.cloud_index)[i];
            return v > 0x7FFFFFFFFFFFFFFFull ? -1 : (long long)v;
        }
        case CLOUDS_I32: return ((const int32_t*)a.cloud_index)[i];
        case CLOUDS_I64: return ((const int64_t*)a.cloud_index)[i];
        default: return 0;
    }
}

__device__ __forceinline__ uint64_t voxel_key(const float* __restrict__ points, const VoxelArgs& a, uint64_t i) {
    uint64_t linear = 0;
    for (int axis = 0; axis < 3; axis++) {
        const float v = floorf(__fdiv_rn(__fsub_rn(points[3 * i + axis], a.origin[axis]), a.size[axis]));
        // In f64, exact for every integral f32; NaN fails both comparisons.
        if (!(v >= 0.0f && (double)v < (double)a.dims[axis])) return OUTSIDE;
        linear = linear * a.dims[axis] + (uint64_t)v;
    }
    long long cloud = cloud_of(a, i);
    if (cloud < 0 || (uint64_t)cloud >= a.clouds) return OUTSIDE;  // rejected before launch
    return (uint64_t)cloud * a.per_cloud + linear;
}

// Order-preserving encoding of a float as an unsigned integer.
__device__ __forceinline__ unsigned encode_max(float f) {
    unsigned u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ float decode_max(unsigned u) {
    return __uint_as_float((u & 0x80000000u) ? (u ^ 0x80000000u) : ~u);
}

// Per point: its voxel, the dropped count, and the mode's accumulation.
extern "C" __global__ void voxel_scatter(const float* __restrict__ points, const float* __restrict__ features,
                                         void* grid, uint32_t* counts, uint64_t* keys,
                                         unsigned long long* dropped, VoxelArgs a) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.points; i += stride) {
        const uint64_t key = voxel_key(points, a, i);
        if (a.mode == MODE_MEAN) keys[i] = key;
        if (key == OUTSIDE) {
            atomicAdd(dropped, 1ull);
            continue;
        }
        switch (a.mode) {
            case MODE_OCCUPANCY: ((uint8_t*)grid)[key] = 1; break;
            case MODE_COUNT:
            case MODE_MEAN: atomicAdd(&counts[key], 1u); break;
            default:
                for (uint64_t f = 0; f < a.feature_len; f++) {
                    const float v = features[i * a.feature_len + f];
                    if (!isnan(v)) atomicMax(&((unsigned*)grid)[key * a.feature_len + f], encode_max(v));
                }
        }
    }
}

// Fills n words with value (the max grid starts at the encoding of -inf).
extern "C" __global__ void voxel_fill(unsigned* words, unsigned value, uint64_t n) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) words[i] = value;
}

// Decodes the max grid in place.
extern "C" __global__ void voxel_max_decode(unsigned* words, uint64_t n) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        words[i] = __float_as_uint(decode_max(words[i]));
    }
}

// ---- Mean: scan, placement, per-voxel sums ----------------------------------

#define SCAN_THREADS 256
#define SCAN_ITEMS 16
#define SCAN_TILE (SCAN_THREADS * SCAN_ITEMS)

// Exclusive scan of one value per thread over the block (blockDim.x a
// multiple of 32, at most 1024); *total receives the block's sum. Every
// thread of the block must call.
__device__ uint32_t block_exclusive_scan(uint32_t value, uint32_t* total) {
    __shared__ uint32_t warp_sums[32];
    __shared__ uint32_t block_total;
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    uint32_t inclusive = value;
    for (int d = 1; d < 32; d <<= 1) {
        const uint32_t y = __shfl_up_sync(0xFFFFFFFFu, inclusive, d);
        if (lane >= d) inclusive += y;
    }
    if (lane == 31) warp_sums[warp] = inclusive;
    __syncthreads();
    if (warp == 0) {
        const uint32_t w = lane < blockDim.x / 32 ? warp_sums[lane] : 0;
        uint32_t sum = w;
        for (int d = 1; d < 32; d <<= 1) {
            const uint32_t y = __shfl_up_sync(0xFFFFFFFFu, sum, d);
            if (lane >= d) sum += y;
        }
        warp_sums[lane] = sum - w;
        if (lane == 31) block_total = sum;
    }
    __syncthreads();
    const uint32_t result = warp_sums[warp] + inclusive - value;
    *total = block_total;
    __syncthreads();  // warp_sums may be reused by the next call
    return result;
}

// Pass 1: the sum of each tile of SCAN_TILE counts.
extern "C" __global__ void voxel_tile_sums(const uint32_t* __restrict__ counts, uint32_t* tile_sums, uint64_t n) {
    const uint64_t base = (uint64_t)blockIdx.x * SCAN_TILE;
    uint32_t sum = 0;
    for (int k = 0; k < SCAN_ITEMS; k++) {
        const uint64_t i = base + k * SCAN_THREADS + threadIdx.x;
        if (i < n) sum += counts[i];
    }
    uint32_t total;
    block_exclusive_scan(sum, &total);
    if (threadIdx.x == 0) tile_sums[blockIdx.x] = total;
}

// Pass 2: exclusive scan of the tile sums in place, by one block walking them.
extern "C" __global__ void voxel_scan_tile_sums(uint32_t* tile_sums, uint64_t tiles) {
    uint32_t carry = 0;
    for (uint64_t base = 0; base < tiles; base += blockDim.x) {
        const uint64_t i = base + threadIdx.x;
        const uint32_t value = i < tiles ? tile_sums[i] : 0;
        uint32_t total;
        const uint32_t prefix = block_exclusive_scan(value, &total);
        if (i < tiles) tile_sums[i] = carry + prefix;
        carry += total;
    }
}

// Pass 3: each tile's exclusive scan plus the tile's offset, into cursor:
// SCAN_ITEMS block-wide scans of consecutive runs of blockDim.x counts, so
// every load and store is coalesced.
extern "C" __global__ void voxel_scan_tiles(const uint32_t* __restrict__ counts, const uint32_t* __restrict__ tile_sums,
                                            uint32_t* cursor, uint64_t n) {
    const uint64_t base = (uint64_t)blockIdx.x * SCAN_TILE;
    uint32_t carry = tile_sums[blockIdx.x];
    for (int k = 0; k < SCAN_ITEMS; k++) {
        const uint64_t i = base + k * SCAN_THREADS + threadIdx.x;
        const uint32_t value = i < n ? counts[i] : 0;
        uint32_t total;
        const uint32_t prefix = block_exclusive_scan(value, &total);
        if (i < n) cursor[i] = carry + prefix;
        carry += total;
    }
}

// Each point's index into its voxel's segment: cursor[v] starts at the
// segment's start and ends at its end.
extern "C" __global__ void voxel_place(const uint64_t* __restrict__ keys, uint32_t* cursor, uint32_t* order,
                                       uint64_t n) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const uint64_t key = keys[i];
        if (key != OUTSIDE) order[atomicAdd(&cursor[key], 1u)] = (uint32_t)i;
    }
}

#define LIGHT_POINTS 16
#define SHARED_POINTS 8192

// The mean of voxel v from its points in ascending order (`sorted`, length
// count), feature f: summed in f64 in that order, divided in f64.
__device__ __forceinline__ float mean_of(const float* __restrict__ features, uint64_t feature_len, uint64_t f,
                                         const uint32_t* sorted, uint32_t count) {
    double sum = 0.0;
    for (uint32_t j = 0; j < count; j++) sum = __dadd_rn(sum, (double)features[(uint64_t)sorted[j] * feature_len + f]);
    return __double2float_rn(__ddiv_rn(sum, (double)count));
}

// Per voxel: zeros when empty; up to LIGHT_POINTS points sorted and summed
// by the voxel's thread; heavier voxels are listed for voxel_mean_heavy.
extern "C" __global__ void voxel_mean(const float* __restrict__ features, const uint32_t* __restrict__ counts,
                                      const uint32_t* __restrict__ ends, const uint32_t* __restrict__ order,
                                      float* mean, uint64_t voxels, uint64_t feature_len, uint64_t* heavy,
                                      uint32_t* heavy_count) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t v = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; v < voxels; v += stride) {
        const uint32_t count = counts[v];
        float* out = mean + v * feature_len;
        if (count == 0) {
            if (feature_len == 4) *(float4*)out = make_float4(0.0f, 0.0f, 0.0f, 0.0f);  // 16-byte aligned
            else for (uint64_t f = 0; f < feature_len; f++) out[f] = 0.0f;
        } else if (count == 1) {
            const float* x = features + (uint64_t)order[ends[v] - 1] * feature_len;
            for (uint64_t f = 0; f < feature_len; f++) out[f] = __double2float_rn(__ddiv_rn(__dadd_rn(0.0, (double)x[f]), 1.0));
        } else if (count > LIGHT_POINTS) {
            heavy[atomicAdd(heavy_count, 1u)] = v;
        } else {
            const uint32_t start = ends[v] - count;
            uint32_t sorted[LIGHT_POINTS];
            for (uint32_t j = 0; j < count; j++) {
                const uint32_t value = order[start + j];
                uint32_t k = j;
                while (k > 0 && sorted[k - 1] > value) {
                    sorted[k] = sorted[k - 1];
                    k--;
                }
                sorted[k] = value;
            }
            for (uint64_t f = 0; f < feature_len; f++) out[f] = mean_of(features, feature_len, f, sorted, count);
        }
    }
}

// Voxels with more than LIGHT_POINTS points, one block each (block-stride
// over the list; the list's length is read on the device, so the host never
// waits for it): a bitonic sort of the segment in shared memory up to
// SHARED_POINTS points, else a walk over all points in order collecting the
// voxel's. Dynamic shared memory: SHARED_POINTS words.
extern "C" __global__ void voxel_mean_heavy(const float* __restrict__ features, const uint64_t* __restrict__ keys,
                                            const uint32_t* __restrict__ counts, const uint32_t* __restrict__ ends,
                                            const uint32_t* __restrict__ order, float* mean, uint64_t points,
                                            uint64_t feature_len, const uint64_t* __restrict__ heavy,
                                            const uint32_t* __restrict__ heavy_count) {
    extern __shared__ uint32_t sorted[];
    __shared__ uint32_t warp_counts[32];
    const uint32_t listed = *heavy_count;
    for (uint32_t h = blockIdx.x; h < listed; h += gridDim.x) {
        const uint64_t v = heavy[h];
        const uint32_t count = counts[v];
        const uint32_t start = ends[v] - count;
        float* out = mean + v * feature_len;
        if (count <= SHARED_POINTS) {
            uint32_t size = 1;
            while (size < count) size <<= 1;
            for (uint32_t i = threadIdx.x; i < size; i += blockDim.x) sorted[i] = i < count ? order[start + i] : 0xFFFFFFFFu;
            __syncthreads();
            for (uint32_t k = 2; k <= size; k <<= 1) {
                for (uint32_t j = k >> 1; j > 0; j >>= 1) {
                    for (uint32_t i = threadIdx.x; i < size; i += blockDim.x) {
                        const uint32_t partner = i ^ j;
                        if (partner > i) {
                            const uint32_t a = sorted[i], b = sorted[partner];
                            const bool ascending = (i & k) == 0;
                            if ((a > b) == ascending) {
                                sorted[i] = b;
                                sorted[partner] = a;
                            }
                        }
                    }
                    __syncthreads();
                }
            }
            for (uint64_t f = threadIdx.x; f < feature_len; f += blockDim.x)
                out[f] = mean_of(features, feature_len, f, sorted, count);
            __syncthreads();
        } else {
            // Walk the points in order, a chunk of blockDim.x at a time, keep
            // this voxel's in order in shared memory, and let thread f add
            // them to feature f's sum (features in rounds of blockDim.x).
            const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
            for (uint64_t f0 = 0; f0 < feature_len; f0 += blockDim.x) {
                const uint64_t f = f0 + threadIdx.x;
                double sum = 0.0;
                for (uint64_t base = 0; base < points; base += blockDim.x) {
                    const uint64_t i = base + threadIdx.x;
                    const bool mine = i < points && keys[i] == v;
                    const unsigned ballot = __ballot_sync(0xFFFFFFFFu, mine);
                    if (lane == 0) warp_counts[warp] = __popc(ballot);
                    __syncthreads();
                    uint32_t before = 0, total = 0;
                    for (unsigned w = 0; w < blockDim.x / 32; w++) {
                        if (w < warp) before += warp_counts[w];
                        total += warp_counts[w];
                    }
                    if (mine) sorted[before + __popc(ballot & ((1u << lane) - 1))] = (uint32_t)i;
                    __syncthreads();
                    if (f < feature_len)
                        for (uint32_t j = 0; j < total; j++)
                            sum = __dadd_rn(sum, (double)features[(uint64_t)sorted[j] * feature_len + f]);
                    __syncthreads();
                }
                if (f < feature_len) out[f] = __double2float_rn(__ddiv_rn(sum, (double)count));
            }
        }
    }
}

// The first point whose cloud index is out of range (atomic min of its index).
extern "C" __global__ void voxel_check_clouds(VoxelArgs a, unsigned long long* first_bad) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.points; i += stride) {
        const long long cloud = cloud_of(a, i);
        if (cloud < 0 || (uint64_t)cloud >= a.clouds) atomicMin(first_bad, (unsigned long long)i);
    }
}
