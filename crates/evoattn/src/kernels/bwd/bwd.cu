// The `mma-bwd` kernels: attention's backward pass in FlashAttention-2's form (sm_80+,
// `mma.sync` m16n8k16, `ldmatrix`, `cp.async`), three launches in order on one stream:
//   1. EVOATTN_BWD_DOT_NAME: delta_i = dO_i · O_i per query row (float32), and the row's dQ
//      accumulator zeroed;
//   2. EVOATTN_KERNEL_NAME: one block per BN keys of one (batch, KV head). K and V stay in
//      shared memory while the block sweeps every query head of the KV head's group and every
//      query block that sees its keys, recomputing P from the forward's LSE:
//        Sᵀ = K·Qᵀ, Pᵀ = exp(scale·Sᵀ - LSE), dPᵀ = V·dOᵀ, dSᵀ = Pᵀ ∘ (dPᵀ - delta),
//        dV += Pᵀ·dO, dK += dSᵀ·Q (registers, written once: no atomics),
//        dQ += dS·K (float32 atomics into the accumulator, through dSᵀ in shared memory);
//   3. EVOATTN_BWD_DQ_NAME: dQ = scale · accumulator, in the inputs' dtype.
// Each warp owns 16 keys; P and dS are rounded to the inputs' dtype for their GEMMs, as the
// forward rounds P.
#include "ptx.cuh"

#define D EVOATTN_HEAD_DIM
#define BM EVOATTN_BLOCK_M   // query rows per step
#define BN EVOATTN_BLOCK_N   // keys per block: 16 per warp
#define STAGES EVOATTN_STAGES  // Q/dO buffers: 2 loads the next step during this one
#define WARPS (BN / 16)
#define THREADS (WARPS * 32)
#define ROW (D + 8)          // padded row: 8 ldmatrix rows land 16 bytes apart, on distinct banks
#define DS_ROW (BM + 8)      // padded row of dSᵀ (keys by queries)
#define CHUNK 8              // elements per 16-byte copy
#define K_STEPS (D / 16)
#define Q_TILES (BM / 8)     // n-tiles of Sᵀ: its columns are queries
#define D_TILES (D / 8)      // n-tiles of dK and dV
#define ROW_GROUPS (BM / 16) // dQ: 16-row groups of a step's queries...
#define COL_SPLITS (WARPS >= ROW_GROUPS ? WARPS / ROW_GROUPS : 1)  // ...each split over columns
#define DQ_JOBS (ROW_GROUPS * COL_SPLITS)
#define DQ_COLS (D / COL_SPLITS)
#define DQ_TILES (DQ_COLS / 8)
#define DOT_ROWS 8           // rows of the dot kernel's block: one a warp

static_assert(THREADS == EVOATTN_THREADS, "host and kernel disagree on the block size");
static_assert(D % 16 == 0 && BM % 16 == 0 && BN % 16 == 0, "tiles are whole mma k-steps");
static_assert(WARPS % ROW_GROUPS == 0 || ROW_GROUPS % WARPS == 0, "dQ's jobs divide among the warps");
static_assert(DQ_COLS % 16 == 0, "a dQ job's columns are whole ldmatrix pairs");
static_assert(STAGES == 1 || STAGES == 2, "one or two Q/dO buffers");
static_assert(D % CHUNK == 0 && D / CHUNK <= 32, "the dot kernel's lanes take 8 elements each");

// Mirrored field for field by `runtime::backward::BwdParams`. Strides are in elements; every
// tensor's head-dim stride is 1. LSE is the forward's ([B, H, Sq], natural log, -inf for a row
// that sees no key); delta and the dQ accumulator ([B, H, Sq] and [B, H, Sq, D], dense) are
// the launch's scratch.
struct BwdParams {
    const elem_t* q;
    const elem_t* k;
    const elem_t* v;
    const elem_t* o;
    const elem_t* dout;
    const float* lse;
    elem_t* dq;
    elem_t* dk;
    elem_t* dv;
    float* dq_acc;
    float* delta;
    i64 q_batch, q_head, q_seq;
    i64 k_batch, k_head, k_seq;
    i64 v_batch, v_head, v_seq;
    i64 o_batch, o_head, o_seq;
    i64 do_batch, do_head, do_seq;
    i64 dq_batch, dq_head, dq_seq;
    i64 dk_batch, dk_head, dk_seq;
    i64 dv_batch, dv_head, dv_seq;
    int b, h, hkv, sq, sk;
    int causal;         // 0: no mask; else key j is visible to query i iff j <= i + causal_offset
    int causal_offset;  // 0 for top-left, Sk - Sq for bottom-right
    float scale;        // the softmax scale
    float scale_log2;   // scale * log2(e)
};

