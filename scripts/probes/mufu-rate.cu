// How fast one SMSP runs MUFU.EX2 (session 36, #36): with 1, 2 or 4 warps per SMSP, each warp
// doing rounds of 64 independent ex2 per thread (the softmax's count for a 128-key block at
// hd128), alone ("ex2") or as the softmax does them (FFMA into ex2, then a running FADD sum:
// "softmax"), or with the row max first as the kernel computes it (a chain of FMNMX over each
// of two rows' 32 values, two quad shuffles each: "max + softmax"). Prints cycles per round
// per warp and per warp-MUFU instruction.
// Build and run on the GPU: nvcc -arch=sm_90a -O3 -o /tmp/mufu scripts/probes/mufu-rate.cu && /tmp/mufu
#include <cstdio>
#include <cuda_runtime.h>

__device__ __forceinline__ float ex2(float x) {
    float y;
    asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

template <int PATTERN>  // 0: ex2 alone, 1: softmax, 2: max + softmax
__global__ void rounds(float* out, long long* cycles, int n_rounds, float scale) {
    constexpr bool SOFTMAX = PATTERN >= 1;
    float v[64];
    for (int i = 0; i < 64; ++i) v[i] = (threadIdx.x + i) * 1e-3f;
    float sum = 0.f;
    __syncthreads();
    const long long t0 = clock64();
    for (int r = 0; r < n_rounds; ++r) {
        float shift[2] = {1.f, 1.f};
        if (PATTERN == 2) {
#pragma unroll
            for (int row = 0; row < 2; ++row) {
                float x = v[row];
#pragma unroll
                for (int c = 0; c < 16; ++c) x = fmaxf(x, fmaxf(v[4 * c + row], v[4 * c + row + 2]));
                x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
                x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
                shift[row] = x * scale;
            }
        }
#pragma unroll
        for (int i = 0; i < 64; ++i) {
            if (SOFTMAX) {
                v[i] = ex2(fmaf(v[i], scale, -shift[(i / 2) % 2]));
                sum += v[i];
            } else {
                v[i] = ex2(v[i]);
            }
        }
    }
    const long long t1 = clock64();
    float acc = sum;
    for (int i = 0; i < 64; ++i) acc += v[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
    if (threadIdx.x % 32 == 0) cycles[blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32] = t1 - t0;
}

int main() {
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    float* out;
    long long* cyc;
    cudaMalloc(&out, sms * 1024 * sizeof(float));
    cudaMalloc(&cyc, sms * 32 * sizeof(long long));
    const int n_rounds = 2000;
    printf("| pattern | warps per SMSP | cycles per round (64 ex2 a thread) | cycles per warp MUFU |\n|---|---|---|---|\n");
    const char* names[3] = {"ex2 alone", "softmax (FFMA, ex2, FADD sum)", "max + softmax (FMNMX chain, shuffles)"};
    for (int pattern = 0; pattern < 3; ++pattern) {
        for (int per_smsp : {1, 2, 4}) {
            const int threads = 32 * 4 * per_smsp;
            for (int rep = 0; rep < 2; ++rep) {  // the first warms up
                if (pattern == 0) rounds<0><<<sms, threads>>>(out, cyc, n_rounds, 0.5f);
                if (pattern == 1) rounds<1><<<sms, threads>>>(out, cyc, n_rounds, 0.5f);
                if (pattern == 2) rounds<2><<<sms, threads>>>(out, cyc, n_rounds, 0.5f);
                cudaDeviceSynchronize();
            }
            long long h[32];
            cudaMemcpy(h, cyc, threads / 32 * sizeof(long long), cudaMemcpyDeviceToHost);
            double mean = 0;
            for (int w = 0; w < threads / 32; ++w) mean += h[w];
            mean /= threads / 32;
            const double per_round = mean / n_rounds;
            printf("| %s | %d | %.0f | %.2f |\n", names[pattern], per_smsp,
                   per_round, per_round / 64);
        }
    }
    printf("%s\n", cudaGetErrorString(cudaGetLastError()));
    return 0;
}
