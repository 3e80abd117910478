// `wgmma` main loop pieces: the block's shared-memory layout, the tile loads that fill it, and
// the two warpgroup GEMMs, S = Q·Kᵀ (both operands from shared memory) and O += P·V (P from
// registers, V from shared memory).
//
// Shared memory holds every tile in the 128-byte swizzled layout (ptx_sm90.cuh): a tile of
// ROWS rows and D columns is D/ATOM_ELEMS column blocks of [ROWS][ATOM_ELEMS] elements, each row
// 128 bytes with its 16-byte chunks permuted by the row's index mod 8. That is what a TMA box of
// ATOM_ELEMS x ROWS elements writes with CU_TENSOR_MAP_SWIZZLE_128B, and what a 128-byte-swizzle
// descriptor reads. (E4M3 at hd64: rows of 64 bytes in the 64-byte swizzle.)
#pragma once
#include "ptx_sm90.cuh"

#define D EVOATTN_HEAD_DIM
#define BN EVOATTN_BLOCK_N
#define STAGES EVOATTN_STAGES
#define CONSUMERS EVOATTN_CONSUMER_WARPGROUPS
#define WG_THREADS 128
#define WG_ROWS 64                       // rows of one wgmma m64 tile: one consumer warpgroup's
#define BM (WG_ROWS * CONSUMERS)         // query rows per block
#define PRODUCERS EVOATTN_WARP_SPECIALIZED  // 1: a producer warpgroup issues the loads
#define THREADS ((CONSUMERS + PRODUCERS) * WG_THREADS)
#define K_STEP_ELEMS (32 / ELEM_BYTES)   // a wgmma's K: 32 bytes (k16 of 16-bit elements, k32 of E4M3)
#define QK_STEPS (D / K_STEP_ELEMS)      // k steps of Q·Kᵀ
#define PV_STEPS (BN / K_STEP_ELEMS)     // k steps of P·V
#define S_REGS (BN / 2)                  // fp32 S accumulators per thread
// rowsum_mma=1 (hd64, warp-specialised): P·V also sums each row of P on the tensor cores, into
// 8 more accumulator columns (N = 72) whose B operand is a constant tile with ones in its first
// column, instead of 64 FADDs per key block in every consumer thread. With three consumers the
// issue slots bind and the tensor pipe has room; with two its GEMMs are what hides the softmax.
#define ROWSUM_MMA EVOATTN_ROWSUM_MMA
static_assert(!ROWSUM_MMA || EVOATTN_WARP_SPECIALIZED, "the ones tile is filled by the warp-specialised kernel");
#define ROWSUM_COLS (ROWSUM_MMA ? 8 : 0)
#define PV_N (D + ROWSUM_COLS)           // wgmma N of P·V
#define O_REGS (PV_N / 2)                // fp32 O accumulators per thread (and the row sums')
// The accumulator holding row r's sum: column D, which the quad's thread t = 0 holds (the
// others hold the zero columns D + 2t, D + 2t + 1), so per thread it is a partial sum whose
// quad sum is the row's, as RowState's l.
#define ROWSUM_REG(r) (D / 2 + 2 * (r))

static_assert(THREADS == EVOATTN_THREADS, "host and kernel disagree on the block size");
static_assert(CONSUMERS >= 1 && CONSUMERS <= 4, "one to four consumer warpgroups (wgmma takes three at most)");
static_assert(D % ATOM_ELEMS == 0, "head dim must be whole swizzled rows");
static_assert(BN % 16 == 0 && BN >= 16 && BN <= 256, "wgmma N (keys per tile) must be 16..256 in steps of 16");
static_assert(D <= 256, "wgmma N (head dim of P·V) is at most 256");
static_assert(STAGES >= 1 && STAGES <= 4, "1 to 4 K/V stages");

