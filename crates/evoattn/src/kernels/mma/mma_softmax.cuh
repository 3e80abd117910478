// `mma` online softmax in exp2 form. Each thread holds two rows (g and g+8) of its warp's
// 16; a row's values are spread over the 4 lanes of a quad, so row reductions are two
// shuffles. Row max `m` is kept in log2 units (scores pre-multiplied by scale·log2e); the
// row sum `l` is kept per thread and reduced across the quad only once, at the end.
#pragma once
#include "mma_mainloop.cuh"
#include "row_state.cuh"

// Scales S into log2 units and sets masked entries to -inf. `row0` is the tile row of this
// thread's first row (g); tile row r holds query r / rows_per_query (1 unless `splitkv` packs
// the query heads of one KV head into the tile); `key0` is the global key of the tile's
// first column.
template <bool MASK>
__device__ __forceinline__ void scale_and_mask(float (&s)[S_TILES][4], const AttnParams& p, int row0, int key0,
                                               int rows_per_query) {
    const int t = threadIdx.x % 4;
#pragma unroll
    for (int nt = 0; nt < S_TILES; ++nt) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            float x = s[nt][i] * p.scale_log2;
            if (MASK) {
                const int row = row0 + (i / 2) * 8, key = key0 + nt * 8 + 2 * t + (i % 2);
                const bool hidden = key >= p.sk || (p.causal && key > row / rows_per_query + p.causal_offset);
                x = hidden ? NEG_INF : x;
            }
            s[nt][i] = x;
        }
    }
}

// The main loop over the ring's key blocks: S = Q·Kᵀ, mask, online softmax, O += P·V, from a
// zero accumulator, after `start_pipeline`; returns with no copy in flight. The warp attends to
// keys [key_lo, key_lo + WARP_KEYS) of every tile (all of them unless KEY_WARPS > 1). Tiles
// whose keys are all below `first_row_keys` (what the block's first query sees) skip the mask.
__device__ __forceinline__ void attend_keys(const AttnParams& p, const KvRing& ring, const QFrags& q_frag, int row0,
                                            int rows_per_query, int first_row_keys, int key_lo,
                                            float (&acc)[O_TILES][4], RowState& st) {
#pragma unroll
    for (int nt = 0; nt < O_TILES; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
    row_state_init(st);
    for (int j = ring.begin; j < ring.end; ++j) {
        ring.load(j + STAGES - 1);
        ring.wait(j);
        float s[S_TILES][4];
        gemm_qk(s, ring.k_tile(j), key_lo, q_frag);
        if ((j + 1) * BN > first_row_keys) {
            scale_and_mask<true>(s, p, row0, j * BN + key_lo, rows_per_query);
        } else {
            scale_and_mask<false>(s, p, row0, j * BN + key_lo, rows_per_query);
        }
        online_softmax_step(s, acc, st, 0.f);
#if EVOATTN_PATHOLOGY_BARRIER
        __syncthreads();  // inversion (`evoattn invert`): one more barrier a key block
#endif
        gemm_pv(acc, s, ring.v_tile(j), key_lo);
        __syncthreads();  // the next iteration's prefetch overwrites this stage
    }
    cp_async_wait<0>();  // (cp.async) the empty groups past `end`
}
