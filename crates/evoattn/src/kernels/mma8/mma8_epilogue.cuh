// `mma8` epilogue: O divided by the row sums and multiplied by V's descale, its columns put
// back in order (`o_column`), staged per warp in shared memory as 16-bit rows, then written with
// coalesced 16-byte stores; optionally the natural-log LSE.
#pragma once
#include "mma8_softmax.cuh"

#define O_ROW (2 * D + 16)  // bytes of a staged O row: D 16-bit elements and a 16-byte pad

// `stage` is shared memory of BM staged rows, no longer read by any warp's main loop. Warp
// (row_warp, d0) writes its columns from d0 of its row group's 16 rows; every thread of the
// block calls it.
__device__ __forceinline__ void epilogue(const AttnParams& p, float (&o)[O_TILES][4], RowState& st, float v_descale,
                                         u8* stage, elem_t* o_gmem, int m0, int row_warp, int d0, int batch,
                                         int head) {
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    u8* rows = stage + row_warp * 16 * O_ROW;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const float l = quad_sum(st.l[r]);
        // A row that saw no key has l = 0: its output is 0 and its LSE -inf.
        const float inv = l > 0.f ? v_descale / l : 0.f;
        const int row_local = g + 8 * r;
#pragma unroll
        for (int c = 0; c < D_PART / 16; ++c) {
            // Columns 16c + 4t .. + 3: even n-tile's registers hold +0 and +2, odd's +1 and +3.
            const float(&even)[4] = o[2 * c];
            const float(&odd)[4] = o[2 * c + 1];
            uint2 four;
            four.x = pack_float2(even[2 * r] * inv, odd[2 * r] * inv);
            four.y = pack_float2(even[2 * r + 1] * inv, odd[2 * r + 1] * inv);
            *(uint2*)(rows + row_local * O_ROW + 2 * (d0 + o_column(2 * c, 0, t))) = four;
        }
        const int row = m0 + row_warp * 16 + row_local;
        if (p.lse != 0 && t == 0 && d0 == 0 && row < p.sq) {
            p.lse[((i64)batch * p.h + head) * p.sq + row] =
                l > 0.f ? (st.m[r] + __log2f(l) - P_LOG2_SCALE) * LN2 : NEG_INF;
        }
    }
    // The row group's other warps wrote the rest of its rows.
    if (D_SPLIT > 1) {
        __syncthreads();
    } else {
        __syncwarp();
    }
    // Each warp stores its own columns of its group's rows.
    constexpr int CHUNKS_PER_ROW = 2 * D_PART / 16;
    for (int i = lane; i < 16 * CHUNKS_PER_ROW; i += 32) {
        const int r = i / CHUNKS_PER_ROW, c = 2 * d0 + (i % CHUNKS_PER_ROW) * 16;
        const int row = m0 + row_warp * 16 + r;
        if (row < p.sq) {
            *(uint4*)((u8*)(o_gmem + (i64)row * p.o_seq) + c) = *(const uint4*)(rows + r * O_ROW + c);
        }
    }
}
