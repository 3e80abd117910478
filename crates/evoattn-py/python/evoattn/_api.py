"""The calls: PyTorch tensors in, evoattn's kernels on PyTorch's current stream, tensors out.

Tensors cross to Rust as DLPack exports (address, device, dtype, sizes and strides in one C
call each; zero-copy, no libtorch symbol). The eager path is kept short because it is the host
cost every call pays; traced calls (torch.compile, autograd) go through the
`evoattn::attention` custom op (`_ops.py`).
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Optional, Tuple, Union

from . import _evoattn

Causal = Union[bool, str, None]

_CAUSAL_NAMES = ("none", "top-left", "bottom-right")

_torch: Any = None
_dtype_names: dict = {}
_fp8: Any = None  # torch.float8_e4m3fn where this PyTorch has it
_current_stream: Any = None
_to_dlpack: Any = None
_libraries: dict = {}
_libraries_lock = threading.Lock()


def _setup() -> Any:
    """Imports torch and finds NVRTC where pip puts it (PyTorch's own wheel included)."""
    global _torch, _dtype_names, _current_stream, _to_dlpack, _fp8
    try:
        import torch
    except ImportError as e:
        raise ImportError("evoattn: its calls take PyTorch tensors; install PyTorch (any version with CUDA)") from e
    _evoattn.add_site_dirs([p for p in sys.path if p])
    _dtype_names = {torch.float16: "f16", torch.bfloat16: "bf16"}
    _fp8 = getattr(torch, "float8_e4m3fn", None)
    if _fp8 is not None:
        _dtype_names[_fp8] = "e4m3"
    # The raw handle of the current stream, without building a torch.cuda.Stream object.
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    _current_stream = raw if raw is not None else (lambda index: torch.cuda.current_stream(index).cuda_stream)
    # The C function behind torch.utils.dlpack.to_dlpack, without its Python frame.
    _to_dlpack = getattr(torch._C, "_to_dlpack", None) or torch.utils.dlpack.to_dlpack
    _torch = torch
    return torch


def library(device: Any = None) -> "_evoattn.Library":
    """The per-GPU library object (kernels loaded, launches prepared) of a CUDA device index or
    torch.device; opened on first use, one per device for the process."""
    torch = _torch or _setup()
    if device is None:
        index = torch.cuda.current_device()
    elif isinstance(device, int):
        index = device
    else:
        index = torch.device(device).index
        index = torch.cuda.current_device() if index is None else index
    lib = _libraries.get(index)
    if lib is None:
        with _libraries_lock:
            lib = _libraries.get(index)
            if lib is None:
                lib = _evoattn.Library(index)
                _libraries[index] = lib
    return lib


def causal_name(causal: Causal, true_means: str) -> str:
    """The library's mask name for a `causal=` argument; `True` means `true_means`."""
    if causal is False or causal is None:
        return "none"
    if causal is True:
        return true_means
    if isinstance(causal, str) and causal in _CAUSAL_NAMES:
        return causal
    raise ValueError(f"evoattn: causal={causal!r}: expected False, True, 'top-left' or 'bottom-right'")


def _dtype(t: Any) -> str:
    return _dtype_names.get(t.dtype) or str(t.dtype).replace("torch.", "")


def is_fp8(t: Any) -> bool:
    """Whether `t` holds E4M3 values (torch.float8_e4m3fn)."""
    torch = _torch or _setup()
    return _fp8 is not None and isinstance(t, torch.Tensor) and t.dtype == _fp8


def out_of_dtype(q: Any, out: Any, out_dtype: Any) -> Any:
    """A new o for `attention(..., out_dtype=)`: float8_e4m3fn inputs take bfloat16 or float16;
    16-bit inputs only their own dtype; not together with out=."""
    torch = _torch or _setup()
    if out is not None:
        raise ValueError("evoattn: give out= or out_dtype=, not both (out's dtype is o's)")
    allowed = (torch.bfloat16, torch.float16) if is_fp8(q) else (q.dtype,)
    if out_dtype not in allowed:
        names = " or ".join(str(d) for d in allowed)
        raise ValueError(f"evoattn: out_dtype={out_dtype}: o of {q.dtype} inputs is {names}")
    return torch.empty_like(q, dtype=out_dtype)


def out_like(q: Any) -> Any:
    """A fresh o for q: q's sizes and strides, q's dtype, bf16 for E4M3 inputs."""
    torch = _torch or _setup()
    return torch.empty_like(q, dtype=torch.bfloat16) if is_fp8(q) else torch.empty_like(q)


def descale_buffer(q: Any, k: Any, layout: str, q_descale: Any, k_descale: Any, v_descale: Any) -> Any:
    """The descales of an E4M3 call as the kernels read them: one dense `[3, B, Hkv]` float32
    tensor on q's device (q's, k's, then v's). Each may be None (1.0: the values are already in
    their units), a Python number, or a tensor that broadcasts to `[B, Hkv]` (a per-tensor scale
    is the 0-d or one-element case). None when q is not E4M3 and no descale is given; a
    ValueError when descales come with 16-bit inputs."""
    torch = _torch or _setup()
    given = (("q_descale", q_descale), ("k_descale", k_descale), ("v_descale", v_descale))
    if not is_fp8(q):
        named = [name for name, d in given if d is not None]
        if named:
            raise ValueError(f"evoattn: {', '.join(named)} apply to float8_e4m3fn inputs; q is {q.dtype}")
        return None
    groups = (k.shape[0], k.shape[1] if layout == "bhsd" else k.shape[2])
    parts = []
    for name, d in given:
        if d is None or isinstance(d, (int, float)):
            value = 1.0 if d is None else float(d)
            if not (value > 0 and value < float("inf")):
                raise ValueError(f"evoattn: {name}={d!r}: a descale must be a positive finite number")
            parts.append(torch.full(groups, value, dtype=torch.float32, device=q.device))
            continue
        if not isinstance(d, torch.Tensor):
            raise TypeError(f"evoattn: {name} must be a number or a torch.Tensor, got {type(d).__name__}")
        if d.device != q.device:
            raise ValueError(f"evoattn: {name} is on {d.device} but q is on {q.device}")
        try:
            parts.append(d.to(torch.float32).expand(groups))
        except RuntimeError:
            raise ValueError(
                f"evoattn: {name} has shape {list(d.shape)}; descales are [B, Hkv] = {list(groups)} or broadcast to it"
            ) from None
    return torch.stack(parts)


def lse_shape(q: Any, layout: str) -> Tuple[int, int, int]:
    """(B, H, Sq) of q given in `layout`'s axis order: the LSE output's shape."""
    return (q.shape[0], q.shape[1], q.shape[2]) if layout == "bhsd" else (q.shape[0], q.shape[2], q.shape[1])


def _prepare(lib: Any, q: Any, k: Any, v: Any, o: Any, layout: str, causal: str, scale: Optional[float],
             with_lse: bool, impl: str, config: Optional[str]) -> Any:
    """The library's description of a call on these tensors (every check that needs no address)."""
    return lib.prepare(layout, (q.shape, q.stride()), (k.shape, k.stride()), (v.shape, v.stride()),
                       (o.shape, o.stride()), (_dtype(q), _dtype(k), _dtype(v), _dtype(o)), causal, scale,
                       with_lse, impl, config)


def _check_tensors(torch: Any, named: Tuple[Tuple[str, Any], ...]) -> int:
    """The CUDA device index all the tensors are on; TypeError or ValueError otherwise."""
    device = None
    for name, t in named:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"evoattn: {name} must be a torch.Tensor, got {type(t).__name__}")
        index = t.get_device()
        if index < 0:
            raise ValueError(f"evoattn: {name} is on {t.device}; evoattn runs on CUDA tensors")
        if device is None:
            device = index
        elif index != device:
            raise ValueError(f"evoattn: {name} is on cuda:{index} but q is on cuda:{device}; put all tensors on one GPU")
    return device


