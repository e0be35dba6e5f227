// Voxelization kernels. Every mode is deterministic and equal to the CPU
// reference (crates/robocache-cpu/src/voxelize.rs):
// - occupancy, count and the dropped-point count use integer atomics, whose
//   result does not depend on their order;
// - max uses atomicMax on an order-preserving integer encoding of the float
//   (NaN ignored, +0 above -0), also order-independent;
// - mean reproduces the reference's order, so it equals the CPU bit for bit:
//   counts by integer atomics whose return value is the point's slot in its
//   voxel; a one-pass exclusive scan (decoupled look-back) of the counts into
//   segment starts; each point's index placed at start + slot (so the order
//   inside a segment varies from run to run); then per voxel the sum
//   in f64 in ascending point order: one or two points need no sort (IEEE
//   addition commutes); up to 16 are sorted by the voxel's thread, up to
//   8192 by one block (bitonic sort in shared memory), and beyond that one
//   block walks all points in order.
// The voxel of a point is floor((p - origin) / size) in f32 with IEEE
// division, inside when 0 <= v < dim on every axis.

#include <stdint.h>

enum Mode { MODE_OCCUPANCY = 0, MODE_COUNT = 1, MODE_MEAN = 2, MODE_MAX = 3 };
enum CloudType { CLOUDS_NONE = 0, CLOUDS_U32 = 1, CLOUDS_U64 = 2, CLOUDS_I32 = 3, CLOUDS_I64 = 4 };

#define OUTSIDE 0xFFFFFFFFFFFFFFFFull
#define OUTSIDE_32 0xFFFFFFFFu

// The mean's per-point keys (each point's voxel, or OUTSIDE): 32-bit words
// when every voxel and OUTSIDE fit in one (half the traffic of the
// scatter's stores and the placement's loads), else 64-bit.
struct PointKeys {
    void* words;
    int bytes;

    __device__ __forceinline__ void store(uint64_t i, uint64_t key) const {
        if (bytes == 4) ((uint32_t*)words)[i] = key == OUTSIDE ? OUTSIDE_32 : (uint32_t)key;
        else ((uint64_t*)words)[i] = key;
    }
    __device__ __forceinline__ uint64_t load(uint64_t i) const {
        if (bytes == 4) {
            const uint32_t key = ((const uint32_t*)words)[i];
            return key == OUTSIDE_32 ? OUTSIDE : key;
        }
        return ((const uint64_t*)words)[i];
    }
};

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
    int key_bytes;  // of the mean's per-point keys: 4 when the grid has fewer than 2^32 - 1 voxels, else 8
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

