// Probe (session 11): throughput of MUFU ex2 on f32 against packed f16x2 and bf16x2 operands.
// nvcc -O3 -arch=sm_90a -o ex2 ex2-throughput.cu && ./ex2; record: bench/results/2026-11-23-s11-probes.txt
#include <cstdio>
#include <cuda_runtime.h>
#define N_ITER 4096
__global__ void k_f32(float* out, float seed) {
    float a[8];
    for (int i = 0; i < 8; ++i) a[i] = seed * (threadIdx.x + i) * -1e-3f;
    for (int it = 0; it < N_ITER; ++it)
#pragma unroll
        for (int i = 0; i < 8; ++i) asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(a[i]));
    float s = 0; for (int i = 0; i < 8; ++i) s += a[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
// Packed operands: f16x2 (BF16 = false) or bf16x2.
template <bool BF16> __global__ void k_packed(float* out, float seed) {
    unsigned a[8];
    for (int i = 0; i < 8; ++i) {
        float x = seed * (threadIdx.x + i) * -1e-3f;
        if (BF16) asm("cvt.rn.bf16x2.f32 %0, %1, %1;" : "=r"(a[i]) : "f"(x));
        else asm("cvt.rn.f16x2.f32 %0, %1, %1;" : "=r"(a[i]) : "f"(x));
    }
    for (int it = 0; it < N_ITER; ++it)
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            if (BF16) asm volatile("ex2.approx.ftz.bf16x2 %0, %0;" : "+r"(a[i]));
            else asm volatile("ex2.approx.f16x2 %0, %0;" : "+r"(a[i]));
        }
    unsigned s = 0; for (int i = 0; i < 8; ++i) s ^= a[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = (float)s;
}
template <class F> float timeit(F f) {
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
    f(); cudaDeviceSynchronize();
    cudaEventRecord(a); for (int r = 0; r < 5; ++r) f(); cudaEventRecord(b); cudaEventSynchronize(b);
    float ms; cudaEventElapsedTime(&ms, a, b); return ms / 5;
}
int main() {
    float* out; int blocks = 132 * 4, threads = 512; cudaMalloc(&out, blocks * threads * 4);
    double ops = (double)blocks * threads * N_ITER * 8;
    float t1 = timeit([&] { k_f32<<<blocks, threads>>>(out, 1.f); });
    float t2 = timeit([&] { k_packed<false><<<blocks, threads>>>(out, 1.f); });
    float t3 = timeit([&] { k_packed<true><<<blocks, threads>>>(out, 1.f); });
    printf("f32 ex2: %.3f ms, %.1f G instr/s, %.1f G exp/s\n", t1, ops / t1 / 1e6, ops / t1 / 1e6);
    printf("f16x2 ex2: %.3f ms, %.1f G instr/s, %.1f G exp/s\n", t2, ops / t2 / 1e6, 2 * ops / t2 / 1e6);
    printf("bf16x2 ex2: %.3f ms, %.1f G instr/s, %.1f G exp/s\n", t3, ops / t3 / 1e6, 2 * ops / t3 / 1e6);
    printf("err %s\n", cudaGetErrorString(cudaGetLastError()));
}
