// `mma` main loop pieces: global -> shared tile copies (cp.async), and the two warp-level
// GEMMs, S = Q·Kᵀ and O += P·V, on mma.sync m16n8k16 fragments read with ldmatrix.
//
// Fragment ownership (PTX ISA, "Matrix Fragments for mma.m16n8k16"): lane = 4*g + t holds
// rows g and g+8 of a 16-row tile, columns 2t and 2t+1 of each 8-column n-tile.
#pragma once
#include "ptx.cuh"

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
#define SMEM_ROW (D + 8)        // padded row: 8 ldmatrix rows land 16 bytes apart, on distinct banks
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
    const int c = (threadIdx.x % CHUNKS_PER_ROW) * CHUNK, r_first = threadIdx.x / CHUNKS_PER_ROW;
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

// The K/V shared-memory ring over key blocks [begin, end) of one (batch, KV head): block j
// lives in stage (j - begin) % STAGES.
struct KvRing {
    elem_t* sK;  // [STAGES][BN][SMEM_ROW]
    elem_t* sV;  // [STAGES][BN][SMEM_ROW]
    const elem_t* k;
    const elem_t* v;
    i64 k_seq, v_seq;
    int sk, begin, end;

    __device__ __forceinline__ int stage_offset(int block) const { return ((block - begin) % STAGES) * BN * SMEM_ROW; }
    __device__ __forceinline__ const elem_t* k_tile(int block) const { return sK + stage_offset(block); }
    __device__ __forceinline__ const elem_t* v_tile(int block) const { return sV + stage_offset(block); }

    // Issues block `block`'s K and V copies as one commit group (an empty group past `end`
    // keeps the wait count uniform).
    __device__ __forceinline__ void load(int block) const {
        if (block < end) {
            load_tile<BN>(sK + stage_offset(block), k, k_seq, block * BN, sk);
            load_tile<BN>(sV + stage_offset(block), v, v_seq, block * BN, sk);
        }
        cp_async_commit();
    }

    // The first STAGES - 1 blocks, in flight before the main loop starts.
    __device__ __forceinline__ void prefetch() const {
        for (int s = 0; s < STAGES - 1; ++s) load(begin + s);
    }
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
    cp_async_wait<STAGES - 1>();  // the Q group
    __syncthreads();
    q_frag.init(sQ, row_warp);
}

// S(16 x WARP_KEYS) = Q(16 x D) · K_sliceᵀ, accumulated from zero; `sK` is the warp's first key. `q_frag(ks, a)` supplies Q.
template <typename QFrag>
__device__ __forceinline__ void gemm_qk(float (&s)[S_TILES][4], const elem_t* sK, const QFrag& q_frag) {
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
            const int key = nt * 8 + (mat / 2) * 8 + r, col = ks * 16 + (mat % 2) * 8;
            u32 b[4];
            ldmatrix_x4(b, sK + key * SMEM_ROW + col);
            mma_16816(s[nt], a, b[0], b[1]);
            mma_16816(s[nt + 1], a, b[2], b[3]);
        }
    }
}

// O(16 x D) += P(16 x WARP_KEYS) · V_slice (`sV` at the warp's first key), with P packed from the S accumulators: two adjacent
// n-tiles of S are exactly one A fragment of P.
__device__ __forceinline__ void gemm_pv(float (&o)[O_TILES][4], const float (&p)[S_TILES][4], const elem_t* sV) {
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
            const int key = kk * 16 + (mat % 2) * 8 + r, col = nt * 8 + (mat / 2) * 8;
            u32 b[4];
            ldmatrix_x4_trans(b, sV + key * SMEM_ROW + col);
            mma_16816(o[nt], a, b[0], b[1]);
            mma_16816(o[nt + 1], a, b[2], b[3]);
        }
    }
}
