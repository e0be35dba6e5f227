// Resample kernels: a batch of rows [B, S, D] with their own sample times onto
// target times [B, T]. The arithmetic reproduces the CPU reference in
// crates/robocache-cpu bit for bit (docs/semantics.md): f64 search and
// weights, unfused f32 (or f64) lerp, f64 slerp. Every floating-point
// operation that must round like the reference is an explicit _rn intrinsic,
// and the PTX is built with --fmad=false as well.
//
// Three kernel shapes (the host picks; docs/architecture.md): a warp per one
// or four targets of a row (the lanes place the targets together, then split
// the channels, moving 16 bytes per lane per load and store wherever the rows
// are aligned, 8 or 4 where they are not, single elements at unaligned group
// edges), the same with slerp, and tiles (resident blocks that place the next
// tile of 32 targets, one thread per target, while they move the words of
// the current one). A warp places a target with a window of 32 sample times
// at the index an evenly spaced row predicts, else a 32-ary search
// (locate_many); a thread with the two samples around that index, else a
// galloping and binary search (locate_one).

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

// The codes, constants and argument structs shared with Rust (generated
// from crates/robocache-kernels/src/abi.rs): TimesMode, Method,
// BoundaryRule, IndexType, DTypeCode, Timeline, ResampleArgs, FusionStream,
// FusionArgs, ResidentEpisode, ResidentStream, AssembleArgs.
#include "abi.h"

__device__ __forceinline__ double time_at(const Timeline& t, uint64_t row, uint64_t i) {
    if (t.mode == TIMES_UNIFORM) return __dadd_rn(t.start, __ddiv_rn((double)i, t.hz));
    if (t.mode == TIMES_SHARED) return t.times[i];
    return t.times[row * t.len + i];
}

// Number of valid samples of a row, clamped into 1..=S so that bad lengths
// (rejected before launch unless trusted) can never index out of bounds.
__device__ __forceinline__ uint64_t row_length(const void* lengths, int type, uint64_t row, uint64_t samples) {
    long long n;
    switch (type) {
        case INDEX_U32: n = (long long)((const uint32_t*)lengths)[row]; break;
        case INDEX_U64: {
            uint64_t v = ((const uint64_t*)lengths)[row];
            n = v > samples ? (long long)samples : (long long)v;
            break;
        }
        case INDEX_I32: n = ((const int32_t*)lengths)[row]; break;
        case INDEX_I64: n = ((const int64_t*)lengths)[row]; break;
        default: return samples;
    }
    if (n < 1) return 1;
    if ((unsigned long long)n > samples) return samples;
    return (uint64_t)n;
}

// Where q falls: count = #{i < n : s_i <= q} (for sorted times the
// reference's partition point), found by the warp together; see locate.
struct Position {
    int region;  // -1 below, 0 inside, 1 above
    uint64_t index;
};

// The general search: count = #{i < n : s_i <= q} in [lo, hi], where every
// i < lo has s_i <= q and every i >= hi has s_i > q (for sorted times;
// unsorted trusted input still ends in [lo, hi]). Each round every lane tests
// one sample time and a ballot narrows the range 32-fold.
__device__ __forceinline__ uint64_t search(const Timeline& t, uint64_t row, double q, uint64_t lo, uint64_t hi) {
    const unsigned lane = threadIdx.x & 31;
    while (hi > lo) {
        const uint64_t span = hi - lo;
        if (span <= 32) {
            const bool le = lane < span && time_at(t, row, lo + lane) <= q;
            return lo + __popc(__ballot_sync(0xFFFFFFFFu, le));
        }
        const uint64_t stride = (span + 31) / 32;
        const uint64_t probe = lo + lane * stride;
        const bool le = probe < hi && time_at(t, row, probe) <= q;
        const uint64_t k = __popc(__ballot_sync(0xFFFFFFFFu, le));
        if (k == 0) return lo;  // s_lo > q
        const uint64_t next_hi = lo + k * stride;
        lo += (k - 1) * stride + 1;
        if (next_hi < hi) hi = next_hi;
    }
    return lo;
}

__device__ __forceinline__ Position position_of(const Timeline& t, uint64_t row, uint64_t n, double q, uint64_t count) {
    Position p;
    if (count == 0) { p.region = -1; p.index = 0; }
    else if (count == n && q > time_at(t, row, n - 1)) { p.region = 1; p.index = n - 1; }
    else { p.region = 0; p.index = count - 1; }
    return p;
}

// Places up to R targets of one row at once (`active` of them; the warp's 32
// lanes must all call). First, for every target, a window of 32 samples
// around the index it would have if the row were evenly spaced (from the
// row's first and last time): the R windows load together, so evenly or
// nearly evenly sampled rows take one round of loads for all R targets.
// A target outside its window falls back to the general search.
template <int R>
__device__ __forceinline__ void locate_many(const Timeline& t, uint64_t row, uint64_t n, const double (&q)[R],
                                            int active, Position (&p)[R]) {
    const unsigned lane = threadIdx.x & 31;
    const double first = time_at(t, row, 0), last = time_at(t, row, n - 1);
    uint64_t start[R];
    bool le[R];
#pragma unroll
    for (int r = 0; r < R; r++) {
        // Only a guess (the ballot checks it): single precision and a fast
        // division do, where an f64 division costs dozens of instructions.
        float guess = __fdividef((float)(q[r] - first), (float)(last - first)) * (float)(n - 1);
        guess = guess > 0.0f ? guess : 0.0f;  // also NaN
        const uint64_t center = guess < (float)n ? (uint64_t)guess : n - 1;
        start[r] = n <= 32 ? 0 : (center < 15 ? 0 : (center - 15 > n - 32 ? n - 32 : center - 15));
        const uint64_t probe = start[r] + lane;
        le[r] = r < active && probe < n && time_at(t, row, probe) <= q[r];
    }
#pragma unroll
    for (int r = 0; r < R; r++) {
        const uint64_t k = __popc(__ballot_sync(0xFFFFFFFFu, le[r]));
        const uint64_t end = start[r] + 32 < n ? start[r] + 32 : n;
        uint64_t count;
        if (r >= active) count = 0;
        else if (k == 0) count = search(t, row, q[r], 0, start[r]);            // s_start > q
        else if (start[r] + k < end || end == n) count = start[r] + k;         // exact
        else count = search(t, row, q[r], end, n);                             // every probe <= q
        p[r] = position_of(t, row, n, q[r], count);
    }
}

__device__ __forceinline__ Position locate(const Timeline& t, uint64_t row, uint64_t n, double q) {
    const double one[1] = {q};
    Position p[1];
    locate_many<1>(t, row, n, one, 1, p);
    return p[0];
}

struct Segment {
    uint64_t lower, upper;
    double weight;
};

__device__ __forceinline__ Segment between(const Timeline& t, uint64_t row, uint64_t lower, double q) {
    double s0 = time_at(t, row, lower), s1 = time_at(t, row, lower + 1);
    Segment s = {lower, lower + 1, __ddiv_rn(__dsub_rn(q, s0), __dsub_rn(s1, s0))};
    return s;
}

// Element traits: load/store in the compute precision.
template <typename T> struct Float;
template <> struct Float<float> {
    typedef float Compute;
    static __device__ float widen(float x) { return x; }
    static __device__ float narrow(float x) { return x; }
    static __device__ double to_f64(float x) { return (double)x; }
    static __device__ float from_f64(double x) { return __double2float_rn(x); }
};
template <> struct Float<__half> {
    typedef float Compute;
    static __device__ float widen(__half x) { return __half2float(x); }
    static __device__ __half narrow(float x) { return __float2half_rn(x); }
    static __device__ double to_f64(__half x) { return (double)__half2float(x); }
    static __device__ __half from_f64(double x) { return __double2half(x); }
};
template <> struct Float<__nv_bfloat16> {
    typedef float Compute;
    static __device__ float widen(__nv_bfloat16 x) { return __bfloat162float(x); }
    static __device__ __nv_bfloat16 narrow(float x) { return __float2bfloat16_rn(x); }
    static __device__ double to_f64(__nv_bfloat16 x) { return (double)__bfloat162float(x); }
    static __device__ __nv_bfloat16 from_f64(double x) { return __double2bfloat16(x); }
};
template <> struct Float<double> {
    typedef double Compute;
    static __device__ double widen(double x) { return x; }
    static __device__ double narrow(double x) { return x; }
    static __device__ double to_f64(double x) { return x; }
    static __device__ double from_f64(double x) { return x; }
};