// Copies ROWS rows of D elements (rows row0.. of a tensor with row stride `stride`) into a
// padded shared tile; rows at or past `row_end` are zero-filled.
template <int ROWS>
__device__ __forceinline__ void copy_rows(elem_t* smem, const elem_t* gmem, i64 stride, int row0, int row_end) {
    constexpr int CHUNKS_PER_ROW = D / CHUNK;
    for (int i = threadIdx.x; i < ROWS * CHUNKS_PER_ROW; i += THREADS) {
        const int r = i / CHUNKS_PER_ROW, c = (i % CHUNKS_PER_ROW) * CHUNK, row = row0 + r;
        const bool inside = row < row_end;
        cp_async_16(smem + r * ROW + c, inside ? gmem + (i64)row * stride + c : gmem, inside ? 16 : 0);
    }
}

// The A fragment of k-step `ks` of rows [row0, row0 + 16) of a padded tile (row-major A).
__device__ __forceinline__ void load_a(u32 (&a)[4], const elem_t* tile, int row0, int ks) {
    const int lane = threadIdx.x % 32, mat = lane / 8, r = lane % 8;
    ldmatrix_x4(a, tile + (row0 + (mat % 2) * 8 + r) * ROW + ks * 16 + (mat / 2) * 8);
}

// Two adjacent n-tiles of a packed A fragment from four accumulator quads (rows g and g + 8,
// columns 2t and 2t + 1 of n-tiles 2kk and 2kk + 1): exactly one m16k16 A fragment.
__device__ __forceinline__ void pack_a(u32 (&a)[4], const float (&lo)[4], const float (&hi)[4]) {
    a[0] = pack_float2(lo[0], lo[1]);
    a[1] = pack_float2(lo[2], lo[3]);
    a[2] = pack_float2(hi[0], hi[1]);
    a[3] = pack_float2(hi[2], hi[3]);
}

// acc(16 x D) += A(16 x BM queries) · X(BM x D) for a query-major tile X (dO or Q), read
// transposed so that queries are the k dimension.
__device__ __forceinline__ void gemm_rows(float (&acc)[D_TILES][4], const float (&x)[Q_TILES][4], const elem_t* tile) {
    const int lane = threadIdx.x % 32, mat = lane / 8, r = lane % 8;
#pragma unroll
    for (int kk = 0; kk < BM / 16; ++kk) {
        u32 a[4];
        pack_a(a, x[2 * kk], x[2 * kk + 1]);
#pragma unroll
        for (int nt = 0; nt < D_TILES; nt += 2) {
            u32 b[4];
            ldmatrix_x4_trans(b, tile + (kk * 16 + (mat % 2) * 8 + r) * ROW + nt * 8 + (mat / 2) * 8);
            mma_16816(acc[nt], a, b[0], b[1]);
            mma_16816(acc[nt + 1], a, b[2], b[3]);
        }
    }
}

// dQ's accumulation: two adjacent floats (8-byte aligned) added in one reduction on sm_90+,
// whose `red.v2` fills each 32-byte sector a warp touches (scalar adds leave half of it unused).
// 4-byte global -> shared copy (cached in L1); `src_bytes` = 0 zero-fills without reading.
__device__ __forceinline__ void cp_async_4(void* dst, const void* src, int src_bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes));
}

__device__ __forceinline__ void red_add2(float* p, float x, float y) {
#if __CUDA_ARCH__ >= 900
    asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(p), "f"(x), "f"(y) : "memory");
#else
    asm volatile("red.global.add.f32 [%0], %1;\n" ::"l"(p), "f"(x) : "memory");
    asm volatile("red.global.add.f32 [%0], %1;\n" ::"l"(p + 1), "f"(y) : "memory");
#endif
}

