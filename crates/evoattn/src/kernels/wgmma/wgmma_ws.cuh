// Warp-specialised `wgmma` pipeline (warp_specialized=1, loads=tma): warpgroup 0 is the
// producer, whose one elected thread issues every TMA load; warpgroups 1..CONSUMERS compute.
// The producer gives its registers back (`setmaxnreg`) so the consumers can hold S, P and O.
//
// K and V have rings of their own so each stage is released as soon as its GEMM is done:
// K(j) after S = Q·K(j)ᵀ, V(j) after O += P·V(j). Per stage s: `k_full[s]`/`v_full[s]` (one
// arrival + the tile's bytes) complete when the tile has landed; `k_empty[s]`/`v_empty[s]`
// (one arrival per consumer warp) when every consumer warp's wgmma reading it has completed.
// Block j uses stage j % STAGES in its (j / STAGES)-th round: the full barriers are waited on
// with parity (j / STAGES) & 1, the empty ones, before the refill with block j, with the parity
// of the round before. The producer loads in the consumers' order, K(j + 1) before V(j).
//
// overlap=1 pipelines each consumer warpgroup: S(j + 1) = Q·K(j + 1)ᵀ and O += P(j)·V(j) are
// issued together, and the softmax of block j + 1 runs while P(j)·V(j) still accumulates; O is
// rescaled once that GEMM completes.
//
// persistent=1 (overlap=1): blocks loop over tiles (wgmma_scheduler.cuh). The rings run on
// across tiles (block g of the block's whole sequence uses stage g % STAGES); Q has its own
// pair of barriers, and the consumers release it after their tile's last Q·Kᵀ, so the next
// tile's Q loads during the last P·V and the epilogue, which writes from registers (or, with
// tma_store=1, stages O in a tile of its own for TMA stores).
//
// o_in_q=1 (persistent=1, tma_store=1, whole tiles): each consumer stages O in its own rows of
// the Q tile, which have a pair of barriers of their own; its thread that issued the stores
// waits until they have read the rows and releases them, and the producer loads the next
// tile's rows there (slot 0's before K(0), the others' after). Costs the Q load's latency at
// each tile's start; saves the staging tile (at hd256 the 80-key ring leaves no room for one).
//
// dynamic_tiles=1 (persistent=1): the producer claims each next tile (wgmma_scheduler.cuh) once
// it has issued the current tile's loads, so blocks claim about in the order they finish
// (claiming as soon as Q was issued measured 1-2% slower from 8k keys, where tiles differ most
// in length). It publishes each tile in `PipelineBarriers`, in each Q slot, before that slot's
// full barrier completes; past the last tile it completes those barriers with the end instead
// of Q. The consumers read the tile from their slot once its barrier completes, before they
// release the slot, so the next write waits for them.
// compute-sanitizer's racecheck reports the slot's writes against its reads (it does not
// follow the ordering mbarrier arrive and wait give plain shared-memory accesses); the
// kernel's other shared memory reports no hazard.
//
// split_tail=1 (persistent=1, dynamic_tiles=0): the last round's tiles come as pieces, runs of
// key blocks (wgmma_scheduler.cuh); the producer loads a piece's key blocks alone, and each
// consumer warpgroup merges its rows of a tile's pieces in the last to finish
// (wgmma_epilogue.cuh).
//
// ring_test=1 (overlap=1): each consumer tests the next key block's K and V barriers without
// blocking (mbarrier.test_wait) once its softmax is done, and its next turn waits only on a
// stage whose test failed. The waits at the turn cost two barrier round trips in series even
// when the data landed long ago (`evoattn trace`: 208-288 cycles, 7-10% of a key block); the
// tests' latency hides under P·V's completion, the rescale and the packing. Past the last
// block the K test reads a barrier whose answer is not used (a test changes nothing).
//
// multicast=1 (static tiles, unmasked): blocks run in clusters of two, which work on the two
// query tiles of a pair (adjacent in a head, so they read the same K and V). Each block's producer
// loads one half of every K and V block's rows and multicasts it to both blocks: each full
// barrier completes on both halves (the whole block's bytes), and each consumer warp releases a
// stage in both blocks (the empty barriers count both blocks' consumer warps), so neither
// producer overwrites a stage the other block still reads. Halves the K/V bytes L2 reads (at
// 128 query rows a tile, about 6 TB/s on long rows), but each SM still takes in every byte, and
// a stage refills only once both blocks released it: measured 0-5% slower than one block
// (docs/perf-log.md, session 22), so a lever the planner leaves off. The blocks meet at a
// cluster barrier after initialising their barriers and before exiting (no arrival may reach
// a block that left).
//
// E4M3 (EVOATTN_FP8=1, the pipelined consumers): V's stages are Vᵀ tiles, loaded from the copy
// the V transpose kernel (wgmma_vt.cuh) wrote before this kernel started; the scores' and O's
// scales come per tile from the descales (`TileScales`).
//
// vt_producer=1 (E4M3): no transpose kernel. The producer's thread loads V's tiles as they are
// into a raw ring (`vraw_full[s]`: one arrival + the bytes; `vraw_empty[s]`: one arrival per
// transposing warp), and the producer warpgroup's warps 1..3 turn raw stage s into Vᵀ stage s
// (`transpose_v_tile`) once the consumers released it, then arrive on `v_full[s]` (one arrival
// per transposing warp, after a proxy fence: wgmma reads what stmatrix wrote). The transposers
// follow the ring's order without knowing the tiles: past the producer's last V, once they
// have released every raw stage, the thread completes `vraw_end` and then the next raw stage
// with no bytes; a transposer that finds `vraw_end` complete after a raw stage's wait stops.
//
// pingpong=1 (two or three consumers, overlap=1): the consumers take turns at issuing GEMMs,
// in a ring of named barriers, so one warpgroup's softmax runs while the others' GEMMs keep
// the tensor cores busy. With three, each softmax has two warpgroups' GEMMs to hide under,
// which hd64 needs: there a warpgroup's softmax (MUFU-bound) takes as long as its GEMMs.
#pragma once
#include "wgmma_epilogue.cuh"
#include "trace.cuh"
#include "wgmma_turns.cuh"

