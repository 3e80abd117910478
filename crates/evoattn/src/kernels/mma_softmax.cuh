// `mma` online softmax in exp2 form. Each thread holds two rows (g and g+8) of its warp's
// 16; a row's values are spread over the 4 lanes of a quad, so row reductions are two
// shuffles. Row max `m` is kept in log2 units (scores pre-multiplied by scale·log2e); the
// row sum `l` is kept per thread and reduced across the quad only once, at the end.
#pragma once
#include "mma_mainloop.cuh"
#include "row_state.cuh"

// Scales S into log2 units and sets masked entries to -inf. `row0` is the global row of this
// thread's first row (g); `key0` the global key of the tile's first column.
template <bool MASK>
__device__ __forceinline__ void scale_and_mask(float (&s)[S_TILES][4], const AttnParams& p, int row0, int key0) {
    const int t = threadIdx.x % 4;
#pragma unroll
    for (int nt = 0; nt < S_TILES; ++nt) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            float x = s[nt][i] * p.scale_log2;
            if (MASK) {
                const int row = row0 + (i / 2) * 8, key = key0 + nt * 8 + 2 * t + (i % 2);
                const bool hidden = key >= p.sk || (p.causal && key > row + p.causal_offset);
                x = hidden ? NEG_INF : x;
            }
            s[nt][i] = x;
        }
    }
}

// Turns scaled scores into probabilities relative to the new running max, and rescales the
// output accumulator and the running sum by exp2(m_old - m_new).
__device__ __forceinline__ void online_softmax(float (&s)[S_TILES][4], float (&o)[O_TILES][4], RowState& st) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        float mx = st.m[r];
#pragma unroll
        for (int nt = 0; nt < S_TILES; ++nt) mx = fmaxf(mx, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
        mx = quad_max(mx);
        // A row with every key masked so far keeps m = -inf; subtract 0 instead of -inf so
        // exp2 gives 0, not NaN.
        const float base = mx == NEG_INF ? 0.f : mx;
        const float correction = fast_exp2(st.m[r] - base);
        st.m[r] = mx;
        float sum = 0.f;
#pragma unroll
        for (int nt = 0; nt < S_TILES; ++nt) {
            s[nt][2 * r] = fast_exp2(s[nt][2 * r] - base);
            s[nt][2 * r + 1] = fast_exp2(s[nt][2 * r + 1] - base);
            sum += s[nt][2 * r] + s[nt][2 * r + 1];
        }
        st.l[r] = st.l[r] * correction + sum;
#pragma unroll
        for (int nt = 0; nt < O_TILES; ++nt) {
            o[nt][2 * r] *= correction;
            o[nt][2 * r + 1] *= correction;
        }
    }
}