def forward(
    q: Any,
    k: Any,
    v: Any,
    layout: str,
    causal: str,
    scale: Optional[float],
    return_lse: bool,
    impl: str,
    config: Optional[str],
    out: Any = None,
    descale: Any = None,
) -> Tuple[Any, Any]:
    """One launch on PyTorch's current stream of the tensors' device: (o, lse or None).
    `descale` is E4M3 inputs' `[3, B, Hkv]` float32 descales (`descale_buffer`)."""
    torch = _torch or _setup()
    tensor = torch.Tensor
    if out is None and type(q) is tensor and type(k) is tensor and type(v) is tensor:
        device = q.get_device()  # k's and v's devices are checked in Rust, from their exports
        if device < 0:
            device = _check_tensors(torch, (("q", q), ("k", k), ("v", v)))
    else:
        named = (("q", q), ("k", k), ("v", v)) if out is None else (("q", q), ("k", k), ("v", v), ("out", out))
        device = _check_tensors(torch, named)
    if out is None:
        out = out_like(q)
    lse = None
    if return_lse:
        lse = torch.empty(lse_shape(q, layout), dtype=torch.float32, device=q.device)
    lib = _libraries.get(device) or library(device)
    # Each tensor crosses as one DLPack export (address, device, dtype, sizes, strides): cheaper
    # than reading those attributes here; Rust describes the call and launches it.
    if descale is None:
        lib.call(_current_stream(device), _to_dlpack(q), _to_dlpack(k), _to_dlpack(v), _to_dlpack(out),
                 None if lse is None else lse.data_ptr(), layout, causal, scale, return_lse, impl, config)
        return out, lse
    if not (is_fp8(q) and is_fp8(k) and is_fp8(v)):
        raise TypeError(f"evoattn: descales come with float8_e4m3fn q, k and v; got {q.dtype}, {k.dtype}, {v.dtype}")
    # DLPack 0.x has no float8 code: E4M3 tensors cross as uint8 views of the same bytes.
    u8 = torch.uint8
    lib.call(_current_stream(device), _to_dlpack(q.view(u8)), _to_dlpack(k.view(u8)), _to_dlpack(v.view(u8)),
             _to_dlpack(out), None if lse is None else lse.data_ptr(), layout, causal, scale, return_lse, impl,
             config, descale.data_ptr())
    return out, lse


