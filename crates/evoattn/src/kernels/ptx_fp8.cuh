// Inline-PTX wrappers for FP8 E4M3 on sm_89+: the m16n8k32 tensor-core instruction and the
// conversion of float pairs to E4M3 (PTX ISA "mma.m16n8k32", "cvt" with .e4m3x2).
#pragma once
#include "ptx.cuh"

typedef unsigned char u8;

// P is stored as E4M3 scaled by 2^P_LOG2_SCALE so that the weights, at most 1 relative to the
// row max, fill E4M3's normal range (0, 448] instead of falling into its subnormals
// (FlashAttention-3): P in (0, 256], below 448, so no weight saturates.
#define P_LOG2_SCALE 8.f
// lazy_rescale's slack (log2 units) with E4M3's P: a stale max lets P reach 2^slack, so P's
// stored value reaches 2^(P_LOG2_SCALE + slack) = 2^8.75 = 430.5, still below 448; the largest
// slack that keeps it there is log2(448 / 256) = 0.807.
#define FP8_RESCALE_SLACK_LOG2 0.75f

// D += A(16x32, row) * B(32x8, col), E4M3 operands, float32 accumulators. Fragments (PTX ISA,
// "Matrix Fragments for mma.m16n8k32"): lane 4g+t holds A's rows g and g+8 at k = 4t..4t+3
// (a0, a1) and 16+4t..16+4t+3 (a2, a3), B's column g at the same k (b0, b1), and C's rows g
// and g+8 at columns 2t, 2t+1, as m16n8k16 does.
__device__ __forceinline__ void mma_e4m3(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four floats to four E4M3 bytes, `a` in the lowest, rounded to nearest even and saturated to
// ±448 (crate::fp8::e4m3_from_f32 is the same rounding). The instruction puts its first
// source in the upper byte.
__device__ __forceinline__ u32 pack_e4m3x4(float a, float b, float c, float d) {
    unsigned short lo, hi;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(lo) : "f"(b), "f"(a));
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(hi) : "f"(d), "f"(c));
    return (u32)lo | ((u32)hi << 16);
}
