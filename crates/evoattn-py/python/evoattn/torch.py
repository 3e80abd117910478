"""Routing `torch.nn.functional.scaled_dot_product_attention` to evoattn (opt-in).

PyTorch 2.9+ lets a library take over SDPA's FlashAttention backend through
`torch.nn.attention.register_flash_attention_impl` (how FlashAttention-3/4 plug in). `activate()`
registers evoattn there and activates it: every call for which SDPA chooses its flash backend
comes here; evoattn runs it when it supports the case exactly (the library's own plan says so:
dtype, head dim, mask, no dropout) and hands the rest back to PyTorch's original kernel. Calls
PyTorch routes elsewhere (cuDNN, efficient, math) are not touched, so `activate()` by default
also turns SDPA's cuDNN backend off (on Hopper PyTorch prefers it to flash); `deactivate()`
undoes both.

The backward pass stays PyTorch's: its flash backward consumes evoattn's output and LSE, so
training through SDPA works while routed.

    import evoattn.torch
    evoattn.torch.activate()
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)   # evoattn's kernel
    evoattn.torch.stats()   # {'evoattn': n, 'pytorch': m, 'last_refusal': reason}
    evoattn.torch.deactivate()
"""

from __future__ import annotations

import threading
from typing import Any, Optional

import torch

from . import _api

IMPL_NAME = "evoattn"
_OP = "_scaled_dot_product_flash_attention"

_state_lock = threading.Lock()
_original: Any = None
_saved_cudnn: Optional[bool] = None
_stats = {"evoattn": 0, "pytorch": 0, "last_refusal": None}


def available() -> Optional[str]:
    """None when this PyTorch has the flash-attention impl registry, else why not."""
    attention = torch.nn.attention
    if not hasattr(attention, "register_flash_attention_impl"):
        return f"PyTorch {torch.__version__} has no torch.nn.attention.register_flash_attention_impl (added in 2.9)"
    if not hasattr(torch.library, "get_kernel"):
        return f"PyTorch {torch.__version__} has no torch.library.get_kernel to keep its own flash kernel for fallback"
    return None


def _refusal(q, k, v, is_causal: bool, scale: Optional[float], dropout_p: float, debug: bool) -> Optional[str]:
    if dropout_p != 0.0:
        return "dropout"
    if debug:
        return "return_debug_mask"
    if not all(type(t) is torch.Tensor for t in (q, k, v)):
        return "tensor subclass (nested or traced)"
    return _api.refusal(q, k, v, causal=is_causal, scale=scale)


def _flash(keyset, q, k, v, dropout_p=0.0, is_causal=False, return_debug_mask=False, *, scale=None):
    reason = _refusal(q, k, v, is_causal, scale, dropout_p, return_debug_mask)
    if reason is not None:
        _stats["pytorch"] += 1
        _stats["last_refusal"] = reason
        return _original.call_boxed(keyset, q, k, v, dropout_p, is_causal, return_debug_mask, scale=scale)
    _stats["evoattn"] += 1
    # SDPA's flash path passes top-left is_causal only with Sq == Sk, where both alignments agree.
    out, lse = _api.forward(q, k, v, "bhsd", "top-left" if is_causal else "none", scale, True, "auto", None,
                            torch.empty_like(q))
    zeros = lambda *shape: torch.zeros(shape, dtype=torch.uint64, device=q.device)  # noqa: E731
    # The op's schema: (out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, rng_state, unused,
    # debug_attn_mask), as PyTorch's own flash kernel returns them without dropout.
    return out, lse, None, None, q.shape[2], k.shape[2], zeros(2), zeros(), q.new_empty((0,))


class _Handle:
    """What the registry calls to undo the registration."""

    def __init__(self, library: Any) -> None:
        self.library = library

    def remove(self) -> None:
        if self.library is not None:
            self.library._destroy()
            self.library = None


def _register() -> _Handle:
    global _original
    _original = torch.library.get_kernel(f"aten::{_OP}", "CUDA")
    library = torch.library.Library("aten", "IMPL", "CUDA")
    library.impl(_OP, _flash, "CUDA", with_keyset=True)
    return _Handle(library)


def activate(prefer_flash: bool = True) -> None:
    """Routes SDPA's flash backend to evoattn; with `prefer_flash`, also turns SDPA's cuDNN
    backend off until `deactivate()` so PyTorch picks flash where both apply (cases evoattn
    hands back then run on PyTorch's flash kernel, not cuDNN's). Raises RuntimeError with the
    reason where this PyTorch has no registry."""
    global _saved_cudnn
    why = available()
    if why is not None:
        raise RuntimeError(f"evoattn: cannot route SDPA here: {why}; call evoattn.attention directly")
    with _state_lock:
        attention = torch.nn.attention
        if IMPL_NAME not in attention.list_flash_attention_impls():
            attention.register_flash_attention_impl(IMPL_NAME, register_fn=_register)
        attention.activate_flash_attention_impl(IMPL_NAME)
        if prefer_flash and _saved_cudnn is None:
            # PyTorch re-derives its priority order on first use (cuDNN first on Hopper), so the
            # public switch is what holds: cuDNN's SDPA off while evoattn is active.
            _saved_cudnn = torch.backends.cuda.cudnn_sdp_enabled()
            torch.backends.cuda.enable_cudnn_sdp(False)


def deactivate() -> None:
    """Gives SDPA's flash backend and priority order back to PyTorch."""
    global _saved_cudnn
    with _state_lock:
        attention = torch.nn.attention
        if attention.current_flash_attention_impl() == IMPL_NAME:
            attention.restore_flash_attention_impl()
        if _saved_cudnn is not None:
            torch.backends.cuda.enable_cudnn_sdp(_saved_cudnn)
            _saved_cudnn = None


def active() -> bool:
    return available() is None and torch.nn.attention.current_flash_attention_impl() == IMPL_NAME


def stats() -> dict:
    """Calls routed so far: run by evoattn, handed back to PyTorch, and the last hand-back's reason."""
    return dict(_stats)
