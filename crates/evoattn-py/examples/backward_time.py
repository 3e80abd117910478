"""The backward pass against PyTorch's, same process, same inputs, interleaved: for each shape,
`torch.autograd.grad` of o through evoattn's op (its `mma-bwd` kernels) and through SDPA's
flash and cuDNN backends (each forward made under its backend, so its backward is that
backend's), each sample after an L2 flush, in alternating blocks so that clock drift hits all
sides. Prints one row per shape: medians (µs), TFLOP/s (backward = 2.5 forward FLOPs,
FlashAttention's count; causal halves them) and peer median / ours.

    python examples/backward_time.py [--reps 50] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import evoattn

FA3_TOKENS, FA3_WIDTH = 16 * 1024, 2048


def shapes(dims, lengths):
    for d in dims:
        for s in lengths:
            yield FA3_TOKENS // s, FA3_WIDTH // d, s, d


def flops(b, h, s, d, causal):
    forward = 4 * b * h * s * s * d / (2 if causal else 1)
    return 2.5 * forward


def timed(fn, flush, reps):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for _ in range(reps):
        flush.zero_()
        start.record()
        fn()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) * 1e3)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=50, help="samples per side and block")
    ap.add_argument("--blocks", type=int, default=4, help="alternating blocks per shape")
    ap.add_argument("--dims", default="64,128")
    ap.add_argument("--lengths", default="512,1024,2048,4096,8192")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    dims = [int(x) for x in args.dims.split(",")]
    lengths = [int(x) for x in args.lengths.split(",")]
    flush = torch.empty(2 * 60 * 2**20 // 4, dtype=torch.float32, device="cuda")
    rows = []
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, evoattn backward (bf16)")
    print(f"{'shape':>18} {'mask':>6} {'ours':>9} {'flash':>9} {'cudnn':>9} {'TF/s':>6} {'flash/ours':>10} {'cudnn/ours':>10}")
    for b, h, s, d in shapes(dims, lengths):
        for causal in (False, True):
            q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
            g = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
            sides = {}
            o = evoattn.attention(q, k, v, causal=causal)
            sides["ours"] = (o, "evoattn mma-bwd")
            for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
                try:
                    with sdpa_kernel(backend):
                        sides[name] = (F.scaled_dot_product_attention(q, k, v, is_causal=causal), backend.name)
                except RuntimeError as e:
                    print(f"  {name}: {str(e).splitlines()[0]}")
            samples = {name: [] for name in sides}
            for name, (o, _) in sides.items():  # warm-up, and the first call's compile
                for _ in range(3):
                    torch.autograd.grad(o, (q, k, v), g, retain_graph=True)
            for _ in range(args.blocks):
                for name, (o, _) in sides.items():
                    samples[name] += timed(lambda: torch.autograd.grad(o, (q, k, v), g, retain_graph=True), flush,
                                           args.reps)
            med = {name: statistics.median(x) for name, x in samples.items()}
            ratio = lambda n: f"{med[n] / med['ours']:.3f}" if n in med else "-"  # noqa: E731
            cell = lambda n: f"{med[n]:9.1f}" if n in med else f"{'-':>9}"  # noqa: E731
            tf = flops(b, h, s, d, causal) / (med["ours"] * 1e-6) / 1e12
            mask = "causal" if causal else "none"
            print(f"{f'{b},{h},{s},{d}':>18} {mask:>6} {cell('ours')} {cell('flash')} {cell('cudnn')} {tf:6.0f} "
                  f"{ratio('flash'):>10} {ratio('cudnn'):>10}")
            rows.append({"shape": [b, h, s, d], "causal": causal, "median_us": med, "samples_us": samples,
                         "tflops_ours": tf})
            del q, k, v, g, sides
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f)


if __name__ == "__main__":
    main()
