#!/usr/bin/env python3
# cudnn-fp8-sdpa.py - time cuDNN's FP8 (E4M3) SDPA forward (cudnn-frontend 1.32 Python API,
# `graph.sdpa_fp8`) with PyTorch tensors, and check it against fp32 attention.
#
# Measures, per --shape B,H,S,D (BHSD, S_q == S_kv, D_qk == D_v, attn scale 1/sqrt(D)):
#   Q,K,V = randn bf16 -> E4M3 with one per-tensor scale each (descale = amax/448);
#   median GPU time of graph.execute over --reps samples (CUDA events, 5 warmups, a 2xL2
#   buffer zeroed before each sample); TFLOP/s with FLOPs = 4*B*H*S*S*D (halved if causal);
#   max_abs and rel_l2 of O against fp32 softmax(QK^T/sqrt(D))V on the dequantized inputs.
# O is bf16 where cuDNN accepts it (Blackwell, cuDNN >= 9.13). On Hopper the frontend rejects
# bf16/fp16 O for sdpa_fp8, so O falls back to E4M3 with scale_o = 256/amax(reference O); the
# error columns then include O's own E4M3 rounding (~2-3% rel_l2).
# P (softmax numerator, in [0,1]) scale: 32 (descale 1/32), the convention of cudnn-frontend's
# test/python/sdpa/fp8.py (amax 1 -> 128/1 * 0.25); --s-scale overrides it.
# Output: GPU name, an info line (#), then `B,H,S,D causal median_us tflops max_abs rel_l2`.
# Exit 2 (with one line saying why) if `import cudnn` fails or a graph is unsupported.
#
# On the device:
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
#     --target /tmp/site .whl/*.whl && \
#   PYTHONPATH=/tmp/site python3 scripts/probes/cudnn-fp8-sdpa.py --shape 4,16,4096,128
# (session 30 also put torch's nvidia/cudnn/lib first on LD_LIBRARY_PATH: cuDNN 9.19 was used;
# record bench/results/2026-11-26-s30-h200-cudnn-fp8-probe.txt)
import argparse, math, statistics, sys

ap = argparse.ArgumentParser()
ap.add_argument("--shape", action="append", required=True, help="B,H,S,D (repeatable)")
ap.add_argument("--causal", action="store_true")
ap.add_argument("--reps", type=int, default=30)
ap.add_argument("--s-scale", type=float, default=32.0, help="scale_s for P (descale_s = 1/it)")
args = ap.parse_args()

try:
    import torch
    import cudnn
except Exception as e:  # noqa: BLE001
    print(f"UNAVAILABLE: import failed: {type(e).__name__}: {e}".replace("\n", " ")[:400])
    sys.exit(2)

FP8_MAX = 448.0
dev = torch.device("cuda")
torch.backends.cuda.matmul.allow_tf32 = False
print(torch.cuda.get_device_name(0))
print(f"# cudnn-frontend {cudnn.__version__}, cuDNN backend {cudnn.backend_version_string()}, "
      f"torch {torch.__version__}, scale_s {args.s_scale:g}")
handle = cudnn.create_handle()
cudnn.set_stream(handle, torch.cuda.current_stream().cuda_stream)


