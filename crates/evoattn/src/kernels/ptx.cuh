// The project's own inline-PTX wrappers for sm_80+ (Ampere-class instructions that Hopper and
// Ada also run): cp.async, ldmatrix, mma.sync. Each is a thin, named shim so the kernels read
// as algorithms.
#pragma once
#include "common.cuh"

__device__ __forceinline__ u32 smem_addr(const void* p) {
    return (u32)__cvta_generic_to_shared(p);
}

// 16-byte global -> shared copy that bypasses L1. `src_bytes` = 0 zero-fills the destination
// without reading (rows past the end of a tensor).
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes));
}

__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::);
}

// Waits until at most N committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Four 8x8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i.
__device__ __forceinline__ void ldmatrix_x4(u32 (&r)[4], const void* row_addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(row_addr)));
}

// As ldmatrix_x4, each matrix transposed (for a row-major operand read column-wise).
__device__ __forceinline__ void ldmatrix_x4_trans(u32 (&r)[4], const void* row_addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(row_addr)));
}

// D += A(16x16, row) * B(16x8, col) with float32 accumulators.
__device__ __forceinline__ void mma_16816(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
#if EVOATTN_BF16
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// A float load that bypasses L1 (cached in L2 only): reads what other blocks wrote and made
// visible with a fence during this launch.
__device__ __forceinline__ float ld_cg(const float* p) {
    float x;
    asm volatile("ld.global.cg.f32 %0, [%1];\n" : "=f"(x) : "l"(p));
    return x;
}

// Atomic add at GPU scope with acquire-release semantics: the release is cumulative, so it
// publishes the stores of every thread that a barrier ordered before it; the acquire orders the
// caller's (and, after a barrier, its block's) later loads after the stores it observes.
// Lighter than a __threadfence() (fence.sc.gpu) in every thread.
__device__ __forceinline__ int atom_add_acq_rel_gpu(int* p, int v) {
    int old;
    asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;\n" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
}

// An int load at GPU scope with acquire semantics: the caller's later loads see the stores
// that the writer released before the value.
__device__ __forceinline__ int ld_acquire_gpu(const int* p) {
    int x;
    asm volatile("ld.acquire.gpu.global.s32 %0, [%1];\n" : "=r"(x) : "l"(p) : "memory");
    return x;
}

// ld_cg of four consecutive floats (16-byte aligned).
__device__ __forceinline__ float4 ld_cg4(const float* p) {
    float4 x;
    asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];\n" : "=f"(x.x), "=f"(x.y), "=f"(x.z), "=f"(x.w) : "l"(p));
    return x;
}
