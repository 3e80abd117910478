// The `resident` kernel (Hopper, sm_90a): attention over short keys, where a head's whole K and V
// fit in shared memory. One block owns Q_TILES query tiles of 64 rows of one (batch, head) and
// keeps every K and V block it needs resident: its thread 0 issues every TMA load at the start
// (the first round's Q tiles, then K and V in the order the consumers read them, then the
// remaining Q tiles), each on a barrier of its own that completes once and is never reused, so
// DRAM streams from the first cycle and nothing is loaded twice. There is no producer
// warpgroup, no ring and no release: CONSUMERS warpgroups (or, with key_split=2, pairs of them,
// each on half of a tile's key blocks) sweep the block's tiles, each group on its own sequence
// (round r of group g is tile `tile_of(r, g)`), with the `wgmma` kernel's key-block step
// (pipelined, S(j + 1) and P(j)·V(j) issued together, or in series: overlap) and its softmax,
// optionally taking ping-pong turns at issuing GEMMs (pingpong=1), and write O from registers
// or by TMA (tma_store=1). Groups share no tile: one's epilogue runs beside the others' GEMMs,
// where the `wgmma` kernel's consumers share a tile and reach its boundary together.
// Measured no faster than `wgmma` (docs/decisions/resident.md): `auto` does not choose it.
//
// The shared `wgmma` headers see CONSUMERS warpgroups of one BM-row tile (BM = 64 CONSUMERS):
// round r's Q tiles form such a tile (group r), group g's rows at `q_rows(g)`; group 0 is the
// headers' Q tile and the rest follow V. STAGES (key_blocks) is the resident key blocks.
#define EVOATTN_WARP_SPECIALIZED 0
#define EVOATTN_LOADS_TMA 1
// tma_store=1: each consumer stages O in its tile's own Q rows, read by nothing once the tile's
// last Q·Kᵀ is done, and one thread stores them by TMA (the headers' OStore::Tma on the Q tile).
// tma_store=0: O leaves from registers (OStore::Direct, which the headers take for persistent
// blocks without TMA stores): no staging and no barrier.
#define EVOATTN_PERSISTENT (!EVOATTN_TMA_STORE)
#define EVOATTN_DYNAMIC_TILES 0
#define EVOATTN_SPLIT_TAIL 0
#define EVOATTN_O_PASSES 1
#define EVOATTN_O_IN_Q 0
#define EVOATTN_ROWSUM_MMA 0
#define EVOATTN_EXP2_POLY 0
#define EVOATTN_LAZY_RESCALE 0
#define EVOATTN_RING_TEST 0
#define EVOATTN_HALF_LAST 0
#define EVOATTN_MULTICAST 0
#define EVOATTN_Q_IN_REGS 0
#define EVOATTN_TRACE 0
#define EVOATTN_STAGES EVOATTN_KEY_BLOCKS
#include "wgmma_epilogue.cuh"
#include "wgmma_turns.cuh"

#define Q_TILES EVOATTN_Q_TILES
// key_split=2: consumers work in pairs, each pair on one tile, each of the two on half of its key
// blocks (the first half has block 0); the second writes its partial (O, max, sum) to shared
// memory and the first merges it and writes O. That halves a tile's chain of key blocks where a
// launch is one round of tiles (one tile a consumer), at the cost of the merge.
#define KEY_SPLIT EVOATTN_KEY_SPLIT
#define GROUPS (CONSUMERS / KEY_SPLIT)  // consumers (or pairs) that take tiles
static_assert(KEY_SPLIT == 1 || KEY_SPLIT == 2, "a tile's keys in one or two parts");
static_assert(CONSUMERS % KEY_SPLIT == 0, "whole pairs of consumers");
#define ROUNDS ((Q_TILES + GROUPS - 1) / GROUPS)
static_assert(Q_TILES >= 1 && Q_TILES <= 16, "1 to 16 query tiles a block");
// Group r >= 1 of Q tiles, after V's blocks; then the pairs' partials (key_split=2): per pair,
// O's accumulators and the row state of each of its second consumer's threads, [value][thread].
#define Q_GROUP_OFFSET(r) ((r) == 0 ? Q_OFFSET : V_OFFSET + STAGES * TILE_BYTES(BN) + ((r) - 1) * TILE_BYTES(BM))
#define PARTIAL_VALUES (O_REGS + 4)
#define PARTIAL_OFFSET (V_OFFSET + STAGES * TILE_BYTES(BN) + (ROUNDS - 1) * TILE_BYTES(BM))
#define PARTIAL_BYTES (KEY_SPLIT == 2 ? GROUPS * PARTIAL_VALUES * WG_THREADS * 4 : 0)
static_assert(PARTIAL_OFFSET + PARTIAL_BYTES + ATOM_BYTES <= EVOATTN_DYNAMIC_SMEM,
              "the host reserves too little shared memory");