// lerp with the weight already rounded to f32 (`w32`, used by the f32-compute
// types) next to the f64 one: the same bits as lerp(a, b, w), one conversion
// per word rather than per element.
template <typename T>
__device__ __forceinline__ T lerp_with(T a, T b, double w, float w32) {
    if constexpr (sizeof(typename Float<T>::Compute) == 8) {
        double x0 = Float<T>::widen(a), x1 = Float<T>::widen(b);
        return Float<T>::narrow((typename Float<T>::Compute)__dadd_rn(x0, __dmul_rn(w, __dsub_rn(x1, x0))));
    } else {
        float x0 = (float)Float<T>::widen(a), x1 = (float)Float<T>::widen(b);
        return Float<T>::narrow((typename Float<T>::Compute)__fadd_rn(x0, __fmul_rn(w32, __fsub_rn(x1, x0))));
    }
}

// Two 2-byte floats packed in 32 bits, lerped in f32 as lerp_with does and
// rounded back together (one conversion instruction for the pair).
template <typename T> __device__ __forceinline__ unsigned lerp_pair(unsigned a, unsigned b, float w);
template <> __device__ __forceinline__ unsigned lerp_pair<__nv_bfloat16>(unsigned a, unsigned b, float w) {
    const float a0 = __uint_as_float(a << 16), a1 = __uint_as_float(a & 0xFFFF0000u);
    const float b0 = __uint_as_float(b << 16), b1 = __uint_as_float(b & 0xFFFF0000u);
    const __nv_bfloat162 y = __floats2bfloat162_rn(__fadd_rn(a0, __fmul_rn(w, __fsub_rn(b0, a0))),
                                                   __fadd_rn(a1, __fmul_rn(w, __fsub_rn(b1, a1))));
    unsigned bits;
    memcpy(&bits, &y, 4);
    return bits;
}
template <> __device__ __forceinline__ unsigned lerp_pair<__half>(unsigned a, unsigned b, float w) {
    __half2 ha, hb;
    memcpy(&ha, &a, 4);
    memcpy(&hb, &b, 4);
    const float2 fa = __half22float2(ha), fb = __half22float2(hb);
    const __half2 y = __floats2half2_rn(__fadd_rn(fa.x, __fmul_rn(w, __fsub_rn(fb.x, fa.x))),
                                        __fadd_rn(fa.y, __fmul_rn(w, __fsub_rn(fb.y, fa.y))));
    unsigned bits;
    memcpy(&bits, &y, 4);
    return bits;
}

// The lerp of every element of two words (lerp_with's bits): 2-byte floats
// in pairs, the others one by one.
template <typename T, typename W>
__device__ __forceinline__ W lerp_word(const W& a, const W& b, double w, float w32) {
    constexpr int N = sizeof(W) / sizeof(T);
    W out;
    if constexpr ((sizeof(T) == 2) && (N % 2 == 0)) {
        unsigned x0[N / 2], x1[N / 2], y[N / 2];
        memcpy(x0, &a, sizeof(W));
        memcpy(x1, &b, sizeof(W));
#pragma unroll
        for (int k = 0; k < N / 2; k++) y[k] = lerp_pair<T>(x0[k], x1[k], w32);
        memcpy(&out, y, sizeof(W));
    } else {
        T x0[N], x1[N], y[N];
        memcpy(x0, &a, sizeof(W));
        memcpy(x1, &b, sizeof(W));
#pragma unroll
        for (int k = 0; k < N; k++) y[k] = lerp_with<T>(x0[k], x1[k], w, w32);
        memcpy(&out, y, sizeof(W));
    }
    return out;
}

template <typename T>
__device__ __forceinline__ T lerp(T a, T b, double w) {
    if (sizeof(typename Float<T>::Compute) == 8) {
        double x0 = Float<T>::widen(a), x1 = Float<T>::widen(b);
        return Float<T>::narrow((typename Float<T>::Compute)__dadd_rn(x0, __dmul_rn(w, __dsub_rn(x1, x0))));
    } else {
        float x0 = (float)Float<T>::widen(a), x1 = (float)Float<T>::widen(b);
        float w32 = __double2float_rn(w);
        return Float<T>::narrow((typename Float<T>::Compute)__fadd_rn(x0, __fmul_rn(w32, __fsub_rn(x1, x0))));
    }
}

__device__ __forceinline__ double dot4(const double* a, const double* b) {
    return __dadd_rn(__dadd_rn(__dadd_rn(__dmul_rn(a[0], b[0]), __dmul_rn(a[1], b[1])), __dmul_rn(a[2], b[2])),
                     __dmul_rn(a[3], b[3]));
}

__device__ __forceinline__ void normalize4(double* q) {
    double n = __dsqrt_rn(dot4(q, q));
    for (int k = 0; k < 4; k++) q[k] = __ddiv_rn(q[k], n);
}

// sin on [0, pi/2] and atan on [0, 1] exactly as the reference evaluates them
// (crates/robocache-cpu/src/resample/slerp.rs: same coefficients, same
// operation order, each operation rounded once), so slerp gives the same bits
// on both backends; libm and CUDA's sin/atan2 differ in the last place.
__constant__ double SIN_COEFFS[12] = {
    1.0, -0.16666666666666666, 0.008333333333333333, -0.0001984126984126984, 2.7557319223985893e-06,
    -2.505210838544172e-08, 1.6059043836821613e-10, -7.647163731819816e-13, 2.8114572543455206e-15,
    -8.22063524662433e-18, 1.9572941063391263e-20, -3.868170170630684e-23};
__constant__ double ATAN_COEFFS[13] = {
    1.0, -0.3333333333333333, 0.2, -0.14285714285714285, 0.1111111111111111, -0.09090909090909091,
    0.07692307692307693, -0.06666666666666667, 0.058823529411764705, -0.05263157894736842,
    0.047619047619047616, -0.043478260869565216, 0.04};

__device__ double sin_quarter(double x) {
    double x2 = __dmul_rn(x, x);
    double p = SIN_COEFFS[11];
    for (int k = 10; k >= 0; k--) p = __dadd_rn(__dmul_rn(p, x2), SIN_COEFFS[k]);
    return __dmul_rn(p, x);
}

__device__ double atan_unit(double r) {
    double base = 0.0, u = r;
    if (r > 0.41421356237309503) {
        base = 0.7853981633974483;
        u = __ddiv_rn(__dsub_rn(r, 1.0), __dadd_rn(r, 1.0));
    }
    double v = __ddiv_rn(u, __dadd_rn(1.0, __dsqrt_rn(__dadd_rn(1.0, __dmul_rn(u, u)))));
    double v2 = __dmul_rn(v, v);
    double p = ATAN_COEFFS[12];
    for (int k = 11; k >= 0; k--) p = __dadd_rn(__dmul_rn(p, v2), ATAN_COEFFS[k]);
    return __dadd_rn(base, __dmul_rn(2.0, __dmul_rn(p, v)));
}

// The reference's slerp (crates/robocache-cpu/src/resample/slerp.rs).
__device__ void slerp(double* a, double* b, double t, double* out) {
    normalize4(a);
    normalize4(b);
    if (dot4(a, b) < 0.0) for (int k = 0; k < 4; k++) b[k] = -b[k];
    if (t == 0.0) { for (int k = 0; k < 4; k++) out[k] = a[k]; return; }
    double d[4], s[4];
    for (int k = 0; k < 4; k++) { d[k] = __dsub_rn(a[k], b[k]); s[k] = __dadd_rn(a[k], b[k]); }
    double theta = __dmul_rn(2.0, atan_unit(__ddiv_rn(__dsqrt_rn(dot4(d, d)), __dsqrt_rn(dot4(s, s)))));
    if (theta < 1e-6) {
        for (int k = 0; k < 4; k++) out[k] = __dadd_rn(a[k], __dmul_rn(t, __dsub_rn(b[k], a[k])));
    } else {
        double sin_theta = sin_quarter(theta);
        double wa = __ddiv_rn(sin_quarter(__dmul_rn(__dsub_rn(1.0, t), theta)), sin_theta);
        double wb = __ddiv_rn(sin_quarter(__dmul_rn(t, theta)), sin_theta);
        for (int k = 0; k < 4; k++) out[k] = __dadd_rn(__dmul_rn(wa, a[k]), __dmul_rn(wb, b[k]));
    }
    normalize4(out);
}