def quant(x):  # bf16 -> (E4M3, fp32 descale [1,1,1,1])
    descale = x.float().abs().max().clamp(min=1e-12) / FP8_MAX
    q = (x.float() / descale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q, descale.reshape(1, 1, 1, 1).contiguous()


def reference(q, k, v, causal):  # fp32 attention, chunked over B*H to bound the S x S memory
    B, H, S, D = q.shape
    q, k, v = (t.reshape(B * H, S, D) for t in (q, k, v))
    out, step = torch.empty_like(q), max(1, (1 << 28) // (S * S))
    mask = torch.ones(S, S, dtype=torch.bool, device=dev).triu(1) if causal else None
    for i in range(0, B * H, step):
        s = torch.bmm(q[i:i + step], k[i:i + step].transpose(1, 2)) / math.sqrt(D)
        if mask is not None:
            s.masked_fill_(mask, float("-inf"))
        out[i:i + step] = torch.bmm(torch.softmax(s, dim=-1), v[i:i + step])
    return out.reshape(B, H, S, D)


def build(t, causal, o_dtype):  # t: dict of torch tensors; returns (graph, cudnn tensors)
    g = cudnn.pygraph(io_data_type=cudnn.data_type.FP8_E4M3, intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT, handle=handle)
    ct = {n: g.tensor(dim=list(x.shape), stride=list(x.stride()), name=n,
                      data_type=cudnn.data_type.FP8_E4M3 if x.dtype == torch.float8_e4m3fn else cudnn.data_type.FLOAT)
          for n, x in t.items() if n not in ("o", "amax_s", "amax_o")}
    mask = dict(diagonal_alignment=cudnn.diagonal_alignment.TOP_LEFT, right_bound=0) if causal else {}
    o, _stats, amax_s, amax_o = g.sdpa_fp8(
        ct["q"], ct["k"], ct["v"], ct["descale_q"], ct["descale_k"], ct["descale_v"],
        ct["descale_s"], ct["scale_s"], ct["scale_o"],
        generate_stats=False, attn_scale=1.0 / math.sqrt(t["q"].shape[-1]), name="sdpa_fp8", **mask)
    o.set_output(True).set_dim(list(t["o"].shape)).set_stride(list(t["o"].stride())).set_data_type(o_dtype)
    for a in (amax_s, amax_o):
        a.set_output(True).set_dim([1, 1, 1, 1]).set_stride([1, 1, 1, 1]).set_data_type(cudnn.data_type.FLOAT)
    ct.update(o=o, amax_s=amax_s, amax_o=amax_o)
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    g.check_support()
    g.build_plans()
    return g, ct


def one_line(e):
    return f"{type(e).__name__}: {e}".replace("\n", " ")[:400]


rc = 0
flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8, device=dev)
for spec in args.shape:
    B, H, S, D = (int(x) for x in spec.split(","))
    tag = f"{B},{H},{S},{D} {int(args.causal)}"
    torch.manual_seed(0)
    (q, dq), (k, dk), (v, dv) = (quant(torch.randn(B, H, S, D, dtype=torch.bfloat16, device=dev)) for _ in range(3))
    want = reference(q.float() * dq, k.float() * dk, v.float() * dv, args.causal)
    one = lambda x: torch.full((1, 1, 1, 1), x, dtype=torch.float32, device=dev)  # noqa: E731
    t = dict(q=q, k=k, v=v, descale_q=dq, descale_k=dk, descale_v=dv,
             descale_s=one(1.0 / args.s_scale), scale_s=one(args.s_scale),
             amax_s=one(float("nan")), amax_o=one(float("nan")))
    g, errors = None, []
    # bf16 O first (scale_o 1.0, unused for a bf16 O); E4M3 O with a real scale_o if that is rejected.
    for o_dtype, scale_o in ((torch.bfloat16, 1.0), (torch.float8_e4m3fn, 256.0 / want.abs().max().item())):
        t.update(scale_o=one(scale_o), o=torch.empty(B, H, S, D, dtype=o_dtype, device=dev))
        cdt = cudnn.data_type.BFLOAT16 if o_dtype == torch.bfloat16 else cudnn.data_type.FP8_E4M3
        try:
            g, ct = build(t, args.causal, cdt)
            pack = {ct[n]: x for n, x in t.items()}
            ws = torch.empty(max(1, g.get_workspace_size()), dtype=torch.uint8, device=dev)
            run = lambda: g.execute(pack, ws, handle=handle)  # noqa: E731
            run()
            torch.cuda.synchronize()
            break
        except Exception as e:  # noqa: BLE001 - any rejection: try the next O type, then report
            g = None
            errors.append(f"O={str(o_dtype).split('.')[-1]}: {one_line(e)}")
    if g is None:
        print(f"{tag} UNSUPPORTED: {' | '.join(errors)}"[:800])
        rc = 2
        continue
    got = t["o"].float() / scale_o
    floor = 0.0 if t["o"].dtype == torch.bfloat16 else \
        ((want * scale_o).to(torch.float8_e4m3fn).float() / scale_o - want).norm().item() / want.norm().item()
    err = got - want
    max_abs = err.abs().max().item()
    rel_l2 = (err.norm() / want.norm()).item()
    del want, err, got
    for _ in range(5):
        run()
    times = []
    for _ in range(args.reps):
        flush.zero_()
        torch.cuda._sleep(1_000_000)  # ~0.5 ms of GPU lead so the host-side execute() cost is not timed
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        run()
        e1.record()
        times.append((e0, e1))
    torch.cuda.synchronize()
    med_us = statistics.median(a.elapsed_time(b) for a, b in times) * 1e3
    flops = 4.0 * B * H * S * S * D / (2 if args.causal else 1)
    o_name = "bf16" if t["o"].dtype == torch.bfloat16 else "e4m3"
    print(f"# {tag}: O {o_name}, scale_o {scale_o:g}, amax_s {t['amax_s'].item():.4g}, amax_o {t['amax_o'].item():.4g}, "
          f"rel_l2 of O's own rounding {floor:.2e}"
          + (f", rejected: {errors[0]}"[:300] if errors else ""))
    print(f"{tag} {med_us:.1f} {flops / med_us / 1e6:.1f} {max_abs:.3e} {rel_l2:.3e}")
    del g, pack, ws, t, q, k, v
    torch.cuda.empty_cache()
sys.exit(rc)
