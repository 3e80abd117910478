// `wgmma` epilogue: normalise O by the row sums and write it, skipping rows past Sq; optionally
// write the natural-log LSE. How O leaves (`OStore`):
// - Staged: through the warpgroup's own rows of the Q tile (same swizzled layout, so the
//   fragment's writes spread over the banks), then 16-byte stores by every thread.
// - Direct: straight from the fragment (4-byte stores; a quad covers 16 contiguous bytes), for
//   persistent blocks without tma_store: the next tile's Q is already loading into the Q tile;
//   and for E4M3 without tma_store, whose Q tile holds half of O's bytes.
// - Tma (tma_store=1): staged (persistent blocks and E4M3: in a tile of their own, filled in
//   O_PASSES column passes), then one thread of the warpgroup issues TMA stores, which leave
//   the consumers free for their next tile.
#pragma once
#include "wgmma_softmax.cuh"

enum class OStore { Direct, Staged, Tma };
#if EVOATTN_TMA_STORE
#define O_STORE OStore::Tma
#elif EVOATTN_PERSISTENT || EVOATTN_FP8
#define O_STORE OStore::Direct
#else
#define O_STORE OStore::Staged
#endif

// `wg` is this thread's consumer warpgroup. Unless O_STAGE_OWN_TILE, every wgmma that read its
// Q rows has completed (they are the staging rows); `o_map` is O's tensor map under Tma. O is
// scaled by `o_scale` (`TileScales`: E4M3's V descale).
__device__ __forceinline__ void epilogue(const AttnParams& p, float (&o)[O_REGS], const RowState& st,
                                         const SmemTiles& sm, const TmaMap* o_map, elem_t* o_gmem, int m0, int batch,
                                         int head, int wg, float o_scale) {
    const int wtid = threadIdx.x % WG_THREADS, warp = wtid / 32, lane = wtid % 32, g = lane / 4, t = lane % 4;
    unsigned char* stage = sm.o_rows(wg);
    // Both rows' sums before any store: a shuffle queued behind the other row's stores waits
    // for them to drain (measured: the epilogue's largest stall at S=512, hd128).
    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const float l = quad_sum(st.l[r]);
        // A row that saw no key has l = 0: its output is 0 and its LSE -inf.
        inv[r] = l > 0.f ? o_scale / l : 0.f;
        const int row = m0 + wg * WG_ROWS + warp * 16 + g + 8 * r;
#if EVOATTN_FP8
        const float m = st.m[r] - P_LOG2_SCALE;  // l sums E4M3's scaled P
#else
        const float m = st.m[r];
#endif
        if (p.lse != 0 && t == 0 && row < p.sq) {
            p.lse[((i64)batch * p.h + head) * p.sq + row] = l > 0.f ? (m + __log2f(l)) * LN2 : NEG_INF;
        }
    }
    // O_PASSES column passes (more than one only on an own staging tile, O_PASS_COLS columns
    // wide); each pass's TMA stores go while the consumers move on.
#pragma unroll
    for (int pass = 0; pass < O_PASSES; ++pass) {
        if (O_STORE == OStore::Tma && O_STAGE_OWN_TILE) {
            // The stores that read the staging rows last (the previous pass's or the previous
            // tile's) have done so before they are rewritten.
            if (wtid == 0) tma_store_wait_read<0>();
            named_barrier_sync(1 + wg, WG_THREADS);
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int row_local = warp * 16 + g + 8 * r;
            const int row = m0 + wg * WG_ROWS + row_local;
#pragma unroll
            for (int c = 0; c < O_PASS_COLS / 8; ++c) {
                const int i = pass * O_PASS_COLS / 8 + c;  // the fragment's columns 8i..8i+7
                const u32 packed = pack_float2(o[4 * i + 2 * r] * inv[r], o[4 * i + 2 * r + 1] * inv[r]);
                if (O_STORE != OStore::Direct) {
                    *(u32*)(stage + swizzled_offset<O_ROW_BYTES, O_ELEM_BYTES>(BM, row_local, 8 * c) + 4 * t) = packed;
                } else if (row < p.sq) {
                    *(u32*)(o_gmem + (i64)row * p.o_seq + 8 * i + 2 * t) = packed;
                }
            }
        }
        if (O_STORE == OStore::Tma) {
            fence_proxy_async_shared();  // the staging writes, before the TMA unit reads them
            named_barrier_sync(1 + wg, WG_THREADS);
            if (wtid == 0) {
                tma_store_rows<BM, WG_ROWS, O_PASS_COLS, O_ROW_BYTES, O_ELEM_BYTES>(o_map, stage, pass * O_PASS_COLS,
                                                                                   m0 + wg * WG_ROWS, head, batch);
            }
        }
    }
    if (O_STORE != OStore::Staged) return;
    named_barrier_sync(1 + wg, WG_THREADS);  // this warpgroup's staging writes, before its reads
    constexpr int CHUNKS_PER_ROW = D / 8;
    for (int i = wtid; i < WG_ROWS * CHUNKS_PER_ROW; i += WG_THREADS) {
        const int r = i / CHUNKS_PER_ROW, c = (i % CHUNKS_PER_ROW) * 8;
        const int row = m0 + wg * WG_ROWS + r;
        if (row < p.sq) {
            const u32 at = swizzled_offset<O_ROW_BYTES, O_ELEM_BYTES>(BM, r, c);
            *(uint4*)(o_gmem + (i64)row * p.o_seq + c) = *(const uint4*)(stage + at);
        }
    }
}

