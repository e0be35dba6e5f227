// Voxelization kernels. Every mode is deterministic and equal to the CPU
// reference (crates/robocache-cpu/src/voxelize.rs):
// - occupancy, count and the dropped-point count use integer atomics, whose
//   result does not depend on their order;
// - max uses atomicMax on an order-preserving integer encoding of the float
//   (NaN ignored, +0 above -0), also order-independent;
// - mean reproduces the reference's order: counts, an exclusive scan, a
//   stable placement of point indices by voxel, then one thread per voxel
//   summing its points in ascending point order in f64.
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

// Exclusive scan of counts into cursor, by one block of 1024 threads walking
// the voxels in tiles with a running carry.
extern "C" __global__ void voxel_scan(const uint32_t* counts, uint32_t* cursor, uint64_t n) {
    __shared__ uint32_t tile[1024];
    __shared__ uint32_t carry;
    if (threadIdx.x == 0) carry = 0;
    __syncthreads();
    for (uint64_t base = 0; base < n; base += blockDim.x) {
        const uint64_t i = base + threadIdx.x;
        const uint32_t value = i < n ? counts[i] : 0;
        tile[threadIdx.x] = value;
        __syncthreads();
        // Hillis-Steele inclusive scan of the tile.
        for (unsigned offset = 1; offset < blockDim.x; offset <<= 1) {
            const uint32_t add = threadIdx.x >= offset ? tile[threadIdx.x - offset] : 0;
            __syncthreads();
            tile[threadIdx.x] += add;
            __syncthreads();
        }
        if (i < n) cursor[i] = carry + tile[threadIdx.x] - value;
        __syncthreads();
        if (threadIdx.x == blockDim.x - 1) carry += tile[threadIdx.x];
        __syncthreads();
    }
}

// Stable placement, by one block walking the points in tiles: a point's slot
// is its voxel's cursor plus the number of earlier points of the tile in the
// same voxel; the last of them advances the cursor. Afterwards cursor[v] is
// the end of voxel v's run in `order`.
extern "C" __global__ void voxel_place(const uint64_t* keys, uint32_t* cursor, uint32_t* order, uint64_t n) {
    __shared__ uint64_t tile[1024];
    for (uint64_t base = 0; base < n; base += blockDim.x) {
        const uint64_t i = base + threadIdx.x;
        const uint64_t key = i < n ? keys[i] : OUTSIDE;
        tile[threadIdx.x] = key;
        __syncthreads();
        uint32_t rank = 0;
        bool last = true;
        if (key != OUTSIDE) {
            for (unsigned j = 0; j < blockDim.x; j++) {
                if (tile[j] == key) {
                    if (j < threadIdx.x) rank++;
                    else if (j > threadIdx.x) last = false;
                }
            }
            order[cursor[key] + rank] = (uint32_t)i;
        }
        __syncthreads();
        if (key != OUTSIDE && last) cursor[key] += rank + 1;
        __syncthreads();
    }
}

// Mean per voxel: its points' features summed in ascending point order in
// f64, divided in f64, rounded to f32; 0 for empty voxels.
extern "C" __global__ void voxel_mean(const float* __restrict__ features, const uint32_t* counts,
                                      const uint32_t* ends, const uint32_t* order, float* mean, uint64_t voxels,
                                      uint64_t feature_len) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t v = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; v < voxels; v += stride) {
        const uint32_t count = counts[v];
        const uint32_t start = ends[v] - count;
        for (uint64_t f = 0; f < feature_len; f++) {
            if (count == 0) {
                mean[v * feature_len + f] = 0.0f;
                continue;
            }
            double sum = 0.0;
            for (uint32_t j = start; j < start + count; j++) {
                sum = __dadd_rn(sum, (double)features[(uint64_t)order[j] * feature_len + f]);
            }
            mean[v * feature_len + f] = __double2float_rn(__ddiv_rn(sum, (double)count));
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