// Where a row's values go. DirectRow stores T into a T row (vectorizable);
// the fusion's ConvertRow rounds into another output dtype element by element.
template <typename T>
struct DirectRow {
    static constexpr bool DIRECT = true;
    T* row;
    __device__ void store(uint64_t c, T v) const { row[c] = v; }
};

// A machine word of BYTES bytes, and N = BYTES / sizeof(T) elements in it.
template <int BYTES> struct Word;
template <> struct Word<16> { typedef uint4 type; };
template <> struct Word<8> { typedef uint2 type; };
template <> struct Word<4> { typedef unsigned type; };

// The lerp of a and b with weight w, or a when copying (integer types only copy).
template <typename T, bool FLOAT>
__device__ __forceinline__ T mix(T a, T b, bool copy, double w) {
    if constexpr (FLOAT) return copy ? a : lerp<T>(a, b, w);
    else return a;
}

// Channels [begin, end) of one group (multiples of N, rows aligned to BYTES):
// a copy of row r0 (nearest, previous, or a zero weight) or the lerp of r0
// and r1 with weight w, one word per lane per step, two steps in flight.
template <typename T, bool FLOAT, int BYTES>
__device__ __forceinline__ void span_words(const T* __restrict__ r0, const T* __restrict__ r1, T* __restrict__ o,
                                           uint64_t begin, uint64_t end, bool copy, double w) {
    typedef typename Word<BYTES>::type W;
    constexpr int N = BYTES / sizeof(T);
    const uint64_t lane = threadIdx.x & 31;
    if (copy) {
#pragma unroll 2
        for (uint64_t c = begin + lane * N; c < end; c += 32 * N) *(W*)(o + c) = *(const W*)(r0 + c);
        return;
    }
    if constexpr (FLOAT) {
#pragma unroll 2
        for (uint64_t c = begin + lane * N; c < end; c += 32 * N) {
            const W a = *(const W*)(r0 + c), b = *(const W*)(r1 + c);
            T x0[N], x1[N], y[N];
            memcpy(x0, &a, BYTES);
            memcpy(x1, &b, BYTES);
#pragma unroll
            for (int k = 0; k < N; k++) y[k] = lerp<T>(x0[k], x1[k], w);
            W out;
            memcpy(&out, y, BYTES);
            *(W*)(o + c) = out;
        }
    }
}

// Channels [start, end) of one group: the aligned middle by words of the
// widest size the three rows allow, the edges element by element.
template <typename T, bool FLOAT>
__device__ __forceinline__ void span(const T* __restrict__ r0, const T* __restrict__ r1, T* __restrict__ o,
                                     uint64_t start, uint64_t end, bool copy, double w) {
    const uint64_t lane = threadIdx.x & 31;
    const uintptr_t align = (uintptr_t)r0 | (uintptr_t)r1 | (uintptr_t)o;
    int bytes = 0;
    if (sizeof(T) < 16 && align % 16 == 0) bytes = 16;
    else if (sizeof(T) < 8 && align % 8 == 0) bytes = 8;
    else if (sizeof(T) < 4 && align % 4 == 0) bytes = 4;
    uint64_t begin = end, finish = end;  // the word-aligned part [begin, finish)
    if (bytes) {
        const uint64_t n = bytes / sizeof(T);
        begin = (start + n - 1) / n * n;
        finish = end / n * n;
        if (finish < begin) begin = finish = end;
    }
    for (uint64_t c = start + lane; c < begin; c += 32) o[c] = mix<T, FLOAT>(r0[c], r1[c], copy, w);
    for (uint64_t c = finish + lane; c < end; c += 32) o[c] = mix<T, FLOAT>(r0[c], r1[c], copy, w);
    if constexpr (sizeof(T) < 16) {
        if (bytes == 16) span_words<T, FLOAT, 16>(r0, r1, o, begin, finish, copy, w);
    }
    if constexpr (sizeof(T) < 8) {
        if (bytes == 8) span_words<T, FLOAT, 8>(r0, r1, o, begin, finish, copy, w);
    }
    if constexpr (sizeof(T) < 4) {
        if (bytes == 4) span_words<T, FLOAT, 4>(r0, r1, o, begin, finish, copy, w);
    }
}

// One output row: the value at time q of every channel of a row with n valid
// samples, written through `out`; the 32 lanes of a warp (all of them must
// call) search together and split the channels. Returns whether q lies
// inside the row's time range.
template <typename T, bool FLOAT, bool SLERP, typename Out>
__device__ bool resample_at(const T* __restrict__ x, uint64_t channels, const Timeline& source, uint64_t row,
                            uint64_t n, double q, const Position& p, const int* groups, int group_count, int boundary,
                            T fill, const Out& out) {
    const uint64_t lane = threadIdx.x & 31;
    const bool inside = p.region == 0;
    if (!inside && boundary == BOUNDARY_FILL) {
        for (uint64_t c = lane; c < channels; c += 32) out.store(c, fill);
        return inside;
    }
    Segment interpolate;
    if (inside && p.index + 1 < n) interpolate = between(source, row, p.index, q);
    else { interpolate.lower = interpolate.upper = p.index; interpolate.weight = 0.0; }
    Segment extrapolate = interpolate;
    if (!inside && n >= 2) extrapolate = between(source, row, p.region < 0 ? 0 : n - 2, q);
    for (int g = 0; g < group_count; g++) {
        const uint64_t start = groups[3 * g], end = groups[3 * g + 1];
        const int method = groups[3 * g + 2];
        if (method == METHOD_SLERP) {
            // Kernels built without slerp (fewer registers, more warps in
            // flight) are only launched for specs without it.
            if constexpr (FLOAT && SLERP) {  // one quaternion per lane
                for (uint64_t c = start + 4 * lane; c < end; c += 128) {
                    double qa[4], qb[4], r[4];
                    for (int k = 0; k < 4; k++) {
                        qa[k] = Float<T>::to_f64(x[interpolate.lower * channels + c + k]);
                        qb[k] = Float<T>::to_f64(x[interpolate.upper * channels + c + k]);
                    }
                    slerp(qa, qb, interpolate.weight, r);
                    for (int k = 0; k < 4; k++) out.store(c + k, Float<T>::from_f64(r[k]));
                }
            }
            continue;
        }
        // Linear: lerp between two rows (a zero weight copies the lower one, as
        // the reference does); nearest and previous: copy one row.
        uint64_t lower, upper;
        double w = 0.0;
        if (method == METHOD_LINEAR && FLOAT) {
            const Segment s = boundary == BOUNDARY_EXTRAPOLATE ? extrapolate : interpolate;
            lower = s.lower;
            upper = s.upper;
            w = s.weight;
        } else {
            lower = upper = p.index;
            if (method == METHOD_NEAREST && inside && p.index + 1 < n) {
                double s0 = time_at(source, row, p.index), s1 = time_at(source, row, p.index + 1);
                if (__dsub_rn(s1, q) < __dsub_rn(q, s0)) lower = upper = p.index + 1;
            }
        }
        const bool copy = w == 0.0;
        const T* r0 = x + lower * channels;
        const T* r1 = x + upper * channels;
        if constexpr (Out::DIRECT) {
            span<T, FLOAT>(r0, r1, out.row, start, end, copy, w);
        } else {
            for (uint64_t c = start + lane; c < end; c += 32) out.store(c, mix<T, FLOAT>(r0[c], r1[c], copy, w));
        }
    }
    return inside;
}

template <typename T, bool FLOAT, bool SLERP, typename Out>
__device__ bool resample_row(const T* __restrict__ x, uint64_t channels, const Timeline& source, uint64_t row,
                             uint64_t n, double q, const int* groups, int group_count, int boundary, T fill,
                             const Out& out) {
    const Position p = locate(source, row, n, q);
    return resample_at<T, FLOAT, SLERP>(x, channels, source, row, n, q, p, groups, group_count, boundary, fill, out);
}

