// The per-thread state of an online softmax over mma/wgmma accumulator fragments, shared by
// the `mma` and `wgmma` kernels: both fragments give each thread two rows (g and g+8 of a
// 16-row slice) whose values are spread over the 4 lanes of a quad, so a row reduction is two
// shuffles.
#pragma once
#include "common.cuh"

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
