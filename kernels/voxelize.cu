// Voxelization kernels. Every mode is deterministic and equal to the CPU
// reference (crates/robocache-cpu/src/voxelize.rs):
// - occupancy, count and the dropped-point count use integer atomics, whose
//   result does not depend on their order;
// - max uses atomicMax on an order-preserving integer encoding of the float
//   (NaN ignored, +0 above -0), also order-independent;
// - mean reproduces the reference's order, so it equals the CPU bit for bit.
//   Per voxel a 64-bit tally counts its points (low half) and sums their
//   indices modulo 2^32 (high half), both by one atomic whose return value
//   is the point's slot in its voxel (its rank in the order the atomics
//   ran). The point of slot 0 stores nothing: it is the sum less the
//   others. Slots 1 to SLOTS - 1 are stored in slot arrays indexed by
//   voxel, the rest appended to an overflow list. Per voxel the means
//   kernel then sums in f64 in ascending point order: one or two points
//   need no sort (IEEE addition commutes), three or four are sorted by a
//   network in registers. Heavier voxels get
//   a segment for their overflow points (warp-aggregated atomics), the
//   overflow is placed into the segments, and they are sorted by a warp (up
//   to WARP_POINTS points, in registers), a block (up to SHARED_POINTS, a
//   bitonic sort in shared memory) or walked by a block in point order.
//   The tallies stay in L2 from their clearing (voxel_fill, evict last)
//   through the scatter's atomics to the means kernel, which drops them
//   from L2 without a write-back once read (docs/architecture.md).
// The voxel of a point is floor((p - origin) / size) in f32 with IEEE
// division, inside when 0 <= v < dim on every axis.

#include <stdint.h>

// The codes and argument structs shared with Rust (generated from
// crates/robocache-kernels/src/abi.rs): VoxelMode, IndexType, VoxelArgs,
// SlotPoints, MeanLists.
#include "abi.h"

#define OUTSIDE 0xFFFFFFFFFFFFFFFFull
#define FULL_MASK 0xFFFFFFFFu

// L2 eviction policies (sm_80+): what a kernel reads once goes first, what
// the next kernel needs stays longest.
__device__ __forceinline__ uint64_t evict_first_policy() {
    uint64_t policy;
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    return policy;
}

__device__ __forceinline__ uint64_t evict_last_policy() {
    uint64_t policy;
    asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
    return policy;
}

// A float read once (the points' coordinates): first out of L2.
__device__ __forceinline__ float load_once(const float* address) {
    float value;
    asm("ld.global.nc.L2::cache_hint.f32 %0, [%1], %2;"
        : "=f"(value)
        : "l"(address), "l"(evict_first_policy()));
    return value;
}

// The cloud of point i as a signed 64-bit value (-1 for an unsigned value
// that does not fit, which the check reports as out of range).
__device__ __forceinline__ long long cloud_of(const VoxelArgs& a, uint64_t i) {
    switch (a.cloud_type) {
        case INDEX_U32: return ((const uint32_t*)a.cloud_index)[i];
        case INDEX_U64: {
            uint64_t v = ((const uint64_t*)a.cloud_index)[i];
            return v > 0x7FFFFFFFFFFFFFFFull ? -1 : (long long)v;
        }
        case INDEX_I32: return ((const int32_t*)a.cloud_index)[i];
        case INDEX_I64: return ((const int64_t*)a.cloud_index)[i];
        default: return 0;
    }
}