// Byte sizes and offsets of the tiles, from the 1024-aligned base of dynamic shared memory.
#define TILE_BYTES(rows) ((rows) * D * ELEM_BYTES)
#define Q_OFFSET 0
#define K_OFFSET (Q_OFFSET + TILE_BYTES(BM))
#define V_OFFSET (K_OFFSET + STAGES * TILE_BYTES(BN))
// tma_store=1 stages O for its TMA stores in shared memory. One tile per block stages it in
// the Q tile, whose last reader is done by then; persistent blocks are already loading the
// next tile's Q there, so they stage O in a tile of its own after the rings. That tile holds
// D / O_PASSES columns (o_passes: at hd256 the whole one does not fit), which each consumer
// fills and stores O_PASSES times.
// o_in_q=1 (persistent blocks): each consumer stages O in its own rows of the Q tile instead,
// and those rows load the next tile's Q only once the stores have read them (wgmma_ws.cuh).
#define O_IN_Q EVOATTN_O_IN_Q
static_assert(!O_IN_Q || (EVOATTN_TMA_STORE && EVOATTN_PERSISTENT), "O in the Q rows is a persistent TMA-store layout");
// E4M3's Q tile holds half of O's bytes, so E4M3 stages O in a tile of its own on grid blocks
// too.
#define O_STAGE_OWN_TILE (EVOATTN_TMA_STORE && (EVOATTN_PERSISTENT || EVOATTN_FP8) && !O_IN_Q)
#define O_PASSES EVOATTN_O_PASSES
#define O_PASS_COLS (D / O_PASSES)
// O is 16-bit whatever the inputs: its staging rows are 128-byte swizzled rows of 64 elements
// (the 16-bit inputs' own rows, from hd64 up), and a tile of `rows` rows O_TILE_BYTES.
#define O_ROW_BYTES 128
#define O_ELEM_BYTES 2
#define O_ATOM_ELEMS (O_ROW_BYTES / O_ELEM_BYTES)
#define O_TILE_BYTES(rows) ((rows) * D * 2)
static_assert(D * 2 >= O_ROW_BYTES && (EVOATTN_FP8 || ATOM_ELEMS == O_ATOM_ELEMS), "O's rows are whole 128-byte rows");
static_assert(O_PASSES == 1 || O_STAGE_OWN_TILE, "only O's own staging tile is cut into column passes");
static_assert(O_PASS_COLS % O_ATOM_ELEMS == 0, "a pass stores whole 64-column blocks");
#define O_STAGE_OFFSET (V_OFFSET + STAGES * TILE_BYTES(BN))
// 1.0 as the element type's bits.
#define ELEM_ONE_BITS (EVOATTN_BF16 ? 0x3F80u : 0x3C00u)
// rowsum_mma's ones tile, [BN][64] like a V stage, with ones in column 0.
#define ONES_OFFSET (O_STAGE_OFFSET + (O_STAGE_OWN_TILE ? O_TILE_BYTES(BM) / O_PASSES : 0))
// vt_producer=1 (E4M3): V's tiles land as TMA loads them, [BN keys][D] bytes in the inputs'
// swizzled layout, in a ring of their own beside the Vᵀ stages, which the producer
// warpgroup's other warps fill from it (`transpose_v_tile`, wgmma_ws.cuh).
#ifndef EVOATTN_VT_PRODUCER
#define EVOATTN_VT_PRODUCER 0
#endif
#define VT_PRODUCER EVOATTN_VT_PRODUCER
// vt_given=1 (E4M3): the caller holds V as Vᵀ ([B][Hkv][D][Sk], keys contiguous), so V needs
// only each 16 keys put in P's order: with vt_producer TMA loads the caller's tiles straight
// into the Vᵀ stages and the producer warpgroup's other warps permute them in place
// (`permute_vt_tile`, no raw ring); without, a kernel of its own permutes V before.
#ifndef EVOATTN_VT_GIVEN
#define EVOATTN_VT_GIVEN 0
#endif
#define VT_GIVEN EVOATTN_VT_GIVEN
// The raw ring of V's tiles as loaded, which the producer's other warps transpose.
#define V_RAW_RING (VT_PRODUCER && !VT_GIVEN)
#define V_RAW_OFFSET (ONES_OFFSET + (ROWSUM_MMA ? TILE_BYTES(BN) : 0))
#define SMEM_LAYOUT_BYTES (V_RAW_OFFSET + (V_RAW_RING ? STAGES * TILE_BYTES(BN) : 0))
static_assert(!ROWSUM_MMA || D == 64, "the ones tile is one 64-column block beside V's one");
static_assert(TILE_BYTES(BN) % ATOM_BYTES == 0 && TILE_BYTES(WG_ROWS) % ATOM_BYTES == 0, "tiles keep 1024-byte alignment");
static_assert(SMEM_LAYOUT_BYTES + ATOM_BYTES <= EVOATTN_DYNAMIC_SMEM, "the host reserves too little shared memory");

