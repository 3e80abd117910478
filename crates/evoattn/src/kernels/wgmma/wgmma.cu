// The `wgmma` kernel (Hopper, sm_90a). One block owns BM query rows of one (batch, head); each
// of its CONSUMERS warpgroups owns 64 of them and streams the visible keys in BN-key tiles:
// S = Q·Kᵀ with wgmma from shared memory, mask, online softmax on the accumulator fragment,
// O += P·V with P from registers, epilogue. Tiles live in shared memory in the 128-byte
// swizzled layout wgmma reads (wgmma_mainloop.cuh).
//
// Pipelines, by lever:
// - warp_specialized=1: a producer warpgroup and a K/V ring each (wgmma_ws.cuh), optionally
//   with the softmax overlapped with the GEMMs, ping-pong consumers and persistent blocks.
// - loads=tma, warp_specialized=0 (step 2): thread 0 of the consumers issues TMA boxes
//   (tensor maps of Q, K, V passed after the parameters) into a STAGES-deep K/V ring. Per
//   stage s, `kv_full[s]` (1 arrival + the stage's bytes) completes when K and V of the stage
//   have landed, and `kv_empty[s]` (THREADS arrivals) when every thread's wgmma reading the
//   stage has completed. Block j uses stage j % STAGES in its (j / STAGES)-th round, so both
//   barriers are waited on with parity (j / STAGES) & 1. Q completes on `q_full` (phase 0).
// - loads=cp_async (step 1): every thread issues cp.async into a STAGES-deep ring, as in the
//   `mma` kernel, with __syncthreads around each tile.
#if EVOATTN_WARP_SPECIALIZED
#include "wgmma_ws.cuh"
#else
#include "wgmma_epilogue.cuh"
#endif

static_assert(!EVOATTN_TMA_STORE || EVOATTN_LOADS_TMA, "tma_store takes O's tensor map after those of Q, K and V");

static_assert(!EVOATTN_MULTICAST || EVOATTN_WARP_SPECIALIZED, "the producer warpgroup multicasts K and V");
// multicast=1: clusters of two blocks (x-adjacent), which share K and V (wgmma_ws.cuh).
#if EVOATTN_MULTICAST
#define CLUSTER_DIMS __cluster_dims__(CLUSTER_BLOCKS, 1, 1)
#else
#define CLUSTER_DIMS
#endif

