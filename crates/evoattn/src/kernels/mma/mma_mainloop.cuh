// `mma` main loop pieces: global -> shared tile copies (cp.async), and the two warp-level
// GEMMs, S = Q·Kᵀ and O += P·V, on mma.sync m16n8k16 fragments read with ldmatrix.
//
// Fragment ownership (PTX ISA, "Matrix Fragments for mma.m16n8k16"): lane = 4*g + t holds
// rows g and g+8 of a 16-row tile, columns 2t and 2t+1 of each 8-column n-tile.
//
// K/V tiles come by cp.async into padded rows, or (EVOATTN_LOADS_TMA, `splitkv` on sm_90) by
// TMA boxes into the 128-byte-swizzled layout of ptx_sm90.cuh; `kv_offset` hides which.
#pragma once
#ifndef EVOATTN_LOADS_TMA
#error "EVOATTN_LOADS_TMA must be defined: 1 when K/V tiles come by TMA"
#endif
#if EVOATTN_LOADS_TMA
#include "ptx_sm90.cuh"
#else
#include "ptx.cuh"
#endif

#define D EVOATTN_HEAD_DIM
#define BM EVOATTN_BLOCK_M
#define BN EVOATTN_BLOCK_N
#define STAGES EVOATTN_STAGES
#ifndef EVOATTN_KEY_WARPS
#error "EVOATTN_KEY_WARPS must be defined: warps that share 16 query rows and split each key tile"
#endif
#define KEY_WARPS EVOATTN_KEY_WARPS
#define ROW_WARPS (BM / 16)     // warps with distinct query rows
#define WARPS (ROW_WARPS * KEY_WARPS)
#define THREADS (WARPS * 32)
#define WARP_KEYS (BN / KEY_WARPS)  // keys of each tile one warp attends to
#if EVOATTN_PATHOLOGY_BANK_CONFLICTS
// Inversion (`evoattn invert`): unpadded rows, so the 8 rows one ldmatrix reads share banks.
#define SMEM_ROW D
#else
#define SMEM_ROW (D + 8)        // padded row: 8 ldmatrix rows land 16 bytes apart, on distinct banks
#endif
#define CHUNK 8                 // elements per 16-byte cp.async
#define K_STEPS (D / 16)        // k-steps of Q·Kᵀ
#define S_TILES (WARP_KEYS / 8) // n-tiles of S per warp
#define O_TILES (D / 8)         // n-tiles of O per warp
#define PV_STEPS (WARP_KEYS / 16) // k-steps of P·V
#define Q_IN_REGS EVOATTN_Q_IN_REGS

static_assert(THREADS == EVOATTN_THREADS, "host and kernel disagree on the block size");
static_assert(D % 16 == 0 && BN % 16 == 0 && BM % 16 == 0, "tiles must be multiples of 16");
static_assert(WARP_KEYS % 16 == 0, "each key warp's slice of a tile is a whole P·V k-step");
static_assert(STAGES >= 1 && STAGES <= 6, "1 to 6 K/V stages");

#if EVOATTN_LOADS_TMA
#define KV_TILE (BN * D)      // elements of one K or V tile: D/64 swizzled boxes of [BN][64]
static_assert(BN % 8 == 0, "a tile is a whole number of swizzle atoms");
static_assert(2 * KV_TILE * 2 < (1 << 20), "an mbarrier's transaction count is 20 bits");

// Element offset of elements [col, col + 8) of key `key` in a swizzled K/V tile: the 8 keys
// one ldmatrix reads land in 8 distinct 16-byte chunks.
__device__ __forceinline__ int kv_offset(int key, int col) { return swizzled_offset(BN, key, col) / sizeof(elem_t); }
#else
#define KV_TILE (BN * SMEM_ROW)

// Element offset of elements [col, col + 8) of key `key` in a padded K/V tile.
__device__ __forceinline__ int kv_offset(int key, int col) { return key * SMEM_ROW + col; }
#endif