// E4M3 inputs: Q and K tiles of bytes (64-byte swizzled rows at hd64), and V as Vᵀ tiles of
// [D][BN] bytes (issue_pv). What the 16-bit levers add around the GEMMs that assumes 16-bit
// tiles (the ones tile, O staged in the Q rows, the multicast's halves of V's rows) is off.
#if EVOATTN_FP8
#include "ptx_fp8.cuh"
static_assert(BN % 128 == 0, "E4M3: a Vᵀ tile row is whole 128-byte swizzled rows of keys");
static_assert(!ROWSUM_MMA && !O_IN_Q && !EVOATTN_MULTICAST,
              "E4M3: no ones tile, no O staged in the Q rows, no multicast");
static_assert(EVOATTN_OVERLAP, "E4M3 runs the pipelined warp-specialised consumer");
#endif
static_assert(!VT_PRODUCER || EVOATTN_FP8, "only E4M3 reads V transposed");
static_assert(!VT_GIVEN || EVOATTN_FP8, "only E4M3 reads V transposed");

// The block's shared memory: base (1024-aligned) and the tiles in it.
struct SmemTiles {
    unsigned char* base;
    __device__ __forceinline__ unsigned char* q() const { return base + Q_OFFSET; }
    __device__ __forceinline__ unsigned char* k(int stage) const { return base + K_OFFSET + stage * TILE_BYTES(BN); }
    __device__ __forceinline__ unsigned char* v(int stage) const { return base + V_OFFSET + stage * TILE_BYTES(BN); }
    // This warpgroup's 64 rows of Q, as the tile of BM rows they sit in (column blocks are BM rows apart).
    __device__ __forceinline__ unsigned char* q_rows(int wg) const { return q() + wg * WG_ROWS * ROW_BYTES; }
    // Where this warpgroup stages its 64 rows of O for the epilogue, in a BM-row tile like Q's
    // (its own tile: O_PASS_COLS columns).
    __device__ __forceinline__ unsigned char* o_rows(int wg) const {
        return O_STAGE_OWN_TILE ? base + O_STAGE_OFFSET + wg * WG_ROWS * O_ROW_BYTES : q_rows(wg);
    }
    __device__ __forceinline__ unsigned char* ones() const { return base + ONES_OFFSET; }
    // vt_producer=1: V's tile as loaded, before the transpose into stage `stage` of v().
    __device__ __forceinline__ unsigned char* v_raw(int stage) const {
        return base + V_RAW_OFFSET + stage * TILE_BYTES(BN);
    }
};

// Fills rowsum_mma's ones tile (all threads of the block, once) and makes it visible to the
// async proxy that wgmma reads shared memory through.
__device__ __forceinline__ void init_ones_tile(const SmemTiles& sm) {
    if (!ROWSUM_MMA) return;
    for (int i = threadIdx.x; i < BN * ATOM_ELEMS / 8; i += THREADS) {
        const int row = i / (ATOM_ELEMS / 8), chunk = i % (ATOM_ELEMS / 8);
        // The 16-byte chunk of (row, columns 8 chunk ..): its first element is 1 in chunk 0.
        const uint4 v = make_uint4(chunk == 0 ? (u32)ELEM_ONE_BITS : 0u, 0u, 0u, 0u);
        *(uint4*)(sm.ones() + swizzled_offset(BN, row, chunk * 8)) = v;
    }
    fence_proxy_async_shared();
}

// Copies `ROWS` rows of D elements starting at global row `row0` (stride `row_stride`) into a
// swizzled shared tile with cp.async, all threads of the block taking part; rows at or past
// `row_end` are zero-filled, so masked keys multiply a finite V and padded queries give finite
// scores. (Step 1 of the kernel; TMA replaces it.)
template <int ROWS>
__device__ __forceinline__ void load_tile(unsigned char* tile, const elem_t* gmem, i64 row_stride, int row0, int row_end) {
    constexpr int CHUNKS_PER_ROW = D / 8;
    for (int i = threadIdx.x; i < ROWS * CHUNKS_PER_ROW; i += THREADS) {
        const int r = i / CHUNKS_PER_ROW, c = (i % CHUNKS_PER_ROW) * 8;
        const int row = row0 + r;
        const bool inside = row < row_end;
        const elem_t* src = inside ? gmem + (i64)row * row_stride + c : gmem;
        cp_async_16(tile + swizzled_offset(ROWS, r, c), src, inside ? 16 : 0);
    }
}

