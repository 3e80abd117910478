// `wgmma` tile schedulers: which (query block, head, batch) tiles a block works on, and the key
// range each tile must visit. Every scheduler walks one linear order of the tiles
// (`ordered_tile`): unmasked, a head's query blocks one after another; causal, sections of
// `head_group` heads, each from its longest query block down, one level across the section's
// heads at a time (plan::head_group says why).
// - grid (persistent=0): one tile per block, from the launch grid (x query blocks, y heads,
//   z batches). Blocks start in the order of their linear index (x fastest), which is the
//   tile's index in the order.
// - persistent (persistent=1): the host launches at most one block per SM and block b takes
//   tiles b, b + gridDim.x, ... of its own order, so its producer loads the next tile's K
//   and V while its consumers finish the current one. The order takes a head's query blocks
//   one after another, so the blocks running at once share K and V in L2 (taking every head's
//   longest tile first instead read each head's K and V once per block from DRAM: 0.5x at
//   S=512 causal on the H100); under a causal mask heads alternate between longest-first and
//   shortest-first, which balances the static round-robin (see `PersistentTiles::tile`).
// - dynamic (persistent=1, dynamic_tiles=1): persistent blocks start on tiles 0..gridDim.x-1 of
//   the linear order and then claim the next unclaimed one from a counter in global memory,
//   as the hardware hands out the grid's blocks. Causal tiles differ in length, and no static
//   round robin balances them (simulated: 1.06-1.87x the balanced time on the fa3 grid); a
//   block that finishes early takes the next tile. The producer's thread claims; the
//   consumers read the tile from shared memory with Q's barrier (wgmma_ws.cuh).
// - split tail (persistent=1, split_tail=1, unmasked): the whole rounds of tiles go round robin
//   as above; the last round's L < gridDim.x tiles would leave the other blocks idle for a whole
//   tile (4096 tiles on 132 SMs: 32 rounds for 31.03 tiles of work a block, 3%). Their key
//   blocks are instead cut into gridDim.x near-equal runs, one per block; a run covers the end
//   of one tile and the start of the next at most. A piece of a tile writes its partial (O, m,
//   l) to global memory, and the tile's last piece to finish merges them and writes O
//   (wgmma_epilogue.cuh).
#pragma once
#include "wgmma_mainloop.cuh"

struct WorkTile {
    int m0;              // first query row
    int head, kv_head, batch;
    int n_blocks;        // BN-key blocks to visit
    int first_row_keys;  // keys every row of the tile sees: blocks below need no mask
#if EVOATTN_SPLIT_TAIL
    int first_block;  // the first key block a piece visits (0: a whole tile)
#endif
};

// The key block that a tile's (or piece's) j-th block is.
__device__ __forceinline__ int key_block(const WorkTile& t, int j) {
#if EVOATTN_SPLIT_TAIL
    return t.first_block + j;
#else
    return j;
#endif
}

__device__ __forceinline__ WorkTile tile_at(const AttnParams& p, int m_block, int head, int batch) {
    WorkTile t;
    t.m0 = m_block * BM;
    t.head = head;
    t.batch = batch;
    t.kv_head = head / (p.h / p.hkv);
    const int key_end = block_key_end(p, t.m0, BM);
    t.n_blocks = (key_end + BN - 1) / BN;
    t.first_row_keys = p.causal ? min(t.m0 + p.causal_offset + 1, p.sk) : p.sk;
#if EVOATTN_SPLIT_TAIL
    t.first_block = 0;
#endif
    return t;
}

// The same, for the flattened head index `head_batch` = batch * H + head of the orders below.
__device__ __forceinline__ WorkTile tile_at(const AttnParams& p, int m_block, int head_batch) {
    return tile_at(p, m_block, head_batch % p.h, head_batch / p.h);
}

// The tile at `index` of the linear order, with `m_blocks` query blocks a head. Under a causal
// mask later query blocks see more keys: each section of heads starts with them.
__device__ __forceinline__ WorkTile ordered_tile(const AttnParams& p, int m_blocks, int index) {
    if (!p.causal) {
        const int head_batch = index / m_blocks;
        return tile_at(p, index % m_blocks, head_batch);
    }
    // Every section but the last has head_group heads, so m_blocks * head_group tiles.
    const int first_head = index / (m_blocks * p.head_group) * p.head_group;
    const int heads = min(p.head_group, p.h * p.b - first_head);
    const int in_section = index - first_head * m_blocks;
    const int head_batch = first_head + in_section % heads;
    return tile_at(p, m_blocks - 1 - in_section / heads, head_batch);
}

// The grid scheduler: one tile, from the block's linear index (unmasked, straight from the
// grid's coordinates, which spares the divisions).
__device__ __forceinline__ WorkTile work_tile(const AttnParams& p) {
    if (!p.causal) return tile_at(p, blockIdx.x, blockIdx.y, blockIdx.z);
    return ordered_tile(p, gridDim.x, blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z));
}

