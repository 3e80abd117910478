// The `mma8` kernel: FP8 E4M3 attention on mma.sync m16n8k32 (sm_89+), the portable FP8 path.
// One block owns BM query rows of one (batch, head); its warps own 16 rows each and stream the
// visible keys in BN-key tiles through a STAGES-deep cp.async ring: S = Q·Kᵀ on E4M3, mask,
// online softmax with P scaled into E4M3's range, O += P·V on E4M3, epilogue to bf16 (f16 for
// e4m3f16: EVOATTN_BF16 names O's type).
// Dequantization is folded in: q_descale · k_descale into the scores' scale, v_descale into O's
// normalisation (FlashAttention-3's convention, one descale per batch and KV head).
#include "mma8_epilogue.cuh"

// `descale`: float32 [3, B, Hkv], q's, k's then v's.
extern "C" __global__ void __launch_bounds__(THREADS, 1)
    EVOATTN_KERNEL_NAME(const __grid_constant__ AttnParams p, const float* __restrict__ descale) {
    extern __shared__ __align__(16) unsigned char smem[];
    u8* sQ = smem;                     // [BM][ROW]
    u8* sK = sQ + BM * ROW;            // [STAGES][BN][ROW]
    u8* sV = sK + STAGES * KV_TILE;    // [STAGES][BN][ROW]

    // Under a causal mask later query blocks see more keys: schedule them first.
    const int m_block = p.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
    const int m0 = m_block * BM, head = blockIdx.y, batch = blockIdx.z;
    const int kv_head = head / (p.h / p.hkv);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row_warp = warp % ROW_WARPS, d0 = (warp / ROW_WARPS) * D_PART;

    // Strides count elements: bytes for the E4M3 inputs, 16-bit elements for O.
    const u8* q = (const u8*)p.q + batch * p.q_batch + head * p.q_head;
    const u8* k = (const u8*)p.k + batch * p.k_batch + kv_head * p.k_head;
    const u8* v = (const u8*)p.v + batch * p.v_batch + kv_head * p.v_head;
    elem_t* o = p.o + batch * p.o_batch + head * p.o_head;

    const int group = batch * p.hkv + kv_head, groups = p.b * p.hkv;
    const float scale_log2 = p.scale_log2 * descale[group] * descale[groups + group];
    const float v_descale = descale[2 * groups + group];

    const int key_end = block_key_end(p, m0, BM);
    const int first_row_keys = p.causal ? min(m0 + p.causal_offset + 1, p.sk) : p.sk;
    const KvRing ring{sK, sV, k, v, p.k_seq, p.v_seq, p.sk, (key_end + BN - 1) / BN};

    load_tile<BM>(sQ, q, p.q_seq, m0, p.sq);
    cp_async_commit();
    for (int s = 0; s < STAGES - 1; ++s) ring.load(s);
    cp_async_wait<STAGES - 1>();  // the Q group
    __syncthreads();
    QFrags q_frag;
    q_frag.init(sQ, row_warp);
    float acc[O_TILES][4];
    RowState st;
    attend_keys(p, scale_log2, ring, q_frag, m0 + row_warp * 16 + lane / 4, d0, first_row_keys, acc, st);
    __syncthreads();  // the epilogue stages O over the Q tile and the ring
    epilogue(p, acc, st, v_descale, smem, o, m0, row_warp, d0, batch, head);
}