static_assert(PRODUCERS == 1, "this pipeline has a producer warpgroup");
static_assert(EVOATTN_LOADS_TMA, "the producer warpgroup issues TMA loads");
static_assert(!EVOATTN_PINGPONG || (CONSUMERS >= 2 && EVOATTN_OVERLAP),
              "ping-pong rotates the pipelined GEMMs of two or more consumer warpgroups");
static_assert(!EVOATTN_PERSISTENT || EVOATTN_OVERLAP, "the persistent loop is built on the pipelined consumer");
static_assert(!EVOATTN_RING_TEST || EVOATTN_OVERLAP, "the ring tests sit in the pipelined consumer's loop");
#define RING_TEST EVOATTN_RING_TEST
static_assert(!EVOATTN_SPLIT_TAIL || (EVOATTN_PERSISTENT && !EVOATTN_DYNAMIC_TILES),
              "the split tail cuts the last round of the static persistent scheduler");

#define MULTICAST EVOATTN_MULTICAST
// Blocks of a cluster, which share every K and V block.
#define CLUSTER_BLOCKS (MULTICAST ? 2 : 1)
#define CLUSTER_MASK ((u16)((1u << CLUSTER_BLOCKS) - 1u))
// The rows of a key block each block of a cluster loads (whole 8-row swizzle atoms).
#define KV_SHARE_ROWS (BN / CLUSTER_BLOCKS)
static_assert(KV_SHARE_ROWS % 8 == 0, "each block's share of a key block is whole swizzle atoms");
static_assert(!MULTICAST || !(EVOATTN_DYNAMIC_TILES || EVOATTN_SPLIT_TAIL),
              "a cluster's blocks take the static schedule's adjacent tiles, whole");

// Registers: the block starts with an even share of the SM's 64K (launch bounds: THREADS, one
// block per SM; ptxas allocates in units of 8); the consumers split what is left after
// PRODUCER_MIN_REGS, enough for address arithmetic, and the producer keeps the rest of the
// block's share (the consumers' rounding: 24 with two consumers, 32 with three, where 24
// spilled the producer's claimed-tile bookkeeping once its code changed). Multicast loads
// spilled at 24 (hd256, two consumers): 32 there.
#define REGS_PER_SM 65536
// vt_producer=1: the transposing warps hold a unit's 8 words and its addresses: 40 (32 spilled 4
// bytes at hd64, 24 spilled 12 at hd128), which leaves hd128's consumers 232 (240 without) and
// hd64's 152 (160).
// vt_given's permuting warps hold one 16-byte chunk: 24 (no spills).
#define PRODUCER_MIN_REGS (V_RAW_RING ? 40 : MULTICAST ? 32 : 24)
#define START_REGS (REGS_PER_SM / THREADS / 8 * 8)
#define CONSUMER_REGS ((START_REGS * THREADS - PRODUCER_MIN_REGS * WG_THREADS) / (CONSUMERS * WG_THREADS) / 8 * 8)
#define PRODUCER_REGS ((START_REGS * THREADS - CONSUMER_REGS * CONSUMERS * WG_THREADS) / WG_THREADS / 8 * 8)
// One consumer keeps the 255 registers a thread can have anyway: no reallocation then.
static_assert(CONSUMERS == 1 || CONSUMER_REGS <= 256, "setmaxnreg allows at most 256 registers");