// The voxel of point i (OUTSIDE when dropped); `once` when the points are
// read once, as in the scatter (first out of L2), not walked again and again.
__device__ __forceinline__ uint64_t voxel_key(const float* __restrict__ points, const VoxelArgs& a, uint64_t i,
                                              bool once) {
    uint64_t linear = 0;
    for (int axis = 0; axis < 3; axis++) {
        const float* p = points + 3 * i + axis;
        const float v = floorf(__fdiv_rn(__fsub_rn(once ? load_once(p) : *p, a.origin[axis]), a.size[axis]));
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


// ---- The mean's scratch -----------------------------------------------------

#define SLOTS 4            // points of a voxel found without its overflow: the tally's and the slot arrays'
#define WARP_POINTS 32     // heavier voxels up to this many points: a warp each
#define SHARED_POINTS 8192 // up to this many: a block, sorting in shared memory

// Point k of voxel v (in slot order), 1 <= k < SLOTS: SLOTS - 1 arrays of
// `stride` words (the voxel count rounded up to 4, so each array starts on
// a 16-byte word (struct SlotPoints).
__device__ __forceinline__ uint32_t slot_point(const SlotPoints& slots, uint64_t v, uint32_t k) {
    return slots.words[(k - 1) * slots.stride + v];
}
__device__ __forceinline__ void set_slot_point(const SlotPoints& slots, uint64_t v, uint32_t k, uint32_t point) {
    slots.words[(k - 1) * slots.stride + v] = point;
}

// A voxel's tally: its point count and the sum of its points' indices
// modulo 2^32 (a carry out of the count cannot happen: n < 2^32).
__device__ __forceinline__ uint32_t tally_count(uint64_t tally) { return (uint32_t)tally; }
__device__ __forceinline__ uint32_t tally_index_sum(uint64_t tally) { return (uint32_t)(tally >> 32); }

// A point past its voxel's SLOTS, appended by the scatter.
struct OverflowPoint {
    uint64_t voxel;
    uint32_t slot;
    uint32_t point;
};

// A voxel of more than SLOTS points, listed by the means kernel: its points
// past SLOTS are segments[segment .. segment + count - SLOTS).
struct HeavyVoxel {
    uint64_t voxel;
    uint32_t count;
    uint32_t segment;
    uint32_t index_sum;  // of its tally
    uint32_t unused;
};

// Indices into MeanLists::counters.
#define OVERFLOW_POINTS 0 // entries of `overflow`
#define WARP_VOXELS 1     // entries of `warp_voxels`
#define BLOCK_VOXELS 2    // entries of `block_voxels`
#define SEGMENT_WORDS 3   // words of `segments` handed out
#define DROPPED 4         // points outside the grid (a u64: words 4 and 5)

// The mean's lists (struct MeanLists) are all sized for the worst case;
// `counters` is zero before the scatter.

// Per point: its voxel, the dropped count, and the mode's accumulation. For
// the mean: the voxel's tally, and the point stored in its voxel's slot
// array or appended to the overflow list by the slot the tally returned.
extern "C" __global__ void voxel_scatter(const float* __restrict__ points, const float* __restrict__ features,
                                         void* grid, uint32_t* counts, unsigned long long* tallies, SlotPoints slots,
                                         MeanLists lists, unsigned long long* dropped, VoxelArgs a) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.points; i += stride) {
        const uint64_t key = voxel_key(points, a, i, true);
        if (key == OUTSIDE) {
            atomicAdd(dropped, 1ull);
            continue;
        }
        switch (a.mode) {
            case MODE_OCCUPANCY: ((uint8_t*)grid)[key] = 1; break;
            case MODE_COUNT: atomicAdd(&counts[key], 1u); break;
            case MODE_MEAN: {
                // The tallies stay in L2 for the means kernel (evict last).
                unsigned long long tally;
                asm volatile("atom.global.add.L2::cache_hint.u64 %0, [%1], %2, %3;"
                             : "=l"(tally)
                             : "l"(tallies + key), "l"(1ull + ((unsigned long long)i << 32)), "l"(evict_last_policy())
                             : "memory");
                const uint32_t slot = tally_count(tally);
                if (slot == 0) {
                } else if (slot < SLOTS) set_slot_point(slots, key, slot, (uint32_t)i);
                else lists.overflow[atomicAdd(&lists.counters[OVERFLOW_POINTS], 1u)] = {key, slot, (uint32_t)i};
                break;
            }
            default:
                for (uint64_t f = 0; f < a.feature_len; f++) {
                    const float v = features[i * a.feature_len + f];
                    if (!isnan(v)) atomicMax(&((unsigned*)grid)[key * a.feature_len + f], encode_max(v));
                }
        }
    }
}