// Per point: its voxel, the dropped count, and the mode's accumulation. For
// the mean also each point's key and slot (its rank among its voxel's points
// in the order the atomics happened), and the scan's status words cleared.
extern "C" __global__ void voxel_scatter(const float* __restrict__ points, const float* __restrict__ features,
                                         void* grid, uint32_t* counts, void* keys, uint32_t* slots,
                                         unsigned long long* scan_status, uint64_t scan_words,
                                         unsigned long long* dropped, VoxelArgs a) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    const PointKeys point_keys{keys, a.key_bytes};
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < scan_words; i += stride) scan_status[i] = 0;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.points; i += stride) {
        const uint64_t key = voxel_key(points, a, i);
        if (a.mode == MODE_MEAN) point_keys.store(i, key);
        if (key == OUTSIDE) {
            atomicAdd(dropped, 1ull);
            continue;
        }
        switch (a.mode) {
            case MODE_OCCUPANCY: ((uint8_t*)grid)[key] = 1; break;
            case MODE_COUNT: atomicAdd(&counts[key], 1u); break;
            case MODE_MEAN: slots[i] = atomicAdd(&counts[key], 1u); break;
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

#define SCAN_THREADS 512
#define SCAN_WARPS (SCAN_THREADS / 32)
#define SCAN_VECTORS 8                        // 16-byte words per thread
#define SCAN_WARP_ITEMS (32 * 4 * SCAN_VECTORS)  // consecutive counts per warp
#define SCAN_TILE (SCAN_WARPS * SCAN_WARP_ITEMS)
#define FULL_MASK 0xFFFFFFFFu

// A tile's word in the scan's status array: the flag in the high half, the
// value in the low half, published together by one 64-bit store.
#define TILE_AGGREGATE (1ull << 32)
#define TILE_INCLUSIVE (2ull << 32)

__device__ __forceinline__ uint32_t warp_inclusive_scan(uint32_t value, int lane) {
    for (int d = 1; d < 32; d <<= 1) {
        const uint32_t y = __shfl_up_sync(FULL_MASK, value, d);
        if (lane >= d) value += y;
    }
    return value;
}

__device__ __forceinline__ uint32_t warp_sum(uint32_t value) {
    for (int d = 16; d > 0; d >>= 1) value += __shfl_xor_sync(FULL_MASK, value, d);
    return value;
}

// Exclusive scan of the counts into starts (voxels + 1 entries, the last the
// number of points inside) in one pass, with
// decoupled look-back: a block takes the next tile of SCAN_TILE counts (in
// the order blocks start, so a block only waits on blocks already running);
// each warp scans SCAN_WARP_ITEMS consecutive counts loaded and stored in
// coalesced 16-byte words (SCAN_VECTORS rounds of 32 lanes); the block adds
// its warps' totals and publishes the tile's; its first warp sums the
// totals of the tiles before it, 32 at a time, back to the nearest tile
// that has published its inclusive prefix. status: word 0 counts the tiles
// taken, word 1 + t is tile t's; all zero before the launch (voxel_scatter
// clears them).
extern "C" __global__ void __launch_bounds__(SCAN_THREADS)
    voxel_scan(const uint32_t* __restrict__ counts, uint32_t* starts, unsigned long long* status, uint64_t voxels) {
    __shared__ uint32_t tile_shared, exclusive_shared;
    __shared__ uint32_t warp_offsets[SCAN_WARPS];
    if (threadIdx.x == 0) tile_shared = (uint32_t)atomicAdd(&status[0], 1ull);
    __syncthreads();
    const long long tile = tile_shared;
    unsigned long long* tiles = status + 1;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const uint64_t warp_first = (uint64_t)tile * SCAN_TILE + (uint64_t)warp * SCAN_WARP_ITEMS;
    uint4 items[SCAN_VECTORS];
#pragma unroll
    for (int k = 0; k < SCAN_VECTORS; k++) {
        const uint64_t i = warp_first + (uint64_t)(k * 32 + lane) * 4;
        uint4 q;
        if (i + 4 <= voxels) {
            q = *(const uint4*)(counts + i);
        } else {
            q.x = i < voxels ? counts[i] : 0;
            q.y = i + 1 < voxels ? counts[i + 1] : 0;
            q.z = i + 2 < voxels ? counts[i + 2] : 0;
            q.w = i + 3 < voxels ? counts[i + 3] : 0;
        }
        items[k] = q;
    }
    // Exclusive prefixes inside the warp's run, word by word.
    uint32_t carry = 0;
#pragma unroll
    for (int k = 0; k < SCAN_VECTORS; k++) {
        const uint4 q = items[k];
        const uint32_t sum = q.x + q.y + q.z + q.w;
        const uint32_t inclusive = warp_inclusive_scan(sum, lane);
        const uint32_t before = carry + inclusive - sum;
        items[k] = make_uint4(before, before + q.x, before + q.x + q.y, before + q.x + q.y + q.z);
        carry += __shfl_sync(FULL_MASK, inclusive, 31);
    }
    if (lane == 0) warp_offsets[warp] = carry;
    __syncthreads();
    if (warp == 0) {
        const uint32_t total = lane < SCAN_WARPS ? warp_offsets[lane] : 0;
        const uint32_t inclusive = warp_inclusive_scan(total, lane);
        const uint32_t tile_total = __shfl_sync(FULL_MASK, inclusive, 31);
        if (lane < SCAN_WARPS) warp_offsets[lane] = inclusive - total;
        uint32_t exclusive = 0;
        if (tile == 0) {
            if (lane == 0) atomicExch(&tiles[0], TILE_INCLUSIVE | tile_total);
        } else {
            if (lane == 0) atomicExch(&tiles[tile], TILE_AGGREGATE | tile_total);
            for (long long last = tile - 1;; last -= 32) {
                const long long t = last - lane;
                unsigned long long word;
                do {
                    word = t >= 0 ? *(volatile unsigned long long*)&tiles[t] : TILE_INCLUSIVE;
                } while (__any_sync(FULL_MASK, (word >> 32) == 0));
                const unsigned inclusive_tiles = __ballot_sync(FULL_MASK, (word >> 32) == 2);
                // Up to and including the nearest inclusive prefix.
                const int nearest = inclusive_tiles ? __ffs(inclusive_tiles) - 1 : 31;
                exclusive += warp_sum(lane <= nearest ? (uint32_t)word : 0);
                if (inclusive_tiles) break;
            }
            if (lane == 0) atomicExch(&tiles[tile], TILE_INCLUSIVE | (exclusive + tile_total));
        }
        if (lane == 0) exclusive_shared = exclusive;
    }
    __syncthreads();
    const uint32_t offset = exclusive_shared + warp_offsets[warp];
#pragma unroll
    for (int k = 0; k < SCAN_VECTORS; k++) {
        const uint64_t i = warp_first + (uint64_t)(k * 32 + lane) * 4;
        const uint4 q = make_uint4(offset + items[k].x, offset + items[k].y, offset + items[k].z, offset + items[k].w);
        if (i + 4 <= voxels + 1) {
            *(uint4*)(starts + i) = q;
        } else {
            if (i <= voxels) starts[i] = q.x;
            if (i + 1 <= voxels) starts[i + 1] = q.y;
            if (i + 2 <= voxels) starts[i + 2] = q.z;
            if (i + 3 <= voxels) starts[i + 3] = q.w;
        }
    }
}

// Each point's index into its voxel's segment, at the slot its scatter
// atomic returned (so the order inside a segment varies from run to run).
extern "C" __global__ void voxel_place(PointKeys keys, const uint32_t* __restrict__ slots,
                                       const uint32_t* __restrict__ starts, uint32_t* order, uint64_t n) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const uint64_t key = keys.load(i);
        if (key != OUTSIDE) order[starts[key] + slots[i]] = (uint32_t)i;
    }
}

