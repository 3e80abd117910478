// Per-warp timeline of the warp-specialised `wgmma` pipeline (trace=1; `evoattn trace`):
// lane 0 of each warp stamps the SM's cycle counter at fixed points of its loop into a module
// global the host zeroes before the launch and reads after it (`runtime::trace`), so nothing in
// the launch parameters changes. With trace=0 every mark compiles to nothing.
//
// Layout: warp w of block b (linear block index, below TRACE_BLOCKS) owns TRACE_EVENTS words
// from (b * WARPS + w) * TRACE_EVENTS; word i is event i, its tag in the top 8 bits and the
// low 56 bits of clock64 (or, for TRACE_SM, the SM's id) below. A warp with more events keeps
// the first TRACE_EVENTS; a zero word is no event. The tags are `runtime::trace::Tag`'s.
#pragma once
#include "common.cuh"

#ifndef EVOATTN_TRACE
#define EVOATTN_TRACE 0
#endif

enum TraceTag : u32 {
    TRACE_SM = 1,            // the warp's SM (value: %smid), first event of every warp
    TRACE_TILE = 2,          // consumer: the tile's Q has landed
    TRACE_KV_READY = 3,      // consumer: the key block's K (and the previous block's V) landed
    TRACE_TURN = 4,          // consumer: its ping-pong turn came
    TRACE_ISSUED = 5,        // consumer: its GEMMs are issued and the turn handed on
    TRACE_S_DONE = 6,        // consumer: S = Q·Kᵀ completed
    TRACE_SOFTMAX_DONE = 7,  // consumer: mask, row max, exponentials and row sums done
    TRACE_PV_DONE = 8,       // consumer: the previous block's P·V completed
    TRACE_PACKED = 9,        // consumer: O rescaled and P packed: the key block is done
    TRACE_EPILOGUE = 10,     // consumer: the tile's epilogue begins
    TRACE_EPILOGUE_DONE = 11,
    TRACE_PRODUCER_TILE = 12,  // producer: the tile's Q may load (the previous Q released)
    TRACE_PRODUCER_K = 13,     // producer: a K block issued (after its stage was released)
    TRACE_PRODUCER_V = 14,     // producer: a V block issued
};

#if EVOATTN_TRACE
#define TRACE_WARPS (THREADS / 32)
#define TRACE_VALUE_BITS 56
#define TRACE_VALUE_MASK ((1ull << TRACE_VALUE_BITS) - 1)
__device__ unsigned long long evoattn_trace[EVOATTN_TRACE_BLOCKS * TRACE_WARPS * EVOATTN_TRACE_EVENTS];

struct Trace {
    // This warp's first word in `evoattn_trace`, or NO_SLOT (not lane 0, or an untraced block):
    // an index, not a pointer, so the trace holds one register fewer across the kernel.
    static constexpr u32 NO_SLOT = 0xffffffffu;
    u32 slot;
    int n;
    __device__ __forceinline__ void init() {
        const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
        const bool traced = block < EVOATTN_TRACE_BLOCKS && threadIdx.x % 32 == 0;
        slot = traced ? (block * TRACE_WARPS + threadIdx.x / 32) * EVOATTN_TRACE_EVENTS : NO_SLOT;
        n = 0;
        u32 sm;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        put(TRACE_SM, sm);
    }
    __device__ __forceinline__ void put(u32 tag, unsigned long long value) {
        if (slot != NO_SLOT && n < EVOATTN_TRACE_EVENTS) evoattn_trace[slot + n] = ((unsigned long long)tag << TRACE_VALUE_BITS) | (value & TRACE_VALUE_MASK);
        ++n;
    }
    // The clock read is volatile with a memory clobber, so the compiler keeps it between the
    // waits and barriers around it (all volatile asm).
    __device__ __forceinline__ void mark(u32 tag) {
        unsigned long long t;
        asm volatile("mov.u64 %0, %%clock64;" : "=l"(t)::"memory");
        put(tag, t);
    }
    // As `mark`, after `after` is computed (the operand only orders the read after it).
    __device__ __forceinline__ void mark_after(u32 tag, float after) {
        unsigned long long t;
        asm volatile("mov.u64 %0, %%clock64; // after %1" : "=l"(t) : "f"(after) : "memory");
        put(tag, t);
    }
};
#else
struct Trace {
    __device__ __forceinline__ void init() {}
    __device__ __forceinline__ void mark(u32) {}
    __device__ __forceinline__ void mark_after(u32, float) {}
};
#endif
