// The `splitkv` kernel (sm_80+): the `mma` kernel's main loop over one slice of the keys, for
// grids that cannot fill the GPU (small B·H, short Sq, decoding). Block (m_block, split) of
// one (batch, KV head) attends its BM packed rows to key blocks of split `split`, writes a
// partial output; the tile's last split merges them (splitkv_combine.cuh), or, with
// EVOATTN_COMBINE_KERNEL, a second kernel launched after this grid does. KEY_WARPS warps
// share each 16 rows and take disjoint slices of every key tile: decoding has few rows (8 at
// Sq = 1 with GQA 8:1), which alone would leave the block one warp to load and compute with.
// With EVOATTN_LOADS_TMA (sm_90) thread 0 fills the K/V ring with TMA boxes on mbarriers
// instead of every thread issuing 16-byte cp.async copies.
#include "splitkv_combine.cuh"

static_assert(D % 32 == 0, "the combine step spreads D over a warp's lanes");
static_assert(KEY_WARPS == 1 || ROW_WARPS * MERGE_FLOATS * 4 <= 2 * STAGES * KV_TILE * 2,
              "the key-warp merge's scratch fits in the drained K/V ring");

#if EVOATTN_LOADS_TMA
static_assert(2 * STAGES * KV_TILE * 2 + BM * SMEM_ROW * 2 + ATOM_BYTES <= EVOATTN_DYNAMIC_SMEM,
              "the host reserves too little shared memory");
#define KV_MAPS , const __grid_constant__ TmaMap k_map, const __grid_constant__ TmaMap v_map
#else
#define KV_MAPS
#endif

extern "C" __global__ void __launch_bounds__(THREADS, 1)
    EVOATTN_KERNEL_NAME(const __grid_constant__ AttnParams p, const __grid_constant__ SplitParams sp KV_MAPS) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    elem_t* sK = kv_ring_base(smem_raw);             // [STAGES][KV_TILE]
    elem_t* sV = sK + STAGES * KV_TILE;              // [STAGES][KV_TILE]
    elem_t* sQ = sV + STAGES * KV_TILE;              // [BM][SMEM_ROW]

    const int m_block = blockIdx.x / sp.splits, split = blockIdx.x % sp.splits;
    const int kv_head = blockIdx.y, batch = blockIdx.z;
    const int group = p.h / p.hkv, rows = p.sq * group, m0 = m_block * BM;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row_warp = warp % ROW_WARPS, key_warp = warp / ROW_WARPS;

    const elem_t* q = p.q + batch * p.q_batch + (i64)kv_head * group * p.q_head;

    // Keys the tile's last query sees, cut into `splits` equal runs of BN-key blocks.
    const int last_query = (min(m0 + BM, rows) - 1) / group;
    const int key_blocks = (max(visible_keys(p, last_query), 0) + BN - 1) / BN;
    const int per_split = (key_blocks + sp.splits - 1) / sp.splits;
    const int begin = min(split * per_split, key_blocks);
    const int first_row_keys = p.causal ? min(m0 / group + p.causal_offset + 1, p.sk) : p.sk;
#if EVOATTN_LOADS_TMA
    __shared__ __align__(8) u64 kv_full[STAGES];
    const KvSource src{&k_map, &v_map, kv_head, batch, kv_full};
#else
    const elem_t* k = p.k + batch * p.k_batch + kv_head * p.k_head;
    const elem_t* v = p.v + batch * p.v_batch + kv_head * p.v_head;
    const KvSource src{k, v, p.k_seq, p.v_seq};
#endif
    const KvRing ring{sK, sV, src, p.sk, begin, min(begin + per_split, key_blocks)};

    const auto q_row = [&](int row) { return q + (i64)(row / group) * p.q_seq + (i64)(row % group) * p.q_head; };
    load_rows<BM>(sQ, q_row, m0, rows);
    QFrags q_frag;
    start_pipeline(ring, q_frag, sQ, row_warp);
    float acc[O_TILES][4];
    RowState st;
    const int row0 = m0 + row_warp * 16 + lane / 4;
    attend_keys(p, ring, q_frag, row0, group, first_row_keys, key_warp * WARP_KEYS, acc, st);
    merge_key_warps(acc, st, (float*)sK, row_warp, key_warp);
    if (key_warp == 0) write_partial(p, sp, acc, st, split, batch, kv_head, rows, row0);
#if !EVOATTN_COMBINE_KERNEL
    if (arrive_last(sp, batch, kv_head, p.hkv, m_block)) combine(p, sp, batch, kv_head, group, rows, m0);
#endif
}

#if EVOATTN_COMBINE_KERNEL
// The separate merge: block (m_block, KV head, batch) merges that tile's splits, after the
// split grid has finished (same stream).
extern "C" __global__ void __launch_bounds__(THREADS, 1)
    EVOATTN_COMBINE_NAME(const __grid_constant__ AttnParams p, const __grid_constant__ SplitParams sp) {
    const int group = p.h / p.hkv;
    combine(p, sp, blockIdx.z, blockIdx.y, group, p.sq * group, blockIdx.x * BM);
}
#endif
