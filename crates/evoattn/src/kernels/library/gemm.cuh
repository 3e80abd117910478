// The hybrids' own GEMM (#38): one of the two products of the unfused path, batched as
// kernels/library/geometry.rs describes it for cuBLASLt (column-major C (m x n) = op(A) (m x k) ·
// B (k x n)), on mma.sync m16n8k16 with fp32 accumulation. `hybrid-pv` runs Q·Kᵀ here
// (A = K read transposed: its k index contiguous), `hybrid-qk` runs P·V (A = V: its m index
// contiguous); B (Q, or P over S) always has its k index contiguous.
//
// In the mma's terms the block computes a BM x BN tile of Cᵀ (row j of C's n, column i of
// its m): the mma's A operand is B (rows j, k contiguous: ldmatrix), its B operand is op(A)
// (k-major when A is read transposed: ldmatrix; else ldmatrix.trans). Tiles of 16-bit
// operands reach shared memory by cp.async, two stages; elements past m, n or k arrive as
// zeros (a partial 16-byte chunk zero-fills its tail), so P's padding past Sk and V's rows
// past Sk never meet. The host checks every operand's 16-byte alignment (runtime/library.rs).
#pragma once
#include "ptx.cuh"

// The tile and block the host sizes the grid by (kernels/library/mod.rs: GEMM_TILE, GEMM_THREADS).
#define GEMM_BM EVOATTN_GEMM_BM
#define GEMM_BN EVOATTN_GEMM_BN
#define GEMM_THREADS EVOATTN_GEMM_THREADS
#define GEMM_BK 32
#define GEMM_PAD 8  // 16 bytes a shared row: ldmatrix's eight rows fall in distinct banks
static_assert(GEMM_THREADS / 32 * 32 == GEMM_BM && GEMM_BN == 8 * 8, "each warp: 32 rows j by eight n8 tiles");
// 1: op(A) = Aᵀ (A's k index contiguous: Q·Kᵀ); 0: A as it is (its m index contiguous: P·V).
#define GEMM_A_T EVOATTN_GEMM_A_T
// 1: C in float32 (S of f32 scores); 0: C in the input dtype.
#define GEMM_C_F32 EVOATTN_GEMM_C_F32

// One batched GEMM; mirrored by `runtime::library::GemmArgs`, field for field. Offsets and
// strides in elements; pointers at the operands' first element.
struct GemmArgs {
    const elem_t* a;
    const elem_t* b;
    void* c;
    i64 lda, ldb, ldc;
    i64 a_batch, b_batch, c_batch;
    int m, n, k, batch;
};

// The bytes of the 8-element (16-byte) chunk at element `at` that lie before element `end`.
__device__ __forceinline__ int chunk_bytes(int at, int end) {
    return 2 * max(0, min(8, end - at));
}

// Loads a ROWS x COLS tile at (row0, col0) of a matrix of row_end x col_end elements, its rows
// `ld` elements apart and each row's elements contiguous, into `dst` (COLS + GEMM_PAD a row).
template <int ROWS, int COLS>
__device__ __forceinline__ void load_tile(elem_t* dst, const elem_t* src, i64 ld, int row0, int col0, int row_end,
                                          int col_end) {
    for (int e = threadIdx.x; e < ROWS * COLS / 8; e += GEMM_THREADS) {
        const int r = e / (COLS / 8), c = (e % (COLS / 8)) * 8;
        const int row = row0 + r, col = col0 + c;
        const int bytes = row < row_end ? chunk_bytes(col, col_end) : 0;
        cp_async_16(dst + r * (COLS + GEMM_PAD) + c, bytes ? src + (i64)row * ld + col : src, bytes);
    }
}

// Loads the block's k-tile `k0` of both operands into one stage: B's as BM rows j of BK k;
// op(A)'s as BN rows i of BK k (A read transposed) or as BK rows k of BN i.
__device__ __forceinline__ void gemm_load(const GemmArgs& g, const elem_t* a, const elem_t* b, int i0, int j0, int k0,
                                          elem_t* bs, elem_t* as) {
    load_tile<GEMM_BM, GEMM_BK>(bs, b, g.ldb, j0, k0, g.n, g.k);
#if GEMM_A_T
    load_tile<GEMM_BN, GEMM_BK>(as, a, g.lda, i0, k0, g.m, g.k);
#else
    load_tile<GEMM_BK, GEMM_BN>(as, a, g.lda, k0, i0, g.k, g.m);
#endif
}