#if EVOATTN_LOADS_TMA
// Bytes one K/V stage receives: a K and a V tile, whole boxes even past Sk (TMA counts the
// zero-filled bytes too).
#define KV_STAGE_BYTES (2 * TILE_BYTES(BN))
static_assert(KV_STAGE_BYTES < (1 << 20) && TILE_BYTES(BM) < (1 << 20), "mbarrier transaction counts are 20 bits");
#endif

// The A fragments of P·V: P (64 x BN) as 16-bit pairs, PV_STEPS k16 slices of 4 registers.
typedef u32 PFrag[PV_STEPS][4];

// half_last=1 (overlap=1): a consumer whose rows see none of the second half of its tile's last
// key block computes only the first HALF_BN columns of it (Q·Kᵀ, softmax and P·V). Under a
// causal mask with BM = BN that is the first consumer's diagonal block: at hd64 512 causal 1 of
// every 5 consumer blocks. The helpers below take the columns they cover as NC (BN or HALF_BN);
// the registers stay BN wide and the upper half is left untouched. Off, HALF_BN is BN, so the
// half steps are the whole ones (and every BN compiles, not only those with whole k16 halves).
#define HALF_LAST EVOATTN_HALF_LAST
#define HALF_BN (HALF_LAST ? BN / 2 : BN)
static_assert(!HALF_LAST || HALF_BN % 16 == 0, "half a key block is whole k16 steps of P·V");
static_assert(!HALF_LAST || EVOATTN_OVERLAP, "the half block is the pipelined consumer's");

// The first N of an array's registers, as an array of its own (the wgmma wrappers take exactly
// their N/2 accumulators).
template <int N, int M>
__device__ __forceinline__ float (&first_regs(float (&a)[M]))[N] {
    static_assert(N <= M, "a prefix of the array");
    return *reinterpret_cast<float(*)[N]>(&a[0]);
}

// q_in_regs=1 (overlap=1): each consumer loads its 64 rows of Q into wgmma A fragments once a
// tile (ldmatrix), and Q·Kᵀ reads A from registers at every key block instead of from shared
// memory: Q's 64 of the 64 + 2 BN rows of D a consumer's GEMMs read a block (a fifth at 128-key
// blocks, at any head dim), and no A descriptor arithmetic between the wgmmas.
// Costs D/4 registers a consumer thread for the whole tile. Q's shared rows are released where
// they were (after the tile's last Q·Kᵀ), so the producer's order is unchanged.
#define Q_IN_REGS EVOATTN_Q_IN_REGS
static_assert(!Q_IN_REGS || EVOATTN_OVERLAP, "Q's fragments are loaded by the pipelined consumer");
typedef u32 QFrag[QK_STEPS][4];
#if Q_IN_REGS
typedef QFrag QOperand;  // the warpgroup's rows of Q, as A fragments
#else
typedef const unsigned char* QOperand;  // the warpgroup's rows of Q in the swizzled Q tile
#endif

// Q's A fragments for this warpgroup's 64 rows (at `q_rows`, in the BM-row Q tile): one
// ldmatrix.x4 a k step (32 bytes), whose four 8x8 16-bit matrices (rows 0-7 and 8-15 of the
// warp's 16, then the same rows 16 bytes on) are exactly the fragment's a[0..3], for 16-bit and
// E4M3 elements alike; lane l gives row l % 16's address 16 (l / 16) bytes on.
__device__ __forceinline__ void load_q_frag(QFrag& q, const unsigned char* q_rows) {
    const int lane = threadIdx.x % 32;
    const int row = (threadIdx.x % WG_THREADS) / 32 * 16 + lane % 16;
#pragma unroll
    for (int ks = 0; ks < QK_STEPS; ++ks) {
        ldmatrix_x4(q[ks], q_rows + swizzled_offset(BM, row, ks * K_STEP_ELEMS + lane / 16 * CHUNK_ELEMS));
    }
    // Every lane's reads of these rows, before any lane's later writes to them (O staged in the
    // Q rows): racecheck reported the pair as a warp-level WAR hazard without it.
    __syncwarp();
}