#if EVOATTN_SPLIT_TAIL
// A piece's partial in its slot of p.split_work: per consumer thread, its O fragment and then
// its rows' (m0, m1, l0, l1), as float4 chunks laid out [chunk][consumer thread] so that a
// warp's accesses are contiguous.
// O's own chunks: rowsum_mma's row-sum columns are in the row state by now.
#define O_CHUNKS (D / 8)
#define PIECE_CHUNKS (O_CHUNKS + 1)
#define PIECE_FLOATS (PIECE_CHUNKS * 4 * CONSUMERS * WG_THREADS)

__device__ __forceinline__ float* piece_chunk(const AttnParams& p, int slot, int chunk, int wg) {
    return p.split_work + (i64)slot * PIECE_FLOATS + ((i64)chunk * CONSUMERS * WG_THREADS + wg * WG_THREADS + threadIdx.x % WG_THREADS) * 4;
}

// Consumer warpgroup `wg`, at the end of piece `index` (slot index - tiles.full) of tail tile
// `tail_tile`: unless every other piece has counted already, writes its rows' partial and
// counts the piece on the tile's counter (p.tile_counter[tail_tile * CONSUMERS + wg]). The last
// of the tile's pieces merges the others' partials into (o, st), resets the counter for the
// next launch and returns true: it writes O. The others return false.
__device__ __forceinline__ bool merge_pieces(const AttnParams& p, const SplitTailTiles& tiles, int index,
                                             int tail_tile, int wg, float (&o)[O_REGS], RowState& st) {
    __shared__ int merges[CONSUMERS];
    const int own = index - tiles.full;
    const int n_pieces = tiles.pieces(tail_tile);
    int* counter = p.tile_counter + tail_tile * CONSUMERS + wg;
    // A piece that finds every other one counted is the last: it merges without writing its own
    // partial (at hd128 a partial is 64 KiB, and the tail's writes at the end of the launch
    // compete with the write-back of the harness's flush).
    if (threadIdx.x % WG_THREADS == 0) merges[wg] = ld_acquire_gpu(counter) == n_pieces - 1;
    named_barrier_sync(1 + wg, WG_THREADS);
    // Broadcast from lane 0, so ptxas knows the branches to be warp-uniform: from shared memory
    // they are not, and the persistent loop's next tile then ran its main loop with per-thread
    // registers and reconvergence barriers (+10% at hd64 16k).
    bool merge = __shfl_sync(0xffffffffu, merges[wg], 0);
    if (merge) {
        if (threadIdx.x % WG_THREADS == 0) *counter = 0;  // every other piece has counted
    } else {
#pragma unroll
        for (int i = 0; i < O_CHUNKS; ++i) {
            *(float4*)piece_chunk(p, own, i, wg) = make_float4(o[4 * i], o[4 * i + 1], o[4 * i + 2], o[4 * i + 3]);
        }
        *(float4*)piece_chunk(p, own, O_CHUNKS, wg) = make_float4(st.m[0], st.m[1], st.l[0], st.l[1]);
        named_barrier_sync(1 + wg, WG_THREADS);  // every thread's partial, before thread 0 releases them
        if (threadIdx.x % WG_THREADS == 0) {
            const bool last = atom_add_acq_rel_gpu(counter, 1) == n_pieces - 1;
            if (last) *counter = 0;  // every piece has counted
            merges[wg] = last;
        }
        named_barrier_sync(1 + wg, WG_THREADS);
        merge = __shfl_sync(0xffffffffu, merges[wg], 0);
        if (!merge) return false;
    }
    // The other pieces' partials, from L2 (another SM wrote them).
    for (int u = tiles.first_piece_key(tail_tile); tiles.in_tile(u, tail_tile); u = tiles.next_piece_key(u)) {
        const int slot = tiles.slot_at(u, tail_tile);
        if (slot == own) continue;
        const float4 ml = ld_cg4(piece_chunk(p, slot, O_CHUNKS, wg));
        float keep[2], take[2];
        merge_row(st, 0, ml.x, ml.z, keep[0], take[0]);
        merge_row(st, 1, ml.y, ml.w, keep[1], take[1]);
#pragma unroll
        for (int i = 0; i < O_CHUNKS; ++i) {
            const float4 x = ld_cg4(piece_chunk(p, slot, i, wg));
            o[4 * i] = o[4 * i] * keep[0] + x.x * take[0];
            o[4 * i + 1] = o[4 * i + 1] * keep[0] + x.y * take[0];
            o[4 * i + 2] = o[4 * i + 2] * keep[1] + x.z * take[1];
            o[4 * i + 3] = o[4 * i + 3] * keep[1] + x.w * take[1];
        }
    }
    return true;
}
#endif

// Before the block exits: the warpgroup's TMA stores have read their staged rows.
__device__ __forceinline__ void epilogue_finish() {
    if (O_STORE == OStore::Tma && threadIdx.x % WG_THREADS == 0) tma_store_wait_read<0>();
}