// Each warp takes up to TARGETS_PER_WARP consecutive targets of one row (the
// host's choice: one when there are few targets, so that more warps share
// the latency; four when there are many, so that their target times and
// windows load together).
#define TARGETS_PER_WARP 4

__device__ __forceinline__ uint64_t per_warp(int chosen) {
    return chosen < 1 ? 1 : (chosen > TARGETS_PER_WARP ? TARGETS_PER_WARP : chosen);
}

template <typename T, bool FLOAT, bool SLERP>
__device__ void resample_rows(const T* __restrict__ data, T* __restrict__ out, uint8_t* __restrict__ valid,
                              const ResampleArgs& a) {
    constexpr int R = TARGETS_PER_WARP;
    const uint64_t per = per_warp(a.targets_per_warp);
    const uint64_t warps_per_block = blockDim.x / 32;
    const uint64_t chunks = (a.targets + per - 1) / per;
    T fill;
    memcpy(&fill, &a.fill_bits, sizeof(T));
    for (uint64_t w = (uint64_t)blockIdx.x * warps_per_block + threadIdx.x / 32; w < a.batch * chunks;
         w += (uint64_t)gridDim.x * warps_per_block) {
        const uint64_t row = w / chunks, first = (w % chunks) * per;
        const int active = (int)(a.targets - first < per ? a.targets - first : per);
        double q[R];
#pragma unroll
        for (int r = 0; r < R; r++) q[r] = r < active ? time_at(a.target, row, first + r) : 0.0;
        const uint64_t n = row_length(a.lengths, a.length_type, row, a.samples);
        Position p[R];
        locate_many<R>(a.source, row, n, q, active, p);
        const T* x = data + row * a.samples * a.channels;
#pragma unroll 1
        for (int r = 0; r < active; r++) {
            const uint64_t flat = row * a.targets + first + r;
            const DirectRow<T> o = {out + flat * a.channels};
            const bool inside = resample_at<T, FLOAT, SLERP>(x, a.channels, a.source, row, n, q[r], p[r], a.groups,
                                                             a.group_count, a.boundary, fill, o);
            if ((threadIdx.x & 31) == 0) valid[flat] = inside ? 1 : 0;
        }
    }
}

// ---- Tiles: resident blocks place the next tile while they move one --------
//
// For calls without slerp on float data. Each block of TILE_WARPS warps is
// resident for the whole call (the host launches as many as fit at once)
// and takes tiles of `tile` (<= MAX_TILE, the host's choice) consecutive
// targets of one row, every gridDim.x-th tile. Two buffers of placements
// in shared memory make a pipeline: while the block moves tile i from one,
// its first threads place tile i + 1 into the other, one thread per target
// (locate_one: a guess from the row's first and last time and its two
// neighbours, so evenly or nearly evenly sampled rows place in one round of
// loads), then join the moving. Moving: every warp claims chunks of 32 *
// MOVE_UNROLL words from a counter in shared memory until the tile's words
// run out (16 bytes where the stream's rows and groups allow, else single
// elements), with every load of a chunk issued before the first use, no
// search in their dependency chain; so the placing threads take fewer
// chunks rather than holding up the tile. The arithmetic is resample_at's.
// Outputs whose rows are not 16-byte aligned (a fusion of odd widths, or of
// other dtypes) are first assembled in shared memory and then written out
// in aligned 16-byte words.

#define MOVE_UNROLL 2
// Fusion moves one word a thread per claim straight into the output (no
// spills at 64 registers, and a 64- or 128-channel stream's few words are
// shared by every warp), two when staging (80 registers).
#define FUSE_DIRECT_UNROLL 1
#define FUSE_STAGED_UNROLL 2

// Placed::flags
#define PLACED_FILL 1  // outside the row with the fill boundary
#define PLACED_COPY 2  // linear's weight is 0: it copies `lower`

struct Placed {
    uint64_t previous, nearest;  // the rows previous and nearest copy
    uint64_t lower, upper;       // linear's rows (interpolation or extrapolation)
    double weight;               // linear's weight (for f64 data)
    float weight32;              // the same, rounded to f32 once (for the other float dtypes)
    int flags;                   // PLACED_FILL, PLACED_COPY
};

// Where q falls among the first n samples of a row, found by one thread:
// count = #{i < n : s_i <= q} (for sorted times; the reference's partition
// point). The first probe is the pair of samples around the index an evenly
// spaced row predicts; a miss gallops from there towards q (steps 1, 2,
// 4, ...) and finishes with a binary search, so the probes stay within the
// row and the range shrinks every step whatever the times are.
__device__ __forceinline__ Position locate_one(const Timeline& t, uint64_t row, uint64_t n, double q) {
    const double first = time_at(t, row, 0), last = time_at(t, row, n - 1);
    Position p;
    if (!(q >= first)) { p.region = -1; p.index = 0; return p; }  // below, or NaN
    if (q >= last) { p.region = q > last ? 1 : 0; p.index = n - 1; return p; }
    // Here n >= 2 and s_0 <= q < s_{n-1}: count lies in [lo, hi] = [1, n - 1],
    // with s_{lo-1} <= q and s_hi > q.
    uint64_t lo = 1, hi = n - 1;
    // Only a guess: single precision and a fast division do.
    float guess = __fdividef((float)(q - first), (float)(last - first)) * (float)(n - 1);
    guess = guess > 0.0f ? guess : 0.0f;
    uint64_t c = guess < (float)(n - 2) ? (uint64_t)guess + 1 : n - 1;  // in [1, n - 1]
    const double below = time_at(t, row, c - 1), above = time_at(t, row, c);
    bool up = false;
    if (below <= q) {
        lo = c;
        if (above > q) hi = c;
        else lo = c + 1, up = true;
    } else {
        hi = c - 1;
    }
    uint64_t step = 1;
    while (lo < hi) {  // gallop: probe in [lo, hi - 1]
        uint64_t probe = up ? lo + step - 1 : (hi - lo > step ? hi - step : lo);
        if (probe >= hi) probe = hi - 1;
        const bool le = time_at(t, row, probe) <= q;
        if (le) lo = probe + 1;
        else hi = probe;
        if (le != up) break;  // passed q: it lies in [lo, hi]
        step *= 2;
    }
    while (lo < hi) {
        const uint64_t mid = lo + (hi - lo) / 2;
        if (time_at(t, row, mid) <= q) lo = mid + 1;
        else hi = mid;
    }
    p.region = 0;
    p.index = lo - 1;
    return p;
}

// Places target `target` of `row` (one thread): finds it (locate_one), then
// writes the rows and weight each method needs, and its valid flag.
__device__ __forceinline__ void place_one(const Timeline& source, const Timeline& targets, uint64_t row, uint64_t n,
                                          uint64_t target, int boundary, Placed* placed, uint8_t* valid) {
    const double q = time_at(targets, row, target);
    const Position at = locate_one(source, row, n, q);
    const bool inside = at.region == 0;
    Segment interpolate;
    if (inside && at.index + 1 < n) interpolate = between(source, row, at.index, q);
    else { interpolate.lower = interpolate.upper = at.index; interpolate.weight = 0.0; }
    Segment linear = interpolate;
    if (!inside && n >= 2 && boundary == BOUNDARY_EXTRAPOLATE)
        linear = between(source, row, at.region < 0 ? 0 : n - 2, q);
    uint64_t nearest = at.index;
    if (inside && at.index + 1 < n) {
        const double s0 = time_at(source, row, at.index), s1 = time_at(source, row, at.index + 1);
        if (__dsub_rn(s1, q) < __dsub_rn(q, s0)) nearest = at.index + 1;
    }
    Placed out;
    out.previous = at.index;
    out.nearest = nearest;
    out.lower = linear.lower;
    out.upper = linear.upper;
    out.weight = linear.weight;
    out.weight32 = __double2float_rn(linear.weight);
    out.flags = (!inside && boundary == BOUNDARY_FILL ? PLACED_FILL : 0) | (linear.weight == 0.0 ? PLACED_COPY : 0);
    *placed = out;
    *valid = inside ? 1 : 0;
}