// After the wait that completes a Q·Kᵀ: with q_in_regs the wgmma read Q's fragments until
// then, so their registers stay Q's (as fence_operand does for P's).
__device__ __forceinline__ void fence_q(QOperand& q) {
#if Q_IN_REGS
    fence_operand(q);
#endif
}

// Issues S(64 x BN) = Q(64 rows x D) · K_tileᵀ from zero, as one commit group; `wgmma_wait`
// completes it. Q and K are K-major (d contiguous): the k step ks is column block
// ks / STEPS_PER_ROW, 32 bytes per step inside it. Q is this warpgroup's rows in shared memory,
// or with q_in_regs its fragments.
#define STEPS_PER_ROW (ROW_BYTES / 32)
template <int NC = BN>
__device__ __forceinline__ void issue_qk(float (&s)[S_REGS], const QOperand& q, const SmemTiles& sm, int stage) {
#if !Q_IN_REGS
    const u64 q_desc = wgmma_desc(smem_addr(q), 16, ROW_SBO, ROW_SWIZZLE);
#endif
    const u64 k_desc = wgmma_desc(smem_addr(sm.k(stage)), 16, ROW_SBO, ROW_SWIZZLE);
    fence_operand(s);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < QK_STEPS; ++ks) {
        const u32 in_block = (ks % STEPS_PER_ROW) * 32;
        const u64 b = wgmma_desc_advance(k_desc, (ks / STEPS_PER_ROW) * BN * ROW_BYTES + in_block);
#if Q_IN_REGS
        Wgmma<NC>::rs<0>(first_regs<NC / 2>(s), q[ks], b, ks > 0 ? 1u : 0u);
#else
        const u64 a = wgmma_desc_advance(q_desc, (ks / STEPS_PER_ROW) * BM * ROW_BYTES + in_block);
        Wgmma<NC>::ss<0>(first_regs<NC / 2>(s), a, b, ks > 0 ? 1u : 0u);
#endif
    }
    wgmma_commit();
}

#if EVOATTN_FP8
// P from the S accumulators as E4M3 A fragments, one k32 step (32 keys: n-chunks 4kk..4kk+3)
// at a time. A thread's a[0] holds its row g at k = 4t..4t+3; packing the accumulators it has
// there, columns 2t, 2t+1 of chunks 4kk and 4kk+1, puts keys {2t, 2t+1, 8+2t, 9+2t} of each
// 16 at those k (a[1]: row g+8; a[2], a[3]: the next 16 keys), with no shuffle. The V tile's
// keys are stored in that order (`vt_key`), so the products pair up.
template <int NC = BN>
__device__ __forceinline__ void pack_p(PFrag& a, const float (&p)[S_REGS]) {
#pragma unroll
    for (int kk = 0; kk < NC / 32; ++kk) {
        const float* x = &p[16 * kk];
        a[kk][0] = pack_e4m3x4(x[0], x[1], x[4], x[5]);
        a[kk][1] = pack_e4m3x4(x[2], x[3], x[6], x[7]);
        a[kk][2] = pack_e4m3x4(x[8], x[9], x[12], x[13]);
        a[kk][3] = pack_e4m3x4(x[10], x[11], x[14], x[15]);
    }
}

// Key position `pos` of a Vᵀ tile row holds key vt_key(pos) (within each 16): P's k order.
// The V transpose kernel (wgmma_vt.cuh) and `transpose_v_tile` write that order.
__device__ __forceinline__ int vt_key(int pos) {
    const int in16 = pos % 16, t = in16 / 4, i = in16 % 4;
    return pos - in16 + 2 * t + (i % 2) + 8 * (i / 2);
}

// 16 keys of a Vᵀ row in order (a caller's Vᵀ) as P's order puts them: output word t holds keys
// {2t, 2t+1, 8+2t, 9+2t}, the low or high byte pairs of input words t / 2 (keys 4(t/2)..) and
// t / 2 + 2 (keys 8+4(t/2)..).
__device__ __forceinline__ uint4 vt_key_order(uint4 w) {
    return make_uint4(__byte_perm(w.x, w.z, 0x5410), __byte_perm(w.x, w.z, 0x7632), __byte_perm(w.y, w.w, 0x5410),
                      __byte_perm(w.y, w.w, 0x7632));
}