// Where `splitkv`'s K/V ring starts in dynamic shared memory (its Q tile follows): TMA's
// swizzled tiles on the next 1024-byte boundary (the host reserves the slack), cp.async's at
// the base.
__device__ __forceinline__ elem_t* kv_ring_base(unsigned char* smem) {
#if EVOATTN_LOADS_TMA
    return (elem_t*)align_to_atom(smem);
#else
    return (elem_t*)smem;
#endif
}

// Copies ROWS rows of D elements, rows `row0`.. of a tensor whose row `r` starts at
// `row_ptr(r)`, into a padded shared tile; rows at or past `row_end` are zero-filled, so masked
// keys multiply a finite V and padded queries produce finite scores. Each thread keeps one
// 16-byte column of the rows it copies, so the unrolled loop's addresses step by constants
// (a bandwidth-bound split issues these copies for every byte it reads).
template <int ROWS, typename RowPtr>
__device__ __forceinline__ void load_rows(elem_t* smem, RowPtr row_ptr, int row0, int row_end) {
    constexpr int CHUNKS_PER_ROW = D / CHUNK;
    static_assert(THREADS % CHUNKS_PER_ROW == 0, "a thread copies the same column of every row it takes");
    constexpr int ROWS_PER_PASS = THREADS / CHUNKS_PER_ROW;
#if EVOATTN_PATHOLOGY_UNCOALESCED
    // Inversion (`evoattn invert`): neighbouring threads take neighbouring rows, so one warp's
    // 32 copies touch 32 rows instead of a few whole ones.
    const int c = (threadIdx.x / ROWS_PER_PASS) * CHUNK, r_first = threadIdx.x % ROWS_PER_PASS;
#else
    const int c = (threadIdx.x % CHUNKS_PER_ROW) * CHUNK, r_first = threadIdx.x / CHUNKS_PER_ROW;
#endif
#pragma unroll
    for (int pass = 0; pass < (ROWS + ROWS_PER_PASS - 1) / ROWS_PER_PASS; ++pass) {
        const int r = r_first + pass * ROWS_PER_PASS;
        if (ROWS % ROWS_PER_PASS == 0 || r < ROWS) {
            const int row = row0 + r;
            const bool inside = row < row_end;
            // A zero-byte copy reads nothing; its source is the tensor's base.
            const elem_t* src = inside ? row_ptr(row) + c : row_ptr(0);
            cp_async_16(smem + r * SMEM_ROW + c, src, inside ? 16 : 0);
        }
    }
}

// load_rows for a tensor with a constant row stride.
template <int ROWS>
__device__ __forceinline__ void load_tile(elem_t* smem, const elem_t* gmem, i64 row_stride, int row0, int row_end) {
    load_rows<ROWS>(smem, [=](int row) { return gmem + (i64)row * row_stride; }, row0, row_end);
}

// A fragments of row group `row_warp`'s 16 query rows for k-step `ks`.
__device__ __forceinline__ void load_q_frag(u32 (&a)[4], const elem_t* sQ, int row_warp, int ks) {
    const int lane = threadIdx.x % 32, mat = lane / 8, r = lane % 8;
    const int row = row_warp * 16 + (mat % 2) * 8 + r, col = ks * 16 + (mat / 2) * 8;
    ldmatrix_x4(a, sQ + row * SMEM_ROW + col);
}

#if EVOATTN_LOADS_TMA
// Where K/V tiles come from: (D, S, H, B) tensor maps, this block's KV head and batch, and one
// mbarrier per stage (`STAGES` in shared memory) that completes when both boxes have landed.
struct KvSource {
    const TmaMap* k;
    const TmaMap* v;
    int kv_head, batch;
    u64* full;
};
#else
// Where K/V tiles come from: this block's K and V rows and their strides.
struct KvSource {
    const elem_t* k;
    const elem_t* v;
    i64 k_seq, v_seq;
};
#endif

