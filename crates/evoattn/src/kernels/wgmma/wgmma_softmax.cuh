// `wgmma` online softmax in exp2 form, on the fp32 accumulator fragment of S.
//
// Fragment (ptx_sm90.cuh): in its warpgroup, warp w owns rows 16w..16w+15; lane = 4g + t holds
// rows g (r = 0) and g + 8 (r = 1), and for each 8-column chunk i the columns 8i + 2t and
// 8i + 2t + 1 as accumulators 4i + 2r and 4i + 2r + 1. A row's values are spread over the 4
// lanes of a quad, so row reductions are two shuffles. The running max `m` is kept in log2
// units (scores times scale·log2e, applied inside the exponent's FFMA); the running sum `l`
// per thread, reduced across the quad once, in the epilogue. The masking semantics are the
// `mma` kernel's.
#pragma once
#include "wgmma_scheduler.cuh"
#include "row_state.cuh"

// One score pair in EXP2_POLY (0: none) takes `poly_exp2` on the FMA pipe instead of MUFU.
#define EXP2_POLY EVOATTN_EXP2_POLY

#if EVOATTN_PATHOLOGY_BARRIER
// The first of the inversion barrier's ids, one a warpgroup, the block's last ones: past the
// epilogue's (1..CONSUMERS) and ping-pong's (CONSUMERS + 1..2 · CONSUMERS).
#define PATHOLOGY_BARRIER (16 - THREADS / WG_THREADS)
static_assert(PATHOLOGY_BARRIER > 2 * CONSUMERS, "the inversion barrier's ids are the kernel's own");
#endif

__device__ __forceinline__ float score_exp2(float x, int pair) {
    return EXP2_POLY > 0 && pair % EXP2_POLY == EXP2_POLY - 1 ? poly_exp2(x) : fast_exp2(x);
}

// A tile's scales: the scores' (softmax scale · log2(e), times Q's and K's descales for E4M3)
// and O's (V's descale for E4M3, else 1). `descale`: E4M3's float32 [3, B, Hkv] (q's, k's, v's).
struct TileScales {
    float scale_log2;
    float o_scale;
};

__device__ __forceinline__ TileScales tile_scales(const AttnParams& p, const float* descale, const WorkTile& t) {
#if EVOATTN_FP8
    const int groups = p.b * p.hkv, group = t.batch * p.hkv + t.kv_head;
    return {p.scale_log2 * descale[group] * descale[groups + group], descale[2 * groups + group]};
#else
    return {p.scale_log2, 1.f};
#endif
}

// Sets hidden entries of the raw scores S (keys past Sk, or past the causal diagonal) to the
// value that becomes -inf once scaled (`hidden_score`). `row0` is the global row of this
// thread's first row (g); `key0` the key block's first key; NC the block's columns S holds. The
// scale is applied later, fused into the exponent's FFMA (`softmax_step`), which saves one FP32
// instruction per score.
template <int NC = BN>
__device__ __forceinline__ void mask_scores(float (&s)[S_REGS], const AttnParams& p, int row0, int key0) {
    // Per row, the last visible column counted from this thread's first (key0 + 2t), so that each
    // score compares its compile-time column against it: one ISETP and one FSEL a score, where
    // comparing its key against Sk and the diagonal took twice that.
    const int first_key = key0 + 2 * (threadIdx.x % 4);
    const float hidden = hidden_score(p.scale_log2);
    int last[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        last[r] = p.sk - 1 - first_key;
        if (p.causal != 0) last[r] = min(last[r], row0 + 8 * r + p.causal_offset - first_key);
    }
#pragma unroll
    for (int i = 0; i < NC / 2; ++i) {
        const int column = (i / 4) * 8 + (i % 2);
        s[i] = column > last[(i / 2) % 2] ? hidden : s[i];
    }
}

// Masks key block j of tile `t` where the block needs it.
// `j` is the key block (key_block: a piece's blocks start past 0).
template <int NC = BN>
__device__ __forceinline__ void mask_block(float (&s)[S_REGS], const AttnParams& p, const WorkTile& t, int row0,
                                           int j) {
    if (needs_mask(t, j)) mask_scores<NC>(s, p, row0, j * BN);
}

// Per row (r = 0, 1), the largest raw score (POSITIVE_SCALE) or the smallest: the one that is
// largest once scaled, over the first NC columns. Reduced across the quad.
template <bool POSITIVE_SCALE, int NC>
__device__ __forceinline__ void row_extremes(const float (&s)[S_REGS], float (&ext)[2]) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        float x = s[2 * r];
#pragma unroll
        for (int i = 0; i < NC / 8; ++i) {
            x = score_extreme(x, score_extreme(s[4 * i + 2 * r], s[4 * i + 2 * r + 1], POSITIVE_SCALE), POSITIVE_SCALE);
        }
        ext[r] = quad_extreme(x, POSITIVE_SCALE);
    }
}

