"""Host cost of one cached call from Python: evoattn.attention against
F.scaled_dot_product_attention (cuDNN backend, and PyTorch's own choice), same process, same
tensors, interleaved rounds.

The GPU stream is held busy by a sleep kernel while a batch of calls is enqueued, so each call's
wall time is the host's work alone (argument checks, output allocation, the launch), not a wait
for the GPU. The sides take turns batch by batch, in ABBA order (this host's speed drifts by tens
of percent within seconds, so only batches taken side by side compare); the ratio is the median
over rounds of evoattn's batch against cuDNN SDPA's batch of the same round. Prints one row per
shape with each side's median µs per call, the ratio and its 10th-90th percentile over rounds.

    python3 host_cost.py [--json out.json] [--shapes seed|B,H,S,D ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import evoattn

# docs/anchors.md's seed shapes (fp16, S = 512, D = 64), with and without the causal mask.
SEED = [(1, 8, 512, 64), (2, 8, 512, 64), (4, 8, 512, 64), (4, 16, 512, 64), (8, 16, 512, 64)]
BATCH = 100  # calls per timed batch, well under the launch queue's depth
ROUNDS = 40
# Sleep long enough that a batch of any side is enqueued before the GPU gets to it.
HOLD_CYCLES = 20_000_000


def batch_us(call) -> float:
    """µs per call over one batch enqueued behind a sleep kernel."""
    torch.cuda.synchronize()
    torch.cuda._sleep(HOLD_CYCLES)
    start = time.perf_counter()
    for _ in range(BATCH):
        call()
    return (time.perf_counter() - start) / BATCH * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", help="write every sample here")
    parser.add_argument("--shapes", nargs="*", default=["seed"])
    args = parser.parse_args()
    shapes = [s for spec in args.shapes for s in (SEED if spec == "seed" else [tuple(map(int, spec.split(",")))])]

    rows, record = [], []
    for b, h, s, d in shapes:
        for causal in (False, True):
            q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.float16) for _ in range(3))
            qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))  # the same problem in [B, S, H, D]
            sides = {
                "evoattn": lambda: evoattn.attention(q, k, v, causal=causal),
                "flash_attn_func": lambda: evoattn.flash_attn_func(qt, kt, vt, causal=causal),
                "sdpa-cudnn": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                "sdpa-auto": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
            }
            samples = {name: [] for name in sides}
            names = list(sides)
            with torch.no_grad():
                for name, call in sides.items():  # warm-up: compile, load, prepare, cuDNN plans
                    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION) if name == "sdpa-cudnn" else _null():
                        call()
                for r in range(ROUNDS):
                    for name in names if r % 2 == 0 else reversed(names):  # ABBA: drift hits every side alike
                        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION) if name == "sdpa-cudnn" else _null():
                            samples[name].append(batch_us(sides[name]))
            torch.cuda.synchronize()
            med = {name: statistics.median(x) for name, x in samples.items()}
            ratios = sorted(a / c for a, c in zip(samples["evoattn"], samples["sdpa-cudnn"]))
            spread = (ratios[len(ratios) // 10], statistics.median(ratios), ratios[len(ratios) * 9 // 10])
            rows.append(((b, h, s, d), causal, med, spread))
            record.append({"shape": [b, h, s, d], "causal": causal, "samples_us": samples})

    print(f"host cost of one cached call, µs (median of {ROUNDS} batches of {BATCH} per side, ABBA; GPU held busy)")
    print(f"{'shape':<16} {'causal':<6} {'evoattn':>8} {'fa_func':>8} {'cudnn':>8} {'sdpa':>8} {'ours/cudnn':>10} "
          f"{'p10-p90':>11}")
    for shape, causal, med, (lo, ratio, hi) in rows:
        print(f"{','.join(map(str, shape)):<16} {str(causal):<6} {med['evoattn']:8.2f} {med['flash_attn_func']:8.2f} "
              f"{med['sdpa-cudnn']:8.2f} {med['sdpa-auto']:8.2f} {ratio:10.3f} {lo:5.2f}-{hi:4.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": record}, f)
    return 0


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


if __name__ == "__main__":
    raise SystemExit(main())
