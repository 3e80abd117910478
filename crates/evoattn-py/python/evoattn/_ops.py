"""evoattn's calls as `torch.library` custom ops, so that `torch.compile(fullgraph=True)` traces
them without a graph break and autograd records them.

The ops are what traced code calls (the public functions switch to them under torch.compile,
for tensor subclasses and when a gradient is wanted); eager calls skip the dispatcher. The
fake (meta) implementations give the outputs' sizes, strides and dtypes without a GPU.
Autograd runs evoattn's backward pass (`mma-bwd`: dQ, dK, dV from the saved q, k, v, o and
LSE) for 16-bit inputs; the public calls ask the op for the LSE whenever a gradient is wanted.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch

from . import _api

_FP8_BACKWARD = (
    "evoattn: the backward pass takes float16 or bfloat16 inputs; float8_e4m3fn attention is "
    "forward only (run it under torch.no_grad())"
)
_LSE_BACKWARD = (
    "evoattn: a gradient through the returned lse is not supported (only through o); "
    "detach lse (lse.detach()) where it feeds the loss"
)


def _no_lse(q: torch.Tensor) -> torch.Tensor:
    """The LSE output when none was asked for: an op's outputs are fixed by its schema."""
    return q.new_empty((0,), dtype=torch.float32)


@torch.library.custom_op("evoattn::attention", mutates_args=(), device_types="cuda")
def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    layout: str,
    causal: str,
    scale: Optional[float],
    return_lse: bool,
    impl: str,
    config: Optional[str],
    descale: Optional[torch.Tensor] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """(o, lse) with o laid out like q (bf16 for E4M3 inputs, whose `[3, B, Hkv]` float32
    descales come as `descale`); lse is `[B, H, Sq]` float32, empty when not asked for (an op's
    outputs are fixed by its schema)."""
    o, lse = _api.forward(q, k, v, layout, causal, scale, return_lse, impl, config, None, descale)
    return o, lse if lse is not None else _no_lse(q)


@attention.register_fake
def _(q, k, v, layout, causal, scale, return_lse, impl, config, descale=None):
    lse = q.new_empty(_api.lse_shape(q, layout), dtype=torch.float32) if return_lse else _no_lse(q)
    return _api.out_like(q), lse


@torch.library.custom_op("evoattn::attention_out", mutates_args=("out",), device_types="cuda")
def attention_out(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    layout: str,
    causal: str,
    scale: Optional[float],
    return_lse: bool,
    impl: str,
    config: Optional[str],
    descale: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """Writes o into `out`; returns lse (empty when not asked for)."""
    _, lse = _api.forward(q, k, v, layout, causal, scale, return_lse, impl, config, out, descale)
    return lse if lse is not None else _no_lse(q)


@attention_out.register_fake
def _(q, k, v, out, layout, causal, scale, return_lse, impl, config, descale=None):
    return q.new_empty(_api.lse_shape(q, layout), dtype=torch.float32) if return_lse else _no_lse(q)


@torch.library.custom_op("evoattn::attention_backward", mutates_args=(), device_types="cuda")
def attention_backward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    o: torch.Tensor,
    lse: torch.Tensor,
    grad_o: torch.Tensor,
    layout: str,
    causal: str,
    scale: Optional[float],
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dq, dk, dv) of one forward call: an op of its own, so that AOTAutograd traces the
    backward of a compiled graph as it traces the forward."""
    return _api.backward(q, k, v, o, lse, grad_o, layout, causal, scale)


@attention_backward.register_fake
def _(q, k, v, o, lse, grad_o, layout, causal, scale):
    return tuple(_api.grad_like(t) for t in (q, k, v))


def _setup_context(ctx, inputs, output) -> None:
    q, k, v, layout, causal, scale, return_lse, impl, config = inputs[:9]
    descale = inputs[9] if len(inputs) > 9 else None
    o, lse = output
    # Unused outputs' gradients arrive as None, not zeros: lse's tells whether one flowed.
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(q, k, v, o, lse)
    ctx.call = (layout, causal, scale, descale is not None)


def _backward(ctx, grad_o, grad_lse):
    q, k, v, o, lse = ctx.saved_tensors
    layout, causal, scale, fp8 = ctx.call
    if fp8:
        raise NotImplementedError(_FP8_BACKWARD)
    if grad_lse is not None:
        raise NotImplementedError(_LSE_BACKWARD)
    if lse.numel() == 0:
        # Recorded without its LSE (a call that asked for no gradient then): recompute both.
        o, lse = torch.ops.evoattn.attention(q, k, v, layout, causal, scale, True, "auto", None)
    if grad_o is None:
        return (None,) * 10
    dq, dk, dv = torch.ops.evoattn.attention_backward(q, k, v, o, lse, grad_o, layout, causal, scale)
    return dq, dk, dv, None, None, None, None, None, None, None


attention.register_autograd(_backward, setup_context=_setup_context)
# `attention_out` gets none: like PyTorch's own out= functions it does not take part in
# autograd, and the public call refuses out= when a gradient is wanted.
