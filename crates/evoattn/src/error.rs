//! Typed errors. Every bad input is named before any launch; environment problems (no GPU,
//! no driver, no NVRTC or cuBLAS) are one sentence a user can act on.

use crate::problem::TensorName;
use crate::runtime::nvrtc::CompileFailure;
use thiserror::Error;

/// A problem description that no kernel may be launched on.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum ProblemError {
    #[error("head dim D={d} is not supported: expected {expected}")]
    UnsupportedHeadDim { d: usize, expected: String },
    #[error("number of KV heads ({hkv}) must be at least 1 and divide the number of query heads ({h})")]
    HeadsNotDivisible { h: usize, hkv: usize },
    #[error("scale {0} must be finite and non-zero")]
    BadScale(f32),
    #[error(
        "tensor {tensor}: innermost (head-dim) stride is {stride}; it must be 1 (with E4M3 inputs V may instead be \
         keys-contiguous, [B, Hkv, D, Sk]: a seq stride of 1)"
    )]
    NonUnitInnerStride { tensor: TensorName, stride: usize },
    #[error(
        "tensor {tensor}: {axis} stride {stride} is not a multiple of {elems} elements (16-byte rows are required)"
    )]
    StrideNotAligned { tensor: TensorName, axis: &'static str, stride: usize, elems: usize },
    #[error("{axis}={size} is too large: the kernels take sizes up to 2^31-1")]
    SizeTooLarge { axis: &'static str, size: usize },
    /// `extent` is `None` when it does not even fit a `usize`.
    #[error("tensor {tensor}: spans {}, over the 2^31-1 that 32-bit indexing allows", spans(.extent))]
    IndexOverflow { tensor: TensorName, extent: Option<usize> },
    #[error("tensor {tensor}: shape {dims:?} holds more elements than 64-bit arithmetic counts")]
    TooManyElements { tensor: TensorName, dims: Vec<usize> },
    #[error("tensor {tensor}: expected rank 4 [{expected}], got shape {got:?}")]
    WrongRank { tensor: TensorName, expected: &'static str, got: Vec<usize> },
    #[error("tensor {tensor}: expected shape {expected:?}, got {got:?}")]
    ShapeMismatch { tensor: TensorName, expected: Vec<usize>, got: Vec<usize> },
    /// `expected` says what the dtype should match: "q's bf16", or "bf16, the output dtype of
    /// e4m3 inputs" for o.
    #[error("tensor {tensor}: dtype {got} does not match {expected}")]
    DtypeMismatch { tensor: TensorName, expected: String, got: String },
    #[error("tensor {tensor}: dtype {got} is not supported (expected f16, bf16 or e4m3)")]
    UnsupportedDtype { tensor: TensorName, got: String },
    #[error("tensor {tensor}: strides {strides:?} make two of its elements share an address; an output must not overlap itself")]
    SelfOverlap { tensor: TensorName, strides: crate::problem::Strides },
    #[error("tensor {tensor}: buffer holds {have} elements, the problem needs {need}")]
    BufferTooSmall { tensor: TensorName, need: usize, have: usize },
    #[error("tensor {tensor}: device address {addr:#x} is not 16-byte aligned")]
    Misaligned { tensor: TensorName, addr: u64 },
    #[error("tensor {tensor}: a buffer of {len} elements at {addr:#x} runs past the end of the address space")]
    PastAddressSpace { tensor: TensorName, addr: u64, len: usize },
    #[error("output {out} overlaps input {input} in device memory")]
    Overlap { out: TensorName, input: TensorName },
}

/// An extent in words: its count, or that it is past counting.
fn spans(extent: &Option<usize>) -> String {
    match extent {
        Some(n) => format!("{n} elements"),
        None => "more elements than 64-bit arithmetic counts".into(),
    }
}

/// Everything that can go wrong in the library.
#[derive(Debug, Error)]
pub enum Error {
    #[error(transparent)]
    Problem(#[from] ProblemError),
    #[error("implementation '{imp}' cannot run this problem: {reason}")]
    Unsupported { imp: String, reason: String },
    #[error("no CUDA driver found (libcuda.so.1 could not be loaded): install the NVIDIA driver, or run on a machine with an NVIDIA GPU")]
    NoDriver,
    #[error("no NVIDIA GPU is visible: {0}")]
    NoGpu(String),
    #[error("{0}")]
    NoNvrtc(String),
    /// cuBLAS or cuBLASLt is missing or unusable: one sentence saying what was searched and
    /// how to install it.
    #[error("{0}")]
    NoCublas(String),
    /// cuTENSOR (the `gemm=cutensor` lever's library) is missing or unusable: one sentence
    /// saying what was searched and how to install it.
    #[error("{0}")]
    NoCutensor(String),
    #[error("CUDA call {call} failed: {detail}")]
    Driver { call: &'static str, detail: String },
    #[error("{0}")]
    Compile(Box<CompileFailure>),
    #[error("kernel {kernel} failed the resource gate for {arch}: {reason}")]
    ResourceGate { kernel: String, arch: String, reason: String },
    #[error("kernel cache at {path}: {source}")]
    Cache { path: String, source: std::io::Error },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Wraps a cudarc driver error with the call that produced it.
    pub fn driver(call: &'static str, err: impl std::fmt::Display) -> Self {
        Error::Driver { call, detail: err.to_string() }
    }

    /// True for errors that mean "this machine lacks what the call needs" (exit 2 in the CLI):
    /// a GPU, the driver, NVRTC or cuBLAS.
    pub fn is_environment(&self) -> bool {
        matches!(
            self,
            Error::NoDriver | Error::NoGpu(_) | Error::NoNvrtc(_) | Error::NoCublas(_) | Error::NoCutensor(_)
        )
    }
}