// Fills n words (from a 16-byte boundary) with value, kept in L2 for the
// atomics that follow (evict last): the max grid's encoding of -inf, the
// mean's zero tallies and counters.
extern "C" __global__ void voxel_fill(unsigned* words, unsigned value, uint64_t n) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    const uint64_t policy = evict_last_policy();
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n / 4; i += stride)
        asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1, %1, %1, %1}, %2;" ::"l"(words + 4 * i), "r"(value),
                     "l"(policy)
                     : "memory");
    const uint64_t tail = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x + n / 4 * 4;
    if (tail < n) words[tail] = value;
}

// Decodes the max grid in place.
extern "C" __global__ void voxel_max_decode(unsigned* words, uint64_t n) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        words[i] = __float_as_uint(decode_max(words[i]));
    }
}

// ---- Mean: per-voxel sums ---------------------------------------------------

#define GROUP 4  // voxels per thread of the means kernels for F = 1 to 4

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

// The mean of `count` points in ascending order (`sorted`), feature f:
// summed in f64 in that order, divided in f64.
__device__ __forceinline__ float mean_of(const float* __restrict__ features, uint64_t feature_len, uint64_t f,
                                         const uint32_t* sorted, uint32_t count) {
    double sum = 0.0;
    for (uint32_t j = 0; j < count; j++) sum = __dadd_rn(sum, (double)features[(uint64_t)sorted[j] * feature_len + f]);
    return __double2float_rn(__ddiv_rn(sum, (double)count));
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

// Four point indices in ascending order (a network of five
// compare-exchanges in registers).
__device__ __forceinline__ void sort_four(uint32_t (&p)[4]) {
    order_pair(p[0], p[1]);
    order_pair(p[2], p[3]);
    order_pair(p[0], p[2]);
    order_pair(p[1], p[3]);
    order_pair(p[1], p[2]);
}

// The points of a voxel of three or four, loaded together, the first found
// from the tally's index sum, in ascending order (with three, the fourth is
// all ones and stays last).
__device__ __forceinline__ void sorted_slots(const SlotPoints& slots, uint64_t v, uint32_t count, uint32_t index_sum,
                                             uint32_t (&p)[4]) {
    p[1] = slot_point(slots, v, 1);
    p[2] = slot_point(slots, v, 2);
    p[3] = count == 4 ? slot_point(slots, v, 3) : 0;
    p[0] = index_sum - p[1] - p[2] - p[3];
    if (count == 3) p[3] = 0xFFFFFFFFu;
    sort_four(p);
}

// Lists the lanes' voxels of more than SLOTS points (a lane without a voxel
// passes count 0) and hands each a segment for its points past SLOTS. Every
// lane of the warp calls it; one atomic per counter per warp, so a cloud of
// many heavy voxels does not queue on three addresses.
__device__ __forceinline__ void list_heavy(const MeanLists& lists, uint64_t v, uint32_t count, uint32_t index_sum,
                                           int lane) {
    const bool heavy = count > SLOTS;
    const unsigned heavy_lanes = __ballot_sync(FULL_MASK, heavy);
    if (heavy_lanes == 0) return;
    const unsigned to_warps = __ballot_sync(FULL_MASK, heavy && count <= WARP_POINTS);
    const unsigned to_blocks = heavy_lanes & ~to_warps;
    const uint32_t extra = heavy ? count - SLOTS : 0;
    const uint32_t inclusive = warp_inclusive_scan(extra, lane);
    const uint32_t total = __shfl_sync(FULL_MASK, inclusive, 31);
    uint32_t segments = 0, warp_first = 0, block_first = 0;
    if (lane == 0) {
        segments = atomicAdd(&lists.counters[SEGMENT_WORDS], total);
        if (to_warps) warp_first = atomicAdd(&lists.counters[WARP_VOXELS], (uint32_t)__popc(to_warps));
        if (to_blocks) block_first = atomicAdd(&lists.counters[BLOCK_VOXELS], (uint32_t)__popc(to_blocks));
    }
    segments = __shfl_sync(FULL_MASK, segments, 0);
    warp_first = __shfl_sync(FULL_MASK, warp_first, 0);
    block_first = __shfl_sync(FULL_MASK, block_first, 0);
    if (heavy) {
        const uint32_t segment = segments + inclusive - extra;
        lists.voxel_segments[v] = segment;
        const unsigned before = (1u << lane) - 1;
        const HeavyVoxel entry = {v, count, segment, index_sum, 0};
        if (count <= WARP_POINTS) lists.warp_voxels[warp_first + __popc(to_warps & before)] = entry;
        else lists.block_voxels[block_first + __popc(to_blocks & before)] = entry;
    }
}

// Per voxel, any F: its count from its tally, zeros when empty, the mean
// of up to SLOTS points; heavier voxels are listed for voxel_mean_heavy.
// The loop runs while any lane of the warp has a voxel (list_heavy takes
// the warp).
extern "C" __global__ void voxel_mean(const float* __restrict__ features,
                                      const unsigned long long* __restrict__ tallies, uint32_t* counts,
                                      SlotPoints slots, float* mean, uint64_t voxels, uint64_t feature_len,
                                      MeanLists lists) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    const int lane = threadIdx.x & 31;
    for (uint64_t v = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; v - lane < voxels; v += stride) {
        const uint64_t tally = v < voxels ? tallies[v] : 0;
        const uint32_t count = tally_count(tally), index_sum = tally_index_sum(tally);
        float* out = mean + v * feature_len;
        if (v < voxels) counts[v] = count;
        if (v >= voxels) {
        } else if (count == 0) {
            for (uint64_t f = 0; f < feature_len; f++) out[f] = 0.0f;
        } else if (count <= 2) {
            const uint32_t second = count == 2 ? slot_point(slots, v, 1) : 0, first = index_sum - second;
            const float* a = features + (uint64_t)first * feature_len;
            const float* b = features + (uint64_t)(count == 2 ? second : first) * feature_len;
            for (uint64_t f = 0; f < feature_len; f++) out[f] = mean_of_one_or_two(a[f], b[f], count);
        } else if (count <= SLOTS) {
            uint32_t p[4];
            sorted_slots(slots, v, count, index_sum, p);
            for (uint64_t f = 0; f < feature_len; f++) {
                double sum = 0.0;
                for (uint32_t k = 0; k < count; k++)
                    sum = __dadd_rn(sum, (double)features[(uint64_t)p[k] * feature_len + f]);
                out[f] = __double2float_rn(__ddiv_rn(sum, (double)count));
            }
        }
        list_heavy(lists, v, count, index_sum, lane);
    }
}