#define LIGHT_POINTS 16
#define SHARED_POINTS 8192
#define GROUP 4

// Where a voxel's points are: point k (in slot order) of voxel v.
struct VoxelPoints {
    const uint32_t* __restrict__ starts;
    const uint32_t* __restrict__ order;

    __device__ __forceinline__ uint32_t point(uint64_t v, uint32_t k) const { return order[starts[v] + k]; }
};

// The mean of voxel v from its points in ascending order (`sorted`, length
// count), feature f: summed in f64 in that order, divided in f64.
__device__ __forceinline__ float mean_of(const float* __restrict__ features, uint64_t feature_len, uint64_t f,
                                         const uint32_t* sorted, uint32_t count) {
    double sum = 0.0;
    for (uint32_t j = 0; j < count; j++) sum = __dadd_rn(sum, (double)features[(uint64_t)sorted[j] * feature_len + f]);
    return __double2float_rn(__ddiv_rn(sum, (double)count));
}

// The voxel's point indices in ascending order (insertion sort; count at
// most LIGHT_POINTS).
__device__ __forceinline__ void sort_points(const VoxelPoints& points, uint64_t v, uint32_t count, uint32_t* sorted) {
    for (uint32_t j = 0; j < count; j++) {
        const uint32_t value = points.point(v, j);
        uint32_t k = j;
        while (k > 0 && sorted[k - 1] > value) {
            sorted[k] = sorted[k - 1];
            k--;
        }
        sorted[k] = value;
    }
}

// The mean of a voxel of one or two points: with two, (0 + a) + b equals
// (0 + b) + a in IEEE arithmetic (0 + x is x but for -0, which gives +0
// either way), so the order the atomics gave them does not matter.
// Dividing by 1 or 2 is exact, so it is a multiplication (the same bits).
__device__ __forceinline__ float mean_of_one_or_two(float a, float b, uint32_t count) {
    double sum = __dadd_rn(0.0, (double)a);
    if (count == 2) sum = __dadd_rn(sum, (double)b);
    return __double2float_rn(__dmul_rn(sum, count == 2 ? 0.5 : 1.0));
}

__device__ __forceinline__ void order_pair(uint32_t& a, uint32_t& b) {
    const uint32_t low = min(a, b);
    b = max(a, b);
    a = low;
}

