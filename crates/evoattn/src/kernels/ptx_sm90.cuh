// The project's own inline-PTX wrappers for Hopper (sm_90a): warpgroup MMA (`wgmma`) with its
// shared-memory matrix descriptors, mbarriers, and TMA (`cp.async.bulk.tensor`) loads. Like
// ptx.cuh, each is a thin named shim so the kernels read as algorithms. PTX ISA sections:
// "Asynchronous Warpgroup Level Matrix Multiply-Accumulate" (wgmma, its descriptors and shared
// memory layouts), "mbarrier", "cp.async.bulk.tensor", "Tensor Maps".
#pragma once
#include "ptx.cuh"

typedef unsigned long long u64;
typedef unsigned short u16;

// ---------------------------------------------------------------------------------------------
// Shared-memory matrix descriptors (PTX ISA "Matrix Descriptor Format"), 64 bits:
//   bits  0-13  start address >> 4
//   bits 16-29  leading dimension byte offset (LBO) >> 4
//   bits 32-45  stride dimension byte offset (SBO) >> 4
//   bits 49-51  matrix base offset (0: every tile here starts on a 1024-byte boundary)
//   bits 62-63  swizzle: 0 none, 1 128-byte, 2 64-byte, 3 32-byte
//
// Every operand here uses the 128-byte swizzle, whose atom is 8 rows of 128 bytes (1024 bytes,
// the unit TMA's CU_TENSOR_MAP_SWIZZLE_128B writes): the 16-byte chunk c of row r (r = address
// bits 7-9) sits at chunk c ^ r. A "row" is 128 bytes of the contiguous dimension: 64 16-bit
// elements or 128 E4M3 ones (E4M3 Q and K at hd64: 64-byte rows in the 64-byte swizzle, whose
// atom is 8 rows of 64 bytes, chunk c of row r at c ^ ((r / 2) % 4)).
// - K-major operand (K contiguous: Q and K as [row][d]; E4M3's Vᵀ as [d][key]): rows are the M/N
//   index, a row apart; SBO = 8 rows steps to the next 8-row group; LBO is unused (a k step,
//   32 bytes, never leaves a row); a k step inside the row adds 32 bytes to the start address
//   (the swizzle is applied to the final address, so this is exact on aligned tiles).
// - MN-major operand (N contiguous: 16-bit V as [key][d], B of P·V): rows are the K index
//   (keys), 128 bytes apart; SBO = 1024 steps to the next 8-key group; LBO steps to the next
//   64-element block of N (the next 64 columns of d); the instruction's transpose-B flag is
//   set (16-bit only: FP8 wgmma reads both operands K-major).
// ---------------------------------------------------------------------------------------------

// E4M3 (EVOATTN_FP8=1) tiles hold bytes: a 128-byte row is 128 elements, and at hd64 a row of
// Q or K is 64 bytes, which the 64-byte swizzle covers (its atom: 8 rows of 64 bytes, chunk c of
// row r at c ^ ((r / 2) % 4)).
#define WGMMA_SWIZZLE_128B 1ull
#define WGMMA_SWIZZLE_64B 2ull
#define WGMMA_DESC_ADDR_SHIFT 4  // addresses and offsets are stored in 16-byte units

__device__ __forceinline__ u64 wgmma_desc(u32 smem_byte_addr, u32 lbo_bytes, u32 sbo_bytes,
                                          u64 swizzle = WGMMA_SWIZZLE_128B) {
    return (u64)((smem_byte_addr & 0x3FFFF) >> WGMMA_DESC_ADDR_SHIFT) |
           ((u64)((lbo_bytes >> WGMMA_DESC_ADDR_SHIFT) & 0x3FFF) << 16) |
           ((u64)((sbo_bytes >> WGMMA_DESC_ADDR_SHIFT) & 0x3FFF) << 32) | (swizzle << 62);
}

