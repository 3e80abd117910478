// `wgmma` epilogue: normalise O by the row sums and write it, skipping rows past Sq; optionally
// write the natural-log LSE. STAGED: through the warpgroup's own rows of the Q tile (same
// swizzled layout, so the fragment's writes spread over the banks), then 16-byte stores.
// Otherwise straight from the fragment (4-byte stores; a quad covers 16 contiguous bytes),
// which the persistent scheduler needs: the next tile's Q is already loading into that tile.
#pragma once
#include "wgmma_softmax.cuh"

// `wg` is this thread's consumer warpgroup; with STAGED, every wgmma that read its Q rows has
// completed.
template <bool STAGED>
__device__ __forceinline__ void epilogue(const AttnParams& p, float (&o)[O_REGS], const RowState& st,
                                         const SmemTiles& sm, elem_t* o_gmem, int m0, int batch, int head, int wg) {
    const int wtid = threadIdx.x % WG_THREADS, warp = wtid / 32, lane = wtid % 32, g = lane / 4, t = lane % 4;
    unsigned char* stage = sm.q_rows(wg);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const float l = quad_sum(st.l[r]);
        // A row that saw no key has l = 0: its output is 0 and its LSE -inf.
        const float inv = l > 0.f ? 1.f / l : 0.f;
        const int row_local = warp * 16 + g + 8 * r;
        const int row = m0 + wg * WG_ROWS + row_local;
#pragma unroll
        for (int i = 0; i < O_REGS / 4; ++i) {
            const u32 packed = pack_float2(o[4 * i + 2 * r] * inv, o[4 * i + 2 * r + 1] * inv);
            if (STAGED) {
                *(u32*)(stage + swizzled_offset(BM, row_local, 8 * i) + 4 * t) = packed;
            } else if (row < p.sq) {
                *(u32*)(o_gmem + (i64)row * p.o_seq + 8 * i + 2 * t) = packed;
            }
        }
        if (p.lse != 0 && t == 0 && row < p.sq) {
            p.lse[((i64)batch * p.h + head) * p.sq + row] = l > 0.f ? (st.m[r] + __log2f(l)) * LN2 : NEG_INF;
        }
    }
    if (!STAGED) return;
    named_barrier_sync(1 + wg, WG_THREADS);  // this warpgroup's staging writes, before its reads
    constexpr int CHUNKS_PER_ROW = D / 8;
    for (int i = wtid; i < WG_ROWS * CHUNKS_PER_ROW; i += WG_THREADS) {
        const int r = i / CHUNKS_PER_ROW, c = (i % CHUNKS_PER_ROW) * 8;
        const int row = m0 + wg * WG_ROWS + r;
        if (row < p.sq) {
            *(uint4*)(o_gmem + (i64)row * p.o_seq + c) = *(const uint4*)(stage + swizzled_offset(BM, r, c));
        }
    }
}
