// `splitkv` stages after the main loop: each split writes its partial output (normalised by
// its own row sums, float32) and its log2 LSE to the workspace; the last split of a tile to
// finish, told by an atomic counter, merges the partials into O and the natural-log LSE.
//
// Tile rows are packed: row r of the (batch, KV head) holds query r / group of head
// kv_head * group + r % group, so the query heads sharing one KV head fill the MMA rows.
#pragma once
#include "mma_softmax.cuh"

// Mirrored by `runtime::launch::SplitParams`, field for field.
struct SplitParams {
    float* o_part;    // [splits][B][Hkv][rows][D]
    float* lse_part;  // [splits][B][Hkv][rows], log2 units
    int* counters;    // [B][Hkv][m_blocks], zero between launches (the last split resets its own)
    int splits;
    int m_blocks;
};

// Workspace slot of packed row `row` of split `split`.
__device__ __forceinline__ i64 part_slot(const AttnParams& p, int split, int batch, int kv_head, int rows, int row) {
    return (((i64)split * p.b + batch) * p.hkv + kv_head) * rows + row;
}

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
    for (int lane_mask = 16; lane_mask > 0; lane_mask /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, lane_mask));
    return x;
}

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
    for (int lane_mask = 16; lane_mask > 0; lane_mask /= 2) x += __shfl_xor_sync(0xffffffffu, x, lane_mask);
    return x;
}

// Floats one warp's online-softmax state takes in the key-warp merge's scratch: the O
// fragments, m and l, each [value][lane] so that a warp's stores hit 32 banks.
#define MERGE_FLOATS ((O_TILES * 4 + 4) * 32)

// With KEY_WARPS > 1 the warps of one row group attended to disjoint key slices of every tile:
// merges their (m, l, O) into the group's key warp 0, one key warp per round, through
// `scratch` (the drained K/V ring: ROW_WARPS * MERGE_FLOATS floats). Call with no copy in
// flight; only key warp 0's state is meaningful afterwards.
__device__ __forceinline__ void merge_key_warps(float (&o)[O_TILES][4], RowState& st, float* scratch, int row_warp,
                                                int key_warp) {
    const int lane = threadIdx.x % 32;
    float* mine = scratch + row_warp * MERGE_FLOATS + lane;
#pragma unroll 1
    for (int from = 1; from < KEY_WARPS; ++from) {
        __syncthreads();  // the ring's last reads, or the previous round's, are done
        if (key_warp == from) {
#pragma unroll
            for (int nt = 0; nt < O_TILES; ++nt) {
#pragma unroll
                for (int i = 0; i < 4; ++i) mine[(nt * 4 + i) * 32] = o[nt][i];
            }
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                mine[(O_TILES * 4 + r) * 32] = st.m[r];
                mine[(O_TILES * 4 + 2 + r) * 32] = st.l[r];
            }
        }
        __syncthreads();
        if (key_warp == 0) {
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                float keep, take;
                merge_row(st, r, mine[(O_TILES * 4 + r) * 32], mine[(O_TILES * 4 + 2 + r) * 32], keep, take);
#pragma unroll
                for (int nt = 0; nt < O_TILES; ++nt) {
                    o[nt][2 * r] = o[nt][2 * r] * keep + mine[(nt * 4 + 2 * r) * 32] * take;
                    o[nt][2 * r + 1] = o[nt][2 * r + 1] * keep + mine[(nt * 4 + 2 * r + 1) * 32] * take;
                }
            }
        }
    }
}

// Writes this warp's 16 rows of one split: O / l as float32 and m + log2(l) (-inf for a row
// that saw no key in this split, whose O is 0).
__device__ __forceinline__ void write_partial(const AttnParams& p, const SplitParams& sp, const float (&o)[O_TILES][4],
                                              const RowState& st, int split, int batch, int kv_head, int rows,
                                              int row0) {
    const int t = threadIdx.x % 4;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const float l = quad_sum(st.l[r]);
        const int row = row0 + 8 * r;
        if (row >= rows) continue;
        const float inv = l > 0.f ? 1.f / l : 0.f;
        const i64 slot = part_slot(p, split, batch, kv_head, rows, row);
        float* dst = sp.o_part + slot * D;
#pragma unroll
        for (int nt = 0; nt < O_TILES; ++nt) {
            *(float2*)(dst + nt * 8 + 2 * t) = make_float2(o[nt][2 * r] * inv, o[nt][2 * r + 1] * inv);
        }
        if (t == 0) sp.lse_part[slot] = l > 0.f ? st.m[r] + __log2f(l) : NEG_INF;
    }
}