#define CONSUMER_WARPS (CONSUMERS * WG_THREADS / 32)
// vt_producer=1: the producer warpgroup's warps that transpose V, or permute a V given
// transposed (all but the loading thread's).
#define TRANSPOSE_WARPS (WG_THREADS / 32 - 1)

// Q's barriers: one pair for the whole tile, or with o_in_q one per consumer's rows (each
// consumer releases its rows once its O stores have read them).
#define Q_SLOTS (O_IN_Q ? CONSUMERS : 1)
#define Q_SLOT_ROWS (BM / Q_SLOTS)
static_assert(!O_IN_Q || !EVOATTN_SPLIT_TAIL, "per-consumer Q rows take whole tiles");

struct PipelineBarriers {
    u64 q_full[Q_SLOTS], q_empty[Q_SLOTS];
    u64 k_full[STAGES], k_empty[STAGES];
    u64 v_full[STAGES], v_empty[STAGES];
#if VT_PRODUCER
    // V's tile landed (vt_producer: in the raw ring; vt_given: in the Vᵀ stage), and the
    // producer warps are done with it.
    u64 vraw_full[STAGES], vraw_empty[STAGES];
    // Completes once the transposers are done with every V: the end (a flag in shared memory
    // would be ordered by the barriers too, which racecheck does not see).
    u64 vraw_end;
#endif
    // The dynamic scheduler's current tile, published in each Q slot with its q_full: its
    // index (TILE_END past the last) and the tile, which the consumers then need not work out.
    int tile_index[Q_SLOTS];
    WorkTile tile[Q_SLOTS];
};

__device__ __forceinline__ void init_barriers(PipelineBarriers& b) {
    for (int s = 0; s < Q_SLOTS; ++s) {
        mbarrier_init(&b.q_full[s], 1);
        // o_in_q: the consumer's thread that waited for its O stores' reads.
        mbarrier_init(&b.q_empty[s], O_IN_Q ? 1 : CONSUMER_WARPS);
    }
    for (int s = 0; s < STAGES; ++s) {
        mbarrier_init(&b.k_full[s], 1);
        mbarrier_init(&b.v_full[s], VT_PRODUCER ? TRANSPOSE_WARPS : 1);
#if VT_PRODUCER
        mbarrier_init(&b.vraw_full[s], 1);
        mbarrier_init(&b.vraw_empty[s], TRANSPOSE_WARPS);
#endif
        mbarrier_init(&b.k_empty[s], CONSUMER_WARPS * CLUSTER_BLOCKS);
        mbarrier_init(&b.v_empty[s], CONSUMER_WARPS * CLUSTER_BLOCKS);
    }
#if VT_PRODUCER
    mbarrier_init(&b.vraw_end, 1);
#endif
    mbarrier_init_fence();
}

// Ring block g (counted over the block's whole sequence of tiles) uses stage g % STAGES in its
// (g / STAGES)-th round.
__device__ __forceinline__ u32 round_parity(int g) {
    return (u32)(g / STAGES) & 1u;
}

// Before the block's tile_iter-th tile: Q slot s's readers of the tile before released it.
__device__ __forceinline__ void wait_q_released(PipelineBarriers& b, int s, int tile_iter) {
    if (tile_iter > 0) mbarrier_wait(&b.q_empty[s], (u32)(tile_iter - 1) & 1u);
}

// The index published past the last tile: above every tile index, so the consumers without
// o_in_q compare it with the tile count as the producer does (which keeps the count in uniform
// registers computed before the roles split; counted only in the producer, it took 2 of the
// producer's 24 registers and spilled), while o_in_q's consumers compare it with this value
// and hold no count (at hd256 holding it spilled 4 bytes).
#define TILE_END 0x7fffffff

__device__ __forceinline__ bool is_tile_end(const Tiles& tiles, int published) {
    return O_IN_Q ? published == TILE_END : published >= tiles.count;
}