#if GEMM_A_T
#define GEMM_A_STAGE (GEMM_BN * (GEMM_BK + GEMM_PAD))
#else
#define GEMM_A_STAGE (GEMM_BK * (GEMM_BN + GEMM_PAD))
#endif

extern "C" __global__ void __launch_bounds__(GEMM_THREADS) EVOATTN_GEMM_NAME(const GemmArgs g) {
    __shared__ __align__(16) elem_t bs[2][GEMM_BM][GEMM_BK + GEMM_PAD];
    __shared__ __align__(16) elem_t as[2][GEMM_A_STAGE];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int i0 = blockIdx.x * GEMM_BN, j0 = blockIdx.y * GEMM_BM;
    const int k_tiles = (g.k + GEMM_BK - 1) / GEMM_BK;
    // Each warp: 32 rows j (two m16 tiles) by the block's 64 columns i (eight n8 tiles).
    const int wj = warp * 32;
    for (int z = blockIdx.z; z < g.batch; z += gridDim.z) {
        const elem_t* a = g.a + (i64)z * g.a_batch;
        const elem_t* b = g.b + (i64)z * g.b_batch;
        float acc[2][8][4] = {};
        gemm_load(g, a, b, i0, j0, 0, &bs[0][0][0], as[0]);
        cp_async_commit();
        for (int t = 0; t < k_tiles; ++t) {
            if (t + 1 < k_tiles) gemm_load(g, a, b, i0, j0, (t + 1) * GEMM_BK, &bs[(t + 1) & 1][0][0], as[(t + 1) & 1]);
            cp_async_commit();
            cp_async_wait<1>();
            __syncthreads();
            const int st = t & 1;
#pragma unroll
            for (int kk = 0; kk < GEMM_BK; kk += 16) {
                u32 fa[2][4];
#pragma unroll
                for (int mi = 0; mi < 2; ++mi)
                    ldmatrix_x4(fa[mi], &bs[st][wj + mi * 16 + (lane % 16)][kk + (lane / 16) * 8]);
#pragma unroll
                for (int np = 0; np < 4; ++np) {  // pairs of n8 tiles
                    u32 fb[4];
#if GEMM_A_T
                    const elem_t (*at)[GEMM_BK + GEMM_PAD] = (const elem_t (*)[GEMM_BK + GEMM_PAD])as[st];
                    ldmatrix_x4(fb, &at[np * 16 + (lane & 7) + ((lane >> 4) << 3)][kk + ((lane >> 3) & 1) * 8]);
#else
                    const elem_t (*an)[GEMM_BN + GEMM_PAD] = (const elem_t (*)[GEMM_BN + GEMM_PAD])as[st];
                    ldmatrix_x4_trans(fb, &an[kk + (lane & 7) + ((lane >> 3) & 1) * 8][np * 16 + (lane >> 4) * 8]);
#endif
#pragma unroll
                    for (int mi = 0; mi < 2; ++mi) {
                        mma_16816(acc[mi][2 * np], fa[mi], fb[0], fb[1]);
                        mma_16816(acc[mi][2 * np + 1], fa[mi], fb[2], fb[3]);
                    }
                }
            }
            __syncthreads();  // the stage is free for the load two tiles on
        }
        // Row j of Cᵀ is C's column j: c[j * ldc + i]; each thread holds pairs of columns.
#pragma unroll
        for (int mi = 0; mi < 2; ++mi)
#pragma unroll
            for (int ni = 0; ni < 8; ++ni)
#pragma unroll
                for (int half = 0; half < 2; ++half) {
                    const int j = j0 + wj + mi * 16 + lane / 4 + half * 8;
                    const int i = i0 + ni * 8 + (lane % 4) * 2;
                    if (j >= g.n || i >= g.m) continue;
                    const float x0 = acc[mi][ni][2 * half], x1 = acc[mi][ni][2 * half + 1];
                    const i64 at = (i64)z * g.c_batch + (i64)j * g.ldc + i;
#if GEMM_C_F32
                    float* c = (float*)g.c + at;
                    if (i + 1 < g.m) {
                        *(float2*)c = make_float2(x0, x1);
                    } else {
                        c[0] = x0;
                    }
#else
                    elem_t* c = (elem_t*)g.c + at;
                    if (i + 1 < g.m) {
                        *(u32*)c = pack_float2(x0, x1);
                    } else {
                        c[0] = float_to_elem(x0);
                    }
#endif
                }
    }
}