// Each scheduler as a sequence of tile indices [first, next, ...) below `count`. `next` is the
// producer's: the dynamic scheduler claims there, and its consumers take each index from the
// producer (`dynamic`).
// The grid scheduler's one tile is worked out once, before the roles split, so the index
// arithmetic is not repeated in each role's code.
struct GridTiles {
    static constexpr bool dynamic = false;
    static constexpr int count = 1;
    WorkTile only;
    __device__ __forceinline__ explicit GridTiles(const AttnParams& p) : only(work_tile(p)) {}
    __device__ __forceinline__ int first() const { return 0; }
    __device__ __forceinline__ int next(int index) const { return index + 1; }
    __device__ __forceinline__ WorkTile tile(const AttnParams&, int) const { return only; }
    __device__ __forceinline__ void finish() const {}
};

// What both persistent schedulers share: the tile count, and each block's first tile, its own
// index (the grid has at most one block per tile).
struct PersistentBlocks {
    int m_blocks, count;
    __device__ __forceinline__ explicit PersistentBlocks(const AttnParams& p)
        : m_blocks((p.sq + BM - 1) / BM), count(m_blocks * p.h * p.b) {}
    __device__ __forceinline__ int first() const { return blockIdx.x; }
};

struct PersistentTiles : PersistentBlocks {
    static constexpr bool dynamic = false;
    __device__ __forceinline__ explicit PersistentTiles(const AttnParams& p) : PersistentBlocks(p) {}
#if EVOATTN_PATHOLOGY_TINY_GRID
    // Inversion (`evoattn invert`): one block in eight works, striding over the tiles by their
    // count; the others find none.
    __device__ __forceinline__ int active() const { return max(1, (int)gridDim.x / 8); }
    __device__ __forceinline__ int first() const { return (int)blockIdx.x < active() ? (int)blockIdx.x : count; }
    __device__ __forceinline__ int next(int index) const { return index + active(); }
#else
    __device__ __forceinline__ int next(int index) const { return index + gridDim.x; }
#endif
    __device__ __forceinline__ WorkTile tile(const AttnParams& p, int index) const {
        const int head_batch = index / m_blocks, in_head = index % m_blocks;
        // Causal tiles grow with the query block. Block b takes tiles b + k * gridDim.x, and
        // with gridDim.x close to a multiple of m_blocks it would meet the same query blocks in
        // every head (132 SMs, 128 query blocks: block 0 only long tiles, block 64 only short
        // ones, 3x less work). Walking even heads down and odd heads up pairs a long tile with
        // a short one in each block's consecutive heads.
        const bool down = p.causal && head_batch % 2 == 0;
        const int m_block = down ? m_blocks - 1 - in_head : in_head;
        return tile_at(p, m_block, head_batch);
    }
    __device__ __forceinline__ void finish() const {}
};

// p.tile_counter[0] counts the claims, [1] the blocks that are done claiming. Both are zero
// when the kernel starts: the host zeroes them once, and the last block done resets them.
struct DynamicTiles : PersistentBlocks {
    static constexpr bool dynamic = true;
    int* counter;
    __device__ __forceinline__ explicit DynamicTiles(const AttnParams& p) : PersistentBlocks(p), counter(p.tile_counter) {}
    // Tiles below gridDim.x are the blocks' first ones. Every block claims until it gets an
    // index past the last tile, so a launch makes exactly `count` claims.
    __device__ __forceinline__ int next(int) const { return gridDim.x + atomicAdd(counter, 1); }
    __device__ __forceinline__ WorkTile tile(const AttnParams& p, int index) const {
        return ordered_tile(p, m_blocks, index);
    }
    // The producer's thread, after its last claim: the last block to get here resets the
    // counters for the next launch (every block's claims are done by then).
    __device__ __forceinline__ void finish() const {
        __threadfence();
        if (atomicAdd(counter + 1, 1) == (int)gridDim.x - 1) {
            counter[0] = 0;
            counter[1] = 0;
        }
    }
};