// Asynchronous copies of a point's features into shared memory
// (`cp.async`): the loads of a group's points are in flight together
// without holding registers, so more voxels fit on a multiprocessor.
__device__ __forceinline__ void copy_async_16(void* shared, const void* global) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((unsigned)__cvta_generic_to_shared(shared)),
                 "l"(global)
                 : "memory");
}

__device__ __forceinline__ void copy_async_4(void* shared, const void* global) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"((unsigned)__cvta_generic_to_shared(shared)),
                 "l"(global)
                 : "memory");
}

// Waits for this thread's asynchronous copies; their data is then visible
// to it (each lane reads only its own points).
__device__ __forceinline__ void wait_copies() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// A warp's points in shared memory: point k of every lane (k < 2 * GROUP),
// feature after feature, lane after lane, so the lanes' accesses fall on
// consecutive words (no bank conflicts).
template <int F>
struct WarpPoints {
    float4* words;  // 2 * GROUP * F * 32 floats

    // Copies `point`'s features into slot k of this lane, or zeros when it
    // does not exist.
    __device__ __forceinline__ void copy(const float* __restrict__ features, uint32_t point, bool exists, int k,
                                         int lane) const {
        if constexpr (F == 4) {
            // The caller checked that features is 16-byte aligned.
            float4* word = words + k * 32 + lane;
            if (exists) copy_async_16(word, features + (uint64_t)point * 4);
            else *word = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        } else {
            float* floats = (float*)words + k * F * 32 + lane;
#pragma unroll
            for (int f = 0; f < F; f++) {
                if (exists) copy_async_4(floats + f * 32, features + (uint64_t)point * F + f);
                else floats[f * 32] = 0.0f;
            }
        }
    }

    __device__ __forceinline__ float get(int k, int f, int lane) const {
        if constexpr (F == 4) {
            const float4 q = words[k * 32 + lane];
            return f == 0 ? q.x : f == 1 ? q.y : f == 2 ? q.z : q.w;
        } else {
            return ((const float*)words)[(k * F + f) * 32 + lane];
        }
    }
};

