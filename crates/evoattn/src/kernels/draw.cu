// Reproducible random tensors on the GPU (the definition and its CPU twin: src/draw.rs). Element
// i of a logical [b, h, s, d] tensor is a pure function of two keys and i, written at its strided
// offset: 32-bit integer hashing, one float32 multiply, one round to nearest even. No CUDA
// headers: NVRTC compiles this alone.
typedef unsigned int u32;
typedef long long i64;

// Mirrored by `runtime::device::DrawParams`, field for field.
struct DrawParams {
    unsigned short* out;
    i64 stride_b, stride_h, stride_s, stride_d;
    u32 nb, nh, ns, nd;
    u32 elements;
    u32 key0, key1;
    float scale;
    u32 bf16;
};

__device__ __forceinline__ u32 hash32(u32 x) {
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    return x ^ (x >> 16);
}

extern "C" __global__ void evoattn_draw(DrawParams p) {
    // elements < 2^31 (Problem::validate), so i + stride never wraps.
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < p.elements; i += gridDim.x * blockDim.x) {
        u32 h1 = hash32(i ^ p.key0);
        u32 h2 = hash32(h1 + p.key1);
        int sum = (int)((h1 & 0xffffu) + (h1 >> 16) + (h2 & 0xffffu) + (h2 >> 16)) - 2 * 65535;
        float x = __fmul_rn(__int2float_rn(sum), p.scale);
        unsigned short bits;
        if (p.bf16) {
            asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(bits) : "f"(x));
        } else {
            asm("cvt.rn.f16.f32 %0, %1;" : "=h"(bits) : "f"(x));
        }
        u32 d = i % p.nd, row = i / p.nd;
        u32 s = row % p.ns, bh = row / p.ns;
        u32 h = bh % p.nh, b = bh / p.nh;
        p.out[b * p.stride_b + h * p.stride_h + s * p.stride_s + d * p.stride_d] = bits;
    }
}

// Every element of a buffer set to `value` (the gaps of strided tensors get NaN this way).
extern "C" __global__ void evoattn_fill(unsigned short* out, u32 n, unsigned short value) {
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        out[i] = value;
    }
}