#if EVOATTN_SPLIT_TAIL
// Unmasked tiles only (all have n_blocks key blocks; the host refuses causal problems). Index
// space: tiles [0, full) of the whole rounds, block b taking b, b + gridDim.x, ...; then piece
// k (0, 1) of block b's run at full + 2b + k, which is also the slot of its partial; `count`
// (past both) is the end. The piece's tile and key blocks are worked out from the index where
// needed, which keeps them out of the registers the main loop holds.
struct SplitTailTiles : PersistentBlocks {
    static constexpr bool dynamic = false;
    int full;        // tiles of the whole rounds
    int n_blocks;    // key blocks of every tile
    int units;       // key blocks of the tail's tiles, cut into one run per block
    int run0, run1;  // this block's run
    // This block's run is worked out once (all threads, before the roles split), so a piece's
    // tile and key range need no 64-bit division, and broadcast from lane 0 so that ptxas
    // knows them to be warp-uniform (what made the main loop lose its uniform registers was
    // the merge flag, wgmma_epilogue.cuh; this keeps the piece's values out of that risk).
    __device__ __forceinline__ explicit SplitTailTiles(const AttnParams& p)
        : PersistentBlocks(p), full(count / (int)gridDim.x * (int)gridDim.x), n_blocks((p.sk + BN - 1) / BN) {
        units = (count - full) * n_blocks;
        count = full + 2 * (int)gridDim.x;
        run0 = __shfl_sync(0xffffffffu, run_start(blockIdx.x), 0);
        run1 = __shfl_sync(0xffffffffu, run_start(blockIdx.x + 1), 0);
    }
    // Block b's run is the key blocks [run_start(b), run_start(b + 1)) of the tail. In 32 bits
    // (the host keeps units * gridDim.x under 2^31): a 64-bit division is a called routine of
    // about 70 instructions, and a merge used to make dozens.
    __device__ __forceinline__ int run_start(int b) const { return (int)((u32)b * (u32)units / gridDim.x); }
    // The block whose run holds tail key block u: the last b with run_start(b) <= u.
    __device__ __forceinline__ int run_of(int u) const { return (int)((((u32)u + 1) * gridDim.x - 1) / (u32)units); }
    // Piece k of this block's run, or the end when the run has no such piece.
    __device__ __forceinline__ int piece(int k) const {
        const int start = k == 0 ? run0 : (run0 / n_blocks + 1) * n_blocks;
        return start < run1 ? full + 2 * (int)blockIdx.x + k : count;
    }
    __device__ __forceinline__ int first() const { return (int)blockIdx.x < full ? (int)blockIdx.x : piece(0); }
    __device__ __forceinline__ int next(int index) const {
        if (index < full) return index + (int)gridDim.x < full ? index + (int)gridDim.x : piece(0);
        return (index - full) % 2 == 0 ? piece(1) : count;
    }
    // This block's piece `index`: its tile in the tail and its key blocks [lo, hi) counted
    // over the tail.
    __device__ __forceinline__ void piece_range(int index, int& tail_tile, int& lo, int& hi) const {
        tail_tile = run0 / n_blocks + (index - full) % 2;
        lo = max(run0, tail_tile * n_blocks);
        hi = min(run1, (tail_tile + 1) * n_blocks);
    }
    __device__ __forceinline__ WorkTile tile(const AttnParams& p, int index) const {
        if (index < full) return tile_at(p, index % m_blocks, index / m_blocks);
        int tail_tile, lo, hi;
        piece_range(index, tail_tile, lo, hi);
        const int tile_index = full + tail_tile;
        WorkTile t = tile_at(p, tile_index % m_blocks, tile_index / m_blocks);
        t.first_block = lo - tail_tile * n_blocks;
        t.n_blocks = hi - lo;
        return t;
    }
    // The tail tile whose partial piece `index` is, or -1 for a whole tile (a run may hold one).
    __device__ __forceinline__ int partial_of(int index) const {
        if (index < full) return -1;
        int tail_tile, lo, hi;
        piece_range(index, tail_tile, lo, hi);
        return hi - lo < n_blocks ? tail_tile : -1;
    }
    // The pieces of tail tile `tail_tile`, in key order: the first holds its key block u =
    // tail_tile * n_blocks, each next one starts where the one before ends. With fewer tail key
    // blocks than blocks some runs are empty; this walk never meets them.
    __device__ __forceinline__ int first_piece_key(int tail_tile) const { return tail_tile * n_blocks; }
    __device__ __forceinline__ bool in_tile(int u, int tail_tile) const { return u < (tail_tile + 1) * n_blocks; }
    __device__ __forceinline__ int next_piece_key(int u) const { return run_start(run_of(u) + 1); }
    __device__ __forceinline__ int pieces(int tail_tile) const {
        int n = 0;
        for (int u = first_piece_key(tail_tile); in_tile(u, tail_tile); u = next_piece_key(u)) ++n;
        return n;
    }
    // The slot of the piece of tail tile `tail_tile` that starts at its key block u: the second
    // of its block's when that block's run began in the tile before.
    __device__ __forceinline__ int slot_at(int u, int tail_tile) const {
        const int b = run_of(u);
        return 2 * b + (run_start(b) < first_piece_key(tail_tile) ? 1 : 0);
    }
    __device__ __forceinline__ void finish() const {}
};
#endif

#if EVOATTN_PERSISTENT && EVOATTN_DYNAMIC_TILES
typedef DynamicTiles Tiles;
#elif EVOATTN_PERSISTENT && EVOATTN_SPLIT_TAIL
typedef SplitTailTiles Tiles;
#elif EVOATTN_PERSISTENT
typedef PersistentTiles Tiles;
#else
typedef GridTiles Tiles;
#endif

// Whether key block j reaches past the keys every row of the tile sees, so it needs the mask.
__device__ __forceinline__ bool needs_mask(const WorkTile& t, int j) {
    return (j + 1) * BN > t.first_row_keys;
}
