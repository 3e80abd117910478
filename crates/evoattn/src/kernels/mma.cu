// The `mma` kernel (FlashAttention-2 class, sm_80+). One block owns BM query rows of one
// (batch, head); its WARPS warps own 16 rows each and stream the visible keys in BN-key tiles
// through a STAGES-deep cp.async ring: S = Q·Kᵀ, mask, online softmax, O += P·V, epilogue.
#include "mma_epilogue.cuh"

#define Q_IN_REGS EVOATTN_Q_IN_REGS

extern "C" __global__ void __launch_bounds__(THREADS, 1) EVOATTN_KERNEL_NAME(const __grid_constant__ AttnParams p) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    elem_t* sQ = (elem_t*)smem_raw;                  // [BM][SMEM_ROW]
    elem_t* sK = sQ + BM * SMEM_ROW;                 // [STAGES][BN][SMEM_ROW]
    elem_t* sV = sK + STAGES * BN * SMEM_ROW;        // [STAGES][BN][SMEM_ROW]

    // Under a causal mask later query blocks see more keys: schedule them first.
    const int m_block = p.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
    const int m0 = m_block * BM, head = blockIdx.y, batch = blockIdx.z;
    const int kv_head = head / (p.h / p.hkv);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

    const elem_t* q = p.q + batch * p.q_batch + head * p.q_head;
    const elem_t* k = p.k + batch * p.k_batch + kv_head * p.k_head;
    const elem_t* v = p.v + batch * p.v_batch + kv_head * p.v_head;
    elem_t* o = p.o + batch * p.o_batch + head * p.o_head;

    const int key_end = block_key_end(p, m0, BM);
    const int n_blocks = (key_end + BN - 1) / BN;
    // Tiles whose every key is visible to every row of the block need no mask.
    const int first_row_keys = p.causal ? min(m0 + p.causal_offset + 1, p.sk) : p.sk;

    load_tile<BM>(sQ, q, p.q_seq, m0, p.sq);
    cp_async_commit();
    auto load_kv = [&](int block) {
        if (block < n_blocks) {
            const int stage = block % STAGES;
            load_tile<BN>(sK + stage * BN * SMEM_ROW, k, p.k_seq, block * BN, p.sk);
            load_tile<BN>(sV + stage * BN * SMEM_ROW, v, p.v_seq, block * BN, p.sk);
        }
        cp_async_commit();  // empty groups keep the wait count uniform
    };
    for (int s = 0; s < STAGES - 1; ++s) load_kv(s);

    cp_async_wait<STAGES - 1>();  // the Q group
    __syncthreads();
#if Q_IN_REGS
    u32 q_regs[K_STEPS][4];
#pragma unroll
    for (int ks = 0; ks < K_STEPS; ++ks) load_q_frag(q_regs[ks], sQ, warp, ks);
    auto q_frag = [&](int ks, u32 (&a)[4]) {
#pragma unroll
        for (int i = 0; i < 4; ++i) a[i] = q_regs[ks][i];
    };
#else
    auto q_frag = [&](int ks, u32 (&a)[4]) { load_q_frag(a, sQ, warp, ks); };
#endif

    float acc[O_TILES][4];
#pragma unroll
    for (int nt = 0; nt < O_TILES; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
    RowState st;
    row_state_init(st);
    const int row0 = m0 + warp * 16 + lane / 4;

    for (int j = 0; j < n_blocks; ++j) {
        load_kv(j + STAGES - 1);
        cp_async_wait<STAGES - 1>();
        __syncthreads();
        const int stage = j % STAGES;
        float s[S_TILES][4];
        gemm_qk(s, sK + stage * BN * SMEM_ROW, q_frag);
        if ((j + 1) * BN > first_row_keys) {
            scale_and_mask<true>(s, p, row0, j * BN);
        } else {
            scale_and_mask<false>(s, p, row0, j * BN);
        }
        online_softmax(s, acc, st);
        gemm_pv(acc, s, sV + stage * BN * SMEM_ROW);
        __syncthreads();  // the next iteration's prefetch overwrites this stage
    }
    cp_async_wait<0>();
    __syncthreads();
    epilogue(p, acc, st, sQ, o, m0, batch, head);
}
