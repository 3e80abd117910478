// `mma8` main loop pieces: global -> shared byte-row copies (cp.async), and the two warp-level
// GEMMs on mma.sync m16n8k32 E4M3 fragments read with ldmatrix.
//
// ldmatrix moves 8x8 matrices of 16-bit elements, that is 8 rows of 16 bytes: read without
// transposing, lane 4g+t gets bytes 4t..4t+3 of row g, exactly an E4M3 A or B fragment register.
// So Q·Kᵀ reads Q and K as the 16-bit `mma` kernel does, with addresses in bytes.
//
// P·V needs V's keys along k, but V is stored [key][d]. As FlashAttention-3 does, the keys take a
// fixed order within each 16 instead of moving P between lanes: the accumulator of S gives lane
// 4g+t the keys {2t, 2t+1} of each 8-key n-tile, so the A fragment built from two adjacent S
// tiles holds keys {2t, 2t+1, 8+2t, 9+2t} where k = 4t..4t+3. ldmatrix.trans on V (16-bit pairs
// of d columns) gives lane 4g+t keys {2t, 2t+1} of d columns {2g, 2g+1}; a byte permute of the
// matrices of keys 0-7 and 8-15 gives keys {2t, 2t+1, 8+2t, 9+2t} of column 2g (selector 0x6420)
// and of column 2g+1 (0x7531): B fragments in P's key order. O's n-tiles then hold even and odd
// d columns of each 16 (see O_COLUMN), which the epilogue puts back in order.
#pragma once
#include "ptx_fp8.cuh"

#define D EVOATTN_HEAD_DIM
#define BM EVOATTN_BLOCK_M
#define BN EVOATTN_BLOCK_N
#define STAGES EVOATTN_STAGES
#define D_SPLIT EVOATTN_D_SPLIT  // warps sharing 16 query rows, each with 1/D_SPLIT of O's columns
#define ROW_WARPS (BM / 16)      // warps with distinct query rows
#define WARPS (ROW_WARPS * D_SPLIT)
#define THREADS (WARPS * 32)
#define D_PART (D / D_SPLIT)     // O columns a warp accumulates
#define ROW (D + 16)         // padded byte row: 8 ldmatrix rows land 16 bytes apart, on distinct banks
#define CHUNK 16             // bytes per cp.async
#define K_STEPS (D / 32)     // k-steps of Q·Kᵀ
#define S_TILES (BN / 8)     // n-tiles of S per warp
#define O_TILES (D_PART / 8) // n-tiles of O per warp: pairs of even and odd columns of each 16
#define PV_STEPS (BN / 32)   // k-steps of P·V
#define Q_IN_REGS EVOATTN_Q_IN_REGS
#define KV_TILE (BN * ROW)   // bytes of one K or V stage

static_assert(THREADS == EVOATTN_THREADS, "host and kernel disagree on the block size");
static_assert(D % 32 == 0 && BN % 32 == 0 && BM % 16 == 0, "tiles must be whole k32 steps");
static_assert(D_PART % 16 == 0, "a warp's O columns are whole groups of 16");
static_assert(STAGES >= 1 && STAGES <= 6, "1 to 6 K/V stages");

// Copies ROWS rows of D bytes, rows `row0`.. of a tensor with row stride `row_stride` (bytes),
// into a padded shared tile; rows at or past `row_end` are zero-filled (E4M3 zero), so masked
// keys multiply a finite V and padded queries produce finite scores.
template <int ROWS>
__device__ __forceinline__ void load_tile(u8* smem, const u8* gmem, i64 row_stride, int row0, int row_end) {
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
            const u8* src = inside ? gmem + (i64)row * row_stride + c : gmem;
            cp_async_16(smem + r * ROW + c, src, inside ? 16 : 0);
        }
    }
}

// The K/V ring over key blocks [0, end) of one (batch, KV head): block j in stage j % STAGES.
struct KvRing {
    u8* sK;  // [STAGES][BN][ROW]
    u8* sV;
    const u8* k;
    const u8* v;
    i64 k_seq, v_seq;
    int sk, end;

    __device__ __forceinline__ const u8* k_tile(int block) const { return sK + (block % STAGES) * KV_TILE; }
    __device__ __forceinline__ const u8* v_tile(int block) const { return sV + (block % STAGES) * KV_TILE; }