// Per GROUP consecutive voxels, F features known at compile time, in three
// dependent rounds of loads:
// 1. the group's tallies and its slot-1 points in 16-byte loads (the slot
//    loads whether or not the voxels have two points, so they need not
//    wait for the tallies), prefetched into L2 one group ahead;
// 2. the features of every voxel of one or two points (nearly all occupied
//    voxels of a sparse cloud), copied into shared memory (WarpPoints:
//    asynchronous copies hold no registers, so four blocks fit on a
//    multiprocessor), and the slot-2 and -3 points of voxels of three or
//    four;
// 3. the features of the voxels of three or four, one voxel at a time,
//    sorted by a network in registers, through the same shared memory.
// The means are staged in shared memory where the points were, then the
// counts and the warp's means are stored, the means as whole 512-byte runs
// (store_staged). Heavier voxels are listed for voxel_mean_heavy. The loop
// runs while any lane of the warp has a group (list_heavy and the staging
// take the warp).
#define MEAN_THREADS 256  // per block of the means kernels for F = 1 to 4

// A 16-byte word's place in a warp's staging buffer: its index with the
// low three bits XORed by the next three, so that both the stores of each
// thread's consecutive words and the loads of consecutive words by
// consecutive threads spread over the banks.
__device__ __forceinline__ int staged(int word) { return word ^ ((word >> 3) & 7); }

// Float `index` of a warp's GROUP * F * 32 means (lane after lane) into the
// staging buffer (`staging`: 32 * F words).
__device__ __forceinline__ float* staged_float(float4* staging, int index) {
    return (float*)(staging + staged(index >> 2)) + (index & 3);
}

// Stores a warp's staged means as 16-byte words, each global store
// instruction writing 512 contiguous bytes rather than 16 bytes every
// 16 * F. Every lane of the warp calls it, after a __syncwarp.
template <int F>
__device__ __forceinline__ void store_staged(float* warp_out, const float4* staging, int lane) {
#pragma unroll
    for (int q = 0; q < F; q++) __stcs((float4*)warp_out + q * 32 + lane, staging[staged(q * 32 + lane)]);
}

// Element j of a register array indexed by a value known only at run time
// (a chain of selects, so the array stays in registers).
__device__ __forceinline__ uint32_t pick(const uint32_t (&values)[GROUP], int j) {
    uint32_t value = values[0];
#pragma unroll
    for (int k = 1; k < GROUP; k++)
        if (j == k) value = values[k];
    return value;
}

