"""The package on a GPU, as PyTorch programs use it: correctness against float64 through both
calls (layouts, views, GQA, LSE, both causal alignments, odd lengths), streams and threads at
once on one problem, CUDA-graph capture and replay, torch.compile(fullgraph=True), gradients (against float64
and PyTorch's own 16-bit error, eager and compiled), bad inputs, and the bounds on what a long decoding loop keeps. Every test skips with a
printed reason where PyTorch or a GPU is missing."""

from __future__ import annotations

import math
import os
import threading

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU is visible to PyTorch", allow_module_level=True)

import evoattn  # noqa: E402

DEV = torch.device("cuda")
HOPPER = torch.cuda.get_device_capability() >= (9, 0)


def reference(q, k, v, causal, scale=None):
    """o and lse in float64 from [B, H, Sq, D] / [B, Hkv, Sk, D] tensors; rows that see no key
    get o = 0 and lse = -inf (the library's definition)."""
    b, h, sq, d = q.shape
    hkv, sk = k.shape[1], k.shape[2]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    q64, k64, v64 = (t.double() for t in (q, k, v))
    k64 = k64.repeat_interleave(h // hkv, dim=1)
    v64 = v64.repeat_interleave(h // hkv, dim=1)
    s = (q64 @ k64.transpose(-1, -2)) * scale
    if causal != "none":
        offset = 0 if causal == "top-left" else sk - sq
        i = torch.arange(sq, device=q.device)[:, None]
        j = torch.arange(sk, device=q.device)[None, :]
        s = s.masked_fill(j > i + offset, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - lse[..., None].clamp_min(-1e300))
    p = torch.nan_to_num(p, nan=0.0)
    o = p @ v64
    return o, lse


def tolerance(dtype):
    # Each output element is a convex combination of V's values, rounded once to the dtype: a
    # few units in the last place of |V| <= ~4 (normal inputs), the P·V product accumulated in
    # float32 from P rounded to the dtype (the FlashAttention convention).
    return {torch.float16: 4e-3, torch.bfloat16: 3e-2}[dtype]


def randn(*shape, dtype):
    return torch.randn(*shape, device=DEV, dtype=dtype)


def assert_close(o, lse, ref_o, ref_lse, dtype, what):
    err = (o.double() - ref_o).abs().max().item() if o.numel() else 0.0
    assert err <= tolerance(dtype), f"{what}: max |o - ref| = {err:.3g}"
    if lse is not None:
        finite = torch.isfinite(ref_lse)
        assert torch.equal(torch.isfinite(lse), finite), f"{what}: lse -inf rows differ"
        if finite.any():
            lerr = (lse.double() - ref_lse)[finite].abs().max().item()
            assert lerr <= 1e-3, f"{what}: max |lse - ref| = {lerr:.3g}"


# EVOATTN_TEST_HEAD_DIMS=64 narrows the grid (the sanitizer run takes one head dim).
HEAD_DIMS = [int(d) for d in os.environ.get("EVOATTN_TEST_HEAD_DIMS", "64,128,256" if HOPPER else "64,128").split(",")]
SHAPES = [
    # (B, H, Hkv, Sq, Sk)
    (1, 4, 4, 1, 1),
    (2, 4, 2, 17, 17),
    (1, 8, 2, 113, 1000),
    (2, 4, 1, 1000, 113),
    (1, 2, 2, 1023, 1023),
    (1, 8, 8, 1, 4097),
]


@pytest.mark.parametrize("d", HEAD_DIMS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", ["none", "top-left", "bottom-right"])
def test_attention_matches_float64_on_views_gqa_and_odd_lengths(d, dtype, causal):
    for b, h, hkv, sq, sk in SHAPES:
        # q as SDPA sees a [B, S, H, D] projection: a transposed view, not a copy.
        q = randn(b, sq, h, d, dtype=dtype).transpose(1, 2)
        k, v = randn(b, hkv, sk, d, dtype=dtype), randn(b, hkv, sk, d, dtype=dtype)
        o, lse = evoattn.attention(q, k, v, causal=causal, return_lse=True)
        assert o.shape == q.shape and o.dtype == dtype and lse.shape == (b, h, sq) and lse.dtype == torch.float32
        ref_o, ref_lse = reference(q, k, v, causal)
        assert_close(o, lse, ref_o, ref_lse, dtype, f"{(b, h, hkv, sq, sk, d)} {dtype} {causal}")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_flash_attn_func_is_flash_attentions_layout_and_mask(dtype):
    for b, h, hkv, sq, sk in SHAPES:
        q = randn(b, sq, h, 128, dtype=dtype)
        k, v = randn(b, sk, hkv, 128, dtype=dtype), randn(b, sk, hkv, 128, dtype=dtype)
        for causal in (False, True):
            o, lse = evoattn.flash_attn_func(q, k, v, causal=causal, return_lse=True)
            assert o.shape == q.shape
            mask = "bottom-right" if causal else "none"
            ref_o, ref_lse = reference(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), mask)
            assert_close(o.transpose(1, 2), lse, ref_o, ref_lse, dtype, f"flash_attn_func {(b, h, sq, sk)} {causal}")


def test_attentions_causal_true_is_sdpas_top_left():
    q, k, v = randn(1, 4, 64, 64, dtype=torch.float16), randn(1, 4, 256, 64, dtype=torch.float16), randn(
        1, 4, 256, 64, dtype=torch.float16)
    ours = evoattn.attention(q, k, v, causal=True)
    sdpa = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert (ours.float() - sdpa.float()).abs().max().item() < 2e-3


def test_scale_and_out_are_honoured():
    q, k, v = (randn(2, 4, 100, 64, dtype=torch.bfloat16) for _ in range(3))
    out = torch.empty_like(q)
    o = evoattn.attention(q, k, v, scale=0.3, out=out)
    assert o is out
    assert_close(o, None, reference(q, k, v, "none", 0.3)[0], None, torch.bfloat16, "scale=0.3, out=")


def test_two_streams_run_one_problem_at_once():
    # Shapes whose planned kernels keep scratch between launches (split-KV partials and tile
    # counters; the persistent schedulers' counters): before scratch was per stream, the same
    # signature on two streams shared it.
    shapes = [(1, 32, 4, 1, 16384, 128), (2, 16, 16, 2048, 2048, 128)]
    for b, h, hkv, sq, sk, d in shapes:
        for causal in ("none", "bottom-right"):
            streams = [torch.cuda.Stream() for _ in range(2)]
            inputs = [[randn(b, hh, s, d, dtype=torch.bfloat16) for hh, s in ((h, sq), (hkv, sk), (hkv, sk))]
                      for _ in range(2)]
            torch.cuda.synchronize()
            outs = [[], []]
            for _ in range(20):
                for i, stream in enumerate(streams):
                    with torch.cuda.stream(stream):
                        outs[i].append(evoattn.attention(*inputs[i], causal=causal))
            torch.cuda.synchronize()
            for i in range(2):
                ref = reference(*inputs[i], causal)[0]
                for o in outs[i]:
                    assert_close(o, None, ref, None, torch.bfloat16, f"stream {i} {(b, h, sq, sk)} {causal}")


def test_the_library_paths_run_one_problem_on_two_streams_at_once():
    # #38's concurrency rule: each stream has its own cuBLASLt handle, and S and the workspace
    # come from its own scratch arena, so two streams never share a score matrix.
    b, h, hkv, sq, sk, d = 2, 8, 2, 1024, 1024, 128
    for impl in ("cublas", "hybrid-qk", "hybrid-pv"):
        streams = [torch.cuda.Stream() for _ in range(2)]
        inputs = [[randn(b, hh, s, d, dtype=torch.bfloat16) for hh, s in ((h, sq), (hkv, sk), (hkv, sk))]
                  for _ in range(2)]
        try:
            evoattn.attention(*inputs[0], impl=impl)
        except evoattn.UnavailableError as e:
            pytest.skip(f"{impl} cannot run here: {e}")
        torch.cuda.synchronize()
        outs = [[], []]
        for _ in range(10):
            for i, stream in enumerate(streams):
                with torch.cuda.stream(stream):
                    outs[i].append(evoattn.attention(*inputs[i], causal="bottom-right", impl=impl))
        torch.cuda.synchronize()
        for i in range(2):
            ref = reference(*inputs[i], "bottom-right")[0]
            for o in outs[i]:
                assert_close(o, None, ref, None, torch.bfloat16, f"{impl} stream {i}")


def test_eight_threads_share_the_library():
    errors = []
    b, h, hkv, sq, sk, d = 1, 32, 8, 1, 8192, 128
    barrier = threading.Barrier(8)

    def worker(seed):
        try:
            gen = torch.Generator(device=DEV).manual_seed(seed)
            q, k, v = (torch.randn(b, hh, s, d, device=DEV, dtype=torch.float16, generator=gen)
                       for hh, s in ((h, sq), (hkv, sk), (hkv, sk)))
            stream = torch.cuda.Stream()
            barrier.wait()
            with torch.cuda.stream(stream):
                outs = [evoattn.attention(q, k, v, causal="bottom-right") for _ in range(25)]
            stream.synchronize()
            ref = reference(q, k, v, "bottom-right")[0]
            for o in outs:
                assert_close(o, None, ref, None, torch.float16, f"thread {seed}")
        except BaseException as e:  # reported below, with the thread's seed
            errors.append(f"{seed}: {e!r}")

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_cuda_graph_capture_and_replay():
    for b, h, hkv, sq, sk, d in [(2, 8, 8, 512, 512, 64), (1, 32, 4, 1, 16384, 128), (2, 16, 16, 2048, 2048, 128)]:
        q, k, v = (randn(b, hh, s, d, dtype=torch.bfloat16) for hh, s in ((h, sq), (hkv, sk), (hkv, sk)))
        evoattn.attention(q, k, v, causal="bottom-right")  # the first call compiles and prepares
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            o = evoattn.attention(q, k, v, causal="bottom-right")
        for _ in range(3):
            for t in (q, k, v):
                t.copy_(torch.randn_like(t))
            graph.replay()
            # An eager call of the same problem on another stream while the graph may still run:
            # the graph owns its scratch, so neither sees the other's.
            side = torch.cuda.Stream()
            with torch.cuda.stream(side):
                eager = evoattn.attention(q, k, v, causal="bottom-right")
            torch.cuda.synchronize()
            ref = reference(q, k, v, "bottom-right")[0]
            assert_close(o, None, ref, None, torch.bfloat16, f"graph replay {(b, h, sq, sk)}")
            assert_close(eager, None, ref, None, torch.bfloat16, f"eager beside a graph {(b, h, sq, sk)}")


def test_a_first_call_inside_a_capture_says_to_call_once_before():
    q = randn(1, 2, 40, 64, dtype=torch.float16)
    graph = torch.cuda.CUDAGraph()
    # head dim 64 with a config nothing else here uses: its kernel is not loaded yet
    with pytest.raises(ValueError, match="call it once with the same shape before capturing"):
        with torch.cuda.graph(graph):
            evoattn.attention(q, q, q, impl="mma", config="block_n=32,stages=1")


def test_torch_compile_fullgraph():
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(512, 3 * 512, device=DEV, dtype=torch.bfloat16)

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = self.proj(x).view(b, s, 3, 8, 64).unbind(2)
            o = evoattn.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True)
            f = evoattn.flash_attn_func(q, k, v, causal=True)
            return o.transpose(1, 2).reshape(b, s, 512) + f.reshape(b, s, 512)

    torch._dynamo.reset()
    block = Block()
    x = torch.randn(2, 256, 512, device=DEV, dtype=torch.bfloat16)
    with torch.no_grad():
        eager = block(x)
        compiled = torch.compile(block, fullgraph=True)(x)
    assert (compiled.float() - eager.float()).abs().max().item() < 0.05
    explain = torch._dynamo.explain(block)(x)
    assert explain.graph_break_count == 0 and explain.graph_count == 1, explain


def grad_units(dtype):
    """The gradients' bound on ‖g - ref‖ / ‖ref‖ in float64 (the library's grad_tolerance:
    4 unit roundoffs)."""
    return 4 * {torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}[dtype]


def rel_err(got, want):
    return ((got.double() - want).norm() / want.norm().clamp_min(1e-30)).item()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("d", [64, 128])
def test_gradients_match_float64_and_stay_within_pytorchs_own_error(dtype, d):
    # (B, H, Hkv, Sq, Sk, causal): GQA, Sq != Sk both ways, odd lengths; no row without keys
    # (PyTorch's float64 reference gives those NaN gradients; the Rust test covers them).
    cases = [(2, 4, 2, 200, 200, "none"), (1, 4, 1, 77, 300, "bottom-right"), (1, 2, 2, 130, 130, "top-left"),
             (2, 4, 4, 96, 64, "top-left")]
    for b, h, hkv, sq, sk, causal in cases:
        q = randn(b, h, sq, d, dtype=dtype).requires_grad_()
        k = randn(b, hkv, sk, d, dtype=dtype).requires_grad_()
        v = randn(b, hkv, sk, d, dtype=dtype).requires_grad_()
        g = randn(b, h, sq, d, dtype=dtype)
        o = evoattn.attention(q, k, v, causal=causal)
        o.backward(g)
        ours = (q.grad, k.grad, v.grad)
        q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
        o64, _ = reference(q64, k64, v64, causal)
        o64.backward(g.double())
        refs = (q64.grad, k64.grad, v64.grad)
        # PyTorch's own 16-bit backward on the same inputs (its math path, GQA by repeat).
        q16, k16, v16 = (t.detach().clone().requires_grad_() for t in (q, k, v))
        o16, _ = reference_in(q16, k16, v16, causal)
        o16.backward(g)
        theirs = (q16.grad, k16.grad, v16.grad)
        for name, got, want, peer in zip(("dq", "dk", "dv"), ours, refs, theirs):
            assert got.dtype == dtype and got.shape == want.shape, (name, got.dtype, got.shape)
            err, peer_err = rel_err(got, want), rel_err(peer, want)
            assert err <= grad_units(dtype), f"{name} {dtype} d{d} {(b, h, hkv, sq, sk, causal)}: {err:.3g}"
            assert err <= 2 * peer_err + 1e-4, f"{name}: ours {err:.3g} against PyTorch's {peer_err:.3g}"


def reference_in(q, k, v, causal):
    """`reference` computed in q's own dtype (PyTorch's unfused 16-bit attention): the
    same-precision peer whose error ours is held to."""
    b, h, sq, d = q.shape
    hkv, sk = k.shape[1], k.shape[2]
    k = k.repeat_interleave(h // hkv, dim=1)
    v = v.repeat_interleave(h // hkv, dim=1)
    s = (q @ k.transpose(-1, -2)).float() / math.sqrt(d)
    if causal != "none":
        offset = 0 if causal == "top-left" else sk - sq
        i = torch.arange(sq, device=q.device)[:, None]
        j = torch.arange(sk, device=q.device)[None, :]
        s = s.masked_fill(j > i + offset, float("-inf"))
    p = torch.softmax(s, dim=-1).to(q.dtype)
    return p @ v, None


def test_flash_attn_func_trains_in_its_own_layout():
    q = randn(2, 100, 4, 64, dtype=torch.bfloat16).requires_grad_()
    k = randn(2, 150, 2, 64, dtype=torch.bfloat16).requires_grad_()
    v = randn(2, 150, 2, 64, dtype=torch.bfloat16).requires_grad_()
    evoattn.flash_attn_func(q, k, v, causal=True).float().square().sum().backward()
    q64, k64, v64 = (t.detach().double().transpose(1, 2).requires_grad_() for t in (q, k, v))
    o64, _ = reference(q64, k64, v64, "bottom-right")
    o64.square().sum().backward()
    for name, got, want in (("dq", q.grad, q64.grad), ("dk", k.grad, k64.grad), ("dv", v.grad, v64.grad)):
        assert got.shape == want.transpose(1, 2).shape
        assert rel_err(got, want.transpose(1, 2)) <= grad_units(torch.bfloat16), name


def test_a_training_step_compiles_in_one_graph_with_the_backward():
    torch._dynamo.reset()

    def step(q, k, v):
        return evoattn.attention(q, k, v, causal=True).float().square().mean()

    q, k, v = (randn(1, 4, 128, 64, dtype=torch.bfloat16).requires_grad_() for _ in range(3))
    step(q, k, v).backward()
    eager = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    torch.compile(step, fullgraph=True)(q, k, v).backward()
    for a, b in zip(eager, (q.grad, k.grad, v.grad)):
        assert (a.float() - b.float()).abs().max().item() <= 1e-2 * a.float().abs().max().item()


def test_a_gradient_through_lse_raises_naming_it():
    q = randn(1, 2, 64, 64, dtype=torch.float16).requires_grad_()
    o, lse = evoattn.attention(q, q.detach(), q.detach(), return_lse=True)
    with pytest.raises(NotImplementedError, match="through the returned lse"):
        (o.float().sum() + lse.sum()).backward()
    q.grad = None
    o, lse = evoattn.attention(q, q.detach(), q.detach(), return_lse=True)
    (o.float().sum() + lse.detach().sum()).backward()  # a detached lse is fine
    assert q.grad is not None and torch.isfinite(q.grad).all()


def test_bad_inputs_raise_before_any_launch():
    q = randn(1, 2, 64, 64, dtype=torch.float16)
    cases = [
        ((q.cpu(), q, q), {}, ValueError, "q is on cpu"),
        ((q, q.cpu(), q), {}, ValueError, "k is on cpu"),
        ((q.float(), q.float(), q.float()), {}, TypeError, "dtype float32 is not supported"),
        ((q, q.bfloat16(), q), {}, TypeError, "dtype bf16 does not match q's f16"),
        ((q[0], q[0], q[0]), {}, ValueError, "expected rank 4"),
        ((q.transpose(2, 3), q, q), {}, ValueError, "innermost (head-dim) stride"),
        # one element in: an address 2 bytes past a 16-byte boundary
        ((q.reshape(-1)[1:4097].reshape(1, 1, 64, 64), q[:, :1], q[:, :1]), {}, ValueError, "not 16-byte aligned"),
        ((randn(1, 2, 64, 0, dtype=torch.float16),) * 3, {}, ValueError, "head dim D=0"),
        ((randn(1, 2, 64, 96, dtype=torch.float16),) * 3, {"impl": "wgmma"}, ValueError, "wgmma"),
        (("q", q, q), {}, TypeError, "q must be a torch.Tensor"),
        ((q, q, q), {"out": torch.empty(1, 2, 64, 64, device=DEV, dtype=torch.float16)[:, :, :, :32]},
         ValueError, "tensor o: expected shape"),
        ((q, q, q), {"out": q}, ValueError, "overlaps input"),
    ]
    for args, kwargs, error, words in cases:
        with pytest.raises(error) as caught:
            evoattn.attention(*args, **kwargs)
        assert words in str(caught.value) and "panicked" not in str(caught.value), (words, str(caught.value))
    torch.cuda.synchronize()  # nothing faulted


def test_empty_problems_return_empty_outputs():
    q = randn(0, 2, 64, 64, dtype=torch.float16)
    assert evoattn.attention(q, q, q).shape == (0, 2, 64, 64)
    q, kv = randn(1, 2, 5, 64, dtype=torch.float16), randn(1, 2, 0, 64, dtype=torch.float16)
    o, lse = evoattn.attention(q, kv, kv, return_lse=True)
    assert torch.all(o == 0) and torch.all(lse == float("-inf"))


def test_a_decoding_loop_keeps_bounded_state():
    lib = evoattn.library(0)
    q = randn(1, 16, 1, 128, dtype=torch.bfloat16)
    kv = randn(1, 4, 4096, 128, dtype=torch.bfloat16)
    for sk in range(1, 601):
        evoattn.attention(q, kv[:, :, :sk], kv[:, :, :sk], causal="bottom-right")
    torch.cuda.synchronize()
    info = lib.info()
    assert info["prepared_launches"] <= info["max_prepared_launches"] == 256, info
    assert info["scratch_streams"] <= info["max_scratch_streams"], info


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_tensors_on_any_gpu_of_the_host():
    for index in range(torch.cuda.device_count()):
        q = torch.randn(1, 4, 100, 64, device=f"cuda:{index}", dtype=torch.float16)
        o = evoattn.attention(q, q, q)
        assert o.device == q.device
        assert_close(o, None, reference(q, q, q, "none")[0], None, torch.float16, f"cuda:{index}")


@pytest.mark.skipif(evoattn.torch.available() is not None, reason=str(evoattn.torch.available()))
def test_activate_routes_sdpa_for_the_cases_evoattn_supports_and_leaves_the_rest():
    F = torch.nn.functional
    evoattn.torch.activate()
    try:
        assert evoattn.torch.active()
        before = evoattn.torch.stats()
        q = randn(2, 8, 300, 128, dtype=torch.bfloat16)
        k, v = randn(2, 2, 300, 128, dtype=torch.bfloat16), randn(2, 2, 300, 128, dtype=torch.bfloat16)
        with torch.no_grad():
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        after = evoattn.torch.stats()
        assert after["evoattn"] == before["evoattn"] + 1, (before, after)
        assert_close(o, None, reference(q, k, v, "top-left")[0], None, torch.bfloat16, "routed SDPA")
        # A head dim no kernel has: PyTorch's own flash kernel runs it, with the reason kept.
        x = randn(1, 4, 64, 40, dtype=torch.float16)
        with torch.no_grad():
            F.scaled_dot_product_attention(x, x, x)
        assert evoattn.torch.stats()["pytorch"] == after["pytorch"] + 1
        assert evoattn.torch.stats()["last_refusal"]
        # Training through SDPA: PyTorch's flash backward consumes evoattn's output and LSE.
        qg = q.detach().clone().requires_grad_()
        F.scaled_dot_product_attention(qg, k, v, is_causal=True, enable_gqa=True).float().square().sum().backward()
        q64 = q.detach().double().requires_grad_()
        ref = reference(q64, k, v, "top-left")[0]
        ref.square().sum().backward()
        gerr = (qg.grad.double() - q64.grad).abs().max().item() / q64.grad.abs().max().item()
        assert gerr < 0.05, gerr
    finally:
        evoattn.torch.deactivate()
    assert not evoattn.torch.active()
    n = evoattn.torch.stats()["evoattn"]
    with torch.no_grad():
        F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    assert evoattn.torch.stats()["evoattn"] == n


FP8 = getattr(torch, "float8_e4m3fn", None)
needs_fp8 = pytest.mark.skipif(
    FP8 is None or torch.cuda.get_device_capability() < (8, 9),
    reason="E4M3 needs torch.float8_e4m3fn and an sm_89+ GPU (FP8 tensor cores)",
)
# The library's E4M3 bounds (crates/evoattn/src/reference.rs, derived there): against float64 on
# the dequantized inputs, max |o - ref| <= 2u max(1, |ref|max) and rel_l2 <= 1.3u with u = 2^-4
# (P rounded to E4M3), LSE within 3.1e-3 max(1, |lse|max) (QGMMA's ~14-bit accumulation).
FP8_MAX_ABS, FP8_REL_L2, FP8_LSE = 2 / 16, 1.3 / 16, 3.1e-3


def e4m3(b, heads, s, d):
    """Random E4M3 values spread over most of E4M3's range (std 64 of its ±448)."""
    return (torch.randn(b, heads, s, d, device=DEV) * 64).clamp(-448, 448).to(FP8)


def dequantize(x, descale, heads_per_group):
    """float64 values of E4M3 `x` ([B, Hx, S, D]) with `[B, Hkv]` descales; a query head takes
    its KV head's descale."""
    per_head = descale.double().repeat_interleave(heads_per_group, dim=1)
    return x.double() * per_head[:, :, None, None]


def assert_fp8_close(o, lse, ref_o, ref_lse, what, dtype=torch.bfloat16):
    assert o.dtype == dtype, f"{what}: o is {o.dtype}"
    diff = o.double() - ref_o
    err, scale = diff.abs().max().item(), max(1.0, ref_o.abs().max().item())
    assert err <= FP8_MAX_ABS * scale, f"{what}: max |o - ref| = {err:.3g} (|ref| <= {scale:.3g})"
    if ref_o.norm() > 0:
        rel = (diff.norm() / ref_o.norm()).item()
        assert rel <= FP8_REL_L2, f"{what}: rel_l2 {rel:.3g}"
    if lse is not None:
        finite = torch.isfinite(ref_lse)
        assert torch.equal(torch.isfinite(lse), finite), f"{what}: lse -inf rows differ"
        if finite.any():
            lerr = (lse.double() - ref_lse)[finite].abs().max().item()
            assert lerr <= FP8_LSE * max(1.0, ref_lse[finite].abs().max().item()), f"{what}: max |lse - ref| {lerr:.3g}"


@needs_fp8
@pytest.mark.parametrize("d", HEAD_DIMS)
@pytest.mark.parametrize("causal", ["none", "top-left", "bottom-right"])
def test_e4m3_matches_float64_on_the_dequantized_inputs(d, causal):
    for b, h, hkv, sq, sk in SHAPES:
        q, k, v = e4m3(b, h, sq, d), e4m3(b, hkv, sk, d), e4m3(b, hkv, sk, d)
        # A different descale per (batch, KV head), as FlashAttention-3's [B, Hkv].
        dq, dk, dv = (torch.rand(b, hkv, device=DEV) * 0.02 + 0.005 for _ in range(3))
        o, lse = evoattn.attention(q, k, v, causal=causal, return_lse=True, q_descale=dq, k_descale=dk, v_descale=dv)
        assert o.shape == q.shape and lse.shape == (b, h, sq)
        ref_o, ref_lse = reference(dequantize(q, dq, h // hkv), dequantize(k, dk, 1), dequantize(v, dv, 1), causal)
        assert_fp8_close(o, lse, ref_o, ref_lse, f"e4m3 {(b, h, hkv, sq, sk, d)} {causal}")


@needs_fp8
@pytest.mark.skipif(not HOPPER, reason="only wgmma (sm_90a) reads V held transposed; mma8 refuses it")
@pytest.mark.parametrize("d", HEAD_DIMS)
def test_e4m3_takes_v_held_transposed_and_gives_the_same_o(d):
    # FP8 wgmma reads V keys-contiguous: a caller holding Vᵀ ([B, Hkv, D, Sk], keys padded to
    # 16) passes its transposed view, and the kernel reads it with no transpose of its own.
    for b, h, hkv, sq, sk in SHAPES:
        q, k, v = e4m3(b, h, sq, d), e4m3(b, hkv, sk, d), e4m3(b, hkv, sk, d)
        padded = torch.zeros(b, hkv, d, (sk + 15) // 16 * 16, device=DEV).to(FP8)
        padded[..., :sk] = v.transpose(-1, -2)
        v_t = padded[..., :sk].transpose(-1, -2)
        assert v_t.stride(-2) == 1 and torch.equal(v_t.view(torch.uint8), v.view(torch.uint8))
        for causal in ["none", "bottom-right"]:
            want = evoattn.attention(q, k, v, causal=causal, q_descale=0.01, k_descale=0.02, v_descale=0.5)
            got = evoattn.attention(q, k, v_t, causal=causal, q_descale=0.01, k_descale=0.02, v_descale=0.5)
            ref_o, _ = reference(q.double() * 0.01, k.double() * 0.02, v.double() * 0.5, causal)
            assert_fp8_close(got, None, ref_o, None, f"Vᵀ {(b, h, hkv, sq, sk, d)} {causal}")
            # Same products in the same order: the same bits as V in rows.
            assert torch.equal(got, want), f"Vᵀ {(b, h, hkv, sq, sk, d)} {causal}: differs from V in rows"


@needs_fp8
def test_e4m3_per_tensor_descales_broadcast_and_none_is_one():
    q, k, v = e4m3(2, 8, 200, 128), e4m3(2, 2, 300, 128), e4m3(2, 2, 300, 128)
    full = evoattn.attention(q, k, v, q_descale=torch.full((2, 2), 0.01, device=DEV),
                             k_descale=torch.full((2, 2), 0.02, device=DEV), v_descale=torch.full((2, 2), 0.5, device=DEV))
    as_numbers = evoattn.attention(q, k, v, q_descale=0.01, k_descale=0.02, v_descale=0.5)
    as_0d = evoattn.attention(q, k, v, q_descale=torch.tensor(0.01, device=DEV),
                              k_descale=torch.tensor([0.02], device=DEV), v_descale=torch.tensor([[0.5]], device=DEV))
    assert torch.equal(full, as_numbers) and torch.equal(full, as_0d)
    # No descales: the values are their own units (descale 1).
    ones = evoattn.attention(q, k, v, scale=0.01 * 0.02 / math.sqrt(128))
    ref_o, _ = reference(q.double(), k.double(), v.double(), "none", 0.01 * 0.02 / math.sqrt(128))
    assert_fp8_close(ones, None, ref_o, None, "descales None")


@needs_fp8
@pytest.mark.parametrize("d", HEAD_DIMS)
def test_e4m3_writes_o_in_float16_into_a_float16_out(d):
    q, k, v = e4m3(2, 8, 200, d), e4m3(2, 2, 300, d), e4m3(2, 2, 300, d)
    descales = {"q_descale": 0.01, "k_descale": 0.02, "v_descale": 0.5}
    out = torch.empty(q.shape, device=DEV, dtype=torch.float16)
    o, lse = evoattn.attention(q, k, v, causal=True, return_lse=True, out=out, **descales)
    assert o is out
    ref_o, ref_lse = reference(q.double() * 0.01, k.double() * 0.02, v.double() * 0.5, "top-left")
    assert_fp8_close(out, lse, ref_o, ref_lse, f"f16 o, hd{d}", dtype=torch.float16)
    # The same kernel's bf16 O differs from it by O's last rounding only (bf16's 2^-8, f16's 2^-11).
    bf16 = evoattn.attention(q, k, v, causal=True, **descales).double()
    assert ((out.double() - bf16).abs() <= (2**-8 + 2**-11) * bf16.abs() + 1e-6).all()
    # out_dtype= asks for the same without a tensor of one's own.
    asked = evoattn.attention(q, k, v, causal=True, out_dtype=torch.float16, **descales)
    assert asked.dtype == torch.float16 and torch.equal(asked, out)
    assert "_e4m3f16_" in evoattn.kernel(q, k, v, out_dtype=torch.float16)
    assert "_e4m3_" in evoattn.kernel(q, k, v)
    with pytest.raises(ValueError, match="out= or out_dtype=, not both"):
        evoattn.attention(q, k, v, out=out, out_dtype=torch.float16, **descales)
    with pytest.raises(ValueError, match="o of torch.float8_e4m3fn inputs is torch.bfloat16 or torch.float16"):
        evoattn.attention(q, k, v, out_dtype=torch.float32, **descales)
    x = torch.randn(1, 2, 64, d, device=DEV, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="o of torch.bfloat16 inputs is torch.bfloat16"):
        evoattn.attention(x, x, x, out_dtype=torch.float16)


@needs_fp8
def test_e4m3_through_flash_attn_func_cuda_graphs_and_torch_compile():
    b, h, hkv, s, d = 2, 8, 2, 256, 128
    q, k, v = (e4m3(b, heads, s, d).transpose(1, 2).contiguous() for heads in (h, hkv, hkv))  # [B, S, H, D]
    dq, dk, dv = (torch.rand(b, hkv, device=DEV) * 0.02 + 0.005 for _ in range(3))
    o = evoattn.flash_attn_func(q, k, v, causal=True, q_descale=dq, k_descale=dk, v_descale=dv)
    bhsd = (q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
    ref_o, _ = reference(dequantize(bhsd[0], dq, h // hkv), dequantize(bhsd[1], dk, 1), dequantize(bhsd[2], dv, 1),
                         "bottom-right")
    assert_fp8_close(o.transpose(1, 2), None, ref_o, None, "flash_attn_func e4m3")

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = evoattn.flash_attn_func(q, k, v, causal=True, q_descale=dq, k_descale=dk, v_descale=dv)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(captured, o)

    def f(q, k, v, dq, dk, dv):
        return evoattn.flash_attn_func(q, k, v, causal=True, q_descale=dq, k_descale=dk, v_descale=dv).float() * 2

    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True)(q, k, v, dq, dk, dv)
    assert torch.equal(compiled, o.float() * 2)


@needs_fp8
def test_e4m3_bad_inputs_raise_before_any_launch():
    q, k, v = e4m3(1, 2, 64, 64), e4m3(1, 2, 64, 64), e4m3(1, 2, 64, 64)
    x = randn(1, 2, 64, 64, dtype=torch.bfloat16)
    cases = [
        ((x, x, x), {"q_descale": 0.5}, ValueError, "q_descale apply to float8_e4m3fn inputs"),
        ((q, k, v), {"k_descale": torch.ones(3, device=DEV)}, ValueError, "k_descale has shape [3]"),
        ((q, k, v), {"v_descale": 0.0}, ValueError, "must be a positive finite number"),
        ((q, k, v), {"q_descale": "0.5"}, TypeError, "q_descale must be a number or a torch.Tensor"),
        ((q, k, v), {"v_descale": torch.ones(1, 2).cuda(1) if torch.cuda.device_count() > 1 else torch.ones(1, 2)},
         ValueError, "v_descale is on"),
        ((q, x, v), {}, TypeError, "descales come with float8_e4m3fn q, k and v"),
        ((q, k, v), {"out": torch.empty(1, 2, 64, 64, device=DEV, dtype=torch.float32)}, TypeError,
         "does not match bf16 or f16, the output dtypes of e4m3 inputs"),
    ]
    for args, kwargs, error, words in cases:
        with pytest.raises(error) as caught:
            evoattn.attention(*args, **kwargs)
        assert words in str(caught.value) and "panicked" not in str(caught.value), (words, str(caught.value))
    assert "e4m3" in evoattn.kernel(q, k, v)
    torch.cuda.synchronize()  # nothing faulted