// The descriptor of the same operand `bytes` further on (a multiple of 16). Shared addresses
// are below 2^18, so the 14-bit start field cannot carry out and moving the operand is one
// 32-bit add on the descriptor's low word, instead of rebuilding it per k-step (the mask,
// shift and or chain cost the GEMM-issuing code about five instructions per wgmma).
// The halves are joined in PTX: written in C++, the compiler turns this back into a 64-bit
// add with a carry and an or.
__device__ __forceinline__ u64 wgmma_desc_advance(u64 desc, u32 bytes) {
    u64 moved;
    asm("mov.b64 %0, {%1, %2};" : "=l"(moved) : "r"((u32)desc + (bytes >> WGMMA_DESC_ADDR_SHIFT)), "r"((u32)(desc >> 32)));
    return moved;
}

// ---------------------------------------------------------------------------------------------
// wgmma: issue, ordering and completion. One warpgroup (4 consecutive warps, the first a
// multiple of 4) issues each instruction collectively.
// ---------------------------------------------------------------------------------------------

// Orders this thread's earlier register writes (accumulators, A fragments) before the next
// wgmma reads them.
__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

// Closes the group of wgmma issued since the last commit.
__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

// Waits until at most N committed groups are still running.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Keeps the compiler from moving accesses to an accumulator across an async wgmma region.
template <int N>
__device__ __forceinline__ void fence_operand(float (&d)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// The same for register A fragments (u32 pairs), which the hardware reads until the wgmma
// completes: fencing them after the wait keeps their registers from being reused before.
template <int N, int M>
__device__ __forceinline__ void fence_operand(u32 (&a)[N][M]) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
#pragma unroll
        for (int j = 0; j < M; ++j) asm volatile("" : "+r"(a[i][j])::"memory");
    }
}

// D(64 x N, f32) += A(64 x 16) · B(16 x N), A and B 16-bit (EVOATTN_BF16 says which).
// `ss`: A and B from shared-memory descriptors, both K-major. `rs`: A from registers (the
// m16n8k16-style fragment of each warp's 16 rows: a[0] rows g k 2t.., a[1] rows g+8, a[2] and
// a[3] the same 8 columns on), B by descriptor. TRANS_B = 1 reads B as MN-major.
// `scale_d` = 0 ignores D's old value (D = A·B). Accumulator i of a thread holds row
// 16*warp + lane/4 + 8*((i/2)%2), column 8*(i/4) + 2*(lane%4) + i%2.
// E4M3 (EVOATTN_FP8=1): k32 steps (32 bytes, as k16 of 16-bit elements), both operands
// K-major (FP8 wgmma has no transpose), so the instruction takes no transpose immediates.
#if EVOATTN_FP8
#define WGMMA_TYPES ".f32.e4m3.e4m3"
#define WGMMA_K "k32"
#define WGMMA_TRANSPOSABLE 0
#define WGMMA_SS_TRANS(t) ""
#define WGMMA_RS_TRANS(t) ""
#else
#if EVOATTN_BF16
#define WGMMA_TYPES ".f32.bf16.bf16"
#else
#define WGMMA_TYPES ".f32.f16.f16"
#endif
#define WGMMA_K "k16"
#define WGMMA_TRANSPOSABLE 1
#define WGMMA_SS_TRANS(t) ", 0, " t
#define WGMMA_RS_TRANS(t) ", " t
#endif

// One specialisation per N, generated (crates/evoattn/build.rs): the asm operand list spells
// out every accumulator register.
template <int N>
struct Wgmma;
#include "wgmma_ops.cuh"

// ---------------------------------------------------------------------------------------------
// mbarrier (PTX ISA "Parallel Synchronization and Communication Instructions: mbarrier"): a
// 64-bit shared-memory object with an expected arrival count and a transaction (byte) count;
// a phase completes when both reach zero, and its parity flips.
// ---------------------------------------------------------------------------------------------

__device__ __forceinline__ void mbarrier_init(u64* bar, u32 arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(arrivals) : "memory");
}

// Makes the initialised barriers visible to the other threads and to the async proxy (TMA).
__device__ __forceinline__ void mbarrier_init_fence() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// Arrives once and adds `bytes` to the transactions the current phase waits for.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(u64* bar, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void mbarrier_arrive(u64* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}