// Counts this split in and tells whether it was the tile's last; the last one resets the
// counter for the next launch (no other block touches it until then).
__device__ __forceinline__ bool arrive_last(const SplitParams& sp, int batch, int kv_head, int hkv, int m_block) {
    __threadfence();  // this block's partials are visible before it is counted
    __syncthreads();
    int last = 0;
    if (threadIdx.x == 0) {
        int* counter = sp.counters + ((i64)batch * hkv + kv_head) * sp.m_blocks + m_block;
        last = atomicAdd(counter, 1) == sp.splits - 1;
        if (last) atomicExch(counter, 0);
    }
    // A barrier that also tells every thread thread 0's answer, with no shared memory.
    last = __syncthreads_or(last);
    __threadfence();  // the other splits' partials are read after their counts
    return last;
}

// Splits the combine reads per thread before it uses any: loads in flight hide the L2
// latency, which a one-split-at-a-time loop pays per split.
#define COMBINE_BATCH 8
// Floats per combine work item: one 16-byte load of a partial row.
#define COMBINE_CHUNK 4

// Merges the splits of packed rows [m0, m0 + BM) into O and LSE: O = sum_s 2^(lse_s - lse) O_s
// with lse = log2 sum_s 2^lse_s. First one warp per row reduces the splits' LSEs (lanes over
// splits); then every thread takes (row, 4-column chunk) items and sums the splits' chunks,
// COMBINE_BATCH loads at a time.
__device__ __forceinline__ void combine(const AttnParams& p, const SplitParams& sp, int batch, int kv_head, int group,
                                        int rows, int m0) {
    __shared__ float row_lse[BM];  // log2 units; -inf for a row that saw no key at all
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row_end = min(m0 + BM, rows);
    for (int row = m0 + warp; row < row_end; row += WARPS) {
        float mx = NEG_INF;
        for (int s = lane; s < sp.splits; s += 32) mx = fmaxf(mx, ld_cg(sp.lse_part + part_slot(p, s, batch, kv_head, rows, row)));
        mx = warp_max(mx);
        const float base = mx == NEG_INF ? 0.f : mx;
        float sum = 0.f;
        for (int s = lane; s < sp.splits; s += 32) {
            sum += fast_exp2(ld_cg(sp.lse_part + part_slot(p, s, batch, kv_head, rows, row)) - base);
        }
        sum = warp_sum(sum);
        const float lse = sum > 0.f ? base + __log2f(sum) : NEG_INF;
        if (lane == 0) {
            row_lse[row - m0] = lse;
            const int query = row / group, head = kv_head * group + row % group;
            if (p.lse != 0) p.lse[((i64)batch * p.h + head) * p.sq + query] = lse * LN2;
        }
    }
    __syncthreads();
    constexpr int CHUNKS_PER_ROW = D / COMBINE_CHUNK;
    for (int item = threadIdx.x; item < (row_end - m0) * CHUNKS_PER_ROW; item += THREADS) {
        const int row = m0 + item / CHUNKS_PER_ROW, col = (item % CHUNKS_PER_ROW) * COMBINE_CHUNK;
        const float lse = row_lse[row - m0];
        float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
        for (int s0 = 0; s0 < sp.splits; s0 += COMBINE_BATCH) {
            float part_lse[COMBINE_BATCH];
            float4 part[COMBINE_BATCH];
#pragma unroll
            for (int u = 0; u < COMBINE_BATCH; ++u) {
                const i64 slot = part_slot(p, s0 + u, batch, kv_head, rows, row);
                const bool real = s0 + u < sp.splits;
                part_lse[u] = real ? ld_cg(sp.lse_part + slot) : NEG_INF;
                part[u] = real ? ld_cg4(sp.o_part + slot * D + col) : make_float4(0.f, 0.f, 0.f, 0.f);
            }
#pragma unroll
            for (int u = 0; u < COMBINE_BATCH; ++u) {
                // A split that saw no key (lse_s = -inf) weighs 0, as does every split of a row
                // that saw none.
                const float w = lse == NEG_INF ? 0.f : fast_exp2(part_lse[u] - lse);
                acc.x += w * part[u].x;
                acc.y += w * part[u].y;
                acc.z += w * part[u].z;
                acc.w += w * part[u].w;
            }
        }
        const int query = row / group, head = kv_head * group + row % group;
        elem_t* o = p.o + batch * p.o_batch + head * p.o_head + query * p.o_seq + col;
        const u32 lo = pack_float2(acc.x, acc.y), hi = pack_float2(acc.z, acc.w);
        *(uint2*)o = make_uint2(lo, hi);
    }
}
