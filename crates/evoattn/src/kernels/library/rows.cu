// The library paths' row kernel (#38): over one chunk of materialised scores S = Q·Kᵀ
// (kernels/library/geometry.rs lays them out; `lse_index` there is this kernel's LSE index), each row's scale, mask, max, exponentials,
// sum and LSE, then P = softmax(S) in the input dtype, written over S in place from the start
// of each row (so cuBLASLt's P·V reads P at `p_ld` elements a row). One block a row, three
// passes over it: the max, the sum, then P. Masked keys and keys past a row's last visible one
// get P = 0 (the P·V GEMM runs over all Sk keys); a row that sees no key gets LSE = -inf and so
// O = 0, as every kernel of the library does.
#include "common.cuh"

#define THREADS EVOATTN_THREADS
// 1: S in float32; 0: S in the input dtype.
#define SCORES_F32 EVOATTN_SCORES_F32

#if SCORES_F32
typedef float score_t;
__device__ __forceinline__ float score_to_float(score_t x) { return x; }
#else
typedef elem_t score_t;
#define score_to_float elem_to_float
#endif

// One chunk's S and its units (kernels/library/geometry.rs); mirrored by
// `runtime::library::RowsChunk`, field for field. The problem's sizes, mask, scale and LSE are
// AttnParams'.
struct RowsChunk {
    void* s;     // the chunk's S; P over it
    i64 ld;      // S's elements a row
    int first_unit, unit_rows, unit_heads;
    int bk_units;  // B * Hkv: the units of one part of the groups' heads
};

__device__ float block_reduce(float x, bool take_max, float* scratch) {
    for (int off = 16; off > 0; off >>= 1) {
        const float y = __shfl_xor_sync(0xffffffffu, x, off);
        x = take_max ? fmaxf(x, y) : x + y;
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();  // the scratch's previous readers are done
    if (lane == 0) scratch[warp] = x;
    __syncthreads();
    x = scratch[0];
    for (int w = 1; w < THREADS / 32; ++w) x = take_max ? fmaxf(x, scratch[w]) : x + scratch[w];
    return x;
}

extern "C" __global__ void __launch_bounds__(THREADS) EVOATTN_KERNEL_NAME(const AttnParams p, const RowsChunk c) {
    __shared__ float scratch[THREADS / 32];
    const int row = blockIdx.x;
    const int unit = c.first_unit + row / c.unit_rows, unit_row = row % c.unit_rows;
    const int query = unit_row % p.sq;
    const score_t* s = (const score_t*)c.s + (i64)row * c.ld;
    // P's row stride in 16-bit elements: geometry.rs's `ScoreLayout::p_ld`.
    elem_t* prob = (elem_t*)c.s + (i64)row * (c.ld * (i64)sizeof(score_t) / 2);

    int n = p.sk;
    if (p.causal) n = max(0, min(p.sk, query + p.causal_offset + 1));

    float m = NEG_INF;
    for (int j = threadIdx.x; j < n; j += THREADS) m = fmaxf(m, score_to_float(s[j]) * p.scale_log2);
    m = block_reduce(m, true, scratch);
    float sum = 0.f;
    for (int j = threadIdx.x; j < n; j += THREADS) sum += exp2f(score_to_float(s[j]) * p.scale_log2 - m);
    sum = block_reduce(sum, false, scratch);
    const float inv = sum > 0.f ? 1.f / sum : 0.f;

    // P over S: a 16-bit P[j] overlaps the f32 S[j / 2], which another thread of the same
    // round may still read; every round reads, then writes after the barrier. Later rounds
    // read past what earlier ones wrote (4 bytes a score read, 2 a probability written).
    for (int base = 0; base < p.sk; base += THREADS) {
        const int j = base + threadIdx.x;
        const float x = j < n ? exp2f(score_to_float(s[j]) * p.scale_log2 - m) * inv : 0.f;
        __syncthreads();
        if (j < p.sk) prob[j] = float_to_elem(x);
    }
    if (p.lse != 0 && threadIdx.x == 0) {
        const int bk = unit % c.bk_units, part = unit / c.bk_units;
        const int batch = bk / p.hkv, head = (bk % p.hkv) * (p.h / p.hkv) + part * c.unit_heads + unit_row / p.sq;
        p.lse[((i64)batch * p.h + head) * p.sq + query] = sum > 0.f ? (m + log2f(sum)) * LN2 : NEG_INF;
    }
}