template <typename A, typename B> struct Same { static constexpr bool value = false; };
template <typename A> struct Same<A, A> { static constexpr bool value = true; };

// A stream's value in the output dtype: itself when the dtypes agree, else
// rounded to nearest-even through f64 (store_as, the CPU reference's conversion).
template <typename T, typename O>
__device__ __forceinline__ O convert(T v) {
    if constexpr (Same<T, O>::value) return v;
    else return Float<O>::from_f64(Float<T>::to_f64(v));
}

// Whether a stream moves in 16-byte words: its data, rows and group bounds aligned to them.
template <typename T>
__device__ __forceinline__ bool word_aligned(const void* data, uint64_t channels, const int* groups, int group_count) {
    constexpr uint64_t N = 16 / sizeof(T);
    bool aligned = (uintptr_t)data % 16 == 0 && channels % N == 0;
    for (int g = 0; g < group_count; g++) aligned = aligned && groups[3 * g] % N == 0 && groups[3 * g + 1] % N == 0;
    return aligned;
}

// The next chunk of a tile's words for the calling warp (all its lanes must
// call): lane 0 claims 32 * U words from the shared counter.
template <int U>
__device__ __forceinline__ uint32_t claim_chunk(uint32_t* claimed) {
    uint32_t chunk = 0;
    if ((threadIdx.x & 31) == 0) chunk = atomicAdd(claimed, 32u * U);
    return __shfl_sync(0xFFFFFFFFu, chunk, 0);
}

// Moving, for one stream: channels [0, channels) of the tile's `count`
// targets, moved in words W (uint4, or T itself) by chunks claimed from
// `claimed`, written as output element j * width + offset + c of the tile:
// straight to `out` (dtypes equal and every word aligned) or, STAGED, into
// the shared bytes `stage`. Every lane of the calling warps must call.
template <typename T, typename W, typename O, bool STAGED, int U>
__device__ __forceinline__ void move_stream(const T* __restrict__ x, uint64_t channels, const int* groups,
                                            int group_count, T fill, const Placed* placed, uint32_t count,
                                            uint32_t* claimed, O* __restrict__ out, unsigned char* stage,
                                            uint64_t width, uint64_t offset) {
    constexpr int N = sizeof(W) / sizeof(T);
    constexpr bool F64 = sizeof(typename Float<T>::Compute) == 8;
    // 32-bit index arithmetic (the host keeps a tile's words below 2^30).
    const uint32_t words = (uint32_t)(channels / N), total = count * words;
    const uint32_t lane = threadIdx.x & 31;
    // Word i is target i / words: a division by a float reciprocal, off by
    // at most one (the quotient is below MAX_TILE) and corrected, rather
    // than the two dozen instructions of an integer division.
    const float reciprocal = 1.0f / (float)words;
    // The method of every word when the stream has one group.
    const int method_of_all = group_count == 1 ? groups[2] : -1;
    W fill_word;
    {
        T fills[N];
#pragma unroll
        for (int k = 0; k < N; k++) fills[k] = fill;
        memcpy(&fill_word, fills, sizeof(W));
    }
    for (uint32_t chunk = claim_chunk<U>(claimed); chunk < total; chunk = claim_chunk<U>(claimed)) {
        W a[U], b[U];
        double w[U];
        float w32[U];
        uint32_t j[U], c[U];
        int flags[U];
        // Every load of the U words first...
#pragma unroll
        for (int u = 0; u < U; u++) {
            const uint32_t i = chunk + 32 * u + lane;
            a[u] = b[u] = W{};
            w[u] = 0.0;
            w32[u] = 0.0f;
            flags[u] = PLACED_FILL;
            j[u] = c[u] = 0;
            if (i < total) {
                uint32_t target = (uint32_t)((float)i * reciprocal);
                int32_t rest = (int32_t)(i - target * words);
                if (rest < 0) target--, rest += (int32_t)words;
                else if (rest >= (int32_t)words) target++, rest -= (int32_t)words;
                j[u] = target;
                c[u] = (uint32_t)rest * N;
                const Placed& p = placed[target];
                flags[u] = p.flags;
                if (!(flags[u] & PLACED_FILL)) {
                    int method = method_of_all;
                    if (method < 0) {
                        method = METHOD_LINEAR;
                        for (int g = 0; g < group_count; g++)
                            if (c[u] >= (uint32_t)groups[3 * g] && c[u] < (uint32_t)groups[3 * g + 1])
                                method = groups[3 * g + 2];
                    }
                    uint64_t lower = p.lower, upper = p.upper;
                    if constexpr (F64) w[u] = p.weight;
                    else w32[u] = p.weight32;
                    if (method == METHOD_PREVIOUS) lower = p.previous, flags[u] = PLACED_COPY;
                    else if (method == METHOD_NEAREST) lower = p.nearest, flags[u] = PLACED_COPY;
                    a[u] = *(const W*)(x + lower * channels + c[u]);
                    if (!(flags[u] & PLACED_COPY)) b[u] = *(const W*)(x + upper * channels + c[u]);
                }
            }
        }
        // ...then the arithmetic and the stores.
#pragma unroll
        for (int u = 0; u < U; u++) {
            const uint32_t i = chunk + 32 * u + lane;
            if (i >= total) break;
            const W v = flags[u] & PLACED_FILL ? fill_word
                        : flags[u] & PLACED_COPY ? a[u]
                                                 : lerp_word<T, W>(a[u], b[u], w[u], w32[u]);
            const uint64_t e = (uint64_t)j[u] * width + offset + c[u];
            if constexpr (STAGED || !Same<T, O>::value) {
                T y[N];
                memcpy(y, &v, sizeof(W));
#pragma unroll
                for (int k = 0; k < N; k++) {
                    if constexpr (STAGED) *(O*)(stage + (e + k) * sizeof(O)) = convert<T, O>(y[k]);
                    else out[e + k] = convert<T, O>(y[k]);
                }
            } else {
                *(W*)(out + e) = v;
            }
        }
    }
}

// One stream's moving, in 16-byte words where it can.
template <typename T, typename O, bool STAGED, int U>
__device__ __forceinline__ void move_stream_words(const void* data, uint64_t row_offset, uint64_t channels,
                                                  const int* groups, int group_count, uint64_t fill_bits,
                                                  const Placed* placed, uint32_t count, uint32_t* claimed, O* out,
                                                  unsigned char* stage, uint64_t width, uint64_t offset) {
    T fill;
    memcpy(&fill, &fill_bits, sizeof(T));
    const T* x = (const T*)data + row_offset;
    if (word_aligned<T>(data, channels, groups, group_count))
        move_stream<T, uint4, O, STAGED, U>(x, channels, groups, group_count, fill, placed, count, claimed, out, stage,
                                            width, offset);
    else
        move_stream<T, T, O, STAGED, U>(x, channels, groups, group_count, fill, placed, count, claimed, out, stage,
                                        width, offset);
}

// The staged tile (`bytes` bytes, starting `skew` bytes into the
// shared buffer, the same offset from a 16-byte boundary as `out`) to
// global memory in 16-byte words; the first and last words element by element.
template <typename O>
__device__ __forceinline__ void write_stage(const unsigned char* stage_base, uint64_t skew, uint64_t bytes, O* out) {
    unsigned char* aligned = (unsigned char*)out - skew;
    const uint64_t end = skew + bytes, words = (end + 15) / 16;
    for (uint64_t i = threadIdx.x; i < words; i += blockDim.x) {
        const uint64_t lo = 16 * i, hi = lo + 16;
        if (lo >= skew && hi <= end) {
            *(uint4*)(aligned + lo) = *(const uint4*)(stage_base + lo);
        } else {
            for (uint64_t at = lo > skew ? lo : skew; at < hi && at < end; at += sizeof(O))
                *(O*)(aligned + at) = *(const O*)(stage_base + at);
        }
    }
}

// The tile `tile_index` of a call of `size`-target tiles (`tiles_per_row` to a row).
struct Tile {
    uint64_t row, first, count;
};