// Arrives once on the barrier at `bar`'s offset in block `rank` of the cluster (this block's
// own included). The default semantics (release at CTA scope): what it signals is that reads
// have completed (a wgmma waited for), and `.release.cluster` costs a GPU-wide MEMBAR an arrival.
__device__ __forceinline__ void mbarrier_arrive_cluster(u64* bar, u32 rank) {
    asm volatile(
        "{\n.reg .b32 remote;\n"
        "mapa.shared::cluster.u32 remote, %0, %1;\n"
        "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(smem_addr(bar)),
        "r"(rank)
        : "memory");
}

// ---------------------------------------------------------------------------------------------
// Thread block clusters (PTX ISA "Cluster"): blocks launched together on one GPC, which can
// reach each other's shared memory.
// ---------------------------------------------------------------------------------------------

// This block's rank in its cluster (not volatile: a constant of the block, which the compiler
// may read again rather than keep in a register).
__device__ __forceinline__ u32 cluster_rank() {
    u32 rank;
    asm("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
    return rank;
}

// Every thread of every block in the cluster arrives, then waits for the others: shared-memory
// accesses before it (barrier initialisation, remote arrivals) are ordered before those after it
// at cluster scope. Not `.aligned`: a warp may reach it diverged (the producer's one thread).
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}

// Whether the phase with parity `parity` has completed, by `mbarrier.<op>.parity`: try_wait may
// suspend the thread a while first and may still give up (loop on it); test_wait answers at
// once (a test, not a wait).
#define MBARRIER_PARITY_QUERY(name, op)                                   \
    __device__ __forceinline__ bool name(u64* bar, u32 parity) {          \
        u32 done;                                                         \
        asm volatile(                                                     \
            "{\n.reg .pred p;\n"                                          \
            "mbarrier." op ".parity.shared::cta.b64 p, [%1], %2;\n"       \
            "selp.u32 %0, 1, 0, p;\n}\n"                                  \
            : "=r"(done)                                                  \
            : "r"(smem_addr(bar)), "r"(parity)                            \
            : "memory");                                                  \
        return done != 0;                                                 \
    }
MBARRIER_PARITY_QUERY(mbarrier_try_wait, "try_wait")
MBARRIER_PARITY_QUERY(mbarrier_test_wait, "test_wait")
#undef MBARRIER_PARITY_QUERY

__device__ __forceinline__ void mbarrier_wait(u64* bar, u32 parity) {
    while (!mbarrier_try_wait(bar, parity)) {
    }
}

// ---------------------------------------------------------------------------------------------
// Proxies and TMA.
// ---------------------------------------------------------------------------------------------

// Four 8x8 b16 matrices stored (sm_90): lanes 8i..8i+7 give the row addresses of matrix i,
// and lane 4g + t's r[i] is row g's elements 2t, 2t+1 of matrix i (ldmatrix_x4's layout).
__device__ __forceinline__ void stmatrix_x4(void* row_addr, const u32 (&r)[4]) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(smem_addr(row_addr)),
                 "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
                 : "memory");
}

// Orders this thread's generic-proxy shared-memory accesses (ordinary stores, cp.async) with
// later async-proxy accesses (wgmma operand reads, TMA) once a barrier has been crossed.
__device__ __forceinline__ void fence_proxy_async_shared() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// A CUtensorMap as the driver encodes it (cuTensorMapEncodeTiled): 128 opaque bytes, 64-byte
// aligned. NVRTC has no cuda.h; `runtime::tma::TensorMap` is the host twin.
struct __align__(64) TmaMap {
    u64 opaque[16];
};

// Warms the descriptor cache with a tensor map (a kernel parameter, so a generic address).
__device__ __forceinline__ void tma_prefetch_map(const TmaMap* map) {
    asm volatile("prefetch.tensormap [%0];\n" ::"l"((u64)map) : "memory");
}

// Loads the box at coordinates (c0 innermost .. c3) of a 4-D tensor map into shared memory at
// `dst` (1024-byte aligned for the 128-byte swizzle); the bytes complete a transaction on
// `bar`. Elements outside the tensor are written as zeros.
__device__ __forceinline__ void tma_load_4d(void* dst, const TmaMap* map, u64* bar, int c0, int c1, int c2, int c3) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
        "[%6];\n" ::"r"(smem_addr(dst)),
        "l"((u64)map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_addr(bar))
        : "memory");
}

