"""Raw launches of a CUBIN's kernel through the CUDA driver API (cuda-bindings), on PyTorch's
context and streams, for `time_kernel`: evoattn's kernels timed with PyTorch's events, so the
Rust timer can be checked against them on the very same launches."""

from __future__ import annotations

import ctypes
from types import TracebackType
from typing import Any

from cuda.bindings import driver as cu

# Kernels may use this much dynamic shared memory without opting in (cuFuncSetAttribute).
DEFAULT_DYNAMIC_SMEM = 48 * 1024


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
        self, kernel: str, grid: tuple[int, int, int], block: tuple[int, int, int], smem: int, params: bytes
    ) -> Launcher:
        function = check(cu.cuModuleGetFunction(self.handle, kernel.encode()), "cuModuleGetFunction")
        if smem > DEFAULT_DYNAMIC_SMEM:
            attribute = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            check(cu.cuFuncSetAttribute(function, attribute, smem), "cuFuncSetAttribute")
        return Launcher(function, grid, block, smem, params)


class Launcher:
    """One kernel with fixed launch dimensions and parameter bytes, launched on a given stream."""

    def __init__(
        self, function: Any, grid: tuple[int, int, int], block: tuple[int, int, int], smem: int, params: bytes
    ):
        self.function, self.grid, self.block, self.smem = function, grid, block, smem
        # The kernel takes one struct by value: kernelParams is an array of one pointer to its
        # bytes, from which the driver copies the parameter at launch (and at graph capture).
        self.params = ctypes.create_string_buffer(params, len(params))
        self.args = (ctypes.c_void_p * 1)(ctypes.addressof(self.params))

    def __call__(self, stream: int) -> None:
        no_extra = 0
        check(
            cu.cuLaunchKernel(
                self.function, *self.grid, *self.block, self.smem, stream, ctypes.addressof(self.args), no_extra
            ),
            "cuLaunchKernel",
        )