template <int F>
__device__ __forceinline__ void voxel_mean_grouped(const float* __restrict__ features,
                                                   const unsigned long long* __restrict__ tallies, uint32_t* counts,
                                                   const SlotPoints& slots, float* mean, uint64_t voxels,
                                                   const MeanLists& lists) {
    // Per warp its points' features, then (aliased) its staged means.
    __shared__ float4 shared_words[MEAN_THREADS / 32][2 * GROUP * F * 32 / 4];
    const WarpPoints<F> warp_points = {shared_words[threadIdx.x >> 5]};
    const uint64_t groups = (voxels + GROUP - 1) / GROUP;
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    const int lane = threadIdx.x & 31;
    for (uint64_t g = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; g - lane < groups; g += stride) {
        const uint64_t v0 = g * GROUP;
        const bool whole = v0 + GROUP <= voxels;
        if (g + stride < groups) {
            // The next group's first round, into L2 while this one runs (the
            // grid is as many blocks as fit at once, so threads walk several).
            asm volatile("prefetch.global.L2 [%0];" ::"l"(tallies + (g + stride) * GROUP));
            asm volatile("prefetch.global.L2 [%0];" ::"l"(slots.words + (g + stride) * GROUP));
        }
        uint32_t count[GROUP], index_sum[GROUP], second[GROUP];
        if (whole) {
            // v0 is a multiple of 4, and so is the slot arrays' stride.
            const uint4 t01 = *(const uint4*)(tallies + v0);
            const uint4 t23 = *(const uint4*)(tallies + v0 + 2);
            const uint4 s = *(const uint4*)(slots.words + v0);  // slot 1
            count[0] = t01.x, count[1] = t01.z, count[2] = t23.x, count[3] = t23.z;
            index_sum[0] = t01.y, index_sum[1] = t01.w, index_sum[2] = t23.y, index_sum[3] = t23.w;
            second[0] = s.x, second[1] = s.y, second[2] = s.z, second[3] = s.w;
        } else {
#pragma unroll
            for (int j = 0; j < GROUP; j++) {
                // Zero past the end, and for a lane without a group.
                const uint64_t tally = v0 + j < voxels ? tallies[v0 + j] : 0;
                count[j] = tally_count(tally);
                index_sum[j] = tally_index_sum(tally);
                second[j] = count[j] >= 2 ? slot_point(slots, v0 + j, 1) : 0;
            }
        }
        // Points of the voxels of up to SLOTS points (0 where there is none).
        uint32_t third[GROUP], fourth[GROUP], first[GROUP];
#pragma unroll
        for (int j = 0; j < GROUP; j++) {
            const bool sorted = count[j] > 2 && count[j] <= SLOTS;
            second[j] = count[j] >= 2 ? second[j] : 0;
            third[j] = sorted ? slot_point(slots, v0 + j, 2) : 0;
            fourth[j] = sorted && count[j] == 4 ? slot_point(slots, v0 + j, 3) : 0;
            first[j] = index_sum[j] - second[j] - third[j] - fourth[j];
        }
#pragma unroll
        for (int j = 0; j < GROUP; j++) {
            warp_points.copy(features, first[j], count[j] >= 1 && count[j] <= 2, 2 * j, lane);
            warp_points.copy(features, second[j], count[j] == 2, 2 * j + 1, lane);
        }
        wait_copies();
        // The warp's tallies are in registers: their L2 lines are dropped
        // without a write-back (the next call clears them anew). A warp of
        // whole groups covers 32 * GROUP tallies, 8 lines of 128 bytes.
        if (__all_sync(FULL_MASK, whole) && lane < 8)
            asm volatile("discard.global.L2 [%0], 128;" ::"l"(tallies + (v0 - (uint64_t)lane * GROUP) + lane * 16)
                         : "memory");
        // Means of voxels of one or two points (zeros for the others), then
        // staged where the points were, once every lane has read its own.
        float out[GROUP * F];
#pragma unroll
        for (int j = 0; j < GROUP; j++)
#pragma unroll
            for (int f = 0; f < F; f++)
                out[j * F + f] = count[j] == 0 || count[j] > 2
                                     ? 0.0f
                                     : mean_of_one_or_two(warp_points.get(2 * j, f, lane),
                                                          warp_points.get(2 * j + 1, f, lane), count[j]);
        __syncwarp();
        float4* staging = warp_points.words;
#pragma unroll
        for (int q = 0; q < F; q++)
            staging[staged(lane * F + q)] = make_float4(out[4 * q], out[4 * q + 1], out[4 * q + 2], out[4 * q + 3]);
        // Voxels of three or four points, one at a time: their points
        // sorted by a network in registers, copied to the lane's slots
        // GROUP to GROUP + 3 (past the staged means), summed in order.
        unsigned sorted_voxels = 0;
#pragma unroll
        for (int j = 0; j < GROUP; j++)
            if (count[j] > 2 && count[j] <= SLOTS) sorted_voxels |= 1u << j;
        while (sorted_voxels != 0) {
            const int j = __ffs(sorted_voxels) - 1;
            sorted_voxels &= sorted_voxels - 1;
            const uint32_t n = pick(count, j);
            // With three, the fourth is all ones, so it sorts last.
            uint32_t p[4] = {pick(first, j), pick(second, j), pick(third, j), n == 4 ? pick(fourth, j) : 0xFFFFFFFFu};
            sort_four(p);
#pragma unroll
            for (int k = 0; k < 4; k++) warp_points.copy(features, p[k], k < n, GROUP + k, lane);
            wait_copies();
#pragma unroll
            for (int f = 0; f < F; f++) {
                double sum = 0.0;
#pragma unroll
                for (int k = 0; k < 4; k++)
                    if (k < n) sum = __dadd_rn(sum, (double)warp_points.get(GROUP + k, f, lane));
                *staged_float(staging, (lane * GROUP + j) * F + f) = __double2float_rn(__ddiv_rn(sum, (double)n));
            }
        }
        if (whole) {
            *(uint4*)(counts + v0) = make_uint4(count[0], count[1], count[2], count[3]);
        } else {
#pragma unroll
            for (int j = 0; j < GROUP; j++)
                if (v0 + j < voxels) counts[v0 + j] = count[j];
        }
        __syncwarp();
        if (__all_sync(FULL_MASK, whole)) {
            // The warp's GROUP * F * 32 floats are contiguous.
            store_staged<F>(mean + (v0 - (uint64_t)lane * GROUP) * F, staging, lane);
        } else {
            float* out_group = mean + v0 * F;
#pragma unroll
            for (int j = 0; j < GROUP; j++)
                if (v0 + j < voxels)
#pragma unroll
                    for (int f = 0; f < F; f++)
                        out_group[j * F + f] = *staged_float(staging, (lane * GROUP + j) * F + f);
        }
        // Every lane is done with the staged means before the next group's
        // points are copied over them.
        __syncwarp();
#pragma unroll
        for (int j = 0; j < GROUP; j++) list_heavy(lists, v0 + j, count[j], index_sum[j], lane);
    }
}