extern "C" __global__ void __launch_bounds__(THREADS, 1) EVOATTN_KERNEL_NAME(const __grid_constant__ BwdParams p) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    elem_t* sK = (elem_t*)smem_raw;                  // [BN][ROW]
    elem_t* sV = sK + BN * ROW;                      // [BN][ROW]
    elem_t* sQ = sV + BN * ROW;                      // [STAGES][BM][ROW]
    elem_t* sdO = sQ + STAGES * BM * ROW;            // [STAGES][BM][ROW]
    elem_t* sdS = sdO + STAGES * BM * ROW;           // [BN][DS_ROW]: dSᵀ
    float* sLse = (float*)(sdS + BN * DS_ROW);       // [STAGES][BM]
    float* sDelta = sLse + STAGES * BM;              // [STAGES][BM]

    const int n0 = blockIdx.x * BN, kv_head = blockIdx.y, batch = blockIdx.z;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int mat = lane / 8, r = lane % 8;
    const int group = p.h / p.hkv;
    // The first query that sees one of these keys; the query blocks from its block on.
    const int first_row = p.causal ? max(n0 - p.causal_offset, 0) : 0;
    const int first_mb = first_row / BM;
    const int m_blocks = first_row < p.sq ? (p.sq + BM - 1) / BM - first_mb : 0;
    const int steps = group * m_blocks;  // (query head, query block) pairs, heads outer

    copy_rows<BN>(sK, p.k + batch * p.k_batch + kv_head * p.k_head, p.k_seq, n0, p.sk);
    copy_rows<BN>(sV, p.v + batch * p.v_batch + kv_head * p.v_head, p.v_seq, n0, p.sk);

    // Step `step`'s Q and dO rows, LSE and delta into its buffer, all by cp.async (no thread
    // waits on a global load before the step's barrier). A padded row gets zeros: its Q and dO
    // rows are zero, so its P of 1 meets dO = 0 and dP = delta = 0, and it adds nothing.
    auto load_step = [&](int step) {
        const int head = kv_head * group + step / m_blocks, m0 = (first_mb + step % m_blocks) * BM;
        const int buf = step % STAGES;
        copy_rows<BM>(sQ + buf * BM * ROW, p.q + batch * p.q_batch + head * p.q_head, p.q_seq, m0, p.sq);
        copy_rows<BM>(sdO + buf * BM * ROW, p.dout + batch * p.do_batch + head * p.do_head, p.do_seq, m0, p.sq);
        const i64 rows = ((i64)batch * p.h + head) * p.sq;
        for (int i = threadIdx.x; i < 2 * BM; i += THREADS) {
            const int row = m0 + i % BM;
            const float* src = (i < BM ? p.lse : p.delta) + rows + min(row, p.sq - 1);
            cp_async_4((i < BM ? sLse : sDelta) + buf * BM + i % BM, src, row < p.sq ? 4 : 0);
        }
    };
    if (steps > 0) load_step(0);
    cp_async_commit();  // K, V and step 0

    float dk[D_TILES][4], dv[D_TILES][4];