// The same box, written to shared memory at `dst` and completing on `bar` in every block of the
// cluster whose bit is set in `blocks` (the same offsets in each: the blocks run one kernel, so
// one shared-memory layout): one read of L2 feeds them all.
__device__ __forceinline__ void tma_load_4d_multicast(void* dst, const TmaMap* map, u64* bar, int c0, int c1, int c2,
                                                      int c3, u16 blocks) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, "
        "{%2, %3, %4, %5}], [%6], %7;\n" ::"r"(smem_addr(dst)),
        "l"((u64)map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_addr(bar)), "h"(blocks)
        : "memory");
}

// Stores the box at coordinates (c0 innermost .. c3) of a 4-D tensor map from shared memory at
// `src` (the same swizzled layout a load writes) into global memory; elements outside the
// tensor are not written. Completion is tracked per thread in bulk async-groups: commit with
// `tma_store_commit`, then `tma_store_wait_read` before `src` is written again or the block exits.
__device__ __forceinline__ void tma_store_4d(const TmaMap* map, const void* src, int c0, int c1, int c2, int c3) {
    asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%1, %2, %3, %4}], [%5];\n" ::"l"((u64)map),
                 "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_addr(src))
                 : "memory");
}

__device__ __forceinline__ void tma_store_commit() {
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}

// Waits until at most N of this thread's committed store groups still read their shared memory
// (their global writes may still be in flight: kernel completion covers those).
template <int N>
__device__ __forceinline__ void tma_store_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}

// ---------------------------------------------------------------------------------------------
// Swizzled tiles (the layout above), shared by `wgmma` and `splitkv`'s TMA ring: a tile of
// `rows` rows and D columns is D/ATOM_ELEMS column blocks of [rows][ATOM_ELEMS] elements.
// ---------------------------------------------------------------------------------------------

#if EVOATTN_FP8
#define ELEM_BYTES 1
#else
#define ELEM_BYTES 2
#endif
// A swizzled row: 128 bytes, or a whole head-dim row where that is shorter (E4M3 at hd64).
#define ROW_BYTES (EVOATTN_HEAD_DIM * ELEM_BYTES < 128 ? EVOATTN_HEAD_DIM * ELEM_BYTES : 128)
#define ATOM_ELEMS (ROW_BYTES / ELEM_BYTES)  // elements per swizzled row: one TMA box's width
#define CHUNK_ELEMS (16 / ELEM_BYTES)        // elements per 16-byte chunk
#define ROW_SBO (8 * ROW_BYTES)              // a descriptor's step to the next 8-row group
#define ROW_SWIZZLE (ROW_BYTES == 128 ? WGMMA_SWIZZLE_128B : WGMMA_SWIZZLE_64B)
#define ATOM_BYTES 1024  // 8 rows of 128 bytes: the 128-byte pattern's period, the alignment a tile needs

// Byte offset, inside a swizzled tile of `rows` rows, of the 16-byte chunk holding elements
// [col, col + 16 / EB) of row `row` (col a multiple of 16 / EB). The row's bytes ROW_B and
// the element's bytes EB are the inputs' unless given (O's 16-bit rows under E4M3 inputs).
template <int ROW_B = ROW_BYTES, int EB = ELEM_BYTES>
__device__ __forceinline__ u32 swizzled_offset(int rows, int row, int col) {
    static_assert(ROW_B == 128 || ROW_B == 64, "the 128- and 64-byte swizzle patterns");
    constexpr int ATOM = ROW_B / EB, CHUNK = 16 / EB;
    const int block = col / ATOM, chunk = (col % ATOM) / CHUNK;
    const int pattern = ROW_B == 128 ? row % 8 : (row / 2) % 4;
    return block * rows * ROW_B + row * ROW_B + ((chunk ^ pattern) << 4);
}

// `smem` rounded up to the next ATOM_BYTES boundary: the swizzle pattern is a function of
// address bits 4-9, so tiles must start 1024-aligned (the host reserves the slack).
__device__ __forceinline__ unsigned char* align_to_atom(unsigned char* smem) {
    return smem + (ATOM_BYTES - smem_addr(smem) % ATOM_BYTES) % ATOM_BYTES;
}

