// Probe (session 15): how long does one warp's softmax of a key block take on its own? The
// trace (`evoattn trace`) reads 1300-1700 cycles from S done to softmax done in the hd64 and
// hd128 kernels, where the block's exponentials need 512 (hd64: 64 MUFU.EX2 a thread at 8
// cycles a warp) or 704 (hd128, 176 keys). Here the kernel's softmax on a register fragment
// (64 or 88 scores a thread: two rows in a quad; row max by FMNMX and two shuffles, FFMA,
// ex2, row sums, packing to bf16x2), looped with the scores made opaque each iteration, with
// 1, 2 or 3 warps per SM sub-partition (128, 256, 384 threads; one block per SM). MODE 0: all
// of it; 1: no row max (fixed base); 2: row max only. Cycles per iteration per warp (clock64).
// nvcc -O3 -arch=sm_90a -o chain softmax-chain.cu && ./chain; record: bench/results/2026-11-23-s15-trace.txt
#include <cstdio>
#include <cuda_runtime.h>
#define N_ITER 512
#define SCALE_LOG2 0.18033688f  // 1/sqrt(64) * log2(e)

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

template <int REGS, int MODE> __global__ void __launch_bounds__(384, 1) k(float* out, long long* cycles) {
    float s[REGS];
    for (int i = 0; i < REGS; ++i) s[i] = ((threadIdx.x * 7 + i * 13) % 97) * 0.01f;
    float m[2] = {-1e30f, -1e30f}, l[2] = {0.f, 0.f};
    unsigned acc = 0;
    __syncthreads();
    const long long t0 = clock64();
    for (int it = 0; it < N_ITER; ++it) {
#pragma unroll
        for (int i = 0; i < REGS; ++i) asm volatile("" : "+f"(s[i]));  // fresh scores, as from a wgmma
        float mx[2] = {m[0], m[1]};
        if (MODE != 1) {
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                float x = s[2 * r];
#pragma unroll
                for (int i = 0; i < REGS / 4; ++i) x = fmaxf(x, fmaxf(s[4 * i + 2 * r], s[4 * i + 2 * r + 1]));
                x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
                x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
                mx[r] = fmaxf(m[r], x * SCALE_LOG2);
            }
        }
        if (MODE == 2) {
            m[0] = mx[0];
            m[1] = mx[1];
            continue;
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
    __syncthreads();
    const long long t1 = clock64();
    out[blockIdx.x * blockDim.x + threadIdx.x] = l[0] + l[1] + m[0] + m[1] + (float)acc;
    if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}

template <int REGS, int MODE> void run(const char* name, float* out, long long* cyc) {
    const int warps_per_smsp[] = {1, 2, 3};
    for (int w : warps_per_smsp) {
        const int threads = 128 * w;
        k<REGS, MODE><<<132, threads>>>(out, cyc);
        cudaDeviceSynchronize();
        long long h[132];
        cudaMemcpy(h, cyc, sizeof h, cudaMemcpyDeviceToHost);
        double c = 0;
        for (int i = 0; i < 132; ++i) c += h[i];
        c /= 132.0 * N_ITER;
        const double mufu = MODE == 2 ? 0 : (REGS + 2) * 8.0 * threads / 128;  // cycles the SMSP's MUFU needs
        printf("%-34s %d warp(s)/SMSP: %7.0f cycles an iteration (MUFU floor %5.0f)\n", name, threads / 128, c, mufu);
    }
}

int main() {
    float* out;
    long long* cyc;
    cudaMalloc(&out, 132 * 384 * 4);
    cudaMalloc(&cyc, 132 * 8);
    run<64, 0>("hd64 block (64 scores): softmax", out, cyc);
    run<64, 1>("hd64 block: without the row max", out, cyc);
    run<64, 2>("hd64 block: row max only", out, cyc);
    run<88, 0>("hd128 block (88 scores): softmax", out, cyc);
    printf("err %s\n", cudaGetErrorString(cudaGetLastError()));
}
