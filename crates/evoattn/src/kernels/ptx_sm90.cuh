// The project's own inline-PTX wrappers for Hopper (sm_90a): warpgroup MMA (`wgmma`) with its
// shared-memory matrix descriptors, mbarriers, and TMA (`cp.async.bulk.tensor`) loads. Like
// ptx.cuh, each is a thin named shim so the kernels read as algorithms. PTX ISA sections:
// "Asynchronous Warpgroup Level Matrix Multiply-Accumulate" (wgmma, its descriptors and shared
// memory layouts), "mbarrier", "cp.async.bulk.tensor", "Tensor Maps".
#pragma once
#include "ptx.cuh"

typedef unsigned long long u64;

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
// bits 7-9) sits at chunk c ^ r. A "row" is 64 16-bit elements of the contiguous dimension.
// - K-major operand (K contiguous: Q and K as [row][d]): rows are the M/N index, 128 bytes
//   apart; SBO = 1024 steps to the next 8-row group; LBO is unused (a k16 slice, 32 bytes, never
//   leaves a row); a k16 step inside the 64-element atom adds 32 bytes to the start address
//   (the swizzle is applied to the final address, so this is exact on 1024-aligned tiles).
// - MN-major operand (N contiguous: V as [key][d], B of P·V): rows are the K index (keys), 128
//   bytes apart; SBO = 1024 steps to the next 8-key group; LBO steps to the next 64-element
//   block of N (the next 64 columns of d); the instruction's transpose-B flag is set.
// ---------------------------------------------------------------------------------------------

#define WGMMA_SWIZZLE_128B 1ull

__device__ __forceinline__ u64 wgmma_desc(u32 smem_byte_addr, u32 lbo_bytes, u32 sbo_bytes) {
    return (u64)((smem_byte_addr & 0x3FFFF) >> 4) | ((u64)((lbo_bytes >> 4) & 0x3FFF) << 16) |
           ((u64)((sbo_bytes >> 4) & 0x3FFF) << 32) | (WGMMA_SWIZZLE_128B << 62);
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

// D(64 x N, f32) += A(64 x 16) · B(16 x N), A and B 16-bit (EVOATTN_BF16 says which).
// `ss`: A and B from shared-memory descriptors, both K-major. `rs`: A from registers (the
// m16n8k16-style fragment of each warp's 16 rows: a[0] rows g k 2t.., a[1] rows g+8, a[2] and
// a[3] the same 8 columns on), B by descriptor. TRANS_B = 1 reads B as MN-major.
// `scale_d` = 0 ignores D's old value (D = A·B). Accumulator i of a thread holds row
// 16*warp + lane/4 + 8*((i/2)%2), column 8*(i/4) + 2*(lane%4) + i%2.
#if EVOATTN_BF16
#define WGMMA_TYPES ".f32.bf16.bf16"
#else
#define WGMMA_TYPES ".f32.f16.f16"
#endif

#define WGMMA_ACC8(d, i)                                                                                     \
    "+f"(d[(i) + 0]), "+f"(d[(i) + 1]), "+f"(d[(i) + 2]), "+f"(d[(i) + 3]), "+f"(d[(i) + 4]), "+f"(d[(i) + 5]), \
        "+f"(d[(i) + 6]), "+f"(d[(i) + 7])
#define WGMMA_ACC16(d, i) WGMMA_ACC8(d, i), WGMMA_ACC8(d, (i) + 8)
#define WGMMA_ACC32(d) WGMMA_ACC16(d, 0), WGMMA_ACC16(d, 16)
#define WGMMA_ACC48(d) WGMMA_ACC32(d), WGMMA_ACC16(d, 32)
#define WGMMA_ACC64(d) WGMMA_ACC32(d), WGMMA_ACC16(d, 32), WGMMA_ACC16(d, 48)
#define WGMMA_ACC96(d) WGMMA_ACC64(d), WGMMA_ACC16(d, 64), WGMMA_ACC16(d, 80)
#define WGMMA_ACC128(d) WGMMA_ACC96(d), WGMMA_ACC16(d, 96), WGMMA_ACC16(d, 112)

// One specialisation per N (the asm operand list spells out every accumulator register).
template <int N>
struct Wgmma;

template <>
struct Wgmma<64> {
    template <int TRANS_B>
    static __device__ __forceinline__ void ss(float (&d)[32], u64 desc_a, u64 desc_b, u32 scale_d) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16" WGMMA_TYPES " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
                     "%32, %33, p, 1, 1, 0, %35;\n}\n"
                     : WGMMA_ACC32(d)
                     : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_B));
    }
    template <int TRANS_B>
    static __device__ __forceinline__ void rs(float (&d)[32], const u32 (&a)[4], u64 desc_b, u32 scale_d) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16" WGMMA_TYPES " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
                     "{%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
                     : WGMMA_ACC32(d)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TRANS_B));
    }
};