// Issues the D/ATOM_ELEMS TMA boxes that fill BOX_ROWS rows of a swizzled tile of TILE_ROWS rows, from
// `rows` (inside the first column block), with rows [row0, row0 + BOX_ROWS) of (head, batch)
// from a (D, S, H, B) tensor map; box b (ATOM_ELEMS columns) lands at column block b,
// TILE_ROWS * ROW_BYTES bytes apart. Rows past S are zeros. The bytes complete on `bar`, whose expected transaction
// count the caller raised.
// `blocks` other than 0 multicasts every box to the cluster's blocks it names (tma_load_4d_multicast).
template <int TILE_ROWS, int BOX_ROWS = TILE_ROWS>
__device__ __forceinline__ void tma_load_tile(unsigned char* rows, const TmaMap* map, u64* bar, int row0, int head,
                                              int batch, u16 blocks = 0) {
    static_assert(EVOATTN_HEAD_DIM % ATOM_ELEMS == 0, "a tile is whole boxes of a swizzled row");
    static_assert(BOX_ROWS <= TILE_ROWS && BOX_ROWS <= 256, "a TMA box has at most 256 rows, inside the tile");
#pragma unroll
    for (int b = 0; b < EVOATTN_HEAD_DIM / ATOM_ELEMS; ++b) {
        unsigned char* dst = rows + b * TILE_ROWS * ROW_BYTES;
        if (blocks != 0) {
            tma_load_4d_multicast(dst, map, bar, b * ATOM_ELEMS, row0, head, batch, blocks);
        } else {
            tma_load_4d(dst, map, bar, b * ATOM_ELEMS, row0, head, batch);
        }
    }
}

// Stores BOX_ROWS rows of a swizzled tile of TILE_ROWS rows and COLS columns, starting at
// `rows` (inside the first column block; column blocks lie TILE_ROWS rows apart), to global
// rows row0.. and columns col0.. of (head, batch): one box per column block, in one committed
// group. Rows past the tensor's end are dropped by the TMA unit. ROW_B and EB as in
// swizzled_offset.
template <int TILE_ROWS, int BOX_ROWS, int COLS, int ROW_B = ROW_BYTES, int EB = ELEM_BYTES>
__device__ __forceinline__ void tma_store_rows(const TmaMap* map, const unsigned char* rows, int col0, int row0,
                                               int head, int batch) {
    constexpr int ATOM = ROW_B / EB;
    static_assert(BOX_ROWS <= TILE_ROWS && BOX_ROWS <= 256, "a TMA box has at most 256 rows, inside the tile");
    static_assert(COLS % ATOM == 0 && COLS <= EVOATTN_HEAD_DIM, "whole column blocks of the row");
#pragma unroll
    for (int b = 0; b < COLS / ATOM; ++b) {
        tma_store_4d(map, rows + b * TILE_ROWS * ROW_B, col0 + b * ATOM, row0, head, batch);
    }
    tma_store_commit();
}

// Named barrier `id` (1..15; 0 is __syncthreads) over `threads` threads, e.g. one warpgroup.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Arrives on named barrier `id` without waiting: the signalling half of a producer/consumer
// handshake whose other side calls `named_barrier_sync` with the same thread count.
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// ---------------------------------------------------------------------------------------------
// Register reallocation between warpgroups (PTX ISA "setmaxnreg"): every thread of a
// warpgroup executes it; `dec` returns registers to the block's pool, `inc` waits until the
// pool has them. The counts must be multiples of 8 in 24..256.
// ---------------------------------------------------------------------------------------------

template <int REGS>
__device__ __forceinline__ void setmaxnreg_dec() {
    static_assert(REGS % 8 == 0 && REGS >= 24 && REGS <= 256, "setmaxnreg takes multiples of 8 in 24..256");
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGS));
}

template <int REGS>
__device__ __forceinline__ void setmaxnreg_inc() {
    static_assert(REGS % 8 == 0 && REGS >= 24 && REGS <= 256, "setmaxnreg takes multiples of 8 in 24..256");
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGS));
}
