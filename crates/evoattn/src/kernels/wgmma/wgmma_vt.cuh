// The V transpose of the E4M3 `wgmma` kernel (or, vt_given, the permute of a V the caller gives
// transposed): FP8 wgmma reads B K-major only, so P·V needs Vᵀ, keys contiguous. Launched before
// the attention kernel on the same stream, it writes Vᵀ of every (batch, KV head) into the launch's
// scratch, [B][Hkv][D][sk_pad] bytes with sk_pad = Sk rounded up to 16, each 16 keys in P's k order
// (`vt_key`) and zeros past Sk; the attention kernel's TMA loads its tiles from there.
//
// One block transposes VT_KEYS keys through shared memory: 16-byte loads of V's rows, then
// each thread turns a 4 x 4 byte block around with byte permutes: the 4 keys of one output
// word (positions 4w..4w+3, keys r0, r0+1, r0+8, r0+9 in P's order) at 4 head-dim columns,
// 4 shared loads, 8 PRMTs and 4 stores per 16 bytes. (The first version gathered single bytes:
// 33 µs for 33.5 MB on an H200, issue-bound at 30% of DRAM's bandwidth.)
#pragma once

#define VT_KEYS EVOATTN_VT_KEYS        // the host's VT_BLOCK_KEYS: it sizes the grid by them
#define VT_THREADS EVOATTN_VT_THREADS
static_assert(VT_KEYS % 16 == 0, "a block transposes whole 16-key groups of P's order");
// Words per key row in shared memory: odd, so a warp's column reads (16 rows, 2 columns)
// meet at most two to a bank.
#define VT_ROW_WORDS (D / 4 + 1)

#if VT_GIVEN
// vt_given=1: the caller already holds Vᵀ ([B][Hkv][D][Sk], `v_row` bytes between head-dim
// rows), so a block puts each 16 keys of VT_KEYS in P's order: one 16-byte chunk a thread,
// read and written whole (`vt_key_order`, as `permute_vt_tile` does in shared memory). The
// chunk holding Sk is read byte by byte (the caller's rows may end there) with zeros past it.
extern "C" __global__ void __launch_bounds__(VT_THREADS)
    EVOATTN_VT_NAME(const __grid_constant__ AttnParams p, unsigned char* __restrict__ vt, int sk_pad, i64 v_row) {
    const int key0 = blockIdx.x * VT_KEYS, kv_head = blockIdx.y, batch = blockIdx.z;
    const unsigned char* v = (const unsigned char*)p.v + batch * p.v_batch + kv_head * p.v_head;
    unsigned char* out = vt + ((i64)batch * p.hkv + kv_head) * D * sk_pad;
    for (int i = threadIdx.x; i < D * (VT_KEYS / 16); i += VT_THREADS) {
        const int d = i / (VT_KEYS / 16), key = key0 + 16 * (i % (VT_KEYS / 16));
        if (key >= sk_pad) continue;
        const unsigned char* row = v + d * v_row;
        uint4 w;
        if (key + 16 <= p.sk) {
            w = *(const uint4*)(row + key);
        } else {
            u32 x[4] = {0u, 0u, 0u, 0u};
#pragma unroll
            for (int j = 0; j < 16; ++j) {
                if (key + j < p.sk) x[j / 4] |= (u32)row[key + j] << (8 * (j % 4));
            }
            w = make_uint4(x[0], x[1], x[2], x[3]);
        }
        *(uint4*)(out + (i64)d * sk_pad + key) = vt_key_order(w);
    }
}
#else
extern "C" __global__ void __launch_bounds__(VT_THREADS)
    EVOATTN_VT_NAME(const __grid_constant__ AttnParams p, unsigned char* __restrict__ vt, int sk_pad) {
    __shared__ u32 tile[VT_KEYS * VT_ROW_WORDS];
    const int key0 = blockIdx.x * VT_KEYS, kv_head = blockIdx.y, batch = blockIdx.z;
    // E4M3 strides are in bytes (elements); the host checked they keep 16-byte rows aligned.
    const unsigned char* v = (const unsigned char*)p.v + batch * p.v_batch + kv_head * p.v_head;
    for (int i = threadIdx.x; i < VT_KEYS * D / 16; i += VT_THREADS) {
        const int r = i / (D / 16), c = i % (D / 16);
        const int key = key0 + r;
        const uint4 x = key < p.sk ? *(const uint4*)(v + key * p.v_seq + 16 * c) : make_uint4(0u, 0u, 0u, 0u);
        u32* row = &tile[r * VT_ROW_WORDS + 4 * c];
        row[0] = x.x;
        row[1] = x.y;
        row[2] = x.z;
        row[3] = x.w;
    }
    __syncthreads();
    unsigned char* out = vt + ((i64)batch * p.hkv + kv_head) * D * sk_pad;
    // Thread i: output word w (of the block's VT_KEYS / 4) of head-dim rows 4 d4 .. 4 d4 + 3.
    for (int i = threadIdx.x; i < (D / 4) * (VT_KEYS / 4); i += VT_THREADS) {
        const int w = i % (VT_KEYS / 4), d4 = i / (VT_KEYS / 4);
        if (key0 + 4 * w >= sk_pad) continue;
        const int r0 = vt_key(4 * w);  // the word's keys: r0, r0 + 1, r0 + 8, r0 + 9
        const u32 a = tile[r0 * VT_ROW_WORDS + d4], b = tile[(r0 + 1) * VT_ROW_WORDS + d4];
        const u32 c = tile[(r0 + 8) * VT_ROW_WORDS + d4], e = tile[(r0 + 9) * VT_ROW_WORDS + d4];
        // Byte j of the four, in key order, is column 4 d4 + j's word.
        const u32 ab_lo = __byte_perm(a, b, 0x5140), ab_hi = __byte_perm(a, b, 0x7362);  // a0 b0 a1 b1, a2 b2 a3 b3
        const u32 ce_lo = __byte_perm(c, e, 0x5140), ce_hi = __byte_perm(c, e, 0x7362);
        unsigned char* o = out + (i64)(4 * d4) * sk_pad + key0 + 4 * w;
        *(u32*)o = __byte_perm(ab_lo, ce_lo, 0x5410);                // a0 b0 c0 e0
        *(u32*)(o + sk_pad) = __byte_perm(ab_lo, ce_lo, 0x7632);     // a1 b1 c1 e1
        *(u32*)(o + 2 * sk_pad) = __byte_perm(ab_hi, ce_hi, 0x5410);
        *(u32*)(o + 3 * sk_pad) = __byte_perm(ab_hi, ce_hi, 0x7632);
    }
}
#endif