// The K/V shared-memory ring over key blocks [begin, end) of one (batch, KV head): block j
// lives in stage (j - begin) % STAGES.
struct KvRing {
    elem_t* sK;  // [STAGES][KV_TILE]
    elem_t* sV;  // [STAGES][KV_TILE]
    KvSource src;
    int sk, begin, end;

    __device__ __forceinline__ int stage(int block) const { return (block - begin) % STAGES; }
    __device__ __forceinline__ const elem_t* k_tile(int block) const { return sK + stage(block) * KV_TILE; }
    __device__ __forceinline__ const elem_t* v_tile(int block) const { return sV + stage(block) * KV_TILE; }

#if EVOATTN_LOADS_TMA
    // Thread 0 issues block `block`'s K and V boxes on its stage's mbarrier (nothing past
    // `end`). Rows past Sk are outside the tensor and land as zeros.
    __device__ __forceinline__ void load(int block) const {
        if (threadIdx.x != 0 || block >= end) return;
        u64* bar = &src.full[stage(block)];
        mbarrier_arrive_expect_tx(bar, 2 * KV_TILE * sizeof(elem_t));
        tma_load_tile<BN>((unsigned char*)(sK + stage(block) * KV_TILE), src.k, bar, block * BN, src.kv_head, src.batch);
        tma_load_tile<BN>((unsigned char*)(sV + stage(block) * KV_TILE), src.v, bar, block * BN, src.kv_head, src.batch);
    }

    // Block `block` has landed: its stage's barrier completed the phase of this round.
    __device__ __forceinline__ void wait(int block) const {
        mbarrier_wait(&src.full[stage(block)], ((block - begin) / STAGES) % 2);
    }

    // The first STAGES - 1 blocks, in flight before the main loop starts. Every thread calls
    // it: the barriers are initialised (fenced for the TMA unit) and the block synchronises
    // before anyone arrives on or waits for them.
    __device__ __forceinline__ void prefetch() const {
        if (threadIdx.x == 0) {
            tma_prefetch_map(src.k);
            tma_prefetch_map(src.v);
            for (int s = 0; s < STAGES; ++s) mbarrier_init(&src.full[s], 1);
            mbarrier_init_fence();
        }
        __syncthreads();
        for (int s = 0; s < STAGES - 1; ++s) load(begin + s);
    }

    // cp.async groups the ring keeps in flight beside the Q tile's: none.
    static constexpr int GROUPS_IN_FLIGHT = 0;
#else
    // Issues block `block`'s K and V copies as one commit group (an empty group past `end`
    // keeps the wait count uniform).
    __device__ __forceinline__ void load(int block) const {
        if (block < end) {
            load_tile<BN>(sK + stage(block) * KV_TILE, src.k, src.k_seq, block * BN, sk);
            load_tile<BN>(sV + stage(block) * KV_TILE, src.v, src.v_seq, block * BN, sk);
        }
        cp_async_commit();
    }

    // Block `block` has landed for every thread (the STAGES - 1 later groups may be in flight).
    __device__ __forceinline__ void wait(int) const {
        cp_async_wait<STAGES - 1>();
        __syncthreads();
    }

    // The first STAGES - 1 blocks, in flight before the main loop starts.
    __device__ __forceinline__ void prefetch() const {
        for (int s = 0; s < STAGES - 1; ++s) load(begin + s);
    }

    static constexpr int GROUPS_IN_FLIGHT = STAGES - 1;
#endif
};

// This warp's Q fragments: held in registers for the whole loop (Q_IN_REGS), or re-read from
// the shared Q tile with ldmatrix at every k-step (fewer registers, more shared traffic).
struct QFrags {
    const elem_t* sQ;
    int row_warp;
#if Q_IN_REGS
    u32 regs[K_STEPS][4];
#endif