// Per voxel, any F: zeros when empty; up to LIGHT_POINTS points sorted and
// summed by the voxel's thread; heavier voxels are listed for
// voxel_mean_heavy.
extern "C" __global__ void voxel_mean(const float* __restrict__ features, const uint32_t* __restrict__ counts,
                                      VoxelPoints points, float* mean, uint64_t voxels, uint64_t feature_len,
                                      uint64_t* heavy, uint32_t* heavy_count) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t v = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; v < voxels; v += stride) {
        const uint32_t count = counts[v];
        float* out = mean + v * feature_len;
        if (count == 0) {
            for (uint64_t f = 0; f < feature_len; f++) out[f] = 0.0f;
        } else if (count <= 2) {
            const float* a = features + (uint64_t)points.point(v, 0) * feature_len;
            const float* b = features + (uint64_t)points.point(v, count - 1) * feature_len;
            for (uint64_t f = 0; f < feature_len; f++) out[f] = mean_of_one_or_two(a[f], b[f], count);
        } else if (count > LIGHT_POINTS) {
            heavy[atomicAdd(heavy_count, 1u)] = v;
        } else {
            uint32_t sorted[LIGHT_POINTS];
            sort_points(points, v, count, sorted);
            for (uint64_t f = 0; f < feature_len; f++) out[f] = mean_of(features, feature_len, f, sorted, count);
        }
    }
}

// A point's F features, or zeros when it does not exist (a predicated load:
// the loads of a group's points are issued together).
template <int F>
__device__ __forceinline__ void load_point(const float* __restrict__ features, uint32_t point, bool exists,
                                           float (&x)[F]) {
    if constexpr (F == 4) {
        // The caller checked that features is 16-byte aligned.
        const float4 q = exists ? *(const float4*)(features + (uint64_t)point * 4) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        x[0] = q.x;
        x[1] = q.y;
        x[2] = q.z;
        x[3] = q.w;
    } else {
#pragma unroll
        for (int f = 0; f < F; f++) x[f] = exists ? features[(uint64_t)point * F + f] : 0.0f;
    }
}

// Per GROUP consecutive voxels, F features known at compile time: the
// group's starts in one 16-byte load (the counts are their differences), the
// first two points of every voxel and their features loaded before any is
// used, the GROUP * F means written as F
// 16-byte stores. Voxels of one or two points (nearly all occupied voxels of
// a sparse cloud) need nothing more; three or four are sorted by a network
// in registers and up to LIGHT_POINTS by the thread, after the stores;
// heavier voxels are listed for voxel_mean_heavy.
template <int F>
__device__ __forceinline__ void voxel_mean_grouped(const float* __restrict__ features, const VoxelPoints& points,
                                                   float* mean, uint64_t voxels, uint64_t* heavy,
                                                   uint32_t* heavy_count) {
    const uint64_t groups = (voxels + GROUP - 1) / GROUP;
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t g = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; g < groups; g += stride) {
        const uint64_t v0 = g * GROUP;
        const bool whole = v0 + GROUP <= voxels;
        uint32_t start[GROUP + 1];
        if (whole) {
            const uint4 q = *(const uint4*)(points.starts + v0);  // v0 is a multiple of 4
            start[0] = q.x;
            start[1] = q.y;
            start[2] = q.z;
            start[3] = q.w;
            start[4] = points.starts[v0 + 4];  // starts has voxels + 1 entries
        } else {
#pragma unroll
            for (int j = 0; j <= GROUP; j++) start[j] = v0 + j <= voxels ? points.starts[v0 + j] : start[j - 1];
        }
        uint32_t count[GROUP], first[GROUP], second[GROUP];
#pragma unroll
        for (int j = 0; j < GROUP; j++) {
            count[j] = start[j + 1] - start[j];
            first[j] = count[j] >= 1 && count[j] <= 2 ? points.order[start[j]] : 0;
            second[j] = count[j] == 2 ? points.order[start[j] + 1] : 0;
        }
        float a[GROUP][F], b[GROUP][F];
#pragma unroll
        for (int j = 0; j < GROUP; j++) {
            load_point<F>(features, first[j], count[j] >= 1 && count[j] <= 2, a[j]);
            load_point<F>(features, second[j], count[j] == 2, b[j]);
        }
        float out[GROUP * F];
#pragma unroll
        for (int j = 0; j < GROUP; j++)
#pragma unroll
            for (int f = 0; f < F; f++)
                out[j * F + f] = count[j] == 0 || count[j] > 2 ? 0.0f : mean_of_one_or_two(a[j][f], b[j][f], count[j]);
        float* out_group = mean + v0 * F;
        if (whole) {
#pragma unroll
            for (int q = 0; q < F; q++)  // GROUP * F floats: F 16-byte words
                ((float4*)out_group)[q] = make_float4(out[4 * q], out[4 * q + 1], out[4 * q + 2], out[4 * q + 3]);
        } else {
#pragma unroll
            for (int j = 0; j < GROUP; j++)
                if (v0 + j < voxels)
#pragma unroll
                    for (int f = 0; f < F; f++) out_group[j * F + f] = out[j * F + f];
        }
        unsigned to_sort = 0;  // bit j: voxel j has 3 to LIGHT_POINTS points
#pragma unroll
        for (int j = 0; j < GROUP; j++) {
            if (count[j] > LIGHT_POINTS) heavy[atomicAdd(heavy_count, 1u)] = v0 + j;
            else if (count[j] > 2) to_sort |= 1u << j;
        }
        while (to_sort) {
            const int j = __ffs(to_sort) - 1;
            to_sort &= to_sort - 1;
            // Selected rather than indexed by the runtime j, which would put
            // the arrays in local memory for every group.
            uint32_t voxel_start = start[0], voxel_count = count[0];
#pragma unroll
            for (int k = 1; k < GROUP; k++)
                if (j == k) voxel_start = start[k], voxel_count = count[k];
            const uint64_t v = v0 + j;
            float* out_voxel = out_group + j * F;
            if (voxel_count <= 4) {
                // Three or four points: loaded together, sorted by a network
                // in registers, their features loaded together.
                const uint32_t* in_order = points.order + voxel_start;
                uint32_t p[4] = {in_order[0], in_order[1], in_order[2], voxel_count == 4 ? in_order[3] : 0xFFFFFFFFu};
                order_pair(p[0], p[1]);
                order_pair(p[2], p[3]);
                order_pair(p[0], p[2]);
                order_pair(p[1], p[3]);
                order_pair(p[1], p[2]);
                float x[4][F];
#pragma unroll
                for (int k = 0; k < 4; k++) load_point<F>(features, p[k], k < voxel_count, x[k]);
#pragma unroll
                for (int f = 0; f < F; f++) {
                    double sum = 0.0;
#pragma unroll
                    for (int k = 0; k < 4; k++)
                        if (k < voxel_count) sum = __dadd_rn(sum, (double)x[k][f]);
                    out_voxel[f] = __double2float_rn(__ddiv_rn(sum, (double)voxel_count));
                }
            } else {
                uint32_t sorted[LIGHT_POINTS];
                sort_points(points, v, voxel_count, sorted);
                for (int f = 0; f < F; f++) out_voxel[f] = mean_of(features, F, f, sorted, voxel_count);
            }
        }
    }
}

