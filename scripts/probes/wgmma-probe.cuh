// wgmma helpers of the probes (wgmma-shapes.cu, softmax-interference.cu): the hd64 key block's
// GEMM shapes as inline PTX, on 128-byte swizzled shared-memory tiles.
#pragma once
typedef unsigned int u32;
typedef unsigned long long u64;
#define ROW_BYTES 128  // 64 bf16 of the swizzled row

__device__ __forceinline__ u32 smem_addr(const void* p) { return (u32)__cvta_generic_to_shared(p); }
// 128-byte swizzle descriptor (the layout notes are crates/evoattn/src/kernels/ptx_sm90.cuh's).
__device__ __forceinline__ u64 desc(u32 addr, u32 lbo, u32 sbo) {
    return (u64)((addr & 0x3FFFF) >> 4) | ((u64)((lbo >> 4) & 0x3FFF) << 16) | ((u64)((sbo >> 4) & 0x3FFF) << 32) | (1ull << 62);
}
// m64n128k16, A and B from shared memory, both K-major (S = Q·K^T at hd64: four per key block).
__device__ __forceinline__ void ss_n128(float (&d)[64], u64 a, u64 b, u32 scale_d) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(a), "l"(b), "r"(scale_d));
}
// m64n64k16, A from registers, B from shared memory MN-major (O += P·V at hd64: eight per key block).
__device__ __forceinline__ void rs_n64(float (&d)[32], const u32 (&a)[4], u64 b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1u));
}

// m64n64k16, A from shared memory (K-major), B MN-major: P·V with P staged in shared memory.
__device__ __forceinline__ void ss_n64_tb(float (&d)[32], u64 a, u64 b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "l"(a), "l"(b), "r"(1u));
}


// The key block's register operands: S and O zero, P fixed small bf16 pairs.
__device__ __forceinline__ void init_key_block_operands(float (&s)[64], float (&o)[32], u32 (&p)[8][4]) {
    for (int i = 0; i < 64; ++i) s[i] = 0.f;
    for (int i = 0; i < 32; ++i) o[i] = 0.f;
    for (int i = 0; i < 8; ++i)
        for (int j = 0; j < 4; ++j) p[i][j] = 0x3c003c00u ^ (threadIdx.x & 1);
}

// One commit group of the hd64 key block's GEMMs, waited for: S = Q·Kᵀ (four m64n128k16 from
// shared memory) if S, then P·V (eight m64n64k16) if PV, with P from registers, or from shared
// memory if P_SMEM (its A reads re-walk the Q tile: the rate, not the result).
template <bool S, bool PV, bool P_SMEM>
__device__ __forceinline__ void key_block_gemms(float (&s)[64], float (&o)[32], const u32 (&p)[8][4], u64 qd, u64 kd,
                                                u64 vd) {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    if (S) {
        // S accumulates across calls (scale-d 1): with the kernel's scale-d 0 on the first step,
        // only the last call's S reached the sink and ptxas dropped the rest (session 13 read
        // 4-11x the tensor peak).
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) ss_n128(s, qd + ks * 2, kd + ks * 2, 1u);
    }
    if (PV && !P_SMEM) {
#pragma unroll
        for (int kk = 0; kk < 8; ++kk) rs_n64(o, p[kk], vd + kk * 16 * ROW_BYTES / 16);
    }
    if (PV && P_SMEM) {
#pragma unroll
        for (int kk = 0; kk < 8; ++kk) ss_n64_tb(o, qd + (kk % 4) * 2, vd + kk * 16 * ROW_BYTES / 16);
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