__device__ __forceinline__ Tile tile_at(uint64_t tile_index, uint64_t size, uint64_t tiles_per_row, uint64_t targets) {
    Tile t;
    t.row = tile_index / tiles_per_row;
    t.first = (tile_index % tiles_per_row) * size;
    t.count = targets - t.first < size ? targets - t.first : size;
    return t;
}

// Threads 0..count-1 place the tile's targets into `placed`.
__device__ __forceinline__ void place_tile(const ResampleArgs& a, const Tile& t, Placed* placed, uint8_t* valid) {
    if (threadIdx.x >= t.count) return;
    const uint64_t n = row_length(a.lengths, a.length_type, t.row, a.samples);
    const uint64_t target = t.first + threadIdx.x;
    place_one(a.source, a.target, t.row, n, target, a.boundary, placed + threadIdx.x, valid + t.row * a.targets + target);
}

template <typename T>
__device__ void resample_tiles(const T* __restrict__ data, T* __restrict__ out, uint8_t* __restrict__ valid,
                               int tile, const ResampleArgs& a) {
    __shared__ Placed placed[2][MAX_TILE];
    __shared__ uint32_t claimed[2];
    const uint64_t size = tile < 1 ? 1 : (tile > MAX_TILE ? MAX_TILE : tile);
    const uint64_t tiles_per_row = (a.targets + size - 1) / size, tiles = a.batch * tiles_per_row;
    if (blockIdx.x >= tiles) return;
    place_tile(a, tile_at(blockIdx.x, size, tiles_per_row, a.targets), placed[0], valid);
    if (threadIdx.x == 0) claimed[0] = claimed[1] = 0;
    __syncthreads();
    int b = 0;
    for (uint64_t index = blockIdx.x; index < tiles; index += gridDim.x, b ^= 1) {
        // The next tile's placement first (its threads then claim fewer chunks).
        if (index + gridDim.x < tiles)
            place_tile(a, tile_at(index + gridDim.x, size, tiles_per_row, a.targets), placed[b ^ 1], valid);
        const Tile t = tile_at(index, size, tiles_per_row, a.targets);
        T* o = out + (t.row * a.targets + t.first) * a.channels;
        move_stream_words<T, T, false, MOVE_UNROLL>(data, t.row * a.samples * a.channels, a.channels, a.groups,
                                                    a.group_count, a.fill_bits, placed[b], (uint32_t)t.count,
                                                    &claimed[b], o, nullptr, a.channels, 0);
        __syncthreads();  // tile i is moved and tile i + 1 placed
        if (threadIdx.x == 0) claimed[b] = 0;  // for tile i + 2, after the next barrier
    }
}

#define TILED_KERNEL(NAME, T)                                                                             \
    extern "C" __global__ void __launch_bounds__(TILE_WARPS * 32, 4)                                      \
        NAME(const T* data, T* out, uint8_t* valid, int tile, ResampleArgs args) {                        \
        resample_tiles<T>(data, out, valid, tile, args);                                                  \
    }

TILED_KERNEL(resample_tiled_f16, __half)
TILED_KERNEL(resample_tiled_bf16, __nv_bfloat16)
TILED_KERNEL(resample_tiled_f32, float)
TILED_KERNEL(resample_tiled_f64, double)

#define FLOAT_KERNEL(NAME, T, SLERP)                                                                      \
    extern "C" __global__ void NAME(const T* data, T* out, uint8_t* valid, ResampleArgs args) {           \
        resample_rows<T, true, SLERP>(data, out, valid, args);                                            \
    }
// At most 64 registers: 8 blocks of 4 warps per SM, enough loads in flight to
// cover DRAM latency (the kernels are latency-bound below about 10^4 rows).
#define LEAN_KERNEL(NAME, T, FLOAT)                                                                       \
    extern "C" __global__ void __launch_bounds__(128, 8)                                                  \
        NAME(const T* data, T* out, uint8_t* valid, ResampleArgs args) {                                  \
        resample_rows<T, FLOAT, false>(data, out, valid, args);                                           \
    }

FLOAT_KERNEL(resample_f16, __half, true)
FLOAT_KERNEL(resample_bf16, __nv_bfloat16, true)
FLOAT_KERNEL(resample_f32, float, true)
FLOAT_KERNEL(resample_f64, double, true)
// Without slerp: linear, nearest and previous only.
LEAN_KERNEL(resample_f16_no_slerp, __half, true)
LEAN_KERNEL(resample_bf16_no_slerp, __nv_bfloat16, true)
LEAN_KERNEL(resample_f32_no_slerp, float, true)
LEAN_KERNEL(resample_f64_no_slerp, double, true)
// Integer and bool data (nearest and previous only) copy element bits.
LEAN_KERNEL(resample_bits8, uint8_t, false)
LEAN_KERNEL(resample_bits16, uint16_t, false)
LEAN_KERNEL(resample_bits32, uint32_t, false)
LEAN_KERNEL(resample_bits64, uint64_t, false)


// ---- Fusion: K streams onto one timeline in one launch ----------------------

template <typename T> __device__ __forceinline__ double as_f64(T v) { return (double)v; }
template <> __device__ __forceinline__ double as_f64(__half v) { return (double)__half2float(v); }
template <> __device__ __forceinline__ double as_f64(__nv_bfloat16 v) { return (double)__bfloat162float(v); }

// Stores v at out[i] in the output dtype: a plain copy when the dtypes agree,
// else rounded to nearest-even through f64 (the CPU reference's conversion).
template <typename T>
__device__ __forceinline__ void store_as(void* out, uint64_t i, int out_dtype, int dtype, T v) {
    if (out_dtype == dtype) { ((T*)out)[i] = v; return; }
    const double d = as_f64(v);
    switch (out_dtype) {
        case DT_F16: ((__half*)out)[i] = __double2half(d); break;
        case DT_BF16: ((__nv_bfloat16*)out)[i] = __double2bfloat16(d); break;
        case DT_F32: ((float*)out)[i] = __double2float_rn(d); break;
        case DT_F64: ((double*)out)[i] = d; break;
        default: break;  // integer outputs need every stream in that dtype (checked on the host)
    }
}

// The fusion's output row when the stream's dtype differs from the output's.
template <typename T>
struct ConvertRow {
    static constexpr bool DIRECT = false;
    void* out;
    uint64_t base;
    int out_dtype, dtype;
    __device__ void store(uint64_t c, T v) const { store_as<T>(out, base + c, out_dtype, dtype, v); }
};

// Up to TARGETS_PER_WARP targets from `first` of stream k's row `row`,
// placed together (as in resample_rows); valid is [K, B, T].
template <typename T, bool FLOAT, bool SLERP>
__device__ void fuse_chunk(const FusionStream& s, const FusionArgs& a, void* out, uint8_t* valid, uint64_t k,
                           uint64_t row, uint64_t first) {
    constexpr int R = TARGETS_PER_WARP;
    const uint64_t per = per_warp(a.targets_per_warp);
    const int active = (int)(a.targets - first < per ? a.targets - first : per);
    double q[R];
#pragma unroll
    for (int r = 0; r < R; r++) q[r] = r < active ? time_at(a.target, row, first + r) : 0.0;
    const uint64_t n = row_length(s.lengths, s.length_type, row, s.samples);
    Position p[R];
    locate_many<R>(s.source, row, n, q, active, p);
    T fill;
    memcpy(&fill, &s.fill_bits, sizeof(T));
    const T* x = (const T*)s.data + row * s.samples * s.channels;
#pragma unroll 1
    for (int r = 0; r < active; r++) {
        const uint64_t target = first + r;
        const uint64_t base = (row * a.targets + target) * a.width + s.out_offset;
        bool inside;
        if (a.out_dtype == s.dtype) {
            const DirectRow<T> o = {(T*)out + base};
            inside = resample_at<T, FLOAT, SLERP>(x, s.channels, s.source, row, n, q[r], p[r], s.groups,
                                                  s.group_count, s.boundary, fill, o);
        } else {
            const ConvertRow<T> o = {out, base, a.out_dtype, s.dtype};
            inside = resample_at<T, FLOAT, SLERP>(x, s.channels, s.source, row, n, q[r], p[r], s.groups,
                                                  s.group_count, s.boundary, fill, o);
        }
        if ((threadIdx.x & 31) == 0) valid[(k * a.batch + row) * a.targets + target] = inside ? 1 : 0;
    }
}

