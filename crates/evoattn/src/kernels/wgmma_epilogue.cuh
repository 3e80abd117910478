// `wgmma` epilogue: normalise O by the row sums and write it, skipping rows past Sq; optionally
// write the natural-log LSE. How O leaves (`OStore`):
// - Staged: through the warpgroup's own rows of the Q tile (same swizzled layout, so the
//   fragment's writes spread over the banks), then 16-byte stores by every thread.
// - Direct: straight from the fragment (4-byte stores; a quad covers 16 contiguous bytes), for
//   persistent blocks without tma_store: the next tile's Q is already loading into the Q tile.
// - Tma (tma_store=1): staged (persistent blocks: in a tile of their own), then one thread of
//   the warpgroup issues TMA stores, which leave the consumers free for their next tile.
#pragma once
#include "wgmma_softmax.cuh"

enum class OStore { Direct, Staged, Tma };
#if EVOATTN_TMA_STORE
#define O_STORE OStore::Tma
#elif EVOATTN_PERSISTENT
#define O_STORE OStore::Direct
#else
#define O_STORE OStore::Staged
#endif

// `wg` is this thread's consumer warpgroup. Unless O_STAGE_OWN_TILE, every wgmma that read its
// Q rows has completed (they are the staging rows); `o_map` is O's tensor map under Tma.
__device__ __forceinline__ void epilogue(const AttnParams& p, float (&o)[O_REGS], const RowState& st,
                                         const SmemTiles& sm, const TmaMap* o_map, elem_t* o_gmem, int m0, int batch,
                                         int head, int wg) {
    const int wtid = threadIdx.x % WG_THREADS, warp = wtid / 32, lane = wtid % 32, g = lane / 4, t = lane % 4;
    unsigned char* stage = sm.o_rows(wg);
    // Both rows' sums before any store: a shuffle queued behind the other row's stores waits
    // for them to drain (measured: the epilogue's largest stall at S=512, hd128).
    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const float l = quad_sum(st.l[r]);
        // A row that saw no key has l = 0: its output is 0 and its LSE -inf.
        inv[r] = l > 0.f ? 1.f / l : 0.f;
        const int row = m0 + wg * WG_ROWS + warp * 16 + g + 8 * r;
        if (p.lse != 0 && t == 0 && row < p.sq) {
            p.lse[((i64)batch * p.h + head) * p.sq + row] = l > 0.f ? (st.m[r] + __log2f(l)) * LN2 : NEG_INF;
        }
    }
    if (O_STORE == OStore::Tma && O_STAGE_OWN_TILE) {
        // The previous tile's TMA stores have read the staging rows before they are rewritten.
        if (wtid == 0) tma_store_wait_read<0>();
        named_barrier_sync(1 + wg, WG_THREADS);
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int row_local = warp * 16 + g + 8 * r;
        const int row = m0 + wg * WG_ROWS + row_local;
#pragma unroll
        for (int i = 0; i < O_REGS / 4; ++i) {
            const u32 packed = pack_float2(o[4 * i + 2 * r] * inv[r], o[4 * i + 2 * r + 1] * inv[r]);
            if (O_STORE != OStore::Direct) {
                *(u32*)(stage + swizzled_offset(BM, row_local, 8 * i) + 4 * t) = packed;
            } else if (row < p.sq) {
                *(u32*)(o_gmem + (i64)row * p.o_seq + 8 * i + 2 * t) = packed;
            }
        }
    }
    if (O_STORE == OStore::Direct) return;
    if (O_STORE == OStore::Tma) {
        fence_proxy_async_shared();  // the staging writes, before the TMA unit reads them
        named_barrier_sync(1 + wg, WG_THREADS);
        if (wtid == 0) tma_store_rows<BM, WG_ROWS>(o_map, stage, m0 + wg * WG_ROWS, head, batch);
        return;
    }
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

// Before the block exits: the warpgroup's TMA stores have read their staged rows.
__device__ __forceinline__ void epilogue_finish() {
    if (O_STORE == OStore::Tma && threadIdx.x % WG_THREADS == 0) tma_store_wait_read<0>();
}