#define VOXEL_MEAN_GROUPED(F)                                                                                 \
    extern "C" __global__ void __launch_bounds__(MEAN_THREADS)                                                \
        voxel_mean_f##F(const float* __restrict__ features, const unsigned long long* __restrict__ tallies,   \
                        uint32_t* counts, SlotPoints slots, float* mean, uint64_t voxels, MeanLists lists) { \
        voxel_mean_grouped<F>(features, tallies, counts, slots, mean, voxels, lists);                         \
    }
VOXEL_MEAN_GROUPED(1)
VOXEL_MEAN_GROUPED(2)
VOXEL_MEAN_GROUPED(3)
VOXEL_MEAN_GROUPED(4)

// Each point past its voxel's SLOTS into the voxel's segment, at its slot
// (so the order inside a segment varies from run to run). The entry count
// is read on the device: a fixed grid walks the list.
extern "C" __global__ void voxel_place_overflow(MeanLists lists) {
    const uint64_t listed = lists.counters[OVERFLOW_POINTS];
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < listed; i += stride) {
        const OverflowPoint point = lists.overflow[i];
        lists.segments[lists.voxel_segments[point.voxel] + (point.slot - SLOTS)] = point.point;
    }
}

// Point k >= 1 of a heavy voxel in slot order: its slot arrays, then its
// segment (point 0 is its index sum less the others).
__device__ __forceinline__ uint32_t heavy_point(const SlotPoints& slots, const MeanLists& lists, const HeavyVoxel& voxel,
                                                uint32_t k) {
    return k < SLOTS ? slot_point(slots, voxel.voxel, k) : lists.segments[voxel.segment + (k - SLOTS)];
}