// One warp per (stream, row, up to TARGETS_PER_WARP targets); `valid` is [K, B, T].
template <bool SLERP>
__device__ void fuse_rows(void* out, uint8_t* valid, const FusionArgs& a) {
    const FusionStream* streams = a.stream_count <= FUSION_INLINE ? a.inline_streams : a.table;
    const uint64_t warps_per_block = blockDim.x / 32;
    const uint64_t per = per_warp(a.targets_per_warp);
    const uint64_t chunks = (a.targets + per - 1) / per;
    const uint64_t per_stream = a.batch * chunks;
    for (uint64_t w = (uint64_t)blockIdx.x * warps_per_block + threadIdx.x / 32; w < a.stream_count * per_stream;
         w += (uint64_t)gridDim.x * warps_per_block) {
        const uint64_t k = w / per_stream;
        const FusionStream& s = streams[k];
        const uint64_t row = (w % per_stream) / chunks, first = (w % chunks) * per;
        switch (s.dtype) {
            case DT_BOOL: case DT_U8: fuse_chunk<uint8_t, false, SLERP>(s, a, out, valid, k, row, first); break;
            case DT_I8: fuse_chunk<int8_t, false, SLERP>(s, a, out, valid, k, row, first); break;
            case DT_U16: fuse_chunk<uint16_t, false, SLERP>(s, a, out, valid, k, row, first); break;
            case DT_I16: fuse_chunk<int16_t, false, SLERP>(s, a, out, valid, k, row, first); break;
            case DT_U32: fuse_chunk<uint32_t, false, SLERP>(s, a, out, valid, k, row, first); break;
            case DT_I32: fuse_chunk<int32_t, false, SLERP>(s, a, out, valid, k, row, first); break;
            case DT_U64: fuse_chunk<uint64_t, false, SLERP>(s, a, out, valid, k, row, first); break;
            case DT_I64: fuse_chunk<int64_t, false, SLERP>(s, a, out, valid, k, row, first); break;
            case DT_F16: fuse_chunk<__half, true, SLERP>(s, a, out, valid, k, row, first); break;
            case DT_BF16: fuse_chunk<__nv_bfloat16, true, SLERP>(s, a, out, valid, k, row, first); break;
            case DT_F32: fuse_chunk<float, true, SLERP>(s, a, out, valid, k, row, first); break;
            default: fuse_chunk<double, true, SLERP>(s, a, out, valid, k, row, first); break;
        }
    }
}

extern "C" __global__ void fuse(void* out, uint8_t* valid, const __grid_constant__ FusionArgs a) {
    fuse_rows<true>(out, valid, a);
}

// Without slerp in any stream.
extern "C" __global__ void __launch_bounds__(128, 6) fuse_no_slerp(void* out, uint8_t* valid, const __grid_constant__ FusionArgs a) {
    fuse_rows<false>(out, valid, a);
}

// Tiled fusion (no slerp, float streams and output), pipelined like
// resample_tiles: each resident block takes every gridDim.x-th tile of `tile`
// targets of one row; its first threads place the next tile in every stream
// (one thread per stream and target) while the block moves every stream's
// words of the current one, straight into the output when its rows and
// offsets are 16-byte aligned and every dtype is the output's, else into a
// shared copy of the tile's output rows, written out in aligned words after
// a barrier. Dynamic shared memory: Placed[2][stream_count][tile], the
// chunk counters uint32_t[2][stream_count] (padded to 16 bytes), then the
// stage (tile * width elements and 16 bytes of skew) when staged.
template <typename O, bool STAGED>
__device__ void fuse_tiles(void* out_data, uint8_t* valid, int tile, const FusionArgs& a) {
    extern __shared__ uint4 shared_words[];
    const FusionStream* streams = a.stream_count <= FUSION_INLINE ? a.inline_streams : a.table;
    const uint64_t size = tile < 1 ? 1 : (tile > MAX_TILE ? MAX_TILE : tile);
    const uint64_t per_buffer = a.stream_count * size;
    Placed* placed = (Placed*)shared_words;
    uint32_t* claimed = (uint32_t*)(placed + 2 * per_buffer);
    unsigned char* stage_base = (unsigned char*)(claimed + (2 * a.stream_count + 3) / 4 * 4);  // 16-byte aligned
    const uint64_t tiles_per_row = (a.targets + size - 1) / size, tiles = a.batch * tiles_per_row;
    if (blockIdx.x >= tiles) return;
    // Threads place (stream, target) pairs of a tile into a buffer.
    const auto place = [&](uint64_t index, Placed* buffer) {
        const Tile t = tile_at(index, size, tiles_per_row, a.targets);
        for (uint64_t item = threadIdx.x; item < a.stream_count * t.count; item += blockDim.x) {
            const uint64_t k = item / t.count, j = item % t.count;
            const FusionStream& s = streams[k];
            const uint64_t n = row_length(s.lengths, s.length_type, t.row, s.samples);
            place_one(s.source, a.target, t.row, n, t.first + j, s.boundary, buffer + k * size + j,
                      valid + (k * a.batch + t.row) * a.targets + t.first + j);
        }
    };
    place(blockIdx.x, placed);
    for (uint64_t k = threadIdx.x; k < 2 * a.stream_count; k += blockDim.x) claimed[k] = 0;
    __syncthreads();
    int b = 0;
    for (uint64_t index = blockIdx.x; index < tiles; index += gridDim.x, b ^= 1) {
        if (index + gridDim.x < tiles) place(index + gridDim.x, placed + (b ^ 1) * per_buffer);
        const Tile t = tile_at(index, size, tiles_per_row, a.targets);
        O* out = (O*)out_data + (t.row * a.targets + t.first) * a.width;
        const uint64_t skew = STAGED ? (uintptr_t)out % 16 : 0;
        unsigned char* stage = stage_base + skew;
        for (uint64_t k = 0; k < a.stream_count; k++) {
            const FusionStream& s = streams[k];
            const uint64_t row_offset = t.row * s.samples * s.channels;
            const Placed* p = placed + b * per_buffer + k * size;
            uint32_t* counter = claimed + b * a.stream_count + k;
            if constexpr (STAGED) {
#define MOVE(T)                                                                                                 \
    move_stream_words<T, O, true, FUSE_STAGED_UNROLL>(s.data, row_offset, s.channels, s.groups, s.group_count,  \
                                                      s.fill_bits, p, (uint32_t)t.count, counter, out, stage,   \
                                                      a.width, s.out_offset);
                switch (s.dtype) {
                    case DT_F16: MOVE(__half) break;
                    case DT_BF16: MOVE(__nv_bfloat16) break;
                    case DT_F32: MOVE(float) break;
                    default: MOVE(double) break;  // the host launches tiles for float streams only
                }
            } else {  // every stream of the output dtype (the host checks)
                move_stream_words<O, O, false, FUSE_DIRECT_UNROLL>(s.data, row_offset, s.channels, s.groups,
                                                                   s.group_count, s.fill_bits, p, (uint32_t)t.count,
                                                                   counter, out, nullptr, a.width, s.out_offset);
            }
#undef MOVE
        }
        __syncthreads();  // tile i moved (into the stage) and tile i + 1 placed
        if constexpr (STAGED) {
            write_stage<O>(stage_base, skew, t.count * a.width * sizeof(O), out);
            __syncthreads();
        }
        // This buffer's counters, for tile i + 2 (after the next barrier).
        for (uint64_t k = threadIdx.x; k < a.stream_count; k += blockDim.x) claimed[b * a.stream_count + k] = 0;
    }
}

// Straight into the output: four blocks per SM (64 registers, no spills), one
// word a thread per claim.
#define FUSE_TILED_KERNEL(NAME, O)                                                                        \
    extern "C" __global__ void __launch_bounds__(TILE_WARPS * 32, 4)                                      \
        NAME(void* out, uint8_t* valid, int tile, const __grid_constant__ FusionArgs a) {                \
        fuse_tiles<O, false>(out, valid, tile, a);                                                        \
    }