    // Call after the Q tile has landed in shared memory.
    __device__ __forceinline__ void init(const elem_t* sQ_, int row_warp_) {
        sQ = sQ_;
        row_warp = row_warp_;
#if Q_IN_REGS
#pragma unroll
        for (int ks = 0; ks < K_STEPS; ++ks) load_q_frag(regs[ks], sQ, row_warp, ks);
#endif
    }

    __device__ __forceinline__ void operator()(int ks, u32 (&a)[4]) const {
#if Q_IN_REGS
#pragma unroll
        for (int i = 0; i < 4; ++i) a[i] = regs[ks][i];
#else
        load_q_frag(a, sQ, row_warp, ks);
#endif
    }
};

// Once the Q tile's copies are issued: commits them, starts the K/V ring, waits for Q alone
// and takes the Q fragments of row group `row_warp`.
__device__ __forceinline__ void start_pipeline(const KvRing& ring, QFrags& q_frag, const elem_t* sQ, int row_warp) {
    cp_async_commit();
    ring.prefetch();
    cp_async_wait<KvRing::GROUPS_IN_FLIGHT>();  // the Q group
    __syncthreads();
    q_frag.init(sQ, row_warp);
}

// S(16 x WARP_KEYS) = Q(16 x D) · K_sliceᵀ, accumulated from zero, for keys [key_lo, key_lo +
// WARP_KEYS) of the K tile `sK`. `q_frag(ks, a)` supplies Q.
template <typename QFrag>
__device__ __forceinline__ void gemm_qk(float (&s)[S_TILES][4], const elem_t* sK, int key_lo, const QFrag& q_frag) {
    const int lane = threadIdx.x % 32, mat = lane / 8, r = lane % 8;
#pragma unroll
    for (int nt = 0; nt < S_TILES; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
    for (int ks = 0; ks < K_STEPS; ++ks) {
        u32 a[4];
        q_frag(ks, a);
#pragma unroll
        for (int nt = 0; nt < S_TILES; nt += 2) {
            // matrices: keys nt*8.. x (d lo, d hi), keys (nt+1)*8.. x (d lo, d hi)
            const int key = key_lo + nt * 8 + (mat / 2) * 8 + r, col = ks * 16 + (mat % 2) * 8;
            u32 b[4];
            ldmatrix_x4(b, sK + kv_offset(key, col));
            mma_16816(s[nt], a, b[0], b[1]);
            mma_16816(s[nt + 1], a, b[2], b[3]);
        }
    }
}

// O(16 x D) += P(16 x WARP_KEYS) · V_slice, keys [key_lo, key_lo + WARP_KEYS) of the V tile
// `sV`, with P packed from the S accumulators: two adjacent n-tiles of S are exactly one A
// fragment of P.
__device__ __forceinline__ void gemm_pv(float (&o)[O_TILES][4], const float (&p)[S_TILES][4], const elem_t* sV,
                                        int key_lo) {
    const int lane = threadIdx.x % 32, mat = lane / 8, r = lane % 8;
#pragma unroll
    for (int kk = 0; kk < PV_STEPS; ++kk) {
        u32 a[4];
        a[0] = pack_float2(p[2 * kk][0], p[2 * kk][1]);
        a[1] = pack_float2(p[2 * kk][2], p[2 * kk][3]);
        a[2] = pack_float2(p[2 * kk + 1][0], p[2 * kk + 1][1]);
        a[3] = pack_float2(p[2 * kk + 1][2], p[2 * kk + 1][3]);
#pragma unroll
        for (int nt = 0; nt < O_TILES; nt += 2) {
            // matrices (transposed): keys lo/hi x d of n-tile nt, then of n-tile nt+1
            const int key = key_lo + kk * 16 + (mat % 2) * 8 + r, col = nt * 8 + (mat / 2) * 8;
            u32 b[4];
            ldmatrix_x4_trans(b, sV + kv_offset(key, col));
            mma_16816(o[nt], a, b[0], b[1]);
            mma_16816(o[nt + 1], a, b[2], b[3]);
        }
    }
}
