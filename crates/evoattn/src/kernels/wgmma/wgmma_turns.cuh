// Ping-pong turns of consumer warpgroups (pingpong=1): the `wgmma` kernel's consumers of one
// tile (wgmma_ws.cuh) and the `resident` kernel's consumers of their own tiles take turns at
// issuing GEMMs, so one warpgroup's softmax runs while the others' GEMMs keep the tensor cores
// busy.
#pragma once
#include "wgmma_mainloop.cuh"

// Named barriers 1..CONSUMERS stage each consumer's epilogue (wgmma_epilogue.cuh); the
// ping-pong turns use the next CONSUMERS, one per consumer.
#define PINGPONG_BARRIER (1 + CONSUMERS)
static_assert(PINGPONG_BARRIER + CONSUMERS <= 16, "a block has 16 named barriers");

// Ping-pong turns, round robin: consumer c waits for its turn (barrier PINGPONG_BARRIER + c)
// before issuing GEMMs and hands it to consumer c + 1 (mod CONSUMERS) after. Every consumer
// takes the same number of turns (`wgmma`'s share the tile, so its key blocks; `resident`'s pad
// theirs with empty turns). The last consumer
// opens, before its first turn, by handing the first turn to consumer 0; after the last turn,
// consumer 0 takes the turn the last consumer handed over last, so each barrier phase gets
// exactly its 256 threads and none is left open when the block exits.
struct Turns {
    int c;
    bool started;
    __device__ __forceinline__ void begin() {
#if EVOATTN_PINGPONG
        if (!started && c == CONSUMERS - 1) named_barrier_arrive(PINGPONG_BARRIER, 2 * WG_THREADS);
        started = true;
        named_barrier_sync(PINGPONG_BARRIER + c, 2 * WG_THREADS);
#endif
    }
    __device__ __forceinline__ void end() const {
#if EVOATTN_PINGPONG
        named_barrier_arrive(PINGPONG_BARRIER + (c + 1) % CONSUMERS, 2 * WG_THREADS);
#endif
    }
    __device__ __forceinline__ void close() const {
#if EVOATTN_PINGPONG
        if (started && c == 0) named_barrier_sync(PINGPONG_BARRIER, 2 * WG_THREADS);
#endif
    }
};