// The dynamic scheduler's tile `index` (t), for the readers of Q slot s, who released it.
__device__ __forceinline__ void publish_tile(PipelineBarriers& b, int s, int index, const WorkTile& t) {
    if (Tiles::dynamic) {
        b.tile_index[s] = index;
        b.tile[s] = t;
    }
}

// Slot s's readers of the tile before released it: the dynamic scheduler's tile `index` (t)
// goes there (past the last tile, the producer loop overwrites the index with the end).
__device__ __forceinline__ void release_and_publish(PipelineBarriers& b, int s, int tile_iter, int index,
                                                    const WorkTile& t) {
    wait_q_released(b, s, tile_iter);
    publish_tile(b, s, index, t);
}

// Q rows of slot s (all of Q unless o_in_q) for tile t (`index`), the block's tile_iter-th, once
// they are released. The dynamic scheduler's producer loop released and published slot 0
// before (its end needs that too): here the wait would add registers to the producer's 24.
__device__ __forceinline__ void produce_q(PipelineBarriers& b, const SmemTiles& sm, const TmaMap* q_map,
                                          const WorkTile& t, int index, int s, int tile_iter, Trace& trace) {
    if (s > 0 || !Tiles::dynamic) release_and_publish(b, s, tile_iter, index, t);
    if (s == 0) trace.mark(TRACE_PRODUCER_TILE);
    mbarrier_arrive_expect_tx(&b.q_full[s], TILE_BYTES(Q_SLOT_ROWS));
    tma_load_tile<BM, Q_SLOT_ROWS>(sm.q() + s * Q_SLOT_ROWS * ROW_BYTES, q_map, &b.q_full[s], t.m0 + s * Q_SLOT_ROWS,
                                   t.head, t.batch);
}

// The producer's one thread, for one tile (`index`) whose key blocks start at ring block g0:
// Q, then K(0), then with o_in_q the other consumers' Q rows, each once its readers of the tile
// before released it, then K(j + 1) and V(j) for every block j.
__device__ __forceinline__ void produce(PipelineBarriers& b, const SmemTiles& sm, const TmaMap* q_map,
                                        const TmaMap* k_map, const TmaMap* v_map, const WorkTile& t, int index,
                                        int g0, int tile_iter, Trace& trace) {
    produce_q(b, sm, q_map, t, index, 0, tile_iter, trace);
    // `vt`: V's tile, which E4M3 loads from the transposed V (`tma_load_vt`), whole (no multicast).
    auto load = [&](u64* full, u64* empty, unsigned char* tile, const TmaMap* map, int j, u32 mark, bool vt) {
        const int g = g0 + j;
        // The round before's readers (in every block of the cluster) are done.
        if (g >= STAGES) mbarrier_wait(empty, round_parity(g) ^ 1u);
        mbarrier_arrive_expect_tx(full, TILE_BYTES(BN));  // every block's share lands here
#if EVOATTN_FP8
        if (vt) {
            tma_load_vt(tile, map, full, key_block(t, j) * BN, t.kv_head, t.batch);
            trace.mark(mark);
            return;
        }
#endif
        const int share = MULTICAST ? (int)cluster_rank() * KV_SHARE_ROWS : 0;
        tma_load_tile<BN, KV_SHARE_ROWS>(tile + share * ROW_BYTES, map, full, key_block(t, j) * BN + share, t.kv_head,
                                         t.batch, MULTICAST ? CLUSTER_MASK : 0);
        trace.mark(mark);
    };
    auto stage = [&](int j) { return (g0 + j) % STAGES; };
    if (t.n_blocks > 0) {
        load(&b.k_full[stage(0)], &b.k_empty[stage(0)], sm.k(stage(0)), k_map, 0, TRACE_PRODUCER_K, false);
    }
    for (int s = 1; s < Q_SLOTS; ++s) produce_q(b, sm, q_map, t, index, s, tile_iter, trace);
    for (int j = 0; j < t.n_blocks; ++j) {
        if (j + 1 < t.n_blocks) {
            const int s = stage(j + 1);
            load(&b.k_full[s], &b.k_empty[s], sm.k(s), k_map, j + 1, TRACE_PRODUCER_K, false);
        }
        const int s = stage(j);
#if V_RAW_RING
        load(&b.vraw_full[s], &b.vraw_empty[s], sm.v_raw(s), v_map, j, TRACE_PRODUCER_V, false);
#elif VT_PRODUCER
        // Into the Vᵀ stage once its readers released it; the permuting warps then fill v_full.
        load(&b.vraw_full[s], &b.v_empty[s], sm.v(s), v_map, j, TRACE_PRODUCER_V, true);
#else
        load(&b.v_full[s], &b.v_empty[s], sm.v(s), v_map, j, TRACE_PRODUCER_V, true);
#endif
    }
    // Every load lands before the consumers, which wait for all of them, finish.
}