#define VOXEL_MEAN_GROUPED(F)                                                                                         \
    extern "C" __global__ void voxel_mean_f##F(const float* __restrict__ features, VoxelPoints points, float* mean, \
                                               uint64_t voxels, uint64_t* heavy, uint32_t* heavy_count) {            \
        voxel_mean_grouped<F>(features, points, mean, voxels, heavy, heavy_count);                                   \
    }
VOXEL_MEAN_GROUPED(1)
VOXEL_MEAN_GROUPED(2)
VOXEL_MEAN_GROUPED(3)
VOXEL_MEAN_GROUPED(4)

// Voxels with more than LIGHT_POINTS points, one block each (block-stride
// over the list; the list's length is read on the device, so the host never
// waits for it): a bitonic sort of the segment in shared memory up to
// SHARED_POINTS points, else a walk over all points in order collecting the
// voxel's. Dynamic shared memory: SHARED_POINTS words.
extern "C" __global__ void voxel_mean_heavy(const float* __restrict__ features, PointKeys keys,
                                            const uint32_t* __restrict__ counts, VoxelPoints voxel_points,
                                            float* mean, uint64_t points,
                                            uint64_t feature_len, const uint64_t* __restrict__ heavy,
                                            const uint32_t* __restrict__ heavy_count) {
    extern __shared__ uint32_t sorted[];
    __shared__ uint32_t warp_counts[32];
    const uint32_t listed = *heavy_count;
    for (uint32_t h = blockIdx.x; h < listed; h += gridDim.x) {
        const uint64_t v = heavy[h];
        const uint32_t count = counts[v];
        float* out = mean + v * feature_len;
        if (count <= SHARED_POINTS) {
            uint32_t size = 1;
            while (size < count) size <<= 1;
            for (uint32_t i = threadIdx.x; i < size; i += blockDim.x) sorted[i] = i < count ? voxel_points.point(v, i) : 0xFFFFFFFFu;
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
                    const bool mine = i < points && keys.load(i) == v;
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
