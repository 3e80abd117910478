// The `wgmma` kernel (Hopper, sm_90a). One block owns BM query rows of one (batch, head); each
// of its CONSUMERS warpgroups owns 64 of them and streams the visible keys in BN-key tiles:
// S = Q·Kᵀ with wgmma from shared memory, mask, online softmax on the accumulator fragment,
// O += P·V with P from registers, epilogue. Tiles live in shared memory in the 128-byte
// swizzled layout wgmma reads (wgmma_mainloop.cuh).
//
// Step 1: loads by cp.async (every thread), a STAGES-deep ring as in the `mma` kernel.
#include "wgmma_epilogue.cuh"

// Keys the block must visit: the furthest any of its rows may see.
__device__ __forceinline__ int block_key_end(const AttnParams& p, int m0) {
    const int last_row = min(m0 + BM, p.sq) - 1;
    return max(visible_keys(p, last_row), 0);
}

extern "C" __global__ void __launch_bounds__(THREADS, 1) EVOATTN_KERNEL_NAME(const __grid_constant__ AttnParams p) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    // The swizzle pattern is a function of address bits 4-9: tiles must start 1024-aligned.
    const SmemTiles sm{smem_raw + ((ATOM_BYTES - (smem_addr(smem_raw) % ATOM_BYTES)) % ATOM_BYTES)};

    // Under a causal mask later query blocks see more keys: schedule them first.
    const int m_block = p.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
    const int m0 = m_block * BM, head = blockIdx.y, batch = blockIdx.z;
    const int kv_head = head / (p.h / p.hkv);
    const int wg = threadIdx.x / WG_THREADS, warp_in_wg = (threadIdx.x % WG_THREADS) / 32;
    const int lane = threadIdx.x % 32;

    const elem_t* q = p.q + batch * p.q_batch + head * p.q_head;
    const elem_t* k = p.k + batch * p.k_batch + kv_head * p.k_head;
    const elem_t* v = p.v + batch * p.v_batch + kv_head * p.v_head;
    elem_t* o = p.o + batch * p.o_batch + head * p.o_head;

    const int key_end = block_key_end(p, m0);
    const int n_blocks = (key_end + BN - 1) / BN;
    // Tiles whose every key is visible to every row of the block need no mask.
    const int first_row_keys = p.causal ? min(m0 + p.causal_offset + 1, p.sk) : p.sk;

    load_tile<BM>(sm.q(), q, p.q_seq, m0, p.sq);
    cp_async_commit();
    auto load_kv = [&](int block) {
        if (block < n_blocks) {
            const int stage = block % STAGES;
            load_tile<BN>(sm.k(stage), k, p.k_seq, block * BN, p.sk);
            load_tile<BN>(sm.v(stage), v, p.v_seq, block * BN, p.sk);
        }
        cp_async_commit();  // empty groups keep the wait count uniform
    };
    for (int s = 0; s < STAGES - 1; ++s) load_kv(s);

    float acc[O_REGS];
#pragma unroll
    for (int i = 0; i < O_REGS; ++i) acc[i] = 0.f;
    RowState st;
    row_state_init(st);
    const int row0 = m0 + wg * WG_ROWS + warp_in_wg * 16 + lane / 4;

    for (int j = 0; j < n_blocks; ++j) {
        load_kv(j + STAGES - 1);
        cp_async_wait<STAGES - 1>();
        fence_proxy_async_shared();  // cp.async wrote (generic proxy); wgmma reads (async proxy)
        __syncthreads();
        const int stage = j % STAGES;
        float s[S_REGS];
        gemm_qk(s, sm, wg, stage);
        if ((j + 1) * BN > first_row_keys) {
            scale_and_mask<true>(s, p, row0, j * BN);
        } else {
            scale_and_mask<false>(s, p, row0, j * BN);
        }
        online_softmax(s, acc, st);
        gemm_pv(acc, s, sm, stage);
        __syncthreads();  // the next iteration's prefetch overwrites this stage
    }
    cp_async_wait<0>();
    __syncthreads();
    epilogue(p, acc, st, sm, o, m0, batch, head, wg);
}