// Named barriers: 1..CONSUMERS the epilogues', then the ping-pong turns', then one per pair.
#define MERGE_BARRIER (PINGPONG_BARRIER + CONSUMERS)
static_assert(MERGE_BARRIER + GROUPS <= 16, "a block has 16 named barriers");
#if EVOATTN_PATHOLOGY_BARRIER
static_assert(MERGE_BARRIER + GROUPS <= PATHOLOGY_BARRIER, "the inversion barrier's ids are the merge's");
#endif

// The block's tile (0 .. Q_TILES - 1) group g takes in round r, or -1: rounds alternate in
// direction (g = 0 first, then g = GROUPS - 1 first), and tiles go from the block's last
// (under a causal mask, the longest) to its first, so each group's keys add up about alike.
__device__ __forceinline__ int tile_of(int r, int g) {
    const int slot = r * GROUPS + (r % 2 == 0 ? g : GROUPS - 1 - g);
    return slot < Q_TILES ? Q_TILES - 1 - slot : -1;
}

// Key blocks [first, end) of a tile of n that part `part` of its group takes.
__device__ __forceinline__ int part_first(int n, int part) {
    return part == 0 ? 0 : (n + 1) / 2;
}
__device__ __forceinline__ int part_end(int n, int part) {
    return KEY_SPLIT == 1 || part == 1 ? n : (n + 1) / 2;
}

// pingpong=1: the turns b key blocks take, b + 1 pipelined (S of the first, then S(j) with
// P·V(j - 1), then the last P·V), 2b in series.
__device__ __forceinline__ int block_turns(int b) {
    return b == 0 ? 0 : EVOATTN_OVERLAP ? b + 1 : 2 * b;
}

// The turns a tile of n key blocks takes from each consumer of its group: the ring passes every
// turn through every consumer, so a pair's part with fewer blocks takes empty turns up to its
// partner's before they meet at the merge (else the partner waits for a turn that the part,
// waiting at the merge, never passes on).
__device__ __forceinline__ int tile_turns(int n) {
    int most = 0;
    for (int part = 0; part < KEY_SPLIT; ++part) most = max(most, block_turns(part_end(n, part) - part_first(n, part)));
    return most;
}

struct ResidentBarriers {
    u64 q_full[ROUNDS * GROUPS];  // by round and group
    u64 k_full[STAGES], v_full[STAGES];
};

