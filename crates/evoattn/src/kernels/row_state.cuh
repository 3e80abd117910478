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

__device__ __forceinline__ float quad_max(float x) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

__device__ __forceinline__ float quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}
