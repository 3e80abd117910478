"""Times PyTorch SDPA backends the way `evoattn bench` times ours: CUDA events around each
launch, a buffer twice the L2 size overwritten before each sample, median of N samples.
Until the oracle (python/) lands this gives the same-run peer figures for docs/perf-log.md.

usage: python3 scripts/sdpa_time.py B H S D dtype causal(0|1) [samples]
"""
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

b, h, s, d = (int(x) for x in sys.argv[1:5])
dtype = {"f16": torch.float16, "bf16": torch.bfloat16}[sys.argv[5]]
causal = sys.argv[6] == "1"
samples = int(sys.argv[7]) if len(sys.argv) > 7 else 100
torch.manual_seed(0)
q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=dtype) for _ in range(3))
l2 = torch.cuda.get_device_properties(0).L2_cache_size
flush = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")
flops = 4 * b * h * s * s * d / (2 if causal else 1)
for name, backend in [("sdpa-cudnn", SDPBackend.CUDNN_ATTENTION), ("sdpa-flash", SDPBackend.FLASH_ATTENTION)]:
    try:
        with sdpa_kernel([backend]):
            for _ in range(10):
                F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            times = []
            for _ in range(samples):
                flush.zero_()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                end.record()
                times.append((start, end))
            torch.cuda.synchronize()
            us = sorted(s.elapsed_time(e) * 1e3 for s, e in times)
            med = statistics.median(us)
            print(f"{name:<12} {b},{h},{s},{d} {sys.argv[5]} causal={int(causal)} median_us {med:10.2f} "
                  f"p10 {us[len(us) // 10]:10.2f} p90 {us[9 * len(us) // 10]:10.2f} TFLOP/s {flops / med / 1e6:8.1f}")
    except RuntimeError as e:
        print(f"{name:<12} refused: {str(e).splitlines()[0]}")