#if VT_PRODUCER
// vt_producer=1, a transposing warp (`warp` of TRANSPOSE_WARPS), for every ring block g until
// the producer's thread marks the end: raw stage g % STAGES into Vᵀ stage g % STAGES, or with
// vt_given=1 Vᵀ stage g % STAGES in place (its load waited for the stage's readers).
__device__ __forceinline__ void transpose_loop(PipelineBarriers& b, const SmemTiles& sm, int warp) {
    for (int g = 0;; ++g) {
        const int s = g % STAGES;
        mbarrier_wait(&b.vraw_full[s], round_parity(g));
        if (mbarrier_test_wait(&b.vraw_end, 0)) return;
#if V_RAW_RING
        // The round before's readers of the Vᵀ stage are done.
        if (g >= STAGES) mbarrier_wait(&b.v_empty[s], round_parity(g) ^ 1u);
        transpose_v_tile(sm.v_raw(s), sm.v(s), warp, TRANSPOSE_WARPS);
#else
        permute_vt_tile(sm.v(s), warp, TRANSPOSE_WARPS);
#endif
        fence_proxy_async_shared();  // the warps wrote (generic proxy); wgmma reads (async proxy)
        __syncwarp();
        if (threadIdx.x % 32 == 0) {
            mbarrier_arrive(&b.v_full[s]);
            mbarrier_arrive(&b.vraw_empty[s]);
        }
    }
}

// The producer's thread past its last V (ring block g_end): once the transposers released
// every raw stage (each stage's last phase: no transposer then waits at a block before
// g_end), the end, and the raw stage they wait on next.
__device__ __forceinline__ void end_transposes(PipelineBarriers& b, int g_end) {
    for (int g = g_end - STAGES; g < g_end; ++g) {
        if (g >= 0) mbarrier_wait(&b.vraw_empty[g % STAGES], round_parity(g));
    }
    mbarrier_arrive(&b.vraw_end);
    mbarrier_arrive(&b.vraw_full[g_end % STAGES]);
}
#endif

// One arrival per consumer warp on an empty barrier, once the warp's wgmma reading the stage
// has completed (the wait before is warp-synchronous).
__device__ __forceinline__ void release(u64* empty) {
    if (threadIdx.x % 32 == 0) mbarrier_arrive(empty);
}

// The same for a K or V stage, in every block of the cluster (multicast: either block's producer
// refills the stage in both), one lane a block.
__device__ __forceinline__ void release_kv(u64* empty) {
    if (!MULTICAST) {
        release(empty);
    } else if (threadIdx.x % 32 < CLUSTER_BLOCKS) {
        mbarrier_arrive_cluster(empty, threadIdx.x % 32);
    }
}

// After the tile's last read of Q: Q may load the next tile's rows, unless o_in_q, where the
// consumer's rows still stage its O (released after the epilogue instead).
__device__ __forceinline__ void release_q(PipelineBarriers& b) {
    if (!O_IN_Q) release(&b.q_empty[0]);
}

// half_last's width dispatch: each GEMM and softmax step over the key block's first HALF_BN
// columns (`half`) or all BN. The consumer's steps call these with a constant `half`, so each
// inlined copy keeps one width (NVRTC has no generic lambdas in device code to pass a width).
__device__ __forceinline__ void issue_qk_cols(bool half, float (&s)[S_REGS], const QOperand& q, const SmemTiles& sm,
                                              int stage) {
    if (half) {
        issue_qk<HALF_BN>(s, q, sm, stage);
    } else {
        issue_qk<BN>(s, q, sm, stage);
    }
}

// The scores' scale: E4M3's, the tile's (`TileScales`), else the launch's, read from the
// parameters at each use: the FFMA takes it as a constant-bank operand, where a copy in a
// register changed the 16-bit kernels' code.
__device__ __forceinline__ float score_scale(const AttnParams& p, float tile_scale_log2) {
    return EVOATTN_FP8 ? tile_scale_log2 : p.scale_log2;
}