def _strides_kept(torch: Any, t: Any) -> Any:
    """`t`, or a dense copy where `torch.empty_like` would not keep its strides (an expanded or
    overlapping view): a gradient is allocated like its tensor and must match its layout."""
    return t if torch.empty_like(t).stride() == t.stride() else t.contiguous()


def grad_like(t: Any) -> Any:
    """The gradient `backward` allocates for `t`: its strides where empty_like keeps them."""
    torch = _torch or _setup()
    return torch.empty_like(_strides_kept(torch, t))


def backward(q: Any, k: Any, v: Any, o: Any, lse: Any, d_o: Any, layout: str, causal: str,
             scale: Optional[float]) -> Tuple[Any, Any, Any]:
    """The gradients (dq, dk, dv) of one forward call, on PyTorch's current stream of its
    device: q, k, v and its o and lse (`[B, H, Sq]` float32), d_o the loss's gradient of o.
    Each gradient is allocated like its tensor (q's strides where empty_like keeps them)."""
    torch = _torch or _setup()
    q, k, v, o = (_strides_kept(torch, t) for t in (q, k, v, o))
    if d_o.stride() != o.stride() or d_o.dtype != o.dtype:
        # autograd's gradient of a sum is an expanded view; the kernel reads dO laid out as o.
        d_o = torch.empty_like(o).copy_(d_o)
    lse = lse.contiguous()
    dq, dk, dv = (torch.empty_like(t) for t in (q, k, v))
    device = q.get_device()
    lib = _libraries.get(device) or library(device)
    lib.backward(_current_stream(device), _to_dlpack(q), _to_dlpack(k), _to_dlpack(v), _to_dlpack(o),
                 _to_dlpack(d_o), lse.data_ptr(), _to_dlpack(dq), _to_dlpack(dk), _to_dlpack(dv), layout, causal,
                 scale)
    return dq, dk, dv


def kernel(q: Any, k: Any, v: Any, *, causal: Causal = False, layout: str = "bhsd", impl: str = "auto",
           config: Optional[str] = None, out_dtype: Any = None) -> str:
    """The kernel (name with its levers) evoattn.attention would launch for these tensors (and
    `out_dtype`, as `attention` takes it)."""
    torch = _torch or _setup()
    device = _check_tensors(torch, (("q", q), ("k", k), ("v", v)))
    lib = library(device)
    o = out_like(q) if out_dtype is None else out_of_dtype(q, None, out_dtype)
    call = _prepare(lib, q, k, v, o, layout, causal_name(causal, "top-left"), None, False, impl, config)
    return lib.kernel(call)


def refusal(q: Any, k: Any, v: Any, *, causal: Causal = False, scale: Optional[float] = None) -> Optional[str]:
    """None when evoattn runs this SDPA-layout call as given, else why not (the message of the
    ValueError or TypeError a call would raise): what evoattn.torch's SDPA route asks."""
    torch = _torch or _setup()
    device = _check_tensors(torch, (("q", q), ("k", k), ("v", v)))
    lib = library(device)
    try:
        call = _prepare(lib, q, k, v, out_like(q), "bhsd", causal_name(causal, "top-left"), scale, False, "auto", None)
    except (ValueError, TypeError) as e:
        return str(e)
    return lib.refusal(call)