#pragma unroll
    for (int nt = 0; nt < D_TILES; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) dk[nt][e] = dv[nt][e] = 0.f;

    const int key_lo = warp * 16;  // this warp's keys in the block
    for (int step = 0; step < steps; ++step) {
#if STAGES == 2
        if (step + 1 < steps) load_step(step + 1);
        cp_async_commit();
        cp_async_wait<1>();
#else
        if (step > 0) {
            load_step(step);
            cp_async_commit();
        }
        cp_async_wait<0>();
#endif
        __syncthreads();
        const int buf = step % STAGES;
        const int head = kv_head * group + step / m_blocks, m0 = (first_mb + step % m_blocks) * BM;
        const elem_t* tQ = sQ + buf * BM * ROW;
        const elem_t* tdO = sdO + buf * BM * ROW;
        const float* lse = sLse + buf * BM;
        const float* delta = sDelta + buf * BM;

        // Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ: this warp's 16 keys by the step's BM queries.
        float s[Q_TILES][4], dp[Q_TILES][4];
#pragma unroll
        for (int nt = 0; nt < Q_TILES; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) s[nt][e] = dp[nt][e] = 0.f;
#pragma unroll
        for (int ks = 0; ks < K_STEPS; ++ks) {
            u32 ka[4], va[4];
            load_a(ka, sK, key_lo, ks);
            load_a(va, sV, key_lo, ks);
#pragma unroll
            for (int nt = 0; nt < Q_TILES; nt += 2) {
                // matrices: queries nt*8.. x (d lo, d hi), queries (nt+1)*8.. x (d lo, d hi)
                const int at = (nt * 8 + (mat / 2) * 8 + r) * ROW + ks * 16 + (mat % 2) * 8;
                u32 b[4];
                ldmatrix_x4(b, tQ + at);
                mma_16816(s[nt], ka, b[0], b[1]);
                mma_16816(s[nt + 1], ka, b[2], b[3]);
                ldmatrix_x4(b, tdO + at);
                mma_16816(dp[nt], va, b[0], b[1]);
                mma_16816(dp[nt + 1], va, b[2], b[3]);
            }
        }

        // Pᵀ into s, dSᵀ into dp (float32); masked and padded pairs are exactly 0. Only a step
        // with keys past Sk or a query that misses one of the block's keys tests each pair.
        const bool edge = n0 + BN > p.sk || (p.causal && n0 + BN - 1 > m0 + p.causal_offset);
#pragma unroll
        for (int nt = 0; nt < Q_TILES; ++nt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int key = n0 + key_lo + g + (e / 2) * 8, col = nt * 8 + 2 * t + e % 2;
                const bool visible = !edge || (key < p.sk && (!p.causal || key <= m0 + col + p.causal_offset));
                const float pe = visible ? fast_exp2(s[nt][e] * p.scale_log2 - lse[col] * LOG2E) : 0.f;
                s[nt][e] = pe;
                dp[nt][e] = pe * (dp[nt][e] - delta[col]);
            }
        }

        gemm_rows(dv, s, tdO);  // dV += Pᵀ·dO
        gemm_rows(dk, dp, tQ);  // dK += dSᵀ·Q (scaled at the end)

        // dSᵀ to shared memory for dQ, which needs every warp's keys.
#pragma unroll
        for (int nt = 0; nt < Q_TILES; ++nt) {
            const int col = nt * 8 + 2 * t;
            *(u32*)(sdS + (key_lo + g) * DS_ROW + col) = pack_float2(dp[nt][0], dp[nt][1]);
            *(u32*)(sdS + (key_lo + g + 8) * DS_ROW + col) = pack_float2(dp[nt][2], dp[nt][3]);
        }
        __syncthreads();

        // dQ(step's rows) += dS·K over the block's keys: 16 rows by DQ_COLS columns a job.
        float* dq_acc = p.dq_acc + ((i64)batch * p.h + head) * p.sq * D;
        for (int job = warp; job < DQ_JOBS; job += WARPS) {
            const int row0 = (job % ROW_GROUPS) * 16, col0 = (job / ROW_GROUPS) * DQ_COLS;
            float acc[DQ_TILES][4];
#pragma unroll
            for (int nt = 0; nt < DQ_TILES; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
#pragma unroll
            for (int kk = 0; kk < BN / 16; ++kk) {
                // dS's A fragment from dSᵀ (keys by queries), transposed by ldmatrix.
                u32 a[4];
                ldmatrix_x4_trans(a, sdS + (kk * 16 + (mat / 2) * 8 + r) * DS_ROW + row0 + (mat % 2) * 8);
#pragma unroll
                for (int nt = 0; nt < DQ_TILES; nt += 2) {
                    u32 b[4];
                    ldmatrix_x4_trans(b, sK + (kk * 16 + (mat % 2) * 8 + r) * ROW + col0 + nt * 8 + (mat / 2) * 8);
                    mma_16816(acc[nt], a, b[0], b[1]);
                    mma_16816(acc[nt + 1], a, b[2], b[3]);
                }
            }
#pragma unroll
            for (int nt = 0; nt < DQ_TILES; ++nt) {
                const int row = m0 + row0 + g, col = col0 + nt * 8 + 2 * t;
                if (row < p.sq) red_add2(dq_acc + (i64)row * D + col, acc[nt][0], acc[nt][1]);
                if (row + 8 < p.sq) red_add2(dq_acc + (i64)(row + 8) * D + col, acc[nt][2], acc[nt][3]);
            }
        }
        __syncthreads();  // the next step reuses this buffer and dSᵀ
    }

    // dK and dV of this warp's keys, once.
    elem_t* dk_out = p.dk + batch * p.dk_batch + kv_head * p.dk_head;
    elem_t* dv_out = p.dv + batch * p.dv_batch + kv_head * p.dv_head;
