// A kernel that only waits: one thread spins on the global nanosecond timer. The timer enqueues
// it before a block of graph-mode samples so that the stream is held on the GPU while the host
// enqueues the samples, and no host gap enters a sample.
extern "C" __global__ void evoattn_hold(unsigned long long nanoseconds) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < nanoseconds);
}
