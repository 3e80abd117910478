// `mma` epilogue: normalise O by the row sums, stage the warp's 16 rows in shared memory (the
// warp's own rows of the Q tile, which only it reads), then write them with coalesced 16-byte
// stores; optionally write the natural-log LSE.
#pragma once
#include "mma_softmax.cuh"

__device__ __forceinline__ void epilogue(const AttnParams& p, float (&o)[O_TILES][4], RowState& st, elem_t* sQ,
                                         elem_t* o_gmem, int m0, int batch, int head) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    elem_t* stage = sQ + warp * 16 * SMEM_ROW;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const float l = quad_sum(st.l[r]);
        // A row that saw no key has l = 0: its output is 0 and its LSE -inf.
        const float inv = l > 0.f ? 1.f / l : 0.f;
        const int row_local = g + 8 * r;
#pragma unroll
        for (int nt = 0; nt < O_TILES; ++nt) {
            *(u32*)(stage + row_local * SMEM_ROW + nt * 8 + 2 * t) = pack_float2(o[nt][2 * r] * inv, o[nt][2 * r + 1] * inv);
        }
        const int row = m0 + warp * 16 + row_local;
        if (p.lse != 0 && t == 0 && row < p.sq) {
            p.lse[((i64)batch * p.h + head) * p.sq + row] = l > 0.f ? (st.m[r] + __log2f(l)) * LN2 : NEG_INF;
        }
    }
    __syncwarp();
    constexpr int CHUNKS_PER_ROW = D / CHUNK;
    for (int i = lane; i < 16 * CHUNKS_PER_ROW; i += 32) {
        const int r = i / CHUNKS_PER_ROW, c = (i % CHUNKS_PER_ROW) * CHUNK;
        const int row = m0 + warp * 16 + r;
        if (row < p.sq) {
            *(uint4*)(o_gmem + (i64)row * p.o_seq + c) = *(const uint4*)(stage + r * SMEM_ROW + c);
        }
    }
}
