// The `reference` kernel: one block per (query row, head, batch), float32 throughout, two
// passes over the keys (row max, then exp-sum and P·V). Deliberately simple and sharing no
// code with the fast paths beyond the parameter struct, so that it can judge them. Scores are
// computed a warp per key (lanes across D, so K rows are read coalesced): at S = 16k the
// reference must still take well under a second.
//
// With EVOATTN_FP8 the inputs are E4M3 bytes, decoded by bit arithmetic (no FP8 instruction, so
// every arch runs it) and dequantized by their descales in float32; O is written in bf16.
#include "common.cuh"

#if EVOATTN_FP8
typedef unsigned char in_t;

// An E4M3 byte's value (crate::fp8::e4m3_to_f32): normals by their float32 bit pattern,
// subnormals as m * 2^-9, S.1111.111 as NaN.
__device__ __forceinline__ float in_to_float(in_t x) {
    const u32 sign = (u32)(x & 0x80) << 24, exp = (x >> 3) & 0xf, man = x & 0x7;
    if ((x & 0x7f) == 0x7f) return __int_as_float(0x7fc00000);
    const float mag = exp == 0 ? (float)man * 0.001953125f : __uint_as_float(((exp + 120) << 23) | (man << 20));
    return __uint_as_float(__float_as_uint(mag) | sign);
}
#else
typedef elem_t in_t;
#define in_to_float elem_to_float
#endif

#define THREADS EVOATTN_THREADS
#define D EVOATTN_HEAD_DIM
#define COLS_PER_THREAD ((D + THREADS - 1) / THREADS)
#define WARPS (THREADS / 32)

// The scaled score of key j, in every lane of the calling warp.
__device__ __forceinline__ float score(const float* q_row, const in_t* k_row, float scale) {
    const int lane = threadIdx.x % 32;
    float s = 0.f;
    for (int d = lane; d < D; d += 32) s += q_row[d] * in_to_float(k_row[d]);
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    return s * scale;
}

__device__ float block_reduce(float x, bool take_max, float* scratch) {
    for (int off = 16; off > 0; off >>= 1) {
        float y = __shfl_xor_sync(0xffffffffu, x, off);
        x = take_max ? fmaxf(x, y) : x + y;
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();
    if (lane == 0) scratch[warp] = x;
    __syncthreads();
    x = scratch[0];
    for (int w = 1; w < THREADS / 32; ++w) x = take_max ? fmaxf(x, scratch[w]) : x + scratch[w];
    return x;
}

#if EVOATTN_FP8
// `descale`: float32 [3, B, Hkv], q's, k's then v's.
extern "C" __global__ void EVOATTN_KERNEL_NAME(const AttnParams p, const float* __restrict__ descale) {
#else
extern "C" __global__ void EVOATTN_KERNEL_NAME(const AttnParams p) {
#endif
    extern __shared__ float smem[];
    float* q_row = smem;        // [D]
    float* probs = smem + D;    // [THREADS]: one key's probability per thread
    __shared__ float scratch[32];

    const int row = blockIdx.x, head = blockIdx.y, batch = blockIdx.z;
    const int kv_head = head / (p.h / p.hkv);
    const in_t* q = (const in_t*)p.q + batch * p.q_batch + head * p.q_head + (i64)row * p.q_seq;
    const in_t* k = (const in_t*)p.k + batch * p.k_batch + kv_head * p.k_head;
    const in_t* v = (const in_t*)p.v + batch * p.v_batch + kv_head * p.v_head;
    elem_t* o = p.o + batch * p.o_batch + head * p.o_head + (i64)row * p.o_seq;
#if EVOATTN_FP8
    const int group = batch * p.hkv + kv_head, groups = p.b * p.hkv;
    const float q_descale = descale[group], v_descale = descale[2 * groups + group];
    const float scale = p.scale_log2 / LOG2E * descale[groups + group];  // K's descale
#else
    const float q_descale = 1.f, v_descale = 1.f;
    const float scale = p.scale_log2 / LOG2E;
#endif

    for (int d = threadIdx.x; d < D; d += THREADS) q_row[d] = in_to_float(q[d]) * q_descale;
    __syncthreads();
    const int n_keys = visible_keys(p, row);

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

    // Pass 1: the row max of the scaled scores.
    float row_max = NEG_INF;
    for (int j = warp; j < n_keys; j += WARPS) row_max = fmaxf(row_max, score(q_row, k + (i64)j * p.k_seq, scale));
    row_max = block_reduce(row_max, true, scratch);

    // Pass 2: probabilities chunk by chunk; each thread owns output columns.
    float acc[COLS_PER_THREAD];
#pragma unroll
    for (int c = 0; c < COLS_PER_THREAD; ++c) acc[c] = 0.f;
    float sum = 0.f;
    for (int base = 0; base < n_keys; base += THREADS) {
        __syncthreads();  // the previous chunk's probabilities are consumed
        for (int jj = warp; jj < THREADS; jj += WARPS) {
            const int j = base + jj;
            const float pr = j < n_keys ? expf(score(q_row, k + (i64)j * p.k_seq, scale) - row_max) : 0.f;
            if (lane == 0) {
                probs[jj] = pr;
                sum += pr;
            }
        }
        __syncthreads();
        const int chunk = min(THREADS, n_keys - base);
        for (int jj = 0; jj < chunk; ++jj) {
            const float pj = probs[jj];
            const in_t* v_row = v + (i64)(base + jj) * p.v_seq;
#pragma unroll
            for (int c = 0; c < COLS_PER_THREAD; ++c) {
                const int d = threadIdx.x + c * THREADS;
                if (d < D) acc[c] += pj * in_to_float(v_row[d]);
            }
        }
    }
    sum = block_reduce(sum, false, scratch);

    const float inv = sum > 0.f ? v_descale / sum : 0.f;
#pragma unroll
    for (int c = 0; c < COLS_PER_THREAD; ++c) {
        const int d = threadIdx.x + c * THREADS;
        if (d < D) o[d] = float_to_elem(acc[c] * inv);
    }
    if (p.lse != 0 && threadIdx.x == 0) {
        p.lse[((i64)batch * p.h + head) * p.sq + row] = sum > 0.f ? row_max + logf(sum) : NEG_INF;
    }
}
