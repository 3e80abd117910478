"""evoattn: fused attention (softmax(Q·Kᵀ·scale + mask)·V and its gradients) for NVIDIA GPUs,
on PyTorch tensors.

The kernels are CUDA C++ compiled at run time by NVRTC for the GPU in the machine (about
0.1-0.3 s per kernel on first use, then cached on disk), so the wheel has no CUDA build and no
libtorch link: it works with any PyTorch version. Tensors are used in place (zero-copy), on
PyTorch's current stream of their device.

    import evoattn
    o = evoattn.attention(q, k, v, causal=True)           # SDPA's [B, H, S, D] and mask
    o = evoattn.flash_attn_func(q, k, v, causal=True)     # FlashAttention's [B, S, H, D] and mask

`evoattn.torch.activate()` routes `torch.nn.functional.scaled_dot_product_attention` to evoattn
where the installed PyTorch lets a library do so (opt-in, never on import).
"""

from __future__ import annotations

from typing import Any, Optional

from . import _api, _evoattn
from ._api import Causal, kernel, library
from ._evoattn import UnavailableError

__all__ = ["attention", "flash_attn_func", "kernel", "library", "UnavailableError", "MAX_HEAD_DIM"]

MAX_HEAD_DIM: int = _evoattn.MAX_HEAD_DIM

try:
    import torch as _torch
except ImportError:  # the package imports without PyTorch; its calls then say what to install
    _torch = None

if _torch is not None:
    from . import _ops
    from . import torch  # evoattn.torch: SDPA routing, opt-in (activate() does nothing on import)

    _is_compiling = getattr(getattr(_torch, "compiler", None), "is_compiling", lambda: False)
    _grad_enabled = _torch.is_grad_enabled
    _Tensor = _torch.Tensor
else:

    class _Tensor:  # nothing is one: every call takes the eager path, which says to install PyTorch
        pass


def _call(q, k, v, layout, causal, scale, return_lse, impl, config, out, descale):
    # Eager unless the call must go through the custom op: under torch.compile, for tensor
    # subclasses (fake tensors, functional tensors), or when autograd records it. Inline, not a
    # helper: this test is part of every call's host cost.
    if not isinstance(q, _Tensor) or (
        type(q) is _Tensor and type(k) is _Tensor and type(v) is _Tensor and not _is_compiling()
        and not (_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad))
    ):
        o, lse = _api.forward(q, k, v, layout, causal, scale, return_lse, impl, config, out, descale)
    elif out is None:
        # A gradient needs the LSE: the op computes it whenever one may be wanted.
        wants_grad = _grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)
        o, lse = _torch.ops.evoattn.attention(q, k, v, layout, causal, scale, return_lse or wants_grad, impl,
                                              config, descale)
    else:
        if _grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
            raise RuntimeError("evoattn: out= does not take part in autograd (like PyTorch's out= functions)")
        lse = _torch.ops.evoattn.attention_out(q, k, v, out, layout, causal, scale, return_lse, impl, config, descale)
        o = out
    return (o, lse) if return_lse else o