// lazy_rescale=1: how far (log2 units) a row's max may rise before the running max follows it.
// Until then the exponentials keep the old max, so probabilities may reach 2^8 = 256 (fine in
// the fp32 sums and in the 16-bit P), and O needs no rescale. Past the first key blocks the
// max rarely moves that far, so most warps skip the rescale (32 FMULs at hd64, 2 MUFU) that
// otherwise sits between P·V's completion and the next GEMM turn. E4M3's P is already scaled
// by 2^8, so its slack is the little E4M3 has left (FP8_RESCALE_SLACK_LOG2, ptx_fp8.cuh).
#define LAZY_RESCALE EVOATTN_LAZY_RESCALE
#if EVOATTN_FP8
#define RESCALE_SLACK_LOG2 FP8_RESCALE_SLACK_LOG2
#else
#define RESCALE_SLACK_LOG2 8.f
#endif

// Turns raw scores into probabilities relative to the running max (exp2 of the scaled score
// minus the max, one FFMA and one MUFU per score) and folds them into the running sum; sets,
// per row, the factor exp2(m_old - m_new) by which the output accumulator must be rescaled
// (`rescale_output`) and returns whether it must be (warp-uniform; always, unless
// LAZY_RESCALE, where the max moves only when a row's new one exceeds it by
// RESCALE_SLACK_LOG2 and a row that kept its max has the factor 1). Apart from it so that a
// pipelined loop can compute probabilities while the previous P·V still accumulates into O.
// NC: the columns S holds.
template <int NC = BN>
__device__ __forceinline__ bool softmax_step(float (&s)[S_REGS], RowState& st, float (&correction)[2],
                                             float scale_log2) {
    pathology_diverge();
#if EVOATTN_PATHOLOGY_BARRIER
    // Inversion (`evoattn invert`): one more barrier a key block, among the warpgroup's warps.
    named_barrier_sync(PATHOLOGY_BARRIER + threadIdx.x / WG_THREADS, WG_THREADS);
#endif
    // Both rows' extremes in one uniform branch (not a select per score, which ptxas predicates
    // into both FMNMX forms; not a branch per row, which keeps row 1's reduction from
    // interleaving with row 0's exponentials).
    float ext[2];
    if (scale_log2 > 0.f) {
        row_extremes<true, NC>(s, ext);
    } else {
        row_extremes<false, NC>(s, ext);
    }
#if LAZY_RESCALE
    // A row's quad holds the same max and extreme, so its 4 lanes decide alike. -inf + slack
    // stays -inf: a row's first visible key always sets its max.
    bool moves[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) moves[r] = ext[r] * scale_log2 > st.m[r] + RESCALE_SLACK_LOG2;
    const bool rescale = __any_sync(0xffffffffu, moves[0] | moves[1]);
#else
    const bool rescale = true;
#endif
#pragma unroll
    for (int r = 0; r < 2; ++r) {
#if LAZY_RESCALE
        const float mx = moves[r] ? ext[r] * scale_log2 : st.m[r];
#else
        const float mx = fmaxf(st.m[r], ext[r] * scale_log2);
#endif
        // A row with every key masked so far keeps m = -inf; subtract 0 instead of -inf so
        // exp2 gives 0, not NaN.
        const float base = mx == NEG_INF ? 0.f : mx;
        correction[r] = rescale ? fast_exp2(st.m[r] - base) : 1.f;
        st.m[r] = mx;
#if EVOATTN_FP8
        const float shift = base - P_LOG2_SCALE;  // E4M3's P, times 2^P_LOG2_SCALE (ptx_fp8.cuh)
#else
        const float shift = base;
#endif
        float sum = 0.f;
#pragma unroll
        for (int i = 0; i < NC / 8; ++i) {
            s[4 * i + 2 * r] = score_exp2(fmaf(s[4 * i + 2 * r], scale_log2, -shift), i);
            s[4 * i + 2 * r + 1] = score_exp2(fmaf(s[4 * i + 2 * r + 1], scale_log2, -shift), i);
            if (!ROWSUM_MMA) sum += s[4 * i + 2 * r] + s[4 * i + 2 * r + 1];
        }
        // rowsum_mma: P·V sums the rows (rowsum_to_state), rescaled with O.
        if (!ROWSUM_MMA) st.l[r] = st.l[r] * correction[r] + sum;
    }
    return rescale;
}

// rowsum_mma: the row sums P·V accumulated, into the row state the epilogue reads.
__device__ __forceinline__ void rowsum_to_state(const float (&o)[O_REGS], RowState& st) {
#if ROWSUM_MMA
    st.l[0] = o[ROWSUM_REG(0)];
    st.l[1] = o[ROWSUM_REG(1)];
#endif
}

__device__ __forceinline__ void rescale_output(float (&o)[O_REGS], const float (&correction)[2]) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
#pragma unroll
        for (int i = 0; i < O_REGS / 4; ++i) {
            o[4 * i + 2 * r] *= correction[r];
            o[4 * i + 2 * r + 1] *= correction[r];
        }
    }
}

// Both steps, for loops that rescale O right away.
__device__ __forceinline__ void online_softmax(float (&s)[S_REGS], float (&o)[O_REGS], RowState& st,
                                               float scale_log2) {
    float correction[2];
    if (softmax_step(s, st, correction, scale_log2)) rescale_output(o, correction);
}
