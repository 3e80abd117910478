// The per-thread state of an online softmax over mma/wgmma accumulator fragments, shared by
// the `mma` and `wgmma` kernels: both fragments give each thread two rows (g and g+8 of a
// 16-row slice) whose values are spread over the 4 lanes of a quad, so a row reduction is two
// shuffles.
#pragma once
#include "common.cuh"

// Inversion pathologies (`evoattn invert`): defines that only its variants set, so no default
// kernel changes. EVOATTN_PATHOLOGY_DIVERGENT: once a key block, in the softmax, odd lanes take
// a branch the even ones skip, so every warp runs both paths.
#if EVOATTN_PATHOLOGY_DIVERGENT
__device__ __forceinline__ void pathology_diverge() {
    if (threadIdx.x & 1) asm volatile("nanosleep.u32 100;");
}
#else
__device__ __forceinline__ void pathology_diverge() {}
#endif

struct RowState {
    float m[2];  // running max of scaled scores, log2 units
    float l[2];  // this thread's share of the running sum of exp2(x - m)
};

__device__ __forceinline__ void row_state_init(RowState& st) {
    st.m[0] = st.m[1] = NEG_INF;
    st.l[0] = st.l[1] = 0.f;
}

// Folds another partial state of row r (its max and this thread's share of its sum, over
// other keys) into st; the partials' O fragments then combine as o * keep + o_other * take.
__device__ __forceinline__ void merge_row(RowState& st, int r, float m_other, float l_other, float& keep,
                                          float& take) {
    const float mx = fmaxf(st.m[r], m_other);
    // Both -inf (no key seen by either): scale by exp2(-inf) = 0, not NaN.
    const float base = mx == NEG_INF ? 0.f : mx;
    keep = fast_exp2(st.m[r] - base);
    take = fast_exp2(m_other - base);
    st.m[r] = mx;
    st.l[r] = st.l[r] * keep + l_other * take;
}

__device__ __forceinline__ float quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Kernels that scale scores inside the exponent reduce raw scores: the largest scaled score is
// the largest raw one times the scale when the scale is positive, the smallest when it is
// negative (a problem may ask for any finite non-zero scale). Call with a compile-time sign: a
// run-time one makes ptxas predicate both FMNMX forms for every pair.
__device__ __forceinline__ float score_extreme(float a, float b, bool positive_scale) {
    return positive_scale ? fmaxf(a, b) : fminf(a, b);
}

__device__ __forceinline__ float quad_extreme(float x, bool positive_scale) {
    x = score_extreme(x, __shfl_xor_sync(0xffffffffu, x, 1), positive_scale);
    return score_extreme(x, __shfl_xor_sync(0xffffffffu, x, 2), positive_scale);
}

__device__ __forceinline__ float quad_max(float x) {
    return quad_extreme(x, true);
}

// The raw score that a hidden key gets: it becomes -inf once multiplied by the scale.
__device__ __forceinline__ float hidden_score(float scale_log2) {
    return scale_log2 > 0.f ? NEG_INF : -NEG_INF;
}

// One online-softmax step over `mma.sync` fragments (S_N n-tiles of S, O_N of O; each thread
// holds rows g and g+8): scaled scores (log2 units) become weights 2^(x - m + p_log2_scale)
// against the new running max m, and O and the running sums are rescaled by exp2(m_old - m_new).
// p_log2_scale is 0 for 16-bit P and lifts E4M3 P into its normal range (`mma8`). Once the maxima
// settle most tiles leave every row's max unchanged (correction exactly 1), and the warp skips
// O's rescale: D/2 multiplies per thread and tile, a large share of a decode split's work when
// each warp sees few keys per tile.
template <int S_N, int O_N>
__device__ __forceinline__ void online_softmax_step(float (&s)[S_N][4], float (&o)[O_N][4], RowState& st,
                                                    float p_log2_scale) {
    pathology_diverge();
    float correction[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        float mx = st.m[r];
#pragma unroll
        for (int nt = 0; nt < S_N; ++nt) mx = fmaxf(mx, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
        mx = quad_max(mx);
        // A row with every key masked so far keeps m = -inf; subtract 0 instead of -inf so
        // exp2 gives 0, not NaN.
        const float base = mx == NEG_INF ? 0.f : mx;
        correction[r] = fast_exp2(st.m[r] - base);
        st.m[r] = mx;
        const float shift = base - p_log2_scale;
        float sum = 0.f;
#pragma unroll
        for (int nt = 0; nt < S_N; ++nt) {
            s[nt][2 * r] = fast_exp2(s[nt][2 * r] - shift);
            s[nt][2 * r + 1] = fast_exp2(s[nt][2 * r + 1] - shift);
            sum += s[nt][2 * r] + s[nt][2 * r + 1];
        }
        st.l[r] = st.l[r] * correction[r] + sum;
    }
    if (!__all_sync(0xffffffffu, correction[0] == 1.f && correction[1] == 1.f)) {
#pragma unroll
        for (int nt = 0; nt < O_N; ++nt) {
#pragma unroll
            for (int i = 0; i < 4; ++i) o[nt][i] *= correction[i / 2];
        }
    }
}

