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

// Turns, round robin, on CONSUMERS named barriers from BASE (nothing when not ON): consumer c
// waits for its turn (barrier BASE + c) and hands it to consumer c + 1 (mod CONSUMERS) after.
// Every consumer takes the same number of turns. The last consumer opens, before its first
// turn, by handing the first turn to consumer 0; after the last turn, consumer 0 takes the turn
// the last consumer handed over last, so each barrier phase gets exactly its 256 threads and
// none is left open when the block exits.
template <int BASE, bool ON>
struct RoundRobin {
    int c;
    bool started;
    __device__ __forceinline__ void begin() {
        if (!ON) return;
        if (!started && c == CONSUMERS - 1) named_barrier_arrive(BASE, 2 * WG_THREADS);
        started = true;
        named_barrier_sync(BASE + c, 2 * WG_THREADS);
    }
    __device__ __forceinline__ void end() const {
        if (ON) named_barrier_arrive(BASE + (c + 1) % CONSUMERS, 2 * WG_THREADS);
    }
    __device__ __forceinline__ void close() const {
        if (ON && started && c == 0) named_barrier_sync(BASE, 2 * WG_THREADS);
    }
};

// The consumers' turns: at issuing GEMMs (pingpong=1; `wgmma`'s consumers of one tile share its
// key blocks, so their turns; `resident`'s pad theirs with empty turns), and with
// softmax_turns=1 at their softmax, so that no two consumers' softmaxes share an SMSP's MUFU
// (the GEMM turns alone let the next consumer's S land inside the last one's softmax). Every
// consumer runs one softmax per key block of the tile they share.
struct Turns {
    RoundRobin<PINGPONG_BARRIER, EVOATTN_PINGPONG> gemm;
    RoundRobin<SOFTMAX_BARRIER, EVOATTN_SOFTMAX_TURNS> softmax;
    __device__ explicit Turns(int c) : gemm{c, false}, softmax{c, false} {}
    __device__ __forceinline__ void close() const {
        gemm.close();
        softmax.close();
    }
};
