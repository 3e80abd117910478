// The `reference` kernel: one block per (query row, head, batch), float32 throughout, two
// passes over the keys (row max, then exp-sum and P·V). Deliberately simple and sharing no
// code with the fast paths beyond the parameter struct, so that it can judge them. Scores are
// computed a warp per key (lanes across D, so K rows are read coalesced): at S = 16k the
// reference must still take well under a second.
#include "common.cuh"

#define THREADS EVOATTN_THREADS
#define D EVOATTN_HEAD_DIM
#define COLS_PER_THREAD ((D + THREADS - 1) / THREADS)
#define WARPS (THREADS / 32)

// The scaled score of key j, in every lane of the calling warp.
__device__ __forceinline__ float score(const float* q_row, const elem_t* k_row, float scale) {
    const int lane = threadIdx.x % 32;
    float s = 0.f;
    for (int d = lane; d < D; d += 32) s += q_row[d] * elem_to_float(k_row[d]);
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

extern "C" __global__ void EVOATTN_KERNEL_NAME(const AttnParams p) {
    extern __shared__ float smem[];
    float* q_row = smem;        // [D]
    float* probs = smem + D;    // [THREADS]: one key's probability per thread
    __shared__ float scratch[32];

    const int row = blockIdx.x, head = blockIdx.y, batch = blockIdx.z;
    const int kv_head = head / (p.h / p.hkv);
    const elem_t* q = p.q + batch * p.q_batch + head * p.q_head + (i64)row * p.q_seq;
    const elem_t* k = p.k + batch * p.k_batch + kv_head * p.k_head;
    const elem_t* v = p.v + batch * p.v_batch + kv_head * p.v_head;
    elem_t* o = p.o + batch * p.o_batch + head * p.o_head + (i64)row * p.o_seq;
    const float scale = p.scale_log2 / LOG2E;

    for (int d = threadIdx.x; d < D; d += THREADS) q_row[d] = elem_to_float(q[d]);
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
            const elem_t* v_row = v + (i64)(base + jj) * p.v_seq;
#pragma unroll
            for (int c = 0; c < COLS_PER_THREAD; ++c) {
                const int d = threadIdx.x + c * THREADS;
                if (d < D) acc[c] += pj * elem_to_float(v_row[d]);
            }
        }
    }
    sum = block_reduce(sum, false, scratch);

    const float inv = sum > 0.f ? 1.f / sum : 0.f;
#pragma unroll
    for (int c = 0; c < COLS_PER_THREAD; ++c) {
        const int d = threadIdx.x + c * THREADS;
        if (d < D) o[d] = float_to_elem(acc[c] * inv);
    }
    if (p.lse != 0 && threadIdx.x == 0) {
        p.lse[((i64)batch * p.h + head) * p.sq + row] = sum > 0.f ? row_max + logf(sum) : NEG_INF;
    }
}
