// Probe (session 12): the tensor-pipe rate the hd64 key block's two GEMM shapes reach without a
// softmax, per SM and cycle (clock64 around each warpgroup's loop), against the 2048 bf16 MACs
// a cycle an SM peaks at. Per key block a consumer warpgroup issues S = Q·Kᵀ as four
// m64n128k16 (shared A and B) and O += P·V as eight m64n64k16 (A from registers, B transposed),
// 1,048,576 MACs in all. Modes: S only, P·V only, both in one commit group, and P·V with P
// from shared memory (FA3 keeps P in registers; this says what that is worth); 1-3 warpgroups
// issuing at once, no turns. Operand values are fixed small numbers: the rate, not the result.
// nvcc -O3 -gencode arch=compute_90a,code=sm_90a -o wgmma-shapes wgmma-shapes.cu && ./wgmma-shapes
#include <cstdio>
#include <cuda_runtime.h>
typedef unsigned int u32;
typedef unsigned long long u64;
#define ITERS 4096
#define PEAK_MACS_PER_SM_CYCLE 2048.0
#define TILE_ROWS_Q 64
#define TILE_ROWS_KV 128
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

// MODE 0: S only; 1: P·V only; 2: both, one commit group; 3: P·V with P from shared memory (its
// A reads re-walk the Q tile: the rate, not the result). Every warpgroup issues alone.
template <int MODE>
__global__ void __launch_bounds__(384, 1) gemms(long long* cycles, float* sink) {
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    unsigned char* smem = (unsigned char*)(((size_t)smem_raw + 1023) & ~(size_t)1023);
    const int wg = threadIdx.x / 128;
    const int n_wg = blockDim.x / 128;
    // Q tiles (one per warpgroup), then K and V: bf16 1.0 everywhere (0x3f80).
    unsigned char* q = smem;
    unsigned char* k = smem + n_wg * TILE_ROWS_Q * ROW_BYTES;
    unsigned char* v = k + TILE_ROWS_KV * ROW_BYTES;
    const int bytes = (n_wg * TILE_ROWS_Q + 2 * TILE_ROWS_KV) * ROW_BYTES;
    for (int i = threadIdx.x; i < bytes / 4; i += blockDim.x) ((u32*)smem)[i] = 0x3f803f80u;
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    float s[64], o[32];
    for (int i = 0; i < 64; ++i) s[i] = 0.f;
    for (int i = 0; i < 32; ++i) o[i] = 0.f;
    u32 p[8][4];
    for (int i = 0; i < 8; ++i)
        for (int j = 0; j < 4; ++j) p[i][j] = 0x3c003c00u ^ (threadIdx.x & 1);
    const u64 qd = desc(smem_addr(q + wg * TILE_ROWS_Q * ROW_BYTES), 16, 1024);
    const u64 kd = desc(smem_addr(k), 16, 1024);
    const u64 vd = desc(smem_addr(v), TILE_ROWS_KV * ROW_BYTES, 1024);
    __syncthreads();
    const long long t0 = clock64();
    for (int it = 0; it < ITERS; ++it) {
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
        if (MODE == 0 || MODE == 2) {
#pragma unroll
            // S accumulates across iterations (scale-d 1): with the kernel's scale-d 0 on the
            // first step, only the last iteration's S reached the sink and ptxas dropped the
            // rest (session 13 read 4-11x the tensor peak).
            for (int ks = 0; ks < 4; ++ks) ss_n128(s, qd + ks * 2, kd + ks * 2, 1u);
        }
        if (MODE == 1 || MODE == 2) {
#pragma unroll
            for (int kk = 0; kk < 8; ++kk) rs_n64(o, p[kk], vd + kk * 16 * ROW_BYTES / 16);
        }
        if (MODE == 3) {
#pragma unroll
            for (int kk = 0; kk < 8; ++kk) ss_n64_tb(o, qd + (kk % 4) * 2, vd + kk * 16 * ROW_BYTES / 16);
        }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    }
    const long long t1 = clock64();
    float acc = 0.f;
    for (int i = 0; i < 64; ++i) acc += s[i];
    for (int i = 0; i < 32; ++i) acc += o[i];
    sink[blockIdx.x * blockDim.x + threadIdx.x] = acc;
    if (threadIdx.x % 128 == 0) cycles[blockIdx.x * 3 + wg] = t1 - t0;
}

template <int MODE> void run(const char* name, int n_wg, long long* cyc, float* sink) {
    const int smem = (n_wg * TILE_ROWS_Q + 2 * TILE_ROWS_KV) * ROW_BYTES + 1024;
    cudaFuncSetAttribute(gemms<MODE>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    gemms<MODE><<<132, 128 * n_wg, smem>>>(cyc, sink);
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    cudaEventRecord(a);
    gemms<MODE><<<132, 128 * n_wg, smem>>>(cyc, sink);
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms;
    cudaEventElapsedTime(&ms, a, b);
    long long h[132 * 3];
    cudaMemcpy(h, cyc, sizeof h, cudaMemcpyDeviceToHost);
    double c = 0;  // the slowest warpgroup of each block, averaged over blocks
    for (int blk = 0; blk < 132; ++blk) {
        long long m = 0;
        for (int w = 0; w < n_wg; ++w) m = h[blk * 3 + w] > m ? h[blk * 3 + w] : m;
        c += m;
    }
    c /= 132;
    const double macs_s = 64.0 * 128 * 64, macs_pv = 64.0 * 64 * 128;
    const double macs = n_wg * (double)ITERS * (MODE == 0 ? macs_s : MODE == 2 ? macs_s + macs_pv : macs_pv);
    printf("%-10s %d wg  cycles/iter/wg %7.1f  MACs/SM/cycle %7.1f (%5.1f%% of peak)  %6.1f TFLOP/s  SM clock %4.0f MHz\n",
           name, n_wg, c / ITERS, macs / c, 100 * macs / c / PEAK_MACS_PER_SM_CYCLE, 2 * macs * 132 / (ms * 1e9), c / (ms * 1e3));
}

int main() {
    long long* cyc;
    float* sink;
    cudaMalloc(&cyc, 132 * 3 * 8);
    cudaMalloc(&sink, 132 * 384 * 4);
    for (int n_wg = 1; n_wg <= 3; ++n_wg) {
        run<0>("S only", n_wg, cyc, sink);
        run<1>("PV only", n_wg, cyc, sink);
        run<2>("S and PV", n_wg, cyc, sink);
        run<3>("PV P smem", n_wg, cyc, sink);
    }
    printf("err %s\n", cudaGetErrorString(cudaGetLastError()));
}
