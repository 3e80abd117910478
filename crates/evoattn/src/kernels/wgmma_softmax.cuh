// `wgmma` online softmax in exp2 form, on the fp32 accumulator fragment of S.
//
// Fragment (ptx_sm90.cuh): in its warpgroup, warp w owns rows 16w..16w+15; lane = 4g + t holds
// rows g (r = 0) and g + 8 (r = 1), and for each 8-column chunk i the columns 8i + 2t and
// 8i + 2t + 1 as accumulators 4i + 2r and 4i + 2r + 1. A row's values are spread over the 4
// lanes of a quad, so row reductions are two shuffles. The running max `m` is kept in log2
// units (scores pre-multiplied by scale·log2e); the running sum `l` per thread, reduced across
// the quad once, in the epilogue. The masking semantics are the `mma` kernel's.
#pragma once
#include "wgmma_scheduler.cuh"
#include "row_state.cuh"

// Scales S into log2 units and sets hidden entries (keys past Sk, or past the causal diagonal)
// to -inf. `row0` is the global row of this thread's first row (g); `key0` the tile's first key.
template <bool MASK>
__device__ __forceinline__ void scale_and_mask(float (&s)[S_REGS], const AttnParams& p, int row0, int key0) {
    const int t = threadIdx.x % 4;
#pragma unroll
    for (int i = 0; i < S_REGS; ++i) {
        float x = s[i] * p.scale_log2;
        if (MASK) {
            const int row = row0 + ((i / 2) % 2) * 8, key = key0 + (i / 4) * 8 + 2 * t + (i % 2);
            const bool hidden = key >= p.sk || (p.causal && key > row + p.causal_offset);
            x = hidden ? NEG_INF : x;
        }
        s[i] = x;
    }
}

// Scales and masks key block j of tile `t`, with the mask only where the block needs it.
__device__ __forceinline__ void scale_and_mask_block(float (&s)[S_REGS], const AttnParams& p, const WorkTile& t,
                                                     int row0, int j) {
    if (needs_mask(t, j)) {
        scale_and_mask<true>(s, p, row0, j * BN);
    } else {
        scale_and_mask<false>(s, p, row0, j * BN);
    }
}

// Turns scaled scores into probabilities relative to the new running max and folds them into
// the running sum; returns, per row, the factor exp2(m_old - m_new) by which the output
// accumulator must be rescaled (`rescale_output`). Apart from it so that a pipelined loop can
// compute probabilities while the previous P·V still accumulates into O.
__device__ __forceinline__ void softmax_step(float (&s)[S_REGS], RowState& st, float (&correction)[2]) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        float mx = st.m[r];
#pragma unroll
        for (int i = 0; i < S_REGS / 4; ++i) mx = fmaxf(mx, fmaxf(s[4 * i + 2 * r], s[4 * i + 2 * r + 1]));
        mx = quad_max(mx);
        // A row with every key masked so far keeps m = -inf; subtract 0 instead of -inf so
        // exp2 gives 0, not NaN.
        const float base = mx == NEG_INF ? 0.f : mx;
        correction[r] = fast_exp2(st.m[r] - base);
        st.m[r] = mx;
        float sum = 0.f;
#pragma unroll
        for (int i = 0; i < S_REGS / 4; ++i) {
            s[4 * i + 2 * r] = fast_exp2(s[4 * i + 2 * r] - base);
            s[4 * i + 2 * r + 1] = fast_exp2(s[4 * i + 2 * r + 1] - base);
            sum += s[4 * i + 2 * r] + s[4 * i + 2 * r + 1];
        }
        st.l[r] = st.l[r] * correction[r] + sum;
    }
}

__device__ __forceinline__ void rescale_output(float (&o)[O_REGS], const float (&correction)[2]) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
#pragma unroll
        for (int i = 0; i < O_REGS / 4; ++i) {
            o[4 * i + 2 * r] *= correction[r];
            o[4 * i + 2 * r + 1] *= correction[r];
        }
    }
}

// Both steps, for loops that rescale O right away.
__device__ __forceinline__ void online_softmax(float (&s)[S_REGS], float (&o)[O_REGS], RowState& st) {
    float correction[2];
    softmax_step(s, st, correction);
    rescale_output(o, correction);
}
