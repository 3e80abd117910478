"""Session 29 (#35): how much of a short attention's time is the harness's L2 flush leaving dirty
lines behind. Times cuDNN's and FA2's SDPA (PyTorch) on seed shapes after three flushes: a zero
fill of 2x L2 (what `evoattn bench` does: L2 left full of dirty lines, each of which a kernel's
loads may first write back), the same fill followed by a read of another 2x L2 buffer (L2 left
clean, nothing of the inputs in it), and none (inputs warm in L2). Events around the call alone;
medians of 200 samples. Usage: python3 l2-dirty-flush.py"""
import statistics

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

L2 = torch.cuda.get_device_properties(0).L2_cache_size
dirty = torch.empty(2 * L2, dtype=torch.uint8, device="cuda")
clean = torch.ones(2 * L2 // 4, dtype=torch.float32, device="cuda")
sink = torch.empty(1, device="cuda")  # the read's one float


def flush(mode):
    if mode in ("dirty", "clean"):
        dirty.zero_()
    if mode == "clean":
        torch.sum(clean, dim=0, out=sink[0])


def time_us(fn, mode, samples=200):
    for _ in range(10):
        fn()
    out = []
    for _ in range(samples):
        flush(mode)
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) * 1e3)
    return statistics.median(out)


print(f"{torch.cuda.get_device_name(0)}, L2 {L2 >> 20} MiB, torch {torch.__version__}")
print(f"{'shape':<16}{'backend':<8}{'dirty':>8}{'clean':>8}{'none':>8}  (us)")
for b, h, s, d in [(1, 1, 64, 64), (1, 8, 512, 64), (4, 8, 512, 64), (4, 16, 512, 64), (8, 16, 512, 64)]:
    q, k, v = (torch.randn(b, h, s, d, dtype=torch.float16, device="cuda") for _ in range(3))
    for name, backend in [("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)]:
        with sdpa_kernel(backend):
            fn = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v)  # noqa: E731
            row = [time_us(fn, m) for m in ("dirty", "clean", "none")]
        print(f"{f'{b},{h},{s},{d}':<16}{name:<8}" + "".join(f"{t:8.2f}" for t in row))
