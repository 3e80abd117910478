"""`evoattn run` on the GPU against PyTorch: writes random q, k, v with safetensors, runs
`evoattn run`, and compares its `o` with float32 SDPA on the same inputs. Covers both layouts,
GQA, both causal alignments. Prints one line per case and exits 1 on any mismatch.

usage: python3 scripts/run_roundtrip.py path/to/evoattn
"""
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch.nn.attention.bias import causal_lower_right

# (B, H, Hkv, Sq, Sk, D, dtype, causal, layout); tolerance per dtype as evoattn check uses
# (4 unit roundoffs relative to max(1, |ref|max)).
CASES = [
    (2, 8, 2, 300, 517, 128, torch.bfloat16, "none", "bhsd"),
    (1, 4, 4, 1000, 1000, 64, torch.float16, "top-left", "bshd"),
    (1, 8, 1, 77, 1023, 256, torch.bfloat16, "bottom-right", "bshd"),
]
UNIT_ROUNDOFF = {torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}

binary = sys.argv[1]
failed = 0
torch.manual_seed(0)
for b, h, hkv, sq, sk, d, dtype, causal, layout in CASES:
    q = torch.randn(b, h, sq, d, device="cuda", dtype=dtype)
    k = torch.randn(b, hkv, sk, d, device="cuda", dtype=dtype)
    v = torch.randn(b, hkv, sk, d, device="cuda", dtype=dtype)
    to_file = (lambda t: t.transpose(1, 2).contiguous()) if layout == "bshd" else (lambda t: t.contiguous())
    with tempfile.TemporaryDirectory() as tmp:
        save_file({"q": to_file(q).cpu(), "k": to_file(k).cpu(), "v": to_file(v).cpu()}, f"{tmp}/in.safetensors")
        cmd = [binary, "run", "--input", f"{tmp}/in.safetensors", "--output", f"{tmp}/out.safetensors", "--layout", layout]
        if causal != "none":
            cmd += ["--causal", causal]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"FAIL {b},{h},{sq},{d},{hkv},{sk} {causal} {layout}: exit {proc.returncode}: {proc.stderr.strip()}")
            failed += 1
            continue
        o = load_file(f"{tmp}/out.safetensors")["o"].cuda()
    if layout == "bshd":
        o = o.transpose(1, 2)
    kr = k.float().repeat_interleave(h // hkv, dim=1)
    vr = v.float().repeat_interleave(h // hkv, dim=1)
    if causal == "top-left":
        ref = F.scaled_dot_product_attention(q.float(), kr, vr, is_causal=True)
    elif causal == "bottom-right":
        ref = F.scaled_dot_product_attention(q.float(), kr, vr, attn_mask=causal_lower_right(sq, sk))
    else:
        ref = F.scaled_dot_product_attention(q.float(), kr, vr)
    # Rows that see no key: SDPA gives NaN, evoattn 0 (documented convention).
    ref = torch.nan_to_num(ref, nan=0.0)
    err = (o.float() - ref).abs().max().item()
    bound = 4 * UNIT_ROUNDOFF[dtype] * max(1.0, ref.abs().max().item())
    ok = err <= bound and o.dtype == dtype
    failed += not ok
    print(f"{'PASS' if ok else 'FAIL'} run {b},{h},{sq},{d},{hkv},{sk} {str(dtype)[6:]} {causal} {layout}: max_abs {err:.2e} (bound {bound:.2e})")
sys.exit(1 if failed else 0)
