// Does tensor work beside the softmax slow it (session 36, #36)? In the kernel a 128-key block's
// softmax takes 1015-1289 cycles where a lone warp does its arithmetic in ~750 (mufu-rate.cu).
// Here warpgroup 1 runs the kernel's softmax arithmetic (row max, FFMA, ex2, running sum on 64
// scores a thread) while warpgroup 0 either idles or issues wgmma m64n128k16 (bf16, fp32
// accumulators in its registers, operands from shared memory) back to back; one block an SM.
// Prints warpgroup 1's cycles a round for each.
// Build and run on the GPU: nvcc -gencode arch=compute_90a,code=sm_90a -O3 -o /tmp/beside scripts/probes/wgmma-beside.cu && /tmp/beside
#include <cstdio>
#include <cuda_runtime.h>

__device__ __forceinline__ float ex2(float x) {
    float y;
    asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// A no-swizzle shared-memory matrix descriptor (layout type 0): start address, leading and
// stride byte offsets (the values only need to stay inside the buffer: the products are unused).
__device__ __forceinline__ unsigned long long desc(const void* smem, unsigned lbo, unsigned sbo) {
    const unsigned addr = (unsigned)__cvta_generic_to_shared(smem);
    return (unsigned long long)((addr >> 4) & 0x3FFF) | ((unsigned long long)((lbo >> 4) & 0x3FFF) << 16) |
           ((unsigned long long)((sbo >> 4) & 0x3FFF) << 32);
}

__device__ __forceinline__ void wgmma_128(float (&d)[64], unsigned long long a, unsigned long long b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(a), "l"(b));
}

__global__ void __launch_bounds__(256, 1) beside(float* out, long long* cycles, int n_rounds, int gemm_on) {
    extern __shared__ __align__(1024) unsigned char smem[];
    __shared__ volatile int done;
    for (int i = threadIdx.x; i < 16384 / 4; i += blockDim.x) ((unsigned*)smem)[i] = 0;
    if (threadIdx.x == 0) done = 0;
    __syncthreads();
    if (threadIdx.x < 128) {
        if (!gemm_on) return;
        float d[64];
        for (int i = 0; i < 64; ++i) d[i] = 0.f;
        const unsigned long long a = desc(smem, 128, 256), b = desc(smem + 4096, 128, 256);
        while (!done) {
#pragma unroll 1
            for (int k = 0; k < 16; ++k) {
                asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
                wgmma_128(d, a, b);
                asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
                asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
            }
        }
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        float acc = 0.f;
        for (int i = 0; i < 64; ++i) acc += d[i];
        out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
        return;
    }
    float v[64];
    for (int i = 0; i < 64; ++i) v[i] = (threadIdx.x + i) * 1e-3f;
    const float scale = 0.5f;
    float sum = 0.f;
    const long long t0 = clock64();
    for (int r = 0; r < n_rounds; ++r) {
        float shift[2];
#pragma unroll
        for (int row = 0; row < 2; ++row) {
            float x = v[row];
#pragma unroll
            for (int c = 0; c < 16; ++c) x = fmaxf(x, fmaxf(v[4 * c + row], v[4 * c + row + 2]));
            x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
            x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
            shift[row] = x * scale;
        }
#pragma unroll
        for (int i = 0; i < 64; ++i) {
            v[i] = ex2(fmaf(v[i], scale, -shift[(i / 2) % 2]));
            sum += v[i];
        }
    }
    const long long t1 = clock64();
    if (threadIdx.x == 128) done = 1;
    float acc = sum;
    for (int i = 0; i < 64; ++i) acc += v[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
    if (threadIdx.x % 32 == 0) cycles[blockIdx.x * 4 + (threadIdx.x - 128) / 32] = t1 - t0;
}

int main() {
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    float* out;
    long long* cyc;
    cudaMalloc(&out, sms * 256 * sizeof(float));
    cudaMalloc(&cyc, sms * 4 * sizeof(long long));
    cudaFuncSetAttribute(beside, cudaFuncAttributeMaxDynamicSharedMemorySize, 16384);
    const int n_rounds = 2000;
    printf("| warpgroup 0 | softmax cycles a round (warpgroup 1, one warp an SMSP) |\n|---|---|\n");
    for (int gemm_on = 0; gemm_on < 2; ++gemm_on) {
        for (int rep = 0; rep < 2; ++rep) {
            beside<<<sms, 256, 16384>>>(out, cyc, n_rounds, gemm_on);
            cudaDeviceSynchronize();
        }
        long long h[4];
        cudaMemcpy(h, cyc, sizeof(h), cudaMemcpyDeviceToHost);
        const double mean = (h[0] + h[1] + h[2] + h[3]) / 4.0 / n_rounds;
        printf("| %s | %.0f |\n", gemm_on ? "wgmma m64n128k16 bf16 back to back" : "idle", mean);
    }
    printf("%s\n", cudaGetErrorString(cudaGetLastError()));
    return 0;
}
