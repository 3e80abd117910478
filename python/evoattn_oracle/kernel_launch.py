"""Raw launches of a CUBIN's kernel through the CUDA driver API (cuda-bindings), on PyTorch's
context and streams, for `time_kernel`: evoattn's kernels timed by outside harnesses, so the
Rust timer can be checked against them on the very same launches. TMA kernels also take tensor
maps, encoded here over the oracle's tensors exactly as evoattn says (`protocol.TensorMap`)."""

from __future__ import annotations

import ctypes
import functools
from types import TracebackType
from typing import Any

from cuda.bindings import driver as cu

from .protocol import TensorMap

# Kernels may use this much dynamic shared memory without opting in (cuFuncSetAttribute).
DEFAULT_DYNAMIC_SMEM = 48 * 1024
# A CUtensorMap: 128 opaque bytes, 64-byte aligned where cuTensorMapEncodeTiled writes it.
TENSOR_MAP_BYTES = 128
TENSOR_MAP_ALIGN = 64


def check(result: Any, call: str) -> Any:
    """The value of a cuda-bindings call that returns (CUresult, value?); raises on failure."""
    err, *values = result
    if err != cu.CUresult.CUDA_SUCCESS:
        _, text = cu.cuGetErrorString(err)
        detail = text.decode() if isinstance(text, bytes) else str(text)
        raise RuntimeError(f"{call} failed: {err.name}: {detail}")
    return values[0] if values else None


def driver_version() -> str:
    """The CUDA version the driver supports, e.g. "13.0"."""
    version = check(cu.cuDriverGetVersion(), "cuDriverGetVersion")
    return f"{version // 1000}.{version % 1000 // 10}"


class Module:
    """A loaded CUBIN (or PTX) image; unloaded on exit from its `with` block."""

    def __init__(self, image: bytes):
        if not int(check(cu.cuCtxGetCurrent(), "cuCtxGetCurrent")):
            raise RuntimeError("no CUDA context is current: PyTorch has not initialised the GPU")
        self.handle = check(cu.cuModuleLoadData(image), "cuModuleLoadData")

    def __enter__(self) -> Module:
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None) -> None:
        check(cu.cuModuleUnload(self.handle), "cuModuleUnload")

    def launcher(
        self,
        kernel: str,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        smem: int,
        params: bytes,
        maps: list[EncodedMap],
    ) -> Launcher:
        function = check(cu.cuModuleGetFunction(self.handle, kernel.encode()), "cuModuleGetFunction")
        if smem > DEFAULT_DYNAMIC_SMEM:
            attribute = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            check(cu.cuFuncSetAttribute(function, attribute, smem), "cuFuncSetAttribute")
        return Launcher(function, grid, block, smem, params, maps)


class EncodedMap:
    """A tensor map encoded over a device address, in host memory aligned as the driver wants."""

    def __init__(self, spec: TensorMap, address: int):
        self.storage = ctypes.create_string_buffer(TENSOR_MAP_BYTES + TENSOR_MAP_ALIGN)
        start = ctypes.addressof(self.storage)
        self.address = start + (-start % TENSOR_MAP_ALIGN)
        u64s, u32s = ctypes.c_uint64 * len(spec.dims), ctypes.c_uint32 * len(spec.dims)
        result = _encode_tiled()(
            self.address,
            spec.data_type,
            len(spec.dims),
            address,
            u64s(*spec.dims),
            (ctypes.c_uint64 * len(spec.strides_bytes))(*spec.strides_bytes),
            u32s(*spec.box_dims),
            u32s(*spec.element_strides),
            spec.interleave,
            spec.swizzle,
            spec.l2_promotion,
            spec.oob_fill,
        )
        check((cu.CUresult(result),), f"cuTensorMapEncodeTiled ({spec.tensor}: dims {spec.dims}, box {spec.box_dims})")


@functools.cache
def _encode_tiled() -> Any:
    """cuTensorMapEncodeTiled from the driver library PyTorch loaded, with its C signature
    (looked up once)."""
    encode = ctypes.CDLL("libcuda.so.1").cuTensorMapEncodeTiled
    u64p, u32p, enum = ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint32), ctypes.c_int
    encode.argtypes = [ctypes.c_void_p, enum, ctypes.c_uint32, ctypes.c_void_p, u64p, u64p, u32p, u32p]
    encode.argtypes += [enum] * 4
    encode.restype = ctypes.c_int
    return encode


class Launcher:
    """One kernel with fixed launch dimensions, parameter bytes and tensor maps, launched on a
    given stream."""

    def __init__(
        self,
        function: Any,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        smem: int,
        params: bytes,
        maps: list[EncodedMap],
    ):
        self.function, self.grid, self.block, self.smem = function, grid, block, smem
        # The kernel takes one struct by value, then each tensor map by value: kernelParams is
        # an array of pointers to their bytes, which the driver copies at launch (and at graph
        # capture).
        self.params = ctypes.create_string_buffer(params, len(params))
        self.maps = maps
        pointers = [ctypes.addressof(self.params)] + [m.address for m in maps]
        self.args = (ctypes.c_void_p * len(pointers))(*pointers)

    def __call__(self, stream: int) -> None:
        no_extra = 0
        check(
            cu.cuLaunchKernel(
                self.function, *self.grid, *self.block, self.smem, stream, ctypes.addressof(self.args), no_extra
            ),
            "cuLaunchKernel",
        )
