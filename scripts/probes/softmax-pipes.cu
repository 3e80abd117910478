// Probe (session 12): does packing P (cvt.rn.{bf16,f16}x2.f32, SASS F2FP) share the MUFU pipe
// with ex2? Per SM per cycle (clock64 around each block's loop): ex2 alone, cvt alone, and
// the softmax's mix (one cvt per two ex2) against the sum and the max of the two.
// nvcc -O3 -arch=sm_90a -o pipes softmax-pipes.cu && ./pipes; record: bench/results/2026-11-23-s12-probes.txt
#include <cstdio>
#include <cuda_runtime.h>
#define N_ITER 2048
#define CHAINS 8
// EX2 ex2 and CVT cvt instructions per chain and iteration; BF16 picks the packed type.
template <int EX2, int CVT, bool BF16> __global__ void k(float* out, long long* cycles, float seed) {
    float a[CHAINS];
    unsigned p[CHAINS];
    for (int i = 0; i < CHAINS; ++i) { a[i] = seed * (threadIdx.x + i) * -1e-3f; p[i] = 0; }
    __syncthreads();
    long long t0 = clock64();
    for (int it = 0; it < N_ITER; ++it) {
#pragma unroll
        for (int i = 0; i < CHAINS; ++i) {
#pragma unroll
            for (int e = 0; e < EX2; ++e) asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(a[i]));
#pragma unroll
            for (int c = 0; c < CVT; ++c) {
                unsigned r;
                if (BF16) asm volatile("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(a[i]), "f"(a[(i + 1) % CHAINS]));
                else asm volatile("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(a[i]), "f"(a[(i + 1) % CHAINS]));
                p[i] ^= r;
            }
        }
    }
    __syncthreads();
    long long t1 = clock64();
    float s = 0; unsigned x = 0;
    for (int i = 0; i < CHAINS; ++i) { s += a[i]; x ^= p[i]; }
    out[blockIdx.x * blockDim.x + threadIdx.x] = s + (float)x;
    if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}
template <int EX2, int CVT, bool BF16> void run(const char* name, float* out, long long* cyc, int blocks, int threads) {
    k<EX2, CVT, BF16><<<blocks, threads>>>(out, cyc, 1.f);
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
    cudaEventRecord(a); k<EX2, CVT, BF16><<<blocks, threads>>>(out, cyc, 1.f); cudaEventRecord(b); cudaEventSynchronize(b);
    float ms; cudaEventElapsedTime(&ms, a, b);
    long long h[132]; cudaMemcpy(h, cyc, sizeof h, cudaMemcpyDeviceToHost);
    double c = 0; for (int i = 0; i < blocks; ++i) c += h[i]; c /= blocks;
    double per_sm = (double)threads * N_ITER * CHAINS;  // per chain-iteration, per thread: one block per SM
    printf("%-22s %8.3f ms  cycles/block %10.0f  ex2/SM/clk %6.2f  cvt/SM/clk %6.2f  (SM clock %.0f MHz)\n", name, ms, c,
           EX2 * per_sm / c, CVT * per_sm / c, c / (ms * 1e3));
}
int main() {
    float* out; long long* cyc; int blocks = 132, threads = 1024;
    cudaMalloc(&out, blocks * threads * 4); cudaMalloc(&cyc, blocks * 8);
    run<1, 0, true>("ex2 only", out, cyc, blocks, threads);
    run<0, 1, true>("cvt bf16x2 only", out, cyc, blocks, threads);
    run<0, 1, false>("cvt f16x2 only", out, cyc, blocks, threads);
    run<2, 1, true>("2 ex2 + 1 cvt bf16x2", out, cyc, blocks, threads);
    run<2, 1, false>("2 ex2 + 1 cvt f16x2", out, cyc, blocks, threads);
    printf("err %s\n", cudaGetErrorString(cudaGetLastError()));
}