// The listed heavy voxels (the list lengths are read on the device, so the
// host never waits for them; a fixed grid walks the lists):
// - more than WARP_POINTS points: a block each, a bitonic sort in shared
//   memory up to SHARED_POINTS points, else a walk over all points in
//   order collecting the voxel's (their voxel computed again);
// - SLOTS + 1 to WARP_POINTS points: a warp each, a bitonic sort across
//   its lanes in registers, each lane loading its point's features and the
//   sum running in lane order through shuffles.
// Dynamic shared memory: SHARED_POINTS words.
extern "C" __global__ void voxel_mean_heavy(const float* __restrict__ features, SlotPoints slots, MeanLists lists,
                                            float* mean, const float* __restrict__ points, VoxelArgs a,
                                            unsigned long long* dropped) {
    // The scatter counted the dropped points with the lists (zeroed by the
    // same memset); the output is a word of its own.
    if (blockIdx.x == 0 && threadIdx.x == 0) *dropped = *(const unsigned long long*)(lists.counters + DROPPED);
    extern __shared__ uint32_t sorted[];
    __shared__ uint32_t warp_counts[32];
    __shared__ uint32_t others_sum;
    const uint64_t feature_len = a.feature_len;
    const uint32_t block_listed = lists.counters[BLOCK_VOXELS];
    for (uint32_t h = blockIdx.x; h < block_listed; h += gridDim.x) {
        const HeavyVoxel voxel = lists.block_voxels[h];
        const uint64_t v = voxel.voxel;
        const uint32_t count = voxel.count;
        float* out = mean + v * feature_len;
        if (count <= SHARED_POINTS) {
            uint32_t size = 1;
            while (size < count) size <<= 1;
            if (threadIdx.x == 0) others_sum = 0;
            __syncthreads();
            uint32_t mine = 0;  // modulo 2^32, like the index sum
            for (uint32_t i = threadIdx.x; i < size; i += blockDim.x) {
                const uint32_t point = i >= 1 && i < count ? heavy_point(slots, lists, voxel, i) : 0xFFFFFFFFu;
                if (i >= 1 && i < count) mine += point;
                sorted[i] = point;
            }
            atomicAdd(&others_sum, mine);
            __syncthreads();
            if (threadIdx.x == 0) sorted[0] = voxel.index_sum - others_sum;
            __syncthreads();
            for (uint32_t k = 2; k <= size; k <<= 1) {
                for (uint32_t j = k >> 1; j > 0; j >>= 1) {
                    for (uint32_t i = threadIdx.x; i < size; i += blockDim.x) {
                        const uint32_t partner = i ^ j;
                        if (partner > i) {
                            const uint32_t x = sorted[i], y = sorted[partner];
                            const bool ascending = (i & k) == 0;
                            if ((x > y) == ascending) {
                                sorted[i] = y;
                                sorted[partner] = x;
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
                for (uint64_t base = 0; base < a.points; base += blockDim.x) {
                    const uint64_t i = base + threadIdx.x;
                    const bool mine = i < a.points && voxel_key(points, a, i, false) == v;
                    const unsigned ballot = __ballot_sync(FULL_MASK, mine);
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
    const int lane = threadIdx.x & 31;
    const uint32_t warps = gridDim.x * (blockDim.x / 32);
    const uint32_t warp_listed = lists.counters[WARP_VOXELS];
    for (uint32_t h = blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5); h < warp_listed; h += warps) {
        const HeavyVoxel voxel = lists.warp_voxels[h];
        const bool exists = (uint32_t)lane < voxel.count;
        uint32_t p = lane >= 1 && exists ? heavy_point(slots, lists, voxel, lane) : 0;
        const uint32_t others = warp_sum(p);
        if (lane == 0) p = voxel.index_sum - others;
        if (!exists) p = 0xFFFFFFFFu;
#pragma unroll
        for (int k = 2; k <= 32; k <<= 1) {
#pragma unroll
            for (int j = k >> 1; j > 0; j >>= 1) {
                const uint32_t other = __shfl_xor_sync(FULL_MASK, p, j);
                const bool ascending = (lane & k) == 0;
                const bool lower = (lane & j) == 0;
                p = lower == ascending ? min(p, other) : max(p, other);
            }
        }
        float* out = mean + voxel.voxel * feature_len;
        // Four features' loads in flight at a time.
        for (uint64_t f0 = 0; f0 < feature_len; f0 += 4) {
            float x[4];
#pragma unroll
            for (int q = 0; q < 4; q++)
                x[q] = exists && f0 + q < feature_len ? features[(uint64_t)p * feature_len + f0 + q] : 0.0f;
#pragma unroll
            for (int q = 0; q < 4; q++) {
                double sum = 0.0;
                for (uint32_t j = 0; j < voxel.count; j++) sum = __dadd_rn(sum, (double)__shfl_sync(FULL_MASK, x[q], j));
                if (lane == 0 && f0 + q < feature_len) out[f0 + q] = __double2float_rn(__ddiv_rn(sum, (double)voxel.count));
            }
        }
    }
}

// ---- Checks ----------------------------------------------------------------

// The first point whose cloud index is out of range (atomic min of its index).
extern "C" __global__ void voxel_check_clouds(VoxelArgs a, unsigned long long* first_bad) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.points; i += stride) {
        const long long cloud = cloud_of(a, i);
        if (cloud < 0 || (uint64_t)cloud >= a.clouds) atomicMin(first_bad, (unsigned long long)i);
    }
}