#if EVOATTN_LOADS_TMA
// E4M3: the descales (float32 [3, B, Hkv]) follow the parameters, and V's tensor map is the
// transposed V's (wgmma_vt.cuh), or with vt_producer=1 V's own.
extern "C" __global__ void __launch_bounds__(THREADS, 1) CLUSTER_DIMS
    EVOATTN_KERNEL_NAME(const __grid_constant__ AttnParams p,
#if EVOATTN_FP8
                        const float* __restrict__ descale,
#endif
                        const __grid_constant__ TmaMap q_map, const __grid_constant__ TmaMap k_map,
                        const __grid_constant__ TmaMap v_map
#if EVOATTN_TMA_STORE
                        , const __grid_constant__ TmaMap o_map
#endif
    ) {
#else
extern "C" __global__ void __launch_bounds__(THREADS, 1) EVOATTN_KERNEL_NAME(const __grid_constant__ AttnParams p) {
#endif
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const SmemTiles sm{align_to_atom(smem_raw)};
#if EVOATTN_TMA_STORE
    const TmaMap* const o_out = &o_map;
#else
    const TmaMap* const o_out = nullptr;
#endif
#if EVOATTN_WARP_SPECIALIZED
#if !EVOATTN_FP8
    const float* const descale = nullptr;
#endif
    warp_specialized(p, descale, sm, &q_map, &k_map, &v_map, o_out);
#else
    const WorkTile t = work_tile(p);
    const int wg = threadIdx.x / WG_THREADS;
    elem_t* o = p.o + t.batch * p.o_batch + t.head * p.o_head;
    float acc[O_REGS];
#pragma unroll
    for (int i = 0; i < O_REGS; ++i) acc[i] = 0.f;
    RowState st;
    row_state_init(st);
    const int row0 = t.m0 + wg * WG_ROWS + ((threadIdx.x % WG_THREADS) / 32) * 16 + (threadIdx.x % 32) / 4;

    // One key block on a loaded stage: both GEMMs, the mask and the online softmax. Returns
    // once every wgmma that read the stage has completed (gemm_pv waits).
    auto compute = [&](int j, int stage) {
        float s[S_REGS];
        gemm_qk(s, sm, wg, stage);
        mask_block(s, p, t, row0, j);
        online_softmax(s, acc, st, p.scale_log2);
        gemm_pv(acc, s, sm, stage);
    };

#if EVOATTN_LOADS_TMA
    __shared__ __align__(8) u64 q_full, kv_full[STAGES], kv_empty[STAGES];
    const bool producer = threadIdx.x == 0;
    if (producer) {
        tma_prefetch_map(&q_map);
        tma_prefetch_map(&k_map);
        tma_prefetch_map(&v_map);
        if (o_out) tma_prefetch_map(o_out);
        mbarrier_init(&q_full, 1);
        for (int s = 0; s < STAGES; ++s) {
            mbarrier_init(&kv_full[s], 1);
            mbarrier_init(&kv_empty[s], THREADS);
        }
        mbarrier_init_fence();
    }
    __syncthreads();  // the barriers are initialised before anyone waits on them
    auto issue_kv = [&](int block) {
        const int stage = block % STAGES;
        mbarrier_arrive_expect_tx(&kv_full[stage], KV_STAGE_BYTES);
        tma_load_tile<BN>(sm.k(stage), &k_map, &kv_full[stage], block * BN, t.kv_head, t.batch);
        tma_load_tile<BN>(sm.v(stage), &v_map, &kv_full[stage], block * BN, t.kv_head, t.batch);
    };
    if (producer) {
        mbarrier_arrive_expect_tx(&q_full, TILE_BYTES(BM));
        tma_load_tile<BM>(sm.q(), &q_map, &q_full, t.m0, t.head, t.batch);
        for (int b = 0; b < STAGES && b < t.n_blocks; ++b) issue_kv(b);
    }
    __syncwarp();
    // Even a block that sees no key waits: the epilogue stages O in the Q tile.
    mbarrier_wait(&q_full, 0);
    for (int j = 0; j < t.n_blocks; ++j) {
        const int stage = j % STAGES;
        const u32 phase = (u32)(j / STAGES) & 1u;
        mbarrier_wait(&kv_full[stage], phase);
        compute(j, stage);
        mbarrier_arrive(&kv_empty[stage]);  // this thread's reads of the stage are done
        if (producer && j + STAGES < t.n_blocks) {
            mbarrier_wait(&kv_empty[stage], phase);  // everyone's are
            issue_kv(j + STAGES);
        }
        __syncwarp();  // warp 0 reconverges before its next wgmma (.sync.aligned)
    }
    // Every issued load was waited for (none past n_blocks), so no TMA write is in flight.
#else
    const elem_t* q = p.q + t.batch * p.q_batch + t.head * p.q_head;
    const elem_t* k = p.k + t.batch * p.k_batch + t.kv_head * p.k_head;
    const elem_t* v = p.v + t.batch * p.v_batch + t.kv_head * p.v_head;

    load_tile<BM>(sm.q(), q, p.q_seq, t.m0, p.sq);
    cp_async_commit();
    auto load_kv = [&](int block) {
        if (block < t.n_blocks) {
            const int stage = block % STAGES;
            load_tile<BN>(sm.k(stage), k, p.k_seq, block * BN, p.sk);
            load_tile<BN>(sm.v(stage), v, p.v_seq, block * BN, p.sk);
        }
        cp_async_commit();  // empty groups keep the wait count uniform
    };
    for (int s = 0; s < STAGES - 1; ++s) load_kv(s);

    for (int j = 0; j < t.n_blocks; ++j) {
        load_kv(j + STAGES - 1);
        cp_async_wait<STAGES - 1>();
        fence_proxy_async_shared();  // cp.async wrote (generic proxy); wgmma reads (async proxy)
        __syncthreads();
        compute(j, j % STAGES);
        __syncthreads();  // the next iteration's prefetch overwrites this stage
    }
    cp_async_wait<0>();
    __syncthreads();
#endif
    epilogue(p, acc, st, sm, o_out, o, t.m0, t.batch, t.head, wg, 1.f);
    epilogue_finish();
#endif
}

#if EVOATTN_FP8 && !VT_PRODUCER
#include "wgmma_vt.cuh"
#endif