    // Issues block `block`'s K and V copies as one commit group (an empty group past `end`
    // keeps the wait count uniform).
    __device__ __forceinline__ void load(int block) const {
        if (block < end) {
            load_tile<BN>(sK + (block % STAGES) * KV_TILE, k, k_seq, block * BN, sk);
            load_tile<BN>(sV + (block % STAGES) * KV_TILE, v, v_seq, block * BN, sk);
        }
        cp_async_commit();
    }

    // Block `block` has landed for every thread (the STAGES - 1 later groups may be in flight).
    __device__ __forceinline__ void wait(int) const {
        cp_async_wait<STAGES - 1>();
        __syncthreads();
    }
};

// A fragment of row group `row_warp`'s 16 query rows for k-step `ks` (32 bytes of D).
__device__ __forceinline__ void load_q_frag(u32 (&a)[4], const u8* sQ, int row_warp, int ks) {
    const int lane = threadIdx.x % 32, mat = lane / 8, r = lane % 8;
    ldmatrix_x4(a, sQ + (row_warp * 16 + (mat % 2) * 8 + r) * ROW + ks * 32 + (mat / 2) * 16);
}

// The warp's Q fragments: in registers for the whole loop (Q_IN_REGS), or re-read from the
// shared Q tile at every k-step.
struct QFrags {
    const u8* sQ;
    int row_warp;
#if Q_IN_REGS
    u32 regs[K_STEPS][4];
#endif

    __device__ __forceinline__ void init(const u8* sQ_, int row_warp_) {
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

// S(16 x BN) = Q(16 x D) · Kᵀ for the K tile `sK`, from zero.
__device__ __forceinline__ void gemm_qk(float (&s)[S_TILES][4], const u8* sK, const QFrags& q_frag) {
    const int lane = threadIdx.x % 32, mat = lane / 8, r = lane % 8;
#pragma unroll
    for (int nt = 0; nt < S_TILES; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
    for (int ks = 0; ks < K_STEPS; ++ks) {
        u32 a[4];
        q_frag(ks, a);
#pragma unroll
        for (int nt = 0; nt < S_TILES; nt += 2) {
            // matrices: keys nt*8.. x (k lo, k hi), keys (nt+1)*8.. x (k lo, k hi)
            u32 b[4];
            ldmatrix_x4(b, sK + (nt * 8 + (mat / 2) * 8 + r) * ROW + ks * 32 + (mat % 2) * 16);
            mma_e4m3(s[nt], a, b[0], b[1]);
            mma_e4m3(s[nt + 1], a, b[2], b[3]);
        }
    }
}

// The d column, counted from the warp's first (`d0`), of O's register `i` of n-tile `nt` in lane
// 4g+t: n-tile 2c holds the even columns of the 16 at 16c, 2c+1 the odd ones (see the top of
// this file).
__device__ __forceinline__ int o_column(int nt, int i, int t) {
    return (nt / 2) * 16 + 4 * t + 2 * (i % 2) + nt % 2;
}

// O(16 x D_PART) += P(16 x BN) · V[:, d0 : d0 + D_PART] for the V tile `sV`, P converted from the
// S accumulators (already exponentiated, scaled into E4M3's range).
__device__ __forceinline__ void gemm_pv(float (&o)[O_TILES][4], const float (&p)[S_TILES][4], const u8* sV, int d0) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int kk = 0; kk < PV_STEPS; ++kk) {
        const float(&s0)[4] = p[4 * kk];
        const float(&s1)[4] = p[4 * kk + 1];
        const float(&s2)[4] = p[4 * kk + 2];
        const float(&s3)[4] = p[4 * kk + 3];
        u32 a[4];
        a[0] = pack_e4m3x4(s0[0], s0[1], s1[0], s1[1]);
        a[1] = pack_e4m3x4(s0[2], s0[3], s1[2], s1[3]);
        a[2] = pack_e4m3x4(s2[0], s2[1], s3[0], s3[1]);
        a[3] = pack_e4m3x4(s2[2], s2[3], s3[2], s3[3]);
#pragma unroll
        for (int c = 0; c < D_PART / 16; ++c) {
            // matrix i: keys kk*32 + 8i .. + 7, 16 bytes of d columns from d0 + 16c
            u32 m[4];
            ldmatrix_x4_trans(m, sV + (kk * 32 + lane) * ROW + d0 + c * 16);
            mma_e4m3(o[2 * c], a, __byte_perm(m[0], m[1], 0x6420), __byte_perm(m[2], m[3], 0x6420));
            mma_e4m3(o[2 * c + 1], a, __byte_perm(m[0], m[1], 0x7531), __byte_perm(m[2], m[3], 0x7531));
        }
    }
}