#if V_RAW_RING
// vt_producer=1: warp `warp` of `warps` turns its share of a V tile as loaded (`raw`: [BN keys]
// [D] bytes, swizzled) into a Vᵀ tile (`vt`: per 128 keys D rows of 128-byte swizzled key
// rows, each 16 keys in P's order, as `issue_pv` reads it). A unit is 16 keys by 32 head-dim
// bytes: ldmatrix.x4.trans (b16: pairs of bytes) gives lane (g, t) keys {2t, 2t+1} and
// {8+2t, 9+2t} at head-dim bytes {2g, 2g+1} (r[0], r[1]) and 16 on (r[2], r[3]); two byte
// permutes a pair make the words of d = 2g and 2g + 1 in P's key order (`vt_key`), and
// stmatrix.x4 writes each word as 4 bytes of a Vᵀ row. Lanes g >= 4 swap their even and odd
// words, so each stored matrix's rows are d = 2i (i < 4) and 2i + 1 (i >= 4), or the other
// parity: eight rows whose swizzle rows (d mod 8) differ.
// A warp takes 16-key groups (every warps-th) and each group's D/32 chunks; the swizzles'
// XORs are of lane constants with the chunk (a constant per unrolled chunk) or the group (once
// a group), so a unit costs one address add beside its ldmatrix, permutes and stmatrix (dev2:
// the general swizzle arithmetic per unit was 37% more instructions in the kernel). Written
// out rather than through `swizzled_offset`, whose version compiled otherwise and ran hd128
// 4k +5.1% (docs/decisions/wgmma.md#fp8-vt-producer).
__device__ __forceinline__ void transpose_v_tile(const unsigned char* raw, unsigned char* vt, int warp, int warps) {
    const int lane = threadIdx.x % 32, m = lane / 8, i = lane % 8;
    const bool swap = lane / 4 >= 4;
    const u32 sel_even = swap ? 0x7531u : 0x6420u, sel_odd = swap ? 0x6420u : 0x7531u;
    // ldmatrix: this lane's row is key 8 (m % 2) + i of a group, at head-dim byte 16 (m / 2) of a
    // chunk; swizzled_offset's pattern for that row is a lane constant (16 keys a group keep it).
    const int key = 8 * (m % 2) + i;
    const int pattern = ROW_BYTES == 128 ? key % 8 : (key / 2) % 4;
    const int lane_x = (m / 2) ^ pattern;
    // stmatrix: this lane's row is d = 16 (m / 2) + 2 i + ((m % 2) ^ (i >= 4)) of a chunk's 32.
    const int d = 16 * (m / 2) + 2 * i + ((m % 2) ^ (i >= 4 ? 1 : 0));
    for (int group = warp; group < BN / 16; group += warps) {
        const unsigned char* src = raw + (16 * group + key) * ROW_BYTES;
        unsigned char* dst = vt + (group / 8) * D * 128 + d * 128 + (((group % 8) ^ (d % 8)) << 4);
#pragma unroll
        for (int chunk = 0; chunk < D / 32; ++chunk) {
            // The chunk's column block, and its 16-byte chunk in a swizzled row (even: the lane's
            // m / 2 is its low bit, so the sum is an XOR).
            const int block = 32 * chunk / ROW_BYTES, in_row = (32 * chunk % ROW_BYTES) / 16;
            u32 r[4];
            ldmatrix_x4_trans(r, src + block * BN * ROW_BYTES + ((in_row ^ lane_x) << 4));
            const u32 w[4] = {__byte_perm(r[0], r[1], sel_even), __byte_perm(r[0], r[1], sel_odd),
                              __byte_perm(r[2], r[3], sel_even), __byte_perm(r[2], r[3], sel_odd)};
            stmatrix_x4(dst + 32 * chunk * 128, w);
        }
    }
}
#endif

#if VT_PRODUCER && VT_GIVEN
// vt_given=1 with vt_producer=1: warp `warp` of `warps` puts the keys of a Vᵀ tile as the
// caller holds them (in order) into P's order in place: a 16-byte chunk is 16 keys of one
// head-dim row wherever the swizzle put it. Consecutive chunks a warp: conflict-free accesses.
__device__ __forceinline__ void permute_vt_tile(unsigned char* vt, int warp, int warps) {
    for (int c = 32 * warp + threadIdx.x % 32; c < TILE_BYTES(BN) / 16; c += 32 * warps) {
        uint4* chunk = (uint4*)(vt + 16 * c);
        *chunk = vt_key_order(*chunk);
    }
}
#endif