// The mask and the online softmax of key block j (scores scaled by `score_scale`); whether O
// needs the rescale.
__device__ __forceinline__ bool softmax_cols(bool half, float (&s)[S_REGS], const AttnParams& p, const WorkTile& t,
                                             int row0, int j, RowState& st, float (&correction)[2],
                                             float scale_log2) {
    if (half) {
        mask_block<HALF_BN>(s, p, t, row0, key_block(t, j));
        return softmax_step<HALF_BN>(s, st, correction, score_scale(p, scale_log2));
    }
    mask_block<BN>(s, p, t, row0, key_block(t, j));
    return softmax_step<BN>(s, st, correction, score_scale(p, scale_log2));
}

__device__ __forceinline__ void pack_p_cols(bool half, PFrag& pf, const float (&s)[S_REGS]) {
    if (half) {
        pack_p<HALF_BN>(pf, s);
    } else {
        pack_p<BN>(pf, s);
    }
}

__device__ __forceinline__ void issue_pv_cols(bool half, float (&o)[O_REGS], PFrag& pf, const SmemTiles& sm,
                                              int stage) {
    if (half) {
        issue_pv<HALF_BN>(o, pf, sm, stage);
    } else {
        issue_pv<BN>(o, pf, sm, stage);
    }
}

// Consumer warpgroup c on one tile whose Q has landed (key blocks from ring block g0): the rows
// [m0 + 64c, m0 + 64c + 64) into `o` and `st`; scores scaled by `scale_log2` (`TileScales`).
__device__ __forceinline__ void consume(const AttnParams& p, PipelineBarriers& b, const SmemTiles& sm,
                                        const WorkTile& t, int c, int g0, Turns& turns, float (&o)[O_REGS],
                                        RowState& st, Trace& trace, float scale_log2) {
    const int wtid = threadIdx.x % WG_THREADS;
    const int row0 = t.m0 + c * WG_ROWS + (wtid / 32) * 16 + (wtid % 32) / 4;
    if (t.n_blocks == 0) {
        release_q(b);
        return;
    }
#if Q_IN_REGS
    QFrag q;
    load_q_frag(q, sm.q_rows(c));
#else
    QOperand q = sm.q_rows(c);
#endif
    auto stage = [&](int j) { return (g0 + j) % STAGES; };
#if EVOATTN_OVERLAP
    float s[S_REGS];
    PFrag pf;
    float correction[2];
    // The steps take `half` (half_last: the block's first HALF_BN columns) as a constant at
    // each call, and pass it to the width dispatch above.
    // Block 0: S alone, then its softmax (O is still zero: no rescale).
    auto first_block = [&](bool half) {
        mbarrier_wait(&b.k_full[stage(0)], round_parity(g0));
        trace.mark(TRACE_KV_READY);
        turns.begin();
        trace.mark(TRACE_TURN);
        issue_qk_cols(half, s, q, sm, stage(0));
        turns.end();
        trace.mark(TRACE_ISSUED);
        wgmma_wait<0>();
        fence_operand(s);
        fence_q(q);
        trace.mark(TRACE_S_DONE);
        release_kv(&b.k_empty[stage(0)]);
        if (t.n_blocks == 1) release_q(b);
        softmax_cols(half, s, p, t, row0, 0, st, correction, scale_log2);
        trace.mark_after(TRACE_SOFTMAX_DONE, st.l[1]);
        pack_p_cols(half, pf, s);
        trace.mark(TRACE_PACKED);
    };
    // ring_test=1: whether the stages that key block j's turn reads have landed (K(j) and
    // V(j - 1)), tested without blocking while the previous P·V completes; the turn then waits
    // only on a stage whose test failed. Otherwise (false) the turn waits on both.
    auto test_k = [&](int j) { return RING_TEST && mbarrier_test_wait(&b.k_full[stage(j)], round_parity(g0 + j)); };
    auto test_v = [&](int j) {
        return RING_TEST && mbarrier_test_wait(&b.v_full[stage(j - 1)], round_parity(g0 + j - 1));
    };
    bool k_landed, v_landed;
    // Key block j >= 1 with block j - 1's P·V, which is whole.
    auto next_block = [&](bool half, int j) {
        const int ks = stage(j), vs = stage(j - 1);
        if (!k_landed) mbarrier_wait(&b.k_full[ks], round_parity(g0 + j));
        if (!v_landed) mbarrier_wait(&b.v_full[vs], round_parity(g0 + j - 1));
        trace.mark(TRACE_KV_READY);
        turns.begin();
        trace.mark(TRACE_TURN);
        issue_qk_cols(half, s, q, sm, ks);
        issue_pv<BN>(o, pf, sm, vs);
        turns.end();
        trace.mark(TRACE_ISSUED);
        wgmma_wait<1>();  // S(j) is done; P(j-1)·V(j-1) may still run
        fence_operand(s);
        fence_q(q);
        trace.mark(TRACE_S_DONE);
        release_kv(&b.k_empty[ks]);
        if (j + 1 == t.n_blocks) release_q(b);  // the tile's last read of Q
        const bool rescale = softmax_cols(half, s, p, t, row0, j, st, correction, scale_log2);
        trace.mark_after(TRACE_SOFTMAX_DONE, st.l[1]);
        k_landed = test_k(j + 1);
        v_landed = test_v(j + 1);
        wgmma_wait<0>();
        fence_operand(o);
        fence_operand(pf);
        trace.mark(TRACE_PV_DONE);
        release_kv(&b.v_empty[vs]);
        if (rescale) rescale_output(o, correction);
        pack_p_cols(half, pf, s);
        trace.mark(TRACE_PACKED);
    };
    // The last key block's P·V.
    auto last_pv = [&](bool half) {
        const int vs = stage(t.n_blocks - 1);
        if (!v_landed) mbarrier_wait(&b.v_full[vs], round_parity(g0 + t.n_blocks - 1));
        trace.mark(TRACE_KV_READY);
        turns.begin();
        trace.mark(TRACE_TURN);
        issue_pv_cols(half, o, pf, sm, vs);
        turns.end();
        trace.mark(TRACE_ISSUED);
        wgmma_wait<0>();
        fence_operand(o);
        fence_operand(pf);
        trace.mark(TRACE_PV_DONE);
        release_kv(&b.v_empty[vs]);
    };
    // half_last: these rows see no key in the second half of the last block (warp-uniform: the
    // same for the consumer's 64 rows). Every turn is still taken, so ping-pong is unchanged.
    // The loop leaves the last block to the code after it, which is where `half` is read: kept
    // live through the loop, it cost 36 instructions a block (address arithmetic ptxas no
    // longer hoisted).
    auto half_last = [&]() {
        return HALF_LAST && block_key_end(p, t.m0 + c * WG_ROWS, WG_ROWS) <=
                                key_block(t, t.n_blocks - 1) * BN + HALF_BN;
    };
    if (t.n_blocks == 1 && half_last()) {
        first_block(true);
    } else {
        first_block(false);
    }
    k_landed = test_k(1);
    v_landed = test_v(1);
    const int loop_end = HALF_LAST ? t.n_blocks - 1 : t.n_blocks;
    for (int j = 1; j < loop_end; ++j) next_block(false, j);
    const bool half = half_last();
    if (HALF_LAST && t.n_blocks > 1) {
        if (half) {
            next_block(true, t.n_blocks - 1);
        } else {
            next_block(false, t.n_blocks - 1);
        }
    }
    if (half) {
        last_pv(true);
    } else {
        last_pv(false);
    }
#else
    for (int j = 0; j < t.n_blocks; ++j) {
        float s[S_REGS];
        mbarrier_wait(&b.k_full[stage(j)], round_parity(g0 + j));
        issue_qk(s, q, sm, stage(j));
        wgmma_wait<0>();
        fence_operand(s);
        release_kv(&b.k_empty[stage(j)]);
        if (j + 1 == t.n_blocks) release_q(b);
        mask_block(s, p, t, row0, key_block(t, j));
        online_softmax(s, o, st, score_scale(p, scale_log2));
        mbarrier_wait(&b.v_full[stage(j)], round_parity(g0 + j));
        gemm_pv(o, s, sm, stage(j));
        release_kv(&b.v_empty[stage(j)]);
    }
#endif
}

