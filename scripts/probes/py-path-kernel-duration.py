"""Is the Python path's extra time on a long row inside the kernel or around it? Times eager
calls of evoattn.attention as the oracle does (L2 flush, events around each call) and reads the
same calls' kernel durations from the profiler (CUPTI), on the legacy default stream and on a
stream of its own."""

import statistics
import sys

import torch
from torch.profiler import ProfilerActivity, profile

import evoattn

b, h, s, d = map(int, (sys.argv[1] if len(sys.argv) > 1 else "2,16,8192,128").split(","))
q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8, device="cuda")
for where in ("default", "side"):
    stream = torch.cuda.Stream() if where == "side" else torch.cuda.default_stream()
    with torch.cuda.stream(stream):
        for _ in range(5):
            evoattn.attention(q, k, v)
        torch.cuda.synchronize()
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(30)]
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for start, end in events:
                flush.zero_()
                start.record()
                evoattn.attention(q, k, v)
                end.record()
            torch.cuda.synchronize()
    timed = statistics.median(a.elapsed_time(e) * 1e3 for a, e in events)
    kernels = [e.device_time for e in prof.events() if e.name.startswith("evoattn_")]
    print(f"{b},{h},{s},{d} {where:>7} stream: events median {timed:8.1f} us; kernel (CUPTI) median "
          f"{statistics.median(kernels):8.1f} us over {len(kernels)} launches")
