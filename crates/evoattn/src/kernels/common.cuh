// Shared by every kernel: the launch parameters (mirrored by `runtime::device::KernelParams`,
// field for field) and element conversions. No CUDA headers: NVRTC compiles this alone.
#pragma once

typedef unsigned short elem_t;  // raw f16 or bf16 bits; EVOATTN_BF16 says which
typedef unsigned int u32;
typedef long long i64;

#ifndef EVOATTN_HEAD_DIM
#error "EVOATTN_HEAD_DIM must be defined by the host"
#endif
#ifndef EVOATTN_BF16
#error "EVOATTN_BF16 must be defined by the host"
#endif
// E4M3 inputs (O in bf16, or f16 as EVOATTN_BF16 says): the host defines EVOATTN_FP8=1 for
// those kernels only.
#ifndef EVOATTN_FP8
#define EVOATTN_FP8 0
#endif

#define LOG2E 1.4426950408889634f
#define LN2 0.6931471805599453f
#define NEG_INF (-__int_as_float(0x7f800000))

// Strides are in elements; the head-dim stride is 1 (checked on the host).
struct AttnParams {
    const elem_t* q;
    const elem_t* k;
    const elem_t* v;
    elem_t* o;
    float* lse;  // [B, H, Sq] dense, or null
    i64 q_batch, q_head, q_seq;
    i64 k_batch, k_head, k_seq;
    i64 v_batch, v_head, v_seq;
    i64 o_batch, o_head, o_seq;
    int b, h, hkv, sq, sk;
    int causal;         // 0: no mask; else key j is visible to query i iff j <= i + causal_offset
    int causal_offset;  // 0 for top-left, Sk - Sq for bottom-right
    float scale_log2;   // softmax scale * log2(e): scores go straight into exp2
    int head_group;     // heads per section of the causal wgmma grid order (plan::head_group)
    // Zeroed counters of the wgmma persistent schedulers, or null: the dynamic one's two, or
    // the split tail's one per tail tile and consumer warpgroup.
    int* tile_counter;
    float* split_work;  // the split tail's partials: two slots per block (wgmma_epilogue.cuh), or null
};

__device__ __forceinline__ float elem_to_float(elem_t x) {
#if EVOATTN_BF16
    return __uint_as_float(((u32)x) << 16);
#else
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x));
    return f;
#endif
}

__device__ __forceinline__ elem_t float_to_elem(float f) {
    elem_t x;
#if EVOATTN_BF16
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(x) : "f"(f));
#else
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(x) : "f"(f));
#endif
    return x;
}

// Two floats to a packed pair (lo in the low half), the layout mma.sync operands use.
__device__ __forceinline__ u32 pack_float2(float lo, float hi) {
    u32 r;
#if EVOATTN_BF16
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#endif
    return r;
}

__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// 2^x for x <= 0 on the FMA pipe, where MUFU (16 a cycle per SM against 128 FMAs) is the
// bottleneck: 2^x = 2^j · 2^f with j = round(x) and f = x - j in [-0.5, 0.5]. Adding 1.5·2^23
// rounds x to j in the low mantissa bits of t, so bits(t) << 23 is j in the exponent field;
// 2^f is a degree-3 polynomial fitted for relative error (at most 7.5e-5, under half an fp16
// ulp). Below -126 the exponent would leave its field: the result is 0 there, as MUFU's
// flush to zero gives, so a row with every key hidden still sums to exactly 0.
#define EXP2_ROUND_MAGIC 12582912.f  // 1.5 * 2^23
#define EXP2_POLY_MIN (-126.f)
#define EXP2_POLY_C0 0.999928117f
#define EXP2_POLY_C1 0.693260968f
#define EXP2_POLY_C2 0.242610812f
#define EXP2_POLY_C3 0.0551714338f
__device__ __forceinline__ float poly_exp2(float x) {
    const float xc = fmaxf(x, EXP2_POLY_MIN);  // keeps t's binade for -inf and large negatives
    const float t = xc + EXP2_ROUND_MAGIC;
    const float f = xc - (t - EXP2_ROUND_MAGIC);
    float p = fmaf(EXP2_POLY_C3, f, EXP2_POLY_C2);
    p = fmaf(p, f, EXP2_POLY_C1);
    p = fmaf(p, f, EXP2_POLY_C0);
    const float y = __int_as_float(__float_as_int(p) + (__float_as_int(t) << 23));
    return x < EXP2_POLY_MIN ? 0.f : y;
}

// Number of keys row `row` may see, or sk when unmasked; may be <= 0.
__device__ __forceinline__ int visible_keys(const AttnParams& p, int row) {
    if (!p.causal) return p.sk;
    int n = row + p.causal_offset + 1;
    return n < p.sk ? n : p.sk;
}

// Keys a block of `rows` query rows starting at `m0` must visit: the furthest any row sees.
__device__ __forceinline__ int block_key_end(const AttnParams& p, int m0, int rows) {
    const int last_row = min(m0 + rows, p.sq) - 1;
    return max(visible_keys(p, last_row), 0);
}
