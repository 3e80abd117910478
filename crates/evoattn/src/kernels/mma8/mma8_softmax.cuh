// `mma8` online softmax in exp2 form, as `mma`'s, with FP8's two differences: the scores'
// scale folds in the descales of Q and K, and P is scaled by 2^P_LOG2_SCALE (ptx_fp8.cuh). The
// row sums keep the scaled, unrounded weights, so the scale cancels in O = acc / l; the LSE
// subtracts it.
#pragma once
#include "mma8_mainloop.cuh"
#include "row_state.cuh"

// Scales S into log2 units (`scale_log2`: the softmax scale · log2(e) · q_descale · k_descale)
// and sets masked entries to -inf. `row0` is this thread's first row (g), `key0` the tile's
// first key.
template <bool MASK>
__device__ __forceinline__ void scale_and_mask(float (&s)[S_TILES][4], const AttnParams& p, float scale_log2,
                                               int row0, int key0) {
    const int t = threadIdx.x % 4;
#pragma unroll
    for (int nt = 0; nt < S_TILES; ++nt) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            float x = s[nt][i] * scale_log2;
            if (MASK) {
                const int row = row0 + (i / 2) * 8, key = key0 + nt * 8 + 2 * t + (i % 2);
                const bool hidden = key >= p.sk || (p.causal && key > row + p.causal_offset);
                x = hidden ? NEG_INF : x;
            }
            s[nt][i] = x;
        }
    }
}

// The main loop over the ring's key blocks: S = Q·Kᵀ, mask, online softmax, O += P·V (the
// warp's columns from `d0`), from a zero accumulator; returns with no copy in flight. Warps
// sharing rows compute the same S and row state, each its own part of O. Tiles whose keys are all below
// `first_row_keys` (what the block's first query sees) skip the mask.
__device__ __forceinline__ void attend_keys(const AttnParams& p, float scale_log2, const KvRing& ring,
                                            const QFrags& q_frag, int row0, int d0, int first_row_keys,
                                            float (&acc)[O_TILES][4], RowState& st) {
#pragma unroll
    for (int nt = 0; nt < O_TILES; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
    row_state_init(st);
    for (int j = 0; j < ring.end; ++j) {
        ring.load(j + STAGES - 1);
        ring.wait(j);
        float s[S_TILES][4];
        gemm_qk(s, ring.k_tile(j), q_frag);
        if ((j + 1) * BN > first_row_keys) {
            scale_and_mask<true>(s, p, scale_log2, row0, j * BN);
        } else {
            scale_and_mask<false>(s, p, scale_log2, row0, j * BN);
        }
        online_softmax_step(s, acc, st, P_LOG2_SCALE);
        gemm_pv(acc, s, ring.v_tile(j), d0);
        __syncthreads();  // the next iteration's prefetch overwrites this stage
    }
    cp_async_wait<0>();  // the empty groups past `end`
}
