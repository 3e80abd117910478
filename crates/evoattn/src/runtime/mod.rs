//! The run-time layer: finding and loading the CUDA libraries (NVRTC, cuBLAS, cuTENSOR), compiling to
//! CUBIN, the compiler's resource report and the gate on it, the on-disk CUBIN cache, and the
//! driver (context, module, launch).
//! All `unsafe` in the crate lives here, each block with a `# Safety` note.

pub mod backward;
pub mod cache;
pub mod compile;
pub mod cubin;
pub mod cublas;
pub mod cublaslt;
pub mod culib;
pub mod cutensor;
pub mod device;
pub mod dlpack;
pub mod launch;
pub mod library;
pub mod nvml;
pub mod nvrtc;
pub mod resources;
pub mod scratch;
pub mod tma;
