// Probe (session 11): the host (CPU) cost of the driver's cuLaunchKernel alone, for an empty
// kernel whose parameters are as large as evoattn's (`AttnParams` 184 bytes; with the four TMA
// maps of a `wgmma` launch, 768), timed as `bench --host-cost` times a call: batches of 50
// launches between stream synchronisations, the median over rounds of 400 calls. What evoattn's
// launch path adds to a call is its host cost minus this floor on the same machine.
// nvcc -O3 -arch=sm_90a -o launch-floor launch-floor.cu -lcuda && ./launch-floor
// Record: bench/results/2026-11-23-s11-probes.txt
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cuda.h>
#include <cuda_runtime.h>
#include <vector>

template <int BYTES> struct Params { alignas(64) unsigned char bytes[BYTES]; };
template <int BYTES> __global__ void empty(const __grid_constant__ Params<BYTES> p) {
    if (p.bytes[0] == 255 && threadIdx.x == 1024) asm volatile("trap;");
}

constexpr int BATCH = 50, CALLS = 400, ROUNDS = 5;

template <int BYTES> void floor_of(CUstream stream) {
    cudaFunction_t rt;
    cudaGetFuncBySymbol(&rt, reinterpret_cast<const void*>(&empty<BYTES>));
    CUfunction f = reinterpret_cast<CUfunction>(rt);
    Params<BYTES> p{};
    void* args[] = {&p};
    std::vector<double> medians;
    for (int r = 0; r < ROUNDS; ++r) {
        std::vector<double> us;
        while ((int)us.size() < CALLS) {
            cuStreamSynchronize(stream);
            for (int i = 0; i < BATCH; ++i) {
                auto t0 = std::chrono::steady_clock::now();
                cuLaunchKernel(f, 132, 1, 1, 384, 1, 1, 0, stream, args, nullptr);
                us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
            }
        }
        std::sort(us.begin(), us.end());
        medians.push_back(us[us.size() / 2]);
    }
    std::sort(medians.begin(), medians.end());
    printf("cuLaunchKernel, %d-byte parameters: median %.2f us (round medians %.2f-%.2f)\n", BYTES,
           medians[ROUNDS / 2], medians.front(), medians.back());
}

int main() {
    cudaFree(nullptr);  // the primary context, current on this thread
    CUstream stream;
    cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING);
    floor_of<192>(stream);
    floor_of<768>(stream);
    printf("err %s\n", cudaGetErrorString(cudaDeviceSynchronize()));
}
