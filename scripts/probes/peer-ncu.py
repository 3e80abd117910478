"""A peer's attention call, repeated, for Nsight Compute to profile one warm launch of it.

usage: ncu --clock-control none --metrics ... -k regex:'sdpa|fmha|flash|Flash' --launch-skip 4 -c 1 \
           python3 scripts/probes/peer-ncu.py PEER B,H,S,D [causal]
PEER: sdpa-cudnn (PyTorch SDPA on cuDNN) or fa4 (flash_attn.cute). Random bf16 inputs, standard
normal, as `evoattn bench` draws them; 6 calls, so launch 5 is warm.
"""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

CALLS = 6


def main() -> None:
    peer, shape = sys.argv[1], sys.argv[2]
    causal = len(sys.argv) > 3 and sys.argv[3] == "causal"
    b, h, s, d = (int(x) for x in shape.split(","))
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    if peer == "sdpa-cudnn":
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            for _ in range(CALLS):
                F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    elif peer == "fa4":
        import flash_attn.cute as fa4

        q, k, v = (t.transpose(1, 2).contiguous() for t in (q, k, v))  # FA4 takes (B, S, H, D)
        for _ in range(CALLS):
            fa4.flash_attn_func(q, k, v, causal=causal)
    else:
        sys.exit(f"unknown peer {peer}: sdpa-cudnn or fa4")
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