#pragma unroll
    for (int nt = 0; nt < D_TILES; ++nt) {
        const int key = n0 + key_lo + g, col = nt * 8 + 2 * t;
        if (key < p.sk) {
            *(u32*)(dk_out + key * p.dk_seq + col) = pack_float2(dk[nt][0] * p.scale, dk[nt][1] * p.scale);
            *(u32*)(dv_out + key * p.dv_seq + col) = pack_float2(dv[nt][0], dv[nt][1]);
        }
        if (key + 8 < p.sk) {
            *(u32*)(dk_out + (key + 8) * p.dk_seq + col) = pack_float2(dk[nt][2] * p.scale, dk[nt][3] * p.scale);
            *(u32*)(dv_out + (key + 8) * p.dv_seq + col) = pack_float2(dv[nt][2], dv[nt][3]);
        }
    }
}

// The (batch, head, row) of flattened query row `row` and its element offset in a tensor
// with these strides.
__device__ __forceinline__ i64 row_offset(i64 row, const BwdParams& p, i64 batch_stride, i64 head_stride, i64 seq) {
    const i64 bh = row / p.sq;
    return (bh / p.h) * batch_stride + (bh % p.h) * head_stride + (row % p.sq) * seq;
}

// Sum of the products of 8 packed 16-bit pairs.
__device__ __forceinline__ float dot8(uint4 x, uint4 y) {
    const u32 xs[4] = {x.x, x.y, x.z, x.w}, ys[4] = {y.x, y.y, y.z, y.w};
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        sum += elem_to_float((elem_t)(xs[i] & 0xffff)) * elem_to_float((elem_t)(ys[i] & 0xffff));
        sum += elem_to_float((elem_t)(xs[i] >> 16)) * elem_to_float((elem_t)(ys[i] >> 16));
    }
    return sum;
}

// delta = rowsum(dO ∘ O) and the row's dQ accumulator zeroed: one warp a query row, 8
// elements a lane.
extern "C" __global__ void __launch_bounds__(DOT_ROWS * 32) EVOATTN_BWD_DOT_NAME(const __grid_constant__ BwdParams p) {
    const int lane = threadIdx.x % 32;
    const i64 row = (i64)blockIdx.x * DOT_ROWS + threadIdx.x / 32;
    if (row >= (i64)p.b * p.h * p.sq) return;
    float sum = 0.f;
    if (lane < D / CHUNK) {
        const int c = lane * CHUNK;
        const uint4 o = *(const uint4*)(p.o + row_offset(row, p, p.o_batch, p.o_head, p.o_seq) + c);
        const uint4 d = *(const uint4*)(p.dout + row_offset(row, p, p.do_batch, p.do_head, p.do_seq) + c);
        sum = dot8(o, d);
        float4* acc = (float4*)(p.dq_acc + row * D + c);
        const float4 zero = {0.f, 0.f, 0.f, 0.f};
        acc[0] = zero;
        acc[1] = zero;
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (lane == 0) p.delta[row] = sum;
}

// dQ = scale · accumulator, 8 elements a thread.
extern "C" __global__ void __launch_bounds__(256) EVOATTN_BWD_DQ_NAME(const __grid_constant__ BwdParams p) {
    const i64 chunk = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (chunk >= (i64)p.b * p.h * p.sq * (D / CHUNK)) return;
    const i64 row = chunk / (D / CHUNK);
    const int c = (int)(chunk % (D / CHUNK)) * CHUNK;
    const float4* acc = (const float4*)(p.dq_acc + row * D + c);
    const float4 lo = acc[0], hi = acc[1];
    const float s = p.scale;
    uint4 out;
    out.x = pack_float2(lo.x * s, lo.y * s);
    out.y = pack_float2(lo.z * s, lo.w * s);
    out.z = pack_float2(hi.x * s, hi.y * s);
    out.w = pack_float2(hi.z * s, hi.w * s);
    *(uint4*)(p.dq + row_offset(row, p, p.dq_batch, p.dq_head, p.dq_seq) + c) = out;
}
