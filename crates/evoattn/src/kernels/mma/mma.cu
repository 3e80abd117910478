// The `mma` kernel (FlashAttention-2 class, sm_80+). One block owns BM query rows of one
// (batch, head); its WARPS warps own 16 rows each and stream the visible keys in BN-key tiles
// through a STAGES-deep cp.async ring: S = Q·Kᵀ, mask, online softmax, O += P·V, epilogue.
// Every warp owns its 16 rows' whole key tiles (splitkv may split them between warps).
#define EVOATTN_KEY_WARPS 1
#define EVOATTN_LOADS_TMA 0
#include "mma_epilogue.cuh"

extern "C" __global__ void __launch_bounds__(THREADS, 1) EVOATTN_KERNEL_NAME(const __grid_constant__ AttnParams p) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    elem_t* sQ = (elem_t*)smem_raw;                  // [BM][SMEM_ROW]
    elem_t* sK = sQ + BM * SMEM_ROW;                 // [STAGES][KV_TILE]
    elem_t* sV = sK + STAGES * KV_TILE;              // [STAGES][KV_TILE]

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
    // Tiles whose every key is visible to every row of the block need no mask.
    const int first_row_keys = p.causal ? min(m0 + p.causal_offset + 1, p.sk) : p.sk;
    const KvRing ring{sK, sV, KvSource{k, v, p.k_seq, p.v_seq}, p.sk, 0, (key_end + BN - 1) / BN};

    load_tile<BM>(sQ, q, p.q_seq, m0, p.sq);
    QFrags q_frag;
    start_pipeline(ring, q_frag, sQ, warp);
    float acc[O_TILES][4];
    RowState st;
    attend_keys(p, ring, q_frag, m0 + warp * 16 + lane / 4, 1, first_row_keys, 0, acc, st);
    __syncthreads();  // the epilogue stages O in the Q tile
    epilogue(p, acc, st, sQ, o, m0, batch, head);
}
