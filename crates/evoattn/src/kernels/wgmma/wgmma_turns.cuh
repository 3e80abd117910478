// Ping-pong turns of consumer warpgroups (pingpong=1): the `wgmma` kernel's consumers of one
// tile (wgmma_ws.cuh) and the `resident` kernel's consumers of their own tiles take turns at
// issuing GEMMs, so one warpgroup's softmax runs while the others' GEMMs keep the tensor cores
// busy.
#pragma once
#include "wgmma_mainloop.cuh"

// Named barriers 1..CONSUMERS stage each consumer's epilogue (wgmma_epilogue.cuh); the
// ping-pong turns use the next CONSUMERS, one per consumer; softmax_turns=1's softmax turns the
// CONSUMERS after those.
#define PINGPONG_BARRIER (1 + CONSUMERS)
static_assert(PINGPONG_BARRIER + CONSUMERS <= 16, "a block has 16 named barriers");
#ifndef EVOATTN_SOFTMAX_TURNS
#define EVOATTN_SOFTMAX_TURNS 0
#endif
#define SOFTMAX_BARRIER (PINGPONG_BARRIER + CONSUMERS)
static_assert(!EVOATTN_SOFTMAX_TURNS || (EVOATTN_PINGPONG && SOFTMAX_BARRIER + CONSUMERS <= 16),
              "softmax turns follow the ping-pong turns' barriers");

// Ping-pong turns, round robin: consumer c waits for its turn (barrier PINGPONG_BARRIER + c)
// before issuing GEMMs and hands it to consumer c + 1 (mod CONSUMERS) after. Every consumer
// takes the same number of turns (`wgmma`'s share the tile, so its key blocks; `resident`'s pad
// theirs with empty turns). The last consumer
// opens, before its first turn, by handing the first turn to consumer 0; after the last turn,
// consumer 0 takes the turn the last consumer handed over last, so each barrier phase gets
// exactly its 256 threads and none is left open when the block exits.
//
// softmax_turns=1: the same protocol on the softmax barriers around each softmax, so that no
// two consumers' softmaxes share an SMSP's MUFU (the GEMM turns alone let the next consumer's
// S land inside the last one's softmax). Every consumer runs one softmax per key block of the
// tile they share, so every consumer takes the same number of these turns too.
struct Turns {
    int c;
    bool started;
#if EVOATTN_SOFTMAX_TURNS
    bool softmax_started;
#endif
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
    __device__ __forceinline__ void softmax_begin() {
#if EVOATTN_SOFTMAX_TURNS
        if (!softmax_started && c == CONSUMERS - 1) named_barrier_arrive(SOFTMAX_BARRIER, 2 * WG_THREADS);
        softmax_started = true;
        named_barrier_sync(SOFTMAX_BARRIER + c, 2 * WG_THREADS);
#endif
    }
    __device__ __forceinline__ void softmax_end() const {
#if EVOATTN_SOFTMAX_TURNS
        named_barrier_arrive(SOFTMAX_BARRIER + (c + 1) % CONSUMERS, 2 * WG_THREADS);
#endif
    }
    __device__ __forceinline__ void close() const {
#if EVOATTN_PINGPONG
        if (started && c == 0) named_barrier_sync(PINGPONG_BARRIER, 2 * WG_THREADS);
#endif
#if EVOATTN_SOFTMAX_TURNS
        if (softmax_started && c == 0) named_barrier_sync(SOFTMAX_BARRIER, 2 * WG_THREADS);
#endif
    }
};
