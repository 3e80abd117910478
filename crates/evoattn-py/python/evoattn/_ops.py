"""evoattn's calls as `torch.library` custom ops, so that `torch.compile(fullgraph=True)` traces
them without a graph break and autograd records them.

The ops are what traced code calls (the public functions switch to them under torch.compile,
for tensor subclasses and when a gradient is wanted); eager calls skip the dispatcher. The
fake (meta) implementations give the outputs' sizes, strides and dtypes without a GPU. The
backward pass does not exist yet: autograd records the op, and `.backward()` through it raises.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch

from . import _api

_BACKWARD_MISSING = (
    "evoattn: the backward pass of evoattn's attention is not implemented yet (forward only); "
    "for training, call torch.nn.functional.scaled_dot_product_attention, or run evoattn under "
    "torch.no_grad() / with inputs that do not require grad"
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


def _setup_context(ctx, inputs, output) -> None:
    pass


def _no_backward(ctx, *grads):
    raise NotImplementedError(_BACKWARD_MISSING)


attention.register_autograd(_no_backward, setup_context=_setup_context)
# `attention_out` gets none: like PyTorch's own out= functions it does not take part in
# autograd, and the public call refuses out= when a gradient is wanted.