template <>
struct Wgmma<96> {
    template <int TRANS_B>
    static __device__ __forceinline__ void ss(float (&d)[48], u64 desc_a, u64 desc_b, u32 scale_d) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %50, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n96k16" WGMMA_TYPES " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                     "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}, "
                     "%48, %49, p, 1, 1, 0, %51;\n}\n"
                     : WGMMA_ACC48(d)
                     : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_B));
    }
    template <int TRANS_B>
    static __device__ __forceinline__ void rs(float (&d)[48], const u32 (&a)[4], u64 desc_b, u32 scale_d) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %53, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n96k16" WGMMA_TYPES " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                     "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}, "
                     "{%48, %49, %50, %51}, %52, p, 1, 1, %54;\n}\n"
                     : WGMMA_ACC48(d)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TRANS_B));
    }
};

template <>
struct Wgmma<128> {
    template <int TRANS_B>
    static __device__ __forceinline__ void ss(float (&d)[64], u64 desc_a, u64 desc_b, u32 scale_d) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16" WGMMA_TYPES " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                     "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                     "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
                     "%64, %65, p, 1, 1, 0, %67;\n}\n"
                     : WGMMA_ACC64(d)
                     : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_B));
    }
    template <int TRANS_B>
    static __device__ __forceinline__ void rs(float (&d)[64], const u32 (&a)[4], u64 desc_b, u32 scale_d) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16" WGMMA_TYPES " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                     "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                     "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
                     "{%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
                     : WGMMA_ACC64(d)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TRANS_B));
    }
};

template <>
struct Wgmma<192> {
    template <int TRANS_B>
    static __device__ __forceinline__ void ss(float (&d)[96], u64 desc_a, u64 desc_b, u32 scale_d) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n192k16" WGMMA_TYPES " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                     "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                     "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
                     "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
                     "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, "
                     "%96, %97, p, 1, 1, 0, %99;\n}\n"
                     : WGMMA_ACC96(d)
                     : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_B));
    }
    template <int TRANS_B>
    static __device__ __forceinline__ void rs(float (&d)[96], const u32 (&a)[4], u64 desc_b, u32 scale_d) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %101, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n192k16" WGMMA_TYPES " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                     "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                     "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
                     "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
                     "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, "
                     "{%96, %97, %98, %99}, %100, p, 1, 1, %102;\n}\n"
                     : WGMMA_ACC96(d)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TRANS_B));
    }
};

template <>
struct Wgmma<256> {
    template <int TRANS_B>
    static __device__ __forceinline__ void ss(float (&d)[128], u64 desc_a, u64 desc_b, u32 scale_d) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k16" WGMMA_TYPES " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                     "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                     "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
                     "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
                     "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
                     "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
                     "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
                     "%128, %129, p, 1, 1, 0, %131;\n}\n"
                     : WGMMA_ACC128(d)
                     : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_B));
    }
    template <int TRANS_B>
    static __device__ __forceinline__ void rs(float (&d)[128], const u32 (&a)[4], u64 desc_b, u32 scale_d) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k16" WGMMA_TYPES " {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                     "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                     "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
                     "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
                     "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
                     "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
                     "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
                     "{%128, %129, %130, %131}, %132, p, 1, 1, %134;\n}\n"
                     : WGMMA_ACC128(d)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TRANS_B));
    }
};

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

// True once the phase with parity `parity` has completed (may give up early: loop on it).
__device__ __forceinline__ bool mbarrier_try_wait(u64* bar, u32 parity) {
    u32 done;
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
    return done != 0;
}

__device__ __forceinline__ void mbarrier_wait(u64* bar, u32 parity) {
    while (!mbarrier_try_wait(bar, parity)) {
    }
}

// ---------------------------------------------------------------------------------------------
// Proxies and TMA.
// ---------------------------------------------------------------------------------------------

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

// Named barrier `id` (1..15; 0 is __syncthreads) over `threads` threads, e.g. one warpgroup.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