def attention(
    q: Any,
    k: Any,
    v: Any,
    *,
    causal: Causal = False,
    scale: Optional[float] = None,
    return_lse: bool = False,
    impl: str = "auto",
    config: Optional[str] = None,
    out: Any = None,
    q_descale: Any = None,
    k_descale: Any = None,
    v_descale: Any = None,
    out_dtype: Any = None,
) -> Any:
    """Attention in `torch.nn.functional.scaled_dot_product_attention`'s layout and mask.

    q is `[B, H, Sq, D]`, k and v `[B, Hkv, Sk, D]` (Hkv dividing H: GQA/MQA), CUDA tensors of
    one device, all float16, all bfloat16 or all float8_e4m3fn, D one of the head dims the
    kernels take (64, 128, 256), any strides with a unit innermost step (so `x.transpose(1, 2)`
    of a `[B, S, H, D]` tensor works without a copy). Returns o `[B, H, Sq, D]` in q's dtype
    (bfloat16 for float8_e4m3fn inputs), laid out like q, or `(o, lse)` with `return_lse=True`,
    lse `[B, H, Sq]` float32, the natural-log log-sum-exp of each row (what a backward pass
    needs).

    E4M3 (float8_e4m3fn) inputs take FlashAttention-3's descales: the attention of
    q·q_descale, k·k_descale and v·v_descale, each descale float32 of shape `[B, Hkv]` (or
    anything that broadcasts to it: a number or a 0-d tensor is a per-tensor scale; None is
    1.0). A query head uses the descale of the KV head it reads. Descale tensors are read on the
    GPU, unchecked: a zero, negative or non-finite one gives zero, sign-flipped or non-finite
    outputs. Hopper runs them on FP8 tensor cores (`wgmma`), sm_89 and up on `mma8`. FP8
    `wgmma` reads V keys-contiguous, so on Hopper E4M3 v may be a view of Vᵀ held
    `[B, Hkv, D, Sk]` (`vt.transpose(-1, -2)`; its strides but the keys' multiples of 16):
    read as it is, with the same o as V in rows.

    causal: False (no mask); True or "top-left", SDPA's `is_causal=True`: query i sees keys
    j <= i; "bottom-right", FlashAttention's and a KV cache's alignment: query i sees keys
    j <= i + Sk - Sq. With Sq == Sk the two agree. A row that sees no key gets o = 0 and
    lse = -inf.

    scale: the softmax scale, default 1/sqrt(D). impl: "auto" (the planner's choice), or
    "wgmma" (Hopper), "mma" (sm_80+), "splitkv", "resident" (Hopper, short keys), "mma8" (E4M3,
    sm_89+), "cublas" (unfused: cuBLASLt GEMMs around materialised scores), "hybrid-qk" and
    "hybrid-pv" (as "cublas", our GEMM for P·V or for Q·Kᵀ), "reference"; config: lever
    overrides for a named impl, e.g. "block_n=64". out: a tensor of q's shape and o's dtype to write o into
    (for float8_e4m3fn inputs bfloat16, or float16 to have o in float16). out_dtype: o's dtype
    for float8_e4m3fn inputs, torch.bfloat16 (None: FlashAttention-3's) or torch.float16 (3 more
    mantissa bits where o fits float16's range); 16-bit inputs write o in their own dtype.

    Runs on PyTorch's current stream; the first call of a shape compiles or loads its kernel,
    later calls only launch (make one before capturing a CUDA graph). Bad input raises
    ValueError or TypeError before anything is launched. Under torch.compile this is the custom
    op `torch.ops.evoattn.attention`. Gradients flow to q, k and v (16-bit inputs) through
    evoattn's backward pass, which recomputes P from the saved LSE (the forward then computes
    the LSE too); not through a returned lse, nor for float8_e4m3fn inputs (both raise).
    """
    mask = ("top-left" if causal else "none") if causal.__class__ is bool else _api.causal_name(causal, "top-left")
    descale = None
    if q_descale is not None or k_descale is not None or v_descale is not None or _api.is_fp8(q):
        descale = _api.descale_buffer(q, k, "bhsd", q_descale, k_descale, v_descale)
    if out_dtype is not None:
        # o in the dtype asked for is o written into a tensor of it: the out= path.
        out = _api.out_of_dtype(q, out, out_dtype)
    return _call(q, k, v, "bhsd", mask, scale, return_lse, impl, config, out, descale)


def flash_attn_func(
    q: Any,
    k: Any,
    v: Any,
    softmax_scale: Optional[float] = None,
    causal: bool = False,
    *,
    dropout_p: float = 0.0,
    window_size: tuple = (-1, -1),
    softcap: float = 0.0,
    alibi_slopes: Any = None,
    deterministic: bool = False,
    return_attn_probs: bool = False,
    return_lse: bool = False,
    q_descale: Any = None,
    k_descale: Any = None,
    v_descale: Any = None,
) -> Any:
    """FlashAttention's `flash_attn_func` signature and mask: switching is one import.

    q is `[B, Sq, H, D]`, k and v `[B, Sk, Hkv, D]`; returns o `[B, Sq, H, D]` (and lse
    `[B, H, Sq]` float32 with `return_lse=True`). `causal=True` is FlashAttention's causal
    mask, aligned bottom-right: query i sees keys j <= i + Sk - Sq (the KV-cache convention;
    SDPA's top-left when Sq == Sk). The forward is deterministic either way. float8_e4m3fn
    inputs take `q_descale`, `k_descale`, `v_descale` as FlashAttention-3 does (`[B, Hkv]`
    float32, see `attention`) and return bfloat16.

    FlashAttention features evoattn does not have raise ValueError instead of being ignored:
    dropout, sliding windows, softcapping, ALiBi, returning attention probabilities.
    """
    if dropout_p != 0.0:
        raise ValueError("evoattn: dropout_p must be 0.0: evoattn's attention has no dropout")
    if tuple(window_size) != (-1, -1):
        raise ValueError(f"evoattn: window_size={window_size!r}: sliding-window attention is not supported")
    if softcap != 0.0:
        raise ValueError("evoattn: softcap must be 0.0: softcapping is not supported")
    if alibi_slopes is not None:
        raise ValueError("evoattn: alibi_slopes must be None: ALiBi is not supported")
    if return_attn_probs:
        raise ValueError("evoattn: return_attn_probs=True is not supported (the probabilities are never materialised)")
    if not isinstance(causal, bool):
        raise TypeError(f"evoattn: causal={causal!r}: flash_attn_func takes True or False")
    mask = "bottom-right" if causal else "none"
    descale = None
    if q_descale is not None or k_descale is not None or v_descale is not None or _api.is_fp8(q):
        descale = _api.descale_buffer(q, k, "bshd", q_descale, k_descale, v_descale)
    return _call(q, k, v, "bshd", mask, softmax_scale, return_lse, "auto", None, None, descale)