// The warp-specialised kernel body: barriers, the role split, and the tile loop. `descale`:
// E4M3's descales (`tile_scales`), else null.
__device__ __forceinline__ void warp_specialized(const AttnParams& p, const float* descale, const SmemTiles& sm,
                                                 const TmaMap* q_map, const TmaMap* k_map, const TmaMap* v_map,
                                                 const TmaMap* o_map) {
    __shared__ __align__(8) PipelineBarriers bars;
    if (threadIdx.x == 0) {
        tma_prefetch_map(q_map);
        tma_prefetch_map(k_map);
        tma_prefetch_map(v_map);
        if (o_map) tma_prefetch_map(o_map);
        init_barriers(bars);
    }
    init_ones_tile(sm);
    // The barriers (and the ones tile) are initialised before anyone uses them, the other
    // block's producer and consumers included.
    if (MULTICAST) {
        cluster_sync();
    } else {
        __syncthreads();
    }
    const Tiles tiles(p);
    const int wg = threadIdx.x / WG_THREADS;
    Trace trace;
    trace.init();
    if (wg == 0) {
#if CONSUMERS > 1
        setmaxnreg_dec<PRODUCER_REGS>();
#endif
        if (threadIdx.x == 0) {
#if VT_PRODUCER
            int g_end = 0;  // the ring block past the last V (the loop's g0 after it)
#endif
            for (int index = tiles.first(), tile_iter = 0, g0 = 0;; ++tile_iter) {
                const bool end = index >= tiles.count;
                if (end && !Tiles::dynamic) break;
                const WorkTile t = tiles.tile(p, index);  // arithmetic only, also past the end
                if (Tiles::dynamic) release_and_publish(bars, 0, tile_iter, index, t);
                if (end) {
                    // The end, in place of a Q, in each slot once its readers released it.
                    for (int s = 0; s < Q_SLOTS; ++s) {
                        if (s > 0) wait_q_released(bars, s, tile_iter);
                        bars.tile_index[s] = TILE_END;
                        mbarrier_arrive(&bars.q_full[s]);
                    }
                    break;
                }
                produce(bars, sm, q_map, k_map, v_map, t, index, g0, tile_iter, trace);
                g0 += t.n_blocks;
#if VT_PRODUCER
                g_end = g0;
#endif
                index = tiles.next(index);
            }
            tiles.finish();
#if VT_PRODUCER
            end_transposes(bars, g_end);
        } else if (threadIdx.x >= 32) {
            transpose_loop(bars, sm, threadIdx.x / 32 - 1);
#endif
        }
        if (MULTICAST) cluster_sync();
        return;
    }
#if CONSUMERS > 1
    setmaxnreg_inc<CONSUMER_REGS>();
#endif
    const int c = __shfl_sync(0xffffffffu, wg - 1, 0);  // warp-uniform to ptxas: Q's descriptor stays in uniform registers
    Turns turns{c, false};
    // The dynamic scheduler's consumers never call `next` (it claims): their tile comes from
    // the producer (the barrier wait orders the reads after its writes).
    for (int index = tiles.first(), tile_iter = 0, g0 = 0;; ++tile_iter) {
        WorkTile t;
        if (!Tiles::dynamic) {
            if (index >= tiles.count) break;
            t = tiles.tile(p, index);  // while Q loads
        }
        const int q_slot = O_IN_Q ? c : 0;
        mbarrier_wait(&bars.q_full[q_slot], (u32)tile_iter & 1u);
        if (Tiles::dynamic) {
            if (is_tile_end(tiles, bars.tile_index[q_slot])) break;
            t = bars.tile[q_slot];
            // Every lane's reads before lane 0's release of Q, which lets the next write in
            // (with o_in_q the release follows the epilogue's warpgroup barrier).
            __syncwarp();
        }
        trace.mark(TRACE_TILE);  // past the end check: the end is no tile
        float acc[O_REGS];
#pragma unroll
        for (int i = 0; i < O_REGS; ++i) acc[i] = 0.f;
        RowState st;
        row_state_init(st);
        const TileScales scales = tile_scales(p, descale, t);
        consume(p, bars, sm, t, c, g0, turns, acc, st, trace, scales.scale_log2);
        rowsum_to_state(acc, st);
        trace.mark(TRACE_EPILOGUE);
        elem_t* o = p.o + t.batch * p.o_batch + t.head * p.o_head;
#if EVOATTN_SPLIT_TAIL
        // A piece writes O only when it is its tile's last and has merged the others.
        const int tail_tile = tiles.partial_of(index);
        if (tail_tile < 0 || merge_pieces(p, tiles, index, tail_tile, c, acc, st))
#endif
            epilogue(p, acc, st, sm, o_map, o, t.m0, t.batch, t.head, c, scales.o_scale);
        if (O_IN_Q && threadIdx.x % WG_THREADS == 0) {
            // Its O stores have read the staging rows: the next tile's Q may load there.
            tma_store_wait_read<0>();
            mbarrier_arrive(&bars.q_empty[c]);
        }
        trace.mark(TRACE_EPILOGUE_DONE);
        g0 += t.n_blocks;
        if (!Tiles::dynamic) index = tiles.next(index);
    }
    turns.close();
    epilogue_finish();
    // The other block's consumers may still release stages here: it waits for this block's.
    if (MULTICAST) cluster_sync();
}