// Issues the TMA boxes of a Vᵀ tile (keys key0.. of (kv_head, batch) from the transposed V's
// (Sk, D, Hkv, B) tensor map): one box of 128 keys by D rows per 128 keys, D rows apart.
__device__ __forceinline__ void tma_load_vt(unsigned char* tile, const TmaMap* map, u64* bar, int key0, int kv_head,
                                            int batch) {
#pragma unroll
    for (int b = 0; b < BN / 128; ++b) tma_load_4d(tile + b * D * 128, map, bar, key0 + b * 128, 0, kv_head, batch);
}

// Issues O(64 x D) += P(64 x BN) · V_tile(BN x D) as one commit group. E4M3 wgmma reads B
// K-major only, so the tile is Vᵀ ([d][key], keys permuted as `pack_p` says) that the V
// transpose kernel wrote and TMA loaded, or that `transpose_v_tile` wrote (vt_producer): rows
// are d (the N index), 128 bytes of keys each;
// k32 step kk is 32 bytes on in a row, and every 128 keys a column block of D rows.
template <int NC = BN>
__device__ __forceinline__ void issue_pv(float (&o)[O_REGS], PFrag& a, const SmemTiles& sm, int stage) {
    const u64 v_desc = wgmma_desc(smem_addr(sm.v(stage)), 16, ATOM_BYTES);
    fence_operand(o);
    fence_operand(a);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < NC / 32; ++kk) {
        const u64 b = wgmma_desc_advance(v_desc, (kk / 4) * D * 128 + (kk % 4) * 32);
        Wgmma<PV_N>::rs<0>(o, a[kk], b, 1u);
    }
    wgmma_commit();
}
#else
// P from the S accumulators: columns 16kk..16kk+15 of S are n-chunks 2kk and 2kk+1, exactly
// one A fragment. NC: the columns S holds.
template <int NC = BN>
__device__ __forceinline__ void pack_p(PFrag& a, const float (&p)[S_REGS]) {
#pragma unroll
    for (int kk = 0; kk < NC / 16; ++kk) {
#pragma unroll
        for (int j = 0; j < 4; ++j) a[kk][j] = pack_float2(p[8 * kk + 2 * j], p[8 * kk + 2 * j + 1]);
    }
}

// Issues O(64 x D) += P(64 x BN) · V_tile(BN x D) as one commit group. V is [key][d], so B is
// MN-major: k16 step kk is 16 key rows (2048 bytes) on; LBO steps across d's 64-column blocks
// (BN rows apart), SBO across 8-key groups. NC: the keys of the stage P covers.
template <int NC = BN>
__device__ __forceinline__ void issue_pv(float (&o)[O_REGS], PFrag& a, const SmemTiles& sm, int stage) {
    // With rowsum_mma the second 64-column block of B is the ones tile: LBO reaches it.
    const u32 lbo = ROWSUM_MMA ? (u32)(sm.ones() - sm.v(stage)) : BN * ROW_BYTES;
    const u64 v_desc = wgmma_desc(smem_addr(sm.v(stage)), lbo, ATOM_BYTES);
    fence_operand(o);
    fence_operand(a);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < NC / 16; ++kk) {
        const u64 b = wgmma_desc_advance(v_desc, kk * 16 * ROW_BYTES);
        Wgmma<PV_N>::rs<1>(o, a[kk], b, 1u);
    }
    wgmma_commit();
}

#endif

#if !Q_IN_REGS
// S = Q·Kᵀ for warpgroup `wg`'s rows, completed (the kernel without warp specialisation, whose
// Q is in shared memory).
__device__ __forceinline__ void gemm_qk(float (&s)[S_REGS], const SmemTiles& sm, int wg, int stage) {
    issue_qk(s, sm.q_rows(wg), sm, stage);
    wgmma_wait<0>();
    fence_operand(s);
}
#endif

// O += P·V with P taken from the probabilities in `p`, completed.
__device__ __forceinline__ void gemm_pv(float (&o)[O_REGS], const float (&p)[S_REGS], const SmemTiles& sm, int stage) {
    PFrag a;
    pack_p(a, p);
    issue_pv(o, a, sm, stage);
    wgmma_wait<0>();
    fence_operand(o);
    fence_operand(a);
}