extern "C" __global__ void __launch_bounds__(THREADS, 1)
    EVOATTN_KERNEL_NAME(const __grid_constant__ AttnParams p, const __grid_constant__ TmaMap q_map,
                        const __grid_constant__ TmaMap k_map, const __grid_constant__ TmaMap v_map
#if EVOATTN_TMA_STORE
                        , const __grid_constant__ TmaMap o_map
#endif
    ) {
#if EVOATTN_TMA_STORE
    const TmaMap* const o_out = &o_map;
#else
    const TmaMap* const o_out = nullptr;
#endif
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const SmemTiles sm{align_to_atom(smem_raw)};
    __shared__ __align__(8) ResidentBarriers bars;
    const int head = blockIdx.y, batch = blockIdx.z, kv_head = head / (p.h / p.hkv);
    const int block_m0 = blockIdx.x * Q_TILES * WG_ROWS;
    // Keys any row of the block sees: the resident blocks (at most STAGES, which the host checks).
    const int n_blocks = (block_key_end(p, block_m0, Q_TILES * WG_ROWS) + BN - 1) / BN;
    auto q_rows = [&](int r, int g) { return sm.base + Q_GROUP_OFFSET(r) + g * WG_ROWS * ROW_BYTES; };
    auto tile_m0 = [&](int tile) { return block_m0 + tile * WG_ROWS; };
    if (threadIdx.x == 0) {
        tma_prefetch_map(&q_map);
        tma_prefetch_map(&k_map);
        tma_prefetch_map(&v_map);
        if (o_out) tma_prefetch_map(o_out);
        for (int i = 0; i < ROUNDS * GROUPS; ++i) mbarrier_init(&bars.q_full[i], 1);
        for (int s = 0; s < STAGES; ++s) {
            mbarrier_init(&bars.k_full[s], 1);
            mbarrier_init(&bars.v_full[s], 1);
        }
        mbarrier_init_fence();
        auto load_q = [&](int r) {
            for (int g = 0; g < GROUPS; ++g) {
                const int tile = tile_of(r, g);
                if (tile < 0 || tile_m0(tile) >= p.sq) continue;
                u64* bar = &bars.q_full[r * GROUPS + g];
                mbarrier_arrive_expect_tx(bar, TILE_BYTES(WG_ROWS));
                tma_load_tile<BM, WG_ROWS>(q_rows(r, g), &q_map, bar, tile_m0(tile), head, batch);
            }
        };
        load_q(0);
        for (int j = 0; j < n_blocks; ++j) {
            mbarrier_arrive_expect_tx(&bars.k_full[j], TILE_BYTES(BN));
            tma_load_tile<BN>(sm.k(j), &k_map, &bars.k_full[j], j * BN, kv_head, batch);
            mbarrier_arrive_expect_tx(&bars.v_full[j], TILE_BYTES(BN));
            tma_load_tile<BN>(sm.v(j), &v_map, &bars.v_full[j], j * BN, kv_head, batch);
        }
        for (int r = 1; r < ROUNDS; ++r) load_q(r);
    }
    __syncthreads();  // the barriers are initialised before anyone waits on them

    const int c = __shfl_sync(0xffffffffu, threadIdx.x / WG_THREADS, 0);  // warp-uniform
    const int grp = c / KEY_SPLIT, part = c % KEY_SPLIT;
    const int wtid = threadIdx.x % WG_THREADS;
    elem_t* o_gmem = p.o + batch * p.o_batch + head * p.o_head;
    auto tile_blocks = [&](int tile) {
        const int m0 = tile_m0(tile);
        return m0 < p.sq ? (block_key_end(p, m0, WG_ROWS) + BN - 1) / BN : 0;
    };
    // pingpong=1: every group pads its count of turns to the busiest one's with empty turns at
    // the end, since the ring needs all of them alike.
    int pad_turns = 0;
    if (EVOATTN_PINGPONG) {
        int most = 0, own = 0;
        for (int g = 0; g < GROUPS; ++g) {
            int turns = 0;
            for (int r = 0; r < ROUNDS; ++r) {
                const int tile = tile_of(r, g);
                turns += tile < 0 ? 0 : tile_turns(tile_blocks(tile));
            }
            most = max(most, turns);
            if (g == grp) own = turns;
        }
        pad_turns = most - own;
    }
    Turns turns{c, false};
    // Every barrier completes once (phase 0) and stays complete: each wait is on parity 0.
    for (int r = 0; r < ROUNDS; ++r) {
        const int tile = tile_of(r, grp);
        if (tile < 0) break;
        const int m0 = tile_m0(tile);
        if (m0 >= p.sq) continue;
        const int n = tile_blocks(tile), j0 = part_first(n, part), j1 = part_end(n, part);
        const int first_row_keys = p.causal ? min(m0 + p.causal_offset + 1, p.sk) : p.sk;
        const int row0 = m0 + (wtid / 32) * 16 + (wtid % 32) / 4;
        float o[O_REGS];
#pragma unroll
        for (int i = 0; i < O_REGS; ++i) o[i] = 0.f;
        RowState st;
        row_state_init(st);
        // Waited for even by a tile (or part) that sees no key: no load may be in flight at exit.
        mbarrier_wait(&bars.q_full[r * GROUPS + grp], 0);
        if (j1 > j0) {
            const QOperand q = q_rows(r, grp);
            float s[S_REGS];
            PFrag pf;
            float correction[2];
            auto softmax = [&](int j) {
                if ((j + 1) * BN > first_row_keys) mask_scores(s, p, row0, j * BN);
                return softmax_step(s, st, correction, p.scale_log2);
            };
#if EVOATTN_OVERLAP
            // The first block: S alone, then its softmax (O is still zero: no rescale).
            mbarrier_wait(&bars.k_full[j0], 0);
            turns.begin();
            issue_qk(s, q, sm, j0);
            turns.end();
            wgmma_wait<0>();
            fence_operand(s);
            softmax(j0);
            pack_p(pf, s);
            // Block j with block j - 1's P·V.
            for (int j = j0 + 1; j < j1; ++j) {
                mbarrier_wait(&bars.k_full[j], 0);
                mbarrier_wait(&bars.v_full[j - 1], 0);
                turns.begin();
                issue_qk(s, q, sm, j);
                issue_pv(o, pf, sm, j - 1);
                turns.end();
                wgmma_wait<1>();  // S(j) is done; P(j-1)·V(j-1) may still run
                fence_operand(s);
                const bool rescale = softmax(j);
                wgmma_wait<0>();
                fence_operand(o);
                fence_operand(pf);
                if (rescale) rescale_output(o, correction);
                pack_p(pf, s);
            }
            mbarrier_wait(&bars.v_full[j1 - 1], 0);
            turns.begin();
            issue_pv(o, pf, sm, j1 - 1);
            turns.end();
            wgmma_wait<0>();
            fence_operand(o);
            fence_operand(pf);
#else
            // overlap=0: each block's GEMMs in series, so S and P are never live together (four
            // consumers have 128 registers a thread); the other consumers fill the gaps.
            for (int j = j0; j < j1; ++j) {
                mbarrier_wait(&bars.k_full[j], 0);
                turns.begin();
                issue_qk(s, q, sm, j);
                turns.end();
                wgmma_wait<0>();
                fence_operand(s);
                if (softmax(j)) rescale_output(o, correction);
                pack_p(pf, s);
                mbarrier_wait(&bars.v_full[j], 0);
                turns.begin();
                issue_pv(o, pf, sm, j);
                turns.end();
                wgmma_wait<0>();
                fence_operand(o);
                fence_operand(pf);
            }
#endif
        }
#if KEY_SPLIT == 2
        if (EVOATTN_PINGPONG) {
            for (int k = block_turns(j1 - j0); k < tile_turns(n); ++k) {
                turns.begin();
                turns.end();
            }
        }
        // The pair's second consumer hands its partial to the first, thread by thread (the
        // same fragment positions), and is done with the tile.
        float* partial = (float*)(sm.base + PARTIAL_OFFSET) + grp * PARTIAL_VALUES * WG_THREADS + wtid;
        if (part == 1) {
#pragma unroll
            for (int i = 0; i < O_REGS; ++i) partial[i * WG_THREADS] = o[i];
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                partial[(O_REGS + i) * WG_THREADS] = st.m[i];
                partial[(O_REGS + 2 + i) * WG_THREADS] = st.l[i];
            }
        }
        named_barrier_sync(MERGE_BARRIER + grp, 2 * WG_THREADS);  // the partial is written
        if (part == 1) {
            named_barrier_sync(MERGE_BARRIER + grp, 2 * WG_THREADS);  // and read, before the next
            continue;
        }
        float keep[2], take[2];
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            merge_row(st, i, partial[(O_REGS + i) * WG_THREADS], partial[(O_REGS + 2 + i) * WG_THREADS], keep[i],
                      take[i]);
        }
#pragma unroll
        for (int i = 0; i < O_REGS; ++i) o[i] = o[i] * keep[(i / 2) % 2] + partial[i * WG_THREADS] * take[(i / 2) % 2];
        named_barrier_sync(MERGE_BARRIER + grp, 2 * WG_THREADS);
#endif
        // A tile that sees no key writes zeros (and LSE -inf), as every kernel does. The
        // epilogue takes round r's group of Q tiles as its Q tile, in which group grp's rows
        // are this tile's (the staging rows under tma_store).
        const SmemTiles group{sm.base + Q_GROUP_OFFSET(r)};
        epilogue(p, o, st, group, o_out, o_gmem, m0 - grp * WG_ROWS, batch, head, grp, 1.f);
    }
    for (int k = 0; k < pad_turns; ++k) {
        turns.begin();
        turns.end();
    }
    turns.close();
    epilogue_finish();
    // Every load was waited for by some consumer (each key block up to n_blocks by the block's
    // longest tile, each Q tile by its group), so no TMA write is in flight at exit.
}