// Through shared memory (every float dtype of stream): three blocks per SM,
// since at four (64 registers) even two words in flight spill.
#define FUSE_STAGED_KERNEL(NAME, O)                                                                       \
    extern "C" __global__ void __launch_bounds__(TILE_WARPS * 32, 3)                                      \
        NAME(void* out, uint8_t* valid, int tile, const __grid_constant__ FusionArgs a) {                \
        fuse_tiles<O, true>(out, valid, tile, a);                                                         \
    }

FUSE_TILED_KERNEL(fuse_tiled_f16, __half)
FUSE_TILED_KERNEL(fuse_tiled_bf16, __nv_bfloat16)
FUSE_TILED_KERNEL(fuse_tiled_f32, float)
FUSE_TILED_KERNEL(fuse_tiled_f64, double)
FUSE_STAGED_KERNEL(fuse_staged_f16, __half)
FUSE_STAGED_KERNEL(fuse_staged_bf16, __nv_bfloat16)
FUSE_STAGED_KERNEL(fuse_staged_f32, float)
FUSE_STAGED_KERNEL(fuse_staged_f64, double)

// Checks the data a resample needs before launch (unless trusted), in the
// order the CPU reference checks it: valid lengths in 1..=S (kind 1), finite
// target times (kind 2), and each row's first n source times finite and
// strictly increasing (kind 3; subtype 0 non-finite, 1 not increasing). The
// first failure wins through an atomic min on
// (kind << 60) | (flat position << 1) | subtype, the same whatever the schedule;
// the host decodes it (0xFFFF... means no failure).
extern "C" __global__ void resample_check(ResampleArgs a, unsigned long long* status) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    const uint64_t first = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (uint64_t row = first; row < a.batch && a.length_type != INDEX_NONE; row += stride) {
        long long n;
        switch (a.length_type) {
            case INDEX_U32: n = ((const uint32_t*)a.lengths)[row]; break;
            case INDEX_U64: {
                uint64_t v = ((const uint64_t*)a.lengths)[row];
                n = v > a.samples ? -1 : (long long)v;
                break;
            }
            case INDEX_I32: n = ((const int32_t*)a.lengths)[row]; break;
            default: n = ((const int64_t*)a.lengths)[row]; break;
        }
        if (n < 1 || (unsigned long long)n > a.samples) atomicMin(status, (1ull << 60) | (row << 1));
    }
    if (a.target.mode != TIMES_UNIFORM) {
        const uint64_t count = (a.target.mode == TIMES_PER_ROW ? a.batch : 1) * a.targets;
        for (uint64_t i = first; i < count; i += stride) {
            if (!isfinite(a.target.times[i])) atomicMin(status, (2ull << 60) | (i << 1));
        }
    }
    const uint64_t source_rows = a.source.mode == TIMES_PER_ROW ? a.batch : 1;
    for (uint64_t i = first; i < source_rows * a.samples && a.source.mode != TIMES_UNIFORM; i += stride) {
        const uint64_t row = i / a.samples, index = i % a.samples;
        // Shared times are checked up to the longest row.
        uint64_t n = 0;
        if (a.source.mode == TIMES_PER_ROW) n = row_length(a.lengths, a.length_type, row, a.samples);
        else for (uint64_t r = 0; r < a.batch && n < a.samples; r++) {
            uint64_t m = row_length(a.lengths, a.length_type, r, a.samples);
            n = m > n ? m : n;
        }
        if (index >= n) continue;
        const double s = a.source.times[i];
        if (!isfinite(s)) atomicMin(status, (3ull << 60) | (i << 1));
        else if (index > 0 && isfinite(a.source.times[i - 1]) && !(s > a.source.times[i - 1]))
            atomicMin(status, (3ull << 60) | (i << 1) | 1);
    }
}


// ---- Batch assembly from resident episodes (the loader's GPU-resident mode) --
//
// Every episode of a stream lives on the device once, concatenated
// ([rows_total, channels] f32 with a table of episodes). A batch is B
// samples (episode, anchor); one launch computes every stream of every
// window (one warp per stream, sample and target): time windows resample onto anchor + (k - history) / hz
// exactly as `resample` does (same search, weights and rounding, clamp
// boundary), step windows gather rows anchor + k - history with the edges
// repeated. The mask is false outside the episode, or true there when
// pad_masks is set (LeRobot's `_is_pad`). Causal time windows (`causal`, the
// host passing one METHOD_PREVIOUS group a stream) hold the last sample at
// or before each target, valid; before the episode's first sample, zeros
// and padding.

extern "C" __global__ void assemble_windows(AssembleArgs a) {
    const uint64_t warps_per_block = blockDim.x / 32;
    const uint64_t lane = threadIdx.x & 31;
    const uint64_t rows = a.batch * a.targets;
    for (uint64_t all = (uint64_t)blockIdx.x * warps_per_block + threadIdx.x / 32; all < a.stream_count * rows;
         all += (uint64_t)gridDim.x * warps_per_block) {
        const ResidentStream& s = a.streams[all / rows];
        const uint64_t flat = all % rows;
        const uint64_t b = flat / a.targets, k = flat % a.targets;
        uint64_t e = a.sample_episode[b];
        if (e >= a.episode_count) e = a.episode_count - 1;  // checked on the host; never out of bounds
        const ResidentEpisode ep = s.episodes[e];
        const float* x = s.data + ep.row_offset * s.channels;
        float* o = s.out + flat * s.channels;
        bool inside;
        if (a.step_windows) {
            const long long r = (long long)a.sample_anchor[b] + (long long)k - a.history;
            inside = r >= 0 && r < (long long)ep.rows;
            const uint64_t row = r < 0 ? 0 : (r >= (long long)ep.rows ? ep.rows - 1 : (uint64_t)r);
            for (uint64_t c = lane; c < s.channels; c += 32) o[c] = x[row * s.channels + c];
        } else {
            Timeline t;
            t.times = s.times ? s.times + ep.time_offset : nullptr;
            t.mode = ep.uniform ? TIMES_UNIFORM : TIMES_SHARED;
            t.start = ep.start;
            t.hz = ep.hz;
            t.len = ep.rows;
            const double q = __dadd_rn(a.sample_anchor[b], __ddiv_rn((double)((long long)k - a.history), a.hz));
            const DirectRow<float> row = {o};
            if (a.causal && !(q >= (ep.uniform ? ep.start : t.times[0]))) {
                // Causal windows: nothing at or before q, so padding and zeros.
                for (uint64_t c = lane; c < s.channels; c += 32) o[c] = 0.0f;
                inside = false;
            } else {
                inside = resample_row<float, true, true>(x, s.channels, t, 0, ep.rows, q, s.groups, s.group_count,
                                                    BOUNDARY_CLAMP, 0.0f, row);
                // Causal windows hold the last sample at or before q: valid.
                if (a.causal) inside = true;
            }
        }
        if (lane == 0) s.valid[flat] = (inside ? 1 : 0) ^ (a.pad_masks ? 1 : 0);
    }
}

// Masks flipped in place (valid to padding and back): the loader's streamed
// streams when padding masks are asked for. One byte per thread.
extern "C" __global__ void flip_masks(unsigned char* mask, uint64_t n) {
    const uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) mask[i] ^= 1;
}

// Blocks of rows copied between device buffers in one launch (a mixture
// batch's members' rows into its padded outputs). `table` holds six words
// a block: source and destination addresses, rows, bytes of a row, and the
// source and destination pitches in bytes. Thread block k copies part
// k % parts of block k / parts, its threads a byte each in turn.
extern "C" __global__ void copy_row_blocks(const uint64_t* table, uint64_t blocks, uint64_t parts) {
    const uint64_t b = blockIdx.x / parts;
    if (b >= blocks) return;
    const uint64_t* entry = table + 6 * b;
    const unsigned char* from = (const unsigned char*)entry[0];
    unsigned char* to = (unsigned char*)entry[1];
    const uint64_t rows = entry[2], width = entry[3], from_pitch = entry[4], to_pitch = entry[5];
    const uint64_t total = rows * width;
    const uint64_t stride = parts * blockDim.x;
    for (uint64_t i = (blockIdx.x % parts) * blockDim.x + threadIdx.x; i < total; i += stride) {
        const uint64_t row = i / width;
        const uint64_t column = i - row * width;
        to[row * to_pitch + column] = from[row * from_pitch + column];
    }
}
