// Probe (session 15): how long does one warp's softmax of a key block take? The trace
// (`evoattn trace`) reads 1300-1700 cycles from S done to softmax done in the hd64 and hd128
// kernels, where the block's exponentials need 528 (hd64: 66 MUFU.EX2 a thread at 8 cycles a
// warp) or 720 (hd128, 176 keys). Here the kernel's softmax on a register fragment (64 or 88
// scores a thread: two rows in a quad; row max by FMNMX and two shuffles, FFMA, ex2, row sums,
// packing to bf16x2), looped with the scores made opaque each iteration, with 1-3 warps per
// SM sub-partition (1-2 beside the GEMMs); and beside it, one more warpgroup issuing the hd64 key block's GEMMs
// without pause (GEMM 1: S = Q·Kᵀ, A and B from shared memory; 2: P·V with P from registers;
// 3: P·V with P from shared memory; 4: S and P·V from registers, as a consumer issues them).
// Cycles per softmax iteration (clock64 of warp 0, averaged over the 132 blocks).
// nvcc -O3 -gencode arch=compute_90a,code=sm_90a -o chain softmax-chain.cu && ./chain
// record: bench/results/2026-11-23-s15-trace.txt
#include <cstdio>
#include <cuda_runtime.h>
#include "wgmma-probe.cuh"
#define N_ITER 512
#define SCALE_LOG2 0.18033688f  // 1/sqrt(64) * log2(e)
#define TILE_BYTES_Q (64 * ROW_BYTES)
#define TILE_BYTES_KV (128 * ROW_BYTES)

__device__ __forceinline__ float ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
__device__ __forceinline__ unsigned pack(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// The GEMM warpgroup: the chosen GEMMs, one commit group at a time, until every softmax warp
// has finished. Returns the groups it completed.
template <int GEMM> __device__ int gemm_until(const volatile int* finished, int softmax_warps, unsigned char* smem) {
    const u64 qd = desc(smem_addr(smem), 16, 1024);
    const u64 kd = desc(smem_addr(smem + TILE_BYTES_Q), 16, 1024);
    const u64 vd = desc(smem_addr(smem + TILE_BYTES_Q + TILE_BYTES_KV), TILE_BYTES_KV, 1024);
    float s[64], o[32];
    u32 p[8][4];
    init_key_block_operands(s, o, p);
    int groups = 0;
    while (*finished < softmax_warps) {
        key_block_gemms<GEMM == 1 || GEMM == 4, GEMM >= 2, GEMM == 3>(s, o, p, qd, kd, vd);
        ++groups;
    }
    float acc = 0.f;
    for (int i = 0; i < 64; ++i) acc += s[i];
    for (int i = 0; i < 32; ++i) acc += o[i];
    return groups + (acc == 12345.f);
}

template <int REGS, int GEMM> __global__ void __launch_bounds__(384, 1) k(float* out, long long* cycles, int* groups) {
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    unsigned char* smem = (unsigned char*)(((size_t)smem_raw + 1023) & ~(size_t)1023);
    __shared__ int finished;
    const int softmax_threads = GEMM ? blockDim.x - 128 : blockDim.x;
    for (int i = threadIdx.x; i < (TILE_BYTES_Q + 2 * TILE_BYTES_KV) / 4; i += blockDim.x) ((u32*)smem)[i] = 0x3f803f80u;
    if (threadIdx.x == 0) finished = 0;
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    if (threadIdx.x >= softmax_threads) {
        const int n = gemm_until<GEMM>(&finished, softmax_threads / 32, smem);
        if (threadIdx.x == softmax_threads) groups[blockIdx.x] = n;
        return;
    }
    float s[REGS];
    for (int i = 0; i < REGS; ++i) s[i] = ((threadIdx.x * 7 + i * 13) % 97) * 0.01f;
    float m[2] = {-1e30f, -1e30f}, l[2] = {0.f, 0.f};
    unsigned acc = 0;
    const long long t0 = clock64();
    for (int it = 0; it < N_ITER; ++it) {
#pragma unroll
        for (int i = 0; i < REGS; ++i) asm volatile("" : "+f"(s[i]));  // fresh scores, as from a wgmma
        float mx[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float x = s[2 * r];
#pragma unroll
            for (int i = 0; i < REGS / 4; ++i) x = fmaxf(x, fmaxf(s[4 * i + 2 * r], s[4 * i + 2 * r + 1]));
            x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
            x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
            mx[r] = fmaxf(m[r], x * SCALE_LOG2);
        }
        unsigned p = 0;
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const float corr = ex2(m[r] - mx[r]);
            m[r] = mx[r];
            float sum = 0.f;
#pragma unroll
            for (int i = 0; i < REGS / 4; ++i) {
                const float a = ex2(fmaf(s[4 * i + 2 * r], SCALE_LOG2, -mx[r]));
                const float b = ex2(fmaf(s[4 * i + 2 * r + 1], SCALE_LOG2, -mx[r]));
                sum += a + b;
                p ^= pack(a, b);
            }
            l[r] = l[r] * corr + sum;
        }
        acc ^= p;
    }
    const long long t1 = clock64();
    if (threadIdx.x % 32 == 0) atomicAdd(&finished, 1);
    out[blockIdx.x * blockDim.x + threadIdx.x] = l[0] + l[1] + m[0] + m[1] + (float)acc;
    if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}

template <int REGS, int GEMM> void run(const char* name, float* out, long long* cyc, int* groups) {
    const int smem = TILE_BYTES_Q + 2 * TILE_BYTES_KV + 1024;
    // At most 384 threads: the GEMM warpgroup's accumulators and P need ~140 registers.
    for (int w = 1; w <= (GEMM ? 2 : 3); ++w) {
        const int threads = 128 * w + (GEMM ? 128 : 0);
        k<REGS, GEMM><<<132, threads, smem>>>(out, cyc, groups);
        cudaDeviceSynchronize();
        long long h[132];
        int g[132];
        cudaMemcpy(h, cyc, sizeof h, cudaMemcpyDeviceToHost);
        cudaMemcpy(g, groups, sizeof g, cudaMemcpyDeviceToHost);
        double c = 0, gs = 0;
        for (int i = 0; i < 132; ++i) {
            c += h[i];
            gs += GEMM ? g[i] : 0;
        }
        c /= 132.0 * N_ITER;
        const double mufu = (REGS + 2) * 8.0 * w;  // cycles the sub-partition's MUFU needs
        printf("%-40s %d softmax warp(s)/SMSP: %6.0f cycles an iteration (MUFU floor %5.0f); GEMM groups/block %6.0f\n",
               name, w, c, mufu, gs / 132);
    }
}

int main() {
    float* out;
    long long* cyc;
    int* groups;
    cudaMalloc(&out, 132 * 384 * 4);
    cudaMalloc(&cyc, 132 * 8);
    cudaMalloc(&groups, 132 * 4);
    run<64, 0>("hd64 softmax alone", out, cyc, groups);
    run<64, 1>("hd64 softmax + S (smem A)", out, cyc, groups);
    run<64, 2>("hd64 softmax + P·V (P in registers)", out, cyc, groups);
    run<64, 3>("hd64 softmax + P·V (P in shared memory)", out, cyc, groups);
    run<64, 4>("hd64 softmax + S and P·V (registers)", out, cyc, groups);
    run<88, 0>("hd128 softmax (88 scores) alone", out, cyc, groups);
    printf("err %s\n", cudaGetErrorString(cudaGetLastError()));
}
